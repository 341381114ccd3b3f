"""Clipping that keeps sensitivity bounds even on bad input.

Non-finite values are replaced by 0 *before* clipping (DESIGN.md), so a NaN or infinite loss neither
crashes a run nor breaks the bound |clip_C(a)| ≤ C; the count is reported.
"""

from __future__ import annotations

import torch

Number = float | torch.Tensor


def zero_nonfinite(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace NaN/±inf by 0 (before clipping, so the sensitivity bound holds); return the count per run."""
    finite = torch.isfinite(a)
    return torch.where(finite, a, torch.zeros_like(a)), (~finite).sum(-1)


def clip_scalars(a: torch.Tensor, C: Number) -> tuple[torch.Tensor, torch.Tensor]:
    """clip_C(a) = sign(a)·min(|a|, C) elementwise over the last dim; C a float or one per run (K,).

    Returns the clipped values and the fraction clipped per run. a = 0 maps to 0; C = inf is no-op.
    """
    C = per_run(C, a)
    clipped = torch.maximum(torch.minimum(a, C), -C)
    return clipped, (a.abs() > C).to(a.dtype).mean(-1)


def zero_nonfinite_rows(g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace every vector (last dim) holding a NaN/±inf by 0; return the count per run."""
    bad = ~torch.isfinite(g).all(-1)
    return torch.where(bad.unsqueeze(-1), torch.zeros_like(g), g), bad.sum(-1)


def clip_vectors(g: torch.Tensor, C: Number) -> tuple[torch.Tensor, torch.Tensor]:
    """clip_C(v) = v·min(1, C/‖v‖) over the last dim of g (..., B, d); C a float or one per run.

    Vectors with non-finite entries become 0 first. Norms are taken of v/max|v_j| so that huge but
    finite vectors (whose squared norm overflows) still come out with norm C.
    """
    g, _ = zero_nonfinite_rows(g)
    scale = g.abs().amax(-1, keepdim=True)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    unit = g / scale
    unit_norms = torch.linalg.vector_norm(unit, dim=-1)
    norms = scale.squeeze(-1) * unit_norms
    C = per_run(C, norms)
    over = norms > C
    factor = C / torch.where(unit_norms > 0, unit_norms, torch.ones_like(unit_norms))
    clipped = torch.where(over.unsqueeze(-1), unit * factor.unsqueeze(-1), g)
    return clipped, over.to(g.dtype).mean(-1)


def per_run(C: Number, like: torch.Tensor) -> torch.Tensor:
    """C as a tensor shaped to broadcast one value per run over the trailing dims of ``like``."""
    C = torch.as_tensor(C, dtype=like.dtype, device=like.device)
    return C.reshape(*C.shape, *([1] * (like.ndim - C.ndim))) if C.ndim else C
