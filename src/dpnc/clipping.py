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


def clip_vectors(g: torch.Tensor, C: Number) -> tuple[torch.Tensor, torch.Tensor]:
    """clip_C(v) = v·min(1, C/‖v‖) over the last dim of g (..., B, d); C a float or one per run."""
    norms = torch.linalg.vector_norm(g, dim=-1)
    C = per_run(C, norms)
    factor = torch.where(norms > C, C / torch.where(norms > 0, norms, torch.ones_like(norms)),
                         torch.ones_like(norms))
    return g * factor.unsqueeze(-1), (norms > C).to(g.dtype).mean(-1)


def per_run(C: Number, like: torch.Tensor) -> torch.Tensor:
    """C as a tensor shaped to broadcast one value per run over the trailing dims of ``like``."""
    C = torch.as_tensor(C, dtype=like.dtype, device=like.device)
    return C.reshape(*C.shape, *([1] * (like.ndim - C.ndim))) if C.ndim else C
