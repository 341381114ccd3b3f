"""nonsmooth-rates: n(β) read off the doubling, exponents judged against the theorems', equal evaluations, files."""

import dataclasses
import math

import pytest

from dpnc.experiments import claims as stats
from dpnc.experiments import nonsmooth_rates as exp
from dpnc.experiments import protocol
from tests.experiments.written import assert_written

TINY = exp.RatesConfig(dims=(2, 3), epsilons=(4.0,), alphas=(0.2,), base_d=2, base_epsilon=4.0, base_alpha=0.2,
                       objectives=("radial",), nonconvex_dims=(), seeds=2, n_start=200, n_max=400,
                       betas=(0.6, 0.8), main_beta=0.8, n_test=300, n_axis=50, rim=1, certificate_samples=4)


def test_crossing_interpolates_in_log_n_and_flags_the_ends():
    series = [(1000, 0.9), (2000, 0.7), (4000, 0.5)]
    assert exp.crossing(series, 0.6) == pytest.approx(math.sqrt(2000 * 4000))   # halfway in log n
    assert exp.crossing(series, 0.95) == 1000 and exp.crossing(series, 0.1) == math.inf


def test_supported_drops_the_most_censored_points_until_half_the_seeds_are_complete():
    inf = math.inf
    ys = [[1, 2, 3, inf], [1, 2, inf, inf], [1, 2, 3, inf], [1, 2, 3, 4]]
    assert exp.supported(ys) == [0, 1, 2]                    # 3 of 4 seeds complete on d = 1, 2, 3
    assert exp.supported([[1, inf, inf], [1, inf, inf]]) == [0, 1]   # never below two points
    assert exp.supported([[1, 2], [1, 2]]) == [0, 1]


def test_consistent_judges_an_exponent():
    iv = stats.Interval
    assert stats.consistent(iv(1.0, 0.6, 1.4, 10), 1.2, 0.15, 0.5) is True       # contains, informative
    assert stats.consistent(iv(1.0, 0.0, 2.0, 10), 1.2, 0.15, 0.5) is None       # contains, too wide
    assert stats.consistent(iv(1.3, 1.25, 1.34, 10), 1.2, 0.15, 0.5) is True     # excludes, but within ±0.15
    assert stats.consistent(iv(2.0, 1.8, 2.2, 10), 1.2, 0.15, 0.5) is False      # excludes
    assert stats.consistent(iv(2.0, -math.inf, math.inf, 1), 2.0, 0.15, 0.5) is None
    with pytest.raises(ValueError, match="tol"):
        stats.consistent(iv(1.0, 0.9, 1.1, 3), 1.0, 0.0, 0.5)


def test_klt_gets_at_most_ztcs_evaluations_and_the_counts_are_exact():
    for n, d in ((2_000, 4), (8_000, 16)):
        ztc, klt = (exp.parameters(TINY, m, n=n, d=d, epsilon=2.0, alpha=0.1) for m in ("ztc", "klt-zo"))
        ours, theirs = exp.evaluations(klt, d), exp.evaluations(ztc, d)
        assert ours <= theirs < exp.evaluations(dataclasses.replace(klt, m=klt.m + 1), d)
        assert ztc.m == d


@pytest.mark.slow
def test_tiny_run_writes_every_output(tmp_path):
    result = protocol.run_experiment(exp.EXPERIMENT, TINY, progress=False, workers=1)
    for r in result.rows:
        assert isinstance(r, exp.RateRow)
        assert r.samples_used <= r.n and r.n in (200, 400)
        assert r.evaluations == exp.evaluations(exp.parameters(TINY, r.method, n=r.n, d=r.d, epsilon=r.epsilon,
                                                               alpha=r.alpha), r.d)   # the counts are the run's
        assert 0 <= r.output_norm <= 1 and 0 <= r.expected_norm <= 1
        assert r.certified <= 1 + 1e-12 and r.certified_uniform <= 1 + 1e-12   # convex combinations of unit vectors
        assert r.population_bound > r.certified
        assert r.epsilon_zcdp == pytest.approx(r.epsilon, rel=1e-9)
    summary = assert_written(result, tmp_path, "dpnc reproduce nonsmooth-rates (test)",
                             {"thresholds.csv", "fig_sample_complexity.png"})
    assert "| objective | method | exponent in |" in summary and "Certificate tightness" in summary
    assert "at equal function evaluations" in summary and "every run is (ε, δ_DP)-DP" in summary


def test_config_validates():
    with pytest.raises(ValueError, match="main_beta"):
        dataclasses.replace(TINY, main_beta=0.5)
    with pytest.raises(ValueError, match="nonconvex_dims"):
        dataclasses.replace(TINY, nonconvex_dims=(5,))
    with pytest.raises(ValueError, match="n_max"):
        dataclasses.replace(TINY, n_max=100)
    assert len(exp.FULL.tasks()) == 10 * 2 * (len(exp.FULL.cells("radial")) + len(exp.FULL.cells("radial-nonconvex")))
