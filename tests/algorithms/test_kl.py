"""Menart et al. (docs/papers.md, Menart et al. §5): privacy sums, noise scales, round counts,
descent, radii, selection, rates."""

from __future__ import annotations

import functools
import math
import statistics

import numpy as np
import pytest
import torch
from scipy import stats

from dpnc.algorithms import menart as kl
from dpnc.algorithms.base import Setting
from dpnc.privacy import NoiseSource
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.releases import ExponentialMechanism, Gaussian, ZCDPMechanism
from dpnc.problems.kl import LeastSquares, PowerGrowth, Quadratic, SinePL

D = 10


class ZeroNoise:
    """A noise source that adds nothing (Menart et al. §5.2's "noise disabled" hook); marks results
    not private."""

    secret = False

    def gaussian(self, shape, sigma, *, dtype=torch.float64, device="cpu"):
        return torch.zeros(shape, dtype=dtype, device=device)

    def gaussian_scalar(self, sigma):
        return 0.0


class RecordingNoise:
    """A seeded test source that keeps every vector it draws (for the SPIDER error identity)."""

    def __init__(self, seed: int) -> None:
        self.source = NoiseSource.for_testing(seed)
        self.secret = False
        self.draws: list[torch.Tensor] = []

    def gaussian(self, shape, sigma, **kwargs):
        z = self.source.gaussian(shape, sigma, **kwargs)
        self.draws.append(z.clone())
        return z

    def gaussian_scalar(self, sigma):
        return self.source.gaussian_scalar(sigma)


def _run(
    config: type, f, *, w0=None, noise=None, accountant=None, relation="replace-one", **fields
):
    """``config.of(Setting.of(f), **fields).run(f, w0, noise=..., accountant=...)``: the objective's
    constants, a secret noise source and the accountant of ``relation`` unless given (``run`` itself
    requires both)."""
    noise = NoiseSource() if noise is None else noise
    accountant = Accountant(relation) if accountant is None else accountant
    return config.of(Setting.of(f), **fields).run(
        f, w0, noise=noise, accountant=accountant, generator=torch.Generator()
    )


spider = functools.partial(_run, kl.KLSpider)
proximal = functools.partial(_run, kl.ProximalPoint)
adaptive = functools.partial(_run, kl.AdaptiveGD)


def start(objective, fraction: float = 0.9) -> torch.Tensor:
    """A start point at ``fraction`` of the region's radius from w*."""
    direction = torch.ones(objective.dim, dtype=torch.float64) / math.sqrt(objective.dim)
    return objective.w_star + fraction * objective.constants.region.radius * direction


