"""The claims engine's statistics against independent references (numpy, scipy), on constructed data."""

from __future__ import annotations

import math
import random
import statistics

import numpy as np
import pytest
from scipy import stats

from dpnc_reproduce import claims
from dpnc_reproduce.loglog import GROWS, SHRINKS
from dpnc_reproduce.variance import (
    t95,
)


def test_verdict_needs_the_whole_interval_past_the_threshold():
    assert claims.verdict(5.1, 9.0, 5.0) is True
    assert claims.verdict(1.0, 5.0, 5.0) is False  # at the threshold is not past it
    assert claims.verdict(4.0, 6.0, 5.0) is None
    with pytest.raises(ValueError, match="low <= high"):
        claims.verdict(2.0, 1.0, 0.0)
    assert claims.all_hold([True, True]) is True
    assert claims.all_hold([True, None]) is None
    assert claims.all_hold([None, False, True]) is False


def _satterthwaite(parts):
    """The Welch–Satterthwaite df by hand: (Σv)² / Σ v²/df."""
    return sum(v for v, _ in parts) ** 2 / sum(v * v / df for v, df in parts)


def test_unpaired_accuracy_difference_is_a_satterthwaite_t_interval():
    a, b, m = [80.0, 81.5, 78.0], [70.0, 74.0, 71.0, 69.5], 1000
    parts = [(np.var(v, ddof=1) / len(v), len(v) - 1) for v in (a, b)]
    parts += [(1e4 * p * (1 - p) / m, m - 1) for p in (np.mean(a) / 100, np.mean(b) / 100)]
    df = _satterthwaite(parts)
    half = stats.t.ppf(0.975, df) * math.sqrt(sum(v for v, _ in parts))
    d = claims.accuracy_difference(a, b, m)
    assert d.estimate == pytest.approx(np.mean(a) - np.mean(b)) and d.df == pytest.approx(df)
    assert (d.low, d.high) == (pytest.approx(d.estimate - half), pytest.approx(d.estimate + half))
    assert 2 < df < m - 1 and half > 1.96 * math.sqrt(
        sum(v for v, _ in parts)
    )  # wider than the normal interval


def test_paired_difference_matches_a_numpy_scipy_reference():
    rng = np.random.default_rng(0)
    m, seeds = 500, 3
    b = rng.random((seeds, m)) < 0.6
    a = b.copy()
    flip = rng.random((seeds, m)) < 0.1  # a disagrees with b on about 10 % of the examples,
    a[flip] = rng.random(flip.sum()) < 0.75  # and is right on 75 % of those
    d = claims.paired_accuracy_difference(a.astype(int).tolist(), b.astype(int).tolist())
    diff = 100 * (a.astype(float) - b.astype(float))
    per_seed = diff.mean(axis=1)
    var, df = _anova_truncated(diff)
    half = stats.t.ppf(0.975, df) * math.sqrt(var)
    assert d.estimate == pytest.approx(per_seed.mean()) and d.df == pytest.approx(df)
    assert d.high - d.estimate == pytest.approx(half) and d.estimate - d.low == pytest.approx(half)
    assert seeds - 1 <= d.df <= seeds * m  # within its mean squares' degrees of freedom
    # the earlier two-part sum counted the seed × example interaction twice: never narrower than
    # this
    old = per_seed.var(ddof=1) / seeds + diff.mean(axis=0).var(ddof=1) / m
    assert var <= old
    # identical models: no difference and no width; a paired interval is narrower than the unpaired
    # one here
    same = claims.paired_accuracy_difference(b.astype(int).tolist(), b.astype(int).tolist())
    assert (same.estimate, same.low, same.high) == (0.0, 0.0, 0.0)
    accs = [(100 * x.mean(axis=1)).tolist() for x in (a, b)]
    unpaired = claims.accuracy_difference(*accs, m)
    assert d.high - d.low < unpaired.high - unpaired.low


