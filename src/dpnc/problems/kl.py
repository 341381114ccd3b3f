"""Objectives satisfying the (γ,κ)-KL condition, with proven constants, for Menart et al.

Menart et al. §5's test functions, each an empirical loss F(w) = (1/n) Σ_i f(w; x_i) whose public
constants are proven in its docstring (their meaning:
:class:`~dpnc.problems.kl_objective.KLObjective`); §3's hard instances come from
:mod:`dpnc.problems.kl_instances`. See docs/menart.md."""

from __future__ import annotations

import math

import torch

from dpnc.problems.kl_instances import (
    HuberLinear,
    TwoSidedPower,
    lower_bound_cor1,
    lower_bound_thm7,
    lower_bound_thm8,
    thm7_instance,
    thm8_instance,
)
from dpnc.problems.kl_objective import (
    F64,
    DataFree,
    KLObjective,
    _integer,
    _positive,
    _sphere,
    _vector,
    _weak,
    check_kl,
    default_weak_convexity,
    sample_ball,
)

__all__ = [
    "SINE_PL_RATIO",
    "DataFree",
    "HuberLinear",
    "KLObjective",
    "LeastSquares",
    "PowerGrowth",
    "PseudoHuber",
    "Quadratic",
    "SinePL",
    "TwoSidedPower",
    "check_kl",
    "default_weak_convexity",
    "lower_bound_cor1",
    "lower_bound_thm7",
    "lower_bound_thm8",
    "pseudo_huber_gamma",
    "sample_ball",
    "thm7_instance",
    "thm8_instance",
]

# sup_t (t² + 3 sin² t)/(2t + 3 sin 2t)², attained at t ≈ 2.20171 (recomputed in the tests), rounded
# up.
SINE_PL_RATIO = 2.8484999244


# --- data-free objectives -------------------------------------------------------------------------


class Quadratic(DataFree):
    """F(w) = f(w) = ½‖w − c‖², data-free (every example is the same), PL. Menart et al. §5, first
    test function.

    Constants (r_max = ‖center − c‖ + radius, the largest distance to c in the region; §5's
    ball of radius R around w* = c has r_max = R):
    - KL: ∇F = w − c, so F − F* = ½‖∇F‖² = γ²‖∇F‖² with γ = 1/√2, κ = 2 (equality everywhere; μ =
      1).
    - L0 = r_max (‖∇f‖ = ‖w − c‖); L1 = 1 (∇²f = I); F* = 0, w* = c.
    - convex, so weak_convexity defaults to :func:`default_weak_convexity` (= 1/16 here).

    Args:
        dim: d ≥ 1.  n: the declared dataset size (n copies of the one example), ≥ 1.
        c: the minimiser (default 0).  center: default c.  radius: R > 0.
        weak_convexity: L̃1 ≥ 0 to declare instead of the default.
    """

    name = "quadratic"

    def __init__(
        self,
        dim: int,
        n: int = 1,
        *,
        c=None,
        center=None,
        radius: float = 1.0,
        weak_convexity: float | None = None,
    ) -> None:
        self.dim, self.n = _integer("dim", dim, 1), _integer("n", n, 1)
        self.w_star = torch.zeros(self.dim, dtype=F64) if c is None else _vector("c", c, self.dim)
        center, radius = self._region(center, radius, self.w_star)
        gamma, kappa = 1 / math.sqrt(2), 2.0
        L0 = float(torch.linalg.vector_norm(center - self.w_star)) + radius
        self._declare(
            L0=L0,
            L1=1.0,
            weak_convexity=_weak(weak_convexity, gamma, kappa, L0),
            gamma=gamma,
            kappa=kappa,
            center=center,
            radius=radius,
            F_star=0.0,
        )

    def _value(self, points):
        return 0.5 * ((points - self.w_star) ** 2).sum(-1)

    def _gradient(self, points):
        return points - self.w_star


