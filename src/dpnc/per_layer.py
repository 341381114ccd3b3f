"""Per-example clipped gradient sums from each layer's activations and output gradients (no per-example copies).

For a layer whose parameters enter as ``out = f(a; θ)`` with a per-example gradient that is a product of the
layer's input ``a_i`` and its output gradient ``g_i = ∂ℓ_i/∂out_i``, one forward and one backward of the whole
batch give every example's gradient norm and, once the clip factors are known, the clipped sum (the
"book-keeping" route of Bu et al. 2023; ghost clipping, Li et al. 2022, for the norms of sequence inputs):

* ``nn.Linear``: ∇W_i = Σ_t g_{i,t} a_{i,t}ᵀ. Its squared norm is ‖a_i‖²‖g_i‖² for one position, else
  Σ_{t,s} (a_t·a_s)(g_t·g_s) (the ghost norm, when T² < in·out) or the norm of the materialised (out, in)
  product; ∇b_i = Σ_t g_{i,t}.
* ``nn.Embedding``: ∇E_i = Σ_t e_{id_t} g_{i,t}ᵀ, squared norm Σ_{t,s} [id_t = id_s] g_t·g_s.
* ``nn.LayerNorm``: ∇γ_i = Σ_t g_{i,t} ⊙ x̂_{i,t}, ∇β_i = Σ_t g_{i,t} (x̂ the normalised input).
* ``nn.Conv2d``: ∇W_i = g_i · unfold(a_i)ᵀ, materialised per example (small kernels).

Then w_i = min(1, C/‖∇ℓ_i‖) over all parameters (:func:`~dpnc.privacy.clipping.clip_weights`), an example with
a non-finite norm gets w_i = 0 (counted, as :func:`~dpnc.privacy.clipping.clipped_sum` zeroes it), and the
clipped sum Σ_i w_i ∇ℓ_i is formed layer by layer from ``w·g`` and ``a``.

What this route assumes, and :class:`~dpnc.first_order.DPOptimizer` checks: ``loss_fn`` and the model treat the
examples of a batch independently (ℓ_i depends on example i alone), so that g_i is example i's own output
gradient. The ``torch.func`` route makes that hold by construction (one example per call); this route runs the
batch at once, so the optimizer compares the two on its first batch and refuses a loss that mixes examples.
Every trainable parameter must belong to a supported layer used once per forward, on one row per example (leading
dimension b: BERT's position embeddings need batch-shaped ``position_ids``); otherwise :func:`layer_clipped_sum`
returns None and the caller uses ``torch.func``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from dpnc.batches import batch_rows
from dpnc.privacy.clipping import clip_weights

SUPPORTED = (nn.Linear, nn.Embedding, nn.LayerNorm, nn.Conv2d)


def supported(model: nn.Module, params: dict[str, torch.Tensor]) -> dict[nn.Module, dict[str, str]] | None:
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
                    return None   # tied weights: one parameter in two layers, its gradient is not one product
                continue   # a frozen tied weight (a causal LM's embeddings and output layer under LoRA): no gradient
            seen.add(id(p))
            if id(p) not in wanted:
                continue
            if not isinstance(module, SUPPORTED) or (isinstance(module, nn.Conv2d) and
                                                     (module.groups != 1 or module.padding_mode != "zeros"
                                                      or isinstance(module.padding, str))):
                return None
            owners.setdefault(module, {})[local] = wanted.pop(id(p))
    return owners if not wanted else None   # a parameter outside the model: unsupported


def layer_clipped_sum(model: nn.Module, loss_fn: Callable[..., torch.Tensor], inputs: tuple,
                      params: dict[str, torch.Tensor], C: float):
    """Σ_i clip_C(∇_θ ℓ_i) over the batch by the per-layer route: the fields of a
    :class:`~dpnc.first_order.ClippedSum` (the flat sum in ``params``' order, the per-example losses, how many
    were clipped, how many non-finite), or None where a parameter's layer is unsupported or a layer runs twice."""
    owners = supported(model, params)
    if owners is None:
        return None
    records: dict[nn.Module, list] = {m: [] for m in owners}

    def keep(module, args, output):
        records[module].append((args[0].detach(), output))

    handles = [m.register_forward_hook(keep) for m in owners]
    try:
        losses = loss_fn(*inputs)
    finally:
        for h in handles:
            h.remove()
    b = batch_rows(inputs)
    if not isinstance(losses, torch.Tensor) or tuple(losses.shape) != (b,):
        got = tuple(losses.shape) if isinstance(losses, torch.Tensor) else type(losses).__name__
        raise ValueError(f"loss_fn must return the per-example losses of the batch, shape ({b},); got {got}")
    if any(len(r) != 1 for r in records.values()):
        return None   # a layer unused or used twice per forward: its per-example gradient is not one product
    if any(a.shape[:1] != (b,) or out.shape[:1] != (b,) for (a, out), in records.values()):
        return None   # a layer run on rows that are not the batch's examples (BERT's (1, L) position ids, shared
        # by every example; b·K prompt rows): its rows are not one per example
    layers = list(owners)
    outputs = [records[m][0][1] for m in layers]
    grads = torch.autograd.grad(losses.sum(), outputs, allow_unused=True)
    parts = [_Layer.of(m, records[m][0][0], torch.zeros_like(out) if g is None else g.detach(), set(owners[m]))
             for m, out, g in zip(layers, outputs, grads)]
    norms2 = torch.zeros(b, dtype=torch.float64, device=losses.device)
    for part in parts:
        norms2 += part.norms2().to(torch.float64)
    norms = norms2.sqrt()
    finite = torch.isfinite(norms)
    w, over = clip_weights(torch.where(finite, norms, torch.zeros_like(norms)), C)
    w = torch.where(finite, w, torch.zeros_like(w))
    sums: dict[str, torch.Tensor] = {}
    for m, part in zip(layers, parts):
        for local, s in part.weighted_sums(w).items():
            sums[owners[m][local]] = s
    first = next(iter(params.values()))
    total = torch.cat([sums[name].reshape(-1).to(first.dtype) for name in params])
    return total, losses.detach(), int((over & finite).sum()), int((~finite).sum())


