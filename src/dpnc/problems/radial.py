"""Radial distance objectives f(x, (p, σ)) = σ‖x − p‖: per-example L = 1 exactly, in every
dimension, and a population Goldstein norm in closed form (:class:`RadialDistance`, whose
docstring has the law and the proofs). The instance on which the nonsmooth papers' rates can be
measured without a certificate."""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import gammaln, hyp1f1

from dpnc.problems.base import Constants, Problem

__all__ = ["RadialDistance", "radial_slope"]

GRID = 2049  # radii of the one-dimensional minimum in goldstein_norm


def radial_slope(r, d: int, spread: float) -> np.ndarray:
    """φ_s′(r) = d/dr E‖r·e − s·g/√d‖ with g ∼ N(0, I_d), s = ``spread``, in closed form.

    With λ = r√d/s the noncentral-χ mean gives φ_s(r) = (s/√d)·√2·Γ((d+1)/2)/Γ(d/2)·₁F₁(−½; d/2;
    −λ²/2), so

        φ_s′(r) = c_d·λ·₁F₁(½; d/2 + 1; −λ²/2),    c_d = √2·Γ((d+1)/2)/(d·Γ(d/2))

    (d/dz ₁F₁(a; b; z) = (a/b)·₁F₁(a+1; b+1; z)); φ_s′ rises from 0 at r = 0 to 1 as r → ∞ (≈ r/s
    for r ≪ s)."""
    r = np.asarray(r, dtype=np.float64)
    lam = r * math.sqrt(d) / spread
    c = math.sqrt(2) * math.exp(gammaln((d + 1) / 2) - gammaln(d / 2)) / d
    return c * lam * hyp1f1(0.5, d / 2 + 1, -(lam**2) / 2)


