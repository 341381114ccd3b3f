"""``nn.MultiheadAttention`` on the per-layer route: its projections read as Linear products, its
bias_k and bias_v as gradients into each example's own copy.

torch's attention projects through the functional ``linear``, which no module hook sees, so the
route records those calls while its forward runs. What each product is: docs/layers.md."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from dpnc.tier.layer_base import Layer, _Linear

# The parts of an attention's own parameters: by its calls' tag (see ``place``), its parameters'
# names → the part's. Packed: each call placed in 3E rows; separate weights: in_proj_bias's thirds;
# bias_k, bias_v: the gradient into the example's copy, a Linear's bias over its calls.
PARTS = {
    "in": {"in_proj_weight": "weight", "in_proj_bias": "bias"},
    "q": {"q_proj_weight": "weight", "in_proj_bias": "bias"},
    "k": {"k_proj_weight": "weight", "in_proj_bias": "bias"},
    "v": {"v_proj_weight": "weight", "in_proj_bias": "bias"},
    "bias_k": {"bias_k": "bias"},
    "bias_v": {"bias_v": "bias"},
}
SEPARATE = {"q_proj_weight": "q", "k_proj_weight": "k", "v_proj_weight": "v"}
TAGS = {"in_proj_weight": "in", **SEPARATE, "bias_k": "bias_k", "bias_v": "bias_v"}


def watched(model: nn.Module, owners) -> dict[int, tuple[nn.Module, torch.Tensor]]:
    """The weights whose calls are recorded, by storage address → (the module the records belong to,
    the whole weight): each MultiheadAttention's own projection weights among ``owners`` (the
    route's layers: its packed ``in_proj_weight``, or its ``q_proj_weight``, ``k_proj_weight``,
    ``v_proj_weight``), its bias_k and bias_v, and the weight of each attention's ``out_proj`` among
    them (the attention calls its weight, not the module)."""
    out = {}
    for attention in model.modules():
        if isinstance(attention, nn.MultiheadAttention):
            trained = owners.get(attention, ())
            for name, tag in TAGS.items():  # a call read where its part has a trained parameter
                weight = getattr(attention, name)
                if weight is not None and any(n in trained for n in PARTS[tag]):
                    out[_address(weight)] = (attention, weight)
            if attention.out_proj in owners:
                weight = attention.out_proj.weight
                out[_address(weight)] = (attention.out_proj, weight)
    return out


def _address(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


@contextmanager
def recording(weights: dict, record: Callable) -> Iterator[None]:
    """While open, a ``linear`` call on one of ``weights`` (see :func:`watched`) calls
    ``record(module, input, output, rows)`` (``rows``: the (first row, rows in all) of the packed
    weight's slice it used, "q", "k" or "v" for a separate projection's weight, None for any other
    whole weight); an attention's bias_k and bias_v are handed to it as one copy per example,
    recorded as ``record(module, copies, copies, "bias_k")``; and scaled dot-product attention is
    computed in its math form.

    Why: ``F.multi_head_attention_forward`` calls the functional ``linear`` on its own
    ``in_proj_weight`` (whole for self-attention, in slices for q and k/v otherwise), on each of
    ``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight`` where kdim or vdim differ from
    embed_dim, and on ``out_proj``'s weight, so no module hook sees those products. The
    replacements are the functions ``torch.nn.functional`` looks up at call time, restored when the
    block ends; they change no value but the attention's rounding."""
    linear, attention = F.linear, F.scaled_dot_product_attention
    forward = F.multi_head_attention_forward

    def recorded_linear(input, weight, bias=None):
        output = linear(input, weight, bias)
        entry = weights.get(_address(weight))
        if entry is not None:
            module, whole = entry
            rows = None
            if isinstance(module, nn.MultiheadAttention) and not module._qkv_same_embed_dim:
                rows = next(t for n, t in SEPARATE.items() if getattr(module, n) is whole)
            elif (
                weight.shape != whole.shape
            ):  # a slice of the packed weight: q's, k/v's, or one of the three
                first = (weight.data_ptr() - whole.data_ptr()) // (
                    whole.element_size() * whole.stride(0)
                )
                rows = (first, whole.shape[0])
            record(module, input, output, rows)
        return output

    def recorded_forward(*args, **kwargs):
        args, query = list(args), args[0] if args else kwargs.get("query")
        for i, name in ((7, "bias_k"), (8, "bias_v")):  # their places in torch's signature
            value = args[i] if len(args) > i else kwargs.get(name)
            entry = None if value is None else weights.get(_address(value))
            if entry is not None:
                value = _per_example(value, query)
                record(entry[0], value, value, name)
                if len(args) > i:
                    args[i] = value
                else:
                    kwargs[name] = value
        return forward(*args, **kwargs)

    F.linear, F.scaled_dot_product_attention = recorded_linear, math_attention
    F.multi_head_attention_forward = recorded_forward
    try:
        yield
    finally:
        F.linear, F.scaled_dot_product_attention = linear, attention
        F.multi_head_attention_forward = forward


