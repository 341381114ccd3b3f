"""What experiments compute the same way (dpnc_reproduce.common): log-log slopes, per-seed series,
the grid's value rules and the privacy claim every private experiment judges."""

import math
from types import SimpleNamespace

import pytest

from dpnc_reproduce.common import by_seed, check_grid, fmt_slope, loglog_slope, privacy_claim


def test_the_loglog_slope_is_the_power_and_infinite_without_a_positive_value():
    xs = [10.0, 100.0, 1000.0]
    assert loglog_slope(xs, [3 * x**-1.5 for x in xs]) == pytest.approx(-1.5)
    assert loglog_slope(xs, [1.0, 0.0, 2.0]) == math.inf
    assert loglog_slope(xs, [1.0, math.nan, 2.0]) == math.inf
    assert fmt_slope(-1.4999, [1.0, 0.1]) == "-1.50"
    assert fmt_slope(-3.0, [1.0, 1e-12]) == "reaches ~0 (1.0e-12)"


def test_by_seed_gives_each_seeds_series_and_leaves_out_a_seed_missing_an_x():
    def row(seed, n, value, method="a"):
        return SimpleNamespace(seed=seed, n=n, excess=value, method=method)

    rows = [row(0, 20, 2.0), row(0, 10, 1.0), row(1, 10, 3.0), row(1, 20, 4.0), row(2, 10, 5.0)]
    rows.append(row(0, 10, 9.0, method="b"))
    assert by_seed(rows, "excess", ["method"], "n") == {
        ("a",): ([10, 20], [[1.0, 2.0], [3.0, 4.0]]),  # seed 2 has no n = 20
        ("b",): ([10], [[9.0]]),
    }


def _run(epsilon=1.0, zcdp=1.0, pld=0.9, rdp=1.05):
    return dict(epsilon=epsilon, epsilon_zcdp=zcdp, epsilon_pld=pld, epsilon_rdp=rdp)


def test_the_privacy_claim_holds_fails_or_has_no_signal():
    assert privacy_claim([_run(), _run(epsilon=4.0, zcdp=4.0, pld=3.9)]).holds is True
    assert privacy_claim([_run(), _run(pld=1.01)]).holds is False  # PLD above the target
    assert privacy_claim([_run(zcdp=0.9)]).holds is False  # zCDP must spend exactly ε
    assert privacy_claim([_run(pld=None)]).holds is None  # no run answered by every accountant
    # a run without an answer leaves the others unable to make the claim hold, not to fail it
    assert privacy_claim([_run(), _run(pld=None)]).holds is None
    assert privacy_claim([_run(pld=1.5), _run(pld=None)]).holds is False


def test_the_grid_rules_refuse_a_bad_value_by_name():
    good = dict(methods=("a",), dims=(2,), samples=(4, 8), epsilons=(1.0,), seeds=2, dp_delta=1e-5)
    check_grid(SimpleNamespace(**good), ["a", "b"])
    for field, value, rule in [
        ("methods", ("c",), "methods"),
        ("samples", (3,), "samples"),
        ("epsilons", (0.0,), "epsilons"),
        ("seeds", 0, "seeds"),
        ("dp_delta", 1.0, "dp_delta"),
    ]:
        with pytest.raises(ValueError, match=rule):
            check_grid(SimpleNamespace(**{**good, field: value}), ["a", "b"])
