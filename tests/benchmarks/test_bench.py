"""benchmarks/bench.py's table (make bench) from fixture JSONs shaped like each benchmark's output;
nothing is timed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _t(median):
    return {"median": median, "min": median, "max": median}


FIXTURES = {
    "zo_step": {
        "config": {"batch": 64, "seq": 64},
        "time_ms": {
            "2 forwards": _t(100.0),
            "reference MeZO": _t(200.0),
            "dpnc MeZO": _t(150.0),
            "dpnc DPZero": _t(160.0),
        },
    },
    "lm_step": {
        "ratios": {
            "time (medians)": {
                "dpnc DPZero / 2 forwards": 1.07,
                "dpnc DPZero / dpnc MeZO": 1.13,
                "2 forwards + 3 u passes / 2 forwards": 1.08,
                "DP-AdamW (Opacus) / dpnc DPZero": 5.9,
            }
        }
    },
    "first_order_step": {
        "rows": [
            {
                "model": "mlp 64-64-10",
                "batch": 64,
                "ratio_to_opacus": {"dpnc auto (per layer)": 1.05},
            },
            {
                "model": "cnn 2 conv + linear",
                "batch": 64,
                "ratio_to_opacus": {"dpnc auto (per layer)": 1.25},
            },
            {
                "model": "cnn padding='same'",
                "batch": 64,
                "ratio_to_opacus": {"dpnc auto (per layer)": 1.1},
            },
            {
                "model": "packed LSTM classifier (emb 1000x32, LSTM 32)",
                "batch": 32,
                "ratio_to_opacus": {"dpnc auto (per layer)": 0.54},
            },
            {
                "model": "MiniLM-L6 + linear head (DP-AdamW)",
                "batch": 64,
                "ratio_to_opacus": {
                    "dpnc auto (per layer)": 0.21,
                    "dpnc stock model": 0.6,
                    "non-private stock model": 0.55,
                },
            },
        ]
    },
    "distributed_zo B=64": {
        "runs": [
            {"world": 2, "group": [0.05], "cached": [0.04], "forward": [0.025]},
            {"world": 1, "plain": [0.06, 0.07, 0.08], "forward": [0.05]},
        ]
    },
    "distributed_fo": {
        "script": "distributed_fo",
        "args": {"batch": "256"},
        "runs": [
            {"world": 1, "step": [10.0, 11.0, 12.0], "fb": [8.0]},
            {"world": 2, "step": [6.5], "fb": [4.2]},
        ],
    },
}


def test_the_table_has_one_line_per_ratio_with_targets_load_date_and_commit(bench):
    results = [
        {"name": name, "data": data, "load_before": 0.5, "load_after": 0.75, "seconds": 12.0}
        for name, data in FIXTURES.items()
    ]
    results.append(
        {
            "name": "distributed_zo B=256",
            "data": None,
            "error": "exit 1",
            "load_before": 1.0,
            "load_after": 1.0,
            "seconds": 3.0,
        }
    )
    meta = {
        "full": False,
        "command": "make bench",
        "date": "2026-11-26 12:00 UTC",
        "commit": "abc1234",
        "load_before": 0.5,
        "load_after": 1.0,
        "seconds": 600.0,
    }
    table = bench.build_table(results, meta)
    assert (
        "`make bench` on 2026-11-26 12:00 UTC, commit abc1234; 1-minute load average 0.50 before, 1.00 after"
        in table
    )
    lines = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(lines) == 3 + 4 + 8 + 3 + 1 + 3
    assert (
        "| zo_step | dpnc DPZero / reference MeZO, B = 64, seq 64 | 0.80 |  |  | 0.50 → 0.75 | 12 |"
        in lines
    )
    assert any(
        line.startswith("| lm_step | DP-AdamW (Opacus) / dpnc DPZero, B = ?, seq ? | 5.90 |")
        for line in lines
    )
    assert any(
        "| lm_step | dpnc DPZero / dpnc MeZO, B = ?, seq ? | 1.13 | ≤ 1.02 | NO |" in line
        for line in lines
    )
    # a lower bound (verdict.LM_STEP's side "above"): the seed trick's own work over two forwards
    assert any(
        "2 forwards + 3 u passes / 2 forwards, B = ?, seq ? | 1.08 | ≥ 1.10 | NO |" in line
        for line in lines
    )
    assert any("mlp 64-64-10, B = 64 | 1.05 | ≤ 1 | NO |" in line for line in lines)
    assert any(
        "cnn 2 conv + linear, B = 64 | 1.25 | ≤ 1.2 | NO |" in line for line in lines
    )  # a miss is shown
    assert any("cnn padding='same', B = 64 | 1.10 | ≤ 1.2 | yes |" in line for line in lines)
    assert any(
        "packed LSTM classifier (emb 1000x32, LSTM 32), B = 32 | 0.54 | ≤ 1.2 | yes |" in line
        for line in lines
    )
    # MiniLM against Opacus: shown without a target; the stock model against its non-private step:
    # <= 1.3
    assert any(
        "dpnc auto / Opacus, MiniLM-L6 + linear head (DP-AdamW), B = 64 | 0.21 |  |  |" in line
        for line in lines
    )
    assert any(
        "dpnc stock model / Opacus, MiniLM-L6 + linear head (DP-AdamW), B = 64 | 0.60 |  |  |"
        in line
        for line in lines
    )
    assert any(
        "dpnc stock model / non-private step, MiniLM-L6 + linear head (DP-AdamW), B = 64 | 1.09 | ≤ 1.3 | yes |"
        in line
        for line in lines
    )
    assert any(
        "non-private step / Opacus, MiniLM-L6 + linear head (DP-AdamW), B = 64 | 0.55 |  |  |"
        in line
        for line in lines
    )  # the floor, shown without a target
    # 0.07 / 0.04 = 1.75 with cached directions, against the forward passes' 0.05 / 0.025 = 2: a
    # ratio of 0.875
    assert any(
        "| distributed_zo B=64 | speed-up, 2 processes (cached directions)" in line
        and "| 1.75 |" in line
        for line in lines
    )
    assert any(
        "| distributed_zo B=64 | speed-up of the forward passes alone" in line
        and "| 2.00 |" in line
        for line in lines
    )
    assert any(
        "| the step's speed-up / the forward passes' own | 0.88 | ≥ 0.9 | NO |" in line
        for line in lines
    )
    # 11 / 6.5 = 1.69 for the DP-AdamW step against 8 / 4.2 = 1.90 for the forward and backward:
    # 0.89
    fo = [line for line in lines if line.startswith("| distributed_fo |")]
    assert (
        "| speed-up, 2 processes over 1: DP-AdamW step (make_private), MiniLM top 2 layers, "
        "B = 256 | 1.69 | ≥ 1.8 | NO |" in fo[0]
    )
    assert (
        "| speed-up of a non-private forward+backward alone" in fo[1] and "| 1.90 |  |  |" in fo[1]
    )
    assert "| the step's speed-up / the forward+backward's own, MiniLM" in fo[2]
    assert "| 0.89 | ≥ 0.9 | NO |" in fo[2]
    assert "| distributed_zo B=256 | FAILED: exit 1 |" in table
