"""benchmarks/gpu/decisive.py (the declared decisive DPZero run on one GPU) stays prepared without a
GPU: its design is the declaration's, its cells go through the project's runner one at a time on the
device asked for, it stops before a cell the budget cannot hold and resumes from an earlier call's
rows."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DECISIVE = ROOT / "benchmarks" / "gpu" / "decisive.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_decisive", DECISIVE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_plan_is_the_declared_design():
    gpu = _module()
    design = json.loads(gpu.DECLARATION.read_text())["design"]
    p = gpu.plan(0.05)
    assert p["seeds"] == len(design["seeds"]) == 20 and p["methods"] == design["methods"]
    assert p["cells"] == 100 and p["steps"] == 80 * design["steps"] == 16000
    assert (
        p["calls_of_540_s"] == 2
    )  # 16,000 steps at 50 ms: two calls, the second resuming the first's rows
    assert gpu.plan(0.02)["calls_of_540_s"] == 1  # one call needs ≲ 20 ms a step


def test_cells_run_one_at_a_time_on_the_device_within_the_budget(tmp_path, monkeypatch):
    gpu = _module()
    now, calls = [0.0], []
    earlier = tmp_path / "earlier.jsonl"
    earlier.write_text(json.dumps({"seed": 130, "label": "zero-shot"}) + "\n")

    def runner(data_dir, out, runs_dir, *, limit):
        calls.append((limit, gpu.decisive.RECIPE["device"]))
        now[0] += 60.0  # a cell takes a minute
        with (out / gpu.decisive.ROWS).open("a") as f:
            f.write(json.dumps({"seed": 130 + len(calls), "label": "mezo"}) + "\n")
        return 1

    args = argparse.Namespace(
        out=tmp_path / "out",
        data_dir="d",
        runs_dir=tmp_path / "runs",
        rows=str(earlier),
        device="cuda",
        budget_seconds=300.0,
        step_seconds=0.05,
    )
    monkeypatch.setattr(gpu.decisive, "RECIPE", dict(gpu.decisive.RECIPE))
    report = gpu.run(args, runner=runner, clock=lambda: now[0])
    assert calls == [(1, "cuda")] * 4  # the fifth would end past 300 s
    assert (
        report["cells_this_call"] == 4 and report["cells_done"] == 5 and report["cells_left"] == 95
    )
    assert (args.out / gpu.decisive.ROWS).read_text().startswith(earlier.read_text())


def test_the_call_script_runs_it_under_the_call_limit():
    text = (ROOT / "benchmarks" / "gpu" / "decisive.sh").read_text()
    assert "benchmarks/gpu/decisive.py" in text and 'source "$(dirname "$0")/setup.sh"' in text
    assert "DPNC_GPU_TIMEOUT:-515" in text
