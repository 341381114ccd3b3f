"""Menart et al.'s Algorithm 1, KL-Spider (docs/papers.md, Menart et al. §5): its schedule, round
noise, descent, guards and rate."""

from __future__ import annotations

import math

import pytest
import torch

from dpnc.algorithms import menart as kl
from dpnc.privacy import NoiseSource
from dpnc.privacy.releases import Gaussian
from dpnc.problems.kl import LeastSquares, PowerGrowth, Quadratic
from tests.algorithms.menart import (
    D,
    RecordingNoise,
    ZeroNoise,
    median_excess,
    rate_slope,
    schedule_for,
    spider,
    start,
)

# --- Algorithm 1: KL-Spider -----------------------------------------------------------------------


@pytest.mark.parametrize("kappa", [1.5, 2.0])
def test_spider_schedule_matches_the_spec_formulas(kappa):
    f = PowerGrowth(kappa, D, n=10**7)
    gamma, L0, L1, n, rho, beta = f.constants.gamma, f.constants.L0, f.constants.L1, f.n, 1.0, 0.05
    F0 = (gamma * L0) ** kappa
    s = schedule_for(f)
    a = (2 - kappa) / kappa
    assert s.a == pytest.approx(a)
    assert s.c == pytest.approx(1 + F0**a / (64 * gamma**2 * L1), rel=1e-14)
    bracket = math.log(F0) + kappa * math.log(n * math.sqrt(rho) / (gamma * L0 * math.sqrt(D)))
    K = math.ceil((1 + 64 * gamma**2 * L1 / F0**a) * bracket)
    assert s.K == K
    beta_p = (beta / K) * (
        gamma * L0 * math.sqrt(K * D) / (n * math.sqrt(rho) * F0 ** (1 / kappa))
    ) ** (2 - kappa)
    assert s.beta_prime == pytest.approx(beta_p, rel=1e-12)
    floor = min(
        (48 * gamma * L0 * math.sqrt(K * D * math.log(1 / beta_p)) / (n * math.sqrt(rho))) ** kappa,
        F0,
    )
    assert s.Phi_floor == pytest.approx(floor, rel=1e-12)
    Phi = [r.Phi for r in s.rounds]
    assert all(x >= y for x, y in zip(Phi, Phi[1:]))  # nonincreasing
    assert Phi == pytest.approx([max(F0 * s.c ** -(k + 1), floor) for k in range(K)], rel=1e-9)
    T = [r.T for r in s.rounds]
    assert all(x <= y for x, y in zip(T, T[1:]))  # nondecreasing
    assert T == [math.ceil((F0 / p) ** a - 1e-12) for p in Phi]
    if kappa == 2:
        assert set(T) == {1}
    else:
        assert T[-1] > 1
    for r in s.rounds:
        assert r.r == pytest.approx(r.Phi ** (1 / kappa) / (4 * gamma * L1), rel=1e-14)
        # calibrated noise: checkpoint ρ/(2K) (ρ/K without differences), differences ρ/(2K(T−1))
        # each
        share = 1 / (2 * K) if r.T > 1 else 1 / K
        assert r.sigma_hat == pytest.approx((2 * L0 / n) / math.sqrt(2 * rho * share), rel=1e-12)
        if r.T > 1:
            delta_k = r.Phi ** (1 / kappa) / (2 * gamma * n)  # 2·L1·r_k/n
            assert r.sigma == pytest.approx(
                delta_k / math.sqrt(2 * rho / (2 * K * (r.T - 1))), rel=1e-12
            )
    # the calibrated budget adds up to exactly ρ over the schedule
    total = sum(
        ((2 * L0 / n) / r.sigma_hat) ** 2 / 2 + (r.T - 1) * ((2 * L1 * r.r / n) / r.sigma) ** 2 / 2
        for r in s.rounds
    )
    assert total == pytest.approx(rho, rel=1e-12)


