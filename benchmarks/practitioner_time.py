"""Equal wall time for the practitioner's table: each method's seconds per step and peak memory, in one run.

Each method of :data:`dpnc_reproduce.practitioner.CONFIGS` trains ``--steps`` steps (ε = 6, seed 130, folder 13,
1 thread) through the reproduction's trainer run, in a subprocess of its own (its peak RSS, ``ru_maxrss``, is that
process's: model, caches and steps). The baseline is DPZero on the top 2 layers in the same run: each first-order
method gets T = 200 · (DPZero's median seconds per step) / (its own), the decisive recipe's wall time of steps.
Writes ``docs/results/practitioner/timing.json`` with the load average before and after. Run it on an otherwise
idle machine (pause other work); the step times are of training data, published as a benchmark, not private.

    python benchmarks/practitioner_time.py [--steps 24] [--data-dir ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from dpnc_reproduce.practitioner import CONFIGS, DPZERO, OUT


def one(name: str, steps: int, data_dir: str) -> dict:
    from dpnc_reproduce.practitioner import train

    with tempfile.TemporaryDirectory() as runs:
        row, _ = train(name, steps, 130, 13, data_dir, Path(runs))
    return {"seconds_per_step": row.median_seconds_per_step, "peak_rss_mib": row.peak_rss_mib}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--one", choices=tuple(CONFIGS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.steps, args.data_dir)))
        return
    load = os.getloadavg()[0]
    measured = {}
    for name in CONFIGS:
        command = [sys.executable, __file__, "--one", name, "--steps", str(args.steps)]
        env = os.environ | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        done = subprocess.run(
            command + ["--data-dir", args.data_dir],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        measured[name] = json.loads(done.stdout.strip().splitlines()[-1])
        print(name, measured[name], flush=True)
    base = measured[DPZERO]["seconds_per_step"]
    result = {
        "command": f"python benchmarks/practitioner_time.py --steps {args.steps}",
        "load_average_before_after": [load, os.getloadavg()[0]],
        "seconds_per_step": {k: v["seconds_per_step"] for k, v in measured.items()},
        "peak_rss_mib": {k: v["peak_rss_mib"] for k, v in measured.items()},
        "steps": {k: round(200 * base / v["seconds_per_step"]) for k, v in measured.items()},
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "timing.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
