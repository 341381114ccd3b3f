"""Zhang–Tran–Cutkosky: parameters, oracles, privacy records, behaviour (docs/papers.md, ZTC §5,
properties 9–11 and 15–18)."""

import dataclasses
import math

import pytest
import torch

from dpnc.algorithms.base import Setting
from dpnc.algorithms.o2nc import o2nc
from dpnc.algorithms.ztc import (
    NaiveOracle,
    VarianceReducedOracle,
    ZhangTranCutkosky,
    guarantee,
    paper_rho,
    sensitivities,
    variance_bound,
)
from dpnc.certify import certify_run
from dpnc.privacy import Accountant, NoiseSource, rho_to_epsilon
from dpnc.privacy.budget import ZCDP
from dpnc.problems.base import Constants
from dpnc.problems.nonsmooth import L1Regression
from tests.toys import generator


def from_theory(*, M, d, L, delta, rho, F_star, **choices):
    """Theorem 4.9 / App. E in the paper's symbols: M samples (the setting's n), smoothing δ, the
    paper's ρ, F*."""
    return ZhangTranCutkosky.from_theory(
        Setting(Constants(L0=L), M, d, gap=F_star),
        ZCDP.from_rdp_rho(rho),
        smoothing=delta,
        **choices,
    )


variance_reduced = ZhangTranCutkosky.variance_reduced
naive = ZhangTranCutkosky.naive


# --- the parameter calculator (property 15) -------------------------------------------------------


