"""The layer kinds of the per-layer route (:mod:`dpnc.tier.per_layer`): for each layer type, its per-example
gradients as products of the layer's input rows ``a`` and output gradients ``g``, their squared norms and their
weighted sums Σ_i w_i ∇θ_i (the products are listed in :mod:`dpnc.tier.per_layer`'s docstring). :data:`KINDS`
maps a layer type to its kind; a kind's ``handles`` refuses a configuration its products do not hold for."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def _scale(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``t`` divided per example by its largest magnitude, and those magnitudes (float64, one per example): norms
    formed from the scaled rows cannot overflow, whatever one row holds (an example of 1e20 in float32 has a
    finite gradient norm, as torch.func's route finds). A non-finite row stays non-finite (its weight is 0)."""
    peak = torch.linalg.vector_norm(t.detach().flatten(1), ord=math.inf, dim=1).clamp_min(
        torch.finfo(t.dtype).tiny
    )
    return t / peak.reshape(-1, *[1] * (t.ndim - 1)), peak.to(torch.float64)


def _product(*scales: torch.Tensor | None) -> torch.Tensor | None:
    """The per-example product of scale factors, None standing for 1 (rows kept unscaled, in float64)."""
    present = [s for s in scales if s is not None]
    if not present:
        return None
    return present[0] if len(present) == 1 else present[0] * present[1]


def _times(x: torch.Tensor, scale: torch.Tensor | None, power: int = 1) -> torch.Tensor:
    """x · scale^power per example, or x itself for unscaled rows (scale None)."""
    return x if scale is None else x * scale**power


