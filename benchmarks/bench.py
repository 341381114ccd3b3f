"""``make bench``: run the benchmarks, each as a subprocess, and gather their ratios into ONE table.

Every number in the table is a ratio of two timings taken in the same run of the same script (each script's own
baseline), read from the JSON it writes:

* ``zo_step.py``: a DPZero / MeZO step on a MiniLM-sized BERT against two forward passes and the reference MeZO;
* ``lm_step.py``: the same on the real MiniLM, and Opacus's DP-AdamW step against dpnc's DPZero step;
* ``first_order_step.py``: dpnc's first-order DP step against Opacus's best mode, on every model of its own (MLP;
  CNN plain, with GroupNorm and with ``padding='same'``; attention block; TransformerEncoderLayer; ConvTranspose
  decoder; packed-LSTM classifier; MiniLM), targets ≤ 1.0× on the MLP and ≤ 1.2× on the others; on MiniLM no
  target against Opacus, but the stock model's private step ≤ 1.3× a non-private step of the same model;
* ``distributed_zo.py`` at B = 64 and B = 256: the data-parallel DPZero step's speed-up from 1 to 2 processes
  (``cache_directions=True``), beside the forward passes' own, and their ratio (≥ 0.9);
* ``distributed_fo.py``: the data-parallel DP-AdamW step (``make_private`` on MiniLM, top 2 layers trained,
  B = 256) from 1 to 2 processes (≥ 1.8×), beside a non-private forward and backward's own, and their ratio (≥ 0.9).

The targets are benchmarks/verdict.py's (one definition).

Both forms run each script at its full sizes (the models and batches its docstring names; the scripts' own
``--quick`` smoke sizes are too small for a ratio to mean anything). The quick form (default) times fewer steps
and skips the peak-memory subprocesses: about a quarter of an hour on 2 cores. ``--full`` runs each script's full form
(its default steps and memory measurements: about half an hour). Writes ``benchmarks/results/bench[_full].md``
and ``.json`` with the 1-minute load average before and after each script, the command, the date and the commit.
Run it alone on the machine (``flock -x /tmp/dpnc-cpu.lock make bench``): other jobs move the timings.

    python benchmarks/bench.py [--full] [--out benchmarks/results/bench.md]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from distributed_fo import speedups as fo_speedups  # noqa: E402
from distributed_zo import speedups  # noqa: E402  (sibling scripts: the one computation of each ratio and target)
from verdict import (  # noqa: E402
    DATA_PARALLEL,
    FO_DATA_PARALLEL,
    FO_SPEEDUP,
    LM_STEP,
    first_order_ratios,
)

RESULTS = HERE / "results"


def runs(full: bool, tmp: Path) -> list[dict]:
    """The subprocesses: name, argv (after the interpreter) and the JSON file each writes. Both forms use the
    scripts' full sizes; the quick form times fewer steps and skips the memory subprocesses."""
    zo, lm, fo, dz = (
        ([], [], [], [])
        if full
        else (
            ["--no-memory", "--steps", "3"],
            # 8 rounds: with 3, one disturbed "2 forwards" moved DPZero / 2 forwards from ~1.13 to 0.96
            [
                "--no-memory",
                "--steps",
                "8",
                "--warmup",
                "1",
                "--skip",
                "DP-AdamW (torch.func)",
                "DP-AdamW (dpnc per layer)",
            ],
            ["--steps", "20", "--lm-steps", "3"],
            ["--steps", "5"],
        )
    )
    return [
        {
            "name": "zo_step",
            "argv": ["zo_step.py", *zo, "--out", str(tmp / "zo_step.md")],
            "json": tmp / "zo_step.json",
        },
        {
            "name": "lm_step",
            "argv": ["lm_step.py", *lm, "--out", str(tmp / "lm_step.md")],
            "json": tmp / "lm_step.json",
        },
        {
            "name": "first_order_step",
            "argv": ["first_order_step.py", *fo, "--out", str(tmp / "first_order_step.json")],
            "json": tmp / "first_order_step.json",
        },
        *(
            {
                "name": f"distributed_zo B={B}",
                "argv": ["distributed_zo.py", "--batch", str(B), *dz, "--out", str(tmp / f"dz{B}")],
                "json": tmp / f"dz{B}" / f"distributed_zo_b{B}_s32.json",
            }
            for B in (64, 256)
        ),
        {
            "name": "distributed_fo",
            "argv": [
                "distributed_fo.py",
                *(["--steps", "10"] if full else []),
                "--out",
                str(tmp / "dfo"),
            ],
            "json": tmp / "dfo" / "distributed_fo_b256.json",
        },
    ]