def test_spider_paper_noise_is_the_printed_formula():
    f = PowerGrowth(1.5, D, n=10**6)
    s = schedule_for(f, paper=True)
    gamma, nsr = f.constants.gamma, f.n
    for r in s.rounds:
        assert r.sigma_hat == pytest.approx(f.constants.L0 * math.sqrt(s.K) / nsr)
        assert r.sigma == pytest.approx(r.Phi ** (1 / 1.5) * math.sqrt(r.T * s.K) / (gamma * nsr))
    Cf32 = (
        32 * gamma * f.constants.L0 * math.sqrt(s.K * D * math.log(1 / s.beta_prime)) / nsr
    ) ** 1.5
    assert s.Phi_floor == pytest.approx(min(Cf32, (gamma * f.constants.L0) ** 1.5))


def test_spider_returns_w0_when_the_target_is_above_F0():
    f = Quadratic(D, n=3)
    s = schedule_for(f)
    assert s.bracket <= 0 and s.K == 0
    r = spider(f, rho=1.0, w0=start(f), noise=NoiseSource.for_testing(0))
    assert torch.equal(r.output, start(f)) and r.accountant.releases == 0


@pytest.mark.parametrize("kappa", [1.5, 2.0])
def test_spider_run_obeys_its_schedule(kappa):
    f = PowerGrowth(kappa, D, n=10**7)
    noise = RecordingNoise(1)
    r = spider(f, rho=1.0, w0=start(f), noise=noise)
    s = r.stats.schedule
    steps = r.stats.iterates[1:] - r.stats.iterates[:-1]
    lengths = steps.norm(dim=1)
    expected = torch.tensor(
        [rnd.r for rnd, t in zip(s.rounds, r.stats.updates) for _ in range(t)], dtype=torch.float64
    )
    assert torch.allclose(lengths, expected, rtol=1e-12)  # every step has length exactly r_k
    assert all(t <= rnd.T for rnd, t in zip(s.rounds, r.stats.updates))
    assert float((r.stats.iterates - start(f)).norm(dim=1).max()) <= s.radius * (1 + 1e-12)
    # the ledger charges the full schedule, exactly ρ, even though rounds stop early (the stopping
    # time is a function of the releases); it holds only Gaussians, and every drawn noise vector is
    # one query
    assert r.stats.rounds_stopped_early > 0
    assert r.accountant.rho() == pytest.approx(1.0, rel=1e-9)
    assert all(isinstance(e.release, Gaussian) for e in r.accountant.ledger)
    assert len(noise.draws) == r.stats.queries < r.accountant.releases or kappa == 2


def test_spider_estimate_error_is_the_sum_of_the_round_noise():
    """Menart et al. §5.2: g_{k,t} − ∇F(w_{k,t}) = Σ_{j≤t} b_{k,j}, checked along the first round
    with ≥ 3 updates."""
    f = PowerGrowth(1.5, D, n=10**8)
    noise = RecordingNoise(2)
    r = spider(f, rho=1.0, w0=start(f), noise=noise)
    rounds, updates = r.stats.schedule.rounds, r.stats.updates
    k = next(k for k, t in enumerate(updates) if t >= 3)
    position = sum(updates[:k])  # index of the round's first iterate
    first_draw = sum(1 + min(t, rnd.T - 1) for rnd, t in zip(rounds[:k], updates[:k]))
    draws = noise.draws[first_draw : first_draw + 1 + min(updates[k], rounds[k].T - 1)]
    # the releases draw noise per unit of their bound (release_sum): the checkpoint's is L0, a
    # difference's L1·r_k
    draws = [draws[0] * f.constants.L0] + [z * f.constants.L1 * rounds[k].r for z in draws[1:]]
    g = f.gradient(r.stats.iterates[position]) + draws[0]
    for j in range(1, len(draws)):
        w_prev, w = r.stats.iterates[position + j - 1], r.stats.iterates[position + j]
        g = g + (f.gradient(w) - f.gradient(w_prev)) + draws[j]
        assert torch.allclose(g - f.gradient(w), sum(draws[: j + 1]), rtol=0, atol=1e-13)
    assert len(draws) >= 3


