"""Kornowski–Liu–Talwar (docs/papers.md, KLT §6): schedules, sample accounting, sensitivity audits,
privacy."""

import dataclasses
import itertools
import math

import pytest
import torch

from dpnc.algorithms import klt
from dpnc.algorithms.base import Setting
from dpnc.algorithms.klt import KornowskiLiuTalwar
from dpnc.algorithms.klt import theory as klt_theory
from dpnc.certify import certify_run
from dpnc.estimators import ball_gradient_estimate
from dpnc.privacy import Accountant, NoiseSource, rho_to_epsilon
from dpnc.privacy.budget import Budget
from dpnc.privacy.calibrate import klt_tree_sigma
from dpnc.privacy.tree import leaf_participation
from dpnc.problems.base import Constants
from dpnc.problems.nonsmooth import AbsLinear, L1Regression
from tests.toys import generator

BASE = dict(d=5, L=1.0, Phi=1.0, alpha=0.1, epsilon=2.0, dp_delta=1e-6)
SINGLE = ("zeroth-order", "first-order")


def klt_from_theory(oracle, *, n, d, L, Phi, alpha, epsilon, dp_delta, **choices):
    """Theorems 3.1/6.1/4.1 in the paper's symbols: Φ (the setting's gap), α (smoothing), (ε, δ)."""
    return KornowskiLiuTalwar.from_theory(
        Setting(Constants(L0=L), n, d, gap=Phi),
        Budget(epsilon, dp_delta),
        smoothing=alpha,
        oracle=oracle,
        **choices,
    )


def params(oracle, n=4000, **overrides):
    kwargs = {**BASE, **overrides}
    if oracle == "multi-pass":
        kwargs.setdefault("max_steps", 200)
    return klt_from_theory(oracle, n=n, **kwargs)


# --- schedules ------------------------------------------------------------------------------------


@pytest.mark.parametrize("oracle", SINGLE)
@pytest.mark.parametrize(
    "n, d, epsilon, alpha",
    itertools.product((50, 1000, 100_000), (1, 5, 50), (0.5, 8.0), (0.01, 1.0)),
)
def test_single_pass_schedule_fits_the_data(oracle, n, d, epsilon, alpha):
    p = klt_from_theory(
        oracle, n=n, d=d, L=1.0, Phi=1.0, alpha=alpha, epsilon=epsilon, dp_delta=1e-6
    )
    assert p.samples <= 2 * p.steps + p.period <= n
    assert 1 <= p.period <= p.steps and 1 <= p.block <= p.steps and p.steps // p.block >= 1
    assert p.block * p.D <= alpha / 4 or p.block == 1  # M = ⌊α/(4D)⌋ unless clamped to 1
    assert (p.B1, p.B2) == (p.period, 1)


@pytest.mark.parametrize("oracle", ("zeroth-order", "first-order", "multi-pass"))
@pytest.mark.parametrize("paper", (False, True))
def test_schedules_are_unit_free(oracle, paper):
    """f → c·f leaves D, Σ, M, T, m unchanged and scales σ by c; x → c·x scales D by c, σ by 1/c."""
    c = 7.0
    p = params(oracle, paper=paper)
    f = params(oracle, paper=paper, L=c * BASE["L"], Phi=c * BASE["Phi"])
    x = params(oracle, paper=paper, L=BASE["L"] / c, alpha=c * BASE["alpha"])
    for q in (f, x):
        assert (q.period, q.block, q.steps, q.m) == (p.period, p.block, p.steps, p.m)
    assert f.D == pytest.approx(p.D) and x.D == pytest.approx(c * p.D)
    assert f.sigma_anchor == pytest.approx(c * p.sigma_anchor) and x.sigma_anchor == pytest.approx(
        p.sigma_anchor / c
    )
    assert f.sigma_increment == pytest.approx(c * p.sigma_increment)
    assert f.eta == pytest.approx(p.eta / c) and x.eta == pytest.approx(c**2 * p.eta)


