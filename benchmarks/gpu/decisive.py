"""The declared decisive DPZero run (docs/results/dpzero-decisive/declaration.json) on one GPU: TREC top-2 at the
headroom recipe (lr 2e-4, C = 50, B = 64, T = 200), 20 seeds (the five k-shot folders × 4 training seeds), zero-shot,
MeZO, DPZero ε = 6 and 2 and the clipped step with σ = 0, one (seed, method) cell after another, through the
project's own runner :mod:`dpnc_reproduce.dpzero_decisive` (its rows, its order: training seed j over every folder,
then j + 1, so a run stopped early holds balanced seeds) with every run on ``--device`` (cuda).

The design is 100 cells, 80 of them training runs of 200 steps: 16,000 zeroth-order steps. At ~50 ms a step that is
~800 s of steps, more than one call's 9 minutes; so the run is resumable across calls: ``--rows FILE`` starts from
the rows an earlier call returned (its ``rows.jsonl``), and a cell is started only while the time left
(``--budget-seconds``) holds the slowest cell measured so far (the first cell: the estimate from ``--step-seconds``).
Each call's rows are the runner's own lines, appended to ``$OUT/rows.jsonl`` (the earlier rows copied first), and
``decisive.json`` says what was done, what is left and the claims judged on the rows so far (interval first).

    python benchmarks/gpu/decisive.py --out $OUT --data-dir DATA [--rows earlier/rows.jsonl] [--plan]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from dpnc_reproduce import dpzero_decisive as decisive  # noqa: E402

DECLARATION = ROOT / "docs" / "results" / "dpzero-decisive" / "declaration.json"
TRAINED = ("mezo", "dpzero-eps6", "dpzero-eps2", "clip-only")  # the methods that take T steps (zero-shot: none)


def plan(step_seconds: float = 0.05, eval_seconds: float = 2.0) -> dict:
    """The design's cells and the time they take at ``step_seconds`` a step (``eval_seconds`` per cell for the test
    and dev evaluations)."""
    cells = [(seed, folder, m) for seed, folder in decisive.seeds() for m in decisive.METHODS]
    steps = sum(decisive.RECIPE["steps"] for *_, m in cells if m in TRAINED)
    seconds = steps * step_seconds + len(cells) * eval_seconds
    return {
        "seeds": len(decisive.seeds()),
        "methods": list(decisive.METHODS),
        "cells": len(cells),
        "steps": steps,
        "step_seconds": step_seconds,
        "estimated_seconds": round(seconds, 1),
        "calls_of_540_s": -(-int(seconds) // 540),
    }


def run(args: argparse.Namespace, runner=decisive.run, clock=time.monotonic) -> dict:
    """Cells one at a time (``runner(..., limit=1)``) while the budget holds the slowest cell so far."""
    args.out.mkdir(parents=True, exist_ok=True)
    rows = args.out / decisive.ROWS
    if args.rows is not None and Path(args.rows).resolve() != rows.resolve():
        shutil.copyfile(args.rows, rows)
    decisive.RECIPE = {**decisive.RECIPE, "device": args.device}  # every run on the GPU: LMConfig(device=...)
    start, slowest, cells = clock(), plan(args.step_seconds)["estimated_seconds"] / 100, 0
    while clock() - start + slowest < args.budget_seconds:
        before = clock()
        if runner(args.data_dir, args.out, args.runs_dir, limit=1) == 0:
            break  # every cell done
        cells += 1
        slowest = max(slowest, clock() - before)
    done = len(decisive._done(args.out))
    return {
        "device": args.device,
        "cells_this_call": cells,
        "cells_done": done,
        "cells_left": plan()["cells"] - done,
        "seconds": round(clock() - start, 1),
        "slowest_cell_seconds": round(slowest, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--runs-dir", type=Path, default=Path("/tmp/dpzero-decisive-runs"))
    parser.add_argument("--rows", default=None, help="rows.jsonl of an earlier call: resume from it")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--budget-seconds", type=float, default=480.0)
    parser.add_argument("--step-seconds", type=float, default=0.05, help="the first cell's estimate")
    parser.add_argument("--plan", action="store_true", help="print the design's size and time, run nothing")
    args = parser.parse_args(argv)
    report: dict = {"plan": plan(args.step_seconds)}
    if not args.plan:
        report["run"] = run(args)
        report["judged"] = decisive.judge(args.out) if (args.out / decisive.ROWS).exists() else None
        (args.out / "decisive.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
    print(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