class _Layer:
    """One layer's input activations ``a`` and output gradients ``g`` for a batch: the per-example squared
    gradient norms and the weighted sums Σ_i w_i ∇θ_i of its ``trained`` parameters (local names; a frozen
    weight beside a trained bias, as in BitFit, counts for nothing)."""

    def __init__(self, module: nn.Module, a: torch.Tensor, g: torch.Tensor, trained: set[str]) -> None:
        self.module, self.a, self.g, self.trained = module, a, g, trained

    @staticmethod
    def of(module: nn.Module, a: torch.Tensor, g: torch.Tensor, trained: set[str]) -> _Layer:
        kind = {nn.Linear: _Linear, nn.Embedding: _Embedding, nn.LayerNorm: _LayerNorm, nn.Conv2d: _Conv2d}
        return next(cls for base, cls in kind.items() if isinstance(module, base))(module, a, g, trained)

    def _zero_nonfinite(self, w: torch.Tensor) -> torch.Tensor:
        """w broadcast over g's trailing dims; the rows of a and g of a zero-weight (non-finite) example are
        zeroed first, since 0·inf = nan (skipped when every example is finite: w > 0)."""
        keep = w > 0
        if not bool(keep.all()):
            keep = keep.reshape(-1, *[1] * (self.g.ndim - 1))
            self.g = torch.where(keep, self.g, torch.zeros_like(self.g))
            if self.a.is_floating_point():
                self.a = torch.where(keep.reshape(-1, *[1] * (self.a.ndim - 1)), self.a, torch.zeros_like(self.a))
        return w.to(self.g.dtype).reshape(-1, *[1] * (self.g.ndim - 1))


