"""The practitioner's answer: which private method learns most on TREC at ε = 6, at equal wall time?

DPZero on the top 2 layers (the decisive run's rows) against DP-AdamW on the top 2 layers, with
LoRA and on the head, each given T = 200 × DPZero's seconds per step ÷ its own; lr and C declared
from the literature, not tuned on TREC. ``--declare``, ``benchmarks/practitioner_time.py``,
``--run``, ``--judge``: docs/results/practitioner/README.md."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import time
import warnings
from pathlib import Path

import torch

from dpnc.privacy import quiet_dp_accounting
from dpnc_reproduce.claims import paired_accuracy_difference
from dpnc_reproduce.dpzero_decisive import FOLDERS, RECIPE, TASK, seeds
from dpnc_reproduce.dpzero_lm.run import LMConfig, LMGroup, LMTask, run_trainer

OUT = Path("docs/results/practitioner")
DECISIVE = Path("docs/results/dpzero-decisive")
SEEDS = 5
EPSILON = 6.0
FO_CLIP = 0.1
CONFIGS = {
    "dpzero-top2": {"method": "dpzero", "train": "top-k", "top_k": 2, "lr": RECIPE["lr"]},
    "dp-adamw-top2": {"method": "dp-adamw", "train": "top-k", "top_k": 2, "lr": 5e-4},
    "dp-adamw-lora": {"method": "dp-adamw", "train": "lora", "top_k": 1, "lr": 5e-4},
    "dp-adamw-head": {"method": "dp-adamw", "train": "head", "top_k": 1, "lr": 1e-2},
}
DPZERO = "dpzero-top2"  # whose rows are the decisive run's (label dpzero-eps6)


def lm_config(name: str, steps: int, data_dir: str, runs_dir: Path) -> LMConfig:
    """The reproduction's run configuration of one method of :data:`CONFIGS` at ``steps`` steps."""
    c = CONFIGS[name]
    common = dict(
        data_dir=data_dir,
        tasks=(TASK,),
        recipes="trainer",
        seeds=FOLDERS,
        epsilons=(EPSILON,),
        threads=1,
        runs_dir=str(runs_dir),
        train=c["train"],
        top_k=c["top_k"],
        batch_size=RECIPE["batch_size"],
    )
    if c["method"] == "dpzero":
        return LMConfig(**common, lr=c["lr"], clip=RECIPE["clip"], steps=steps)
    return LMConfig(**common, fo_lr=c["lr"], fo_clip=FO_CLIP, fo_steps=steps)


def train(name: str, steps: int, seed: int, folder: int, data_dir: str, runs_dir: Path):
    """One run of ``name`` (ε = 6) on ``folder`` with training seed ``seed``: (its LMRow, the
    trainer)."""
    task = LMTask(TASK, seed, CONFIGS[name]["method"], EPSILON, data_seed=folder)
    config = lm_config(name, steps, data_dir, runs_dir)
    with warnings.catch_warnings(), quiet_dp_accounting():
        warnings.simplefilter("ignore")
        return run_trainer(
            config, task, LMGroup(TASK, folder, (task,)), runs_dir / f"{task.run}-{name}"
        )


def declaration() -> dict:
    return {
        "design": {
            "task": TASK,
            "seeds": [s for s, _ in seeds(SEEDS)],
            "epsilon": EPSILON,
            "delta": 1e-5,
            "batch_size": RECIPE["batch_size"],
            "configs": CONFIGS,
            "first_order_clip": FO_CLIP,
            "dpzero_rows": "the decisive run's dpzero-eps6 rows of the same seeds (T = 200)",
            "equal_wall_time": "T = 200 · (DPZero's median seconds per step) / (the method's), both from "
            "benchmarks/practitioner_time.py in one run on an otherwise idle machine (timing.json)",
            "test": "TREC test split (m = 500)",
        },
        "choices": "first-order lr and C declared from the literature (Li et al. 2022: DP-Adam with a small C; "
        "lr 5e-4), the head's the trainer's default (1e-2): none tuned on TREC",
        "statistic": "each method − DPZero top-2: paired_accuracy_difference (two-way ANOVA over the 5 seeds "
        "× 500 questions, Welch–Satterthwaite df); better / worse where the 95 % interval excludes 0, else "
        "no signal",
    }


