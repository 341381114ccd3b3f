"""Nonsmooth, mostly nonconvex Lipschitz objectives with known facts, for the zeroth-order methods.

The ZTC and KLT analyses (docs/papers.md, ZTC §1) assume only that every f(·, z) is L-Lipschitz;
each objective here proves its L in its docstring. Synthetic rows are uniform on the unit sphere,
so L = 1 holds for any neighbouring dataset from the domain ‖a‖ ≤ 1, not just the rows at hand.
``TwoLayerReLU`` is re-exported from :mod:`dpnc.problems.networks`."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from scipy import sparse
from scipy.optimize import linprog
from scipy.special import betainc, betaln

from dpnc.checks import check_integer, check_positive
from dpnc.problems.base import Constants, Problem
from dpnc.problems.networks import LOSSES, TwoLayerReLU

__all__ = [
    "LOSSES",
    "AbsLinear",
    "L1Regression",
    "MaxOfAffine",
    "RobustRegression",
    "Solution",
    "TwoLayerReLU",
]


class Solution(NamedTuple):
    """A minimiser x of F and F(x) (evaluated by the problem itself, so it matches
    :meth:`Problem.value`)."""

    x: torch.Tensor
    value: float


# --- the problems -------------------------------------------------------------------------------


class _Linear(Problem):
    """f(x, z) = φ(r) with r = ⟨a_z, x⟩ − b_z (b_z = 0 when the data hold only a). Subclasses give
    φ, φ′."""

    def _phi(self, r: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _dphi(self, r: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @staticmethod
    def _residual(x: torch.Tensor, a: torch.Tensor, *b: torch.Tensor) -> torch.Tensor:
        r = torch.bmm(x, a.unsqueeze(-1)).squeeze(
            -1
        )  # ⟨x[i, j], a_i⟩ (bmm: einsum's parsing costs more here)
        return r - b[0][:, None] if b else r

    @staticmethod
    def _shared_residual(points: torch.Tensor, a: torch.Tensor, *b: torch.Tensor) -> torch.Tensor:
        r = (points @ a.T).T  # (c, k): one matrix product for all examples at the same points
        return r - b[0][:, None] if b else r

    def loss(self, x: torch.Tensor, *batch: torch.Tensor) -> torch.Tensor:
        return self._phi(self._residual(x, *batch))

    def gradients(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """φ′(r) a (closed form; φ′ at a kink is the convention of each subclass)."""
        index = self._check_index(index)
        self._check_points(x, len(index))
        batch = tuple(t[index] for t in self.data)
        return self._dphi(self._residual(x, *batch))[..., None] * batch[0][:, None, :]

    def _shared_loss(self, points: torch.Tensor, *batch: torch.Tensor) -> torch.Tensor:
        return self._phi(self._shared_residual(points, *batch))

    def _gradient_sum(self, points: torch.Tensor, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return self._dphi(self._shared_residual(points, *batch)).T @ batch[0]


class _AbsResidual(_Linear):
    """φ(r) = |r|: the uniform-ball smoothing of each example has a closed form (see
    :class:`AbsLinear`)."""

    def _phi(self, r):
        return r.abs()

    def _dphi(self, r):
        return r.sign()  # 0 at the kink, an element of the subdifferential [−1, 1]

    def smoothed_gradient(
        self, points: torch.Tensor, delta: float, chunk: int = 1024
    ) -> torch.Tensor:
        """∇F̂_δ(x), F̂_δ(x) = E_{v∼U_B} F(x + δv), exactly, at points (k, d) → (k, d) (or (d,) →
        (d,)).

        Per example, ∇f̂_δ = a·(2·I_{(1+c)/2}((d+1)/2, (d+1)/2) − 1) with c = (⟨a, x⟩ − b)/(δ‖a‖)
        clipped to [−1, 1] (:class:`AbsLinear`); F̂_δ is the mean of the f̂_δ, so ∇F̂_δ is their
        mean."""
        return self._smoothed(points, delta, chunk, gradient=True)

    def smoothed_value(self, points: torch.Tensor, delta: float, chunk: int = 1024) -> torch.Tensor:
        """F̂_δ(x) = E_{v∼U_B} F(x + δv), exactly, at points (k, d) → (k,) (or (d,) → a scalar)."""
        return self._smoothed(points, delta, chunk, gradient=False)

    def _smoothed(self, points, delta, chunk, gradient):
        if not (
            isinstance(delta, (int, float))
            and not isinstance(delta, bool)
            and math.isfinite(delta)
            and delta > 0
        ):
            raise ValueError(f"delta must be a finite number > 0; got {delta!r}")
        points, single = self._check_eval(points, chunk)
        total = (
            torch.zeros_like(points)
            if gradient
            else torch.zeros(points.shape[0], dtype=points.dtype)
        )
        for batch in self._chunks(chunk):
            a = batch[0]
            slope, value = _abs_smoothing(
                self._shared_residual(points, *batch),
                torch.linalg.vector_norm(a, dim=-1)[:, None],
                self.dim,
                float(delta),
            )
            total += slope.T @ a if gradient else value.sum(0)
        total /= self.n
        return total[0] if single else total


class AbsLinear(_AbsResidual):
    """f(x) = |⟨a, x⟩|: one data point (the vector a), the closed-form nonsmooth test of ZTC §5,
    property 2.

    Lipschitz: L = ‖a‖, since ||⟨a, x⟩| − |⟨a, y⟩|| ≤ |⟨a, x − y⟩| ≤ ‖a‖‖x − y‖ (Cauchy–Schwarz),
    with equality along a; this is also the worst case of the sensitivity tests (ZTC §5, property
    4).

    Uniform-ball smoothing ĥ_δ(x) = E_{v∼U_B}|⟨a, x + δv⟩|, in closed form (the reason this problem
    exists): write t = ⟨a, x⟩/‖a‖ and s = ⟨a, v⟩/‖a‖. The marginal of U_B along a unit direction
    has density ∝ (1 − s²)^{(d−1)/2} on [−1, 1], i.e. (1 + s)/2 ∼ Beta((d+1)/2, (d+1)/2). With
    c = t/δ clipped to [−1, 1] and G(c) = P(s ≤ c) = I_{(1+c)/2}((d+1)/2, (d+1)/2):

        ∇ĥ_δ(x) = E[sign(t + δs)]·a = (2G(c) − 1)·a                (d = 1: c·a; d = 3: (3c − c³)/2·a)
        ĥ_δ(x)  = ‖a‖δ·[c_raw·(2G(c) − 1) + (1 − c²)^{(d+1)/2} / ((d+1)/2 · B(1/2, (d+1)/2))]

    with c_raw the unclipped c (for |c_raw| ≥ 1 this is |⟨a, x⟩|; for d = 1 it is ‖a‖δ(1 + c²)/2).
    The second line uses E[s·1(s > −c)] = (1 − c²)^{(d+1)/2}/((d+1)·B(1/2, (d+1)/2)). F = f, so
    :meth:`smoothed_gradient` is ∇F̂_δ exactly. F's minimum is 0, on the hyperplane ⟨a, x⟩ = 0."""

    name = "abs-linear"
    minimum = 0.0  # min F, attained on the hyperplane ⟨a, x⟩ = 0

    @property
    def constants(self) -> Constants:
        """L0 = ‖a‖ on all of R^d, and F* = 0 (on the hyperplane ⟨a, x⟩ = 0)."""
        return Constants(L0=self.lipschitz, F_star=self.minimum)

    def __init__(self, a: torch.Tensor) -> None:
        a = torch.as_tensor(a, dtype=torch.float64)
        if a.ndim != 1 or a.shape[0] < 1:
            raise ValueError(
                f"a must be a vector of shape (d,) with d >= 1; got shape {tuple(a.shape)}"
            )
        if not torch.isfinite(a).all() or not (a != 0).any():
            raise ValueError("a must be finite and nonzero (L = ‖a‖ must be > 0)")
        super().__init__(
            (a[None, :],), dim=a.shape[0], lipschitz=float(torch.linalg.vector_norm(a))
        )

    @classmethod
    def random(cls, d: int, *, seed: int = 0) -> AbsLinear:
        """a uniform on the unit sphere of R^d (so L = ‖a‖ = 1), from ``seed``."""
        check_integer(d=d)
        return cls(_sphere(1, d, _generator(seed))[0])

    @property
    def a(self) -> torch.Tensor:
        return self.data[0][0]

    def __repr__(self) -> str:
        return f"AbsLinear(d={self.dim}, L={self.lipschitz:.4g})"


