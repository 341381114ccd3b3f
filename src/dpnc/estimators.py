"""Gradient estimators: zeroth-order finite differences along seeded directions.

The two-point scalar difference of DPZero and MeZO (Zhang et al. 2024, eq. (2); Malladi et al.
2023): a_i = (f(x + λu; ξ_i) − f(x − λu; ξ_i)) / (2λ), one scalar per example, computed with the
direction u regenerated from its seed (never stored).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from dpnc.clipping import clip_vectors
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


def per_example_clipped_mean(loss_one: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], x: torch.Tensor,
                             data: torch.Tensor, C, *, chunk: int = 1024):
    """(1/n) Σ_i clip_C(∇ℓ(x; ξ_i)), the fraction clipped, and the mean loss, by ``torch.func``.

    ``loss_one(x, xi)`` is one example's loss for x of shape (d,). Per-example gradients are formed
    ``chunk`` examples at a time, so memory is chunk·d, not n·d. x may carry leading run dimensions.
    A gradient with a non-finite entry counts as 0 (before clipping; see :func:`clip_vectors`) and its
    loss as 0 in the mean loss.
    """
    from torch.func import grad_and_value, vmap


    per_example = vmap(grad_and_value(loss_one), in_dims=(None, 0))
    for _ in range(x.ndim - 1):   # one more vmap per leading run dimension
        per_example = vmap(per_example, in_dims=(0, None))
    total, clipped, loss = 0.0, 0.0, 0.0
    for start in range(0, len(data), chunk):
        g, values = per_example(x, data[start:start + chunk])
        g_clipped, frac = clip_vectors(g, C)
        total = total + g_clipped.sum(-2)
        clipped = clipped + frac * g.shape[-2]
        loss = loss + torch.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0).sum(-1)
    n = len(data)
    return total / n, clipped / n, loss / n