def _done(out: Path) -> set[tuple[int, str]]:
    path = out / "rows.jsonl"
    rows = path.read_text().splitlines() if path.exists() else []
    return {(r["seed"], r["label"]) for r in map(json.loads, filter(str.strip, rows))}


def run(data_dir: str, out: Path, runs_dir: Path) -> None:
    """Every first-order (seed, method) not yet in ``out/rows.jsonl``, at its equal-wall-time T."""
    torch.set_num_threads(1)
    steps = json.loads((out / "timing.json").read_text())["steps"]
    done = _done(out)
    for seed, folder in seeds(SEEDS):
        for name in CONFIGS:
            if name == DPZERO or (seed, name) in done:
                continue
            start = time.perf_counter()
            row, trainer = train(name, steps[name], seed, folder, data_dir, runs_dir)
            record = dataclasses.asdict(row) | {
                "label": name,
                "folder": folder,
                "cell_seconds": time.perf_counter() - start,
            }
            with (out / "rows.jsonl").open("a") as f:
                f.write(json.dumps(record) + "\n")
            print(f"{seed} {name}: {row.accuracy:.1f} % test, T = {row.steps}", flush=True)
            del trainer
            gc.collect()


def judge(out: Path, decisive: Path = DECISIVE) -> dict:
    """Each method's accuracy and its difference to DPZero top-2 on the seeds every method has, with
    the timing."""
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines() if x.strip()]
    rows += [
        r | {"label": DPZERO}
        for r in map(json.loads, (decisive / "rows.jsonl").read_text().splitlines())
        if r["label"] == "dpzero-eps6"
    ]
    by = {(r["seed"], r["label"]): r for r in rows}
    full = [s for s, _ in seeds(SEEDS) if all((s, name) in by for name in CONFIGS)]
    timing = json.loads((out / "timing.json").read_text())
    table = {}
    for name in CONFIGS:
        bits = [[int(c) for c in by[s, name]["correct"]] for s in full]
        base = [[int(c) for c in by[s, DPZERO]["correct"]] for s in full]
        iv = paired_accuracy_difference(bits, base)
        read = "better" if iv.low > 0 else "worse" if iv.high < 0 else "no signal"
        table[name] = {
            "accuracy": sum(by[s, name]["accuracy"] for s in full) / max(len(full), 1),
            "minus_dpzero": None
            if name == DPZERO
            else f"{iv.estimate:+.1f} [{iv.low:+.1f}, {iv.high:+.1f}] points: {read}",
            "steps": timing["steps"][name],
            "seconds_per_step": timing["seconds_per_step"][name],
            "peak_rss_mib": timing["peak_rss_mib"][name],
            "epsilon": max(by[s, name]["epsilon_pld"] for s in full) if full else None,
        }
    zero = [r for r in map(json.loads, (decisive / "rows.jsonl").read_text().splitlines())]
    zero = {r["seed"]: r["accuracy"] for r in zero if r["label"] == "zero-shot"}
    return {
        "seeds": full,
        "zero_shot": sum(zero[s] for s in full) / max(len(full), 1),
        "table": table,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--declare", action="store_true", help="write declaration.json (before any run)"
    )
    parser.add_argument("--run", action="store_true", help="run the first-order rows not yet done")
    parser.add_argument("--judge", action="store_true", help="the table on the rows so far")
    parser.add_argument("--data-dir", help="the folder of the LM-BFF k-shot splits (with --run)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--runs-dir", type=Path, default=Path("/tmp/dpnc-practitioner-runs"))
    args = parser.parse_args()
    if args.run and args.data_dir is None:
        parser.error("--run needs --data-dir, the folder of the LM-BFF k-shot splits")
    if args.declare:
        args.out.mkdir(parents=True, exist_ok=True)
        text = json.dumps(declaration(), indent=1, ensure_ascii=False)
        (args.out / "declaration.json").write_text(text)
    if args.run:
        run(args.data_dir, args.out, args.runs_dir)
    if args.judge:
        print(json.dumps(judge(args.out), indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
