"""nonsmooth-rates' runs: the oracle counts are exact (KLT at most ZTC's evaluations), the doubling
stops at the smallest β in the objective's unit, and the configuration validates."""

import dataclasses

import pytest

from dpnc_reproduce.nonsmooth_rates import run as exp
from dpnc_reproduce.nonsmooth_rates.experiment import EXPERIMENT
from tests.reproduce.nonsmooth_rates.tiny import TINY


def test_klt_gets_at_most_ztcs_evaluations_and_the_counts_are_exact():
    for n, d in ((2_000, 4), (8_000, 16)):
        ztc, klt = (
            exp.parameters(TINY, m, n=n, d=d, epsilon=2.0, alpha=0.1) for m in ("zo-o2nc", "klt")
        )
        ours, theirs = exp.evaluations(klt, d), exp.evaluations(ztc, d)
        assert ours <= theirs < exp.evaluations(dataclasses.replace(klt, m=klt.m + 1), d)
        assert ztc.m == d


@pytest.mark.parametrize("objective, stops_at", [("radial", 400), ("radial-nonconvex", 800)])
def test_the_doubling_stops_at_the_smallest_beta_in_the_objectives_unit(
    monkeypatch, objective, stops_at
):
    """β is in units of the far-field slope 1 − 2q (0.7 on radial-nonconvex): the doubling must go
    on until Ē reaches min β × 0.7 there, else thresholds() finds every smaller β censored at the n
    where it stopped."""
    config = dataclasses.replace(TINY, n_max=3_200, betas=(0.5,), main_beta=0.5, repel=0.15)
    norms = {200: 0.6, 400: 0.45, 800: 0.34, 1_600: 0.3}
    blank = {f.name: None for f in dataclasses.fields(exp.RateRow)}
    monkeypatch.setattr(
        exp, "run_at", lambda config, task, n: exp.RateRow(**{**blank, "expected_norm": norms[n]})
    )
    rows = EXPERIMENT.run_one(config, (objective, 2, 4.0, 0.2, "zo-o2nc", 0))
    assert [r.expected_norm for r in rows] == [norms[n] for n in (200, 400, 800) if n <= stops_at]


def test_config_validates():
    with pytest.raises(ValueError, match="main_beta"):
        dataclasses.replace(TINY, main_beta=0.5)
    with pytest.raises(ValueError, match="nonconvex_dims"):
        dataclasses.replace(TINY, nonconvex_dims=(5,))
    with pytest.raises(ValueError, match="n_max"):
        dataclasses.replace(TINY, n_max=100)
    assert len(exp.FULL.tasks()) == 10 * 2 * (
        len(exp.FULL.cells("radial")) + len(exp.FULL.cells("radial-nonconvex"))
    )
