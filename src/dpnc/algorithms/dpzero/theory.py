"""The DPZero paper's theorem calculators and noise calibration (docs/papers.md, DPZero §1.4, §3).

Theorems 1 (A3.1) and 2 (A3.5) for DPGD-0th, Theorem 3 for DPZero, Corollaries F.2–F.4 under PL;
Lemma 2.2 (advanced composition) for the noise; the configs' ``from_theory`` call these. Symbols:
eta = α, T = steps, C, lam = λ, L (Lipschitz), ell = ℓ (smoothness), r (effective rank), kappa =
κ = ℓ/μ (PL condition number), noise_multiplier = σ/Δ with Δ = 2C/n."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss

from dpnc.privacy.calibrate import (
    advanced_composition_epsilon,
    noise_multiplier,
    opacus_noise_multiplier,
)

ACCOUNTING = ("paper", "rdp", "pld")


def calibrate_noise(
    accounting: str, epsilon: float, delta: float, T: int, n: int, batch_size: int | None = None
) -> float:
    """The noise multiplier σ/Δ for a target (ε, δ) after T steps, by accounting mode.

    * ``"paper"``: advanced composition, σ/Δ = 2√(2T log(e + ε/δ))/ε (Lemma 2.2; full batch only);
    * ``"rdp"``: full batch, RDP of T Gaussians; minibatch, the published code's opacus 1.4 recipe
      (Poisson-subsampled RDP at q = B/n, bisection tolerance 0.01);
    * ``"pld"``: tight PLD accounting of the same releases.
    """
    if accounting not in ACCOUNTING:
        raise ValueError(f"accounting must be one of {ACCOUNTING}; got {accounting!r}")
    q = 1.0 if batch_size is None or batch_size == n else batch_size / n
    if accounting == "paper":
        if q != 1.0:
            raise ValueError("accounting='paper' (advanced composition) is for full batch only")
        return 2 * math.sqrt(2 * T * math.log(math.e + epsilon / delta)) / epsilon
    if accounting == "rdp":
        return (
            noise_multiplier(epsilon, delta, 1.0, T)
            if q == 1.0
            else opacus_noise_multiplier(epsilon, delta, q, T)
        )
    return noise_multiplier(epsilon, delta, q, T, accountant="pld")


def paper_claim(multiplier: float, T: int, delta: float) -> str:
    """The ε that advanced composition (the paper's Lemma 2.2) certifies for these releases, flagged
    where it is false: T full-batch Gaussian releases at σ/Δ = m are exactly one Gaussian at m/√T,
    whose δ(ε) dp-accounting computes; at a tiny m (a huge budget) the lemma's formula claims an ε
    that this δ(ε) exceeds."""
    if multiplier <= 0:
        return "ε = ∞ (no noise)"
    epsilon = advanced_composition_epsilon(multiplier, T, delta)
    claim = f"ε = {epsilon:.4g} by advanced composition (Lemma 2.2)"
    actual = GaussianPrivacyLoss(multiplier / math.sqrt(T), sensitivity=1.0).get_delta_for_epsilon(
        epsilon
    )
    if actual > delta * (1 + 1e-9):
        claim += (
            f"; false here: these releases have δ(ε = {epsilon:.4g}) = {actual:.3g} > δ = {delta:g} (the "
            "lemma's formula outside its range)"
        )
    return claim


# --- parameters from the theorems ---------------------------------------------------------------


@dataclass(frozen=True)
class TheoryParameters:
    """Step size α, steps T, clipping C, smoothing λ and noise multiplier set by a theorem."""

    theorem: str
    eta: float
    T: int
    C: float
    lam: float
    noise_multiplier: float


def _log_term(epsilon: float, delta: float) -> float:
    return math.log(math.e + epsilon / delta)


def _positive_log(x: float, theorem: str) -> float:
    """log(x), which the theorem needs positive (it is, once n is large enough)."""
    if x <= 1:
        raise ValueError(
            f"{theorem} does not apply: a logarithm in it is ≤ 0 (log of {x:.3g}); "
            "n·ε is too small for these constants"
        )
    return math.log(x)


def _theory(theorem, eta, T, C, lam, epsilon, delta) -> TheoryParameters:
    T = max(int(T), 1)  # Remark F.6
    return TheoryParameters(theorem, eta, T, C, lam, calibrate_noise("paper", epsilon, delta, T, 1))


def dpgd0th_from_theory(
    *,
    n: int,
    d: int,
    L: float,
    ell: float,
    epsilon: float,
    delta: float,
    r: float | None = None,
    kappa: float | None = None,
) -> TheoryParameters:
    """Theorem 1 (A3.1), Theorem 2 (A3.5: effective rank r), Corollary F.2/F.3 (with PL, κ = ℓ/μ).

    C = Ld (then clipping never happens, since ‖g‖ ≤ L‖u‖² = Ld).
    """
    lg = _log_term(epsilon, delta)
    if kappa is None and r is None:  # Theorem 1
        return _theory(
            "Theorem 1",
            1 / (4 * ell * d),
            n * epsilon / math.sqrt(d * lg),
            L * d,
            (4 * L / (ell * d)) * math.sqrt(math.sqrt(d * lg) / (n * epsilon)),
            epsilon,
            delta,
        )
    if kappa is None:  # Theorem 2
        return _theory(
            "Theorem 2",
            1 / (4 * ell * (r + 2)),
            n * (r + 2) * epsilon / (d * math.sqrt(r * lg)),
            L * d,
            (4 * L / (ell * d)) * math.sqrt(math.sqrt(r * lg) / (n * epsilon)),
            epsilon,
            delta,
        )
    if r is None:  # Corollary F.2
        T = 8 * kappa * d * _positive_log(n**2 * epsilon**2 / (kappa * d**3 * lg), "Corollary F.2")
        return _theory(
            "Corollary F.2",
            1 / (4 * ell * d),
            T,
            L * d,
            (2 * L / ell) * math.sqrt(lg) / (n * epsilon),
            epsilon,
            delta,
        )
    T = (
        8
        * kappa
        * (r + 2)
        * _positive_log(n**2 * epsilon**2 / (kappa * r * d**2 * lg), "Corollary F.3")
    )
    return _theory(
        "Corollary F.3",
        1 / (4 * ell * (r + 2)),
        T,
        L * d,
        (2 * L / (ell * math.sqrt(d))) * math.sqrt(r * lg) / (n * epsilon),
        epsilon,
        delta,
    )


def dpzero_from_theory(
    *,
    n: int,
    d: int,
    r: float,
    L: float,
    ell: float,
    epsilon: float,
    delta: float,
    kappa: float | None = None,
) -> TheoryParameters:
    """Theorem 3 (A3.5) or, with κ, Corollary F.4 (PL), for DPZero.

    Theorem 3: L̃² = L²·log(2√(2π)·d(r+2)n³ε²/(r log(e+ε/δ))), α = 1/(4ℓ(r+2)),
    T = max(n(r+2)ε/(4√(r log(e+ε/δ))), 1), C = 4L̃,
    λ = (1/(ℓd))·min{4(2−√2)L̃, (L/√d)(√(r log(e+ε/δ))/(nε))^{1/2}} — so that C ≥ C₀ + ℓλd/2 with
    C₀ = 2√2·L̃ the no-clip threshold (Appendix E).
    """
    lg = _log_term(epsilon, delta)
    if kappa is None:
        L_tilde = L * math.sqrt(
            _positive_log(
                2 * math.sqrt(2 * math.pi) * d * (r + 2) * n**3 * epsilon**2 / (r * lg), "Theorem 3"
            )
        )
        lam = min(
            4 * (2 - math.sqrt(2)) * L_tilde,
            (L / math.sqrt(d)) * math.sqrt(math.sqrt(r * lg) / (n * epsilon)),
        ) / (ell * d)
        return _theory(
            "Theorem 3",
            1 / (4 * ell * (r + 2)),
            n * (r + 2) * epsilon / (4 * math.sqrt(r * lg)),
            4 * L_tilde,
            lam,
            epsilon,
            delta,
        )
    L_tilde = (
        8
        * L
        * math.sqrt(
            _positive_log(
                32 * math.sqrt(2 * math.pi) * kappa * n**3 * d * (r + 2) * epsilon**2 / (r * lg),
                "Corollary F.4",
            )
        )
    )
    lam = min(
        (2 - math.sqrt(2)) * L_tilde, (4 * L / math.sqrt(d)) * math.sqrt(r * lg) / (n * epsilon)
    ) / (2 * ell * d)
    T = 8 * kappa * (r + 2) * _positive_log(n**2 * epsilon**2 / (kappa * r * lg), "Corollary F.4")
    return _theory("Corollary F.4", 1 / (4 * ell * (r + 2)), T, L_tilde / 2, lam, epsilon, delta)