class PowerGrowth(DataFree):
    """F(w) = f(w) = ‖w − w*‖^τ with τ = κ/(κ−1), data-free; exactly (1/τ, κ)-KL. Menart et al. §5.

    Proof of the KL constant: with r = ‖w − w*‖, ∇F = τr^{τ−2}(w − w*), ‖∇F‖ = τr^{τ−1}, so
    γ^κ‖∇F‖^κ = (γτ)^κ r^{κ(τ−1)} = (γτ)^κ r^τ, because κ(τ−1) = κ/(κ−1) = τ. With γ = 1/τ this is
    r^τ = F − F*: equality at every w, so no smaller γ works. (Lemma 6, from convexity and the
    (1, τ)-growth F − F* = r^τ, gives only γ = 1.)

    Other constants (r_max = ‖center − w*‖ + radius; §5's ball around w* has r_max = R):
    - L0 = τ r_max^{τ−1}, the largest ‖∇f‖ on the region.
    - L1 = τ(τ−1) r_max^{τ−2} if τ ≥ 2 (κ ≤ 2): ∇²f = τr^{τ−2}(I + (τ−2)uuᵀ) has eigenvalues
      τr^{τ−2} and τ(τ−1)r^{τ−2}, increasing in r for τ ≥ 2. For τ < 2 (κ > 2) the Hessian blows up
      at w*: L1 = None, the case of Algorithm 2 (proximal point).
    - convex (a convex increasing function of a norm), so weak_convexity defaults to
      :func:`default_weak_convexity`; with center = w* that is τ²R^{τ−2}/32.
    - F* = 0 at w*. The objective is data-free: a dataset of n copies of one example, so n is real
    but uninformative.

    Args:
        kappa: κ > 1 (τ = κ/(κ−1) > 1): 1.5 → τ = 3, 2 → τ = 2, 3 → τ = 1.5.
        dim: d ≥ 1.  n: declared dataset size ≥ 1.  w_star: default 0.  center: default w*.
        radius: R > 0.  weak_convexity: L̃1 ≥ 0 to declare instead of the default.
    """

    name = "power-growth"

    def __init__(
        self,
        kappa: float,
        dim: int,
        n: int = 1,
        *,
        w_star=None,
        center=None,
        radius: float = 1.0,
        weak_convexity: float | None = None,
    ) -> None:
        kappa = _positive("kappa", kappa, low=1.0)
        self.tau = tau = kappa / (kappa - 1)
        self.dim, self.n = _integer("dim", dim, 1), _integer("n", n, 1)
        self.w_star = (
            torch.zeros(self.dim, dtype=F64)
            if w_star is None
            else _vector("w_star", w_star, self.dim)
        )
        center, radius = self._region(center, radius, self.w_star)
        gamma = 1 / tau
        r_max = float(torch.linalg.vector_norm(center - self.w_star)) + radius
        L0 = tau * r_max ** (tau - 1)
        L1 = tau * (tau - 1) * r_max ** (tau - 2) if tau >= 2 else None
        self._declare(
            L0=L0,
            L1=L1,
            weak_convexity=_weak(weak_convexity, gamma, kappa, L0),
            gamma=gamma,
            kappa=kappa,
            center=center,
            radius=radius,
            F_star=0.0,
        )
        self.name = f"power-growth-kappa{kappa:g}"

    def _value(self, points):
        return torch.linalg.vector_norm(points - self.w_star, dim=-1) ** self.tau

    def _gradient(self, points):
        e = points - self.w_star
        r = torch.linalg.vector_norm(e, dim=-1, keepdim=True)
        scale = torch.where(
            r > 0, self.tau * r.clamp_min(1e-300) ** (self.tau - 2), torch.zeros_like(r)
        )
        return scale * e