def _anova_truncated(d):
    """Var(grand mean) of a seeds × examples table by two-way random-effects ANOVA, a component
    whose estimate is negative set to 0, and its Satterthwaite df — written out with numpy, case by
    case."""
    k, m = d.shape
    ms_s = m * d.mean(axis=1).var(ddof=1)
    ms_e = k * d.mean(axis=0).var(ddof=1)
    resid = d - d.mean(axis=1, keepdims=True) - d.mean(axis=0, keepdims=True) + d.mean()
    ms_r = (resid**2).sum() / ((k - 1) * (m - 1))
    if ms_s >= ms_r and ms_e >= ms_r:
        terms = [(ms_s, k - 1), (ms_e, m - 1), (-ms_r, (k - 1) * (m - 1))]
    elif ms_s >= ms_r:
        terms = [(ms_s, k - 1)]
    elif ms_e >= ms_r:
        terms = [(ms_e, m - 1)]
    else:
        terms = [(ms_r, (k - 1) * (m - 1))]
    total = sum(t for t, _ in terms)
    return total / (k * m), total**2 / sum(t * t / df for t, df in terms)


def test_one_seed_gives_no_verdict_never_a_zero_seed_variance():
    rng = np.random.default_rng(2)
    a, b = (rng.random((1, 400)) < p for p in (0.9, 0.5))  # a 40-point gap on one seed
    one = claims.paired_accuracy_difference(a.astype(int).tolist(), b.astype(int).tolist())
    assert one.estimate == pytest.approx(100 * (a.mean() - b.mean()))
    assert (one.low, one.high) == (-math.inf, math.inf) and "1 seed: no verdict" in one.note
    assert claims.exceeds(one, 0.0) is None and claims.below(one, 100.0) is None
    u = claims.accuracy_difference([90.0], [50.0, 51.0, 49.0], 400)
    assert claims.exceeds(u, 0.0) is None and "1 seed" in str(u)
    assert claims.difference_interval([1.0], [0.0, 0.1]).low == -math.inf
    assert claims.mean_interval([3.0]).high == math.inf
    c = claims.censored_mean_interval([2.0])
    assert claims.exceeds(c, 0.0) is None


def test_paired_difference_refuses_mismatched_vectors():
    with pytest.raises(ValueError, match="same positive number of seeds"):
        claims.paired_accuracy_difference([[1, 0]], [])
    with pytest.raises(ValueError, match="same length"):
        claims.paired_accuracy_difference([[1, 0, 1]], [[1, 0]])
    assert claims.from_bits("0110") == [0, 1, 1, 0]
    with pytest.raises(ValueError, match="0 and 1"):
        claims.from_bits("01x")
    with pytest.raises(ValueError, match="at least one"):
        claims.mean_se([])


T95 = {1: 12.7062047, 2: 4.30265273, 4: 2.77644511}  # Student t, 97.5 % quantiles (tables)


def test_slope_interval_matches_per_seed_numpy_fits():
    rng = np.random.default_rng(1)
    xs = np.array([1e2, 1e3, 1e4, 1e5])
    ys = [
        xs ** (-0.5 + 0.1 * rng.standard_normal()) * np.exp(0.2 * rng.standard_normal(4))
        for _ in range(5)
    ]
    slopes = np.array([np.polyfit(np.log(xs), np.log(y), 1)[0] for y in ys])
    half = T95[4] * slopes.std(ddof=1) / math.sqrt(5)
    s = claims.slope_interval(xs.tolist(), [y.tolist() for y in ys])
    assert s.seeds == 5 and s.estimate == pytest.approx(slopes.mean())
    assert (s.low, s.high) == (
        pytest.approx(slopes.mean() - half),
        pytest.approx(slopes.mean() + half),
    )
    # one seed: an estimate without an interval, so no claim on it holds or fails
    one = claims.slope_interval(xs.tolist(), [ys[0].tolist()])
    assert one.estimate == pytest.approx(slopes[0]) and (one.low, one.high) == (-math.inf, math.inf)
    assert (
        claims.below(one, 0.0) is None
        and claims.within(one, -0.5, 10.0) is None
        and "1 seed" in str(one)
    )
    # a seed with a value <= 0 is kept, censored in (0, ∞): counted, and its slope can be anything
    bad = claims.slope_interval(xs.tolist(), [y.tolist() for y in ys[:4]] + [[1.0, 0.0, 1.0, 1.0]])
    assert bad.seeds == 5 and bad.censored == 1 and "1 of 5 seeds" in bad.note
    assert (bad.low, bad.high) == (-math.inf, math.inf) and not math.isfinite(bad.estimate)
    with pytest.raises(ValueError, match="one value per x"):
        claims.slope_interval(xs.tolist(), [[1.0, 2.0]])


