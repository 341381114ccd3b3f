"""A certificate of Goldstein (δ, ε)-stationarity: the min-norm convex combination of gradients in a
ball. It is a computable upper bound on ‖∂h(x)‖_δ, the quantity the papers' guarantees are about,
which cannot itself be computed. See docs/ztc.md, "The Goldstein certificate"."""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import nnls

from dpnc.checks import check_positive, check_probability
from dpnc.estimators import uniform_ball

__all__ = [
    "Certificate",
    "certify_run",
    "concentration",
    "goldstein_certificate",
    "min_norm_convex_combination",
    "rim_points",
]


@dataclass(frozen=True, eq=False)  # eq=False: the fields are arrays, whose == is elementwise
class Certificate:
    """An upper bound on ‖∂h(x)‖_radius, with the evidence for it.

    Attributes:
        bound: ‖Σ_i w_i g_i‖, an upper bound on ‖∂h(x)‖_radius (the norm of an actual convex
            combination).
        weights: w, shape (k,), on the probability simplex (non-negative, summing to 1).
        points: the points y_i used, shape (k, d), all within ``radius`` of x; x itself is row 0.
        gradients: g_i = ∇h(y_i), shape (k, d).
        radius: δ.
    """

    bound: float
    weights: np.ndarray
    points: torch.Tensor
    gradients: torch.Tensor
    radius: float

    def population_bound(self, *, L: float, m: int, failure: float = 0.05) -> float:
        """An upper bound on the *population* ‖∂F(x)‖_radius with probability ≥ 1 − ``failure``, for
        a certificate computed on the empirical F̂ of m held-out examples: ``bound`` +
        :func:`concentration` (L, m, k points).

        Holds when the m examples are i.i.d. from the law, independent of x and of every point y_i
        (docs/ztc.md), and every per-example gradient has norm ≤ L (the public Lipschitz
        constant)."""
        return self.bound + concentration(L=L, m=m, points=self.points.shape[0], failure=failure)

    @property
    def support(self) -> np.ndarray:
        """Indices of the points with positive weight (those that make up the combination)."""
        return np.flatnonzero(self.weights > 0)

    def __str__(self) -> str:
        k, d = self.points.shape
        return (
            f"‖∂h(x)‖_δ ≤ {self.bound:.6g} with δ = {self.radius:.6g}: a convex combination of "
            f"{len(self.support)} of {k} gradients in R^{d}"
        )


def min_norm_convex_combination(G: torch.Tensor | np.ndarray) -> tuple[float, np.ndarray]:
    """min ‖Gᵀw‖ over the simplex w ≥ 0, Σw = 1; returns (norm, w).

    The rows g_i of G (k, d) are points; the answer is the point of their convex hull nearest 0.

    Solver: non-negative least squares (Lawson–Hanson active set, ``scipy.optimize.nnls``) on

        min_{u ≥ 0} ‖Gᵀu‖² + (1 − Σu)²,   i.e. NNLS with matrix [Gᵀ; 1ᵀ] (d+1, k) and target
        e_{d+1}.

    Writing u = s·w with w on the simplex and s ≥ 0, the objective is s²‖Gᵀw‖² + (1 − s)², minimised
    by the min-norm w* and s = 1/(1 + ν²), ν = ‖Gᵀw*‖. So w* = u*/Σu*: the reformulation is exact,
    not a penalty (it is the least-distance-programming reduction of Lawson & Hanson, ch. 23). We
    prefer it to a generic QP on the Gram matrix GGᵀ because (i) NNLS works with the residual Gᵀu
    itself, so small bounds are resolved to ~1e-16·max‖g_i‖, while any method that forms GGᵀ squares
    the condition and resolves ‖Gᵀw‖ only to ~1e-8·max‖g_i‖ (and ε-certificates are about small
    norms); (ii) GGᵀ is singular whenever k > d or points repeat, which strictly convex QP solvers
    (quadprog, DAQP) refuse or regularise; (iii) an active-set method terminates with an exact
    solution (up to rounding), unlike interior-point or splitting solvers; (iv) it adds no
    dependency. Cost: one least-squares update per point entering the support; k = 1000, d = 2000
    with a dense support of ~900 points takes ~3 s on 2 cores, and ~0.1 s when the support is small,
    the common case for certificates.

    G is first divided by a power of two (exact in floating point) so that max‖g_i‖ ≤ 1; then s ≥
    1/2 and the ones-row and the gradient rows are on the same scale. The NNLS answer is polished by
    pairwise Frank–Wolfe steps with exact line search (each can only lower the norm), and w is
    projected to the simplex; the returned norm is ‖Gᵀw‖ for that very w, so it is a valid upper
    bound on the hull's distance to 0 even if the solver were off.

    Args:
        G: the points, shape (k, d) with k ≥ 1, d ≥ 1, finite; a torch tensor or numpy array.

    Returns:
        (norm, w): norm = ‖Gᵀw‖ (a float) and w, shape (k,), float64, w ≥ 0, Σw = 1.
    """
    G = _as_points(G, "G")
    k, _ = G.shape
    scale = _power_of_two_scale(G)
    if scale == 0.0:  # every g_i = 0: any combination is 0
        return 0.0, np.full(k, 1.0 / k)
    A = G / scale  # exact (barring subnormals): scale is a power of two
    E = np.vstack([A.T, np.ones((1, k))])
    target = np.zeros(E.shape[0])
    target[-1] = 1.0
    try:
        u, _ = nnls(E, target, maxiter=max(10 * k, 100))
        w, steps = _to_simplex(u), 50
    except (
        RuntimeError,
        ValueError,
    ):  # no convergence, or an all-zero answer: start at the best vertex
        w, steps = None, min(20 * k, 2000)
        warnings.warn(
            "min_norm_convex_combination: NNLS did not converge; the bound comes from Frank–Wolfe "
            "steps and is valid but may not be the minimum",
            RuntimeWarning,
            stacklevel=2,
        )
    if w is None:
        w = np.zeros(k)
        w[int(np.argmin(np.linalg.norm(A, axis=1)))] = 1.0
    w = _pairwise_frank_wolfe(A, w, steps)
    return float(scale * np.linalg.norm(A.T @ w)), w