class RadialDistance(Problem):
    """f(x, (p, σ)) = σ‖x − p‖ with σ ∈ {+1, −1}: per-example L = 1 exactly; population Goldstein
    norm in closed form.

    Each example is a point p and a sign σ: σ = +1 ("attracting"), a cone, convex, with its kink at
    p; σ = −1 ("repelling"), an inverted cone, concave, with a concave kink at p.

    Lipschitz: L = 1 for *every* example, whatever p and σ: |‖x − p‖ − ‖y − p‖| ≤ ‖x − y‖ (the
    triangle inequality), with equality along the ray from p, and ‖∇f‖ = 1 exactly wherever f is
    differentiable. So the declared constant is tight and free of d (the rows-on-the-sphere problems
    have ‖∇F‖ ≈ √(2/(πd)) ≪ L = 1).

    The law (:meth:`synthetic`): a public centre x*; each example is attracting with probability 1 −
    q and repelling with probability q (``repel``); an attracting point is p = x* + s·g/√d, a
    repelling one p = x* + s_r·g/√d, with g ∼ N(0, I_d) (``spread`` s, ``repel_spread`` s_r: ‖p −
    x*‖ ≈ s whatever d). Then the population objective is radial about x*:

        F(x) = (1 − q)·φ_s(‖x − x*‖) − q·φ_{s_r}(‖x − x*‖),    φ_s(r) = E‖r·e − s·g/√d‖,

    with φ_s′ in closed form (:func:`radial_slope`). With q = 0 the objective is convex with its
    minimum at x*; with q > 0 it is a difference of convex functions, nonconvex once the repelling
    examples win near x* (x* is a local maximum when (1 − q)/s < q/s_r), and a sphere of minima
    surrounds it. Its Goldstein norm is in closed form too (:meth:`goldstein_norm`): the instance on
    which the nonsmooth papers' rates can be measured without a certificate.

    Attributes:
        center: the law's centre x* (public: the evaluator's, not read by any algorithm); None if
            not known.
        spread, repel, repel_spread: the law's s, q, s_r (None when built from given data).
    """

    name = "radial"

    def __init__(
        self,
        points: torch.Tensor,
        signs: torch.Tensor,
        *,
        center: torch.Tensor | None = None,
        spread: float | None = None,
        repel: float = 0.0,
        repel_spread: float | None = None,
    ) -> None:
        points = torch.as_tensor(points, dtype=torch.float64)
        signs = torch.as_tensor(signs, dtype=torch.float64)
        if points.ndim != 2 or signs.shape != (points.shape[0],):
            raise ValueError(
                f"points must be (n, d) and signs (n,); got {tuple(points.shape)}, {tuple(signs.shape)}"
            )
        if not bool(torch.isfinite(points).all()):
            raise ValueError("points must be finite")
        if not bool(((signs == 1) | (signs == -1)).all()):
            raise ValueError("every sign must be +1 or -1 (L = 1 relies on |σ| = 1)")
        super().__init__((points, signs), dim=points.shape[1], lipschitz=1.0)
        self.center, self.spread, self.repel, self.repel_spread = (
            center,
            spread,
            repel,
            repel_spread,
        )

    @property
    def constants(self) -> Constants:
        """L0 = 1 on all of R^d, for every example (σ = ±1, any p)."""
        return Constants(L0=1.0)

    @classmethod
    def synthetic(
        cls,
        n: int,
        d: int,
        *,
        spread: float = 0.5,
        repel: float = 0.0,
        repel_spread: float = 0.1,
        center: torch.Tensor | None = None,
        seed: int = 0,
    ) -> RadialDistance:
        """n examples from the law of the class docstring (x* = 0 unless ``center``), drawn from
        ``seed``."""
        for name, value, low in (("n", n, 1), ("d", d, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
        for name, value in (("spread", spread), ("repel_spread", repel_spread)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
        if not (isinstance(repel, (int, float)) and 0 <= repel < 0.5):
            raise ValueError(
                f"repel (the fraction q of repelling examples) must be in [0, 0.5) so that F is bounded "
                f"below; got {repel!r}"
            )
        gen = torch.Generator().manual_seed(seed)
        center = (
            torch.zeros(d, dtype=torch.float64)
            if center is None
            else torch.as_tensor(center, dtype=torch.float64)
        )
        repelling = torch.rand(n, generator=gen, dtype=torch.float64) < repel
        scale = torch.where(repelling, repel_spread, spread)[:, None] / math.sqrt(d)
        points = center + scale * torch.randn(n, d, generator=gen, dtype=torch.float64)
        signs = torch.where(repelling, -1.0, 1.0).to(torch.float64)
        return cls(
            points,
            signs,
            center=center,
            spread=float(spread),
            repel=float(repel),
            repel_spread=float(repel_spread),
        )

    # --- per-example values ----------------------------------------------------------------------

    def loss(self, x: torch.Tensor, points: torch.Tensor, signs: torch.Tensor) -> torch.Tensor:
        return signs[:, None] * torch.linalg.vector_norm(x - points[:, None, :], dim=-1)

    def gradients(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """σ(x − p)/‖x − p‖ (closed form; 0 at x = p, a Clarke subgradient of the attracting cone
        only)."""
        index = self._check_index(index)
        self._check_points(x, len(index))
        p, s = self.data[0][index], self.data[1][index]
        diff = x - p[:, None, :]
        norm = torch.linalg.vector_norm(diff, dim=-1, keepdim=True)
        return s[:, None, None] * diff / torch.where(norm > 0, norm, torch.ones_like(norm))

    def _shared_loss(self, points: torch.Tensor, p: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return s[:, None] * torch.cdist(p, points)

    def _gradient_sum(self, points: torch.Tensor, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        p, s = batch
        dist = torch.cdist(p, points)  # (c, k)
        weight = s[:, None] / torch.where(dist > 0, dist, torch.ones_like(dist))
        return weight.sum(0)[:, None] * points - weight.T @ p  # Σ_i σ_i(x − p_i)/‖x − p_i‖

    # --- the population (the law's closed forms) --------------------------------------------------

    def slope(self, r) -> np.ndarray:
        """φ′(r): the population F's radial derivative at distance r from x* (d F(x* + r·e)/dr)."""
        self._check_law()
        out = (1 - self.repel) * radial_slope(r, self.dim, self.spread)
        return (
            out - self.repel * radial_slope(r, self.dim, self.repel_spread) if self.repel else out
        )

    def population_gradient(self, points: torch.Tensor) -> torch.Tensor:
        """∇F(x) = φ′(‖x − x*‖)·(x − x*)/‖x − x*‖ of the population F, at points (k, d) → (k, d) (or
        (d,) → (d,))."""
        self._check_law()
        points, single = self._as_points(points)
        offset = points - self.center
        r = torch.linalg.vector_norm(offset, dim=-1)
        g = (
            torch.as_tensor(self.slope(r.numpy()))[:, None]
            * offset
            / torch.where(r > 0, r, 1.0)[:, None]
        )
        return g[0] if single else g

    def goldstein_norm(self, points: torch.Tensor, radius: float) -> torch.Tensor:
        """‖∂F(x)‖_radius of the population F at points (k, d) → (k,) (or (d,) → a scalar), in
        closed form.

        The Goldstein norm ‖∂F(x)‖_δ = min{‖g‖ : g ∈ conv ∪_{y∈B(x,δ)} ∇F(y)} (docs/papers.md, ZTC
        §1) of a radial F, by duality and symmetry: for any set S, dist(0, conv S) = max(0,
        sup_{‖v‖=1} inf_{g∈S} ⟨v, g⟩); S is invariant under the rotations that fix e = (x − x*)/‖x −
        x*‖, and inf_{g∈S} ⟨v, g⟩ is concave and positively homogeneous in v, so averaging an
        optimal v over those rotations shows v = e is optimal. Hence

            ‖∂F(x)‖_δ = max(0, inf_{y ∈ B(x,δ)} ⟨e, ∇F(y)⟩) = max(0, min_r φ′(r)·c(r)),

        over r = ‖y − x*‖ ∈ [max(0, ρ − δ), ρ + δ] (ρ = ‖x − x*‖), where c(r) is the smallest cosine
        between y − x* and e on the sphere of radius r inside the ball: (r² + ρ² − δ²)/(2rρ), or −1
        when that sphere lies inside the ball (r < δ − ρ); a negative φ′(r) takes cosine 1 instead.
        For F = ‖x − x*‖ (φ′ ≡ 1) this is √(1 − δ²/ρ²) for ρ > δ and 0 otherwise: the gradients of
        the ball form a spherical cap whose hull is nearest 0 at the cap's rim, i.e. at the points
        of the ball's sphere tangent to the sphere about x* (what
        :func:`dpnc.certify.goldstein_certificate`'s ``rim`` points look for).

        The one-dimensional minimum is taken on a grid of 2049 radii (error O(δ²/2048²·max|(φ′c)″|),
        below 1e-6 here; tested against a bounded scalar minimiser)."""
        if not (isinstance(radius, (int, float)) and math.isfinite(radius) and radius > 0):
            raise ValueError(f"radius must be a finite number > 0; got {radius!r}")
        self._check_law()
        points, single = self._as_points(points)
        rho = torch.linalg.vector_norm(points - self.center, dim=-1).numpy()[:, None]  # (k, 1)
        t = np.linspace(0.0, 1.0, GRID)[None, :]
        r = np.maximum(rho - radius, 0.0) + t * (
            rho + radius - np.maximum(rho - radius, 0.0)
        )  # (k, GRID)
        with np.errstate(divide="ignore", invalid="ignore"):
            cos = np.where(r < radius - rho, -1.0, (r**2 + rho**2 - radius**2) / (2 * r * rho))
        cos = np.clip(np.nan_to_num(cos, nan=-1.0), -1.0, 1.0)
        slope = self.slope(r)
        value = np.where(slope >= 0, slope * cos, slope).min(axis=1)
        out = torch.as_tensor(np.maximum(value, 0.0))
        return out[0] if single else out

    def _check_law(self) -> None:
        if self.center is None or self.spread is None or (self.repel and self.repel_spread is None):
            raise ValueError(
                "the population closed forms need the law (center, spread, repel, repel_spread): "
                "build the problem with RadialDistance.synthetic"
            )

    def __repr__(self) -> str:
        return f"RadialDistance(n={self.n}, d={self.dim}, spread={self.spread}, repel={self.repel}, L=1)"
