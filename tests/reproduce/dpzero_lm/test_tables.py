"""dpzero-lm's tables average over seeds and render without the data."""

from __future__ import annotations

import dataclasses

import pytest

from dpnc_reproduce import protocol
from dpnc_reproduce.dpzero_lm import claims as lm_claims
from dpnc_reproduce.dpzero_lm import tables
from dpnc_reproduce.dpzero_lm.experiment import EXPERIMENT
from tests.reproduce.dpzero_lm.rows import FULL_SET, lm_row


def test_tables_average_over_seeds_and_render_without_data():
    cfg = dataclasses.replace(FULL_SET, tasks=("SST-2", "SNLI"), seeds=(42, 13))
    rows = [
        lm_row("SST-2", s, m, a + s % 5, e)
        for s in (42, 13)
        for m, a, e in (("zero-shot", 70.0, None), ("mezo", 80.0, None), ("dpzero", 79.0, 6.0))
    ]
    rows += [lm_row("SNLI", 42, "mezo", 60.0)]
    t2 = tables.table2(rows, cfg)
    assert t2["mezo"]["SST-2"] == pytest.approx(
        (82.5, 0.5)
    )  # seeds 42, 13 → 82, 83: s.e. = stdev / √2
    assert t2["mezo"]["SNLI"] == (60.0, None)
    result = protocol.Result(
        EXPERIMENT,
        cfg,
        tuple(rows),
        tuple(lm_claims.check_claims(rows, cfg)),
        60.0,
        1,
        protocol.machine(),
    )
    text = protocol.summary(result, "dpnc reproduce dpzero-lm --test")
    assert text.startswith("# DPZero paper, language-model fine-tuning (Tables 2, 3 and 5)\n")
    assert (
        "Notes: Table 3 (first-order" in text
        and "SNLI: no k-shot folder for seed 13; skipped" in text
    )
    assert (
        "MeZO T = 100, B = 64, lr = 0.1, λ = 0.001; DPZero T = 100, B = 64, lr = 0.1, λ = 0.001, C = 1"
        in text
    )
    assert "| SST-2-42-dpzero-eps6 | 1024 | 100 | 81.0 |" in text.split("## Every run")[1]