def test_slope_claims_hold_fail_or_have_no_signal():
    xs = [1.0, 10.0, 100.0]
    steep = [[x**s for x in xs] for s in (-1.02, -0.98, -1.01, -0.99)]  # slope −1 ± 0.02
    s = claims.slope_interval(xs, steep)
    assert claims.below(s, 0.0) is True and claims.exceeds(s, 0.0) is False
    assert claims.within(s, -1.0, 0.1) is True  # inside (−1.1, −0.9)
    assert claims.within(s, -0.5, 0.1) is False  # all of it below −0.6
    assert claims.within(s, -1.1, 0.1) is None  # straddles −1.0
    noisy = claims.slope_interval(
        xs, [[x**s for x in xs] for s in (-2.0, 1.5)]
    )  # two seeds, far apart
    assert claims.below(noisy, 0.0) is None
    half = T95[1] * np.std([-2.0, 1.5], ddof=1) / math.sqrt(2)
    assert noisy.high - noisy.estimate == pytest.approx(half)
    with pytest.raises(ValueError, match="tol must be > 0"):
        claims.within(s, -1.0, 0.0)
    assert str(s.scaled(0.5)).startswith("-0.50 [")


def test_difference_intervals_against_numpy_and_scipy_welch():
    a, b = np.array([0.30, 0.32, 0.29]), np.array([0.10, 0.20, 0.15, 0.12, 0.18])
    d = claims.difference_interval(a.tolist(), b.tolist())
    va, vb = a.var(ddof=1) / 3, b.var(ddof=1) / 5
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 4)  # Welch's degrees of freedom
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    assert d.estimate == pytest.approx(
        a.mean() - b.mean()
    ) and d.high - d.estimate == pytest.approx(half)
    assert d.df == pytest.approx(df)
    welch = stats.ttest_ind(a, b, equal_var=False).confidence_interval(
        0.95
    )  # scipy's own Welch interval
    assert (d.low, d.high) == (pytest.approx(welch.low), pytest.approx(welch.high))
    assert claims.exceeds(d, 0.0) is True
    p = claims.paired_interval([1.0, 2.0, 3.0], [0.5, 1.0, 2.9])
    diffs = np.array([0.5, 1.0, 0.1])
    assert p.estimate == pytest.approx(diffs.mean())
    assert p.high - p.estimate == pytest.approx(T95[2] * diffs.std(ddof=1) / math.sqrt(3))
    assert (
        claims.difference_interval([1.0], [0.0, 0.1]).low == -math.inf
    )  # one seed on a side: no interval
    m = claims.mean_interval([2.0, 2.0])
    assert (m.low, m.high) == (2.0, 2.0) and claims.exceeds(
        m, 2.0
    ) is False  # at the threshold is not past it
    assert claims.judged({"a": True, "b": None, "c": False}) == "1 hold, 1 fail, 1 no signal (of 3)"


def _seeds(xs, slopes):
    return [[x**s for x in xs] for s in slopes]


def test_upper_bound_rates_are_judged_one_sided():
    xs = [30.0, 100.0, 300.0, 1000.0]
    bound, tol = -0.75, 0.1

    def judge(iv, t=tol):
        return claims.rate_within_bound(iv, bound, regime=GROWS, tol=t)

    slower = claims.slope_interval(
        xs, _seeds(xs, (-0.65, -0.61, -0.63, -0.64, -0.62))
    )  # −0.63 [−0.65, −0.61]
    assert (
        slower.high < bound + 0.2 and slower.low > bound + tol
    )  # its interval excludes bound + tol
    assert judge(slower) is False
    faster = claims.slope_interval(
        xs, _seeds(xs, (-1.2, -1.1, -1.3, -1.25))
    )  # faster than the bound: consistent
    assert judge(faster) is True
    assert claims.tight(faster, bound, tol) is False  # but not tight: a separate claim
    straddles = claims.slope_interval(xs, _seeds(xs, (-0.9, -0.5, -0.7)))
    assert judge(straddles) is None
    near = claims.slope_interval(
        xs, _seeds(xs, (-0.70, -0.71, -0.69, -0.70))
    )  # 0.05 slower: inside the tolerance
    assert judge(near) is True and judge(near, 0.0) is False
    assert claims.tight(near, bound, tol) is True
    one = claims.slope_interval(xs, _seeds(xs, (-0.2,)))  # one seed, far slower: still no verdict
    assert judge(one) is None
    with pytest.raises(ValueError, match="regime"):
        claims.rate_within_bound(near, bound, regime="up", tol=tol)