class L1Regression(_AbsResidual):
    """f(x, (a, b)) = |⟨a, x⟩ − b|, least absolute deviations, with a planted x* (ZTC §5, property
    18).

    Data (:meth:`synthetic`): a_i uniform on the unit sphere, x* ∼ N(0, I_d) (so ⟨a_i, x*⟩ has
    variance ‖x*‖²/d ≈ 1), b_i = ⟨a_i, x*⟩ + ε_i with ε_i ∼ N(0, noise²).

    Lipschitz: L = 1 (= max‖a_i‖, attained by every example): ||r(x)| − |r(y)|| ≤ |⟨a, x − y⟩| ≤
    ‖a‖‖x − y‖ and ‖a‖ ≤ 1 on the data domain.

    What is known about x*:
    - noise = 0: F(x*) = 0 = min F, and x* is the unique minimiser once the a_i span R^d (n ≥ d,
      almost surely for sphere rows);
    - noise > 0: x* minimises the *population* risk E|⟨a, x⟩ − b|, because ε is symmetric about 0
      so, for every a, the median of b given a is ⟨a, x*⟩. It does not minimise the empirical F
      exactly; the empirical minimiser (the LAD estimator) tends to x* as n → ∞. :meth:`solve` gives
      the exact empirical minimum.
    The smoothing F̂_δ and its gradient are exact (:meth:`smoothed_value`,
    :meth:`smoothed_gradient`).

    Attributes:
        x_star: the planted x* (None when built from given data); kept by :meth:`subset`.
        noise: the noise level the data were drawn with (None when built from given data).
    """

    name = "l1-regression"

    def __init__(
        self,
        a: torch.Tensor,
        b: torch.Tensor,
        *,
        x_star: torch.Tensor | None = None,
        noise: float | None = None,
    ) -> None:
        a, b = _check_rows(a, b)
        super().__init__((a, b), dim=a.shape[1], lipschitz=1.0)
        self.x_star, self.noise = x_star, noise

    @classmethod
    def synthetic(cls, n: int, d: int, *, noise: float = 0.1, seed: int = 0) -> L1Regression:
        check_integer(n=n)
        check_integer(d=d)
        check_positive(allow_zero=True, noise=noise)
        gen = _generator(seed)
        a = _sphere(n, d, gen)
        x_star = torch.randn(d, generator=gen, dtype=torch.float64)
        b = a @ x_star + noise * torch.randn(n, generator=gen, dtype=torch.float64)
        return cls(a, b, x_star=x_star, noise=float(noise))

    def solve(self) -> Solution:
        """The exact minimum of F: least absolute deviations as a linear program (HiGHS, tolerance ≈
        1e-7)."""
        return _solve_lad(self, *self.data)

    def __repr__(self) -> str:
        return f"L1Regression(n={self.n}, d={self.dim}, noise={self.noise}, L={self.lipschitz:.4g})"


