"""nonsmooth-rates: n(β) read off the doubling, exponents judged against the theorems', equal
evaluations, files."""

import dataclasses
import math

import pytest

from dpnc_reproduce import claims as stats
from dpnc_reproduce import protocol
from dpnc_reproduce.loglog import GROWS, SHRINKS, loglog_fit
from dpnc_reproduce.nonsmooth_rates import report
from dpnc_reproduce.nonsmooth_rates import run as exp
from dpnc_reproduce.nonsmooth_rates.experiment import EXPERIMENT
from tests.reproduce.written import assert_written

TINY = exp.RatesConfig(
    dims=(2, 3),
    epsilons=(4.0,),
    alphas=(0.2,),
    base_d=2,
    base_epsilon=4.0,
    base_alpha=0.2,
    objectives=("radial",),
    nonconvex_dims=(),
    seeds=2,
    n_start=200,
    n_max=400,
    betas=(0.6, 0.8),
    main_beta=0.8,
    n_test=300,
    n_axis=50,
    rim=1,
    certificate_samples=4,
)


def test_crossing_interpolates_in_log_n_and_flags_the_ends():
    series = [(1000, 0.9), (2000, 0.7), (4000, 0.5)]
    assert report.crossing(series, 0.6) == pytest.approx(math.sqrt(2000 * 4000))  # halfway in log n
    assert report.crossing(series, 0.95) == 1000 and report.crossing(series, 0.1) == math.inf


def _threshold(n_beta, censored=False):
    return report.Threshold("radial", "zo-o2nc", 4, 2.0, 0.1, 0.8, 0, n_beta, censored)


def test_censored_n_keeps_every_seed_with_its_range():
    assert report.censored_n(_threshold(300.0), TINY) == 300.0
    assert report.censored_n(_threshold(math.inf), TINY) == stats.Censored(
        400.0, math.inf
    )  # not reached by n_max
    assert report.censored_n(_threshold(200.0, True), TINY) == stats.Censored(
        1.0, 200.0
    )  # reached at n_start
    assert report.censored_n(None, TINY) == stats.Censored(0.0, math.inf)


def test_an_exponent_is_judged_one_sided_and_censored_seeds_count():
    xs, theory = [4.0, 8.0, 16.0], [x**1.5 for x in (4.0, 8.0, 16.0)]  # the theorem: n ∝ d^1.5
    slower = [
        [100 * x**s for x in xs] for s in (0.9, 1.0, 1.1, 1.0, 0.95)
    ]  # grows slower: consistent
    e = report._exponent("radial", "zo-o2nc", "d", 0.8, (4, 2.0, 0.1), xs, slower, theory)
    assert e.theory == pytest.approx(1.5) and e.verdict is True and e.reached == "5/5 seeds"
    faster = [[x**s for x in xs] for s in (2.4, 2.5, 2.6, 2.5, 2.45)]
    assert (
        report._exponent("radial", "zo-o2nc", "d", 0.8, (4, 2.0, 0.1), xs, faster, theory).verdict
        is False
    )
    # one seed never reached β at d = 16: kept, its slope open above, so "grows no faster" cannot
    # hold
    censored = slower[:4] + [[100 * 4.0, 100 * 8.0, stats.Censored(400.0, math.inf)]]
    c = report._exponent("radial", "zo-o2nc", "d", 0.8, (4, 2.0, 0.1), xs, censored, theory)
    assert (
        c.fitted.censored == 1
        and c.fitted.high == math.inf
        and c.verdict is None
        and c.reached == "4/5 seeds"
    )
    assert "censored" in report.reason(c, [], TINY)


def test_a_paired_ratio_with_one_side_censored_is_censored():
    assert report.paired_log_ratio(800.0, 200.0, 1000) == pytest.approx(2.0)
    assert report.paired_log_ratio(math.inf, 250.0, 1000) == stats.Censored(2.0, math.inf)
    assert report.paired_log_ratio(250.0, math.inf, 1000) == stats.Censored(-math.inf, -2.0)
    assert report.paired_log_ratio(math.inf, math.inf, 1000) is None


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


def test_exponents_are_judged_in_their_variables_regime():
    """n ≤ C·N(d, ε, α, β): for ε (x → 0) a slope steeper than N's fails and a shallower one holds —
    the reverse of the rule for d (x → ∞); α is not judged on this instance."""
    eps = [0.5, 2.0, 8.0]
    theory = [5000 * e**-0.37 for e in eps]

    def seeds(slope, xs=eps):
        return [[1000 * (1 + 0.02 * s) * x**slope for x in xs] for s in range(6)]

    steep = report._exponent(
        "radial", "klt", "epsilon", 0.55, (4, 2.0, 0.1), eps, seeds(-1.17), theory
    )
    assert steep.regime == SHRINKS and steep.theory == pytest.approx(-0.37)
    assert steep.tolerance.value == pytest.approx(
        -report.LOG_POWER["klt"] * loglog_fit(eps, [math.log(t) for t in theory])
    )
    assert steep.verdict is False  # the old rule (≤ bound + 0.1) said it holds
    assert report._exponent(
        "radial", "klt", "epsilon", 0.55, (4, 2.0, 0.1), eps, seeds(-0.2), theory
    ).verdict
    ds = [4, 8, 16]
    up = [100 * d**0.8 for d in ds]
    grows = report._exponent(
        "radial",
        "klt",
        "d",
        0.55,
        (4, 2.0, 0.1),
        ds,
        [[10 * (1 + 0.02 * s) * d**1.5 for d in ds] for s in range(6)],
        up,
    )
    assert grows.regime == GROWS and grows.verdict is False  # n(β) grows faster than N in d: fails
    alphas = [0.05, 0.1, 0.2]
    alpha = report._exponent(
        "radial",
        "zo-o2nc",
        "alpha",
        0.55,
        (4, 2.0, 0.1),
        alphas,
        seeds(-1.63, alphas),
        [5000 * a**-0.9 for a in alphas],
    )
    assert (
        alpha.verdict is None and alpha.rule is False
    )  # not testable by slope here; the rule kept
