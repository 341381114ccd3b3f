"""Objectives satisfying the (γ,κ)-KL condition, with proven constants, for Menart et al.'s algorithms.

Spec seed004 §5 ("Utility" test functions) and §3 (hard instances). Every objective here is an
empirical loss F(w) = (1/n) Σ_i f(w; x_i) on w ∈ R^d and declares, with the proof in its docstring:

- ``gamma``, ``kappa``: the (γ,κ)-KL inequality F(w) − F* ≤ γ^κ‖∇F(w)‖^κ for every w in the region;
- ``L0``: ‖∇f(w; x)‖ ≤ L0 for w in the region and *every admissible* data point x (a neighbouring
  dataset may hold any of them), not only the data at hand;
- ``L1``: ∇f(·; x) is L1-Lipschitz on the region (None when f is not smooth there);
- ``weak_convexity``: L̃1 with f(·; x) + (L̃1/2)‖·‖² convex (None if unknown or false);
- ``F_star = min F`` and ``w_star``, a minimiser (the one Menart et al. call w*);
- the region: the ball of radius ``radius`` around ``center`` (float64).

n enters the algorithms only through their noise, so several objectives are *data-free* (all examples
identical: F = f, any declared n is an honest dataset of n copies of one example) or hold *sufficient
statistics* of a dataset of declared size n; then :meth:`KLObjective.example_gradients` returns None.

**Constants are public.** The algorithms build their schedules and noise from γ, κ, L0, L1, L̃1 and the
region, and release them implicitly (a schedule of 10⁴ or 10⁶ rounds is visible), so an objective built from
private data declares them from its data *domain* (bounds the user gives, e.g. ‖a‖ ≤ row_bound) and from the
user's choices (the region), never from the data: replacing one example changes none of them. An objective
that would need a data statistic (a smallest eigenvalue, a mean) asks for a public bound on it instead and
refuses to run without one. ``w_star``, ``F_star`` (and a least-squares objective's H, q, s) are read off the
data, for *evaluating* results only; no algorithm reads them.

Symbols: gamma=γ, kappa=κ, tau=τ=κ/(κ−1) (growth exponent), L0, L1, weak_convexity=L̃1, D, epsilon=ε,
rho=ρ. Lemma numbers are the paper's (spec §1.1).

References:
    Menart, Ullah, Arora, Bassily, Guzmán, "Differentially Private Non-Convex Optimization under the
    KL Condition with Optimal Rates", 2024.
    Karimi, Nutini, Schmidt, "Linear Convergence of Gradient and Proximal-Gradient Methods under the
    Polyak-Łojasiewicz Condition", ECML-PKDD 2016 (the sine test function).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch

F64 = torch.float64

# sup_t (t² + 3 sin² t)/(2t + 3 sin 2t)², attained at t ≈ 2.20171 (recomputed in the tests), rounded up.
SINE_PL_RATIO = 2.8484999244


def default_weak_convexity(gamma: float, kappa: float, L0: float) -> float:
    """The L̃1 declared for a *convex* objective: L̃1 = (γL0)^{2−κ}/(32γ²).

    For convex f every L̃1 ≥ 0 is a valid weak-convexity constant, but Algorithm 2 needs L̃1 > 0 and
    trades it off: its round count T ∝ 1 + 32γ²L̃1F0^{(κ−2)/κ} grows with L̃1, while the inner
    problems' error O(L0²d/(L̃1n²ρ)) and the prox radius L0/(2L̃1) grow as L̃1 → 0. This value makes
    32γ²L̃1F0^{(κ−2)/κ} = 1 with the default F0 = (γL0)^κ (spec §1.1): T is twice its L̃1 → 0 limit,
    the largest L̃1 that costs at most that factor.
    """
    return (gamma * L0) ** (2 - kappa) / (32 * gamma**2)


# --- the interface --------------------------------------------------------------------------------


class KLObjective(ABC):
    """F(w) = (1/n) Σ_i f(w; x_i) with its (γ,κ)-KL, Lipschitz, smoothness and weak-convexity constants.

    Attributes:
        name: a short name for reports.
        n: the dataset size (may be huge for data-free / sufficient-statistics objectives).
        dim: d.
        L0, L1, weak_convexity, gamma, kappa: the constants (module docstring), valid on the region.
        center, radius: the region, the ball B_radius(center) (center float64, shape (d,)).
        F_star, w_star: min F and a minimiser (w_star None if unknown).

    :meth:`value` and :meth:`gradient` take w of shape (d,) or (k, d) and return float64.
    """

    name: str = "kl-objective"
    n: int
    dim: int
    L0: float
    L1: float | None
    weak_convexity: float | None
    gamma: float
    kappa: float
    center: torch.Tensor
    radius: float
    F_star: float
    w_star: torch.Tensor | None

    def value(self, w: torch.Tensor) -> torch.Tensor:
        """F(w): (d,) → scalar, (k, d) → (k,)."""
        points, single = self._points(w)
        v = self._value(points)
        return v[0] if single else v

    def gradient(self, w: torch.Tensor) -> torch.Tensor:
        """∇F(w) = (1/n) Σ_i ∇f(w; x_i): (d,) → (d,), (k, d) → (k, d) (a.e. where f has kinks)."""
        points, single = self._points(w)
        g = self._gradient(points)
        return g[0] if single else g

    def example_gradients(self, w: torch.Tensor) -> torch.Tensor | None:
        """∇f(w; x_i) for every example: (d,) → (n, d), (k, d) → (k, n, d); None without explicit data."""
        if not self._explicit:
            return None
        points, single = self._points(w)
        g = self._example_gradients(points)
        return g[0] if single else g

    def excess(self, w: torch.Tensor) -> torch.Tensor:
        """F(w) − F*."""
        return self.value(w) - self.F_star

    # --- for subclasses ---

    _explicit = False

    @abstractmethod
    def _value(self, points: torch.Tensor) -> torch.Tensor:
        """F at points (k, d) → (k,)."""

    @abstractmethod
    def _gradient(self, points: torch.Tensor) -> torch.Tensor:
        """∇F at points (k, d) → (k, d)."""

    def _example_gradients(self, points: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _region(self, center, radius, default_center: torch.Tensor) -> None:
        self.center = default_center.clone() if center is None else _vector("center", center, self.dim)
        self.radius = _positive("radius", radius)

    def _points(self, w) -> tuple[torch.Tensor, bool]:
        w = torch.as_tensor(w, dtype=F64)
        single = w.ndim == 1
        w = w.unsqueeze(0) if single else w
        if w.ndim != 2 or w.shape[1] != self.dim:
            raise ValueError(f"w must have shape ({self.dim},) or (k, {self.dim}); got {tuple(w.shape)}")
        return w, single

    def __repr__(self) -> str:
        L1 = "None" if self.L1 is None else f"{self.L1:.4g}"
        return (f"{type(self).__name__}(n={self.n}, d={self.dim}, gamma={self.gamma:.4g}, kappa={self.kappa:.4g}, "
                f"L0={self.L0:.4g}, L1={L1}, radius={self.radius:.4g})")


# --- data-free objectives -------------------------------------------------------------------------


class Quadratic(KLObjective):
    """F(w) = f(w) = ½‖w − c‖², data-free (every example is the same), PL. Spec §5, first test function.

    Constants (r_max = ‖center − c‖ + radius, the largest distance to c in the region; the spec's
    ball of radius R around w* = c has r_max = R):
    - KL: ∇F = w − c, so F − F* = ½‖∇F‖² = γ²‖∇F‖² with γ = 1/√2, κ = 2 (equality everywhere; μ = 1).
    - L0 = r_max (‖∇f‖ = ‖w − c‖); L1 = 1 (∇²f = I); F* = 0, w* = c.
    - convex, so weak_convexity defaults to :func:`default_weak_convexity` (= 1/16 here).

    Args:
        dim: d ≥ 1.  n: the declared dataset size (n copies of the one example), ≥ 1.
        c: the minimiser (default 0).  center: default c.  radius: R > 0.
        weak_convexity: L̃1 ≥ 0 to declare instead of the default.
    """

    name = "quadratic"

    def __init__(self, dim: int, n: int = 1, *, c=None, center=None, radius: float = 1.0,
                 weak_convexity: float | None = None) -> None:
        self.dim, self.n = _integer("dim", dim, 1), _integer("n", n, 1)
        self.w_star = torch.zeros(self.dim, dtype=F64) if c is None else _vector("c", c, self.dim)
        self._region(center, radius, self.w_star)
        self.gamma, self.kappa, self.F_star = 1 / math.sqrt(2), 2.0, 0.0
        self.L0 = float(torch.linalg.vector_norm(self.center - self.w_star)) + self.radius
        self.L1 = 1.0
        self.weak_convexity = _weak(weak_convexity, self.gamma, self.kappa, self.L0)

    def _value(self, points):
        return 0.5 * ((points - self.w_star) ** 2).sum(-1)

    def _gradient(self, points):
        return points - self.w_star


class PowerGrowth(KLObjective):
    """F(w) = f(w) = ‖w − w*‖^τ with τ = κ/(κ−1), data-free; exactly (1/τ, κ)-KL. Spec §5.

    Proof of the KL constant: with r = ‖w − w*‖, ∇F = τr^{τ−2}(w − w*), ‖∇F‖ = τr^{τ−1}, so
    γ^κ‖∇F‖^κ = (γτ)^κ r^{κ(τ−1)} = (γτ)^κ r^τ, because κ(τ−1) = κ/(κ−1) = τ. With γ = 1/τ this is
    r^τ = F − F*: equality at every w, so no smaller γ works. (Lemma 6, from convexity and the
    (1, τ)-growth F − F* = r^τ, gives only γ = 1.)

    Other constants (r_max = ‖center − w*‖ + radius; the spec's ball around w* has r_max = R):
    - L0 = τ r_max^{τ−1}, the largest ‖∇f‖ on the region.
    - L1 = τ(τ−1) r_max^{τ−2} if τ ≥ 2 (κ ≤ 2): ∇²f = τr^{τ−2}(I + (τ−2)uuᵀ) has eigenvalues τr^{τ−2} and
      τ(τ−1)r^{τ−2}, increasing in r for τ ≥ 2. For τ < 2 (κ > 2) the Hessian blows up at w*: L1 = None,
      the case of Algorithm 2 (proximal point).
    - convex (a convex increasing function of a norm), so weak_convexity defaults to
      :func:`default_weak_convexity`; with center = w* that is τ²R^{τ−2}/32.
    - F* = 0 at w*.
    The objective is data-free: a dataset of n copies of one example, so n is real but uninformative.

    Args:
        kappa: κ > 1 (τ = κ/(κ−1) > 1): 1.5 → τ = 3, 2 → τ = 2, 3 → τ = 1.5.
        dim: d ≥ 1.  n: declared dataset size ≥ 1.  w_star: default 0.  center: default w*.
        radius: R > 0.  weak_convexity: L̃1 ≥ 0 to declare instead of the default.
    """

    name = "power-growth"

    def __init__(self, kappa: float, dim: int, n: int = 1, *, w_star=None, center=None, radius: float = 1.0,
                 weak_convexity: float | None = None) -> None:
        self.kappa = _positive("kappa", kappa, low=1.0)
        self.tau = self.kappa / (self.kappa - 1)
        self.dim, self.n = _integer("dim", dim, 1), _integer("n", n, 1)
        self.w_star = torch.zeros(self.dim, dtype=F64) if w_star is None else _vector("w_star", w_star, self.dim)
        self._region(center, radius, self.w_star)
        self.gamma, self.F_star = 1 / self.tau, 0.0
        r_max = float(torch.linalg.vector_norm(self.center - self.w_star)) + self.radius
        self.L0 = self.tau * r_max ** (self.tau - 1)
        self.L1 = self.tau * (self.tau - 1) * r_max ** (self.tau - 2) if self.tau >= 2 else None
        self.weak_convexity = _weak(weak_convexity, self.gamma, self.kappa, self.L0)
        self.name = f"power-growth-kappa{self.kappa:g}"

    def _value(self, points):
        return torch.linalg.vector_norm(points - self.w_star, dim=-1) ** self.tau

    def _gradient(self, points):
        e = points - self.w_star
        r = torch.linalg.vector_norm(e, dim=-1, keepdim=True)
        scale = torch.where(r > 0, self.tau * r.clamp_min(1e-300) ** (self.tau - 2), torch.zeros_like(r))
        return scale * e


class PseudoHuber(KLObjective):
    """F(w) = f(w) = √(1 + ‖w‖²) − 1, data-free, (γ(R), 1)-KL on a ball. Spec §5.

    Proof: with r = ‖w‖ and s = √(1 + r²), ‖∇F‖ = r/s and F − F* = s − 1, so the κ = 1 inequality
    s − 1 ≤ γ r/s needs γ ≥ h(r) = s(s − 1)/r = s√(s−1)/√(s+1), which increases with s (hence with r).
    On a region within distance r_max = ‖center‖ + radius of 0 the best γ is therefore
    γ = h(r_max) = (1 + r_max² − √(1 + r_max²))/r_max: 0.5858, 4.1802, 9.0950 for r_max = 1, 5, 10
    (the spec's 0.59 / 4.18 / 9.10). As r → ∞, γ ~ r: no global KL with κ = 1.

    Other constants: L0 = r_max/√(1 + r_max²) (< 1 everywhere); L1 = 1 (∇²F = (I − wwᵀ/s²)/s, largest
    eigenvalue 1/s ≤ 1); convex, weak_convexity defaults to :func:`default_weak_convexity`; F* = 0 at 0.

    Args:
        dim: d ≥ 1.  n: declared dataset size ≥ 1.  radius: R > 0.  center: default 0.
        weak_convexity: L̃1 ≥ 0 to declare instead of the default.
    """

    name = "pseudo-huber"

    def __init__(self, dim: int, n: int = 1, *, radius: float = 1.0, center=None,
                 weak_convexity: float | None = None) -> None:
        self.dim, self.n = _integer("dim", dim, 1), _integer("n", n, 1)
        self.w_star = torch.zeros(self.dim, dtype=F64)
        self._region(center, radius, self.w_star)
        r_max = float(torch.linalg.vector_norm(self.center)) + self.radius
        self.gamma, self.kappa, self.F_star = pseudo_huber_gamma(r_max), 1.0, 0.0
        self.L0, self.L1 = r_max / math.sqrt(1 + r_max**2), 1.0
        self.weak_convexity = _weak(weak_convexity, self.gamma, self.kappa, self.L0)

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
    """f(w; x) = x·g(w), g(w) = Σ_j (w_j² + 3 sin² w_j), x ∈ [x_low, x_bound]: nonconvex PL. Spec §5.

    F = x̄·g with x̄ the mean of the data. Constants (all from the domain [x_low, x_bound], 0 < x_low, so they hold
    for every dataset of the domain, neighbours included):
    - KL (κ = 2): g is separable, so g/‖∇g‖² = Σφ(w_j)/Σφ′(w_j)² ≤ sup_t φ(t)/φ′(t)² = s ≈ 2.8485
      (φ(t) = t² + 3sin²t, φ′(t) = 2t + 3 sin 2t; sup at t ≈ 2.2017; :data:`SINE_PL_RATIO`).
      F/‖∇F‖² = g/(x̄‖∇g‖²) ≤ s/x̄ ≤ s/x_low, so γ = √(s/x_low) (1.688 for x_low = 1; Karimi et al.'s
      μ = 1/32 gives 4). The data's own √(s/x̄) would be tighter, but x̄ is private: reading γ off it would
      publish x̄ through the algorithms' schedules.
      Global: g's only stationary point is 0 (φ′(t) = 0 only at t = 0, since sin 2t > 0 on (0, π/2)
      and |2t| > 3 beyond 1.5), F* = 0, w* = 0.
    - L1 = 8·x_bound: φ″(t) = 2 + 6cos 2t ∈ [−4, 8], ∇²f diagonal.
    - weak_convexity = 4·x_bound (φ″ ≥ −4). Not convex.
    - L0: the spec's 2R + 3 is per coordinate on [−R, R]^d (ℓ∞: |φ′(t)| ≤ 2|t| + 3); in ℓ2 on that cube
      it is √d(2R + 3). On the region, a ball within distance ρ = ‖center‖ + radius of 0:
      ‖∇g‖ ≤ 2‖w‖ + 3‖sin 2w‖ ≤ 2ρ + 3min(2ρ, √d) (|sin 2t| ≤ min(2|t|, 1)), so
      L0 = x_bound·(2ρ + 3·min(2ρ, √d)) (≤ 8ρ·x_bound, the smoothness bound).

    Args:
        x: the data, shape (n,), values in [x_low, x_bound] (explicit; :meth:`example_gradients` works), or
            use :meth:`from_mean` for a data-free dataset of n copies of one x.
        dim: d ≥ 1.  x_low: the domain's lower bound, > 0, required (a public bound, not the data's minimum).
        x_bound: the domain's upper bound (default 1).  center: default 0.  radius: > 0.

    Raises:
        ValueError: x_low missing or not in (0, x_bound], or data outside [x_low, x_bound].
    """

    name = "sine-pl"

    def __init__(self, x, dim: int, *, x_low: float | None = None, x_bound: float = 1.0, center=None,
                 radius: float = 1.0) -> None:
        self.dim = _integer("dim", dim, 1)
        self._domain(x_low, x_bound)
        x = torch.as_tensor(x, dtype=F64)
        outside = (x < self.x_low).any() or (x > self.x_bound).any()
        if x.ndim != 1 or len(x) < 1 or not torch.isfinite(x).all() or outside:
            raise ValueError(f"x must be a non-empty vector with values in [x_low, x_bound] = "
                             f"[{self.x_low}, {self.x_bound}]; got {x!r}")
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
        return cls(low + (1 - low) * torch.rand(n, generator=gen, dtype=F64), dim, x_low=low, x_bound=1.0,
                   **kwargs)

    @classmethod
    def from_mean(cls, x_mean: float, dim: int, n: int, *, x_low: float | None = None, x_bound: float = 1.0,
                  center=None, radius: float = 1.0) -> SinePL:
        """The data-free dataset of n copies of x_mean ∈ [x_low, x_bound] (F = x_mean·g), without storing it.

        x_mean is a public choice here (the experiments' fixture), so the domain's lower bound defaults to it;
        for the mean of private data use the explicit constructor, whose γ comes from the domain.
        """
        self = cls.__new__(cls)
        self.dim, self.n = _integer("dim", dim, 1), _integer("n", n, 1)
        if not (isinstance(x_mean, (int, float)) and 0 < x_mean <= x_bound):
            raise ValueError(f"x_mean must be in (0, x_bound={x_bound}]; got {x_mean!r}")
        self._domain(x_mean if x_low is None else x_low, x_bound)
        if x_mean < self.x_low:
            raise ValueError(f"x_mean must be in [x_low, x_bound] = [{self.x_low}, {self.x_bound}]; got {x_mean!r}")
        self.x = None
        self._setup(float(x_mean), center, radius)
        return self

    def _domain(self, x_low, x_bound) -> None:
        self.x_bound = _positive("x_bound", x_bound)
        if x_low is None:
            raise ValueError("x_low must be a public lower bound > 0 on the data (the domain [x_low, x_bound]; "
                             "γ = √(2.8485/x_low) is read from it, not from the data's mean); got None")
        self.x_low = _positive("x_low", x_low)
        if self.x_low > self.x_bound:
            raise ValueError(f"x_low must be <= x_bound = {self.x_bound}; got {x_low!r}")

    def _setup(self, x_mean, center, radius):
        self.x_mean = x_mean  # the data's mean: F = x̄·g is evaluated with it; no constant is read from it
        self.w_star = torch.zeros(self.dim, dtype=F64)
        self._region(center, radius, self.w_star)
        rho = float(torch.linalg.vector_norm(self.center)) + self.radius
        self.gamma, self.kappa, self.F_star = math.sqrt(SINE_PL_RATIO / self.x_low), 2.0, 0.0
        self.L0 = self.x_bound * (2 * rho + 3 * min(2 * rho, math.sqrt(self.dim)))
        self.L1, self.weak_convexity = 8 * self.x_bound, 4 * self.x_bound

    def _value(self, points):
        return self.x_mean * (points**2 + 3 * torch.sin(points) ** 2).sum(-1)

    def _gradient(self, points):
        return self.x_mean * _sine_grad(points)

    def _example_gradients(self, points):
        return self.x[:, None] * _sine_grad(points)[:, None, :]


def _sine_grad(points):
    return 2 * points + 3 * torch.sin(2 * points)


class LeastSquares(KLObjective):
    """F(w) = (1/2n)‖Aw − b‖², f(w; (a, b)) = ½(a·w − b)², with data domain ‖a‖ ≤ row_bound, |b| ≤ target_bound.

    Every constant comes from public inputs (module docstring): the domain (row_bound, target_bound), the
    region (center, radius) and mu, a public lower bound on the smallest nonzero eigenvalue of H = AᵀA/n.
    Nothing is read off the data: the data's own smallest eigenvalue, minimiser or largest row would make γ,
    the region and L0 (hence every schedule and noise level of the algorithms) functions of the private
    data — replacing one row once moved KL-Spider's schedule from 11,417 to 1,140,951 rounds.

    Constants (q = Aᵀb/n, s = bᵀb/n; R_w = ‖center‖ + radius bounds ‖w‖ on the region):
    - KL (κ = 2, global): with w* = H⁺q (the minimum-norm minimiser; q ∈ range H) and e = w − w*,
      F − F* = ½eᵀHe and ∇F = He, so ‖∇F‖² = eᵀH²e ≥ μ_data·eᵀHe for μ_data the smallest *nonzero*
      eigenvalue of H (the null-space part of e adds to neither): ½‖∇F‖² ≥ μ(F − F*) for every μ ≤ μ_data,
      γ = 1/√(2μ). mu is the user's claim (e.g. from the design, as in :meth:`generate`); it is not checked
      against the data, since a refusal would itself depend on them. If it is false, the utility guarantees
      fail; the privacy guarantee does not depend on it.
    - L0 = row_bound·(row_bound·R_w + target_bound): ‖∇f‖ = |a·w − b|‖a‖ ≤ ‖a‖(‖a‖‖w‖ + |b|).
    - L1 = row_bound² (∇²f = aaᵀ); convex, weak_convexity defaults to :func:`default_weak_convexity`.
    - F* = ½(s − qᵀw*) (or the mean squared residual at w* for explicit data), for evaluation only.
    F is evaluated as F* + ½eᵀHe + eᵀ(Hw* − q), algebraically F and free of the cancellation in
    ½wᵀHw − qᵀw + ½s, so F − F* is accurate near w*.

    Two forms: explicit data (A, b) — :meth:`example_gradients` works — or sufficient statistics
    (:meth:`from_statistics`, :meth:`sufficient`, ``generate(..., sufficient=True)``) holding only H, q,
    s and a declared n. In the sufficient form made here, n is honest: the dataset is a sample of m
    points each repeated n/m times (m divides n), whose statistics are exactly the sample's, so F is the
    sample's empirical loss and only the noise (∝ 1/n) sees n. Privacy for that dataset is privacy for
    replace-one neighbours of it, not for the m-sample.

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

    def __init__(self, A, b, *, row_bound: float | None = None, target_bound: float | None = None,
                 radius: float | None = None, mu: float | None = None, center=None,
                 weak_convexity: float | None = None) -> None:
        public = _least_squares_public(row_bound, target_bound, radius, mu)
        A, b = torch.as_tensor(A, dtype=F64), torch.as_tensor(b, dtype=F64)
        if A.ndim != 2 or b.ndim != 1 or A.shape[0] != b.shape[0] or A.shape[0] < 1 or A.shape[1] < 1:
            raise ValueError(f"A must be (n, d) and b (n,) with n, d >= 1; got {tuple(A.shape)} and {tuple(b.shape)}")
        if not (torch.isfinite(A).all() and torch.isfinite(b).all()):
            raise ValueError("A and b must be finite")
        row_max, b_max = float(torch.linalg.vector_norm(A, dim=1).max()), float(b.abs().max())
        row_bound, target_bound = public[:2]
        if row_max > row_bound * (1 + 1e-12) or b_max > target_bound * (1 + 1e-12):
            raise ValueError(f"the data must lie in the domain ‖a‖ <= row_bound={row_bound}, |b| <= target_bound="
                             f"{target_bound}; got max ‖a‖ = {row_max}, max |b| = {b_max}")
        self.A, self.b, self._explicit = A, b, True
        n = A.shape[0]
        self._setup(A.T @ A / n, A.T @ b / n, float(b @ b) / n, n, *public, center, weak_convexity)

    @classmethod
    def from_statistics(cls, H, q, s: float, n: int, *, row_bound: float | None = None,
                        target_bound: float | None = None, radius: float | None = None, mu: float | None = None,
                        center=None, weak_convexity: float | None = None) -> LeastSquares:
        """Sufficient statistics H = AᵀA/n, q = Aᵀb/n, s = bᵀb/n of a dataset of declared size n.

        The public inputs are those of the constructor. Checks what the domain implies (H symmetric PSD,
        tr H ≤ row_bound², s ≤ target_bound²); that the statistics come from some n points of the domain is
        the caller's claim.
        """
        public = _least_squares_public(row_bound, target_bound, radius, mu)
        row_bound, target_bound = public[:2]
        H, q = torch.as_tensor(H, dtype=F64), torch.as_tensor(q, dtype=F64)
        if H.ndim != 2 or H.shape[0] != H.shape[1] or q.shape != (H.shape[0],):
            raise ValueError(f"H must be (d, d) and q (d,); got {tuple(H.shape)} and {tuple(q.shape)}")
        if not torch.allclose(H, H.T, rtol=1e-12, atol=1e-15) or float(torch.linalg.eigvalsh(H)[0]) < -1e-12:
            raise ValueError("H must be symmetric positive semidefinite")
        if float(H.trace()) > row_bound**2 * (1 + 1e-12) or not (0 <= s <= target_bound**2 * (1 + 1e-12)):
            raise ValueError(f"need tr H <= row_bound² = {row_bound**2} and 0 <= s <= target_bound² = "
                             f"{target_bound**2}; got tr H = {float(H.trace())}, s = {s}")
        self = cls.__new__(cls)
        self.A = self.b = None
        self._setup(H, q, float(s), _integer("n", n, 1), *public, center, weak_convexity)
        return self

    def sufficient(self, n: int | None = None) -> LeastSquares:
        """This objective in sufficient-statistics form, for the dataset repeated n/self.n times (n a multiple)."""
        n = self.n if n is None else _integer("n", n, 1)
        if n % self.n:
            raise ValueError(f"n must be a multiple of the current n={self.n} (each example repeated); got {n}")
        new = LeastSquares.__new__(LeastSquares)
        new.__dict__.update(self.__dict__)
        new.A = new.b = None
        new._explicit, new.n = False, n
        return new

    @classmethod
    def generate(cls, dim: int, n: int, seed: int = 0, *, noise: float = 0.1, sufficient: bool = False,
                 sample: int | None = None, radius: float = 2.0, **kwargs) -> LeastSquares:
        """A balanced design from ``seed``: row i is ±q_{i mod d} for a random orthonormal basis q_1..q_d,
        b = a·w_true + noise·N(0, 1) clipped to [−1 − 4·noise, 1 + 4·noise], w_true uniform on the unit sphere.

        Every constant is public. The domain is row_bound = 1, target_bound = 1 + 4·noise (clipping makes
        it a bound). The design fixes the spectrum: H = Σ_j (c_j/m) q_j q_jᵀ with c_j ∈ {⌊m/d⌋, ⌈m/d⌉} rows
        along q_j, so mu = max(⌊m/d⌋, 1)/m is the smallest nonzero eigenvalue, known before any b is drawn.
        The region is the ball of radius ``radius`` (default 2) around 0, which holds w_true and, unless the
        noise is large, w*. sufficient=True draws ``sample`` = m rows (default: the largest divisor of n that
        is ≤ 1000, at least d) and declares the dataset of those m rows each repeated n/m times (see the
        class docstring).
        """
        dim, n = _integer("dim", dim, 1), _integer("n", n, 1)
        noise = _positive("noise", noise, low=0.0, strict=False)
        m = n
        if sufficient:
            m = next(k for k in range(min(n, 1000), 0, -1) if n % k == 0) if sample is None else sample
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
        obj = cls(A, b, row_bound=1.0, target_bound=bound, radius=radius, mu=max(m // dim, 1) / m, **kwargs)
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
            self.F_star = float(0.5 * ((self.A @ self.w_star - self.b) ** 2).mean())
        else:
            self.F_star = max(0.5 * (s - float(q @ self.w_star)), 0.0)
        self._region(center, radius, torch.zeros(self.dim, dtype=F64))
        self.gamma, self.kappa = 1 / math.sqrt(2 * mu), 2.0
        R_w = float(torch.linalg.vector_norm(self.center)) + self.radius
        self.L0 = row_bound * (row_bound * R_w + target_bound)
        self.L1 = row_bound**2
        self.weak_convexity = _weak(weak_convexity, self.gamma, self.kappa, self.L0)

    def _value(self, points):
        e = points - self.w_star
        return self.F_star + 0.5 * ((e @ self.H) * e).sum(-1) + e @ self._r0

    def _gradient(self, points):
        return points @ self.H - self.q

    def _example_gradients(self, points):
        r = points @ self.A.T - self.b  # (k, n)
        return r[..., None] * self.A


def _least_squares_public(row_bound, target_bound, radius, mu) -> tuple[float, float, float, float]:
    """LeastSquares' public inputs, each required (none may be read off the data), validated."""
    rules = {"row_bound": "a public bound > 0 on the rows' norms ‖a_i‖ (the data domain)",
             "target_bound": "a public bound >= 0 on the targets |b_i| (the data domain)",
             "radius": "the region's radius > 0, a public choice",
             "mu": "a public lower bound > 0 on the smallest nonzero eigenvalue of AᵀA/n (γ = 1/√(2μ))"}
    values = {"row_bound": row_bound, "target_bound": target_bound, "radius": radius, "mu": mu}
    for name, value in values.items():
        if value is None:
            raise ValueError(f"{name} must be {rules[name]}; got None")
    return (_positive("row_bound", row_bound), _positive("target_bound", target_bound, strict=False),
            _positive("radius", radius), _positive("mu", mu))


# --- the lower-bound instances ----------------------------------------------------------------------


class HuberLinear(KLObjective):
    """Theorem 7's instance: f(w; x) = ⟨w, x⟩ + λH(w), F(w) = ⟨w, x̄⟩ + λH(w). Build with :func:`thm7_instance`.

    Correction (spec §3): the paper prints H(w) = ‖w‖² for ‖w‖ ≤ 4D and 4D‖w‖ otherwise, whose gradient
    jumps from 8Dw/‖w‖ to 4Dw/‖w‖ at ‖w‖ = 4D (a concave kink: not convex, not smooth, contradicting
    the theorem's "convex, smooth"). Default: the Huber function H(w) = 8D‖w‖ − 16D² outside, C¹,
    convex and 2-smooth; ``paper=True`` restores the printed one. Inside ‖w‖ ≤ 4D both are ‖w‖².

    Constants (region: the ball of radius 4D around 0, where F = λ‖w − w*‖² + F*):
    - w* = −x̄/(2λ), ‖w*‖ ≤ D since ‖Σx_i‖ ≤ NL0 and λ = NL0/(2nD); F* = −λ‖w*‖².
    - KL (κ = 2): F − F* = λ‖w − w*‖², ‖∇F‖ = 2λ‖w − w*‖, so F − F* = ‖∇F‖²/(4λ): γ = 1/(2√λ).
    - L0 = L0_data + 8λD = L0_data(1 + 4N/n) ≤ 5L0_data: ‖x‖ ≤ L0_data and ‖λ∇H‖ ≤ 8λD (the paper
      writes L0 + 4λD, an underestimate inside the quadratic region).
    - L1 = 2λ = NL0/(nD) ≤ √d L0/(nεD) (corrected H; None with paper=True).
    - weak_convexity: corrected: convex, :func:`default_weak_convexity`; paper=True: None (concave kink).
    """

    name = "thm7-huber"

    def __init__(self, X, lam: float, D: float, L0_data: float, N: int, *, paper: bool = False) -> None:
        self.X, self.lam, self.D, self.L0_data, self.N, self.paper = X, lam, D, L0_data, N, paper
        self.n, self.dim = X.shape
        self._explicit = True
        self.x_mean = X.mean(0)
        self.w_star = -self.x_mean / (2 * lam)
        self.F_star = -lam * float(self.w_star @ self.w_star)
        self._region(None, 4 * D, torch.zeros(self.dim, dtype=F64))
        self.gamma, self.kappa = 1 / (2 * math.sqrt(lam)), 2.0
        self.L0 = L0_data + 8 * lam * D
        self.L1 = None if paper else 2 * lam
        self.weak_convexity = None if paper else default_weak_convexity(self.gamma, self.kappa, self.L0)

    def _H(self, points):
        r = torch.linalg.vector_norm(points, dim=-1)
        t = 4 * self.D
        outside = 4 * self.D * r if self.paper else 2 * t * r - t * t
        return torch.where(r <= t, r * r, outside)

    def _grad_H(self, points):
        r = torch.linalg.vector_norm(points, dim=-1, keepdim=True)
        t = 4 * self.D
        slope = (4 * self.D if self.paper else 2 * t) / r.clamp_min(1e-300)
        return torch.where(r <= t, 2 * torch.ones_like(r), slope) * points

    def _value(self, points):
        return points @ self.x_mean + self.lam * self._H(points)

    def _gradient(self, points):
        return self.x_mean + self.lam * self._grad_H(points)

    def _example_gradients(self, points):
        return self.X + self.lam * self._grad_H(points)[:, None, :]


def thm7_instance(n: int, d: int, epsilon: float, D: float = 1.0, L0: float = 1.0, seed: int = 0, *,
                  paper: bool = False) -> HuberLinear:
    """Theorem 7's hard instance (spec §3): N = min(⌊√d/ε⌋, n) points in {±L0/√d}^d, the rest 0.

    The theorem needs a fingerprinting code for the nonzero points; here each column j has a bias
    p_j = sin²θ_j, θ_j uniform on [t, π/2 − t] with t = 1/(300N) (Tardos' law) and entries +L0/√d with
    probability p_j, so that ‖Σx_i‖ is a constant fraction of NL0 (with unbiased signs it would be ~√N L0).
    λ = NL0/(2nD). See :class:`HuberLinear` for the constants and the correction taken (``paper``).
    """
    n, d = _integer("n", n, 1), _integer("d", d, 1)
    epsilon, D, L0 = _positive("epsilon", epsilon), _positive("D", D), _positive("L0", L0)
    N = max(1, min(math.floor(math.sqrt(d) / epsilon), n))
    gen = torch.Generator().manual_seed(seed)
    t = 1 / (300 * N)
    theta = t + (math.pi / 2 - 2 * t) * torch.rand(d, generator=gen, dtype=F64)
    signs = torch.where(torch.rand(N, d, generator=gen, dtype=F64) < torch.sin(theta) ** 2, 1.0, -1.0)
    X = torch.zeros(n, d, dtype=F64)
    X[:N] = signs.to(F64) * (L0 / math.sqrt(d))
    return HuberLinear(X, N * L0 / (2 * n * D), D, L0, N, paper=paper)


class TwoSidedPower(KLObjective):
    """Theorem 8's d = 1 instance, labels y ∈ {±1}. Build with :func:`thm8_instance`.

    f(w; +1) = a − w for w ≤ a, (w − a)^τ for w > a;  f(w; −1) = (−a − w)^τ for w ≤ −a, w + a for w > −a;
    τ = κ/(κ−1), p = 1/(nε), a = p^{κ−1}/2 (= p^{1/(τ−1)}/2). With n₊ = ⌈n(1+p)/2⌉ labels +1 and
    p̂ = (2n₊ − n)/n ≥ p (the realised imbalance):
    - on [−a, a], F(w) = a − p̂w; F′ = −p̂ on (−a, a), (1−p̂)/2 at a⁺, so w* = a, F* = a(1 − p̂)
      (the mirrored dataset, sign = −1, has w* = −a).
    - growth (1, τ) near w*: on [−a, a], F − F* = p̂r ≥ r^τ since r^{τ−1} ≤ (2a)^{τ−1} = p ≤ p̂.
    - KL, γ = 1 (tight as w → −a: F − F* → 2ap̂ = p^{κ−1}p̂ ≤ p̂^κ = |F′|^κ). Beyond ±a, by convexity
      F − F* ≤ |F′|·r, so |F′|^κ ≥ F − F* whenever r ≤ |F′|^{κ−1}; right of a, |F′| ≥ (1−p̂)/2 and
      |F′| ≥ τ(1+p̂)/2·r^{τ−1} (so |F′|^{κ−1} ≥ (τ(1+p̂)/2)^{κ−1} r, enough when τ(1+p̂) ≥ 2); left of −a
      at distance s, r = 2a + s and |F′| ≥ (1+p̂)/2. So KL holds within a + r₀(p̂) of 0,
      r₀(q) = min{τ^{−(κ−1)}, r_right(q), ((1+q)/2)^{κ−1} − p^{κ−1}}, r_right(q) = ∞ if τ(1+q) ≥ 2 else
      ((1−q)/2)^{κ−1}.
    - The region is public: p̂ is a statistic of the labels (one replaced label moves it by 2/n), so the radius
      is a + min over the family q = |p̂| ∈ [p, 1] of r₀(q): the last term is smallest at q = p, and r_right(q)
      stays above (1 − 1/τ)^{κ−1} = κ^{−(κ−1)} (its value at q = 2/τ − 1, beyond which it is ∞), so
      r₀ = min{τ^{−(κ−1)}, κ^{−(κ−1)} if τ(1+p) < 2, ((1+p)/2)^{κ−1} − p^{κ−1}}. The minimiser w* = ±a and F*
      are read off the labels, for evaluation only.
    - L0 = 1 on the region: slopes are 1 or τr^{τ−1} ≤ τ·τ^{−(κ−1)(τ−1)} = 1 for r ≤ τ^{−(κ−1)}.
    - L1 = None (kinks at ±a); convex, weak_convexity :func:`default_weak_convexity`.
    """

    name = "thm8-two-sided-power"

    def __init__(self, y: torch.Tensor, a: float, kappa: float, p: float) -> None:
        self.y, self.a, self.kappa, self.p = y, a, kappa, p
        self.tau = kappa / (kappa - 1)
        self.n, self.dim, self._explicit = len(y), 1, True
        n_plus = int((y > 0).sum())
        self.p_hat = (2 * n_plus - self.n) / self.n
        sign = 1.0 if self.p_hat > 0 else -1.0
        self.w_star = torch.tensor([sign * a], dtype=F64)
        self.F_star = a * (1 - abs(self.p_hat))
        r_right = math.inf if self.tau * (1 + p) >= 2 else kappa ** (-(kappa - 1))
        r0 = min(self.tau ** (-(kappa - 1)), r_right, ((1 + p) / 2) ** (kappa - 1) - p ** (kappa - 1))
        self._region(None, a + r0, torch.zeros(1, dtype=F64))
        self.gamma, self.L0, self.L1 = 1.0, 1.0, None
        self.weak_convexity = default_weak_convexity(self.gamma, self.kappa, self.L0)

    def _losses(self, points):  # (k, 1) → (k, n)
        w, a, tau = points, self.a, self.tau
        plus = torch.where(w <= a, a - w, (w - a).clamp_min(0) ** tau)
        minus = torch.where(w <= -a, (-a - w).clamp_min(0) ** tau, w + a)
        return torch.where(self.y > 0, plus, minus)

    def _value(self, points):
        return self._losses(points).mean(-1)

    def _example_gradients(self, points):
        w, a, tau = points, self.a, self.tau
        plus = torch.where(w <= a, -torch.ones_like(w), tau * (w - a).clamp_min(0) ** (tau - 1))
        minus = torch.where(w <= -a, -tau * (-a - w).clamp_min(0) ** (tau - 1), torch.ones_like(w))
        return torch.where(self.y > 0, plus, minus)[..., None]  # (k, n, 1)

    def _gradient(self, points):
        return self._example_gradients(points).mean(-2)


def thm8_instance(n: int, epsilon: float, kappa: float, *, sign: int = 1) -> TwoSidedPower:
    """Theorem 8's instance (spec §3): d = 1, ⌈n(1+p)/2⌉ labels ``sign`` (the rest −sign), p = 1/(nε).

    Requires p < 1 with at least one label of each kind (nε > 1). w* = sign·a, a = p^{κ−1}/2.
    """
    n = _integer("n", n, 2)
    epsilon, kappa = _positive("epsilon", epsilon), _positive("kappa", kappa, low=1.0)
    if sign not in (1, -1):
        raise ValueError(f"sign must be 1 or -1; got {sign!r}")
    p = 1 / (n * epsilon)
    n_major = math.ceil(n * (1 + p) / 2 - 1e-9)
    if not p < 1 or n_major >= n:
        raise ValueError(f"n*epsilon must be large enough that p = 1/(n*epsilon) < 1 leaves both labels; "
                         f"got n={n}, epsilon={epsilon}")
    y = torch.full((n,), -float(sign), dtype=F64)
    y[:n_major] = float(sign)
    return TwoSidedPower(y, p ** (kappa - 1) / 2, float(kappa), p)


# --- lower bounds (constants and log factors dropped) -------------------------------------------


def lower_bound_thm7(n: int, d: int, epsilon: float, D: float, L0: float) -> float:
    """L0·D·min{√d/(nε), 1}: Theorem 7's Ω(·) without its constant ((ε, δ)-DP, ε ≤ 1, δ < 1/n)."""
    n, d = _integer("n", n, 1), _integer("d", d, 1)
    epsilon, D, L0 = _positive("epsilon", epsilon), _positive("D", D), _positive("L0", L0)
    return L0 * D * min(math.sqrt(d) / (n * epsilon), 1.0)


def lower_bound_thm8(n: int, epsilon: float, kappa: float) -> float:
    """¼(1/(nε))^κ, Theorem 8's bound on E[excess] ((ε, δ)-DP, 0 < ε ≤ ln 2, δ ≤ (1 − e^{−ε})/16)."""
    n = _integer("n", n, 1)
    epsilon, kappa = _positive("epsilon", epsilon), _positive("kappa", kappa, low=1.0)
    return 0.25 * (1 / (n * epsilon)) ** kappa


def lower_bound_cor1(n: int, d: int, rho: float, gamma: float, L0: float, kappa: float) -> float:
    """(γL0√d/(n√ρ))^κ: Corollary 1's Ω̃(·) for ρ-zCDP with its constant and log factors dropped."""
    n, d = _integer("n", n, 1), _integer("d", d, 1)
    rho, gamma, L0 = _positive("rho", rho), _positive("gamma", gamma), _positive("L0", L0)
    kappa = _positive("kappa", kappa, low=1.0, strict=False)
    return (gamma * L0 * math.sqrt(d) / (n * math.sqrt(rho))) ** kappa


# --- checks -------------------------------------------------------------------------------------


def check_kl(objective: KLObjective, points: torch.Tensor) -> float:
    """max over points of (F(w) − F*)/(γ^κ‖∇F(w)‖^κ); ≤ 1 means the KL inequality holds there (spec §5.6).

    A point with ∇F = 0 counts 0 if F(w) ≤ F* and +∞ otherwise. Rounding can put a point where the
    inequality is tight (e.g. every point of :class:`Quadratic`) a few ulps above 1.
    """
    points = objective._points(points)[0]
    gap = objective.value(points) - objective.F_star
    denom = (objective.gamma * torch.linalg.vector_norm(objective.gradient(points), dim=-1)) ** objective.kappa
    zero = torch.where(gap > 0, torch.full_like(gap, math.inf), torch.zeros_like(gap))
    ratio = torch.where(denom > 0, gap / denom.clamp_min(1e-300), zero)
    return float(ratio.max())


def sample_ball(objective: KLObjective, k: int, seed: int = 0, *, radial: str = "volume") -> torch.Tensor:
    """k points (k, d) in the objective's region B_radius(center), from ``seed``.

    radial="volume": uniform in the ball (in high d, near its boundary); "uniform": distance from the
    center uniform on [0, radius] (more points near the center, where KL constants are often tight).
    """
    k = _integer("k", k, 1)
    if radial not in ("volume", "uniform"):
        raise ValueError(f"radial must be 'volume' or 'uniform'; got {radial!r}")
    gen = torch.Generator().manual_seed(seed)
    u = _sphere(k, objective.dim, gen)
    t = torch.rand(k, 1, generator=gen, dtype=F64)
    r = objective.radius * (t ** (1 / objective.dim) if radial == "volume" else t)
    return objective.center + r * u


# --- helpers --------------------------------------------------------------------------------------


def _sphere(k: int, d: int, gen: torch.Generator) -> torch.Tensor:
    u = torch.randn(k, d, generator=gen, dtype=F64)
    return u / torch.linalg.vector_norm(u, dim=-1, keepdim=True)


def _integer(name: str, value, low: int) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
    return value


def _positive(name: str, value, low: float = 0.0, strict: bool = True) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < low or (strict and value == low):
        raise ValueError(f"{name} must be a finite number {'>' if strict else '>='} {low}; got {value!r}")
    return float(value)


def _vector(name: str, value, d: int) -> torch.Tensor:
    v = torch.as_tensor(value, dtype=F64)
    if v.shape != (d,) or not torch.isfinite(v).all():
        raise ValueError(f"{name} must be a finite vector of shape ({d},); got {tuple(v.shape)}")
    return v.clone()


def _weak(value, gamma: float, kappa: float, L0: float) -> float:
    if value is None:
        return default_weak_convexity(gamma, kappa, L0)
    return _positive("weak_convexity", value, strict=False)
