"""dpzero-dimension on one GPU: every (task, mode) of the sweep in a process of its own, side by side, then one result.

The sweep (``dpnc reproduce dpzero-dimension``, docs/dpzero.md "Against the trained dimension") on the CPU fits only
T = 40-150 steps. Here each (task, mode) part runs the reproduction's own code (``run_experiment`` with
``device="cuda"``: recipe selection on held-out training rows, then zero-shot, MeZO and DPZero at every ε per seed)
in its own process, all parts at once on the one GPU; T is chosen from a probe so that the slowest part ends within
the budget. When the parts are done (or the budget is spent: an unfinished part is stopped and left out, and said
so), their rows are judged together by the experiment's own claims and written as one result (``write``: summary.md,
result.json, tables, figure) under ``--out``; each part's own result stays under ``--out/parts``.

    python benchmarks/gpu/dimension.py --out OUT --data-dir DATA [--budget-seconds 400]     # on the GPU
    python benchmarks/gpu/dimension.py --out OUT --data-dir DATA --cpu-tiny                  # CPU, a smoke run

The probe: a few MeZO steps of the costliest mode's trainer on SST-2 (its training split: this is a benchmark of
public data; the step times are not published as results, only the T they lead to). ``--share`` is the assumed
slow-down of one part when all run at once (the GPU is shared).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from dpnc_reproduce import protocol  # noqa: E402
from dpnc_reproduce.dpzero_dimension.experiment import EXPERIMENT  # noqa: E402
from dpnc_reproduce.dpzero_dimension.run import FULL, MODES, DimConfig  # noqa: E402

COSTLIEST = ("all", "lora", "bias", "top-2", "top-1", "head")   # per step, full forwards first


def part_config(args: argparse.Namespace, steps: int, task: str, mode: str) -> DimConfig:
    return dataclasses.replace(
        FULL, data_dir=str(args.data_dir), tasks=(task,), modes=(mode,), seeds=tuple(args.seeds), steps=steps,
        batch_size=args.batch_size, device=args.device, eval_examples=args.eval_examples,
        fo_modes=tuple(m for m in args.fo_modes if m == mode), fo_steps=args.fo_steps, max_length=args.max_length,
        clips=tuple(args.clips))


def runs_per_part(config: DimConfig) -> int:
    """Trainer runs of one part: the recipe candidates (MeZO per lr, DPZero per lr × C), then per seed MeZO and
    DPZero at every ε (zero-shot only evaluates)."""
    mode = config.modes[0]
    grid = EXPERIMENT.runner.candidates(config, mode)
    return len({c["lr"] for c in grid}) + len(grid) + len(config.seeds) * (1 + len(config.epsilons))


def probe(args: argparse.Namespace) -> float:
    """Median seconds per MeZO step of the costliest asked mode (SST-2, B, the device), after warm-up steps."""
    from dpnc.lm.train import FinetuneConfig, Trainer

    mode = next(m for m in COSTLIEST if m in args.modes)
    train, top_k = MODES[mode]
    with tempfile.TemporaryDirectory(prefix="dpnc-probe-") as tmp:
        config = FinetuneConfig(task="SST-2", data_dir=str(args.data_dir), method="mezo", train=train, top_k=top_k,
                                steps=args.probe_steps, batch_size=args.batch_size, lr=1e-9,
                                eval_examples=args.batch_size, max_length=args.max_length, device=args.device,
                                out=str(Path(tmp) / "run"), progress=False, log_private_stats=True)
        trainer = Trainer(config)
        trainer.run()
    seconds = [r.seconds for r in trainer.history if r.seconds is not None][3:]
    return statistics.median(seconds)


def run_part(args: argparse.Namespace) -> None:
    """One (task, mode): the reproduction's run of the config the sweep wrote, under --out (this process is one
    part)."""
    config = protocol.from_record(EXPERIMENT.Config, json.loads(args.config.read_text()))
    config = EXPERIMENT.bind_output(config, args.out)
    result = protocol.run_experiment(EXPERIMENT, config, progress=False, workers=1, out=args.out)
    protocol.write(result, args.out, f"benchmarks/gpu/dimension.py part {config.tasks[0]} {config.modes[0]}")


def merge(parts: list[Path], args: argparse.Namespace, steps: int, seconds: float, note: str) -> list[Path]:
    """The finished parts' rows judged together (the experiment's claims on the whole sweep) and written."""
    results = [protocol.read(EXPERIMENT, p / "result.json") for p in parts]
    tasks = tuple(t for t in args.tasks if any(r.config.tasks == (t,) for r in results))
    modes = tuple(m for m in args.modes if any(r.config.modes == (m,) for r in results))
    config = dataclasses.replace(results[0].config, tasks=tasks, modes=modes, runs_dir=None,
                                 fo_modes=tuple(m for m in args.fo_modes if m in modes))
    rows = tuple(row for r in results for row in r.rows)
    result = protocol.Result(EXPERIMENT, config, rows, tuple(EXPERIMENT.claims(rows, config)), seconds,
                             len(parts), results[0].machine, tuple(EXPERIMENT.declare(config)))
    command = "python benchmarks/gpu/dimension.py " + " ".join(args.argv)
    return protocol.write(result, args.out, command, note)


def gpu_name(device: str) -> str:
    return torch.cuda.get_device_name() if device == "cuda" and torch.cuda.is_available() else "CPU"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.command == "part":
        run_part(args)
        return 0
    start = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    log = {"device": gpu_name(args.device), "torch": torch.__version__, "args": args.argv}
    if args.steps is None:
        per_step = probe(args)
        runs = max(runs_per_part(part_config(args, 1, t, m)) for t in args.tasks for m in args.modes)
        left = args.budget_seconds - (time.monotonic() - start)
        steps = int(args.fill * left / (runs * per_step * args.share))
        steps = min(args.max_steps, max(args.min_steps, steps // 10 * 10))
        log.update(probe_seconds_per_step=per_step, runs_per_part=runs, chosen_steps=steps)
    else:
        steps = args.steps
    print(f"dimension.py on {log['device']}: T = {steps} for every run ({json.dumps(log)})", flush=True)
    deadline = start + args.budget_seconds
    procs = {}
    for task in args.tasks:
        for mode in args.modes:
            out = args.out / "parts" / f"{task}-{mode}"
            out.mkdir(parents=True, exist_ok=True)
            (out / "config.json").write_text(json.dumps(dataclasses.asdict(part_config(args, steps, task, mode))))
            cmd = [sys.executable, __file__, "part", "--config", str(out / "config.json"), "--out", str(out)]
            procs[out] = subprocess.Popen(cmd, stdout=(out / "part.log").open("w"), stderr=subprocess.STDOUT)
    while any(p.poll() is None for p in procs.values()) and time.monotonic() < deadline:
        time.sleep(1)
    stopped = [out.name for out, p in procs.items() if p.poll() is None]
    for p in procs.values():
        if p.poll() is None:
            p.kill()
    done = [out for out, p in procs.items() if p.wait() == 0 and (out / "result.json").is_file()
            and json.loads((out / "result.json").read_text()).get("rows")]
    failed = [out.name for out in procs if out not in done and out.name not in stopped]
    log.update(finished=[o.name for o in done], stopped_at_budget=stopped, failed=failed,
               seconds=time.monotonic() - start)
    (args.out / "dimension.json").write_text(json.dumps(log, indent=1))
    print(json.dumps(log, indent=1), flush=True)
    if not done:
        return 1
    note = (f"Device: {log['device']}; all (task, mode) parts ran side by side, one process each; T = {steps} "
            + (f"(chosen by a probe: {log['probe_seconds_per_step'] * 1000:.0f} ms per MeZO step of the costliest "
               f"mode alone, {log['runs_per_part']} runs per part, assumed slow-down {args.share:g} when shared)"
               if "chosen_steps" in log else "(given)")
            + (f". Stopped at the budget and left out: {', '.join(stopped)}" if stopped else "")
            + (f". Failed: {', '.join(failed)}" if failed else "") + ".")
    merge(done, args, steps, time.monotonic() - start, note)
    return 0 if not (stopped or failed) else 2


def parse(argv: list[str] | None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", nargs="?", default="sweep", choices=("sweep", "part"), help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, required=True, help="folder of the merged result (parts under parts/)")
    p.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data", help="LM-BFF data folder")
    p.add_argument("--tasks", type=lambda s: s.split(","), default=["SST-2", "TREC"])
    p.add_argument("--modes", type=lambda s: s.split(","), default=list(MODES))
    p.add_argument("--seeds", type=lambda s: [int(v) for v in s.split(",")], default=[42, 13, 21])
    p.add_argument("--batch-size", type=int, default=64, help="B (the paper's 64)")
    p.add_argument("--eval-examples", type=int, default=None, help="test examples (default: the whole test split)")
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--fo-modes", type=lambda s: [m for m in s.split(",") if m], default=[],
                   help="modes with DP-AdamW beside DPZero (its step time and peak GPU memory)")
    p.add_argument("--fo-steps", type=int, default=20, help="DP-AdamW steps")
    p.add_argument("--clips", type=lambda s: [float(v) for v in s.split(",") if v], default=[],
                   help="DPZero's candidate C for every mode instead of the sweep's GRIDS (e.g. 2,20,200)")
    p.add_argument("--steps", type=int, help="T of every run (default: from the probe and the budget)")
    p.add_argument("--budget-seconds", type=float, default=400.0, help="the whole run, probe included")
    p.add_argument("--fill", type=float, default=0.5, help="part of the budget the slowest part is planned to use")
    p.add_argument("--share", type=float, default=3.0, help="assumed slow-down of a part when all run at once")
    p.add_argument("--min-steps", type=int, default=50)
    p.add_argument("--max-steps", type=int, default=5000)
    p.add_argument("--probe-steps", type=int, default=12)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--cpu-tiny", action="store_true", help="CPU smoke run: SST-2, head, one seed, T = 6 (the test's)")
    p.add_argument("--config", type=Path, help=argparse.SUPPRESS)   # a part's DimConfig, written by the sweep
    args = p.parse_args(argv)
    if args.cpu_tiny:
        args.device, args.tasks, args.modes, args.seeds = "cpu", ["SST-2"], ["head"], [42]
        args.batch_size, args.eval_examples, args.max_length = 8, 16, 32
        args.steps = args.steps or 6
    args.argv = argv
    return args


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
