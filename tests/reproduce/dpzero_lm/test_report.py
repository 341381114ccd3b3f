"""dpzero-lm's report: a straddling interval is underpowered only where declared so before the
data, and Table 5's comparison is paired and states its resolution."""

from __future__ import annotations

import dataclasses

import pytest

from dpnc_reproduce import claims as claims_lib
from dpnc_reproduce.claims import Interval, below
from dpnc_reproduce.dpzero_lm import claims as lm_claims
from dpnc_reproduce.dpzero_lm import report
from tests.reproduce.dpzero_lm.rows import FULL_SET, lm_row


def test_underpowered_only_for_a_straddling_interval_declared_so_before_the_data():
    iv = Interval(1.0, -2.0, 4.0, 3, "t", df=10.0, se=1.35)  # straddles 2.6
    beyond = Interval(6.9, 4.2, 9.7, 3, "t", df=499.0, se=1.4)  # excludes 2.6
    args = ("s", 1.3, 2.6, "e")
    # no declaration: a straddling interval is no signal, the post-hoc MDE information only
    plain = report.powered_claim("s", iv, below(iv, 2.6), *args[1:])
    assert plain.holds is None and plain.status == "" and "post-hoc MDE" in plain.evidence
    # declared before the data with an MDE above the paper's distance: underpowered
    declared = report.powered_claim("s", iv, below(iv, 2.6), *args[1:], declared_mde=5.0)
    assert declared.status == "underpowered for this design" and declared.facts["declared_mde"] == 5
    # a declared MDE below the distance: judged (no signal)
    assert report.powered_claim("s", iv, None, *args[1:], declared_mde=1.0).status == ""
    # an interval beyond the threshold decides whatever was declared
    fails = report.powered_claim("s", beyond, below(beyond, 2.6), *args[1:], declared_mde=50.0)
    assert fails.holds is False and fails.status == ""


def _t5_rows(extra: list[int], m: int = 1000) -> list:
    """SST-2 DPZero at ε = 6 with sphere and Gaussian directions, three seeds, per-example results
    on m examples: both right on the first 700, the sphere run also on the next extra[s]."""

    def bits(k):
        return "1" * k + "0" * (m - k)

    rows = []
    for s, seed in enumerate((42, 13, 21)):
        rows.append(
            lm_row(
                "SST-2",
                seed,
                "dpzero",
                70.0,
                6.0,
                direction="gaussian",
                test_examples=m,
                correct=bits(700),
            )
        )
        rows.append(
            lm_row(
                "SST-2",
                seed,
                "dpzero",
                70.0 + extra[s] / 10,
                6.0,
                direction="sphere",
                test_examples=m,
                correct=bits(700 + extra[s]),
            )
        )
    return rows


def test_table5_is_paired_and_reports_its_resolution():
    cfg = dataclasses.replace(FULL_SET, tasks=(), sphere_tasks=("SST-2",), epsilons=(6.0,))
    (same,) = [
        c
        for c in lm_claims.check_claims(_t5_rows([1, -1, 0]), cfg)
        if "sphere and Gaussian" in c.statement
    ]
    assert same.holds is None and same.status.startswith(
        "no difference detectable at this resolution (±"
    )
    iv = claims_lib.paired_accuracy_difference(
        *report._t5_paired(_t5_rows([1, -1, 0]), "SST-2", 6.0)
    )
    # the paired rows are used, not two binomials; the resolution is the interval's half-width
    assert (same.facts["sst-2_eps6_low"], same.facts["sst-2_eps6_high"]) == pytest.approx(
        (iv.low, iv.high)
    )
    assert (
        same.facts["resolution"] == pytest.approx((iv.high - iv.low) / 2)
        and same.facts["detected"] == 0
    )
    (apart,) = [
        c
        for c in lm_claims.check_claims(_t5_rows([40, 42, 41]), cfg)
        if "sphere and Gaussian" in c.statement
    ]
    assert (
        apart.holds is False and apart.status == ""
    )  # 4 points apart on the same examples: detected
    assert (
        apart.facts["detected"] == 1
        and apart.facts["sst-2_eps6_low"] > apart.facts["threshold"] == 0.0
    )