class PseudoHuber(DataFree):
    """F(w) = f(w) = √(1 + ‖w‖²) − 1, data-free, (γ(R), 1)-KL on a ball. Menart et al. §5.

    Proof: with r = ‖w‖ and s = √(1 + r²), ‖∇F‖ = r/s and F − F* = s − 1, so the κ = 1 inequality s
    − 1 ≤ γ r/s needs γ ≥ h(r) = s(s − 1)/r = s√(s−1)/√(s+1), which increases with s (hence with r).
    On a region within distance r_max = ‖center‖ + radius of 0 the best γ is therefore γ = h(r_max)
    = (1 + r_max² − √(1 + r_max²))/r_max: 0.5858, 4.1802, 9.0950 for r_max = 1, 5, 10 (§5's 0.59 /
    4.18 / 9.10). As r → ∞, γ ~ r: no global KL with κ = 1.

    Other constants: L0 = r_max/√(1 + r_max²) (< 1 everywhere); L1 = 1 (∇²F = (I − wwᵀ/s²)/s,
    largest eigenvalue 1/s ≤ 1); convex, weak_convexity defaults to :func:`default_weak_convexity`;
    F* = 0 at 0.

    Args:
        dim: d ≥ 1.  n: declared dataset size ≥ 1.  radius: R > 0.  center: default 0.
        weak_convexity: L̃1 ≥ 0 to declare instead of the default.
    """

    name = "pseudo-huber"

    def __init__(
        self,
        dim: int,
        n: int = 1,
        *,
        radius: float = 1.0,
        center=None,
        weak_convexity: float | None = None,
    ) -> None:
        self.dim, self.n = _integer("dim", dim, 1), _integer("n", n, 1)
        self.w_star = torch.zeros(self.dim, dtype=F64)
        center, radius = self._region(center, radius, self.w_star)
        r_max = float(torch.linalg.vector_norm(center)) + radius
        gamma, L0 = pseudo_huber_gamma(r_max), r_max / math.sqrt(1 + r_max**2)
        self._declare(
            L0=L0,
            L1=1.0,
            weak_convexity=_weak(weak_convexity, gamma, 1.0, L0),
            gamma=gamma,
            kappa=1.0,
            center=center,
            radius=radius,
            F_star=0.0,
        )

    def _value(self, points):
        sq = (points**2).sum(-1)
        return sq / (torch.sqrt(1 + sq) + 1)  # = √(1 + r²) − 1 without cancellation near 0

    def _gradient(self, points):
        return points / torch.sqrt(1 + (points**2).sum(-1, keepdim=True))


def pseudo_huber_gamma(R: float) -> float:
    """γ(R) = (1 + R² − √(1 + R²))/R, the best κ = 1 KL constant of √(1 + ‖w‖²) − 1 on ‖w‖ ≤ R."""
    R = _positive("R", R)
    s = math.sqrt(1 + R * R)
    return s * (s - 1) / R


# --- objectives with data -------------------------------------------------------------------------


