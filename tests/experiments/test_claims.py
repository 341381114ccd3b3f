"""The claims engine's statistics against independent references (numpy), on constructed data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpnc.experiments import claims


def test_verdict_needs_the_whole_interval_past_the_threshold():
    assert claims.verdict(5.1, 9.0, 5.0) is True
    assert claims.verdict(1.0, 5.0, 5.0) is False   # at the threshold is not past it
    assert claims.verdict(4.0, 6.0, 5.0) is None
    with pytest.raises(ValueError, match="low <= high"):
        claims.verdict(2.0, 1.0, 0.0)
    assert claims.all_hold([True, True]) is True
    assert claims.all_hold([True, None]) is None
    assert claims.all_hold([None, False, True]) is False


def test_unpaired_difference_adds_seed_and_binomial_variances():
    d, h = claims.accuracy_difference((75.0, None), (75.0, None), 300)
    assert d == 0 and h == pytest.approx(1.96 * math.sqrt(2 * 1e4 * 0.75 * 0.25 / 300))
    d, h = claims.accuracy_difference((80.0, 1.0), (70.0, 2.0), 1000)
    ref = 1.96 * math.sqrt(1 + 4 + 1e4 * (0.8 * 0.2 + 0.7 * 0.3) / 1000)
    assert d == pytest.approx(10.0) and h == pytest.approx(ref)


def test_paired_difference_matches_a_numpy_reference():
    rng = np.random.default_rng(0)
    m, seeds = 500, 3
    b = rng.random((seeds, m)) < 0.6
    a = b.copy()
    flip = rng.random((seeds, m)) < 0.1                 # a disagrees with b on about 10 % of the examples,
    a[flip] = rng.random(flip.sum()) < 0.75             # and is right on 75 % of those
    d, h = claims.paired_accuracy_difference(a.astype(int).tolist(), b.astype(int).tolist())
    diff = a.astype(float) - b.astype(float)
    per_seed = diff.mean(axis=1)
    var = per_seed.var(ddof=1) / seeds + diff.mean(axis=0).var(ddof=1) / m
    assert d == pytest.approx(100 * per_seed.mean()) and h == pytest.approx(100 * 1.96 * math.sqrt(var))
    # one seed: the McNemar-style interval, √(var of per-example differences / m)
    d1, h1 = claims.paired_accuracy_difference(a[:1].astype(int).tolist(), b[:1].astype(int).tolist())
    assert h1 == pytest.approx(100 * 1.96 * diff[0].std(ddof=1) / math.sqrt(m))
    # identical models: no difference and no width; a paired interval never exceeds the unpaired one here
    assert claims.paired_accuracy_difference(b.astype(int).tolist(), b.astype(int).tolist()) == (0.0, 0.0)
    means = [(100 * x.mean(axis=1).mean(), 100 * x.mean(axis=1).std(ddof=1) / math.sqrt(seeds)) for x in (a, b)]
    assert h < claims.accuracy_difference(*means, m)[1]


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


T95 = {1: 12.7062047, 2: 4.30265273, 4: 2.77644511}   # Student t, 97.5 % quantiles (tables)


def test_slope_interval_matches_per_seed_numpy_fits():
    rng = np.random.default_rng(1)
    xs = np.array([1e2, 1e3, 1e4, 1e5])
    ys = [xs ** (-0.5 + 0.1 * rng.standard_normal()) * np.exp(0.2 * rng.standard_normal(4)) for _ in range(5)]
    slopes = np.array([np.polyfit(np.log(xs), np.log(y), 1)[0] for y in ys])
    half = T95[4] * slopes.std(ddof=1) / math.sqrt(5)
    s = claims.slope_interval(xs.tolist(), [y.tolist() for y in ys])
    assert s.seeds == 5 and s.estimate == pytest.approx(slopes.mean())
    assert (s.low, s.high) == (pytest.approx(slopes.mean() - half), pytest.approx(slopes.mean() + half))
    # one seed: an estimate without an interval, so no claim on it holds or fails
    one = claims.slope_interval(xs.tolist(), [ys[0].tolist()])
    assert one.estimate == pytest.approx(slopes[0]) and (one.low, one.high) == (-math.inf, math.inf)
    assert claims.below(one, 0.0) is None and claims.within(one, -0.5, 10.0) is None and "1 seed" in str(one)
    # a seed with a value <= 0 has no slope: left out and said so
    bad = claims.slope_interval(xs.tolist(), [y.tolist() for y in ys[:3]] + [[1.0, 0.0, 1.0, 1.0]])
    assert bad.seeds == 3 and bad.estimate == pytest.approx(slopes[:3].mean()) and "1 of 4 seeds" in bad.note
    with pytest.raises(ValueError, match="one value per x"):
        claims.slope_interval(xs.tolist(), [[1.0, 2.0]])


def test_slope_claims_hold_fail_or_have_no_signal():
    xs = [1.0, 10.0, 100.0]
    steep = [[x ** s for x in xs] for s in (-1.02, -0.98, -1.01, -0.99)]   # slope −1 ± 0.02
    s = claims.slope_interval(xs, steep)
    assert claims.below(s, 0.0) is True and claims.exceeds(s, 0.0) is False
    assert claims.within(s, -1.0, 0.1) is True      # inside (−1.1, −0.9)
    assert claims.within(s, -0.5, 0.1) is False     # all of it below −0.6
    assert claims.within(s, -1.1, 0.1) is None      # straddles −1.0
    noisy = claims.slope_interval(xs, [[x ** s for x in xs] for s in (-2.0, 1.5)])   # two seeds, far apart
    assert claims.below(noisy, 0.0) is None
    half = T95[1] * np.std([-2.0, 1.5], ddof=1) / math.sqrt(2)
    assert noisy.high - noisy.estimate == pytest.approx(half)
    with pytest.raises(ValueError, match="tol must be > 0"):
        claims.within(s, -1.0, 0.0)
    assert str(s.scaled(0.5)).startswith("-0.50 [")


def test_difference_intervals_against_numpy():
    a, b = np.array([0.30, 0.32, 0.29]), np.array([0.10, 0.20, 0.15, 0.12, 0.18])
    d = claims.difference_interval(a.tolist(), b.tolist())
    half = T95[2] * math.sqrt(a.var(ddof=1) / 3 + b.var(ddof=1) / 5)   # min(3, 5) − 1 = 2 degrees of freedom
    assert d.estimate == pytest.approx(a.mean() - b.mean()) and d.high - d.estimate == pytest.approx(half)
    assert claims.exceeds(d, 0.0) is True
    p = claims.paired_interval([1.0, 2.0, 3.0], [0.5, 1.0, 2.9])
    diffs = np.array([0.5, 1.0, 0.1])
    assert p.estimate == pytest.approx(diffs.mean())
    assert p.high - p.estimate == pytest.approx(T95[2] * diffs.std(ddof=1) / math.sqrt(3))
    assert claims.difference_interval([1.0], [0.0, 0.1]).low == -math.inf   # one seed on a side: no interval
    m = claims.mean_interval([2.0, 2.0])
    assert (m.low, m.high) == (2.0, 2.0) and claims.exceeds(m, 2.0) is False   # at the threshold is not past it
    assert claims.judged({"a": True, "b": None, "c": False}) == "1 hold, 1 fail, 1 no signal (of 3)"