def concentration(*, L: float, m: int, points: int, failure: float = 0.05) -> float:
    """(L/√m)·(1 + √(2 ln(k/γ))): with probability ≥ 1 − γ, every one of k fixed points has ‖∇F̂ −
    ∇F‖ at most this, F̂ the mean of m i.i.d. examples with per-example gradients of norm ≤ L
    (McDiarmid + a union bound; docs/ztc.md)."""
    check_positive(L=L)
    for name, value in (("m", m), ("points", points)):  # numbers.Integral: numpy integers count
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    check_probability(failure=failure)
    return L / math.sqrt(m) * (1 + math.sqrt(2 * math.log(points / failure)))


def rim_points(
    x: torch.Tensor,
    radius: float,
    axis: torch.Tensor,
    pairs: int,
    *,
    angles: int = 8,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Points near the sphere ‖y − x‖ = radius, tilted back against ``axis`` (docs/ztc.md),
    shape (k, d).

    y = x + δ′(−sin θ·a + cos θ·v) for sin θ = j/J (j = 0..J, J = ``angles``), v over ``pairs``
    antipodal pairs ±v of random unit directions ⊥ a (public ``generator``), δ′ = radius·(1 − 1e-9);
    θ = 90° gives the one point x − δ′a. k = 2·pairs·J + 1 (no points when the axis is 0 or d = 1:
    then only x − δ′a and x + δ′a)."""
    d = x.shape[0]
    a = torch.as_tensor(axis).to(x.dtype)
    norm = float(torch.linalg.vector_norm(a))
    if not math.isfinite(norm) or norm == 0.0:
        return torch.zeros(0, d, dtype=x.dtype)
    a = a / norm
    r = radius * (1 - 1e-9)
    if d == 1:
        return torch.stack([x - r * a, x + r * a])
    if generator is None:
        generator = torch.Generator().manual_seed(0)
    v = torch.randn(pairs, d, generator=generator, dtype=x.dtype)
    v = v - (v @ a)[:, None] * a  # ⊥ a
    v = v / torch.linalg.vector_norm(v, dim=-1, keepdim=True)
    v = torch.cat([v, -v])  # antipodal pairs
    sines = torch.arange(angles, dtype=x.dtype) / angles  # sin θ = j/J, j < J
    cosines = torch.sqrt(1 - sines**2)
    tilted = (
        -sines[:, None, None] * a + cosines[:, None, None] * v[None]
    )  # (J, 2·pairs, d), unit vectors
    return torch.cat([x + r * tilted.reshape(-1, d), (x - r * a)[None]])


def certify_run(
    run,
    objective,
    *,
    radius: float | None = None,
    samples: int = 64,
    rim: int = 0,
    axis: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Certificate:
    """The certificate of a run's output on ``objective`` (e.g. held-out data: then free of privacy
    cost).

    Exact gradients of ``objective`` at the output, at the points averaged into it when the run kept
    them (``run.trace.output_points`` of an O2NC run with ``keep_points=True``: each within block·D
    of the output), and at ``samples`` uniform points of the ball. ``radius`` defaults to twice the
    run's smoothing radius (``run.algorithm.smoothing``: ZTC's δ, KLT's α), the radius of the O2NC
    guarantees ((2δ, ε)-stationarity, ZTC Theorem 4.9; (2α, β), KLT Lemma 2.4)."""
    if radius is None:
        radius = 2 * run.algorithm.smoothing
    trace = getattr(run, "trace", None)
    points = None if trace is None else trace.output_points
    return goldstein_certificate(
        objective.gradient,
        run.output,
        radius,
        points=points,
        samples=samples,
        rim=rim,
        axis=axis,
        generator=generator,
    )


def goldstein_certificate(
    gradient: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    radius: float,
    *,
    points: torch.Tensor | np.ndarray | None = None,
    samples: int = 64,
    rim: int = 0,
    axis: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Certificate:
    """An upper bound on ‖∂h(x)‖_radius from the gradients at x, given points, random points of the
    ball and rim points.

    The points used are, in this order: x itself, the rows of ``points`` (each must lie within
    ``radius`` of x), ``samples`` points drawn uniformly from the ball B(x, radius) with the public
    ``generator``, and with ``rim`` > 0 the :func:`rim_points` about ``axis`` (default:
    ``gradient(x)``; pass an axis from other data than ``gradient``'s when the certificate is to be
    turned into a population bound). ``gradient`` is called once on all of them, and the bound is
    the min-norm convex combination of the gradients (:func:`min_norm_convex_combination`).

    ``gradient`` must return a gradient of h at each point. For a Lipschitz h the random points are
    points of differentiability with probability 1; at x and at the given points, a value that is
    not a Clarke subgradient (autograd at a kink may return one) would make the bound meaningless.
    ZTC §1's ball is open; given points may also lie on the sphere ‖y − x‖ = radius (up to the
    rounding of x + radius·u, a slack of 8 units in the last place of ‖x‖ + radius). With such
    points the bound holds for Goldstein's original closed ball, and for the open ball of any radius
    > ``radius``.

    Args:
        gradient: callable mapping points (k, d) to gradients (k, d), e.g. a problem's ``gradient``.
        x: the point to certify, shape (d,). Floating dtypes are kept (float64 recommended); others
            become float64.
        radius: δ > 0, finite.
        points: optional extra points, shape (m, d), finite, each within ``radius`` of x.
        samples: how many points to draw uniformly from the ball (≥ 0).
        rim: antipodal pairs of rim directions (≥ 0; 0: no rim points), 8 tilt angles each.
        axis: the rim's axis, shape (d,); None: the gradient at x.
        generator: public randomness for the samples; None uses a fresh generator seeded with 0, so
            the same call gives the same certificate.

    Returns:
        A :class:`Certificate`.

    Raises:
        ValueError: on a radius that is not a finite positive number, a negative or non-integer
            ``samples``, shapes that do not match, points outside the ball, or gradients that are
            non-finite or of the wrong shape.
    """
    x = torch.as_tensor(x)
    if not x.is_floating_point():
        x = x.to(torch.float64)
    if x.ndim != 1 or x.shape[0] < 1:
        raise ValueError(
            f"x must be a vector of shape (d,) with d >= 1; got shape {tuple(x.shape)}"
        )
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x must be finite")
    if isinstance(radius, bool) or not isinstance(radius, numbers.Real):
        raise ValueError(f"radius must be a finite number > 0; got {radius!r}")
    radius = float(radius)
    if not (math.isfinite(radius) and radius > 0):
        raise ValueError(f"radius must be a finite number > 0; got {radius!r}")
    if isinstance(samples, bool) or not isinstance(samples, numbers.Integral) or samples < 0:
        raise ValueError(f"samples must be an integer >= 0; got {samples!r}")
    samples = int(samples)
    if isinstance(rim, bool) or not isinstance(rim, numbers.Integral) or rim < 0:
        raise ValueError(f"rim must be an integer >= 0; got {rim!r}")
    d = x.shape[0]
    if axis is not None and tuple(torch.as_tensor(axis).shape) != (d,):
        raise ValueError(
            f"axis must have shape ({d},) to match x; got {tuple(torch.as_tensor(axis).shape)}"
        )

    rows = [x.unsqueeze(0)]
    if points is not None:
        extra = torch.as_tensor(points).to(x.dtype)
        if extra.ndim != 2 or extra.shape[1] != d:
            raise ValueError(
                f"points must have shape (m, {d}) to match x; got {tuple(extra.shape)}"
            )
        if not bool(torch.isfinite(extra).all()):
            raise ValueError("points must be finite")
        dist = torch.linalg.vector_norm((extra - x).to(torch.float64), dim=-1)
        slack = (
            8
            * torch.finfo(x.dtype).eps
            * (float(torch.linalg.vector_norm(x.to(torch.float64))) + radius)
        )
        outside = torch.nonzero(dist > radius + slack).flatten()
        if len(outside):
            i = int(outside[0])
            raise ValueError(
                f"points must lie within radius={radius:g} of x; {len(outside)} do not, e.g. "
                f"row {i} at distance {float(dist[i]):.6g}"
            )
        rows.append(extra)
    if samples:
        rows.append(x + radius * uniform_ball(samples, d, generator, dtype=x.dtype))
    if rim:
        direction = torch.as_tensor(gradient(x.unsqueeze(0)))[0] if axis is None else axis
        rows.append(rim_points(x, radius, direction, int(rim), generator=generator))
    Y = torch.cat(rows)

    g = torch.as_tensor(gradient(Y))
    if tuple(g.shape) != tuple(Y.shape):
        raise ValueError(
            f"gradient must map points of shape {tuple(Y.shape)} to the same shape; "
            f"got {tuple(g.shape)}"
        )
    bad = ~torch.isfinite(g).all(-1)
    if bool(bad.any()):
        i = int(torch.nonzero(bad)[0])
        raise ValueError(
            f"gradient returned non-finite values at {int(bad.sum())} of {len(Y)} points "
            f"(e.g. row {i}); h must be Lipschitz on the ball"
        )
    bound, w = min_norm_convex_combination(g)
    return Certificate(bound=bound, weights=w, points=Y, gradients=g, radius=radius)


# --- helpers --------------------------------------------------------------------------------------


def _as_points(G: torch.Tensor | np.ndarray, name: str) -> np.ndarray:
    if isinstance(G, torch.Tensor):
        G = G.detach().cpu().numpy()
    G = np.asarray(G, dtype=np.float64)
    if G.ndim != 2 or G.shape[0] < 1 or G.shape[1] < 1:
        raise ValueError(f"{name} must have shape (k, d) with k >= 1 and d >= 1; got {G.shape}")
    if not np.isfinite(G).all():
        raise ValueError(f"{name} must be finite")
    return G


def _power_of_two_scale(G: np.ndarray) -> float:
    """The least power of two ≥ max_i ‖g_i‖ (0 if G = 0), computed without overflow."""
    m = float(np.abs(G).max())
    if m == 0.0:
        return 0.0
    pre = math.ldexp(
        1.0, math.frexp(m)[1]
    )  # power of two ≥ m: dividing by it is exact and cannot overflow
    norm = pre * float(np.linalg.norm(G / pre, axis=1).max())
    return math.ldexp(1.0, math.frexp(norm)[1])


def _to_simplex(u: np.ndarray) -> np.ndarray:
    w = np.maximum(u, 0.0)
    total = w.sum()
    if not total > 0:
        raise ValueError("no positive weight")
    return w / total


def _pairwise_frank_wolfe(A: np.ndarray, w: np.ndarray, steps: int) -> np.ndarray:
    """Up to ``steps`` pairwise Frank–Wolfe steps on ½‖Aᵀw‖² over the simplex, each with exact line
    search.

    A step moves weight from the support point with the largest ⟨a_i, z⟩ to the point with the
    smallest (z = Aᵀw). It stops once the duality gap max_{supp} ⟨a_i, z⟩ − min_i ⟨a_i, z⟩ is at
    rounding level: then z satisfies the optimality condition ⟨a_i, z⟩ ≥ ‖z‖² for all i up to
    rounding."""
    z = A.T @ w
    for _ in range(steps):
        scores = A @ z
        s = int(np.argmin(scores))
        support = np.flatnonzero(w > 0)
        a = int(support[np.argmax(scores[support])])
        if scores[a] - scores[s] <= 1e-15 * max(1.0, abs(scores[a])):
            break
        v = A[s] - A[a]
        vv = float(v @ v)
        if vv == 0.0:
            break
        gamma = min(-(float(z @ v)) / vv, float(w[a]))
        if not gamma > 0:
            break
        z_new = z + gamma * v
        if float(z_new @ z_new) >= float(z @ z):
            break
        w = w.copy()
        w[s] += gamma
        w[a] -= gamma
        if w[a] <= 1e-17:  # an away step that empties a: drop it exactly
            w[a] = 0.0
        w = np.maximum(w, 0.0)
        w /= w.sum()
        z = A.T @ w
    return w
