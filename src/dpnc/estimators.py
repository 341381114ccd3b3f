"""Gradient estimators: zeroth-order finite differences along random directions.

* The two-point scalar difference of DPZero and MeZO (Zhang et al. 2024, eq. (2); Malladi et al.
  2023): a_i = (f(x + λu; ξ_i) − f(x − λu; ξ_i)) / (2λ), one scalar per example, computed with the
  direction u regenerated from its seed (never stored).
* GRAD and DIFF of Zhang–Tran–Cutkosky (Algorithms 1–2), the estimator of Kornowski–Liu–Talwar's
  eq. (4) being GRAD with m directions: vector estimates of ∇F̂_δ(x) and ∇F̂_δ(x) − ∇F̂_δ(y) for
  the uniform-ball smoothing F̂_δ, from m directions on the unit sphere per data point, all points
  × directions evaluated as one batched call of the objective.
* The first-order ball estimate of Kornowski–Liu–Talwar (Algorithm 5): per-example gradients at
  uniform points of the α-ball, also one batched call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from dpnc.distributed import LOCAL, Group, Local
from dpnc.privacy.clipping import clip_each, clipped_sum
from dpnc.problems.base import Directional, Objective
from dpnc.sampling import BatchClosure, Sampler, batch_losses
from dpnc.space import ParameterSpace

Closure = Callable[[], torch.Tensor]


@dataclass(frozen=True)
class TwoPoint:
    """Per-example losses at x + λu and x − λu (shape (..., B))."""

    plus: torch.Tensor
    minus: torch.Tensor
    lam: float

    @property
    def a(self) -> torch.Tensor:
        """a_i = (ℓ_i(x + λu) − ℓ_i(x − λu)) / (2λ); on quadratics exactly uᵀ∇ℓ_i(x)."""
        return (self.plus - self.minus) / (2 * self.lam)

    @property
    def loss(self) -> torch.Tensor:
        """Mean loss at x, estimated as the average over both points (error O(λ²) for smooth ℓ)."""
        return (self.plus.mean(-1) + self.minus.mean(-1)) / 2

    @property
    def examples(self) -> int:
        return self.plus.shape[-1]


@dataclass(frozen=True)
class ClosedForm:
    """A batch closure (per-example losses at the space's point) that also carries the objective's
    closed-form two-point differences, ``differences(u, lam, batch) -> Directional | None``:
    :func:`two_point_on_batch` then need not evaluate the losses at x ± λu (on a quadratic: one
    product of the batch's data with Au, shared by every run of a grid, instead of two per run);
    None (an objective without them): it evaluates them."""

    losses: BatchClosure
    differences: Callable[[torch.Tensor, float, torch.Tensor], Directional | None]

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        return self.losses(batch)


def two_point(space: ParameterSpace, closure: Closure, seed: int, lam: float) -> TwoPoint:
    """Per-example losses at x ± λu along u = u(seed).

    ``closure()`` returns the per-example losses at the space's current point, shape (..., B).
    The space is left perturbed at x − λu; the caller's ``space.update_(seed, ·)`` restores it in
    the same pass as the update.
    """
    if not lam > 0:
        raise ValueError(f"lam must be > 0; got {lam!r}")
    try:
        space.perturb_(seed, lam)
        plus = closure()
        space.perturb_(seed, -2 * lam)
        minus = closure()
    except BaseException:
        space.restore_()  # never leave the parameters perturbed when the closure fails
        raise
    return TwoPoint(plus, minus, lam)


def two_point_on_batch(
    space: ParameterSpace,
    closure: BatchClosure,
    seed: int,
    lam: float,
    sampler: Sampler,
    *,
    group: Group | Local = LOCAL,
) -> TwoPoint:
    """:func:`two_point` on a batch the sampler draws (secretly when subsampled) and hands to the
    closure.

    ``closure(batch)`` must return one loss per example of ``batch`` (checked by
    :func:`~dpnc.sampling.batch_losses`); the batch is not returned, so it cannot leak through a
    log. A :class:`ClosedForm` closure gives the differences exactly, as a :class:`Directional` (the
    space is not moved). With a process ``group`` the batch is rank 0's draw and the closure gets
    this rank's part of it (:meth:`~dpnc.distributed.Group.draw`); an empty part's losses are then
    in the space's dtype, so that every rank's partial sums agree in dtype (alone, an empty batch's
    are float64, as :func:`batch_losses` gives them)."""
    batch = group.draw(sampler)
    a = (
        closure.differences(space.direction(seed), lam, batch)
        if isinstance(closure, ClosedForm)
        else None
    )
    if a is not None:
        if tuple(a.a.shape) != (*space.runs, len(batch)):
            raise ValueError(
                f"two-point differences of shape {tuple(a.a.shape)}; expected "
                f"{(*space.runs, len(batch))}"
            )
        return a
    dtype = torch.float64 if group is LOCAL else space.dtype
    return two_point(
        space, lambda: batch_losses(closure, batch, space.runs, dtype=dtype), seed, lam
    )


def functional_clipped_sum(
    loss_one: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    data: torch.Tensor,
    C,
    *,
    chunk: int = 1024,
):
    """Σ_i clip_C(∇ℓ(x; ξ_i)), the fraction clipped, and the mean loss, by ``torch.func``.

    The caller divides the sum by its fixed (public) batch size, never by ``len(data)``.

    ``loss_one(x, xi)`` is one example's loss for x of shape (d,). Per-example gradients are formed
    ``chunk`` examples at a time, so memory is chunk·d, not n·d. x may carry leading run dimensions.
    A gradient with a non-finite entry counts as 0 (before clipping:
    :func:`~dpnc.privacy.clipping.clipped_sum`) and its loss as 0 in the mean loss."""
    from torch.func import grad_and_value, vmap

    per_example = vmap(grad_and_value(loss_one), in_dims=(None, 0))
    for _ in range(x.ndim - 1):  # one more vmap per leading run dimension
        per_example = vmap(per_example, in_dims=(0, None))
    total, clipped, loss = 0.0, 0.0, 0.0
    for start in range(0, len(data), chunk):
        g, values = per_example(x, data[start : start + chunk])
        summed = clipped_sum(g, C, vector=True)
        total = total + summed.total
        clipped = clipped + summed.clipped.to(x.dtype)
        loss = loss + torch.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0).sum(-1)
    n = max(len(data), 1)
    if not isinstance(total, torch.Tensor):  # an empty batch: the sum is 0
        total = torch.zeros_like(x)
    return total, clipped / n, loss / n


def objective_clipped_sum(problem, x: torch.Tensor, C, index: torch.Tensor, *, chunk: int = 1024):
    """Σ_{i in index} clip_C(∇f(x; z_i)), the fraction clipped, and the mean loss, for an Objective.

    What DP-GD needs of an objective (:class:`~dpnc.problems.base.Objective`): its closed form
    ``problem.clipped_gradient_sum(x, C, index)`` where it has one (e.g. the DPZero quadratic), else
    its per-example ``gradients`` at the point(s) x (..., d) shared by the batch, ``chunk`` examples
    at a time. A gradient with a non-finite entry counts as 0 (before clipping) and a non-finite
    loss as 0. The caller divides the sum by its fixed (public) batch size, never by ``len(index)``.
    """
    closed_form = problem.clipped_gradient_sum(x, C, index)
    if closed_form is not None:
        return closed_form
    points = x.reshape(-1, x.shape[-1])  # (k, d): the runs
    total = torch.zeros_like(points)
    clipped = torch.zeros(points.shape[0], dtype=x.dtype)
    loss = torch.zeros(points.shape[0], dtype=x.dtype)
    for start in range(0, len(index), chunk):
        part = index[start : start + chunk]
        g = problem.gradients(points.expand(len(part), *points.shape), part).transpose(
            0, 1
        )  # (k, b, d)
        summed = clipped_sum(g, _per_run_flat(C, points), vector=True)
        total += summed.total
        clipped += summed.clipped
        values = problem.losses_at(points, part)  # (k, b)
        loss += torch.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0).sum(-1)
    n = max(len(index), 1)
    runs = x.shape[:-1]
    return total.reshape(x.shape), (clipped / n).reshape(runs), (loss / n).reshape(runs)


def _per_run_flat(C, points: torch.Tensor) -> torch.Tensor:
    """C as one threshold per flattened run (k,) (a float stays a float)."""
    C = torch.as_tensor(C, dtype=points.dtype)
    return C.reshape(-1) if C.ndim else C


# --- GRAD and DIFF (Zhang–Tran–Cutkosky, Algorithms 1 and 2) --------------------------------------


@dataclass(frozen=True)
class VectorEstimate:
    """Per-example estimates (b, d) and what producing them cost and changed.

    ``clipped`` counts finite differences that exceeded the bound a truly L-Lipschitz f obeys (so
    the per-example sensitivity holds even when the declared L is wrong); ``nonfinite`` counts
    differences that were NaN/±inf and were set to 0 first.
    """

    per_example: torch.Tensor
    evaluations: int
    clipped: int
    nonfinite: int

    @property
    def mean(self) -> torch.Tensor:
        return self.per_example.mean(0)


def sphere_directions(
    b: int, m: int, d: int, generator: torch.Generator, *, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """u_ij ~ Uniform(S^{d−1}), i.i.d., shape (b, m, d), as g/‖g‖ with g ~ N(0, I_d) (public
    randomness)."""
    g = torch.randn(b, m, d, generator=generator, dtype=dtype)
    return g / torch.linalg.vector_norm(g, dim=-1, keepdim=True)


def uniform_ball(
    n: int, d: int, generator: torch.Generator | None = None, *, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """n points uniform in the open unit ball of R^d: a uniform direction times U^{1/d}, U ~ U[0,
    1)."""
    if generator is None:
        generator = torch.Generator().manual_seed(0)
    v = torch.randn(n, d, generator=generator, dtype=dtype)
    norms = torch.linalg.vector_norm(v, dim=-1, keepdim=True)
    v = v / torch.where(
        norms > 0, norms, torch.ones_like(norms)
    )  # a zero draw (probability 0) stays at 0
    return v * torch.rand(n, 1, generator=generator, dtype=dtype) ** (1.0 / d)


def grad_estimate(
    problem: Objective,
    x: torch.Tensor,
    index: torch.Tensor,
    delta: float,
    *,
    generator: torch.Generator,
    m: int | None = None,
    clip: bool = True,
    L: float | None = None,
) -> VectorEstimate:
    """GRAD_{f,δ}(x, z_{1:b}) (ZTC Algorithm 1), per example:

        g_i = (1/m) Σ_j (d/(2δ)) (f(x + δu_ij, z_i) − f(x − δu_ij, z_i)) u_ij,

    unbiased for ∇f̂_δ(x, z_i); m = d directions per point in the paper. ‖g_ij‖ ≤ dL, so one example
    moves the mean by at most 2dL/b. With ``clip`` each difference is clipped to 2Lδ, the most an
    L-Lipschitz f allows (docs/papers.md, ZTC §6.14): a no-op for a correct L, and the bound holds
    when L is wrong. ``L`` is the Lipschitz bound (default: the problem's declared ``constants.L0``;
    an algorithm passes the one its config holds)."""
    d, m = _check_zo(problem, x, delta, m)
    u = sphere_directions(len(index), m, d, generator, dtype=x.dtype)
    values = problem.losses(torch.cat([x + delta * u, x - delta * u], dim=1), index)
    return _combine(
        values[:, :m] - values[:, m:], u, d / (2 * delta), 2 * _lipschitz(problem, L) * delta, clip
    )


def diff_estimate(
    problem: Objective,
    x: torch.Tensor,
    y: torch.Tensor,
    index: torch.Tensor,
    delta: float,
    *,
    generator: torch.Generator,
    m: int | None = None,
    clip: bool = True,
    L: float | None = None,
) -> VectorEstimate:
    """DIFF_{f,δ}(x, y, z_{1:b}) (ZTC Algorithm 2), per example:

        d_i = (1/m) Σ_j (d/δ) (f(x + δu_ij, z_i) − f(y + δu_ij, z_i)) u_ij,

    unbiased for ∇f̂_δ(x, z_i) − ∇f̂_δ(y, z_i) by common random numbers (the same u_ij at x and y).
    ‖d_ij‖ ≤ dL‖x − y‖/δ, so one example moves the mean by at most 2dL‖x − y‖/(bδ); with ``clip``
    each difference is clipped to L‖x − y‖ (``L`` as in :func:`grad_estimate`).
    """
    d, m = _check_zo(problem, x, delta, m)
    if y.shape != x.shape:
        raise ValueError(
            f"x and y must have the same shape; got {tuple(x.shape)} and {tuple(y.shape)}"
        )
    u = sphere_directions(len(index), m, d, generator, dtype=x.dtype)
    values = problem.losses(torch.cat([x + delta * u, y + delta * u], dim=1), index)
    bound = _lipschitz(problem, L) * float(torch.linalg.vector_norm(x - y))
    return _combine(values[:, :m] - values[:, m:], u, d / delta, bound, clip)


def ball_gradient_estimate(
    problem: Objective,
    x: torch.Tensor,
    index: torch.Tensor,
    alpha: float,
    *,
    generator: torch.Generator,
    m: int = 1,
    clip: bool = True,
    L: float | None = None,
) -> VectorEstimate:
    """The first-order estimate of Kornowski–Liu–Talwar (Algorithm 5, eq. (10)), per example:

        g_i = (1/m) Σ_j ∇f(x + y_ij; z_i),   y_ij ~ Uniform(B_α) i.i.d.,

    unbiased for ∇f_α(x; z_i), the gradient of the uniform-ball smoothing (Fact 2.3(iv)); the points
    are a.s. points of differentiability. ‖∇f‖ ≤ L, so ‖g_i‖ ≤ L whatever m is. With ``clip`` each
    gradient is clipped to L (a no-op for a correct L) and ``clipped`` counts those that were not.
    ``evaluations`` counts gradient evaluations, b·m. ``L`` as in :func:`grad_estimate`.
    """
    d, m = _check_zo(problem, x, alpha, m)
    b = len(index)
    y = alpha * uniform_ball(b * m, d, generator, dtype=x.dtype).reshape(b, m, d)
    g = clip_each(
        problem.gradients(x + y, index), _lipschitz(problem, L) if clip else math.inf, vector=True
    )
    return VectorEstimate(
        g.values.mean(1),
        evaluations=b * m,
        clipped=int(g.clipped.sum()),
        nonfinite=int(g.nonfinite.sum()),
    )


def _lipschitz(problem: Objective, L: float | None) -> float:
    """The clip's Lipschitz bound: ``L`` where the caller holds it, else the problem's declared
    L0."""
    return problem.constants.L0 if L is None else L


def _combine(differences, u, factor, bound, clip) -> VectorEstimate:
    each = clip_each(
        differences, bound if clip else math.inf
    )  # non-finite differences set to 0, then clipped
    b, m, _ = u.shape
    per_example = torch.bmm(each.values.unsqueeze(1), u).squeeze(1) * (
        factor / m
    )  # Σ_j diff_ij·u_ij
    return VectorEstimate(
        per_example,
        evaluations=2 * b * m,
        clipped=int(each.clipped.sum()),
        nonfinite=int(each.nonfinite.sum()),
    )


def _check_zo(problem, x, delta, m) -> tuple[int, int]:
    d = problem.dim
    if x.shape != (d,):
        raise ValueError(f"x must have shape ({d},) for this problem; got {tuple(x.shape)}")
    if not delta > 0:
        raise ValueError(f"delta must be > 0; got {delta!r}")
    m = d if m is None else m
    if not isinstance(m, int) or m < 1:
        raise ValueError(f"m (directions per data point) must be an integer >= 1; got {m!r}")
    return d, m
