"""Per-example clipped gradient sums from each layer's activations and output gradients (no per-example copies).

For a layer whose parameters enter as ``out = f(a; θ)`` with a per-example gradient that is a product of the
layer's input ``a_i`` and its output gradient ``g_i = ∂ℓ_i/∂out_i``, one forward and one backward of the whole
batch give every example's gradient norm and, once the clip factors are known, the clipped sum (the
"book-keeping" route of Bu et al. 2023; ghost clipping, Li et al. 2022, for the norms of sequence inputs):

* ``nn.Linear``: ∇W_i = Σ_t g_{i,t} a_{i,t}ᵀ. Its squared norm is ‖a_i‖²‖g_i‖² for one position, else
  Σ_{t,s} (a_t·a_s)(g_t·g_s) (the ghost norm, when T·(in + out) < in·out) or the norm of the materialised
  (out, in) product; ∇b_i = Σ_t g_{i,t}.
* ``nn.Embedding``: ∇E_i = Σ_t e_{id_t} g_{i,t}ᵀ, squared norm Σ_{t,s} [id_t = id_s] g_t·g_s.
* ``nn.LayerNorm``: ∇γ_i = Σ_t g_{i,t} ⊙ x̂_{i,t}, ∇β_i = Σ_t g_{i,t} (x̂ the normalised input).
* ``nn.Conv2d``, ``nn.Conv1d``: ∇W_i = g_i · unfold(a_i)ᵀ, materialised per example (small kernels).
* ``nn.GroupNorm``, ``nn.InstanceNorm*d``, ``nn.BatchNorm*d`` with running statistics (eval mode): LayerNorm's
  products per channel, x̂ the module's own normalisation.

Then w_i = min(1, C/‖∇ℓ_i‖) over all parameters (:func:`~dpnc.privacy.clipping.clip_weights`), an example with
a non-finite norm gets w_i = 0 (counted, as :func:`~dpnc.privacy.clipping.clipped_sum` zeroes it), and the
clipped sum Σ_i w_i ∇ℓ_i is formed layer by layer from ``w·g`` and ``a``.

Per example by construction. The losses are ``torch.func.vmap`` of ``loss_fn`` over the examples, each alone (a
batch of one): whatever ``loss_fn`` and the model compute, ℓ_i is a function of example i, so g_i is example i's own
output gradient (a loss that "centres over the batch" centres over one example). The layers' inputs and outputs are
read beneath vmap, where torch runs the whole batch as one tensor, so the route keeps the speed of one batched
forward and backward. Every trainable parameter must belong to a supported layer whose rows belong to the examples
(several rows per example, e.g. positions or K label prompts, or several calls in one forward, are summed; a layer
run on rows shared by every example, as BERT's (1, L) position ids, gets a copy per example); a forward vmap cannot
batch makes :func:`layer_clipped_sum` return None and the caller uses ``torch.func``'s per-example gradients. The
norms are overflow-safe: where a norm overflows, each example's rows are scaled by their largest entry, so one
extreme row changes nothing but its own weight.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from dpnc.batches import batch_rows, one_example
from dpnc.privacy.clipping import clip_weights


def supported(
    model: nn.Module, params: dict[str, torch.Tensor]
) -> dict[nn.Module, dict[str, str]] | None:
    """The layers owning ``params`` (name → tensor of ``model.named_parameters``), each with its local → full
    parameter names, or None where a parameter belongs to a layer this route cannot handle."""
    owners: dict[nn.Module, dict[str, str]] = {}
    wanted = {id(p): name for name, p in params.items()}
    trained = set(wanted)
    seen: set[int] = set()
    for module in model.modules():
        for local, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                if id(p) in trained:
                    return None  # tied weights: one parameter in two layers, its gradient is not one product
                continue  # a frozen tied weight (a causal LM's embeddings and output layer under LoRA): no gradient
            seen.add(id(p))
            if id(p) not in wanted:
                continue
            if _kind(module) is None:
                return None
            owners.setdefault(module, {})[local] = wanted.pop(id(p))
    return owners if not wanted else None  # a parameter outside the model: unsupported


def layer_clipped_sum(
    model: nn.Module,
    loss_fn: Callable[..., torch.Tensor],
    inputs: tuple,
    params: dict[str, torch.Tensor],
    C: float,
):
    """Σ_i clip_C(∇_θ ℓ_i) over the batch by the per-layer route: the fields of a
    :class:`~dpnc.tier.first_order.ClippedSum` (the flat sum in ``params``' order, the per-example losses, how many
    were clipped, how many non-finite), or None where a parameter's layer is unsupported, or runs on rows that
    are not one per example (a row shared by every example, as BERT's (1, L) position ids), or vmap cannot run
    the forward (a layer without a batching rule).

    The losses are ``vmap`` of ``loss_fn`` over the examples, each alone (:func:`dpnc.batches.one_example`), so
    ℓ_i is a function of example i by construction, whatever ``loss_fn`` and the model compute; the layers'
    inputs and outputs are read beneath vmap, where torch runs the batch as one tensor.
    """
    from torch.func import vmap

    owners = supported(model, params)
    if owners is None:
        return None
    records: dict[nn.Module, list] = {m: [] for m in owners}

    b = batch_rows(inputs)

    def keep(module, args, output):
        a, out = _beneath_vmap(args[0]), _beneath_vmap(output)
        if a is None and out is None:  # a row shared by every example (BERT's (1, L) position ids)
            shared = _per_example_copies(args[0], output, b)
            if (
                shared is not None
            ):  # each example gets its own copy, so the gradient into it is that example's
                records[module].append(shared[:2])
                return shared[2]
        records[module].append((a, out))

    handles = [m.register_forward_hook(keep) for m in owners]
    try:
        losses = vmap(one_example(loss_fn), randomness="different")(*inputs)
    except (
        RuntimeError
    ):  # no batching rule for some layer: the caller's vmap route says so, or takes the loop
        return None
    finally:
        for h in handles:
            h.remove()
    if any(not r or any(a is None or out is None for a, out in r) for r in records.values()):
        return None  # a layer unused, or run on rows shared by the examples: not one product per example
    layers = list(owners)
    outputs = [out for m in layers for _, out in records[m]]
    flat = iter(torch.autograd.grad(losses.sum(), outputs, allow_unused=True))
    grads = {m: [next(flat) for _ in records[m]] for m in layers}  # each layer's calls, in order
    calls = {
        m: [
            (a, torch.zeros_like(out) if g is None else g.detach())
            for (a, out), g in zip(records[m], grads[m])
        ]
        for m in layers
    }
    grams: dict = {}  # one per pass, shared by every layer of it: the Gram matrix of an input several layers read
    parts = [_Layer.of(m, calls[m], set(owners[m]), scaled=False, shared=grams) for m in layers]
    norms = sum(part.norms2() for part in parts).sqrt()
    if not bool(torch.isfinite(norms).all()):
        # An overflow in the rows' own dtype (x = 1e20 in float32: a squared norm of 1e40), or a non-finite example:
        # rows scaled per example by their largest entries tell the two apart (vmap's gradient of the first is finite).
        grams = {}
        parts = [_Layer.of(m, calls[m], set(owners[m]), scaled=True, shared=grams) for m in layers]
        norms = sum(part.norms2() for part in parts).sqrt()
    finite = torch.isfinite(norms)
    all_finite = bool(finite.all())
    if all_finite:  # the common case, in fewer ops
        w, over = clip_weights(norms, C)
        clipped, nonfinite = int(over.sum()), 0
    else:  # a non-finite example's gradient is zeroed and counted, as clipped_sum does
        w, over = clip_weights(torch.where(finite, norms, torch.zeros_like(norms)), C)
        w = torch.where(finite, w, torch.zeros_like(w))
        clipped, nonfinite = int((over & finite).sum()), int((~finite).sum())
    sums: dict[str, torch.Tensor] = {}
    for m, part in zip(layers, parts):
        for local, s in part.weighted_sums(w, all_finite).items():
            sums[owners[m][local]] = s
    first = next(iter(params.values()))
    total = torch.cat([sums[name].reshape(-1).to(first.dtype) for name in params])
    return total, losses.detach(), clipped, nonfinite


def _beneath_vmap(t) -> torch.Tensor | None:
    """The tensor torch computes beneath one level of vmap, batch dimension first: (b, *one example's shape); None
    for a tensor vmap did not batch (the same for every example) or one inside a further vmap of the caller's."""
    from torch._C._functorch import get_unwrapped, is_batchedtensor, maybe_get_bdim

    if not isinstance(t, torch.Tensor) or not is_batchedtensor(t):
        return None
    bdim, inner = maybe_get_bdim(t), get_unwrapped(t)
    if is_batchedtensor(inner):
        return None
    return inner if bdim == 0 else inner.movedim(bdim, 0)


def _per_example_copies(a, output, b: int):
    """For a layer run once on inputs shared by every example (unbatched beneath the route's vmap): its input and
    output expanded to one copy per example, (b, ...), and the output as a batched tensor of this vmap level to
    return in their place, so that each example's output gradient flows into its own copy; None where this is
    not the route's own level (a further vmap of the caller's)."""
    from torch._C._functorch import _add_batch_dim, is_batchedtensor, maybe_current_level

    level = maybe_current_level()
    if level is None or not all(
        isinstance(t, torch.Tensor) and not is_batchedtensor(t) for t in (a, output)
    ):
        return None
    copies = output.unsqueeze(0).expand(b, *output.shape)
    return a.unsqueeze(0).expand(b, *a.shape), copies, _add_batch_dim(copies, 0, level)


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


class _Layer:
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
    def of(
        module: nn.Module,
        calls: list[tuple[torch.Tensor, torch.Tensor]],
        trained: set[str],
        scaled: bool,
        shared: dict,
    ) -> _Layer:
        """The layer's rows over its ``calls``; ``shared``: products the step's layers share (a Linear's Gram
        matrices of an input several layers read)."""
        cls = _kind(module)
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


class _Linear(_Layer):
    """Per example, ∇W_i = Σ_t g_it a_itᵀ and ∇b_i = Σ_t g_it. The squared weight norm by whichever costs less per
    example: ‖a‖²‖g‖² for one position; the ghost norm Σ_{t,s} (a_t·a_s)(g_t·g_s) from two (T, T) Gram matrices,
    T²·(in + out) multiplications, where that is below the T·in·out of the materialised (out, in) product. A Gram
    matrix of inputs is shared by the layers that read the same tensor (an attention's query, key and value)."""

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


class _Embedding(_Layer):
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


class _LayerNorm(_Layer):
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
        shape = next(p for p in (self.module.weight, self.module.bias) if p is not None).shape
        ws = self._weights(w, _product(self.s, self.t), finite).reshape(-1, 1)
        wt = self._weights(w, self.t, finite).reshape(-1, 1)
        return {
            k: (v * (ws if k == "weight" else wt)).sum(0).reshape(shape)
            for k, v in self._per_example().items()
        }


class _ChannelNorm(_LayerNorm):
    """GroupNorm, InstanceNorm, and BatchNorm with its running statistics (eval mode): γ ⊙ x̂ + β per channel after
    a normalisation, so an example's gradients are LayerNorm's with the channels as the width and every position of
    every sample as a row (kept channels first, (b, C, rows), so that no copy is made). x̂ is the module's own
    normalisation: over each sample's group (GroupNorm), over each sample's positions (InstanceNorm from its input),
    or by the running statistics (fixed, not the batch's)."""

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


class _Conv(_Layer):
    """Conv1d and Conv2d (a 1-D convolution as a 2-D one of height 1)."""

    axis = 2  # (b, ·, L): an example's k images and a layer's calls side by side along L

    @staticmethod
    def handles(module):
        return (
            module.groups == 1
            and module.padding_mode == "zeros"
            and not isinstance(module.padding, str)
        )

    @staticmethod
    def rows(module, a, g):
        """(b, in·k·k, k'·L) unfolded inputs and (b, out, k'·L) output gradients: an example's k' images side by
        side."""
        b, dims = a.shape[0], module.weight.ndim - 2  # 1 or 2 spatial dimensions
        x = a.reshape(-1, *a.shape[a.ndim - dims - 1 :])  # (b·k', in, *spatial)
        kernel, dilation, padding, stride = (
            module.kernel_size,
            module.dilation,
            module.padding,
            module.stride,
        )
        if dims == 1:  # height 1
            x = x.unsqueeze(-2)
            kernel, dilation, padding, stride = (
                (1, *kernel),
                (1, *dilation),
                (0, *padding),
                (1, *stride),
            )
        cols = F.unfold(
            x, kernel, dilation=dilation, padding=padding, stride=stride
        )  # (b·k', in·k·k, L)
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
            grads = torch.bmm(self.g, self.a.transpose(1, 2))
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


KINDS: dict[type, type[_Layer]] = {
    nn.Linear: _Linear,
    nn.Embedding: _Embedding,
    nn.LayerNorm: _LayerNorm,
    nn.Conv1d: _Conv,
    nn.Conv2d: _Conv,
    nn.GroupNorm: _ChannelNorm,
    nn.modules.instancenorm._InstanceNorm: _ChannelNorm,
    nn.modules.batchnorm._BatchNorm: _ChannelNorm,
}
SUPPORTED = tuple(KINDS)


def _kind(module: nn.Module) -> type[_Layer] | None:
    """The products that give ``module``'s per-example gradients, or None where none do."""
    cls = next((cls for base, cls in KINDS.items() if isinstance(module, base)), None)
    return cls if cls is not None and cls.handles(module) else None
