"""nonsmooth-compare: every method's parameters at comparable cost, the paired comparisons judged on
constructed n(β), and a tiny run of all five methods writing every output."""

import dataclasses
import math

import pytest

from dpnc_reproduce import nonsmooth_compare as exp
from dpnc_reproduce import protocol
from dpnc_reproduce.nonsmooth_rates import claims as rates_claims
from dpnc_reproduce.nonsmooth_rates import report as rates_report
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


def test_every_method_gets_its_theorems_parameters_at_comparable_cost():
    for n, d in ((2_000, 4), (8_000, 16)):
        config = {
            m: rates.parameters(exp.FULL, m, n=n, d=d, epsilon=2.0, alpha=0.1)
            for m in rates.METHODS
        }
        ztc, naive = config["zo-o2nc"], config["zo-o2nc:naive"]
        assert ztc.oracle == "variance-reduced" and naive.oracle == "naive"
        # the naive oracle with m = d reads at most n examples and spends 2d evaluations per
        # example, as ZTC does
        assert naive.m == ztc.m == d and naive.epochs * naive.period <= n
        assert rates.evaluations(naive, d) == 2 * d * naive.epochs * naive.period
        assert rates.evaluations(config["klt"], d) <= rates.evaluations(ztc, d)
        assert (
            config["klt:first-order"].oracle == "first-order" and config["klt:first-order"].m <= d
        )
        multipass = config["klt:multi-pass"]
        assert multipass.oracle == "multi-pass" and multipass.m <= d
        assert multipass.steps <= exp.FULL.multipass_max_steps


def test_the_theorems_order_the_methods_as_the_papers_do():
    """At the grid's base cell the theorems' n: multi-pass < KLT single pass (ZO = FO) < ZTC <
    naive, and the naive oracle's n grows fastest with d (d³/ρ² against ZTC's d^{3/2}/ρ)."""

    def n(method, d):
        return rates_report.theory_n(
            method, d=d, epsilon=2.0, alpha=0.1, beta=0.55, config=exp.FULL
        )

    assert (
        n("klt:multi-pass", 4)
        < n("klt", 4)
        == n("klt:first-order", 4)
        < n("zo-o2nc", 4)
        < n("zo-o2nc:naive", 4)
    )
    growth = {m: math.log(n(m, 16) / n(m, 4)) / math.log(4) for m in rates.METHODS}
    assert growth["zo-o2nc:naive"] > growth["zo-o2nc"] > growth["klt"]
    assert (
        2.5 < growth["zo-o2nc:naive"] <= 3
        and 1 < growth["zo-o2nc"] <= 1.5
        and 0.5 < growth["klt"] <= 1
    )


def test_paired_log_ratio_keeps_censored_seeds_censored():
    inf = math.inf
    assert rates_report.paired_log_ratio(4000, 1000, 16_000) == pytest.approx(2.0)
    only_fewer = rates_report.paired_log_ratio(inf, 4000, 16_000)  # only `fewer` reached: ≥ 2
    assert (only_fewer.lower, only_fewer.upper, only_fewer.at) == (
        pytest.approx(2.0),
        inf,
        pytest.approx(2.0),
    )
    only_more = rates_report.paired_log_ratio(4000, inf, 16_000)  # only `more` reached: ≤ −2
    assert (only_more.lower, only_more.upper, only_more.at) == (
        -inf,
        pytest.approx(-2.0),
        pytest.approx(-2.0),
    )
    assert rates_report.paired_log_ratio(inf, inf, 16_000) is None


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


def test_full_is_every_method_over_a_d_sweep():
    assert exp.FULL.methods == rates.NAMES and exp.FULL.seeds == 10
    assert len(exp.FULL.tasks()) == 10 * 5 * (
        3 + 2
    )  # radial d ∈ {4, 8, 16}, radial-nonconvex d ∈ {4, 8}
