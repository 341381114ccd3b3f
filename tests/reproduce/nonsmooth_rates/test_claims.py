"""nonsmooth-rates' comparison claims (the papers' comparisons, which nonsmooth-compare judges) hold,
fail or have no signal on constructed rows whose n(β) is set per method and seed."""

import dataclasses
import math

import pytest

from dpnc_reproduce.nonsmooth_rates import claims as rates_claims
from dpnc_reproduce.nonsmooth_rates import run as rates
from tests.reproduce.nonsmooth_compare.tiny import TINY


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
