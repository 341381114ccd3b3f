"""nonsmooth-compare as an experiment: a tiny run of every method writes every output, and its
comparison claims hold, fail or have no signal on constructed rows."""

import dataclasses
import math

import pytest

from dpnc_reproduce import nonsmooth_compare as exp
from dpnc_reproduce import protocol
from dpnc_reproduce.nonsmooth_rates import claims as rates_claims
from dpnc_reproduce.nonsmooth_rates import run as rates
from tests.reproduce.written import assert_written

TINY = dataclasses.replace(
    exp.QUICK,
    dims=(2, 3),
    nonconvex_dims=(),
    base_d=2,
    base_epsilon=4.0,
    epsilons=(4.0,),
    alphas=(0.2,),
    base_alpha=0.2,
    seeds=2,
    n_start=50,
    n_max=200,
    betas=(0.6, 0.8),
    main_beta=0.8,
    n_test=300,
    n_axis=50,
    rim=1,
    certificate_samples=4,
    multipass_max_steps=20,
)


def rows_with(n_beta: dict, seeds: int, config):
    """Rows whose Ē crosses the main β exactly at n_beta[(method, seed)] (inf: never) on the grid
    n_start·2^k."""
    grid = [config.n_start * 2**k for k in range(int(math.log2(config.n_max / config.n_start)) + 1)]
    beta = config.main_beta
    out = []
    for (method, seed), target in n_beta.items():
        for n in grid:
            norm = beta / 2 if n >= target else 1.0
            out.append(
                rates.RateRow(
                    "radial",
                    method,
                    config.base_d,
                    config.base_epsilon,
                    config.base_alpha,
                    seed,
                    n,
                    n,
                    1,
                    1,
                    1,
                    1,
                    norm,
                    norm,
                    0.0,
                    norm,
                    norm,
                    norm + 0.1,
                    1.0,
                    1.0,
                    1.0,
                    0.0,
                )
            )
    return out


def test_comparison_claims_hold_fail_or_have_no_signal_on_constructed_rows():
    config = dataclasses.replace(
        TINY, dims=(2,), methods=("zo-o2nc", "zo-o2nc:naive"), seeds=4, n_start=100, n_max=1600
    )

    def judged(naive, ztc):
        rows = rows_with(
            {
                **{("zo-o2nc:naive", s): v for s, v in enumerate(naive)},
                **{("zo-o2nc", s): v for s, v in enumerate(ztc)},
            },
            4,
            config,
        )
        (claim,) = (
            c for c in rates_claims.comparison_claims(rows, config) if "naive oracle" in c.statement
        )
        return claim

    def verdict(naive, ztc):
        return judged(naive, ztc).holds

    inf = math.inf
    assert verdict([800, 1600, 800, 1600], [200, 400, 200, 200]) is True  # 4–8× fewer in every seed
    # its facts: the cell's interval of log₂(n_naive/n_ztc) over the 4 seeds (2, 2, 2, 3) and the
    # cell's verdict
    read = judged([800, 1600, 800, 1600], [200, 400, 200, 200]).facts
    cell = f"d2_eps{config.base_epsilon:g}_alpha{config.base_alpha:g}"
    assert (
        read[f"{cell}_estimate"] == pytest.approx(2.25)
        and read[f"{cell}_low"] > 0
        and read["threshold"] == 0
    )
    assert (
        read[f"{cell}_seeds"] == 4
        and read[f"{cell}_holds"] == 1
        and read["parts_hold"] == read["parts"] == 1
    )
    assert verdict([inf] * 4, [200, 400, 200, 400]) is None  # every seed censored: no verdict
    assert verdict([200, 400, 200, 200], [800, 1600, 800, 1600]) is False
    assert verdict([800, 200, 400, 200], [200, 800, 400, 400]) is None  # both ways: no signal
    assert verdict([inf] * 4, [inf] * 4) is None  # neither reached


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
