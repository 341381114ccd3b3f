"""How close ``dpnc finetune``'s printed time estimate comes to the time the run then takes, on the docs' examples.

The trainer prints its estimate before the first step (:mod:`dpnc.lm.estimate`: the run's own step rehearsed on test
rows, the rest of the run counted from its public schedule). This script runs each example as a user would: the
page's python block writes the data into a fresh folder, then ``python -m dpnc.cli finetune ...`` runs there in a
subprocess (one torch thread, ``nice``, unbuffered output), and the time each output line arrives is read:

* ``measured``: from the estimate's line to the run's last line (the summary's ``wrote runs/...``): the steps and
  the run's end, what the estimate covers;
* ``to exit``: from the estimate's line to the process's exit (the interpreter's teardown added);
* ``ratio`` = estimate / measured (the target: within 2×, i.e. 0.5 to 2).

Examples (``--only`` picks some):

  quick-start-2     README "Quick start 2" as written: dp-adamw, head, 50 steps of B = 128
  own-data          docs/finetuning.md "Your own data" as written: dpzero, head, 391 steps of B = 64
  own-data-lora     that command with ``--method dp-adamw --train lora --steps 30``: compute-bound steps
  tickets-dpzero    quick start 2's command with ``--method dpzero --steps 1000``: many small steps, where the
                    fixed cost of a step (model checks, journal fsyncs, ε) is the run's time

The estimate is printed rounded (``~32 s``, ``~3.5 min``): the ratio is of the printed value.

    python benchmarks/finetune_estimate.py             # all, ~10 min on 2 cores: results/finetune_estimate.{md,json}
    python benchmarks/finetune_estimate.py --only own-data --out /tmp/estimate
    python benchmarks/finetune_estimate.py --before old.json   # an older commit's result shown below
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the docs' code blocks, as tests/suites/test_docs.py reads them
from tests.suites.test_docs import README, _blocks  # noqa: E402

OWN_DATA = ROOT / "docs" / "finetuning.md"
ESTIMATE = re.compile(r"estimated time: ~([0-9.]+) (s|min|h) for (\d+) steps")
UNIT = {"s": 1, "min": 60, "h": 3600}


def example(page: Path, section: str) -> tuple[str, list[str]]:
    """The python block that writes a section's data, and its ``dpnc finetune`` command."""
    blocks = [b for b in _blocks(page) if b.section.startswith(section)]
    python = next(b for b in blocks if b.language == "python")
    bash = next(b for b in blocks if b.language == "bash" and "dpnc finetune" in b.code)
    return python.code, shlex.split(bash.code.replace("\\\n", " "))


def changed(command: list[str], **options: str) -> list[str]:
    """``command`` with ``--name value`` options set (replaced where present, else added)."""
    command = list(command)
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if flag in command:
            command[command.index(flag) + 1] = value
        else:
            command += [flag, value]
    return command


def examples() -> dict[str, tuple[str, list[str]]]:
    quick = example(README, "Quick start 2")
    own = example(OWN_DATA, "Your own data")
    return {
        "quick-start-2": quick,
        "own-data": own,
        "own-data-lora": (own[0], changed(own[1], method="dp-adamw", train="lora", steps="30")),
        "tickets-dpzero": (quick[0], changed(quick[1], method="dpzero", steps="1000")),
    }


def run(name: str, python: str, command: list[str]) -> dict:
    """One example in a fresh folder: its data written, its command run and timed line by line."""
    assert command[:2] == ["dpnc", "finetune"], command
    with tempfile.TemporaryDirectory(prefix=f"estimate-{name}-") as folder:
        subprocess.run([sys.executable, "-c", python], cwd=folder, check=True)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
        argv = ["nice", sys.executable, "-m", "dpnc.cli", *command[1:], "--threads", "1"]
        load = os.getloadavg()[0]
        start = time.perf_counter()
        process = subprocess.Popen(
            argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        lines, buffer = [], b""
        while chunk := process.stdout.read1(65536):
            buffer += chunk
            *done, buffer = buffer.replace(b"\r", b"\n").split(b"\n")
            now = time.perf_counter() - start
            lines += [(now, line.decode(errors="replace").strip()) for line in done if line.strip()]
        code = process.wait()
        exit_at = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(
            f"{name} failed ({code}):\n" + "\n".join(text for _, text in lines[-20:])
        )
    at, text = next((at, text) for at, text in lines if ESTIMATE.search(text))
    value, unit, steps = ESTIMATE.search(text).groups()
    estimate = float(value) * UNIT[unit]
    done_at = next(at for at, text in reversed(lines) if text.startswith("wrote "))
    measured = done_at - at
    return {
        "example": name,
        "command": shlex.join(command),
        "steps": int(steps),
        "estimate_line": text,
        "estimate_s": estimate,
        "measured_s": round(measured, 2),
        "to_exit_s": round(exit_at - at, 2),
        "before_estimate_s": round(at, 2),
        "ratio": round(estimate / measured, 3),
        "ratio_to_exit": round(estimate / (exit_at - at), 3),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def table(rows: list[dict]) -> str:
    head = (
        "| example | steps | estimate | measured | ratio | to exit | ratio to exit | load before, after |\n"
        "|---|---|---|---|---|---|---|---|\n"
    )
    return head + "".join(
        f"| {r['example']} | {r['steps']} | {r['estimate_s']:.0f} s | {r['measured_s']:.1f} s | "
        f"{r['ratio']:.2f} | {r['to_exit_s']:.1f} s | {r['ratio_to_exit']:.2f} | "
        f"{r['load_before']}, {r['load_after']} |\n"
        for r in rows
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", choices=list(examples()), help="examples to run")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "finetune_estimate"))
    parser.add_argument(
        "--before", help="a result .json of this script for older code, shown below for comparison"
    )
    parser.add_argument("--commit", help="the code's commit (default: git's HEAD)")
    args = parser.parse_args()
    chosen = {k: v for k, v in examples().items() if not args.only or k in args.only}
    rows = []
    for name, (python, command) in chosen.items():
        rows.append(run(name, python, command))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    commit = (
        args.commit
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    )
    header = (
        "# dpnc finetune: the printed time estimate against the measured run\n\n"
        f"`python benchmarks/finetune_estimate.py` at {commit}, {time.strftime('%Y-%m-%d')}; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, one torch thread, nice. "
        "measured: from the estimate's line to the run's last line; ratio = estimate / measured "
        "(target 0.5 to 2). Commands:\n\n"
        + "".join(f"- {r['example']}: `{r['command']}`\n" for r in rows)
        + "\n"
    )
    result, text = {"commit": commit, "rows": rows}, header + table(rows)
    if args.before:
        result["before"] = before = json.loads(Path(args.before).read_text())
        text += f"\nBefore: the estimate of {before['commit']}, same commands and machine.\n\n"
        text += table(before["rows"])
    Path(args.out + ".md").write_text(text)
    Path(args.out + ".json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}.md, {args.out}.json")


if __name__ == "__main__":
    main()
