"""nonsmooth-compare as an experiment: a tiny run of every method writes every output."""

import pytest

from dpnc_reproduce import nonsmooth_compare as exp
from dpnc_reproduce import protocol
from dpnc_reproduce.nonsmooth_rates import run as rates
from tests.reproduce.nonsmooth_compare.tiny import TINY
from tests.reproduce.written import assert_written


@pytest.mark.slow
def test_tiny_run_of_every_method_writes_every_output(tmp_path):
    result = protocol.run_experiment(exp.EXPERIMENT, TINY, progress=False, workers=1)
    assert {r.method for r in result.rows} == set(rates.METHODS)
    for r in result.rows:
        if r.method in (
            "zo-o2nc",
            "zo-o2nc:naive",
            "klt",
        ):  # the single-pass function-evaluation counts are the run's
            assert r.evaluations == rates.evaluations(
                rates.parameters(TINY, r.method, n=r.n, d=r.d, epsilon=r.epsilon, alpha=r.alpha),
                r.d,
            )
        assert r.evaluations > 0
        assert r.samples_used <= r.n and 0 <= r.expected_norm <= 1
        assert r.epsilon_zcdp == pytest.approx(r.epsilon, rel=1e-9)
    summary = assert_written(
        result,
        tmp_path,
        "dpnc reproduce nonsmooth-compare (test)",
        {"thresholds.csv", "fig_sample_complexity.png"},
    )
    for text in (
        "naive oracle",
        "KLT first-order",
        "KLT multi-pass",
        "at equal function evaluations KLT",
        "| objective | method | exponent in |",
        "every run is (ε, δ_DP)-DP",
    ):
        assert text in summary, text