# --- reading each script's JSON: rows of (ratio, value, target) ----------------------------------------------


def _median_ratio(times: dict, a: str, b: str) -> float:
    return times[a]["median"] / times[b]["median"]


def ratios_of(name: str, data: dict) -> list[tuple[str, float, str]]:
    """The ratios one benchmark's JSON holds, with the target the issue sets where it sets one ("" otherwise)."""
    if name == "zo_step":
        t, c = data["time_ms"], data.get("config", {})
        size = f", B = {c.get('batch', '?')}, seq {c.get('seq', '?')}"
        return [
            ("dpnc DPZero / 2 forwards" + size, _median_ratio(t, "dpnc DPZero", "2 forwards"), ""),
            (
                "dpnc DPZero / reference MeZO" + size,
                _median_ratio(t, "dpnc DPZero", "reference MeZO"),
                "",
            ),
            (
                "dpnc MeZO / reference MeZO" + size,
                _median_ratio(t, "dpnc MeZO", "reference MeZO"),
                "",
            ),
            *(
                [
                    (
                        "dpnc DPZero / without the model-state check" + size,
                        _median_ratio(t, "dpnc DPZero", "dpnc DPZero (no state check)"),
                        "≤ 1.05",
                    )
                ]
                if "dpnc DPZero (no state check)" in t
                else []
            ),
        ]
    if name == "lm_step":
        r = data["ratios"]["time (medians)"]
        size = f", B = {data.get('config', {}).get('batch', '?')}, seq {data.get('data', {}).get('seq_len', '?')}"
        keys = (
            "dpnc DPZero / 2 forwards",
            "dpnc DPZero / dpnc MeZO",
            "dpnc DPZero (cached u) / 2 forwards",
            "dpnc DPZero / 2 forwards + 3 u passes",
            "2 forwards + 3 u passes / 2 forwards",
            "DP-AdamW (Opacus) / dpnc DPZero",
        )

        def target(key: str) -> str:
            bound, side = LM_STEP.get(("time (medians)", key), (None, None))
            return "" if bound is None else f"{'≤' if side == 'below' else '≥'} {bound:.2f}"

        return [(k + size, r[k], target(k)) for k in keys if k in r]
    if name == "first_order_step":
        return [
            (f"{name}, B = {row['batch']}", value, "" if bound is None else f"≤ {bound:g}")
            for row in data["rows"]
            for name, value, bound in first_order_ratios(row)
        ]
    if name.startswith("distributed_zo"):
        gained = speedups(sorted(data["runs"], key=lambda r: int(r["world"])))
        return [
            (
                "speed-up, 2 processes (cached directions) over the plain 1-process DPZero, medians",
                gained["cached"],
                "",
            ),
            ("speed-up of the forward passes alone, 2 processes over 1", gained["forwards"], ""),
            (
                "the step's speed-up / the forward passes' own",
                gained["ratio"],
                f"≥ {DATA_PARALLEL:g}",
            ),
        ]
    if name == "distributed_fo":
        gained = fo_speedups(data["runs"])
        size = f", MiniLM top 2 layers, B = {data.get('args', {}).get('batch', '?')}"
        return [
            (
                "speed-up, 2 processes over 1: DP-AdamW step (make_private)" + size,
                gained["step"],
                f"≥ {FO_SPEEDUP:g}",
            ),
            (
                "speed-up of a non-private forward+backward alone (same shares), 2 processes over 1"
                + size,
                gained["fb"],
                "",
            ),
            (
                "the step's speed-up / the forward+backward's own" + size,
                gained["ratio"],
                f"≥ {FO_DATA_PARALLEL:g}",
            ),
        ]
    raise ValueError(f"unknown benchmark {name!r}")