def test_rates_in_a_shrinking_variable_fail_on_the_steep_side():
    # n ≤ C·N(ε) is about small ε: with N ∝ ε^−0.37 over the grid, a measured n(ε) ∝ ε^−1.17 grows
    # faster than the bound as ε shrinks (KLT's measured ε exponent): that is the violating side,
    # whatever the old rule said
    eps = [0.5, 2.0, 8.0]
    bound, tol = -0.37, 0.05

    def judge(iv):
        return claims.rate_within_bound(iv, bound, regime=SHRINKS, tol=tol)

    steep = claims.slope_interval(eps, _seeds(eps, (-1.10, -1.20, -1.15, -1.25, -1.17)))
    assert steep.high < bound - tol
    assert judge(steep) is False  # the old rule (slope ≤ bound + tol) said True
    assert claims.below(steep, bound + tol) is True
    shallow = claims.slope_interval(
        eps, _seeds(eps, (-0.10, -0.20, -0.15, -0.12))
    )  # grows slower as ε shrinks
    assert judge(shallow) is True  # the old rule said False
    assert claims.below(shallow, bound + tol) is False
    near = claims.slope_interval(
        eps, _seeds(eps, (-0.40, -0.41, -0.39, -0.40))
    )  # 0.03 steeper: within tol
    assert judge(near) is True
    assert claims.rate_within_bound(near, bound, regime=SHRINKS, tol=0.0) is False
    straddles = claims.slope_interval(eps, _seeds(eps, (-0.9, -0.1, -0.5)))
    assert judge(straddles) is None
    # ZTC's β exponent: measured −1.86 [−2.06, −1.66] against the bound's −2.27 holds as β → 0
    ztc_beta = claims.Interval(-1.86, -2.06, -1.66, 10)
    assert claims.rate_within_bound(ztc_beta, -2.27, regime=SHRINKS, tol=0.0) is True
    assert (
        claims.rate_within_bound(ztc_beta, -2.27, regime=GROWS, tol=0.1) is False
    )  # the reversed rule
    assert claims.rate_limit(-2.27, regime=SHRINKS, tol=0.1) == pytest.approx(-2.37)


def test_censored_seed_is_kept_counted_and_conservative():
    xs = [4.0, 8.0, 16.0, 32.0]
    n_max = 1000.0
    reached = [[10 * x**s for x in xs] for s in (1.0, 1.1, 0.9, 1.05, 0.95)]
    slow = [10 * x**1.6 for x in xs[:3]] + [
        claims.Censored(n_max, math.inf)
    ]  # 10·32^1.6 > n_max: not reached
    fit = claims.slope_interval(xs, reached + [slow], max_censored=0.2)
    dropped = claims.slope_interval(xs, reached)  # what dropping the slow seed would report
    assert fit.censored == 1 and fit.seeds == 6 and "1 of 6 seeds" in fit.note
    per_seed = [np.polyfit(np.log(xs), np.log(y), 1)[0] for y in reached]
    per_seed.append(
        np.polyfit(np.log(xs), np.log([10 * x**1.6 for x in xs[:3]] + [n_max]), 1)[0]
    )  # at n_max
    assert fit.estimate == pytest.approx(np.mean(per_seed)) and fit.estimate > dropped.estimate
    low = stats.t.interval(0.95, 5, loc=np.mean(per_seed), scale=stats.sem(per_seed))[0]
    assert (
        fit.low == pytest.approx(low) and fit.high == math.inf
    )  # at n_max for the low end; the high end opens
    # an upper-bound claim "slope ≤ 1.1 + tol" holds when the slow seed is dropped, but not once it
    # is kept
    assert claims.rate_within_bound(dropped, 1.1, regime=GROWS, tol=0.1) is True
    assert claims.rate_within_bound(fit, 1.1, regime=GROWS, tol=0.1) is None
    # no verdict above the declared fraction
    many = claims.slope_interval(xs, reached[:3] + [slow, slow], max_censored=0.2)
    assert (
        many.censored == 2
        and (many.low, many.high) == (-math.inf, math.inf)
        and "no verdict" in many.note
    )


