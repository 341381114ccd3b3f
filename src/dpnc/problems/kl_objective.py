"""The interface of the KL objectives (docs/papers.md, Menart et al. §1.1, §5) and what they share:
:class:`KLObjective`, whose public constants carry the (γ, κ)-KL inequality; the default L̃1 of a
convex objective; the KL check of Menart et al. §5.6; sampling in the region; argument checks.
The objectives are in :mod:`dpnc.problems.kl` and :mod:`dpnc.problems.kl_instances`."""

from __future__ import annotations

import math
from abc import abstractmethod

import torch

from dpnc.checks import check_at_least, check_integer
from dpnc.problems.base import Constants, Objective, Region

F64 = torch.float64


def default_weak_convexity(gamma: float, kappa: float, L0: float) -> float:
    """The L̃1 declared for a *convex* objective: L̃1 = (γL0)^{2−κ}/(32γ²).

    For convex f every L̃1 ≥ 0 is a valid weak-convexity constant, but Algorithm 2 needs L̃1 > 0 and
    trades it off: its round count T ∝ 1 + 32γ²L̃1F0^{(κ−2)/κ} grows with L̃1, while the inner
    problems' error O(L0²d/(L̃1n²ρ)) and the prox radius L0/(2L̃1) grow as L̃1 → 0. This value makes
    32γ²L̃1F0^{(κ−2)/κ} = 1 with the default F0 = (γL0)^κ (Menart et al. §1.1): T is twice its L̃1 →
    0 limit, the largest L̃1 that costs at most that factor."""
    return (gamma * L0) ** (2 - kappa) / (32 * gamma**2)


# --- the interface --------------------------------------------------------------------------------


