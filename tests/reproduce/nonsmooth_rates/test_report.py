"""nonsmooth-rates' report: the crossing n interpolated in log n, censored seeds kept with their
range, exponents judged one-sided in their variable's regime, paired ratios with censored sides."""

import math

import pytest

from dpnc_reproduce import claims as stats
from dpnc_reproduce.loglog import GROWS, SHRINKS, loglog_fit
from dpnc_reproduce.nonsmooth_rates import report
from tests.reproduce.nonsmooth_rates.tiny import TINY


def test_crossing_interpolates_in_log_n_and_flags_the_ends():
    series = [(1000, 0.9), (2000, 0.7), (4000, 0.5)]
    assert report.crossing(series, 0.6) == pytest.approx(math.sqrt(2000 * 4000))  # halfway in log n
    assert report.crossing(series, 0.95) == 1000 and report.crossing(series, 0.1) == math.inf


def _threshold(n_beta, censored=False):
    return report.Threshold("radial", "zo-o2nc", 4, 2.0, 0.1, 0.8, 0, n_beta, censored)


def test_censored_n_keeps_every_seed_with_its_range():
    assert report.censored_n(_threshold(300.0), TINY) == 300.0
    assert report.censored_n(_threshold(math.inf), TINY) == stats.Censored(
        400.0, math.inf
    )  # not reached by n_max
    assert report.censored_n(_threshold(200.0, True), TINY) == stats.Censored(
        1.0, 200.0
    )  # reached at n_start
    assert report.censored_n(None, TINY) == stats.Censored(0.0, math.inf)


def test_an_exponent_is_judged_one_sided_and_censored_seeds_count():
    xs, theory = [4.0, 8.0, 16.0], [x**1.5 for x in (4.0, 8.0, 16.0)]  # the theorem: n ∝ d^1.5
    slower = [
        [100 * x**s for x in xs] for s in (0.9, 1.0, 1.1, 1.0, 0.95)
    ]  # grows slower: consistent
    e = report._exponent("radial", "zo-o2nc", "d", 0.8, (4, 2.0, 0.1), xs, slower, theory)
    assert e.theory == pytest.approx(1.5) and e.verdict is True and e.reached == "5/5 seeds"
    faster = [[x**s for x in xs] for s in (2.4, 2.5, 2.6, 2.5, 2.45)]
    assert (
        report._exponent("radial", "zo-o2nc", "d", 0.8, (4, 2.0, 0.1), xs, faster, theory).verdict
        is False
    )
    # one seed never reached β at d = 16: kept, its slope open above, so "grows no faster" cannot
    # hold
    censored = slower[:4] + [[100 * 4.0, 100 * 8.0, stats.Censored(400.0, math.inf)]]
    c = report._exponent("radial", "zo-o2nc", "d", 0.8, (4, 2.0, 0.1), xs, censored, theory)
    assert (
        c.fitted.censored == 1
        and c.fitted.high == math.inf
        and c.verdict is None
        and c.reached == "4/5 seeds"
    )
    assert "censored" in report.reason(c, [], TINY)


def test_a_paired_ratio_with_one_side_censored_is_censored():
    assert report.paired_log_ratio(800.0, 200.0, 1000) == pytest.approx(2.0)
    assert report.paired_log_ratio(math.inf, 250.0, 1000) == stats.Censored(2.0, math.inf)
    assert report.paired_log_ratio(250.0, math.inf, 1000) == stats.Censored(-math.inf, -2.0)
    assert report.paired_log_ratio(math.inf, math.inf, 1000) is None


def test_paired_log_ratio_keeps_censored_seeds_censored():
    inf = math.inf
    assert report.paired_log_ratio(4000, 1000, 16_000) == pytest.approx(2.0)
    only_fewer = report.paired_log_ratio(inf, 4000, 16_000)  # only `fewer` reached: ≥ 2
    assert (only_fewer.lower, only_fewer.upper, only_fewer.at) == (
        pytest.approx(2.0),
        inf,
        pytest.approx(2.0),
    )
    only_more = report.paired_log_ratio(4000, inf, 16_000)  # only `more` reached: ≤ −2
    assert (only_more.lower, only_more.upper, only_more.at) == (
        -inf,
        pytest.approx(-2.0),
        pytest.approx(-2.0),
    )
    assert report.paired_log_ratio(inf, inf, 16_000) is None


def test_exponents_are_judged_in_their_variables_regime():
    """n ≤ C·N(d, ε, α, β): for ε (x → 0) a slope steeper than N's fails and a shallower one holds —
    the reverse of the rule for d (x → ∞); α is not judged on this instance."""
    eps = [0.5, 2.0, 8.0]
    theory = [5000 * e**-0.37 for e in eps]

    def seeds(slope, xs=eps):
        return [[1000 * (1 + 0.02 * s) * x**slope for x in xs] for s in range(6)]

    steep = report._exponent(
        "radial", "klt", "epsilon", 0.55, (4, 2.0, 0.1), eps, seeds(-1.17), theory
    )
    assert steep.regime == SHRINKS and steep.theory == pytest.approx(-0.37)
    assert steep.tolerance.value == pytest.approx(
        -report.LOG_POWER["klt"] * loglog_fit(eps, [math.log(t) for t in theory])
    )
    assert steep.verdict is False  # the old rule (≤ bound + 0.1) said it holds
    assert report._exponent(
        "radial", "klt", "epsilon", 0.55, (4, 2.0, 0.1), eps, seeds(-0.2), theory
    ).verdict
    ds = [4, 8, 16]
    up = [100 * d**0.8 for d in ds]
    grows = report._exponent(
        "radial",
        "klt",
        "d",
        0.55,
        (4, 2.0, 0.1),
        ds,
        [[10 * (1 + 0.02 * s) * d**1.5 for d in ds] for s in range(6)],
        up,
    )
    assert grows.regime == GROWS and grows.verdict is False  # n(β) grows faster than N in d: fails
    alphas = [0.05, 0.1, 0.2]
    alpha = report._exponent(
        "radial",
        "zo-o2nc",
        "alpha",
        0.55,
        (4, 2.0, 0.1),
        alphas,
        seeds(-1.63, alphas),
        [5000 * a**-0.9 for a in alphas],
    )
    assert (
        alpha.verdict is None and alpha.rule is False
    )  # not testable by slope here; the rule kept