class SinePL(KLObjective):
    """f(w; x) = x·g(w), g(w) = Σ_j (w_j² + 3 sin² w_j), x ∈ [x_low, x_bound]: nonconvex PL. Menart
    et al. §5.

    F = x̄·g with x̄ the mean of the data. Constants (all from the domain [x_low, x_bound], 0 <
    x_low, so they hold for every dataset of the domain, neighbours included):
    - KL (κ = 2): g is separable, so g/‖∇g‖² = Σφ(w_j)/Σφ′(w_j)² ≤ sup_t φ(t)/φ′(t)² = s ≈ 2.8485
      (φ(t) = t² + 3sin²t, φ′(t) = 2t + 3 sin 2t; sup at t ≈ 2.2017; :data:`SINE_PL_RATIO`). F/‖∇F‖²
      = g/(x̄‖∇g‖²) ≤ s/x̄ ≤ s/x_low, so γ = √(s/x_low) (1.688 for x_low = 1; Karimi et al.'s μ =
      1/32 gives 4). The data's own √(s/x̄) would be tighter, but x̄ is private: reading γ off it
      would publish x̄ through the algorithms' schedules. Global: g's only stationary point is 0
      (φ′(t) = 0 only at t = 0, since sin 2t > 0 on (0, π/2) and |2t| > 3 beyond 1.5), F* = 0, w* =
      0.
    - L1 = 8·x_bound: φ″(t) = 2 + 6cos 2t ∈ [−4, 8], ∇²f diagonal.
    - weak_convexity = 4·x_bound (φ″ ≥ −4). Not convex.
    - L0: §5's 2R + 3 is per coordinate on [−R, R]^d (ℓ∞: |φ′(t)| ≤ 2|t| + 3); in ℓ2 on that cube
      it is √d(2R + 3). On the region, a ball within distance ρ = ‖center‖ + radius of 0:
      ‖∇g‖ ≤ 2‖w‖ + 3‖sin 2w‖ ≤ 2ρ + 3min(2ρ, √d) (|sin 2t| ≤ min(2|t|, 1)), so
      L0 = x_bound·(2ρ + 3·min(2ρ, √d)) (≤ 8ρ·x_bound, the smoothness bound).

    Args:
        x: the data, shape (n,), values in [x_low, x_bound] (explicit; :meth:`example_gradients`
            works), or use :meth:`from_mean` for a data-free dataset of n copies of one x.
        dim: d ≥ 1.  x_low: the domain's lower bound, > 0, required (a public bound, not the data's
            minimum).
        x_bound: the domain's upper bound (default 1).  center: default 0.  radius: > 0.

    References:
        Karimi, Nutini, Schmidt, "Linear Convergence of Gradient and Proximal-Gradient Methods under
        the Polyak-Łojasiewicz Condition", ECML-PKDD 2016 (the sine test function).

    Raises:
        ValueError: x_low missing or not in (0, x_bound], or data outside [x_low, x_bound].
    """

    name = "sine-pl"

    def __init__(
        self,
        x,
        dim: int,
        *,
        x_low: float | None = None,
        x_bound: float = 1.0,
        center=None,
        radius: float = 1.0,
    ) -> None:
        self.dim = _integer("dim", dim, 1)
        self._domain(x_low, x_bound)
        x = torch.as_tensor(x, dtype=F64)
        outside = (x < self.x_low).any() or (x > self.x_bound).any()
        if x.ndim != 1 or len(x) < 1 or not torch.isfinite(x).all() or outside:
            raise ValueError(
                f"x must be a non-empty vector with values in [x_low, x_bound] = "
                f"[{self.x_low}, {self.x_bound}]; got {x!r}"
            )
        self.x, self.n = x, len(x)
        self._explicit = True
        self._setup(float(x.mean()), center, radius)

    @classmethod
    def generate(cls, dim: int, n: int, seed: int = 0, *, low: float = 0.1, **kwargs) -> SinePL:
        """x_i uniform on [low, 1] from ``seed``; the domain is [low, 1]."""
        if not (isinstance(low, (int, float)) and 0 < low <= 1):
            raise ValueError(f"low must be in (0, 1]; got {low!r}")
        gen = torch.Generator().manual_seed(seed)
        n = _integer("n", n, 1)
        return cls(
            low + (1 - low) * torch.rand(n, generator=gen, dtype=F64),
            dim,
            x_low=low,
            x_bound=1.0,
            **kwargs,
        )

    @classmethod
    def from_mean(
        cls,
        x_mean: float,
        dim: int,
        n: int,
        *,
        x_low: float | None = None,
        x_bound: float = 1.0,
        center=None,
        radius: float = 1.0,
    ) -> SinePL:
        """The data-free dataset of n copies of x_mean ∈ [x_low, x_bound] (F = x_mean·g), without
        storing it.

        x_mean is a public choice here (the experiments' fixture), so the domain's lower bound
        defaults to it; for the mean of private data use the explicit constructor, whose γ comes
        from the domain."""
        self = cls.__new__(cls)
        self.dim, self.n = _integer("dim", dim, 1), _integer("n", n, 1)
        if not (isinstance(x_mean, (int, float)) and 0 < x_mean <= x_bound):
            raise ValueError(f"x_mean must be in (0, x_bound={x_bound}]; got {x_mean!r}")
        self._domain(x_mean if x_low is None else x_low, x_bound)
        if x_mean < self.x_low:
            raise ValueError(
                f"x_mean must be in [x_low, x_bound] = [{self.x_low}, {self.x_bound}]; got {x_mean!r}"
            )
        self.x = None
        self._setup(float(x_mean), center, radius)
        return self

    def _domain(self, x_low, x_bound) -> None:
        self.x_bound = _positive("x_bound", x_bound)
        if x_low is None:
            raise ValueError(
                "x_low must be a public lower bound > 0 on the data (the domain [x_low, x_bound]; "
                "γ = √(2.8485/x_low) is read from it, not from the data's mean); got None"
            )
        self.x_low = _positive("x_low", x_low)
        if self.x_low > self.x_bound:
            raise ValueError(f"x_low must be <= x_bound = {self.x_bound}; got {x_low!r}")

    def _setup(self, x_mean, center, radius):
        self.x_mean = (
            x_mean  # the data's mean: F = x̄·g is evaluated with it; no constant is read from it
        )
        self.w_star = torch.zeros(self.dim, dtype=F64)
        center, radius = self._region(center, radius, self.w_star)
        rho = float(torch.linalg.vector_norm(center)) + radius
        self._declare(
            L0=self.x_bound * (2 * rho + 3 * min(2 * rho, math.sqrt(self.dim))),
            L1=8 * self.x_bound,
            weak_convexity=4 * self.x_bound,
            gamma=math.sqrt(SINE_PL_RATIO / self.x_low),
            kappa=2.0,
            center=center,
            radius=radius,
            F_star=0.0,
        )

    def _value(self, points):
        return self.x_mean * (points**2 + 3 * torch.sin(points) ** 2).sum(-1)

    def _gradient(self, points):
        return self.x_mean * _sine_grad(points)

    def _example_gradients(self, points):
        return self.x[:, None] * _sine_grad(points)[:, None, :]

    def _example_losses(self, points):
        return self.x * (points**2 + 3 * torch.sin(points) ** 2).sum(-1, keepdim=True)


