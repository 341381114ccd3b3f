"""Menart et al.'s Algorithm 3, adaptive noisy GD, and the exponential-mechanism selection of an
iterate (docs/papers.md, Menart et al. §5): noise charges, halting, rates, selection."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
import torch
from scipy import stats

from dpnc.algorithms import menart as kl
from dpnc.privacy import NoiseSource
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.releases import ExponentialMechanism, ZCDPMechanism
from dpnc.problems.kl import PowerGrowth, Quadratic, SinePL
from tests.algorithms.menart import (
    D,
    RecordingNoise,
    adaptive,
    median_excess,
    rate_slope,
    spider,
    start,
)

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
    slope = rate_slope(
        nsrs, median_excess(adaptive, lambda n: PowerGrowth(kappa, D, n=n), nsrs, seeds=7)
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
