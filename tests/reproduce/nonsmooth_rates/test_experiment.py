"""nonsmooth-rates as an experiment: a tiny run writes every output and reads back as it was."""

import pytest

from dpnc_reproduce import protocol
from dpnc_reproduce.nonsmooth_rates import run as exp
from dpnc_reproduce.nonsmooth_rates.experiment import EXPERIMENT
from tests.reproduce.nonsmooth_rates.tiny import TINY
from tests.reproduce.written import assert_written


@pytest.mark.slow
def test_tiny_run_writes_every_output(tmp_path):
    result = protocol.run_experiment(EXPERIMENT, TINY, progress=False, workers=1)
    for r in result.rows:
        assert isinstance(r, exp.RateRow)
        assert r.samples_used <= r.n and r.n in (200, 400)
        assert r.evaluations == exp.evaluations(
            exp.parameters(TINY, r.method, n=r.n, d=r.d, epsilon=r.epsilon, alpha=r.alpha), r.d
        )  # the counts are the run's
        assert 0 <= r.output_norm <= 1 and 0 <= r.expected_norm <= 1
        assert (
            r.certified <= 1 + 1e-12 and r.certified_uniform <= 1 + 1e-12
        )  # convex combinations of unit vectors
        assert r.population_bound > r.certified
        assert r.epsilon_zcdp == pytest.approx(r.epsilon, rel=1e-9)
    summary = assert_written(
        result,
        tmp_path,
        "dpnc reproduce nonsmooth-rates (test)",
        {"thresholds.csv", "fig_sample_complexity.png"},
    )
    assert "| objective | method | exponent in |" in summary and "Certificate tightness" in summary
    assert "at equal function evaluations" in summary and "every run is (ε, δ_DP)-DP" in summary
