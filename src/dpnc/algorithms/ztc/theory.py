"""Zhang–Tran–Cutkosky's theory: the paper's ρ, the sensitivities and variance of its oracles, the
stationarity bound, the sample complexity of Theorem 4.9 and Appendix E, and the cost of a run (pure
functions of public numbers; the configs are read by duck typing, so this module imports no config).

References: X. Zhang, H. Tran, A. Cutkosky, "Private zeroth-order nonsmooth nonconvex optimization",
ICLR 2024 (arXiv:2406.19579); docs/papers.md, ZTC §3, §6.
"""

from __future__ import annotations

import math

from dpnc.privacy.budget import epsilon_to_rho
from dpnc.privacy.tree import leaf_participation


def paper_rho(epsilon: float, dp_delta: float) -> float:
    """The paper's ρ whose ρ²/2-zCDP gives exactly (ε, δ)-DP (optimal conversion)."""
    return math.sqrt(2 * epsilon_to_rho(epsilon, dp_delta))


def sensitivities(d: int, L: float, T: int, B1: int, B2: int) -> tuple[float, float]:
    """Replace-one sensitivities of the epoch's terms (Lemmas 3.1–3.2, Cor 4.4).

    s₁ = 2dL/B1 for the GRAD anchor; s₂ = 2dL·(2D)/(B2·δ) = 4dL/(B2·T) for a DIFF, because O2NC
    keeps ‖w_t − w_{t−1}‖ ≤ 2D = 2δ/T (and the oracle checks it at every step)."""
    return 2 * d * L / B1, 4 * d * L / (B2 * T)


def variance_bound(d: int, L: float, T: int, B1: int, B2: int, m: int | None = None) -> float:
    """V ≥ E‖∇F̂_δ(w_t) − g_t‖² for the noiseless running sum (Lemma 4.8, any t ≤ T).

    m = d (the paper): V = 16dL²/B1 + 64dL²/(B2·T). Other m: GRAD's (2(d+1)²/m + 8)L²/B1 plus T−1
    DIFFs of (4(d²+d)/m + 8d)L²(2D)²/(B2δ²) each (ZTC §3, generalisation to m directions).
    """
    m = d if m is None else m
    if m == d:
        return 16 * d * L**2 / B1 + 64 * d * L**2 / (B2 * T)
    grad = (2 * (d + 1) ** 2 / m + 8) * L**2 / B1
    diff = (4 * (d**2 + d) / m + 8 * d) * L**2 * 4 / (B2 * T**2)
    return grad + (T - 1) * diff


def guarantee(config, *, d: int, L: float, gap: float) -> float:
    """A bound on E‖∂F(w̄)‖_{2δ} with explicit constants (Lemma 4.6/Cor 4.7 with D = δ/T; ZTC §3):

        (F* + 2Lδ)/(δK) + G/√T + cross,   G² ≥ sup E‖g̃_t‖²,   F* = ``gap`` ≥ F(x₀) − inf F.

    Variance-reduced (Theorem 4.9's proof): G² = 3V + 3L² + 3ℓ_T·d·σ² and cross = 2(√V +
    √(ℓ_T·d)·σ), where V is :func:`variance_bound` and ℓ_T = ⌊log₂T⌋ + 1 bounds the tree's nodes per
    step. Naive (App. E): G² = L² + V + dσ² with V GRAD's variance; the errors g̃_t − ∇F̂_δ(w_t) are
    martingale differences (fresh batch, fresh noise), so cross = √((V + dσ²)/T)."""
    V, G, ell = moments(config, d, L)
    T, sigma = config.period, config.sigma
    if config.oracle == "naive":
        cross = math.sqrt((V + d * sigma**2) / T)
    else:
        cross = 2 * (math.sqrt(V) + math.sqrt(ell * d) * sigma)
    return (
        (gap + 2 * L * config.smoothing) / (config.smoothing * config.epochs)
        + G / math.sqrt(T)
        + cross
    )


def moments(config, d: int, L: float) -> tuple[float, float, int]:
    if config.oracle == "naive":
        V = (2 * (d + 1) ** 2 / config.m + 8) * L**2 / config.B1
        return V, math.sqrt(L**2 + V + d * config.sigma**2), 1
    V = variance_bound(d, L, config.period, config.B1, config.B2, config.m)
    ell = leaf_participation(config.period)
    return V, math.sqrt(3 * V + 3 * L**2 + 3 * ell * d * config.sigma**2), ell


def clamp_steps(T: float, most: int) -> int:
    if most < 2:
        raise ValueError("M must be >= 4 so that an epoch has T >= 2 steps")
    return int(min(max(round(T), 2), most))


def samples_needed(
    oracle: str, *, beta: float, d: int, L: float, gap: float, smoothing: float, rho: float
) -> float:
    """The n at which the theorem's bound on E‖∂F(w̄)‖_{2δ} reaches β, constants 1 and logs dropped
    (ρ the paper's).

    * ``"variance-reduced"`` (Theorem 4.9): n ≍ (F* + Lδ)·d/(δβ³) + (F* + Lδ)·d^{3/2}/(ρδβ²) (L = 1
      in the terms' exponents; the L of the bound multiplies F*'s partner Lδ);
    * ``"naive"`` (Appendix E): its bound (F* + Lδ)T/(δn) + (√d + 1 + d^{3/2}/ρ)/√T at its best T is
      ≍ ((F* + Lδ)/(δn))^{1/3}·(√d + 1 + d^{3/2}/ρ)^{2/3}, so n ≍ (F* + Lδ)(√d + 1 +
      d^{3/2}/ρ)²/(δβ³).
    """
    scale = gap + L * smoothing
    if oracle == "variance-reduced":
        return scale * d / (smoothing * beta**3) + scale * d**1.5 / (rho * smoothing * beta**2)
    if oracle == "naive":
        return scale * (math.sqrt(d) + 1 + d**1.5 / rho) ** 2 / (smoothing * beta**3)
    raise ValueError(f"oracle must be 'variance-reduced' or 'naive'; got {oracle!r}")


def evaluations(config) -> int:
    """Function evaluations of a run of ``config`` (either oracle): 2m per example read, GRAD and
    DIFF alike (a DIFF's two points share their m directions: 2m differences of two values, counted
    as in :func:`dpnc.estimators.diff_estimate`)."""
    return 2 * config.m * config.samples