@pytest.mark.parametrize("M", [100, 10_000, 1_000_000])
def test_theorem_4_9_settings(M):
    p = from_theory(M=M, d=10, L=1.0, delta=0.1, rho=0.5, F_star=1.0)
    assert isinstance(p.period, int) and 2 <= p.period <= M // 2
    assert (p.epochs, p.B1, p.B2, p.m) == (M // (2 * p.period), p.period + 1, 1, 10)
    assert p.D == pytest.approx(0.1 / p.period) and p.samples == 2 * p.epochs * p.period <= M


def test_T_is_the_max_formula_and_monotone_in_rho():
    M, d, L, delta, F = 200_000, 20, 1.0, 0.1, 2.0
    T1 = (math.sqrt(d) * L * delta * M / (F + L * delta)) ** (2 / 3)
    T2 = lambda rho: (d**1.5 * L * delta * M / ((F + L * delta) * rho)) ** 0.5
    for rho in (0.01, 0.1, 1.0):
        assert from_theory(M=M, d=d, L=L, delta=delta, rho=rho, F_star=F).period == round(
            max(T1, T2(rho))
        )
    Ts = [
        from_theory(M=M, d=d, L=L, delta=delta, rho=rho, F_star=F).period
        for rho in (1e6, 10.0, 1.0, 0.1, 0.01)
    ]
    assert Ts == sorted(Ts)  # T does not decrease as ρ decreases
    assert Ts[0] == round(T1)  # and is the non-private value as ρ → ∞


def test_cor_4_4_condition_is_enforced():
    with pytest.raises(ValueError, match="B1 must be >= T·B2/2"):
        variance_reduced(d=5, L=1.0, smoothing=0.1, rho=1.0, period=100, epochs=2, B1=10, B2=1)
    p = variance_reduced(d=5, L=1.0, smoothing=0.1, rho=1.0, period=100, epochs=2, B1=50, B2=1)
    assert p.B1 == 50


def test_noise_follows_cor_4_4_and_the_accountant_spends_exactly_rho():
    """σ = √(⌊log₂T⌋+1)·max(s₁, s₂)/ρ; s₂ = 4dL/(B2T) ≥ s₁ = 2dL/B1 when B1 ≥ T·B2/2."""
    d, L, T, rho = 7, 2.0, 64, 0.8
    p = variance_reduced(d=d, L=L, smoothing=0.1, rho=rho, period=T, epochs=3)
    s1, s2 = sensitivities(d, L, T, p.B1, p.B2)
    assert s1 <= s2 == pytest.approx(4 * d * L / T)
    assert p.sigma == pytest.approx(math.sqrt(7) * s2 / rho)
    paper = variance_reduced(d=d, L=L, smoothing=0.1, rho=rho, period=T, epochs=3, paper=True)
    assert paper.sigma == pytest.approx(4 * math.sqrt(2 * math.log(T)) * d * L / (rho * T))


def test_from_theory_takes_the_directions_without_changing_the_schedule():
    for oracle, default in (("variance-reduced", 12), ("naive", 1)):
        plain = from_theory(M=8_000, d=12, L=1.0, delta=0.1, rho=0.5, F_star=1.0, oracle=oracle)
        more = from_theory(M=8_000, d=12, L=1.0, delta=0.1, rho=0.5, F_star=1.0, oracle=oracle, m=5)
        assert plain.m == default and more.m == 5
        assert (more.period, more.epochs, more.B1, more.B2) == (
            plain.period,
            plain.epochs,
            plain.B1,
            plain.B2,
        )


def test_naive_noise_is_the_corrected_2dL_over_B_rho():
    p = naive(d=6, L=1.5, smoothing=0.1, rho=0.5, period=10, epochs=3, B=4)
    assert p.sigma == pytest.approx(2 * 6 * 1.5 / (4 * 0.5))


def test_guarantee_falls_with_samples_and_privacy_is_free_at_large_rho():
    bounds = [
        guarantee(
            from_theory(M=M, d=10, L=1.0, delta=0.1, rho=1.0, F_star=1.0), d=10, L=1.0, gap=1.0
        )
        for M in (10**4, 10**6, 10**8)
    ]
    assert bounds[0] > bounds[1] > bounds[2]
    # ρ ≥ √d·ε: the non-private term dominates, so a larger ρ barely helps.
    loose, tight = (
        guarantee(
            from_theory(M=10**6, d=10, L=1.0, delta=0.1, rho=r, F_star=1.0), d=10, L=1.0, gap=1.0
        )
        for r in (1e3, 1e6)
    )
    assert loose == pytest.approx(tight, rel=0.05)


def test_per_step_noise_energy_ratio_is_log_squared_over_T_squared():
    """Property 17: d·(2dL/ρ)² (naive, B = 1) vs ℓ_T·d·σ_VR² (tree): ratio Θ(ln²T/T²)."""
    d, L, rho = 10, 1.0, 1.0
    for T in (16, 256, 4096):
        vr = variance_reduced(d=d, L=L, smoothing=0.1, rho=rho, period=T, epochs=1)
        base = naive(d=d, L=L, smoothing=0.1, rho=rho, period=T, epochs=1)
        ratio = (math.floor(math.log2(T)) + 1) * d * vr.sigma**2 / (d * base.sigma**2)
        assert 1 <= ratio / (math.log(T) ** 2 / T**2) <= 16


# --- the oracles: data and privacy (properties 9, 11) ---------------------------------------------


def small_run(oracle="variance-reduced", M=600, d=3, seed=0, **kw):
    problem = L1Regression.synthetic(M, d, seed=seed)
    p = from_theory(M=M, d=d, L=1.0, delta=0.2, rho=1.0, F_star=1.0, oracle=oracle)
    acct = Accountant()
    result = p.run(
        problem,
        torch.zeros(d, dtype=torch.float64),
        noise=NoiseSource.for_testing(seed),
        accountant=acct,
        generator=generator(seed),
        keep_points=True,
        **kw,
    )
    return problem, p, result


@pytest.mark.parametrize("oracle", ["variance-reduced", "naive"])
def test_every_example_is_used_once_and_the_run_costs_one_epoch(oracle):
    problem, p, result = small_run(oracle)
    assert result.stats.samples_used == p.samples <= problem.n
    if oracle == "variance-reduced":
        assert p.samples == 2 * p.epochs * p.period
        assert result.stats.evaluations == 2 * problem.dim * p.samples  # 2d evaluations per example
    else:
        assert result.stats.evaluations == 2 * p.m * p.samples
    acct = result.accountant
    assert acct.releases == (p.epochs if oracle == "variance-reduced" else p.steps)
    assert acct.rho() == pytest.approx(
        p.rho**2 / 2, rel=1e-9
    )  # (α, αρ²/2)-RDP: parallel composition
    report = result.report(1e-6)
    assert not report.private and report.epsilon_rdp == pytest.approx(
        rho_to_epsilon(p.rho**2 / 2, 1e-6), rel=1e-3
    )


def test_o2nc_invariants_hold_in_a_private_run():
    problem, p, result = small_run()
    trace = result.trace
    assert trace.max_increment <= p.D * (1 + 1e-12) and trace.max_move <= 2 * p.D * (1 + 1e-12)
    spread = torch.linalg.vector_norm(trace.output_points - result.output, dim=1).max()
    assert spread <= p.smoothing * (1 + 1e-12)  # ‖w_t − w̄‖ ≤ TD = δ
    assert torch.equal(result.output, trace.block_averages[trace.output_block])


def test_runs_replay_from_public_seeds_except_for_the_noise():
    _, _, a = small_run()
    _, _, b = small_run()
    assert torch.equal(a.output, b.output)  # seeded test noise: identical
    problem = L1Regression.synthetic(600, 3, seed=0)
    p = from_theory(M=600, d=3, L=1.0, delta=0.2, rho=1.0, F_star=1.0)
    secret = [
        p.run(
            problem,
            torch.zeros(3, dtype=torch.float64),
            noise=NoiseSource(),
            accountant=Accountant(),
            generator=generator(0),
        ).output
        for _ in range(2)
    ]
    assert not torch.equal(
        secret[0], secret[1]
    )  # secret noise: the same public seed, different runs


def test_oracle_refuses_a_driver_that_moves_too_far():
    problem = L1Regression.synthetic(600, 3, seed=0)
    p = from_theory(M=600, d=3, L=1.0, delta=0.2, rho=1.0, F_star=1.0)
    oracle = VarianceReducedOracle(
        problem, p, noise=NoiseSource.for_testing(0), accountant=Accountant(), generator=generator()
    )
    with pytest.raises(RuntimeError, match="exceeds"):
        o2nc(
            oracle,
            torch.zeros(3, dtype=torch.float64),
            D=10 * p.D,
            eta=1.0,
            steps=p.steps,
            block=p.period,
            reset_each_block=True,
            generator=generator(),
        )


def test_oracles_refuse_mismatched_parameters_and_too_little_data():
    problem = L1Regression.synthetic(100, 3, seed=0)
    vr = from_theory(M=100, d=3, L=1.0, delta=0.2, rho=1.0, F_star=1.0)
    kwargs = dict(noise=NoiseSource.for_testing(0), accountant=Accountant(), generator=generator())
    with pytest.raises(ValueError, match="not 'naive'"):
        NaiveOracle(problem, vr, **kwargs)
    with pytest.raises(ValueError, match="examples once each"):
        VarianceReducedOracle(problem.subset(torch.arange(10)), vr, **kwargs)
    with pytest.raises(ValueError, match="oracle must be"):
        from_theory(M=100, d=3, L=1.0, delta=0.2, rho=1.0, F_star=1.0, oracle="other")


# --- behaviour (properties 16–18) -----------------------------------------------------------------


def test_variance_reduction_keeps_the_running_sum_close_to_the_smoothed_gradient():
    """Property 16: ‖g_t − ∇F̂_δ(w_t)‖² stays O(V) along an epoch, it does not grow with t.

    The single pass estimates the population's smoothed gradient; 4000 fresh examples stand in for
    it exactly (L1Regression's smoothing is closed form), their own error being ≪ V."""
    d, T = 4, 64
    data = L1Regression.synthetic(4_256, d, seed=1)
    population = data.subset(torch.arange(256, 4_256))
    p = variance_reduced(d=d, L=1.0, smoothing=0.2, rho=1.0, period=T, epochs=2)
    oracle = VarianceReducedOracle(
        data.subset(torch.arange(p.samples)),
        p,
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
        generator=generator(),
    )
    errors = []
    o2nc(
        oracle,
        data.x_star + 0.5,
        D=p.D,
        eta=p.eta,
        steps=p.steps,
        block=T,
        reset_each_block=True,
        generator=generator(1),
        on_step=lambda t, w, g: errors.append(
            float((oracle.g - population.smoothed_gradient(w, p.smoothing)).pow(2).sum())
        ),
    )
    V = variance_bound(d, 1.0, T, p.B1, p.B2)
    assert max(errors) <= V
    for epoch in (errors[:T], errors[T:]):
        late, early = sum(epoch[T // 2 :]) / (T // 2), sum(epoch[: T // 2]) / (T // 2)
        assert late <= 4 * early + V / T


@pytest.mark.slow
def test_variance_reduced_beats_naive_and_improves_with_samples():
    """Properties 17–18 on ℓ1 regression from 1 away from x*, ε = 2, d = 3, medians over three
    (seeded) runs: the certified ‖∂F‖_2δ falls as M grows, and at equal M and ρ the variance-reduced
    oracle ends far closer to stationarity than the naive one (whose per-step noise is Θ(T²/ln²T)
    times larger)."""
    d, delta, rho = 3, 0.2, paper_rho(2.0, 1e-6)
    data = L1Regression.synthetic(14_000, d, seed=2)
    test = data.subset(torch.arange(8_000, 14_000))
    x0 = data.x_star + torch.tensor([0.6, 0.8, 0.0], dtype=torch.float64)
    cert = {}
    for M, oracle in ((1_000, "variance-reduced"), (8_000, "variance-reduced"), (8_000, "naive")):
        p = from_theory(M=M, d=d, L=1.0, delta=delta, rho=rho, F_star=1.0, oracle=oracle)
        bounds = []
        for seed in range(3):
            r = p.run(
                data.subset(torch.arange(M)),
                x0,
                noise=NoiseSource.for_testing(seed),
                accountant=Accountant(),
                generator=generator(seed),
                keep_points=True,
            )
            bounds.append(certify_run(r, test, samples=16).bound)
        cert[(M, oracle)] = sorted(bounds)[1]
    assert cert[(8_000, "variance-reduced")] < 0.5 * cert[(1_000, "variance-reduced")]
    assert cert[(8_000, "variance-reduced")] < 0.5 * cert[(8_000, "naive")]


def test_parameters_are_frozen_records():
    p = from_theory(M=1000, d=3, L=1.0, delta=0.2, rho=1.0, F_star=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.period = 3
