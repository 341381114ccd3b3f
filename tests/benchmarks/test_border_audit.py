"""benchmarks/border_audit.py: its verdicts follow the audit statistics, and a refused row is
refused on both sides.

Small: the verdict logic on scores of known shape (a constant channel, a separating one), and row 3
(a train-mode BatchNorm outside the model) with a few runs a side."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "border_audit.py"


@pytest.fixture(scope="module")
def border():
    spec = importlib.util.spec_from_file_location("border_audit", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["border_audit"] = module
    spec.loader.exec_module(module)
    return module


def test_a_refused_channel_bounds_zero_and_a_separating_one_leaks(border):
    runs = 75
    refused = border.audit(
        "x", "refused", [border.REFUSED] * runs, [border.REFUSED] * runs, (runs, runs)
    )
    assert (
        refused["epsilon_lower_bound"] == 0 and refused["verdict"] == "refused before any release"
    )
    constant = border.audit("x", "constant", [0.5] * runs, [0.5] * runs)
    assert constant["epsilon_lower_bound"] == 0 and constant["verdict"] == "within noise of 0"
    separated = border.audit("x", "separated", [1.0] * runs, [0.0] * runs)
    assert separated["verdict"] == "still leaks"
    assert separated["epsilon_lower_bound"] == pytest.approx(separated["max_attainable"])
    assert separated["epsilon_lower_bound"] > border.CLAIMED


def test_the_outside_batchnorm_is_refused_on_both_sides_before_any_write(border):
    (row,) = border.row3_outside_module(3)
    assert row["refused_or_absent"] == [3, 3] and row["distinct_values"] == 1
    assert row["epsilon_lower_bound"] == 0 and row["verdict"] == "refused before any release"