class RobustRegression(_Linear):
    """f(x, (a, b)) = log(1 + |⟨a, x⟩ − b|): a robust regression loss, nonconvex and nonsmooth, no
    smoothing.

    φ(r) = log(1 + |r|) is concave in |r| (so F is nonconvex) and has a kink at r = 0 (so F is
    nonsmooth); a gross outlier adds at most log(1 + |r|) to F and its gradient weight decays as
    1/(1 + |r|).

    Lipschitz: L = 1 = max‖a‖. |φ′(r)| = 1/(1 + |r|) ≤ 1 off 0 and φ is continuous, so φ is
    1-Lipschitz, and |φ(r(x)) − φ(r(y))| ≤ |⟨a, x − y⟩| ≤ ‖a‖‖x − y‖. The bound is attained as r →
    0.

    Data (:meth:`synthetic`): a_i uniform on the unit sphere, x* ∼ N(0, I_d), b_i = ⟨a_i, x*⟩ + ε_i
    with ε_i ∼ N(0, noise²); then round(outliers·n) examples chosen at random get b_i =
    outlier_scale·g_i, g_i ∼ N(0, 1), independent of a_i (``outlier_mask`` marks them). x* is the
    planted parameter and fits every inlier exactly when noise = 0, but F is nonconvex: x* is not
    certified to minimise F.

    Attributes:
        x_star: the planted x* (None when built from given data).
        outlier_mask: (n,) bool, True for the examples whose b was replaced; subset with the data.
    """

    name = "robust-regression"
    _per_example = ("outlier_mask",)

    def __init__(
        self,
        a: torch.Tensor,
        b: torch.Tensor,
        *,
        x_star: torch.Tensor | None = None,
        outlier_mask: torch.Tensor | None = None,
    ) -> None:
        a, b = _check_rows(a, b)
        super().__init__((a, b), dim=a.shape[1], lipschitz=1.0)
        self.x_star = x_star
        self.outlier_mask = (
            torch.zeros(len(b), dtype=torch.bool) if outlier_mask is None else outlier_mask
        )

    @classmethod
    def synthetic(
        cls,
        n: int,
        d: int,
        *,
        outliers: float = 0.1,
        noise: float = 0.1,
        outlier_scale: float = 10.0,
        seed: int = 0,
    ) -> RobustRegression:
        check_integer(n=n)
        check_integer(d=d)
        check_positive(allow_zero=True, noise=noise)
        check_positive(allow_zero=True, outlier_scale=outlier_scale)
        if not (
            isinstance(outliers, (int, float))
            and not isinstance(outliers, bool)
            and 0 <= outliers < 1
        ):
            raise ValueError(f"outliers (a fraction of n) must be in [0, 1); got {outliers!r}")
        gen = _generator(seed)
        a = _sphere(n, d, gen)
        x_star = torch.randn(d, generator=gen, dtype=torch.float64)
        b = a @ x_star + noise * torch.randn(n, generator=gen, dtype=torch.float64)
        chosen = torch.randperm(n, generator=gen)[: round(outliers * n)]
        b[chosen] = outlier_scale * torch.randn(len(chosen), generator=gen, dtype=torch.float64)
        mask = torch.zeros(n, dtype=torch.bool)
        mask[chosen] = True
        return cls(a, b, x_star=x_star, outlier_mask=mask)

    def _phi(self, r):
        return torch.log1p(r.abs())

    def _dphi(self, r):
        return r.sign() / (1 + r.abs())

    def __repr__(self) -> str:
        return (
            f"RobustRegression(n={self.n}, d={self.dim}, outliers={int(self.outlier_mask.sum())}, "
            f"L={self.lipschitz:.4g})"
        )