def _sine_grad(points):
    return 2 * points + 3 * torch.sin(2 * points)


class LeastSquares(KLObjective):
    """F(w) = (1/2n)‖Aw − b‖², f(w; (a, b)) = ½(a·w − b)², with data domain ‖a‖ ≤ row_bound, |b| ≤
    target_bound.

    Every constant comes from public inputs (:class:`~dpnc.problems.kl_objective.KLObjective`): the
    domain (row_bound, target_bound), the region (center, radius) and mu, a public lower bound on
    the smallest nonzero eigenvalue of H = AᵀA/n. Nothing is read off the data: the data's own
    smallest eigenvalue, minimiser or largest row would make γ, the region and L0 (hence every
    schedule and noise level of the algorithms) functions of the private data — replacing one row
    once moved KL-Spider's schedule from 11,417 to 1,140,951 rounds.

    Constants (q = Aᵀb/n, s = bᵀb/n; R_w = ‖center‖ + radius bounds ‖w‖ on the region):
    - KL (κ = 2, global): with w* = H⁺q (the minimum-norm minimiser; q ∈ range H) and e = w − w*, F
      − F* = ½eᵀHe and ∇F = He, so ‖∇F‖² = eᵀH²e ≥ μ_data·eᵀHe for μ_data the smallest *nonzero*
      eigenvalue of H (the null-space part of e adds to neither): ½‖∇F‖² ≥ μ(F − F*) for every μ ≤
      μ_data, γ = 1/√(2μ). mu is the user's claim (e.g. from the design, as in :meth:`generate`); it
      is not checked against the data, since a refusal would itself depend on them. If it is false,
      the utility guarantees fail; the privacy guarantee does not depend on it.
    - L0 = row_bound·(row_bound·R_w + target_bound): ‖∇f‖ = |a·w − b|‖a‖ ≤ ‖a‖(‖a‖‖w‖ + |b|).
    - L1 = row_bound² (∇²f = aaᵀ); convex, weak_convexity defaults to
      :func:`default_weak_convexity`.
    - F* = ½(s − qᵀw*) (or the mean squared residual at w* for explicit data), for evaluation only.
    F is evaluated as F* + ½eᵀHe + eᵀ(Hw* − q), algebraically F and free of the cancellation in
    ½wᵀHw − qᵀw + ½s, so F − F* is accurate near w*.

    Two forms: explicit data (A, b) — :meth:`example_gradients` works — or sufficient statistics
    (:meth:`from_statistics`, :meth:`sufficient`, ``generate(..., sufficient=True)``) holding only
    H, q, s and a declared n. In the sufficient form made here, n is honest: the dataset is a sample
    of m points each repeated n/m times (m divides n), whose statistics are exactly the sample's, so
    F is the sample's empirical loss and only the noise (∝ 1/n) sees n. Privacy for that dataset is
    privacy for replace-one neighbours of it, not for the m-sample.

    Args:
        A: (n, d) rows, b: (n,).
        row_bound, target_bound: the data domain, required; data outside it are refused.
        radius: the region's radius around ``center`` (default 0), required: a public choice.
        mu: a public lower bound > 0 on the smallest nonzero eigenvalue of AᵀA/n, required.
        weak_convexity: L̃1 to declare instead of the default.

    Raises:
        ValueError: a public input missing or out of range, or data outside the domain.
    """

    name = "least-squares"

    def __init__(
        self,
        A,
        b,
        *,
        row_bound: float | None = None,
        target_bound: float | None = None,
        radius: float | None = None,
        mu: float | None = None,
        center=None,
        weak_convexity: float | None = None,
    ) -> None:
        public = _least_squares_public(row_bound, target_bound, radius, mu)
        A, b = torch.as_tensor(A, dtype=F64), torch.as_tensor(b, dtype=F64)
        if (
            A.ndim != 2
            or b.ndim != 1
            or A.shape[0] != b.shape[0]
            or A.shape[0] < 1
            or A.shape[1] < 1
        ):
            raise ValueError(
                f"A must be (n, d) and b (n,) with n, d >= 1; got {tuple(A.shape)} and {tuple(b.shape)}"
            )
        if not (torch.isfinite(A).all() and torch.isfinite(b).all()):
            raise ValueError("A and b must be finite")
        row_max, b_max = float(torch.linalg.vector_norm(A, dim=1).max()), float(b.abs().max())
        row_bound, target_bound = public[:2]
        if row_max > row_bound * (1 + 1e-12) or b_max > target_bound * (1 + 1e-12):
            raise ValueError(
                f"the data must lie in the domain ‖a‖ <= row_bound={row_bound}, |b| <= target_bound="
                f"{target_bound}; got max ‖a‖ = {row_max}, max |b| = {b_max}"
            )
        self.A, self.b, self._explicit = A, b, True
        n = A.shape[0]
        self._setup(A.T @ A / n, A.T @ b / n, float(b @ b) / n, n, *public, center, weak_convexity)

    @classmethod
    def from_statistics(
        cls,
        H,
        q,
        s: float,
        n: int,
        *,
        row_bound: float | None = None,
        target_bound: float | None = None,
        radius: float | None = None,
        mu: float | None = None,
        center=None,
        weak_convexity: float | None = None,
    ) -> LeastSquares:
        """Sufficient statistics H = AᵀA/n, q = Aᵀb/n, s = bᵀb/n of a dataset of declared size n.

        The public inputs are those of the constructor. Checks what the domain implies (H symmetric
        PSD, tr H ≤ row_bound², s ≤ target_bound²); that the statistics come from some n points of
        the domain is the caller's claim."""
        public = _least_squares_public(row_bound, target_bound, radius, mu)
        row_bound, target_bound = public[:2]
        H, q = torch.as_tensor(H, dtype=F64), torch.as_tensor(q, dtype=F64)
        if H.ndim != 2 or H.shape[0] != H.shape[1] or q.shape != (H.shape[0],):
            raise ValueError(
                f"H must be (d, d) and q (d,); got {tuple(H.shape)} and {tuple(q.shape)}"
            )
        if (
            not torch.allclose(H, H.T, rtol=1e-12, atol=1e-15)
            or float(torch.linalg.eigvalsh(H)[0]) < -1e-12
        ):
            raise ValueError("H must be symmetric positive semidefinite")
        if float(H.trace()) > row_bound**2 * (1 + 1e-12) or not (
            0 <= s <= target_bound**2 * (1 + 1e-12)
        ):
            raise ValueError(
                f"need tr H <= row_bound² = {row_bound**2} and 0 <= s <= target_bound² = "
                f"{target_bound**2}; got tr H = {float(H.trace())}, s = {s}"
            )
        self = cls.__new__(cls)
        self.A = self.b = None
        self._setup(H, q, float(s), _integer("n", n, 1), *public, center, weak_convexity)
        return self

    def sufficient(self, n: int | None = None) -> LeastSquares:
        """This objective in sufficient-statistics form, for the dataset repeated n/self.n times (n
        a multiple)."""
        n = self.n if n is None else _integer("n", n, 1)
        if n % self.n:
            raise ValueError(
                f"n must be a multiple of the current n={self.n} (each example repeated); got {n}"
            )
        new = LeastSquares.__new__(LeastSquares)
        new.__dict__.update(self.__dict__)
        new.A = new.b = None
        new._explicit, new.n = False, n
        return new

    @classmethod
    def generate(
        cls,
        dim: int,
        n: int,
        seed: int = 0,
        *,
        noise: float = 0.1,
        sufficient: bool = False,
        sample: int | None = None,
        radius: float = 2.0,
        **kwargs,
    ) -> LeastSquares:
        """A balanced design from ``seed``: row i is ±q_{i mod d} for a random orthonormal basis
        q_1..q_d, b = a·w_true + noise·N(0, 1) clipped to [−1 − 4·noise, 1 + 4·noise], w_true
        uniform on the unit sphere.

        Every constant is public. The domain is row_bound = 1, target_bound = 1 + 4·noise (clipping
        makes it a bound). The design fixes the spectrum: H = Σ_j (c_j/m) q_j q_jᵀ with c_j ∈
        {⌊m/d⌋, ⌈m/d⌉} rows along q_j, so mu = max(⌊m/d⌋, 1)/m is the smallest nonzero eigenvalue,
        known before any b is drawn. The region is the ball of radius ``radius`` (default 2) around
        0, which holds w_true and, unless the noise is large, w*. sufficient=True draws ``sample`` =
        m rows (default: the largest divisor of n that is ≤ 1000, at least d) and declares the
        dataset of those m rows each repeated n/m times (see the class docstring)."""
        dim, n = _integer("dim", dim, 1), _integer("n", n, 1)
        noise = _positive("noise", noise, low=0.0, strict=False)
        m = n
        if sufficient:
            m = (
                next(k for k in range(min(n, 1000), 0, -1) if n % k == 0)
                if sample is None
                else sample
            )
            m = _integer("sample", m, 1)
            if n % m or m < dim:
                raise ValueError(f"sample must divide n={n} and be >= dim={dim}; got {m}")
        gen = torch.Generator().manual_seed(seed)
        basis = torch.linalg.qr(torch.randn(dim, dim, generator=gen, dtype=F64))[0]
        signs = torch.where(torch.rand(m, generator=gen, dtype=F64) < 0.5, -1.0, 1.0).to(F64)
        A = signs[:, None] * basis.T[torch.arange(m) % dim]
        w_true = _sphere(1, dim, gen)[0]
        bound = 1 + 4 * noise
        b = (A @ w_true + noise * torch.randn(m, generator=gen, dtype=F64)).clamp(-bound, bound)
        obj = cls(
            A,
            b,
            row_bound=1.0,
            target_bound=bound,
            radius=radius,
            mu=max(m // dim, 1) / m,
            **kwargs,
        )
        obj.w_true = w_true
        return obj.sufficient(n) if sufficient else obj

    def _setup(self, H, q, s, n, row_bound, target_bound, radius, mu, center, weak_convexity):
        self.H, self.q, self.s, self.n, self.dim = H, q, s, n, H.shape[0]
        self.row_bound, self.target_bound, self.mu = row_bound, target_bound, mu
        # w*, F*: for evaluating results only (no algorithm reads them)
        eig, V = torch.linalg.eigh(H)
        positive = eig > 1e-10 * max(float(eig[-1]), 1e-300)
        self.w_star = V[:, positive] @ ((V[:, positive].T @ q) / eig[positive])
        self._r0 = H @ self.w_star - q  # 0 up to rounding
        if self.A is not None:
            F_star = float(0.5 * ((self.A @ self.w_star - self.b) ** 2).mean())
        else:
            F_star = max(0.5 * (s - float(q @ self.w_star)), 0.0)
        center, radius = self._region(center, radius, torch.zeros(self.dim, dtype=F64))
        gamma = 1 / math.sqrt(2 * mu)
        L0 = row_bound * (
            row_bound * (float(torch.linalg.vector_norm(center)) + radius) + target_bound
        )
        self._declare(
            L0=L0,
            L1=row_bound**2,
            weak_convexity=_weak(weak_convexity, gamma, 2.0, L0),
            gamma=gamma,
            kappa=2.0,
            center=center,
            radius=radius,
            F_star=F_star,
        )

    def _value(self, points):
        e = points - self.w_star
        return self.constants.F_star + 0.5 * ((e @ self.H) * e).sum(-1) + e @ self._r0

    def _gradient(self, points):
        return points @ self.H - self.q

    def _example_gradients(
        self, points
    ):  # every example's gradient at each point (the KL algorithms' queries)
        r = points @ self.A.T - self.b  # (k, n)
        return r[..., None] * self.A

    def losses(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """½(⟨a_i, x[i, j]⟩ − b_i)² for x (b, k, d), reading only the rows in ``index``."""
        x, index = self._checked(x, index, "losses")
        return 0.5 * self._residuals(x, index) ** 2

    def gradients(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """(⟨a_i, x[i, j]⟩ − b_i)·a_i for x (b, k, d) → (b, k, d), reading only the rows in
        ``index``."""
        x, index = self._checked(x, index, "gradients")
        return self._residuals(x, index)[..., None] * self.A[index][:, None, :]

    def _residuals(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bkd,bd->bk", x, self.A[index]) - self.b[index, None]


def _least_squares_public(row_bound, target_bound, radius, mu) -> tuple[float, float, float, float]:
    """LeastSquares' public inputs, each required (none may be read off the data), validated."""
    rules = {
        "row_bound": "a public bound > 0 on the rows' norms ‖a_i‖ (the data domain)",
        "target_bound": "a public bound >= 0 on the targets |b_i| (the data domain)",
        "radius": "the region's radius > 0, a public choice",
        "mu": "a public lower bound > 0 on the smallest nonzero eigenvalue of AᵀA/n (γ = 1/√(2μ))",
    }
    values = {"row_bound": row_bound, "target_bound": target_bound, "radius": radius, "mu": mu}
    for name, value in values.items():
        if value is None:
            raise ValueError(f"{name} must be {rules[name]}; got None")
    return (
        _positive("row_bound", row_bound),
        _positive("target_bound", target_bound, strict=False),
        _positive("radius", radius),
        _positive("mu", mu),
    )