class KLObjective(Objective):
    """F(w) = (1/n) Σ_i f(w; x_i) with its (γ,κ)-KL, Lipschitz, smoothness and weak-convexity
    constants.

    Attributes:
        name: a short name for reports.
        n: the dataset size (may be huge for data-free / sufficient-statistics objectives).
        dim: d.
        constants: the public :class:`~dpnc.problems.base.Constants`: L0, L1, weak_convexity, gamma,
            kappa, the region (the ball where they hold) and F_star = min F (for evaluation only).
        w_star: a minimiser (None if unknown), for evaluation only.

    :meth:`value` and :meth:`gradient` take w of shape (d,) or (k, d) and return float64.
    :meth:`example_gradients` gives every example's gradient at one point, (d,) → (n, d), or None
    when the objective keeps no per-example data (data-free or sufficient statistics); the
    protocol's batched :meth:`losses`/:meth:`gradients` are built from the same per-example closed
    forms.

    Each objective declares, with the proof in its docstring, its constants: the (γ,κ)-KL inequality
    F(w) − F* ≤ γ^κ‖∇F(w)‖^κ for every w in the region; ‖∇f(w; x)‖ ≤ L0 for w in the region and
    *every admissible* data point x (a neighbouring dataset may hold any of them), not only the data
    at hand; ∇f(·; x) L1-Lipschitz on the region (None when f is not smooth there); f(·; x) +
    (L̃1/2)‖·‖² convex (None if unknown or false). n enters the algorithms only through their noise,
    so several objectives are *data-free* (all examples identical: F = f, any declared n an honest
    dataset of n copies of one example) or hold *sufficient statistics* of a dataset of declared
    size n.

    **Constants are public.** The algorithms build their schedules and noise from γ, κ, L0, L1, L̃1
    and the region, and release them implicitly (a schedule of 10⁴ or 10⁶ rounds is visible), so an
    objective built from private data declares them from its data *domain* (bounds the user gives,
    e.g. ‖a‖ ≤ row_bound) and from the user's choices (the region), never from the data: replacing
    one example changes none of them. An objective that would need a data statistic (a smallest
    eigenvalue, a mean) asks for a public bound on it instead and refuses to run without one.
    ``w_star``, ``F_star`` (and a least-squares objective's H, q, s) are read off the data, for
    *evaluating* results only; no algorithm reads them.

    Symbols: gamma=γ, kappa=κ, tau=τ=κ/(κ−1) (growth exponent), L0, L1, weak_convexity=L̃1, D,
    epsilon=ε, rho=ρ. Lemma numbers are the paper's (Menart et al. §1.1)."""

    name: str = "kl-objective"
    n: int
    dim: int
    constants: Constants
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
        """∇f(w; x_i) for every example: (d,) → (n, d), (k, d) → (k, n, d); None without explicit
        data."""
        if not self._explicit:
            return None
        points, single = self._points(w)
        g = self._example_gradients(points)
        return g[0] if single else g

    def losses(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """f(x[i, j], z_index[i]) for x (b, k, d) → (b, k); needs per-example data."""
        return self._gather(x, index, self._example_losses, "losses")

    def gradients(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """∇_x f(x[i, j], z_index[i]) for x (b, k, d) → (b, k, d); needs per-example data."""
        return self._gather(x, index, self._example_gradients, "gradients")

    def excess(self, w: torch.Tensor) -> torch.Tensor:
        """F(w) − F*."""
        return self.value(w) - self.constants.F_star

    # --- for subclasses ---

    _explicit = False

    @abstractmethod
    def _value(self, points: torch.Tensor) -> torch.Tensor:
        """F at points (k, d) → (k,)."""

    @abstractmethod
    def _gradient(self, points: torch.Tensor) -> torch.Tensor:
        """∇F at points (k, d) → (k, d)."""

    def _example_gradients(self, points: torch.Tensor) -> torch.Tensor:
        """∇f(points; x_i), (k, d) → (k, n, d)."""
        raise NotImplementedError(f"{self.name} has no per-example gradients")

    def _example_losses(self, points: torch.Tensor) -> torch.Tensor:
        """f(points; x_i), (k, d) → (k, n)."""
        raise NotImplementedError(f"{self.name} has no per-example losses")

    def _gather(self, x, index, per_example, what: str) -> torch.Tensor:
        """Per-example values from a subclass's all-rows ``per_example`` (O(b·n); a subclass that
        can read only the rows asked for overrides ``losses``/``gradients`` with :meth:`_checked`,
        as LeastSquares does)."""
        x, index = self._checked(x, index, what)
        return torch.stack([per_example(x[i])[:, int(index[i])] for i in range(len(index))])

    def _checked(self, x, index, what: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(x as float64 (b, k, d), index as long (b,)), refused unless the data are per-example and
        in range."""
        if not self._explicit:
            raise NotImplementedError(
                f"{self.name} keeps no per-example data (data-free or sufficient "
                f"statistics): per-example {what} are not available; use value/gradient"
            )
        x = torch.as_tensor(x, dtype=F64)
        index = torch.as_tensor(index).long()
        if x.ndim != 3 or x.shape[0] != len(index) or x.shape[2] != self.dim:
            raise ValueError(
                f"x must have shape (b, k, d) = ({len(index)}, k, {self.dim}); got {tuple(x.shape)}"
            )
        if len(index) and (int(index.min()) < 0 or int(index.max()) >= self.n):
            raise ValueError(
                f"index must lie in [0, {self.n}); got values in [{int(index.min())}, "
                f"{int(index.max())}]"
            )
        return x, index

    def _declare(
        self,
        *,
        L0: float,
        gamma: float,
        kappa: float,
        center: torch.Tensor,
        radius: float,
        F_star: float,
        L1: float | None = None,
        weak_convexity: float | None = None,
    ) -> None:
        """Set the public constants (their proofs are in each class's docstring)."""
        self.constants = Constants(
            L0=L0,
            L1=L1,
            weak_convexity=weak_convexity,
            gamma=gamma,
            kappa=kappa,
            region=Region(center, radius),
            F_star=F_star,
        )

    def _region(self, center, radius, default_center: torch.Tensor) -> tuple[torch.Tensor, float]:
        """The region's centre (float64, default ``default_center``) and radius, checked."""
        center = default_center.clone() if center is None else _vector("center", center, self.dim)
        return center, _positive("radius", radius)

    def _points(self, w) -> tuple[torch.Tensor, bool]:
        return self._as_points(w, "w")

    def __repr__(self) -> str:
        c = self.constants
        L1 = "None" if c.L1 is None else f"{c.L1:.4g}"
        return (
            f"{type(self).__name__}(n={self.n}, d={self.dim}, gamma={c.gamma:.4g}, kappa={c.kappa:.4g}, "
            f"L0={c.L0:.4g}, L1={L1}, radius={c.region.radius:.4g})"
        )


class DataFree(KLObjective):
    """A dataset of n copies of one example: f(·; x_i) = F for every i, so per-example values are
    F's own."""

    def losses(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """f(x[i, j]; x_i) = F(x[i, j]) (every example is the same) → (b, k)."""
        x = torch.as_tensor(x, dtype=F64)
        return self.value(x.reshape(-1, self.dim)).reshape(x.shape[:-1])

    def gradients(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """∇f(x[i, j]; x_i) = ∇F(x[i, j]) → (b, k, d)."""
        x = torch.as_tensor(x, dtype=F64)
        return self.gradient(x.reshape(-1, self.dim)).reshape(x.shape)


# --- checks -------------------------------------------------------------------------------------


def check_kl(objective: KLObjective, points: torch.Tensor) -> float:
    """max over points of (F(w) − F*)/(γ^κ‖∇F(w)‖^κ); ≤ 1 means the KL inequality holds there
    (Menart et al. §5.6).

    A point with ∇F = 0 counts 0 if F(w) ≤ F* and +∞ otherwise. Rounding can put a point where the
    inequality is tight (e.g. every point of a quadratic) a few ulps above 1.
    """
    c = objective.constants
    points = objective._points(points)[0]
    gap = objective.value(points) - c.F_star
    denom = (c.gamma * torch.linalg.vector_norm(objective.gradient(points), dim=-1)) ** c.kappa
    zero = torch.where(gap > 0, torch.full_like(gap, math.inf), torch.zeros_like(gap))
    ratio = torch.where(denom > 0, gap / denom.clamp_min(1e-300), zero)
    return float(ratio.max())


def sample_ball(
    objective: KLObjective, k: int, seed: int = 0, *, radial: str = "volume"
) -> torch.Tensor:
    """k points (k, d) in the objective's region B_radius(center), from ``seed``.

    radial="volume": uniform in the ball (in high d, near its boundary); "uniform": distance from
    the center uniform on [0, radius] (more points near the center, where KL constants are often
    tight)."""
    k = _integer("k", k, 1)
    if radial not in ("volume", "uniform"):
        raise ValueError(f"radial must be 'volume' or 'uniform'; got {radial!r}")
    region = objective.constants.region
    gen = torch.Generator().manual_seed(seed)
    u = _sphere(k, objective.dim, gen)
    t = torch.rand(k, 1, generator=gen, dtype=F64)
    r = region.radius * (t ** (1 / objective.dim) if radial == "volume" else t)
    return region.center + r * u


# --- helpers --------------------------------------------------------------------------------------


def _sphere(k: int, d: int, gen: torch.Generator) -> torch.Tensor:
    u = torch.randn(k, d, generator=gen, dtype=F64)
    return u / torch.linalg.vector_norm(u, dim=-1, keepdim=True)


def _integer(name: str, value, low: int) -> int:
    check_integer(low, **{name: value})
    return value


def _positive(name: str, value, low: float = 0.0, strict: bool = True) -> float:
    check_at_least(low, strict, **{name: value})
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
