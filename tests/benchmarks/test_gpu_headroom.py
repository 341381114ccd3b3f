"""benchmarks/gpu/headroom.py (DPZero's Table 2 claims with every parameter trained, and Table 3 at
the 1B scale, on one GPU) in its tiny CPU configuration, so the prepared command cannot rot before a
GPU runs it: Table 3 through check.py's measurement on a random decoder built from its config, one
(task, mode, seed) part in a process of its own with its recipe fixed from the committed selections,
the rows judged by dpzero-lm's claims."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.test_gpu_check import data_dir  # noqa: F401  (the fixture: the real data, else a stand-in SST-2)

ROOT = Path(__file__).resolve().parents[2]
HEADROOM = ROOT / "benchmarks" / "gpu" / "headroom.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_headroom", HEADROOM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_tiny_cpu_run_measures_table3_and_judges_the_claims(tmp_path, data_dir):  # noqa: F811
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            str(HEADROOM),
            "--out",
            str(out),
            "--cpu-tiny",
            "--data-dir",
            str(data_dir),
        ],
        capture_output=True,
        text=True,
        timeout=400,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = json.loads((out / "headroom.json").read_text())
    # Table 3: inference, MeZO, DPZero and DP-AdamW on the decoder, every parameter trained, with
    # the ratios.
    t3 = log["table3"]
    assert t3["status"] == "ok" and t3["model"]["class"] == "LlamaForCausalLM"
    assert {r["method"] for r in t3["rows"]} == {
        "inference (2 forwards)",
        "mezo",
        "dpzero",
        "dp-adamw",
    }
    assert {
        r["trained_parameters"] for r in t3["rows"] if r["method"] != "inference (2 forwards)"
    } == {t3["model"]["parameters"]}
    assert t3["ratios"]["dpzero_time_over_mezo"]["value"] > 0
    assert t3["ratios"]["dpzero_memory_over_inference"] is None  # no CUDA memory on a CPU
    assert (out / "table3-1b" / "check.md").is_file()
    # The claims: one part, T as asked, the recipe from TASK_RECIPES, judged and written as a
    # dpzero-lm result.
    claims = log["claims"]
    assert (
        claims["finished"] == ["SST-2-head-42"]
        and not claims["stopped_at_budget"]
        and not claims["failed"]
    )
    assert claims["steps"] == 4 and claims["epsilons"] == [6.0]
    result = json.loads((out / "head" / "result.json").read_text())
    assert result["experiment"] == "dpzero-lm" and result["declared"]
    assert {(r["method"], r["steps"]) for r in result["rows"]} == {
        ("zero-shot", 0),
        ("mezo", 4),
        ("dpzero", 4),
    }
    assert {(r["method"], r["lr"]) for r in result["rows"] if r["method"] != "zero-shot"} == {
        ("mezo", 0.1),
        ("dpzero", 0.3),
    }
    private = next(c for c in claims["modes"]["head"]["claims"] if "(ε, δ)-DP" in c["statement"])
    assert private["holds"] is True
    with open(out / "memory.csv", newline="") as f:
        memory = list(csv.DictReader(f))
    assert {m["method"] for m in memory} == {"zero-shot", "mezo", "dpzero"} and all(
        "peak_gpu_mib" in m for m in memory
    )
    md = (out / "headroom.md").read_text()
    assert md.startswith("# DPZero where the model has room to learn: CPU") and "### `head`" in md


def test_the_recipes_are_the_committed_selections():
    headroom = _module()
    from dpnc_reproduce.dpzero_lm.run import TASK_RECIPES

    assert headroom.recipes("TREC", "head") == {
        "mezo": {"lr": TASK_RECIPES["TREC"]["mezo"]["lr"], "clip": None},
        "dpzero": {
            "lr": TASK_RECIPES["TREC"]["dpzero"]["lr"],
            "clip": TASK_RECIPES["TREC"]["dpzero"]["clip"],
        },
    }
    # the clip-grid sweep's held-out choice
    # (docs/results/dpzero-dimension/gpu-clip-grid-T120/recipes.csv)
    assert headroom.recipes("TREC", "all") == {
        "mezo": {"lr": 3e-5, "clip": None},
        "dpzero": {"lr": 3e-5, "clip": 200.0},
    }
    assert headroom.recipes("SST-2", "all") == {
        "mezo": {"lr": 1e-5, "clip": None},
        "dpzero": {"lr": 1e-5, "clip": 200.0},
    }
    with pytest.raises(ValueError, match="no chosen MeZO and DPZero recipe for TREC lora"):
        headroom.recipes("TREC", "lora")


def test_dp_adamw_out_of_memory_is_compared_at_the_largest_batch_that_fits():
    headroom = _module()
    ok = {"status": "ok", "step_ms_median": 10.0}
    rows = [
        {**ok, "batch_size": 16, "method": "inference (2 forwards)", "peak_mib": 1000.0},
        {**ok, "batch_size": 16, "method": "mezo", "peak_mib": 1100.0, "step_ms_median": 20.0},
        {**ok, "batch_size": 16, "method": "dpzero", "peak_mib": 1200.0, "step_ms_median": 25.0},
        {"status": "error", "batch_size": 16, "method": "dp-adamw"},
        {**ok, "batch_size": 4, "method": "dp-adamw", "peak_mib": 6000.0, "largest_fit_below": 16},
    ]
    ratios = headroom.scale_ratios(rows)
    assert ratios["dpzero_memory_over_inference"] == {"batch_size": 16, "value": 1.2}
    assert ratios["dpzero_time_over_mezo"] == {"batch_size": 16, "value": 1.25}
    assert ratios["dp_adamw_memory_over_dpzero"]["value"] == 5.0
    assert (
        "B = 4 (B = 16 ran out of memory)" in ratios["dp_adamw_memory_over_dpzero"]["lower_bound"]
    )
