"""Clipping that keeps sensitivity bounds even on bad input, and the one clipped sum of dpnc.

Non-finite values are replaced by 0 *before* clipping (DESIGN.md), so a NaN or infinite loss neither
crashes a run nor breaks the bound |clip_C(a)| ≤ C; the count is reported. :func:`clipped_sum` is
the only place that forms Σ_i clip_C(v_i): every private sum goes through it."""

from __future__ import annotations

from typing import NamedTuple

import torch

Number = float | torch.Tensor


class Clipped(NamedTuple):
    """Per-example values after :func:`clip_each`, and what it did (counts per run; private: do not
    log)."""

    values: torch.Tensor  # clip_C(v_i), non-finite v_i set to 0 first; the shape of the input
    clipped: torch.Tensor  # how many v_i the clip changed, per run (int64)
    nonfinite: torch.Tensor  # how many v_i were set to 0 before clipping, per run (int64)


class ClippedTotal(NamedTuple):
    """Σ_i clip_C(v_i) over a batch and what clipping did: every field is a sum over the examples,
    so the partial totals of disjoint shards add up to the whole batch's. All of it is a statistic
    of the private batch: only a noisy release of ``total`` may be published."""

    total: torch.Tensor  # Σ_i clip_C(v_i): (...,) for scalars, (..., d) for vectors
    clipped: torch.Tensor  # how many v_i the clip changed, per run (int64)
    nonfinite: torch.Tensor  # how many v_i were set to 0 before clipping, per run (int64)
    examples: int  # how many v_i (the realised batch size)

    @property
    def fraction(self) -> torch.Tensor:
        """The fraction clipped per run (NaN on an empty batch), as the mean :func:`clip_scalars`
        returns."""
        return self.clipped.to(self.total.dtype) / self.examples


def clip_each(values: torch.Tensor, clip: Number, *, vector: bool = False) -> Clipped:
    """Zero the non-finite values, then clip each to ``clip``: scalars ``(..., B)`` by
    :func:`clip_scalars`, or with ``vector=True`` vectors ``(..., B, d)`` by :func:`clip_vectors` (a
    vector with any non-finite entry becomes 0). ``clip`` is C, or one per run; ``math.inf`` only
    zeroes. For estimators that combine the clipped values otherwise than by a sum (a weighted sum
    over directions, a mean per example)."""
    if vector:
        values, nonfinite = zero_nonfinite_rows(values)
        clipped, over = _clip_vectors(values, clip)
    else:
        values, nonfinite = zero_nonfinite(values)
        clipped, over = _clip_scalars(values, clip)
    return Clipped(clipped, over.sum(-1), nonfinite)


def clipped_sum(values: torch.Tensor, clip: Number, *, vector: bool = False) -> ClippedTotal:
    """Σ_i clip_bound(v_i) over the example dimension (the last for scalars, the one before the last
    with ``vector=True``), non-finite v_i set to 0 before clipping; with the counts
    (:class:`ClippedTotal`).

    The caller releases ``total`` (:func:`dpnc.privacy.release.release_sum`: divided by the fixed B,
    never by ``examples``), after adding the partial totals of every rank where the batch is
    sharded."""
    each = clip_each(values, clip, vector=vector)
    return ClippedTotal(
        each.values.sum(-2 if vector else -1),
        each.clipped,
        each.nonfinite,
        values.shape[-2 if vector else -1],
    )


def zero_nonfinite(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace NaN/±inf by 0 (before clipping, so the sensitivity bound holds); return the count per
    run."""
    finite = torch.isfinite(a)
    return torch.where(finite, a, torch.zeros_like(a)), (~finite).sum(-1)


def clip_scalars(a: torch.Tensor, clip: Number) -> tuple[torch.Tensor, torch.Tensor]:
    """clip_C(a) = sign(a)·min(|a|, C) elementwise over the last dim, C = ``clip`` (a float, or one
    per run: (K,)).

    Returns the clipped values and the fraction clipped per run. a = 0 maps to 0; C = inf is no-op.
    """
    clipped, over = _clip_scalars(a, clip)
    return clipped, over.to(a.dtype).mean(-1)


def _clip_scalars(a: torch.Tensor, clip: Number) -> tuple[torch.Tensor, torch.Tensor]:
    clip = per_run(clip, a)
    return torch.maximum(torch.minimum(a, clip), -clip), a.abs() > clip


def zero_nonfinite_rows(g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace every vector (last dim) holding a NaN/±inf by 0; return the count per run."""
    bad = ~torch.isfinite(g).all(-1)
    return torch.where(bad.unsqueeze(-1), torch.zeros_like(g), g), bad.sum(-1)


def clip_vectors(g: torch.Tensor, clip: Number) -> tuple[torch.Tensor, torch.Tensor]:
    """clip_C(v) = v·min(1, C/‖v‖) over the last dim of g (..., B, d), C = ``clip`` (a float, or
    one per run).

    Vectors with non-finite entries become 0 first. Norms are taken of v/max|v_j| so that huge but
    finite vectors (whose squared norm overflows) still come out with norm C.
    """
    g, _ = zero_nonfinite_rows(g)
    clipped, over = _clip_vectors(g, clip)
    return clipped, over.to(g.dtype).mean(-1)


def _clip_vectors(g: torch.Tensor, clip: Number) -> tuple[torch.Tensor, torch.Tensor]:
    """clip_vectors of rows that are finite already; the clipped rows and which were clipped."""
    scale = g.abs().amax(-1, keepdim=True)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    unit = g / scale
    unit_norms = torch.linalg.vector_norm(unit, dim=-1)
    norms = scale.squeeze(-1) * unit_norms
    clip = per_run(clip, norms)
    over = norms > clip
    factor = clip / torch.where(unit_norms > 0, unit_norms, torch.ones_like(unit_norms))
    return torch.where(over.unsqueeze(-1), unit * factor.unsqueeze(-1), g), over


def clip_weights(norms: torch.Tensor, clip: Number) -> tuple[torch.Tensor, torch.Tensor]:
    """The factors min(1, C/‖v_i‖) that clip_C applies to vectors of the given norms (..., B), and
    which were clipped: for sums Σ_i w_i v_i formed without the vectors (a closed form; per-layer
    norms). Non-finite norms must be handled by the caller (their vectors zeroed), as
    :func:`clipped_sum` does."""
    clip = per_run(clip, norms)
    over = norms > clip
    return torch.where(over, clip / norms.clamp_min(1e-300), torch.ones_like(norms)), over


def per_run(clip: Number, like: torch.Tensor) -> torch.Tensor:
    """``clip`` as a tensor shaped to broadcast one value per run over the trailing dims of
    ``like``."""
    clip = torch.as_tensor(clip, dtype=like.dtype, device=like.device)
    return clip.reshape(*clip.shape, *([1] * (like.ndim - clip.ndim))) if clip.ndim else clip
