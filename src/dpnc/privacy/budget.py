"""Privacy budgets and exact conversions between them.

The papers speak three languages: (ε, δ) (DPZero, Kornowski–Liu–Talwar), ρ-zCDP (Menart et al.)
and RDP curves α ↦ ε_α (Zhang–Tran–Cutkosky's "(α, αρ²/2)-RDP", :meth:`ZCDP.from_rdp_rho`);
:func:`rho_to_epsilon` and :func:`rdp_to_epsilon` convert to (ε, δ). See docs/privacy.md."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import optimize

from dpnc.checks import check_positive, check_probability

Conversion = Literal["optimal", "bun-steinke"]
CONVERSIONS: tuple[str, ...] = ("optimal", "bun-steinke")


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float if it is a finite positive number, else raise ValueError."""
    e = _as_float(epsilon, name)
    check_positive(**{name: e})
    return e


def check_delta(delta: float, name: str = "delta") -> float:
    """Return ``delta`` as a float if it lies in the open interval (0, 1), else raise ValueError."""
    d = _as_float(delta, name)
    check_probability(**{name: d})
    return d


def check_rho(rho: float, name: str = "rho") -> float:
    """Return ``rho`` as a float if it is finite and ≥ 0, else raise ValueError."""
    r = _as_float(rho, name)
    check_positive(allow_zero=True, **{name: r})
    return r


def _as_float(value: float, name: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number; got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number; got {value!r}") from None


def _check_conversion(method: str) -> None:
    if method not in CONVERSIONS:
        raise ValueError(f"method must be one of {CONVERSIONS}; got {method!r}")


@dataclass(frozen=True)
class Budget:
    """An approximate-DP budget ``(ε, δ)``: P(M(S) ∈ E) ≤ e^ε P(M(S′) ∈ E) + δ.

    Args:
        epsilon: ε, finite and > 0.
        delta: δ, in the open interval (0, 1).
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta))

    def to_zcdp(self, method: Conversion = "optimal") -> ZCDP:
        """The largest ρ whose ρ-zCDP guarantee converts (by ``method``) into this budget."""
        return ZCDP(epsilon_to_rho(self.epsilon, self.delta, method))


@dataclass(frozen=True)
class ZCDP:
    """ρ-zero-concentrated DP: D_α(M(S) ‖ M(S′)) ≤ αρ for every α > 1.

    Args:
        rho: ρ, finite and ≥ 0.
    """

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_rho(self.rho))

    @classmethod
    def from_rdp_rho(cls, rho: float) -> ZCDP:
        """Zhang–Tran–Cutkosky's "(α, αρ²/2)-RDP for all α > 1" is (ρ²/2)-zCDP."""
        return cls(check_rho(rho) ** 2 / 2)

    @property
    def rdp_rho(self) -> float:
        """The ρ of the (α, αρ²/2)-RDP convention (the inverse of :meth:`from_rdp_rho`)."""
        return math.sqrt(2 * self.rho)

    def rdp(self, alpha: float | Sequence[float]) -> np.ndarray:
        """The Rényi curve α ↦ αρ at the given orders."""
        return self.rho * np.asarray(alpha, dtype=float)

    def to_budget(self, delta: float, method: Conversion = "optimal") -> Budget:
        """The (ε, δ) guarantee implied at ``delta``."""
        return Budget(max(rho_to_epsilon(self.rho, delta, method), 1e-300), delta)


def rho_to_epsilon(rho: float, delta: float, method: Conversion = "optimal") -> float:
    """ε(δ) implied by ρ-zCDP.

    ``"bun-steinke"``: ε = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3; equal to Mironov's
    basic RDP conversion minimised over α). ``"optimal"``: the improved RDP conversion of Canonne,
    Kamath & Steinke 2020 (Prop. 12) / Asoodeh et al. 2020, αρ + ln(1 − 1/α) − ln(δα)/(α − 1)
    minimised over continuous α > 1; never larger than Bun–Steinke.

    References:
        Bun, Steinke. Concentrated differential privacy: simplifications, extensions, and lower
        bounds. arXiv:1605.02065, 2016. Canonne, Kamath, Steinke. The discrete Gaussian for
        differential privacy. arXiv:2004.00010, 2020. Mironov. Rényi differential privacy.
        arXiv:1702.07476, 2017.
    """
    rho, delta = check_rho(rho), check_delta(delta)
    _check_conversion(method)
    if rho == 0:
        return 0.0
    log_inv_delta = math.log(1 / delta)
    bun_steinke = rho + 2 * math.sqrt(rho * log_inv_delta)
    if method == "bun-steinke":
        return bun_steinke

    def improved(alpha: float) -> float:
        return alpha * rho + math.log1p(-1 / alpha) - math.log(delta * alpha) / (alpha - 1)

    # Bun–Steinke's optimum α* = 1 + √(ln(1/δ)/ρ) brackets the improved optimum from above.
    alpha_star = 1 + math.sqrt(log_inv_delta / rho)
    res = optimize.minimize_scalar(
        improved,
        bounds=(1 + 1e-9, 4 * alpha_star + 10),
        method="bounded",
        options={"xatol": 1e-10 * alpha_star},
    )
    return max(0.0, min(float(res.fun), improved(alpha_star), bun_steinke))


def epsilon_to_rho(epsilon: float, delta: float, method: Conversion = "optimal") -> float:
    """The largest ρ such that ρ-zCDP implies (ε, δ)-DP under ``method``.

    Bun–Steinke has the closed form ρ = (√(ln(1/δ) + ε) − √ln(1/δ))²; the optimal conversion
    is inverted by bisection (ε(ρ) is increasing in ρ) to a relative tolerance of 1e-12.
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    _check_conversion(method)
    log_inv_delta = math.log(1 / delta)
    rho_bs = (math.sqrt(log_inv_delta + epsilon) - math.sqrt(log_inv_delta)) ** 2
    if method == "bun-steinke":
        return rho_bs
    hi = rho_bs
    while rho_to_epsilon(hi, delta, method) <= epsilon:
        hi *= 2
    return optimize.brentq(
        lambda r: rho_to_epsilon(r, delta, method) - epsilon, rho_bs, hi, xtol=1e-300, rtol=1e-12
    )


def rdp_to_epsilon(
    orders: Sequence[float], rdp: Sequence[float], delta: float
) -> tuple[float, float]:
    """ε(δ) from an RDP curve sampled at ``orders``, by the CKS 2020 conversion at the best order.

    Returns:
        (ε, the order attaining it). Orders ≤ 1 are ignored.
    """
    delta = check_delta(delta)
    a = np.asarray(orders, dtype=float)
    r = np.asarray(rdp, dtype=float)
    if a.shape != r.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(
            f"orders and rdp must be 1-d and of equal length; got {a.shape} and {r.shape}"
        )
    if np.any(r < 0) or np.any(np.isnan(r)):
        raise ValueError("rdp values must be >= 0 and not NaN")
    keep = a > 1
    a, r = a[keep], r[keep]
    eps = r + np.log1p(-1 / a) - np.log(delta * a) / (a - 1)
    i = int(np.argmin(eps))
    return max(0.0, float(eps[i])), float(a[i])
