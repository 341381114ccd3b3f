"""``nn.MultiheadAttention`` on the per-layer route: its projections read as Linear products.

torch's attention projects inside ``F.multi_head_attention_forward`` by calling the functional ``linear`` on its own
``in_proj_weight`` (whole for self-attention, in slices for q and k/v otherwise) and on ``out_proj``'s weight, so no
module hook sees those products. While the route's forward runs, :func:`recording` puts a ``linear`` in their place
that records each call on a watched weight, its input rows and output (beneath vmap), and where its rows lie in the
weight; an in-projection's output gradient is then placed in the rows of the whole (3E, E) weight
(:func:`place`), so that Σ_t g_t a_tᵀ is the packed gradient, q's, k's and v's blocks in one product. The kind of
the in-projection is :class:`_InProjection`; ``out_proj`` is a Linear.

``scaled_dot_product_attention`` has no vmap batching rule on the CPU (torch runs it example by example), so during
the same forward it is computed in its math form, softmax(q kᵀ · scale + mask) v (torch's documented reference),
which vmap batches. Both replacements are the functions ``torch.nn.functional`` looks up at call time, restored when
the forward ends; they change no value but the attention's rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from dpnc.tier.layer_base import _Linear


def watched(model: nn.Module, owners) -> dict[int, tuple[nn.Module, torch.Tensor]]:
    """The weights whose ``linear`` calls are recorded, by storage address → (the module the records belong to,
    the whole weight): the ``in_proj_weight`` of each MultiheadAttention among ``owners`` (the route's layers) and
    the weight of each attention's ``out_proj`` among them (the attention calls its weight, not the module)."""
    out = {}
    for attention in model.modules():
        if isinstance(attention, nn.MultiheadAttention):
            for module, weight in (
                (attention, attention.in_proj_weight),
                (attention.out_proj, None),
            ):
                if module in owners:
                    weight = module.weight if weight is None else weight
                    out[_address(weight)] = (module, weight)
    return out


def _address(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


@contextmanager
def recording(weights: dict, record: Callable) -> Iterator[None]:
    """While open, a ``linear`` call on one of ``weights`` (see :func:`watched`) calls ``record(module, input,
    output, rows)`` (``rows``: the (first row, rows in all) of the slice it used, None for the whole weight), and
    scaled dot-product attention is computed in its math form."""
    linear, attention = F.linear, F.scaled_dot_product_attention

    def recorded_linear(input, weight, bias=None):
        output = linear(input, weight, bias)
        entry = weights.get(_address(weight))
        if entry is not None:
            module, whole = entry
            rows = None
            if (
                weight.shape != whole.shape
            ):  # a slice of the packed weight: q's, k/v's, or one of the three
                first = (weight.data_ptr() - whole.data_ptr()) // (
                    whole.element_size() * whole.stride(0)
                )
                rows = (first, whole.shape[0])
            record(module, input, output, rows)
        return output

    F.linear, F.scaled_dot_product_attention = recorded_linear, math_attention
    try:
        yield
    finally:
        F.linear, F.scaled_dot_product_attention = linear, attention


def place(g: torch.Tensor, rows: tuple[int, int] | None) -> torch.Tensor:
    """An output gradient of a slice's product placed at its rows of the whole weight's outputs (zeros elsewhere)."""
    if rows is None:
        return g
    first, total = rows
    return F.pad(g, (first, total - first - g.shape[-1]))


def math_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    """``F.scaled_dot_product_attention`` in its math form, which vmap batches."""
    if enable_gqa:
        repeat = query.size(-3) // key.size(-3)
        key, value = key.repeat_interleave(repeat, -3), value.repeat_interleave(repeat, -3)
    scores = (
        query @ key.transpose(-2, -1) * (1 / math.sqrt(query.size(-1)) if scale is None else scale)
    )
    if is_causal:
        causal = torch.ones(query.size(-2), key.size(-2), dtype=torch.bool, device=query.device)
        scores = scores.masked_fill(~causal.tril(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = torch.softmax(scores, dim=-1)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p)
    return weights @ value


class _InProjection(_Linear):
    """MultiheadAttention's packed q, k, v projection (``in_proj_weight`` (3E, E), ``in_proj_bias``): a Linear
    whose calls :mod:`dpnc.tier.attention` records, each call's output gradient placed at the rows of the weight it
    used, so Σ_t g_t a_tᵀ is the whole packed gradient. Separate q/k/v weights (kdim or vdim ≠ E) and bias_k/bias_v
    are not taken (the vmap route runs them)."""

    product = (
        "the q, k, v projections as one Linear product over the packed weight"  # the docs' table
    )
    names = {"in_proj_weight": "weight", "in_proj_bias": "bias"}

    def __init__(self, module, a, g, trained, scaled) -> None:
        super().__init__(module, a, g, {self.names[n] for n in trained}, scaled)

    @staticmethod
    def handles(module):
        return module._qkv_same_embed_dim and module.bias_k is None and module.bias_v is None

    def weighted_sums(self, w, finite):
        local = {v: k for k, v in self.names.items()}
        return {local[k]: s for k, s in super().weighted_sums(w, finite).items()}