def _per_example(param: torch.Tensor, like) -> torch.Tensor:
    """``param`` as one copy per example, batched at the vmap level of ``like`` (the attention's
    query), so that the gradient into each copy is its example's; ``param`` itself where ``like`` is
    not batched by exactly one vmap (the route then finds no rows of its own and falls back)."""
    from torch._C._functorch import (
        _add_batch_dim,
        get_unwrapped,
        is_batchedtensor,
        maybe_current_level,
        maybe_get_bdim,
    )

    level = maybe_current_level()
    if not isinstance(like, torch.Tensor) or level is None or not is_batchedtensor(like):
        return param
    inner = get_unwrapped(like)
    if is_batchedtensor(inner):
        return param
    b = inner.shape[maybe_get_bdim(like)]
    return _add_batch_dim(param.unsqueeze(0).expand(b, *param.shape), 0, level)


def place(g: torch.Tensor, rows) -> torch.Tensor | tuple[str, torch.Tensor]:
    """An output gradient where its kind reads it: a packed slice's at its rows of the whole
    weight's outputs (zeros elsewhere), a separate projection's or a bias copy's with its tag, (tag,
    g), any other as it is."""
    if rows is None:
        return g
    if isinstance(rows, str):
        return rows, g
    first, total = rows
    return F.pad(g, (first, total - first - g.shape[-1]))


def math_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    """``F.scaled_dot_product_attention`` in its math form, softmax(q kᵀ · scale + mask) v (torch's
    documented reference), which vmap batches: the fused kernel has no vmap batching rule on the
    CPU, where torch runs it example by example."""
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


class _Attention(Layer):
    """MultiheadAttention's own parameters, from the calls :func:`recording` records, as Linear
    products: the packed q, k, v projection (``in_proj_weight`` (3E, E), each call's output gradient
    placed at the rows of the weight it used, so Σ_t g_t a_tᵀ is the whole packed gradient); or,
    where kdim or vdim ≠ E, each of ``q_proj_weight`` (E, E), ``k_proj_weight`` (E, kdim),
    ``v_proj_weight`` (E, vdim) a Linear over its own calls, ``in_proj_bias`` their three biases;
    and bias_k, bias_v (1, 1, E) the bias of a Linear whose rows are the gradients into the
    example's copies, one per call. The squared norm is the parts' sum."""

    product = (
        "q, k, v projections as Linear products, packed or not; bias_k, bias_v: Σ g of their rows"
    )

    @classmethod
    def of(cls, module, calls, trained, scaled, shared):
        tagged: dict[str, list] = {}
        for a, g in calls:
            tag, g = g if isinstance(g, tuple) else ("in", g)
            tagged.setdefault(tag, []).append((a, g))
        layer = cls.__new__(cls)
        layer.module, layer.parts = module, []
        for tag, names in PARTS.items():  # q, k, v in the order of in_proj_bias's thirds
            own = {names[n] for n in trained if n in names}
            if tag in tagged and own:
                layer.parts.append((names, _Linear.of(module, tagged[tag], own, scaled, shared)))
        return layer

    def norms2(self):
        return sum(part.norms2() for _, part in self.parts)

    def weighted_sums(self, w, finite):
        pieces: dict[str, list] = {}
        for names, part in self.parts:
            sums = part.weighted_sums(w, finite)
            for name, local in names.items():
                if local in sums:
                    pieces.setdefault(name, []).append(sums[local])
        shape = {name: getattr(self.module, name).shape for name in pieces}
        return {name: torch.cat(p).reshape(shape[name]) for name, p in pieces.items()}
