"""The layer kinds of the per-layer route (:mod:`dpnc.tier.per_layer`): for each layer type, its
per-example gradients as products of the layer's input rows ``a`` and output gradients ``g``, their
squared norms and their weighted sums Σ_i w_i ∇θ_i (the products are listed in
:mod:`dpnc.tier.per_layer`'s docstring). :data:`KINDS` maps a layer type to its kind; a kind's
``handles`` refuses a configuration its products do not hold for. The shared machinery is in
:mod:`dpnc.tier.layer_base`, the convolutions in :mod:`dpnc.tier.conv_kinds`, the attention's in
:mod:`dpnc.tier.attention`."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from dpnc.tier.attention import _Attention
from dpnc.tier.conv_kinds import _Conv, _ConvTranspose
from dpnc.tier.layer_base import Layer, _Linear, _product, _times
from dpnc.tier.recurrent import takes


class _Embedding(Layer):
    product = "Σ_t e_{id_t} g_tᵀ; the padding_idx row gets nothing"  # the docs' layer table

    @staticmethod
    def rows(module, a, g):
        b = a.shape[0]
        ids, g = a.reshape(b, -1), g.reshape(b, -1, g.shape[-1])
        if (
            module.padding_idx is not None
        ):  # the padding row gets no gradient: its positions count for nothing
            g = torch.where((ids == module.padding_idx).unsqueeze(-1), torch.zeros_like(g), g)
        return ids, g

    def norms2(self):
        same = (self.a.unsqueeze(2) == self.a.unsqueeze(1)).to(self.g.dtype)
        return _times(
            (same * torch.bmm(self.g, self.g.transpose(1, 2))).sum((1, 2)).to(torch.float64),
            self.t,
            2,
        )

    def weighted_sums(self, w, finite):
        wg = (self.g * self._weights(w, self.t, finite)).reshape(-1, self.g.shape[-1])
        weight = torch.zeros_like(self.module.weight)
        return {"weight": weight.index_add_(0, self.a.reshape(-1), wg.to(weight.dtype))}


class _EmbeddingBag(_Embedding):
    """EmbeddingBag on 2-D input (a bag per row), mode 'sum' or 'mean': each id of a bag gets the
    bag's output gradient times its weight c_t (1; 1/(ids in the bag but padding_idx) for 'mean';
    the per_sample_weight), so Embedding's products hold over those rows. 1-D input with offsets is
    left to the vmap route."""

    product = (
        "Σ_t c_t e_{id_t} g_bagᵀ, c_t 1, 1/(bag size) or the per-sample weight"  # the docs' table
    )

    @staticmethod
    def handles(module):
        return module.mode in ("sum", "mean") and module.max_norm is None

    @staticmethod
    def inputs(module, args, kwargs):
        offsets = args[1] if len(args) > 1 else kwargs.get("offsets")
        weights = args[2] if len(args) > 2 else kwargs.get("per_sample_weights")
        return None if offsets is not None else (args[0], weights)

    @staticmethod
    def rows(module, a, g):
        ids, weights = a
        b = ids.shape[0]
        ids, g = (
            ids.reshape(b, -1, ids.shape[-1]),
            g.reshape(b, -1, g.shape[-1]),
        )  # (b, bags, L), (b, bags, D)
        c = torch.ones(ids.shape, dtype=g.dtype, device=g.device)
        if (
            module.padding_idx is not None
        ):  # padding ids are left out of the bag: no gradient, not counted
            c = (ids != module.padding_idx).to(g.dtype)
        if weights is not None:
            c = c * weights.reshape(ids.shape).to(g.dtype)
        elif module.mode == "mean":
            c = c / c.sum(-1, keepdim=True).clamp_min(1.0)
        return ids.reshape(b, -1), (g.unsqueeze(2) * c.unsqueeze(-1)).reshape(b, -1, g.shape[-1])


class _LayerNorm(Layer):
    product = "γ: Σ_t g_t ⊙ x̂_t; β: Σ_t g_t"  # the docs' layer table

    @staticmethod
    def rows(module, a, g):
        b, shape = a.shape[0], module.normalized_shape
        width = int(torch.Size(shape).numel())
        normed = F.layer_norm(
            a, shape, eps=module.eps
        )  # x̂: its entries are at most √width in magnitude
        return normed.reshape(b, -1, width), g.reshape(b, -1, width)

    def _per_example(self):
        out = {}
        if "weight" in self.trained:
            out["weight"] = (self.g * self.a).sum(self.axis)
        if "bias" in self.trained:
            out["bias"] = self.g.sum(self.axis)
        return out

    def norms2(self):
        both = _product(self.s, self.t)  # s is x̂'s own peak, at most √width
        return sum(
            _times((v**2).sum(-1).to(torch.float64), both if k == "weight" else self.t, 2)
            for k, v in self._per_example().items()
        )

    def weighted_sums(self, w, finite):
        shape = next(p for _, p in self.module.named_parameters()).shape
        ws = self._weights(w, _product(self.s, self.t), finite).reshape(-1, 1)
        wt = self._weights(w, self.t, finite).reshape(-1, 1)
        return {
            k: (v * (ws if k == "weight" else wt)).sum(0).reshape(shape)
            for k, v in self._per_example().items()
        }


class _RMSNorm(_LayerNorm):
    """γ ⊙ x̂, x̂ = x / √(mean(x²) + eps): LayerNorm's products, x̂ the module's own normalisation,
    no bias."""

    product = "Σ_t g_t ⊙ x̂_t, x̂ = x / √(mean(x²) + eps)"  # the docs' layer table

    @staticmethod
    def rows(module, a, g):
        b, shape = a.shape[0], module.normalized_shape
        width = math.prod(shape)
        normed = F.rms_norm(
            a, shape, eps=module.eps
        )  # eps None: the dtype's, as the module's forward
        return normed.reshape(b, -1, width), g.reshape(b, -1, width)


class _ChannelNorm(_LayerNorm):
    """GroupNorm, InstanceNorm, and BatchNorm with its running statistics (eval mode): γ ⊙ x̂ + β
    per channel after a normalisation, so an example's gradients are LayerNorm's with the channels
    as the width and every position of every sample as a row (kept channels first, (b, C, rows), so
    that no copy is made). x̂ is the module's own normalisation: over each sample's group
    (GroupNorm), over each sample's positions (InstanceNorm from its input), or by the running
    statistics (fixed, not the batch's)."""

    product = "Σ g ⊙ x̂ per channel, x̂ the module's own normalisation"  # the docs' layer table

    axis = 2

    @staticmethod
    def handles(module):
        if isinstance(
            module, nn.modules.batchnorm._BatchNorm
        ):  # in train mode it normalises by the batch
            return (
                not module.training
                and module.track_running_stats
                and module.running_mean is not None
            )
        return True

    @staticmethod
    def rows(module, a, g):
        b = a.shape[0]
        channels = module.num_channels if isinstance(module, nn.GroupNorm) else module.num_features
        unbatched = (
            isinstance(module, nn.modules.instancenorm._InstanceNorm)
            and a.ndim - 1 == module._get_no_batch_dim()
        )
        axis = 1 if unbatched else 2  # the channel axis beneath vmap: (b, [samples,] C, *positions)
        positions = math.prod(a.shape[axis + 1 :])
        x, g = a.reshape(-1, channels, positions), g.reshape(-1, channels, positions)  # (b·k, C, L)
        if isinstance(module, nn.GroupNorm):
            normed = F.group_norm(x, module.num_groups, eps=module.eps)
        elif (
            getattr(module, "running_mean", None) is not None and not module.training
        ):  # the running statistics
            normed = (x - module.running_mean[:, None]) / (
                module.running_var[:, None] + module.eps
            ).sqrt()
        else:
            normed = F.instance_norm(x, eps=module.eps)

        def rows(t):  # (b·k, C, L) → (b, C, k·L): a view when k = 1
            return t.reshape(b, -1, channels, positions).transpose(1, 2).reshape(b, channels, -1)

        return rows(normed), rows(g)


class _Recurrent(_Linear):
    """nn.RNN, nn.GRU, nn.LSTM, never formed as one layer: on the route each weight matrix with its
    bias is a Linear of its own (:class:`dpnc.tier.recurrent.Part`) over the calls of the layer's
    unrolled forward."""

    product = (  # the docs' layer table
        "each weight matrix a Linear over the unrolled steps, Σ_t g_t a_tᵀ, bias Σ_t g_t; packed: masked "
        "past each length"
    )
    handles = staticmethod(takes)


KINDS: dict[type, type[Layer]] = {
    nn.Linear: _Linear,
    nn.Embedding: _Embedding,
    nn.EmbeddingBag: _EmbeddingBag,
    nn.LayerNorm: _LayerNorm,
    nn.Conv1d: _Conv,
    nn.Conv2d: _Conv,
    nn.Conv3d: _Conv,
    nn.ConvTranspose1d: _ConvTranspose,
    nn.ConvTranspose2d: _ConvTranspose,
    nn.ConvTranspose3d: _ConvTranspose,
    nn.RMSNorm: _RMSNorm,
    nn.MultiheadAttention: _Attention,
    nn.GroupNorm: _ChannelNorm,
    nn.modules.instancenorm._InstanceNorm: _ChannelNorm,
    nn.modules.batchnorm._BatchNorm: _ChannelNorm,
    nn.RNN: _Recurrent,
    nn.GRU: _Recurrent,
    nn.LSTM: _Recurrent,
}
SUPPORTED = tuple(KINDS)


def kind(module: nn.Module) -> type[Layer] | None:
    """The products that give ``module``'s per-example gradients, or None where none do."""
    cls = next((cls for base, cls in KINDS.items() if isinstance(module, base)), None)
    return cls if cls is not None and cls.handles(module) else None


# What a user must know beyond the type: the configurations a kind takes only in part
_RECURRENT = "(no dropout between layers in train mode)"
_CONDITIONS = {
    nn.modules.batchnorm._BatchNorm: "(eval mode, running statistics)",
    **{layer: _RECURRENT for layer in (nn.RNN, nn.GRU, nn.LSTM)},
}


def layer_rows() -> list[tuple[str, str]]:
    """(layer name as :func:`layer_names` writes it, its per-example gradient in words), one per
    entry of :data:`KINDS`: the docs' layer table."""
    return list(zip(layer_names(), (cls.product for cls in KINDS.values())))


def layer_names() -> list[str]:
    """The layer types of :data:`KINDS` as a user writes them, each with its condition where it has
    one ("BatchNorm*d (eval mode, ...)"): the refusals and the docs table are generated from it, so
    they list what the route takes."""
    names = []
    for base in KINDS:
        name = base.__name__
        if name.startswith("_"):  # a private base class: every one of its 1d, 2d, 3d layers
            name = name[1:] + "*d"
        names.append(f"{name} {_CONDITIONS[base]}" if base in _CONDITIONS else name)
    return names
