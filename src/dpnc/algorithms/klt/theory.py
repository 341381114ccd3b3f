"""Kornowski–Liu–Talwar's theorems as parameter calculators (docs/papers.md, KLT §2.6).

The schedules of Theorems 3.1, 6.1 (single pass) and 4.1 (multi-pass ERM), the sensitivities, the
directions m the paper's high-probability bounds need, the second moment G₁² that sets η, and the
rates, every constant exposed; nothing here touches data. Kornowski, Liu, Talwar,
arXiv:2410.05880 (v1 and v2, 2024)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpnc.checks import check_choice, check_integer, check_positive
from dpnc.privacy.budget import check_delta, check_epsilon, epsilon_to_rho
from dpnc.privacy.calibrate import klt_tree_sigma, zcdp_gaussian_sigma
from dpnc.privacy.tree import leaf_participation

ORACLES = ("zeroth-order", "first-order", "multi-pass")
SCHEDULES = ("v2", "v1-legacy")
CALIBRATIONS = ("zcdp", "prop-2.5")


@dataclass(frozen=True)
class TheoryConstants:
    """What the paper leaves inside Θ̃/Õ (KLT §7 A5), with KLT §2.6's defaults.

    Attributes:
        c_H: f_α is c_H·L√d/α-smooth (Fact 2.3(iii)).
        c: the norm-sub-Gaussian Hoeffding constant in the paper's m.
        c_D, c_T: multi-pass D = c_D·αβ²/L² and T = c_T·ΦL²/(αβ³).
    """

    c_H: float = 1.0
    c: float = 1.0
    c_D: float = 1.0
    c_T: float = 1.0


def sensitivities(
    *, d: int, L: float, alpha: float, D: float, B1: int, B2: int, c_H: float = 1.0
) -> tuple[float, float]:
    """(s_a, s_v) = (3L/B1, (4c_H + 1)·L√d·D/(α·B2)), KLT §2.6: the replace-one sensitivities.

    s_a: 2L/B1, plus L/B1 for the estimation error; s_v: f_α is c_H·L√d/α-smooth and ‖z_t − z_{t−1}‖
    ≤ 2D."""
    return 3 * L / B1, (4 * c_H + 1) * L * math.sqrt(d) * D / (alpha * B2)


def paper_directions(
    oracle: str,
    *,
    d: int,
    alpha: float,
    D: float,
    B1: int,
    B2: int,
    delta: float,
    T: int | None = None,
    c: float = 1.0,
) -> int:
    """The m for which the paper's high-probability sensitivities hold (KLT §2.6 step 4 and
    multi-pass).

    Zeroth-order: c²·ln(8d·max(B1, B2)/δ)·max(d²B1², dα²B2²/D²) (Lemma 3.5); first-order:
    c²·ln(8dB2/δ)·α²B2²/(D²d) (Lemma 6.4); multi-pass (B1 = B2 = n): the zeroth-order form with the
    union bound over the T steps a sample is reused in, ln(8dnT/δ) (KLT §7 A10).
    """
    if oracle == "first-order":
        return max(
            1, math.ceil(c**2 * math.log(8 * d * B2 / delta) * alpha**2 * B2**2 / (D**2 * d))
        )
    union = 8 * d * max(B1, B2) * (T if oracle == "multi-pass" else 1)
    return math.ceil(
        c**2 * math.log(union / delta) * max(d**2 * B1**2, d * alpha**2 * B2**2 / D**2)
    )


def variance_directions(
    oracle: str,
    *,
    d: int,
    L: float,
    Sigma: int,
    B1: int,
    B2: int,
    sigma_anchor: float,
    sigma_increment: float,
) -> int:
    """The fewest m whose estimation variance is at most the privacy noise's (the corrected form's
    default).

    Single pass (Lemma 3.6 / 6.5): L²d²(1/B1 + Σ/B2)/m ≤ σ²·d·Lvl for zeroth order, without the d²
    for first order. Multi-pass (Thm 4.1): m = L²dΣ/(nσ₁²) + L²d/(nσ₂²)."""
    if oracle == "multi-pass":
        m = L**2 * d * Sigma / (B1 * sigma_anchor**2) + L**2 * d / (B2 * sigma_increment**2)
    else:
        dims = d**2 if oracle == "zeroth-order" else 1
        m = L**2 * dims * (1 / B1 + Sigma / B2) / (sigma_anchor**2 * d * leaf_participation(Sigma))
    return max(1, math.ceil(m))


def second_moment(config, *, d: int, L: float) -> float:
    """G₁² ≥ E‖g̃_t‖² of a :class:`~dpnc.algorithms.klt.KornowskiLiuTalwar` config (Lemmas 3.6, 4.4,
    6.5 with constants 1, KLT §2.6 step 5)."""
    c = config
    if c.oracle == "multi-pass":
        return (
            L**2
            + L**2 * d**2 * c.period / (c.m * c.B1)
            + c.sigma_anchor**2 * d
            + c.sigma_increment**2 * d * c.period
        )
    dims = d**2 if c.oracle == "zeroth-order" else 1
    return (
        L**2
        + L**2 * dims / (c.B1 * c.m)
        + L**2 * d * c.D**2 * c.period / (c.smoothing**2 * c.B2)
        + c.sigma_anchor**2 * d * leaf_participation(c.period)
        + L**2 * dims * c.period / (c.m * c.B2)
    )


def single_pass_radius(
    *,
    n_steps: int,
    d: int,
    L: float,
    Phi: float,
    alpha: float,
    epsilon: float,
    schedule: str = "v2",
) -> float:
    """D of Theorem 3.1 with constants 1 (v2: the min of four terms; v1: of the first three)."""
    T = n_steps
    terms = [
        (Phi**2 * alpha / (L**2 * T**2)) ** (1 / 3),
        (Phi * alpha * epsilon / (d * L * T)) ** 0.5,
        (Phi**3 * alpha**2 * epsilon / (d**1.5 * L**3 * T**3)) ** 0.2,
    ]
    if schedule == "v2":
        terms.append((Phi**2 * alpha / (L**2 * T**2 * math.sqrt(d))) ** (1 / 3))
    return min(terms)


def single_pass_schedule(
    oracle: str,
    *,
    n: int,
    d: int,
    L: float,
    Phi: float,
    alpha: float,
    epsilon: float,
    mechanism_delta: float,
    schedule: str = "v2",
    calibration: str = "zcdp",
    constants: TheoryConstants = TheoryConstants(),
) -> dict:
    """Theorem 3.1 (zeroth order) or 6.1 (first order) for n examples, KLT §2.6 steps 1–4: the
    fields steps, block, period, B1, B2, D, the sensitivities and σ (η and m are set afterwards).

    ``calibration="zcdp"`` (default) sets the tree's σ so that its Lvl node releases spend exactly
    the zCDP budget of (ε, δ'): σ = s·√(Lvl/(2ρ*)), about 3× less noise than Prop 2.5's
    ``"prop-2.5"``: σ = 4s·√(Lvl·ln(1/δ'))/ε, which the accountant shows to be loose."""
    check_choice("calibration", calibration, CALIBRATIONS)
    if n < 3:
        raise ValueError(f"a single pass needs n >= 3 examples (2T + Σ <= n); got {n}")
    T = n // 2
    D = single_pass_radius(
        n_steps=T, d=d, L=L, Phi=Phi, alpha=alpha, epsilon=epsilon, schedule=schedule
    )
    spread = (alpha / (epsilon * D)) ** (2 / 3) + (
        alpha / (D * math.sqrt(d)) if schedule == "v2" else 0.0
    )
    Sigma = min(T, max(1, math.ceil(spread)))
    T = max(1, (n - Sigma) // 2)
    Sigma = min(Sigma, T)
    s_a, s_v = sensitivities(d=d, L=L, alpha=alpha, D=D, B1=Sigma, B2=1, c_H=constants.c_H)
    if calibration == "prop-2.5":
        sigma = klt_tree_sigma(max(s_a, s_v), Sigma, epsilon, mechanism_delta)
    else:
        sigma = zcdp_gaussian_sigma(
            max(s_a, s_v), epsilon_to_rho(epsilon, mechanism_delta) / leaf_participation(Sigma)
        )
    return dict(
        steps=T,
        block=block_length(alpha, D, T),
        period=Sigma,
        B1=Sigma,
        B2=1,
        D=D,
        sigma_anchor=sigma,
        sigma_increment=sigma,
        s_anchor=s_a,
        s_increment=s_v,
    )


def implied_beta(*, n: int, d: int, L: float, Phi: float, alpha: float, epsilon: float) -> float:
    """β* = (L·d^{3/4}·√Φ/(ε·√α·n))^{2/3}, the β Theorem 4.1 reaches with n examples (constants
    1)."""
    return (L * d**0.75 * math.sqrt(Phi) / (epsilon * math.sqrt(alpha) * n)) ** (2 / 3)


def multi_pass_schedule(
    *,
    n: int,
    d: int,
    L: float,
    Phi: float,
    alpha: float,
    epsilon: float,
    mechanism_delta: float,
    beta: float | None = None,
    max_steps: int | None = None,
    constants: TheoryConstants = TheoryConstants(),
) -> dict:
    """Theorem 4.1 with KLT §7 A9's dimensionally consistent D = c_D·αβ²/L², T = c_T·ΦL²/(αβ³).

    β defaults to :func:`implied_beta`, but never below L·√(d/n), the population gap of Prop 5.1
    that no ERM accuracy can beat. ``max_steps`` caps T (the cost is T·n·2m evaluations) by raising
    β to the accuracy that many steps can reach, (c_T·ΦL²/(α·max_steps))^{1/3}. Noise: σ₁ =
    s_a·√(A/ρ*) and σ₂ = s_v·√((T−A)/ρ*), half the zCDP budget ρ* of (ε, δ') on each kind of step
    (all of it on the anchors when Σ = 1 leaves no increments)."""
    if beta is None:
        beta = max(
            implied_beta(n=n, d=d, L=L, Phi=Phi, alpha=alpha, epsilon=epsilon), L * math.sqrt(d / n)
        )
    if max_steps is not None:
        check_positive(max_steps=max_steps)
        beta = max(beta, (constants.c_T * Phi * L**2 / (alpha * max_steps)) ** (1 / 3))
    check_positive(beta=beta)
    D = constants.c_D * alpha * beta**2 / L**2
    T = max(1, math.floor(constants.c_T * Phi * L**2 / (alpha * beta**3) * (1 + 1e-12)))
    Sigma = min(T, max(1, math.ceil(alpha / (D * math.sqrt(d)))))
    s_a, s_v = sensitivities(d=d, L=L, alpha=alpha, D=D, B1=n, B2=n, c_H=constants.c_H)
    anchors = -(-T // Sigma)
    rho = epsilon_to_rho(epsilon, mechanism_delta)
    share = (
        rho / 2 if T > anchors else rho
    )  # Σ = 1: every step is an anchor and takes the whole budget
    return dict(
        steps=T,
        block=block_length(alpha, D, T),
        period=Sigma,
        B1=n,
        B2=n,
        D=D,
        sigma_anchor=zcdp_gaussian_sigma(s_a, share / anchors),
        sigma_increment=zcdp_gaussian_sigma(s_v, share / max(T - anchors, 1)),
        s_anchor=s_a,
        s_increment=s_v,
        beta=beta,
    )


def check_theory_inputs(
    *,
    oracle: str,
    schedule: str,
    n: int,
    d: int,
    epsilon: float,
    dp_delta: float,
    **positive: float,
) -> None:
    """Refuse theorem inputs outside their ranges, naming them."""
    check_choice("oracle", oracle, ORACLES)
    check_choice("schedule", schedule, SCHEDULES)
    check_integer(n=n, d=d)
    check_epsilon(epsilon)
    check_delta(dp_delta, "dp_delta")
    check_positive(**positive)


def rate(
    oracle: str,
    *,
    n: int,
    d: int,
    L: float,
    Phi: float,
    alpha: float,
    epsilon: float,
    schedule: str = "v2",
) -> float:
    """The theorems' bound on E‖∂F(x_out)‖_2α with constants 1 (Õ(·) without logs).

    Single pass (Thm 3.1/6.1, v2): (ΦL²√d/(nα))^{1/3} + (ΦdL/(nαε))^{1/2} +
    (Φ²L³d^{3/2}/(n²α²ε))^{1/5}; v1 drops the √d of the first term. Multi-pass (Thm 4.1, empirical
    F̂): β* of :func:`implied_beta`."""
    if oracle == "multi-pass":
        return implied_beta(n=n, d=d, L=L, Phi=Phi, alpha=alpha, epsilon=epsilon)
    root_d = math.sqrt(d) if schedule == "v2" else 1.0
    return (
        (Phi * L**2 * root_d / (n * alpha)) ** (1 / 3)
        + (Phi * d * L / (n * alpha * epsilon)) ** 0.5
        + (Phi**2 * L**3 * d**1.5 / (n**2 * alpha**2 * epsilon)) ** 0.2
    )


def samples_needed(
    oracle: str, *, beta: float, d: int, L: float, Phi: float, alpha: float, epsilon: float
) -> float:
    """n for E‖∂F‖_2α ≤ β up to constants: ΦL²√d/(αβ³) + ΦLd/(εαβ²) (single pass, v2; the abstract's
    rate) or √Φ·L·d^{3/4}/(ε·√α·β^{3/2}) (multi-pass, empirical)."""
    if oracle == "multi-pass":
        return math.sqrt(Phi) * L * d**0.75 / (epsilon * math.sqrt(alpha) * beta**1.5)
    return Phi * L**2 * math.sqrt(d) / (alpha * beta**3) + Phi * L * d / (epsilon * alpha * beta**2)


def population_gap(
    *, n: int, d: int, L: float, diameter: float, zeta: float = 0.05, C: float = 1.0
) -> float:
    """Prop 5.1's ‖∂F‖ − ‖∂F̂‖ ≤ C·L·√(d·ln(R/ζ)/n) with probability 1 − ζ, R the diameter of the
    outputs' set (2DT for O2NC). C is unknown ("up to constants/logs", KLT §5): a label, not a
    certificate."""
    return C * L * math.sqrt(d * math.log(max(math.e, diameter / zeta)) / n)


def block_length(alpha: float, D: float, T: int) -> int:
    """M = ⌊α/(4D)⌋ clamped to [1, T], so every block point is within MD ≤ α/4 of its average."""
    return int(min(max(math.floor(alpha / (4 * D)), 1), T))
