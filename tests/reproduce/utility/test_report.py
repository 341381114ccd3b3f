"""utility's report cells on constructed rows: within the ratio only past the progress margin,
heavy tails summarised by the geometric mean, no signal from overlapping intervals or one seed."""

import dataclasses

import pytest

from tests.reproduce.utility.rows import baselines, cell, jitter, row


def test_within_the_ratio_holds_only_past_the_progress_margin():
    rows = baselines() + [row("dpzero", "dpnc", s, 1.2 * (1 + jitter(s))) for s in range(10)]
    assert cell(rows)["verdict"] is True  # 1.2 of a gap of 10: 88 % closed
    # every method at chance (nothing closed): within 1.5× of each other, but no verdict
    at_chance = [
        dataclasses.replace(r, excess_risk=9.9 * r.excess_risk, train_loss=9.9 * r.excess_risk)
        for r in rows
    ]
    c = cell(at_chance)
    assert c["within"] is True and c["margin"] is False and c["verdict"] is None


def test_heavy_tails_are_summarised_by_the_geometric_mean():
    """One seed 100× worse moves a ratio of means by ~10×; the geometric mean of the paired ratios
    far less."""
    rows = baselines() + [
        row("dpzero", "dpnc", s, (100.0 if s == 0 else 1.0) * (1 + jitter(s))) for s in range(10)
    ]
    rows = [dataclasses.replace(r, start_gap=1000.0) for r in rows]
    assert cell(rows)["ratios"]["dp-gd"].estimate == pytest.approx(100**0.1, rel=0.02)


def test_overlapping_intervals_and_one_seed_give_no_signal():
    wide = [0.2, 2.0, 0.5, 1.5, 1.0, 0.3, 1.8, 0.9, 1.1, 1.0]
    rows = baselines() + [row("dpzero", "dpnc", s, 1.5 * wide[s]) for s in range(10)]
    assert cell(rows)["within"] is None
    one = [
        row("dp-gd", "baseline", 0, 1.0),
        row("dp-sgd", "baseline", 0, 1.0),
        row("dpzero", "dpnc", 0, 5.0),
    ]
    assert cell(one)["verdict"] is None
