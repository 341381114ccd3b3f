"""kl-rates' claims, on the tiny run and on constructed rows: rates judged one-sided against the
bound, KL-SPIDER on its explicit bound, the reasons measured on the rows, the inner check."""

import dataclasses
import math

import pytest

from dpnc_reproduce import protocol
from dpnc_reproduce.kl_rates import claims as kl_claims
from dpnc_reproduce.kl_rates import report
from tests.reproduce.kl_rates.rows import check_rows, rate_claim, rate_verdict, spider_rows


def claims_of(rows) -> dict[str, bool | None]:
    return {c.statement: c.holds for c in kl_claims.check_claims(rows)}


def test_claims_are_judged_on_the_numbers(tiny):
    rows = list(tiny.rows)
    assert all(isinstance(c, protocol.Claim) for c in tiny.claims)
    assert {c.statement: c.holds for c in tiny.claims} == claims_of(
        rows
    )  # the runner's claims are these
    claims = claims_of(rows)
    assert next(ok for text, ok in claims.items() if text.startswith("every run spends at most"))
    over = [
        dataclasses.replace(r, rho_spent=r.rho * 1.01) if i == 0 else r for i, r in enumerate(rows)
    ]
    claims = claims_of(over)
    assert not next(
        ok for text, ok in claims.items() if text.startswith("every run spends at most")
    )
    assert next(ok for text, ok in claims.items() if text.startswith("every iterate"))
    outside = [
        dataclasses.replace(r, region_distance=8.0) if r.algorithm == "proximal-point" else r
        for r in rows
    ]
    claims = claims_of(outside)
    assert not next(ok for text, ok in claims.items() if text.startswith("every iterate"))
    worse = [
        dataclasses.replace(r, excess=2 * r.bound) if r.algorithm == "kl-spider" else r
        for r in rows
    ]
    claims = claims_of(worse)
    assert not next(ok for text, ok in claims.items() if "≤ Φfloor" in text)


def test_rate_claims_are_judged_one_sided_against_the_bound():
    # the bound falls as x^-1.4 over these points: a slope ≤ −1.4 + tol holds, one wholly above it
    # fails; the proximal point's bound keeps its log factors, so its tolerance is 0 (the old single
    # RATE_TOL = 0.1 let −1.35 hold)
    xs = [1e4, 1e5, 1e6, 1e7, 1e8]
    assert report.tolerance("proximal-point", "κ", 1.0, 1, xs).value == 0.0
    assert report.tolerance("kl-spider", "κ", 1.0, 1, xs).value == 0.0
    assert rate_verdict(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.45)) is True
    assert (
        rate_verdict(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-2.0)) is True
    )  # faster: consistent
    assert (
        rate_verdict(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.35)) is False
    )  # 0.05 slower: no tolerance
    assert (
        rate_verdict(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.2)) is False
    )  # slower, interval clear
    assert rate_verdict(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-0.9)) is False
    assert (
        rate_verdict(spider_rows(lambda x, s: x ** (-1.0, -1.5, -2.1)[s])) is None
    )  # seeds disagree: straddles
    assert rate_verdict(spider_rows(lambda x, s: x**-1.5, seeds=1)) is None  # one seed: no interval
    assert (
        rate_verdict(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.1, algorithm="adaptive-gd"))
        is False
    )


def test_kl_spider_is_judged_on_its_explicit_bound_not_its_slope():
    # Theorem 1 gives Φfloor with explicit constants and logs: its claim "excess ≤ Φfloor in every
    # run" is the test; the slope claim is reported with the rule's reading, unjudged
    claim = rate_claim(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.2, algorithm="kl-spider"))
    assert claim.holds is None and claim.status == report.EXPLICIT["kl-spider"]
    assert (
        claim.facts["slope_rule"] == 0 and claim.facts["slope_low"] > claim.facts["limit"]
    )  # the rule: fails


def test_reasons_are_measured_on_the_rows():
    """The numbers a rate claim's reasons are read from are its facts (the evidence renders
    them)."""
    slower = rate_claim(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-0.9))
    assert (
        slower.holds is False and slower.facts["slope_low"] > slower.facts["limit"]
    )  # wholly above the bound
    assert slower.facts["slope"] == pytest.approx(-0.9, abs=1e-9) and slower.facts[
        "limit"
    ] == pytest.approx(-1.4)
    # the excess pinned near F(w0) − F* = 0.7 at the lowest x: a floor from the start (median seed:
    # 0.5·1.05/0.7)
    floor = rate_claim(spider_rows(lambda x, s: min(0.5, 1e5 * x**-1.0) * (1 + 0.05 * s)))
    assert (
        floor.facts["start_share_low"] == pytest.approx(0.75)
        and floor.facts["start_share_low"] > report.FLOOR
    )
    assert (
        "a floor from the excess at x0" in floor.evidence
    )  # the reason is named where its fact says so
    # capped inner solves (recorded per row) are counted: 5 points × 3 seeds
    capped = [
        dataclasses.replace(r, inner_steps=10, inner_rule=40)
        for r in spider_rows(lambda x, s: (1 + 0.05 * s) * x**-0.9)
    ]
    assert rate_claim(capped).facts["capped_runs"] == 15 and slower.facts["capped_runs"] == 0
    straddles = rate_claim(spider_rows(lambda x, s: x ** (-1.0, -1.5, -2.1)[s]))
    assert straddles.holds is None
    assert straddles.facts["slope_low"] < straddles.facts["limit"] < straddles.facts["slope_high"]


def test_inner_check_claim():
    def verdict(rows):
        (claim,) = [
            c for c in kl_claims.check_claims(rows) if "the inner steps do not limit" in c.statement
        ]
        return claim.holds

    assert verdict(check_rows(1.0)) is True
    assert verdict(check_rows(1 / 8)) is None  # below no change, but not beyond the midpoint
    assert (
        verdict(check_rows(1 / 64)) is False
    )  # what an optimisation-limited excess would do at κ = 3


def test_the_proximal_points_rate_needs_its_inner_check():
    """A fast slope whose low-n points may be optimisation-limited (the inner check has no signal)
    does not hold."""
    fast = spider_rows(lambda x, s: (1 + 0.05 * s) * x**-2.0, algorithm="proximal-point")
    assert rate_verdict(fast + check_rows(1.0)) is True
    limited = rate_claim(fast + check_rows(1 / 8))
    assert limited.holds is None and math.isnan(
        limited.facts["inner_check"]
    )  # the inner check: no signal
    assert limited.facts["slope_rule"] == 1  # the slope alone would hold
    assert rate_verdict(fast + check_rows(1 / 64)) is False
