"""One snapshot per rendered summary: every reproduction's ``summary.md``
(:func:`dpnc_reproduce.protocol.summary`: header, setting, claims, declarations, tables), rendered
from small fixed rows — no run, seconds only — and compared with the committed
``tests/reproduce/snapshots/<experiment>.md``.

A change to a summary is made on purpose: ``DPNC_UPDATE_SNAPSHOTS=1 pytest
tests/reproduce/test_snapshots.py`` rewrites the snapshots (review their diff before committing);
without it a difference fails with a unified diff. Everything a real run would vary (run time,
machine, load, paths) is fixed here, not masked."""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
from pathlib import Path

import pytest

from dpnc_reproduce import (
    EXPERIMENTS,
    dpzero_dimension,
    dpzero_lm,
    dpzero_synthetic,
    kl_rates,
    nonsmooth_compare,
    nonsmooth_rates,
    protocol,
    utility,
)
from dpnc_reproduce.dpzero_synthetic import run as synthetic
from dpnc_reproduce.nonsmooth_rates import run as rates
from tests.reproduce.dpzero_dimension import rows as dimension_rows
from tests.reproduce.dpzero_lm import rows as lm_rows
from tests.reproduce.kl_rates import rows as kl_rows
from tests.reproduce.results import constructed_result
from tests.reproduce.utility import rows as utility_rows

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("DPNC_UPDATE_SNAPSHOTS") == "1"


def _dpzero_lm() -> protocol.Result:
    acc = lm_rows.CLEAR
    config = dataclasses.replace(
        lm_rows.FULL_SET, tasks=("SST-2", "SST-5", "TREC"), data_dir="data"
    )
    return constructed_result(
        dpzero_lm.EXPERIMENT,
        config,
        lm_rows.with_correct(lm_rows.lm_rows(acc, spread=0.3), agree=0.9),
    )


def _dpzero_dimension() -> protocol.Result:
    config = dataclasses.replace(dimension_rows.CONFIG, data_dir="data")
    return constructed_result(dpzero_dimension.EXPERIMENT, config, dimension_rows.dim_rows())


def _dpzero_synthetic() -> protocol.Result:
    """Two seeds of every method on every Hessian at d = 20, 60, 200, on a 2 × 2 × 2 grid of (T,
    step size, C): DP-GD best, DPGD-0th worst, the norm growing with d and with the rank."""
    config = dataclasses.replace(
        synthetic.QUICK,
        dims=(20, 60, 200),
        steps=(40, 160),
        stepsizes=(0.1, 0.3),
        clips=(1.0, 3.0),
        seeds=2,
    )
    scale, rank = (
        {"DPZero": 1.0, "DPGD-0th": 3.0, "DP-GD": 0.8},
        {"identity": 1.0, "sqrt": 0.5, "inverse": 0.25},
    )
    rows = []
    for h in ("identity", "sqrt", "inverse"):
        for d in config.dims:
            for m in synthetic.METHODS:
                for T in (40, 160):
                    for i, (step, C) in enumerate(((0.1, 1.0), (0.1, 3.0), (0.3, 1.0), (0.3, 3.0))):
                        for s in range(config.seeds):
                            norm = (
                                scale[m]
                                * rank[h]
                                * d ** (0.5 if h == "identity" else 0.05)
                                * (1 + 0.02 * s)
                                * (1 + 0.1 * i)
                                * (1.2 if T == 40 else 1.0)
                            )
                            rows.append(
                                synthetic.SyntheticRow(
                                    h,
                                    rank[h] * d,
                                    d,
                                    m,
                                    T,
                                    step,
                                    C,
                                    1.1 * norm,
                                    norm,
                                    norm**2 / 2,
                                    1.1 * norm**2 / 2,
                                    1.5,
                                    2.0,
                                    1.9,
                                    1.8,
                                    True,
                                    s,
                                )
                            )
    return constructed_result(dpzero_synthetic.EXPERIMENT, config, rows)


def _kl_rates() -> protocol.Result:
    """KL-Spider's and the proximal point method's n sweeps (power-1.5, d = 1) and the proximal
    point's inner check."""
    rows = (
        kl_rows.spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.45, algorithm="kl-spider")
        + kl_rows.spider_rows(lambda x, s: (1 + 0.05 * s) * x**-2.0)
        + kl_rows.check_rows(1.0, seeds=3)
    )
    return constructed_result(kl_rates.EXPERIMENT, kl_rows.TINY, rows)