def test_censored_mean_counts_at_the_bound_and_opens_one_end():
    values = [1.0, 1.5, 0.5, 2.0, claims.Censored(0.8, math.inf)]
    iv = claims.censored_mean_interval(values, max_censored=0.2)
    assert iv.estimate == pytest.approx(np.mean([1.0, 1.5, 0.5, 2.0, 0.8]))
    ref = stats.t.interval(
        0.95, 4, loc=np.mean([1.0, 1.5, 0.5, 2.0, 0.8]), scale=stats.sem([1.0, 1.5, 0.5, 2.0, 0.8])
    )
    assert iv.low == pytest.approx(ref[0]) and iv.high == math.inf
    assert (
        claims.exceeds(iv, 0.0) is True and claims.below(iv, 5.0) is None
    )  # it can hold above, never fail
    plain = claims.censored_mean_interval([1.0, 1.5, 0.5, 2.0, 0.8])
    assert (plain.low, plain.high) == (
        pytest.approx(ref[0]),
        pytest.approx(ref[1]),
    ) and plain.censored == 0
    with pytest.raises(ValueError, match="lower <= upper"):
        claims.Censored(2.0, 1.0)


def test_geometric_ratio_interval_matches_scipy_paired_t_on_logs():
    rng = np.random.default_rng(7)
    b = np.exp(rng.normal(-5, 2, 10))  # heavy-tailed outcomes spanning orders of magnitude
    a = b * np.exp(rng.normal(0.4, 0.5, 10))  # paired: the same seed's data
    iv = claims.geometric_ratio_interval(a.tolist(), b.tolist())
    ref = stats.ttest_rel(np.log(a), np.log(b)).confidence_interval(0.95)
    assert iv.estimate == pytest.approx(math.exp(np.mean(np.log(a / b))), rel=1e-12)
    assert iv.low == pytest.approx(math.exp(ref.low), rel=1e-10)
    assert iv.high == pytest.approx(math.exp(ref.high), rel=1e-10)
    assert iv.df == 9 and iv.seeds == 10
    assert claims.below(iv, 1.5) is (True if iv.high < 1.5 else False if iv.low >= 1.5 else None)


def test_geometric_ratio_one_seed_and_nonpositive_values_give_no_verdict():
    one = claims.geometric_ratio_interval([2.0], [1.0])
    assert (
        one.estimate == pytest.approx(2.0)
        and math.isinf(one.high)
        and claims.below(one, 1.5) is None
    )
    assert claims.NO_VERDICT_ONE_SEED in one.note
    # one censored pair of ten (≤ MAX_CENSORED): kept, counted, the interval opens at both ends
    a, b = [1.0] * 9 + [0.0], [1.0] * 10
    iv = claims.geometric_ratio_interval(a, b)
    assert iv.censored == 1 and "1 of 10" in iv.note and iv.low == 0.0 and math.isinf(iv.high)
    # three of ten: over the declared fraction, no verdict
    iv = claims.geometric_ratio_interval([1.0] * 7 + [0.0] * 3, b)
    assert claims.below(iv, 1.5) is None and "no verdict" in iv.note


def _two_part_variance(w):
    """Var of the mean of a (seeds × examples) paired quantity: the per-seed means' s²/k plus the
    per-example means' (over seeds) s²/m, with their degrees of freedom (numpy)."""
    k, m = w.shape
    return [(w.mean(axis=1).var(ddof=1) / k, k - 1), (w.mean(axis=0).var(ddof=1) / m, m - 1)]


def _gain_share_data(seed=1, k=3, m=400, keep=0.9):
    """Zero-shot, MeZO and DPZero correctness (seeds × examples): MeZO fixes about 30 % of
    zero-shot's errors, DPZero about ``keep`` of those."""
    rng = np.random.default_rng(seed)
    z = np.tile(rng.random(m) < 0.5, (k, 1))
    mezo = z | (rng.random((k, m)) < 0.3)
    dp = z | (mezo & (rng.random((k, m)) < keep))
    x, y = 100.0 * (dp.astype(float) - z), 100.0 * (mezo.astype(float) - z)
    return x, y