class Layer:
    """One layer's input activations ``a`` and output gradients ``g`` over a batch, every call of the layer in one
    forward concatenated as further rows of each example (the gradient of a layer run k times is the sum of the k
    products): the per-example squared gradient norms and the weighted sums Σ_i w_i ∇θ_i of its ``trained``
    parameters (local names; a frozen weight beside a trained bias, as in BitFit, counts for nothing).

    Overflow-safe: ``a`` and ``g`` are kept divided per example by their largest magnitudes ``s`` and ``t``
    (:func:`_scale`), so ∇W_i = s_i t_i ĝ_i â_iᵀ and ∇b_i = t_i Σ ĝ_i; the norms are formed from the scaled rows and
    multiplied back in float64, and the weights w_i s_i t_i are applied to the scaled rows. That costs two passes over
    every row, so the rows are first taken as they are (``scaled=False``: ``s``, ``t`` None) and scaled only where a
    norm comes out non-finite (:func:`layer_clipped_sum`).
    """

    product = ""  # ∇θ_i in words, for the docs' layer table
    axis = 1  # the dimension along which an example's rows (and a layer's calls) lie
    scale_inputs = (
        True  # False: the layer scales what it forms from a (Conv2d: its per-example gradients)
    )

    def __init__(
        self, module: nn.Module, a: torch.Tensor, g: torch.Tensor, trained: set[str], scaled: bool
    ) -> None:
        self.module, self.trained, self.zeroed = module, trained, False
        if not scaled:  # the rows as they are (s, t None)
            self.a, self.g, self.s, self.t = a, g, None, None
            return
        if a.is_floating_point() and self.scale_inputs:
            self.a, self.s = _scale(a)
        else:
            self.a, self.s = a, None
        self.g, self.t = _scale(g)

    @staticmethod
    def handles(module: nn.Module) -> bool:
        """Whether this kind's products hold for ``module`` as configured (a subclass refuses what they do not)."""
        return True

    @staticmethod
    def inputs(module: nn.Module, args: tuple, kwargs: dict):
        """What of a call the products read: its first argument (a kind that reads more returns a tuple), or None
        for a call they do not hold for (the route then falls back)."""
        return args[0]

    @staticmethod
    def of(
        module: nn.Module,
        calls: list[tuple[torch.Tensor, torch.Tensor]],
        trained: set[str],
        scaled: bool,
        shared: dict,
    ) -> Layer:
        """The layer's rows over its ``calls``; ``shared``: products the step's layers share (a Linear's Gram
        matrices of an input several layers read)."""
        cls = kind(module)
        rows = [cls.rows(module, a, g) for a, g in calls]
        if len(rows) == 1:
            layer = cls(module, *rows[0], trained, scaled)
        else:
            layer = cls(
                module,
                torch.cat([a for a, _ in rows], cls.axis),
                torch.cat([g for _, g in rows], cls.axis),
                trained,
                scaled,
            )
        layer.shared = shared
        return layer

    @staticmethod
    def rows(
        module: nn.Module, a: torch.Tensor, g: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One call's (a, g) as (b, rows, width): every position of an example is a row."""
        b = a.shape[0]
        return a.reshape(b, -1, a.shape[-1]), g.reshape(b, -1, g.shape[-1])

    def _weights(self, w: torch.Tensor, scale: torch.Tensor | None, finite: bool) -> torch.Tensor:
        """w_i·scale_i broadcast over g's trailing dims, in g's dtype. Unless every example is ``finite``, an example
        of weight 0 (non-finite) has its rows of a and g zeroed first, since 0·inf = nan."""
        if not finite and not self.zeroed:
            keep = w > 0
            self.g = torch.where(
                keep.reshape(-1, *[1] * (self.g.ndim - 1)), self.g, torch.zeros_like(self.g)
            )
            if self.a.is_floating_point():
                self.a = torch.where(
                    keep.reshape(-1, *[1] * (self.a.ndim - 1)), self.a, torch.zeros_like(self.a)
                )
            self.zeroed = True
        if (
            scale is None
        ):  # unscaled rows (exact in float64): w is 0 for a non-finite example already
            scaled = w
        else:
            scaled = w * scale if finite else torch.where(w > 0, w * scale, torch.zeros_like(scale))
        return scaled.to(self.g.dtype).reshape(-1, *[1] * (self.g.ndim - 1))


class _Linear(Layer):
    """Per example, ∇W_i = Σ_t g_it a_itᵀ and ∇b_i = Σ_t g_it. The squared weight norm by whichever costs less per
    example: ‖a‖²‖g‖² for one position; the ghost norm Σ_{t,s} (a_t·a_s)(g_t·g_s) from two (T, T) Gram matrices,
    T²·(in + out) multiplications, where that is below the T·in·out of the materialised (out, in) product. A Gram
    matrix of inputs is shared by the layers that read the same tensor (an attention's query, key and value)."""

    product = (
        "Σ_t g_t a_tᵀ, its norm by the ghost norm where that costs less"  # the docs' layer table
    )

    def __init__(self, module, a, g, trained, scaled) -> None:
        super().__init__(module, a, g, trained, scaled)
        self._g_sums = None

    def g_sums(self) -> torch.Tensor:
        """Σ_t g_it per example, (b, out): the bias's per-example gradient, formed once for its norm and its sum."""
        if self._g_sums is None:
            self._g_sums = self.g.sum(1)
        return self._g_sums

    def _gram(self, a: torch.Tensor) -> torch.Tensor:
        key = (a.data_ptr(), a.shape, a.stride())  # the same rows: the same (b, T, T) products
        if key not in self.shared:
            self.shared[key] = (
                a,
                torch.bmm(a, a.transpose(1, 2)),
            )  # a kept alive: its address stays its own
        return self.shared[key][1]

    def norms2(self) -> torch.Tensor:
        a, g = self.a, self.g
        T, d_in, d_out = a.shape[1], a.shape[2], g.shape[2]
        total = torch.zeros(a.shape[0], dtype=torch.float64, device=g.device)
        if "weight" in self.trained:
            if T == 1:  # ‖g aᵀ‖² = ‖a‖²‖g‖²
                hat = a.square().sum((1, 2)) * g.square().sum((1, 2))
            elif (
                T * (d_in + d_out) < d_in * d_out
            ):  # ghost norm: (B, T, T) Gram matrices, no (B, out, in) product
                hat = (self._gram(a) * torch.bmm(g, g.transpose(1, 2))).sum((1, 2))
            else:
                hat = (torch.bmm(g.transpose(1, 2), a) ** 2).sum((1, 2))
            total = total + _times(hat.to(torch.float64), _product(self.s, self.t), 2)
        if "bias" in self.trained:
            total = total + _times(self.g_sums().square().sum(-1).to(torch.float64), self.t, 2)
        return total

    def weighted_sums(self, w, finite):
        sums = {}
        if "weight" in self.trained:
            ws = self._weights(
                w, _product(self.s, self.t), finite
            )  # first: it zeroes a non-finite example's rows
            g, a = self.g, self.a
            if (
                a.shape[-1] < g.shape[-1]
            ):  # the weights onto the narrower rows: fewer multiplications
                a = a * ws.to(a.dtype)
            else:
                g = g * ws
            sums["weight"] = g.reshape(-1, g.shape[-1]).T @ a.reshape(
                -1, a.shape[-1]
            )  # Σ_{i,t} w_i g_it a_itᵀ
        if "bias" in self.trained:
            wt = self._weights(w, self.t, finite).reshape(1, -1)
            g_sums = (
                self.g_sums() if finite else self.g.sum(1)
            )  # rows of a non-finite example zeroed by _weights
            sums["bias"] = (wt @ g_sums).reshape(-1)
        return sums


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
    """EmbeddingBag on 2-D input (a bag per row), mode 'sum' or 'mean': each id of a bag gets the bag's output
    gradient times its weight c_t (1; 1/(ids in the bag but padding_idx) for 'mean'; the per_sample_weight), so
    Embedding's products hold over those rows. 1-D input with offsets is left to the vmap route."""

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
    """γ ⊙ x̂, x̂ = x / √(mean(x²) + eps): LayerNorm's products, x̂ the module's own normalisation, no bias."""

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
    """GroupNorm, InstanceNorm, and BatchNorm with its running statistics (eval mode): γ ⊙ x̂ + β per channel after
    a normalisation, so an example's gradients are LayerNorm's with the channels as the width and every position of
    every sample as a row (kept channels first, (b, C, rows), so that no copy is made). x̂ is the module's own
    normalisation: over each sample's group (GroupNorm), over each sample's positions (InstanceNorm from its input),
    or by the running statistics (fixed, not the batch's)."""

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


def _unfold(x, kernel, dilation, padding, stride) -> torch.Tensor:
    """im2col over 1, 2 or 3 spatial dimensions: (n, in·∏k, L), each column channel-major as the weight's
    (in, *k) entries are laid out (a 1-D convolution as a 2-D one of height 1; F.unfold takes only 2-D)."""
    dims = len(kernel)
    if dims == 1:
        x, kernel, dilation = x.unsqueeze(-2), (1, *kernel), (1, *dilation)
        padding, stride = (0, *padding), (1, *stride)
    if dims <= 2:
        return F.unfold(x, kernel, dilation=dilation, padding=padding, stride=stride)
    if any(padding):
        x = F.pad(x, [p for p in reversed(padding) for _ in (0, 1)])
    for d, (k, step, every) in enumerate(zip(kernel, stride, dilation)):
        # windows of the dilated extent, then every dilation-th entry: (n, in, *out, *k) after the last
        x = x.unfold(2 + d, every * (k - 1) + 1, step)[..., ::every]
    n, channels = x.shape[:2]
    return x.permute(0, 1, 5, 6, 7, 2, 3, 4).reshape(n, channels * math.prod(kernel), -1)


class _Conv(Layer):
    """Conv1d, Conv2d and Conv3d, every padding (a number, 'same', 'valid', any padding_mode), stride, dilation
    and groups: ∇W_i = g_i · unfold(a_i)ᵀ per group."""

    product = "g · unfold(a)ᵀ per group; any padding, padding_mode, stride, dilation"  # the docs' layer table

    axis = 2  # (b, ·, L): an example's k images and a layer's calls side by side along L

    @staticmethod
    def rows(module, a, g):
        """(b, in·∏k, k'·L) unfolded inputs and (b, out, k'·L) output gradients: an example's k' images side by
        side."""
        b, dims = a.shape[0], module.weight.ndim - 2  # 1, 2 or 3 spatial dimensions
        x = a.reshape(-1, *a.shape[a.ndim - dims - 1 :])  # (b·k', in, *spatial)
        padding = module.padding
        if isinstance(padding, str) or module.padding_mode != "zeros":
            # 'same' can pad one side more than the other, and reflect/replicate/circular pad with the input's own
            # entries: the input padded as the module's forward pads it, then unfolded without padding
            mode = "constant" if module.padding_mode == "zeros" else module.padding_mode
            x = F.pad(x, module._reversed_padding_repeated_twice, mode=mode)
            padding = (0,) * dims
        cols = _unfold(x, module.kernel_size, module.dilation, padding, module.stride)
        g = g.reshape(
            -1, g.shape[g.ndim - dims - 1], math.prod(g.shape[g.ndim - dims :])
        )  # (b·k', out, L)
        if cols.shape[0] == b:
            return cols, g
        return (
            cols.reshape(b, -1, *cols.shape[1:]).transpose(1, 2).flatten(2),
            g.reshape(b, -1, *g.shape[1:]).transpose(1, 2).flatten(2),
        )

    scale_inputs = False  # the unfolded inputs are large: scale the (B, out, in·k·k) gradients formed from them

    def __init__(self, module, a, g, trained, scaled):
        super().__init__(module, a, g, trained, scaled)
        self._grads = None
        if "weight" in trained:  # ∇W_i = t_i·ĝ_i a_iᵀ = t_i·s_i·(scaled), s_i its own peak
            n, groups, rows = self.g.shape[0], module.groups, self.g.shape[-1]
            # group j's outputs read only its inputs: one (out/G, in/G·∏k) product per group, stacked along the
            # outputs as the weight (out, in/G, *k) is
            grads = torch.bmm(
                self.g.reshape(n * groups, -1, rows),
                self.a.reshape(n * groups, -1, rows).transpose(1, 2),
            ).reshape(n, module.out_channels, -1)
            self._grads, self.s = (grads, None) if self.t is None else _scale(grads)

    def norms2(self):
        total = torch.zeros(self.g.shape[0], dtype=torch.float64, device=self.g.device)
        if "weight" in self.trained:
            total += _times(
                (self._grads**2).sum((1, 2)).to(torch.float64), _product(self.s, self.t), 2
            )
        if "bias" in self.trained:
            total += _times((self.g.sum(2) ** 2).sum(-1).to(torch.float64), self.t, 2)
        return total

    def weighted_sums(self, w, finite):
        sums = {}
        if "weight" in self.trained:
            grads = (
                self._grads
                if finite
                else torch.where(
                    (w > 0).reshape(-1, 1, 1), self._grads, torch.zeros_like(self._grads)
                )
            )
            ws = self._weights(w, _product(self.s, self.t), finite).reshape(-1)
            sums["weight"] = torch.einsum("b,boi->oi", ws, grads).reshape(self.module.weight.shape)
        if "bias" in self.trained:
            sums["bias"] = (self.g.sum(2) * self._weights(w, self.t, finite).reshape(-1, 1)).sum(0)
        return sums


KINDS: dict[type, type[Layer]] = {
    nn.Linear: _Linear,
    nn.Embedding: _Embedding,
    nn.EmbeddingBag: _EmbeddingBag,
    nn.LayerNorm: _LayerNorm,
    nn.Conv1d: _Conv,
    nn.Conv2d: _Conv,
    nn.Conv3d: _Conv,
    nn.RMSNorm: _RMSNorm,
    nn.MultiheadAttention: _InProjection,
    nn.GroupNorm: _ChannelNorm,
    nn.modules.instancenorm._InstanceNorm: _ChannelNorm,
    nn.modules.batchnorm._BatchNorm: _ChannelNorm,
}
SUPPORTED = tuple(KINDS)


def kind(module: nn.Module) -> type[Layer] | None:
    """The products that give ``module``'s per-example gradients, or None where none do."""
    cls = next((cls for base, cls in KINDS.items() if isinstance(module, base)), None)
    return cls if cls is not None and cls.handles(module) else None


# What a user must know beyond the type: the configurations a kind takes only in part
_CONDITIONS = {nn.modules.batchnorm._BatchNorm: "(eval mode, running statistics)"}


def layer_rows() -> list[tuple[str, str]]:
    """(layer name as :func:`layer_names` writes it, its per-example gradient in words), one per entry of
    :data:`KINDS`: the docs' layer table."""
    return list(zip(layer_names(), (cls.product for cls in KINDS.values())))


def layer_names() -> list[str]:
    """The layer types of :data:`KINDS` as a user writes them, each with its condition where it has one
    ("BatchNorm*d (eval mode, ...)"): the refusals and the docs table are generated from it, so they list what
    the route takes."""
    names = []
    for base in KINDS:
        name = base.__name__
        if name.startswith("_"):  # a private base class: every one of its 1d, 2d, 3d layers
            name = name[1:] + "*d"
        names.append(f"{name} {_CONDITIONS[base]}" if base in _CONDITIONS else name)
    return names
