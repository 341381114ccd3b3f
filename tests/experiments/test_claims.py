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