def test_spider_without_noise_descends_monotonically():
    f = PowerGrowth(1.5, D, n=10**6)
    r = spider(f, rho=1.0, w0=start(f), noise=ZeroNoise())
    values = f.value(r.stats.iterates)
    assert len(values) > 10
    assert bool((values[1:] <= values[:-1] + 1e-15).all())
    assert not r.report(1e-6).private


def test_spider_paper_mode_reports_its_true_cost():
    f = PowerGrowth(1.5, D, n=10**7)
    r = spider(f, rho=1.0, w0=start(f), paper=True, noise=NoiseSource.for_testing(3))
    # paper: checkpoint 2ρ/K each and differences ρ/(8KT_k) each under replace-one (Menart et al.
    #     §2.1)
    s = r.stats.schedule
    upper = 2.0 + sum((rnd.T - 1) / (8 * s.K * rnd.T) for rnd in s.rounds)
    assert 1.5 < r.accountant.rho() <= upper + 1e-9 <= 2.125


def test_spider_without_example_gradients_relies_on_the_declared_region():
    """Nothing to clip (data-free): the bounds are the objective's own on its region, where w stays
    projected."""
    f = Quadratic(D, n=10**6)
    r = spider(f, rho=1.0, w0=start(f), noise=NoiseSource.for_testing(0))
    assert r.stats.sensitivity == kl.DECLARED
    region = f.constants.region
    assert float((r.stats.iterates - region.center).norm(dim=1).max()) <= region.radius * (
        1 + 1e-12
    )


def test_spider_clipping_is_a_no_op_under_the_assumptions():
    f = LeastSquares.generate(3, 400, seed=0)
    runs = [
        spider(
            f,
            rho=50.0,
            w0=f.w_star + 0.1,
            clip=clip,
            noise=NoiseSource.for_testing(4),
            L1=f.constants.L1,
            gamma=f.constants.gamma,
        )
        for clip in (False, True)
    ]
    assert torch.allclose(runs[0].output, runs[1].output, atol=1e-10)


@pytest.mark.parametrize(
    "bad",
    [
        dict(rho=0.0),
        dict(rho=-1.0),
        dict(beta=1.0),
        dict(paper="exact"),
        dict(w0=torch.zeros(3)),
        dict(gamma=-1.0),
        dict(kappa=2.5),
    ],
)
def test_spider_validates_its_arguments(bad):
    args = dict(rho=1.0) | bad
    with pytest.raises(ValueError):
        spider(PowerGrowth(1.5, D, n=10**6), **args)


@pytest.mark.slow
@pytest.mark.parametrize("kappa", [1.5, 2.0])
def test_spider_rate_and_bound(kappa):
    """Menart et al. §5.7: excess ≤ Φfloor on every seed, slope of the median vs n√ρ/√d in [−κ−0.3,
    −κ+0.35].

    The seeds' spread is tiny here (Φfloor's log factors dominate the noise): five seeds give the
    median within a few per cent, far inside the tolerance, which is for the log factors' drift over
    three decades."""
    nsrs = [1e6, 1e7, 1e8, 1e9]
    make = lambda n: PowerGrowth(kappa, D, n=n)
    for nsr in (nsrs[0], nsrs[-1]):
        f = make(int(nsr))
        floor = schedule_for(f).Phi_floor
        for s in range(5):
            assert (
                float(
                    f.value(
                        spider(f, rho=1.0, w0=start(f), noise=NoiseSource.for_testing(s)).output
                    )
                )
                <= floor
            )
    slope = rate_slope(nsrs, median_excess(spider, make, nsrs))
    assert -kappa - 0.3 <= slope <= -kappa + 0.35