def test_literal_multi_pass_radius_is_not_unit_free():
    """Why KLT §7 A9 replaces Thm 4.1's D = α²β²/L²: under x → c·x it scales by c², not by c."""
    alpha, beta, L, c = 0.1, 0.05, 1.0, 7.0
    literal = lambda a, b, lip: a**2 * b**2 / lip**2  # noqa: E731
    assert literal(c * alpha, beta / c, L / c) == pytest.approx(c**2 * literal(alpha, beta, L))
    p = klt_from_theory("multi-pass", n=1000, **BASE, beta=beta)
    q = klt_from_theory(
        "multi-pass", n=1000, **{**BASE, "alpha": c * alpha, "L": L / c}, beta=beta / c
    )
    assert q.D == pytest.approx(c * p.D) and q.steps == p.steps


def test_paper_mode_takes_the_papers_directions_and_refuses_fewer():
    p = params("zeroth-order", paper=True)
    assert p.m == klt_theory.paper_directions(
        "zeroth-order", d=5, alpha=p.smoothing, D=p.D, B1=p.B1, B2=p.B2, delta=1e-6
    )
    assert p.m > 5**2 * p.B1**2  # d²B1²·log: astronomically many (KLT §7 A18)
    assert p.mechanism_delta == 1e-6 / 2
    with pytest.raises(ValueError, match="paper=True needs m >="):
        params("zeroth-order", paper=True, m=10)
    assert params("zeroth-order", m=10).m == 10  # safe mode: any m is private


def test_tree_noise_calibrations():
    p = params("zeroth-order", calibration="prop-2.5")
    s = max(p.s_anchor, p.s_increment)
    assert p.sigma_anchor == klt_tree_sigma(s, p.period, p.budget.epsilon, p.budget.delta)
    q = params("zeroth-order")
    rho = (
        leaf_participation(q.period) * s**2 / (2 * q.sigma_anchor**2)
    )  # Lvl Gaussian node releases
    assert rho_to_epsilon(rho, q.budget.delta) == pytest.approx(q.budget.epsilon, rel=1e-9)
    assert q.sigma_anchor < p.sigma_anchor / 2  # Prop 2.5 is loose


def test_sensitivities_and_radii():
    p = params("zeroth-order")
    s_a, s_v = klt_theory.sensitivities(d=5, L=1.0, alpha=p.smoothing, D=p.D, B1=p.B1, B2=p.B2)
    assert (
        (p.s_anchor, p.s_increment)
        == (s_a, s_v)
        == (3 / p.B1, 5 * math.sqrt(5) * p.D / p.smoothing)
    )
    assert p.anchor_radius == 1.5 and p.increment_radius == pytest.approx(
        2.5 * math.sqrt(5) * p.D / p.smoothing
    )


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(oracle="x"), "oracle must be"),
        (dict(schedule="x"), "schedule must be"),
        (dict(n=0), "n must be"),
        (dict(alpha=0.0), "smoothing must be"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(dp_delta=1.0), "delta must be"),
        (dict(Phi=math.nan), "gap must be"),
    ],
)
def test_validation(bad, match):
    kwargs = {**BASE, "n": 1000, "oracle": "zeroth-order", **bad}
    with pytest.raises(ValueError, match=match):
        klt_from_theory(kwargs.pop("oracle"), **kwargs)


# --- estimator ------------------------------------------------------------------------------------


@pytest.mark.parametrize("x1", (0.0, 0.05, 0.3))
def test_first_order_estimate_is_unbiased_for_the_smoothed_gradient_of_abs_x1(x1):
    """∇f_α(x) for f = |x₁| is (P(x₁ + y₁ > 0) − P(x₁ + y₁ < 0))·e₁ (closed form, incomplete
    beta)."""
    d, alpha, m = 3, 0.2, 200_000
    problem = AbsLinear(torch.eye(d, dtype=torch.float64)[0])
    x = torch.tensor([x1, 0.4, -0.2], dtype=torch.float64)
    est = ball_gradient_estimate(problem, x, torch.tensor([0]), alpha, m=m, generator=generator())
    exact = problem.smoothed_gradient(x, alpha)
    assert est.evaluations == m
    assert float(torch.linalg.vector_norm(est.mean - exact)) < 4 / math.sqrt(
        m
    )  # each summand ‖·‖ ≤ L = 1


# --- running --------------------------------------------------------------------------------------