def schedule_for(objective, rho=1.0, beta=0.05, paper=False):
    return kl.spider_schedule(
        n=objective.n,
        d=objective.dim,
        rho=rho,
        beta=beta,
        gamma=objective.constants.gamma,
        kappa=objective.constants.kappa,
        L0=objective.constants.L0,
        L1=objective.constants.L1,
        F0=(objective.constants.gamma * objective.constants.L0) ** objective.constants.kappa,
        paper=paper,
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


def _median_excess(algorithm, make, nsrs, seeds=5, **kwargs):
    medians = []
    for nsr in nsrs:
        f = make(int(nsr))
        excess = [
            float(
                f.value(
                    algorithm(
                        f, rho=1.0, w0=start(f), noise=NoiseSource.for_testing(s), **kwargs
                    ).output
                )
            )
            - f.constants.F_star
            for s in range(seeds)
        ]
        medians.append(statistics.median(excess))
    return medians


def _slope(nsrs, medians, d=D):
    return float(np.polyfit(np.log(np.asarray(nsrs) / math.sqrt(d)), np.log(medians), 1)[0])


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
    slope = _slope(nsrs, _median_excess(spider, make, nsrs))
    assert -kappa - 0.3 <= slope <= -kappa + 0.35


# --- Algorithm 2 + 4: proximal point --------------------------------------------------------------


def test_proximal_point_splits_the_budget_and_stays_in_the_prox_ball():
    f = PowerGrowth(3.0, 1, n=200, radius=1.0)
    calls = []

    def inner(queries, center, **kwargs):
        calls.append(kwargs)
        return kl.noisy_projected_gd(queries, center, **kwargs)

    r = proximal(
        f,
        rho=1.0,
        beta=0.1,
        w0=start(f),
        inner=inner,
        max_inner_iters=50,
        noise=NoiseSource.for_testing(0),
    )
    T = r.stats.rounds
    assert len(calls) == T
    assert all(
        c["rho"] == pytest.approx(1.0 / T) and c["beta"] == pytest.approx(0.1 / T) for c in calls
    )
    assert r.stats.inner_max_distance <= r.stats.inner_radius + 1e-12
    assert r.accountant.rho() == pytest.approx(1.0, rel=1e-9)


def test_noisy_projected_gd_ledger_and_averaging():
    f = Quadratic(2, n=50)
    for paper, expected in ((False, 0.3), (True, None)):
        acc = Accountant()
        queries = kl.PrivateGradients(f, noise=NoiseSource.for_testing(1), accountant=acc)
        out = kl.noisy_projected_gd(
            queries,
            f.w_star.clone(),
            rho=0.3,
            beta=0.1,
            L0=f.constants.L0,
            weak_convexity=1.0,
            paper=paper,
            max_iters=40,
        )
        T_A = out.steps + 1
        if expected is not None:
            assert acc.rho() == pytest.approx(expected, rel=1e-12)
        else:  # the paper's σ² = 4L0²T_A/(n²ρ): ρ/(2T_A) per query, T_A − 1 queries
            assert acc.rho() == pytest.approx(0.3 * (T_A - 1) / (2 * T_A), rel=1e-12)
    # averaging weights sum to 1: without noise and starting at the minimiser every u_s is c, so ū =
    # c
    queries = kl.PrivateGradients(f, noise=ZeroNoise(), accountant=Accountant())
    c = f.w_star + 0.3
    g = Quadratic(2, n=50, c=c)
    queries = kl.PrivateGradients(g, noise=ZeroNoise(), accountant=Accountant())
    out = kl.noisy_projected_gd(
        queries, c.clone(), rho=0.3, beta=0.1, L0=g.constants.L0, weak_convexity=1.0, max_iters=25
    )
    assert torch.allclose(out.w, c, atol=1e-15)


@pytest.mark.slow
def test_proximal_point_rate_kappa_3():
    """Menart et al. §5.10: κ = 3 (τ = 1.5), d = 1: the median excess falls like Theorem 2's bound.

    The bound (γL0√(T·d·log(…))/(n√ρ))^κ has slope −3 only asymptotically; its log factors (T grows
    with log n) make it ≈ −2.5 over n√ρ ∈ [100, 1000], so the measured slope is compared with the
    bound's own. The excess is ≈ |Z|^1.5 for a near-Gaussian final error Z, which spreads over two
    decades between seeds, so the mean over seeds is fitted (a median of five is erratic: bootstrap
    SD 0.87 against the mean's 0.42). The tolerance is three bootstrap standard deviations of the
    fitted slope, and that deviation must stay below 0.5 so the test still tells −2.6 from −1. Inner
    solver capped at 200 steps (the theory's n²ρlog² is out of reach). Measured: slope −2.40, bound
    −2.58, bootstrap SD 0.42."""
    nsrs, seeds = [100, 300, 1000], 5
    excess, bounds = [], []
    for n in nsrs:
        f = PowerGrowth(3.0, 1, n=n)
        excess.append(
            [
                float(
                    f.value(
                        proximal(
                            f,
                            rho=1.0,
                            w0=start(f),
                            max_inner_iters=200,
                            noise=NoiseSource.for_testing(s),
                        ).output
                    )
                )
                for s in range(seeds)
            ]
        )
        c = f.constants
        bounds.append(
            kl.proximal_point_bound(
                n=n,
                d=1,
                rho=1.0,
                beta=0.05,
                gamma=c.gamma,
                kappa=3.0,
                L0=c.L0,
                weak_convexity=c.weak_convexity,
                F0=(c.gamma * c.L0) ** 3,
            )
        )
    x = np.log(nsrs)
    slope = float(np.polyfit(x, np.log(np.mean(excess, axis=1)), 1)[0])
    predicted = float(np.polyfit(x, np.log(bounds), 1)[0])
    rng = np.random.default_rng(0)
    boot = [
        np.polyfit(x, np.log([np.mean(rng.choice(e, seeds)) for e in excess]), 1)[0]
        for _ in range(2000)
    ]
    spread = float(np.std(boot))
    assert spread < 0.5, spread
    assert abs(slope - predicted) <= 3 * spread, (slope, predicted, spread)
    assert -3.2 < predicted < -2.2


def test_proximal_point_refuses_kappa_below_2():
    with pytest.raises(ValueError, match="kappa >= 2"):
        proximal(Quadratic(D, n=100), rho=1.0, kappa=1.5)


# --- Algorithm 3: adaptive noisy GD ---------------------------------------------------------------


def test_adaptive_gd_noise_charges_and_halting():
    f = SinePL.generate(D, 2000, seed=0, radius=3.0)  # the region holds w0
    noise = RecordingNoise(5)
    rho = 4.0
    r = adaptive(
        f, rho=rho, w0=torch.full((D,), 0.8, dtype=torch.float64), noise=noise, strict=False
    )
    st = r.stats
    n, d, ell = f.n, D, st.ell
    assert ell == pytest.approx(math.log(n * math.sqrt(rho) / 0.05))
    sigmas = torch.tensor(st.sigmas)
    assert bool((sigmas >= st.sigma_min * (1 - 1e-12)).all())
    floored = [s <= st.sigma_min * (1 + 1e-12) for s in st.sigmas]
    assert not any(floored[:-1])  # a floored step is always the last
    assert st.steps <= math.floor(n * math.sqrt(rho) / 2) + 1
    assert st.charged <= rho + math.sqrt(rho) / n + 1e-12
    assert sum(st.charges[:-1]) <= rho / 2
    # the ledger holds the filter's bound, not the realised charges
    assert [type(e.release) for e in r.accountant.ledger] == [ZCDPMechanism]
    assert r.accountant.rho() == pytest.approx(rho + math.sqrt(rho) / n)
    assert "privacy filter" in " ".join(r.report(1e-6).notes)
    # unfloored steps: σ_t = √2·N_t/√(dℓ) under replace-one (calibrated), N_t the released norm
    norms = [float(f.gradient(w).norm()) for w in r.stats.iterates[:-1]]
    assert len(norms) == st.steps
    vector_draws = [z for z in noise.draws if z.ndim == 1]
    ratios = [
        float(z.norm()) * f.constants.L0 / s for z, s in zip(vector_draws, st.sigmas)
    ]  # per unit of L0
    # ‖g − ∇F‖/σ_t ~ χ_d: mean √d within 4 standard errors (sd of χ_d ≈ 1/√2)
    assert (
        abs(statistics.mean(ratios) - math.sqrt(d))
        < 4 * (1 / math.sqrt(2)) / math.sqrt(len(ratios)) + 0.05
    )


def test_adaptive_gd_strict_never_exceeds_rho_and_is_reproducible():
    f = Quadratic(D, n=10**6)
    runs = [adaptive(f, rho=0.5, w0=start(f), noise=NoiseSource.for_testing(7)) for _ in range(2)]
    assert torch.equal(runs[0].stats.iterates, runs[1].stats.iterates)
    assert runs[0].stats.charged <= 0.5 + 1e-12
    assert runs[0].accountant.rho() == pytest.approx(0.5)


def test_adaptive_gd_paper_mode_doubles_the_true_cost_under_replace_one():
    f = Quadratic(D, n=10**6)
    r = adaptive(f, rho=0.5, w0=start(f), paper=True, noise=NoiseSource.for_testing(7))
    assert r.accountant.rho() == pytest.approx(1.0)
    r = adaptive(f, rho=0.5, w0=start(f), relation="add/remove", noise=NoiseSource.for_testing(7))
    assert r.accountant.rho() == pytest.approx(0.5)


@pytest.mark.parametrize("kappa", [1.5, 2.0])
def test_adaptive_gd_rate(kappa):
    """Menart et al. §5.8: at fixed d the (1/(n√ρ))^{κ/2} term dominates; slope ≤ −κ/2 + 0.2
    (measured −0.66 / −1.24)."""
    nsrs = [1e6, 1e7, 1e8, 1e9]
    slope = _slope(
        nsrs, _median_excess(adaptive, lambda n: PowerGrowth(kappa, D, n=n), nsrs, seeds=7)
    )
    assert slope <= -kappa / 2 + 0.2


@pytest.mark.slow
def test_excess_falls_with_the_budget():
    """Menart et al. §5.9: excess risk is (stochastically) nonincreasing in ρ, here over medians of
    7 seeds."""
    f = PowerGrowth(1.5, D, n=10**6)
    medians = [
        statistics.median(
            float(f.value(alg(f, rho=rho, w0=start(f), noise=NoiseSource.for_testing(s)).output))
            for s in range(7)
        )
        for alg in (spider, adaptive)
        for rho in (0.01, 1.0, 100.0)
    ]
    for a in (medians[:3], medians[3:]):
        assert a[0] > a[1] > a[2]


# --- Algorithm 3+: selection ----------------------------------------------------------------------


def test_selection_frequencies_follow_the_exponential_mechanism():
    """Menart et al. §5.5: frequencies of t* match softmax(−n√ρ‖∇F(w_t)‖/(2Δ)) (chi-square, 5000
    draws)."""
    f = Quadratic(2, n=40)
    iterates = torch.stack(
        [f.w_star + t * torch.tensor([0.05, 0.0], dtype=torch.float64) for t in range(6)]
    )
    rho = 0.04
    noise = NoiseSource.for_testing(11)
    acc = Accountant()
    draws = [
        kl.select_stationary(f, iterates, rho=rho, L0=f.constants.L0, noise=noise, accountant=acc)
        for _ in range(5000)
    ]
    norms = f.gradient(iterates).norm(dim=1)
    delta = 2 * f.constants.L0 / f.n  # replace-one
    p = torch.softmax(-math.sqrt(rho) * norms / (2 * delta), 0).numpy()
    observed = np.bincount(draws, minlength=6)
    assert stats.chisquare(observed, 5000 * p).pvalue > 1e-3
    assert p.max() / p.min() > 1.5  # the test distinguishes selection from uniform
    assert isinstance(acc.ledger[0].release, ExponentialMechanism)
    assert acc.ledger[0].release.epsilon == pytest.approx(math.sqrt(rho))
    assert acc.rho() == pytest.approx(5000 * rho / 8)


def test_adaptive_gd_with_selection_releases_an_iterate():
    f = SinePL.generate(D, 500, seed=1, radius=2.0)  # the region holds w0
    r = adaptive(
        f,
        rho=1.0,
        w0=torch.full((D,), 0.5, dtype=torch.float64),
        select=True,
        noise=NoiseSource.for_testing(0),
    )
    assert torch.equal(r.output, r.stats.iterates[r.stats.selected])
    assert r.accountant.rho() == pytest.approx(1.0 + 1.0 / 8)
    paper = adaptive(
        f,
        rho=1.0,
        w0=torch.full((D,), 0.5, dtype=torch.float64),
        select=True,
        paper=True,
        noise=NoiseSource.for_testing(0),
    )
    # paper: score sensitivity L0/n under replace-one really gives ε = 2√ρ, i.e. ρ = (2)²/8 on top
    #     of the filter's 2ρ
    assert paper.accountant.rho() == pytest.approx(2.0 + 4.0 / 8)
