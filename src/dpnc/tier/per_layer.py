"""Per-example clipped gradient sums from each layer's activations and output gradients (no
per-example copies).

The fastest first-order route: one batched forward and backward give every example's gradient norm
and clipped sum, for the layer kinds of :mod:`dpnc.tier.layer_kinds`. See docs/layers.md."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from dpnc.batches import batch_rows, one_example
from dpnc.privacy.clipping import clip_weights
from dpnc.tier.attention import place, recording, watched
from dpnc.tier.layer_kinds import KINDS, SUPPORTED, kind
from dpnc.tier.recurrent import held, unrolled

__all__ = ["KINDS", "SUPPORTED", "layer_clipped_sum", "supported"]


def supported(
    model: nn.Module, params: dict[str, torch.Tensor]
) -> dict[nn.Module, dict[str, str]] | None:
    """The layers owning ``params`` (name → tensor of ``model.named_parameters``), each with its
    local → full parameter names, or None where a parameter belongs to a layer this route cannot
    handle."""
    owners: dict[nn.Module, dict[str, str]] = {}
    wanted = {id(p): name for name, p in params.items()}
    trained = set(wanted)
    seen: set[int] = set()
    for module in model.modules():
        for holder, local, p in held(module):  # a recurrent layer's weights: its Linear parts
            if id(p) in seen:
                if id(p) in trained:
                    # tied weights: one parameter in two layers, its gradient is not one product
                    return None
                # a frozen tied weight (a causal LM's embeddings and output layer under LoRA): no gradient
                continue
            seen.add(id(p))
            if id(p) not in wanted:
                continue
            if kind(holder) is None:
                return None
            owners.setdefault(holder, {})[local] = wanted.pop(id(p))
    return owners if not wanted else None  # a parameter outside the model: unsupported


def layer_clipped_sum(
    model: nn.Module,
    loss_fn: Callable[..., torch.Tensor],
    inputs: tuple,
    params: dict[str, torch.Tensor],
    C: float,
):
    """Σ_i clip_C(∇_θ ℓ_i) over the batch by the per-layer route: the fields of a
    :class:`~dpnc.tier.first_order.ClippedSum` (the flat sum in ``params``' order, the per-example
    losses, how many were clipped, how many non-finite), or None where a parameter's layer is
    unsupported or vmap cannot run the forward (a layer without a batching rule): the caller then
    uses ``torch.func``'s per-example gradients.

    The losses are ``vmap`` of ``loss_fn`` over the examples, each alone
    (:func:`dpnc.batches.one_example`), so ℓ_i is a function of example i by construction, whatever
    ``loss_fn`` and the model compute (a loss that "centres over the batch" centres over one
    example); the layers' inputs and outputs are read beneath vmap, where torch runs the batch as
    one tensor. Every trainable parameter must belong to a supported layer whose rows belong to the
    examples: several rows per example (positions, K label prompts) or several calls in one forward
    are summed, and a layer run on rows shared by every example (BERT's (1, L) position ids) gets a
    copy per example. Then w_i = min(1, C/‖∇ℓ_i‖) over all parameters
    (:func:`~dpnc.privacy.clipping.clip_weights`), an example with a non-finite norm gets w_i = 0
    (counted), and Σ_i w_i ∇ℓ_i is formed layer by layer from ``w·g`` and ``a``. Where a norm
    overflows, each example's rows are scaled by their largest entry, so one extreme row changes
    nothing but its own weight."""
    from torch.func import vmap

    owners = supported(model, params)
    if owners is None:
        return None
    records: dict[nn.Module, list] = {m: [] for m in owners}

    b = batch_rows(inputs)

    def keep(module, args, kwargs, output):
        read = kind(module).inputs(module, args, kwargs)
        if read is None:  # a call the kind's products do not hold for: the route falls back
            records[module].append((None, None, None))
            return None
        if isinstance(read, tuple):
            # several inputs (EmbeddingBag's ids and weights), each of them per example
            rows = tuple(None if t is None else _beneath_vmap(t) for t in read)
            whole = all((t is None) == (r is None) for t, r in zip(read, rows))
            records[module].append((rows if whole else None, _beneath_vmap(output), None))
            return None
        a, out = _beneath_vmap(read), _beneath_vmap(output)
        if a is None and out is None:  # a row shared by every example (BERT's (1, L) position ids)
            shared = _per_example_copies(read, output, b)
            if (
                shared is not None
            ):  # each example gets its own copy, so the gradient into it is that example's
                records[module].append((*shared[:2], None))
                return shared[2]
        records[module].append((a, out, None))
        return None

    def linear_call(module, a, out, rows):  # an attention's projection, a recurrent layer's weight
        records[module].append((_beneath_vmap(a), _beneath_vmap(out), rows))

    weights = watched(model, owners)
    by_linear = {module for module, _ in weights.values()}
    handles = [
        m.register_forward_hook(keep, with_kwargs=True) for m in owners if m not in by_linear
    ]
    try:
        with recording(weights, linear_call), unrolled(model, owners, linear_call):
            losses = vmap(one_example(loss_fn), randomness="different")(*inputs)
    except (
        RuntimeError
    ):  # no batching rule for some layer: the caller's vmap route says so, or takes the loop
        return None
    finally:
        for h in handles:
            h.remove()
    if any(not r or any(a is None or out is None for a, out, _ in r) for r in records.values()):
        # a layer unused, or run on rows shared by the examples: not one product per example
        return None
    layers = list(owners)
    outputs = [out for m in layers for _, out, _ in records[m]]
    flat = iter(torch.autograd.grad(losses.sum(), outputs, allow_unused=True))
    grads = {m: [next(flat) for _ in records[m]] for m in layers}  # each layer's calls, in order
    # the rows as values: the sums formed from them are statistics, not a graph back into the model
    calls = {
        m: [
            (_detached(a), place(torch.zeros_like(out) if g is None else g.detach(), rows))
            for (a, out, rows), g in zip(records[m], grads[m])
        ]
        for m in layers
    }
    # one per pass, shared by every layer of it: the Gram matrix of an input several layers read
    grams: dict = {}
    parts = [kind(m).of(m, calls[m], set(owners[m]), scaled=False, shared=grams) for m in layers]
    norms = sum(part.norms2() for part in parts).sqrt()
    if not bool(torch.isfinite(norms).all()):
        # An overflow in the rows' own dtype (x = 1e20 in float32: a squared norm of 1e40), or a
        # non-finite example: rows scaled per example by their largest entries tell the two apart
        # (vmap's gradient of the first is finite).
        grams = {}
        parts = [kind(m).of(m, calls[m], set(owners[m]), scaled=True, shared=grams) for m in layers]
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


def _detached(a):
    """A call's input rows as values (each of several)."""
    if isinstance(a, tuple):
        return tuple(None if t is None else t.detach() for t in a)
    return a.detach()


def _beneath_vmap(t) -> torch.Tensor | None:
    """The tensor torch computes beneath one level of vmap, batch dimension first: (b, *one
    example's shape); None for a tensor vmap did not batch (the same for every example) or one
    inside a further vmap of the caller's."""
    from torch._C._functorch import get_unwrapped, is_batchedtensor, maybe_get_bdim

    if not isinstance(t, torch.Tensor) or not is_batchedtensor(t):
        return None
    bdim, inner = maybe_get_bdim(t), get_unwrapped(t)
    if is_batchedtensor(inner):
        return None
    return inner if bdim == 0 else inner.movedim(bdim, 0)


def _per_example_copies(a, output, b: int):
    """For a layer run once on inputs shared by every example (unbatched beneath the route's vmap):
    its input and output expanded to one copy per example, (b, ...), and the output as a batched
    tensor of this vmap level to return in their place, so that each example's output gradient flows
    into its own copy; None where this is not the route's own level (a further vmap of the
    caller's)."""
    from torch._C._functorch import _add_batch_dim, is_batchedtensor, maybe_current_level

    level = maybe_current_level()
    if level is None or not all(
        isinstance(t, torch.Tensor) and not is_batchedtensor(t) for t in (a, output)
    ):
        return None
    copies = output.unsqueeze(0).expand(b, *output.shape)
    return a.unsqueeze(0).expand(b, *a.shape), copies, _add_batch_dim(copies, 0, level)
