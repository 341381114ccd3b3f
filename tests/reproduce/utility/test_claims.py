"""utility's claims on constructed rows: three times worse with tight intervals fails whatever the
progress, and the privacy claim counts only private runs."""

import dataclasses

import pytest

from dpnc_reproduce.utility import claims as utility_claims
from dpnc_reproduce.utility import report
from tests.reproduce.utility.rows import CONFIG, baselines, cell, jitter, row


def test_three_times_worse_with_tight_intervals_fails_whatever_the_progress():
    rows = baselines() + [row("dpzero", "dpnc", s, 3.0 * (1 + jitter(s + 1))) for s in range(10)]
    c = cell(rows)
    assert c["margin"] is True and c["within"] is False and c["verdict"] is False
    assert c["ratios"]["dp-gd"].estimate == pytest.approx(3.0, rel=0.02)
    claim = utility_claims.within_claim(
        [dataclasses.replace(r, problem="least-squares") for r in rows],
        CONFIG,
        "dpzero",
        "hand-set",
    )
    assert claim.holds is False and (claim.facts["parts_hold"], claim.facts["parts_fail"]) == (0, 1)
    assert claim.facts["least-squares_eps1_dp-gd_low"] > claim.facts["threshold"] == report.RATIO


def test_privacy_claim_counts_only_private_runs():
    rows = [row("base", "baseline", 0, 1.0, spent=0.99), row("ours", "dpnc", 0, 1.0, spent=1.0)]
    assert utility_claims.privacy_claim(rows).holds is True
    assert (
        utility_claims.privacy_claim(
            rows + [row("x", "baseline", 0, 1.0, spent=1.5, private=False)]
        ).holds
        is True
    )
    assert (
        utility_claims.privacy_claim(rows + [row("y", "dpnc", 0, 1.0, spent=1.01)]).holds is False
    )