def _rate_rows(config: rates.RatesConfig, n_beta) -> list:
    """Rows whose expected norm crosses the main β at ``n_beta(method, d, seed)`` on the config's
    doubling grid, at every d of the d sweep."""
    grid = [config.n_start * 2**k for k in range(int(math.log2(config.n_max / config.n_start)) + 1)]
    beta = config.main_beta * rates.far_field(config, "radial")
    out = []
    for method in config.methods:
        for d in config.dims:
            for seed in range(config.seeds):
                for n in grid:
                    norm = beta / 2 if n >= n_beta(method, d, seed) else 2 * beta
                    out.append(
                        rates.RateRow(
                            "radial",
                            method,
                            d,
                            config.base_epsilon,
                            config.base_alpha,
                            seed,
                            n,
                            n,
                            2 * d * n,
                            d,
                            n // 4,
                            1,
                            norm,
                            norm,
                            0.5,
                            norm,
                            norm,
                            norm + 0.05,
                            config.base_epsilon,
                            0.99 * config.base_epsilon,
                            0.9 * config.base_epsilon,
                            0.0,
                        )
                    )
    return out


def _nonsmooth_rates() -> protocol.Result:
    config = dataclasses.replace(
        rates.QUICK,
        methods=("zo-o2nc", "klt"),
        dims=(2, 4, 8),
        epsilons=(4.0,),
        alphas=(0.2,),
        base_d=2,
        base_epsilon=4.0,
        base_alpha=0.2,
        objectives=("radial",),
        nonconvex_dims=(),
        seeds=3,
        n_start=100,
        n_max=6400,
        betas=(0.6, 0.8),
        main_beta=0.8,
    )
    rows = _rate_rows(config, lambda m, d, s: (100 if m == "klt" else 200) * d * (1 + s % 2))
    return constructed_result(nonsmooth_rates.EXPERIMENT, config, rows)


def _nonsmooth_compare() -> protocol.Result:
    config = dataclasses.replace(
        nonsmooth_compare.QUICK,
        dims=(2, 4),
        nonconvex_dims=(),
        base_d=2,
        seeds=2,
        n_start=100,
        n_max=3200,
    )
    cost = {"klt:multi-pass": 1, "klt:first-order": 2, "klt": 3, "zo-o2nc": 4, "zo-o2nc:naive": 8}
    rows = _rate_rows(config, lambda m, d, s: 100 * cost[m] * d * (1 + s))
    return constructed_result(nonsmooth_compare.EXPERIMENT, config, rows)


def _utility() -> protocol.Result:
    """DPZero 1.2× the hand-set baselines' excess risk, ten seeds, one least-squares cell."""
    rows = utility_rows.baselines() + [
        utility_rows.row("dpzero", "dpnc", s, 1.2 * (1 + utility_rows.jitter(s))) for s in range(10)
    ]
    rows = [dataclasses.replace(r, problem="least-squares") for r in rows]
    return constructed_result(utility.EXPERIMENT, utility_rows.CONFIG, rows)


RESULTS = {
    "dpzero-lm": _dpzero_lm,
    "dpzero-dimension": _dpzero_dimension,
    "dpzero-synthetic": _dpzero_synthetic,
    "kl-rates": _kl_rates,
    "nonsmooth-rates": _nonsmooth_rates,
    "nonsmooth-compare": _nonsmooth_compare,
    "utility": _utility,
}


def assert_snapshot(name: str, text: str) -> None:
    """``text`` is the committed snapshot ``name``, or (with DPNC_UPDATE_SNAPSHOTS=1) becomes it."""
    path = SNAPSHOTS / f"{name}.md"
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        pytest.fail(
            f"no snapshot {path}: write it with DPNC_UPDATE_SNAPSHOTS=1 pytest {Path(__file__).name}"
        )
    expected = path.read_text()
    if text != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                text.splitlines(keepends=True),
                f"{path.name} (committed)",
                f"{path.name} (rendered now)",
            )
        )
        pytest.fail(
            f"the {name} summary differs from its snapshot; if the change is meant, rewrite it with "
            f"DPNC_UPDATE_SNAPSHOTS=1 pytest tests/reproduce/test_snapshots.py\n{diff}",
            pytrace=False,
        )


@pytest.mark.parametrize("name", list(RESULTS))
def test_summary_matches_its_snapshot(name):
    result = RESULTS[name]()
    assert result.experiment.name == name
    assert_snapshot(name, protocol.summary(result, f"dpnc reproduce {name} (snapshot)"))


def test_every_reproduction_has_a_snapshot_case():
    """A new reproduction of the registry without a case here fails."""
    assert set(RESULTS) == set(EXPERIMENTS)
