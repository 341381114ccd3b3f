"""nonsmooth-compare's grids: every method gets its theorem's parameters at comparable cost, the
theorems order the methods as the papers do, and the full grid is every method over a d sweep."""

import math

from dpnc_reproduce import nonsmooth_compare as exp
from dpnc_reproduce.nonsmooth_rates import report as rates_report
from dpnc_reproduce.nonsmooth_rates import run as rates


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


def test_full_is_every_method_over_a_d_sweep():
    assert exp.FULL.methods == rates.NAMES and exp.FULL.seeds == 10
    assert len(exp.FULL.tasks()) == 10 * 5 * (
        3 + 2
    )  # radial d ∈ {4, 8, 16}, radial-nonconvex d ∈ {4, 8}