def test_paired_ratio_is_fieller_against_a_direct_computation():
    x, y = _gain_share_data()
    iv = claims.paired_ratio(x.tolist(), y.tolist())
    assert iv.estimate == pytest.approx(x.mean() / y.mean())
    assert iv.low < iv.estimate < iv.high and math.isfinite(iv.low) and math.isfinite(iv.high)
    # the df: Welch–Satterthwaite of the two parts of x − r̂ y
    df = _satterthwaite(_two_part_variance(x - iv.estimate * y))
    assert iv.df == pytest.approx(df)
    t = stats.t.ppf(0.975, df)
    # at each end the t statistic of mean(x − r y) is exactly t: the ends of the test-inversion set
    for r in (iv.low, iv.high):
        w = x - r * y
        se = math.sqrt(sum(v for v, _ in _two_part_variance(w)))
        assert abs(w.mean()) == pytest.approx(t * se, rel=1e-9)
    # a direct inversion on a grid: r is inside iff |mean(x − r y)| <= t·se(x − r y)
    grid = np.linspace(iv.low - 0.2, iv.high + 0.2, 801)
    inside = [
        abs((x - r * y).mean()) <= t * math.sqrt(sum(v for v, _ in _two_part_variance(x - r * y)))
        for r in grid
    ]
    covered = grid[np.array(inside)]
    assert covered.min() == pytest.approx(iv.low, abs=2e-3) and covered.max() == pytest.approx(
        iv.high, abs=2e-3
    )
    # the delta method at the same t agrees to first order (a sanity check of scale)
    se_delta = math.sqrt(sum(v for v, _ in _two_part_variance(x - iv.estimate * y))) / abs(y.mean())
    assert (iv.high - iv.low) / 2 == pytest.approx(t * se_delta, rel=0.1)


def test_paired_ratio_no_verdict_when_the_denominator_includes_zero_or_one_seed():
    x, y = _gain_share_data()
    rng = np.random.default_rng(3)
    y0 = rng.choice([-100.0, 0.0, 100.0], size=y.shape, p=[0.05, 0.9, 0.05])  # a gain of about 0
    iv = claims.paired_ratio(x.tolist(), y0.tolist())
    dy = claims.paired_accuracy_difference(
        ((y0 > 0).astype(int)).tolist(), ((y0 < 0).astype(int)).tolist()
    )
    assert dy.low < 0 < dy.high  # the denominator's interval has 0
    assert math.isinf(iv.low) and math.isinf(iv.high) and "no verdict" in iv.note
    assert claims.exceeds(iv, 0.9) is None
    one = claims.paired_ratio(x[:1].tolist(), y[:1].tolist())
    assert one.seeds == 1 and math.isinf(one.low) and claims.NO_VERDICT_ONE_SEED in one.note
    with pytest.raises(ValueError, match="same length"):
        claims.paired_ratio([[1.0, 2.0]], [[1.0]])


def test_ratio_difference_with_a_constant_denominator_is_a_paired_mean():
    # y constant: each ratio is mean(x)/c, so the difference is the mean of (x1 − x2)/c, whose
    # variance has the same seed and question parts, computed here directly
    rng = random.Random(3)
    k, m, c = 6, 40, 20.0
    x1 = [[rng.gauss(10, 5) + s for _ in range(m)] for s in range(k)]
    x2 = [[rng.gauss(8, 5) for _ in range(m)] for _ in range(k)]
    y = [[c] * m for _ in range(k)]
    iv = claims.paired_ratio_difference(x1, y, x2, y)
    d = [[(a - b) / c for a, b in zip(u, v)] for u, v in zip(x1, x2)]
    seed = statistics.variance([statistics.fmean(r) for r in d]) / k
    test = statistics.variance([statistics.fmean(col) for col in zip(*d)]) / m
    mean = statistics.fmean(statistics.fmean(r) for r in d)
    assert iv.estimate == pytest.approx(mean)
    assert iv.se == pytest.approx(math.sqrt(seed + test))
    assert iv.high - iv.estimate == pytest.approx(t95(iv.df) * iv.se)


def test_ratio_difference_of_a_share_with_itself_is_zero_and_needs_two_seeds():
    x = [[1.0, 2.0, 0.0], [2.0, 1.0, 1.0]]
    y = [[2.0, 3.0, 1.0], [3.0, 2.0, 2.0]]
    assert claims.paired_ratio_difference(x, y, x, y).estimate == 0.0
    one = claims.paired_ratio_difference(x[:1], y[:1], x[:1], y[:1])
    assert math.isinf(one.high)