def met(value: float, target: str) -> str:
    if not target:
        return ""
    op, bound = target.split()
    return "yes" if (value <= float(bound) if op == "≤" else value >= float(bound)) else "NO"


def build_table(results: list[dict], meta: dict) -> str:
    """The markdown table: one line per ratio; ``results``: name, data (the JSON, or None), load before/after,
    seconds, error."""
    lines = [
        f"# make bench{' (full)' if meta['full'] else ' (quick)'}: dpnc's ratios to baselines timed in the "
        "same run",
        "",
        f"`{meta['command']}` on {meta['date']}, commit {meta['commit']}; 1-minute load average "
        f"{meta['load_before']:.2f} before, {meta['load_after']:.2f} after; {meta['seconds'] / 60:.1f} min.",
        "",
        "| benchmark | ratio | value | target | met in this run | load before → after | s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        load = f"{r['load_before']:.2f} → {r['load_after']:.2f}"
        if r.get("data") is None:
            lines.append(
                f"| {r['name']} | FAILED: {r.get('error', '')} | - | - | - | {load} | {r['seconds']:.0f} |"
            )
            continue
        for ratio, value, target in ratios_of(r["name"], r["data"]):
            lines.append(
                f"| {r['name']} | {ratio} | {value:.2f} | {target} | {met(value, target)} | {load} | "
                f"{r['seconds']:.0f} |"
            )
    lines += [
        "",
        "One run decides nothing: a target is judged over runs declared in advance, with a t interval, by "
        "`benchmarks/verdict.py` (`benchmarks/results/verdict_*.md`).",
    ]
    if not meta["full"]:
        lines += [
            "",
            "Quick form: the scripts' full sizes with fewer timed steps (zo_step 3, lm_step 8 without the "
            "torch.func and per-layer DP-AdamW modes, first_order_step 20 and MiniLM 3, distributed_zo 5, "
            "distributed_fo 4) and no memory measurements; "
            "`make bench FULL=1` for the full forms.",
        ]
    return "\n".join(lines) + "\n"


def commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=HERE,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=HERE,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return head + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--full", action="store_true", help="each script's full form (tens of minutes)")
    p.add_argument(
        "--out",
        type=Path,
        help="markdown output, the JSON beside it (default "
        "benchmarks/results/bench.md, --full bench_full.md)",
    )
    args = p.parse_args(argv)
    out = args.out or RESULTS / ("bench_full.md" if args.full else "bench.md")
    command = "make bench" + (" FULL=1" if args.full else "")
    start, load_before = time.perf_counter(), os.getloadavg()[0]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs(args.full, Path(tmp)):
            print(f"== {run['name']}: python benchmarks/{' '.join(run['argv'])}", flush=True)
            before, t0 = os.getloadavg()[0], time.perf_counter()
            proc = subprocess.run(
                [sys.executable, str(HERE / run["argv"][0]), *run["argv"][1:]], cwd=HERE.parent
            )
            entry = {
                "name": run["name"],
                "argv": run["argv"],
                "load_before": before,
                "load_after": os.getloadavg()[0],
                "seconds": time.perf_counter() - t0,
                "data": None,
            }
            if proc.returncode == 0 and run["json"].exists():
                entry["data"] = json.loads(run["json"].read_text())
            else:
                entry["error"] = f"exit {proc.returncode}"
            results.append(entry)
    meta = {
        "full": args.full,
        "command": command,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "seconds": time.perf_counter() - start,
    }
    table = build_table(results, meta)
    print(table)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table)
    rows = [
        {"benchmark": r["name"], "ratio": ratio, "value": value, "target": target}
        for r in results
        if r["data"] is not None
        for ratio, value, target in ratios_of(r["name"], r["data"])
    ]
    out.with_suffix(".json").write_text(
        json.dumps({**meta, "ratios": rows, "benchmarks": results}, indent=1, default=str) + "\n"
    )
    return 0 if all(r["data"] is not None for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