class Recording(L1Regression):
    """ℓ1 regression that remembers which examples each evaluation read."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    def losses(self, x, index):
        self.calls.append(index.clone())
        return super().losses(x, index)

    def gradients(self, x, index):
        self.calls.append(index.clone())
        return super().gradients(x, index)


def problem(n=600, d=3, seed=0, cls=L1Regression):
    data = L1Regression.synthetic(n, d, seed=seed)
    return cls(*data.data, x_star=data.x_star)


@pytest.mark.parametrize("oracle", SINGLE)
def test_single_pass_reads_each_example_in_one_step_only(oracle):
    prob = problem(cls=Recording)
    p = klt_from_theory(oracle, n=prob.n, **{**BASE, "d": 3, "epsilon": 4.0}, m=3)
    result = p.run(
        prob,
        torch.zeros(3, dtype=torch.float64),
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
        generator=generator(),
    )
    calls = {}
    for call, index in enumerate(prob.calls):
        for i in index.tolist():
            calls.setdefault(i, []).append(call)
    assert result.stats.samples_used == p.samples == len(calls) <= prob.n
    # an anchor reads its examples in one call; an increment reads its example at z_t, then at
    # z_(t−1)
    assert all(len(c) <= 2 and c[-1] - c[0] <= 1 for c in calls.values())
    assert result.report(p.mechanism_delta).epsilon_zcdp == pytest.approx(
        p.budget.epsilon, rel=1e-9
    )


def test_single_pass_refuses_too_little_data():
    p = klt_from_theory("zeroth-order", n=600, **{**BASE, "d": 3})
    with pytest.raises(ValueError, match="examples once each"):
        p.run(
            problem(n=300),
            torch.zeros(3, dtype=torch.float64),
            noise=NoiseSource.for_testing(0),
            accountant=Accountant(),
            generator=generator(),
        )


def test_multi_pass_reads_every_example_at_every_step_and_composes():
    prob = problem(n=200, cls=Recording)
    p = klt_from_theory("multi-pass", n=200, **{**BASE, "d": 3}, max_steps=20, m=2)
    result = p.run(
        prob,
        torch.zeros(3, dtype=torch.float64),
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
        generator=generator(),
    )
    assert all(set(index.tolist()) == set(range(200)) for index in prob.calls)
    assert len(prob.calls) == p.anchors + 2 * (p.steps - p.anchors)
    assert result.accountant.releases == p.steps
    report = result.report(p.mechanism_delta)
    assert report.epsilon_zcdp == pytest.approx(p.budget.epsilon, rel=1e-9)
    assert report.epsilon_rdp <= p.budget.epsilon * 1.001 and report.epsilon_pld <= p.budget.epsilon
    assert klt_theory.population_gap(
        n=200, d=3, L=1.0, diameter=2 * p.D * p.steps
    ) == pytest.approx(math.sqrt(3 * math.log(max(math.e, 2 * p.D * p.steps / 0.05)) / 200))


def test_o2nc_invariants_and_determinism():
    prob = problem(n=2000)
    p = klt_from_theory("zeroth-order", n=2000, **{**BASE, "d": 3}, m=4)
    x0 = torch.ones(3, dtype=torch.float64)
    runs = [
        p.run(
            prob,
            x0,
            noise=NoiseSource.for_testing(1),
            accountant=Accountant(),
            generator=generator(5),
            keep_points=True,
        )
        for _ in range(2)
    ]
    a, b = runs
    assert torch.equal(a.output, b.output)  # same public and test noise seeds → same trajectory
    trace = a.trace
    assert trace.max_increment <= p.D * (1 + 1e-12) and trace.max_move <= 2 * p.D * (1 + 1e-12)
    spread = torch.linalg.vector_norm(trace.points - trace.block_averages[:, None], dim=-1).max()
    assert float(spread) <= p.block * p.D * (1 + 1e-9) <= p.smoothing
    assert float(torch.linalg.vector_norm(a.output - x0)) <= p.D * p.steps
    assert trace.block_averages.shape[0] == p.steps // p.block


# --- sensitivity audit (privacy smoke test, KLT §6) -----------------------------------------------


def neighbours(n, d, index, *, kink):
    """Two datasets that differ in example ``index`` only, replaced adversarially: near 0 its
    gradient −sign(b)·a is turned into +sign(b)·a (the largest change an L-Lipschitz example can
    make), or with ``kink`` its kink is put at 0, where the audit's walk starts (the largest change
    of an increment)."""
    data = L1Regression.synthetic(n, d, seed=3)
    a, b = data.data[0].clone(), data.data[1].clone()
    b2 = b.clone()
    b2[index] = 0.0 if kink else -50.0 * torch.sign(b[index])
    a2 = a
    return L1Regression(a, b), L1Regression(a2, b2)


def audit(p, first, second, steps, d, seed):
    """max over steps of (‖M_t − M'_t‖ / its sensitivity) with all other randomness coupled."""
    oracles = []
    for prob in (first, second):
        cls = {
            "zeroth-order": klt.ZerothOrderOracle,
            "first-order": klt.FirstOrderOracle,
            "multi-pass": klt.MultiPassOracle,
        }[p.oracle]
        oracles.append(
            cls(
                prob,
                p,
                noise=NoiseSource.for_testing(0),
                accountant=Accountant(),
                generator=generator(seed),
            )
        )
    walk = generator(4)
    z = torch.zeros(d, dtype=torch.float64)
    worst, previous = 0.0, torch.zeros(d, dtype=torch.float64)
    for t in range(1, steps + 1):
        if t > 1:
            step = torch.randn(d, generator=walk, dtype=torch.float64)
            z = z + 1.99 * p.D * step / torch.linalg.vector_norm(step)
        difference = oracles[0](t, z) - oracles[1](t, z)  # coupled noise cancels
        anchor = (t - 1) % p.period == 0
        term = difference if anchor else difference - previous
        worst = max(
            worst, float(torch.linalg.vector_norm(term)) / (p.s_anchor if anchor else p.s_increment)
        )
        previous = difference
    return worst


@pytest.mark.parametrize("oracle", ("zeroth-order", "first-order", "multi-pass"))
@pytest.mark.parametrize("where", ("anchor", "increment"))
def test_safe_mode_sensitivity_holds_under_adversarial_replacement(oracle, where):
    d, n = 3, 400
    extra = dict(max_steps=12) if oracle == "multi-pass" else {}
    p = klt_from_theory(oracle, n=n, **{**BASE, "d": d}, m=1, **extra)
    index = (
        0 if where == "anchor" or oracle == "multi-pass" else p.B1
    )  # example 0 is in the first anchor
    # The worst replacement for a first-order increment puts a kink where the iterates are; for the
    # zeroth-order estimates (odd in the direction) it flips the gradient.
    first, second = neighbours(n, d, index, kink=where == "increment" and oracle == "first-order")
    steps = min(p.steps, p.period + 3)
    seeds = range(8)  # coupled public randomness: directions / ball points
    assert max(audit(p, first, second, steps, d, seed) for seed in seeds) <= 1 + 1e-9
    # The audit can fail: without the clipping (the paper's unclipped terms with too few
    # directions), the same replacement breaks the bound the noise was calibrated for. (A
    # first-order anchor term is within its bound even unclipped: one gradient per example, ‖∇f‖ ≤
    # L.)
    if not (oracle == "first-order" and where == "anchor"):
        literal = dataclasses.replace(p, paper=True)
        assert max(audit(literal, first, second, steps, d, seed) for seed in seeds) > 1


# --- end to end -----------------------------------------------------------------------------------


def test_more_privacy_budget_certifies_closer_to_stationary():
    """Seeded noise, d = 4, n = 4000: ε = 8 reaches a smaller held-out certificate than ε = 0.05."""
    data = L1Regression.synthetic(8000, 4, seed=11)
    train, test = data.subset(torch.arange(4000)), data.subset(torch.arange(4000, 8000))
    x0 = data.x_star + torch.tensor([1.0, 0, 0, 0], dtype=torch.float64)
    bounds = {}
    for epsilon in (0.05, 8.0):
        p = klt_from_theory("zeroth-order", n=4000, **{**BASE, "d": 4, "epsilon": epsilon}, m=16)
        r = p.run(
            train,
            x0,
            noise=NoiseSource.for_testing(3),
            accountant=Accountant(),
            generator=generator(2),
            keep_points=True,
        )
        bounds[epsilon] = certify_run(r, test, generator=generator(4)).bound
    start = float(torch.linalg.vector_norm(test.gradient(x0)))
    assert bounds[8.0] < 0.5 * bounds[0.05] and bounds[8.0] < 0.5 * start