class MaxOfAffine(Problem):
    """f(x, (A, c)) = max_j (⟨A_j, x⟩ + c_j) with A of shape (pieces, d): the standard
    piecewise-linear test.

    Convex per example (so F is convex) but nonsmooth wherever two pieces tie: the kinks make
    Goldstein stationarity, not ‖∇F‖, the right measure.

    Lipschitz: L = 1 = max_j ‖A_j‖. With j* the active piece at x, f(x) − f(y) ≤ ⟨A_{j*}, x − y⟩ ≤
    max_j ‖A_j‖‖x − y‖, and symmetrically; the gradient, where it exists, is a row A_{j*}.

    Data (:meth:`synthetic`): rows A_ij uniform on the unit sphere, offsets c_ij ∼ N(0, 1). F is
    bounded below iff mean_i max_j ⟨A_ij, h⟩ ≥ 0 for every direction h; with pieces ≥ 2 the
    expectation of each term is positive, so this holds with overwhelming probability once n ≫ d.
    :meth:`solve` says for sure and gives the exact minimum (a linear program)."""

    name = "max-of-affine"

    def __init__(self, A: torch.Tensor, c: torch.Tensor) -> None:
        A, c = torch.as_tensor(A, dtype=torch.float64), torch.as_tensor(c, dtype=torch.float64)
        if A.ndim != 3 or c.shape != A.shape[:2] or A.shape[0] < 1 or A.shape[1] < 1:
            raise ValueError(
                f"A must be (n, pieces, d) and c (n, pieces); got {tuple(A.shape)}, {tuple(c.shape)}"
            )
        if not (torch.isfinite(A).all() and torch.isfinite(c).all()):
            raise ValueError("A and c must be finite")
        if torch.linalg.vector_norm(A, dim=-1).max() > 1 + 1e-12:
            raise ValueError("every row A_ij must have norm <= 1 (the declared L = 1 relies on it)")
        super().__init__((A, c), dim=A.shape[2], lipschitz=1.0)

    @classmethod
    def synthetic(cls, n: int, d: int, pieces: int, *, seed: int = 0) -> MaxOfAffine:
        check_integer(n=n)
        check_integer(d=d)
        if not isinstance(pieces, int) or isinstance(pieces, bool) or pieces < 2:
            raise ValueError(
                f"pieces must be an integer >= 2 (one piece is linear, unbounded below); got {pieces!r}"
            )
        gen = _generator(seed)
        A = _sphere(n * pieces, d, gen).reshape(n, pieces, d)
        return cls(A, torch.randn(n, pieces, generator=gen, dtype=torch.float64))

    @property
    def pieces(self) -> int:
        return self.data[0].shape[1]

    def loss(self, x: torch.Tensor, A: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (torch.einsum("bkd,bpd->bkp", x, A) + c[:, None, :]).amax(-1)

    def gradients(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """A_{j*} for the active piece j* (the first one at a tie: an element of the
        subdifferential)."""
        index = self._check_index(index)
        self._check_points(x, len(index))
        A, c = self.data[0][index], self.data[1][index]
        j = (torch.einsum("bkd,bpd->bkp", x, A) + c[:, None, :]).argmax(-1)  # (b, k)
        return torch.take_along_dim(A, j[..., None], dim=1)

    def _shared_loss(self, points: torch.Tensor, A: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (torch.einsum("kd,bpd->bkp", points, A) + c[:, None, :]).amax(-1)

    def _gradient_sum(self, points: torch.Tensor, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        A, c = batch
        j = (torch.einsum("kd,bpd->bkp", points, A) + c[:, None, :]).argmax(-1)  # (c, k)
        return torch.take_along_dim(A, j[..., None], dim=1).sum(0)

    def solve(self) -> Solution:
        """The exact minimum of F (a linear program; HiGHS, tolerance ≈ 1e-7). RuntimeError if
        unbounded."""
        return _solve_max_affine(self, *self.data)

    def __repr__(self) -> str:
        return (
            f"MaxOfAffine(n={self.n}, d={self.dim}, pieces={self.pieces}, L={self.lipschitz:.4g})"
        )


# --- helpers ------------------------------------------------------------------------------------


def _abs_smoothing(
    r: torch.Tensor, scale: torch.Tensor, d: int, delta: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """For h = |⟨a, x⟩ − b| with r = ⟨a, x⟩ − b and scale = ‖a‖: the slope s (∇ĥ_δ = s·a) and ĥ_δ.

    See :class:`AbsLinear` for the derivation. An example with a = 0 has h = |b| constant: slope 0.
    """
    m = (d + 1) / 2
    positive = scale > 0
    c_raw = r / (delta * torch.where(positive, scale, torch.ones_like(scale)))
    c = c_raw.clamp(-1.0, 1.0)
    G = torch.from_numpy(betainc(m, m, ((1 + c) / 2).detach().numpy()))
    slope = torch.where(positive, 2 * G - 1, torch.zeros_like(G))
    bump = math.exp(-betaln(0.5, m)) * (1 - c**2).clamp_min(0) ** m / m
    value = torch.where(positive, delta * scale * (c_raw * slope + bump), r.abs())
    return slope, value


def _solve_max_affine(problem: Problem, A: torch.Tensor, c: torch.Tensor) -> Solution:
    """min_x (1/n) Σ_i max_j (⟨A_ij, x⟩ + c_ij) as the LP min (1/n) Σ t_i s.t. ⟨A_ij, x⟩ − t_i ≤
    −c_ij.

    Interior point with crossover: ~20 s for n = 10⁴, pieces = 5, d = 20 on 2 cores (simplex:
    minutes)."""
    n, P, d = A.shape
    A_ub = sparse.hstack(
        [
            sparse.csr_matrix(A.reshape(n * P, d).numpy()),
            -sparse.kron(sparse.eye(n), np.ones((P, 1))),
        ],
        format="csr",
    )
    objective = np.concatenate([np.zeros(d), np.full(n, 1.0 / n)])
    return _finish(
        problem,
        linprog(
            objective,
            A_ub=A_ub,
            b_ub=-c.reshape(-1).numpy(),
            bounds=(None, None),
            method="highs-ipm",
        ),
        d,
    )


def _solve_lad(problem: Problem, a: torch.Tensor, b: torch.Tensor) -> Solution:
    """min_x (1/n) Σ_i |⟨a_i, x⟩ − b_i| as the LP min (1/n) Σ (u_i + w_i) s.t. ⟨a_i, x⟩ + u_i − w_i
    = b_i, u, w ≥ 0.

    n equality rows (half of the max-of-two-pieces form): 5–15 s for n = 4·10⁴, d = 10 on 2 cores.
    """
    n, d = a.shape
    A_eq = sparse.hstack(
        [sparse.csr_matrix(a.numpy()), sparse.eye(n), -sparse.eye(n)], format="csr"
    )
    objective = np.concatenate([np.zeros(d), np.full(2 * n, 1.0 / n)])
    bounds = [(None, None)] * d + [(0, None)] * (2 * n)
    return _finish(
        problem, linprog(objective, A_eq=A_eq, b_eq=b.numpy(), bounds=bounds, method="highs-ipm"), d
    )


def _finish(problem: Problem, result, d: int) -> Solution:
    if result.status == 3:
        raise RuntimeError(f"{problem!r}: F is unbounded below")
    if not result.success:
        raise RuntimeError(f"{problem!r}: the linear program failed: {result.message}")
    x = torch.as_tensor(result.x[:d], dtype=torch.float64)
    return Solution(x, float(problem.value(x)))


def _check_rows(a, b) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    if a.ndim != 2 or b.shape != (a.shape[0],):
        raise ValueError(f"a must be (n, d) and b (n,); got {tuple(a.shape)}, {tuple(b.shape)}")
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        raise ValueError("a and b must be finite")
    if torch.linalg.vector_norm(a, dim=-1).max() > 1 + 1e-12:
        raise ValueError("every row a_i must have norm <= 1 (the declared L = 1 relies on it)")
    return a, b


def _sphere(n: int, d: int, gen: torch.Generator) -> torch.Tensor:
    g = torch.randn(n, d, generator=gen, dtype=torch.float64)
    return g / torch.linalg.vector_norm(g, dim=-1, keepdim=True)


def _generator(seed) -> torch.Generator:
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an integer; got {seed!r}")
    return torch.Generator().manual_seed(seed)