class _Linear(_Layer):
    def __init__(self, module, a, g, trained):
        b = a.shape[0]
        super().__init__(module, a.reshape(b, -1, a.shape[-1]), g.reshape(b, -1, g.shape[-1]), trained)

    def norms2(self) -> torch.Tensor:
        a, g = self.a, self.g
        T, d_in, d_out = a.shape[1], a.shape[2], g.shape[2]
        total = torch.zeros(a.shape[0], dtype=g.dtype, device=g.device)
        if "weight" in self.trained:
            if T == 1:
                total += (a.squeeze(1) ** 2).sum(-1) * (g.squeeze(1) ** 2).sum(-1)
            elif T * T < d_in * d_out:   # ghost norm: (B, T, T) Gram matrices instead of (B, out, in) gradients
                total += (torch.bmm(a, a.transpose(1, 2)) * torch.bmm(g, g.transpose(1, 2))).sum((1, 2))
            else:
                total += (torch.bmm(g.transpose(1, 2), a) ** 2).sum((1, 2))
        if "bias" in self.trained:
            total += (g.sum(1) ** 2).sum(-1)
        return total

    def weighted_sums(self, w):
        w = self._zero_nonfinite(w)   # first: it zeroes the rows of g and a of a non-finite example
        wg = self.g * w
        sums = {"weight": torch.einsum("bto,bti->oi", wg, self.a)} if "weight" in self.trained else {}
        if "bias" in self.trained:
            sums["bias"] = wg.sum((0, 1))
        return sums


class _Embedding(_Layer):
    def __init__(self, module, a, g, trained):
        b = a.shape[0]
        ids, g = a.reshape(b, -1), g.reshape(b, -1, g.shape[-1])
        if module.padding_idx is not None:   # the padding row gets no gradient: its positions count for nothing
            g = torch.where((ids == module.padding_idx).unsqueeze(-1), torch.zeros_like(g), g)
        super().__init__(module, ids, g, trained)

    def norms2(self):
        same = (self.a.unsqueeze(2) == self.a.unsqueeze(1)).to(self.g.dtype)
        return (same * torch.bmm(self.g, self.g.transpose(1, 2))).sum((1, 2))

    def weighted_sums(self, w):
        w = self._zero_nonfinite(w)
        wg = (self.g * w).reshape(-1, self.g.shape[-1])
        weight = torch.zeros_like(self.module.weight)
        return {"weight": weight.index_add_(0, self.a.reshape(-1), wg.to(weight.dtype))}


class _LayerNorm(_Layer):
    def __init__(self, module, a, g, trained):
        b, shape = a.shape[0], module.normalized_shape
        normed = F.layer_norm(a, shape, eps=module.eps)
        width = int(torch.Size(shape).numel())
        super().__init__(module, normed.reshape(b, -1, width), g.reshape(b, -1, width), trained)

    def _per_example(self):
        out = {}
        if "weight" in self.trained:
            out["weight"] = (self.g * self.a).sum(1)
        if "bias" in self.trained:
            out["bias"] = self.g.sum(1)
        return out

    def norms2(self):
        return sum((v**2).sum(-1) for v in self._per_example().values())

    def weighted_sums(self, w):
        w = self._zero_nonfinite(w).reshape(-1, 1)
        shape = self.module.normalized_shape
        return {k: (v * w).sum(0).reshape(shape) for k, v in self._per_example().items()}


class _Conv2d(_Layer):
    def __init__(self, module, a, g, trained):
        cols = F.unfold(a, module.kernel_size, dilation=module.dilation, padding=module.padding,
                        stride=module.stride)                                       # (B, in·k·k, L)
        super().__init__(module, cols, g.reshape(g.shape[0], g.shape[1], -1), trained)   # g: (B, out, L)
        self._grads = torch.bmm(self.g, self.a.transpose(1, 2)) if "weight" in trained else None   # (B, out, in·k·k)

    def norms2(self):
        total = torch.zeros(self.g.shape[0], dtype=self.g.dtype, device=self.g.device)
        if "weight" in self.trained:
            total += (self._grads ** 2).sum((1, 2))
        if "bias" in self.trained:
            total += (self.g.sum(2) ** 2).sum(-1)
        return total

    def weighted_sums(self, w):
        keep = (w > 0).reshape(-1, 1, 1)
        zero = not bool(keep.all())
        w = w.to(self.g.dtype)
        sums = {}
        if "weight" in self.trained:
            grads = torch.where(keep, self._grads, torch.zeros_like(self._grads)) if zero else self._grads
            sums["weight"] = torch.einsum("b,boi->oi", w, grads).reshape(self.module.weight.shape)
        if "bias" in self.trained:
            g = torch.where(keep, self.g, torch.zeros_like(self.g)) if zero else self.g
            sums["bias"] = (g.sum(2) * w.reshape(-1, 1)).sum(0)
        return sums
