"""First-order DP for models: :class:`DPOptimizer` wraps any ``torch.optim`` optimizer (DP-SGD,
DP-AdamW).

It clips each example's gradient and makes one noisy release per step, so any torch optimizer's
update becomes private. The routes and why the step takes ``loss_fn``: docs/layers.md; the
refusals and what a step charges: docs/privacy.md."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn

from dpnc.batches import (
    LoaderBatches,
    batch_rows,
    check_loss_arity,
    check_loss_fn,
    map_leaves,
    mappable,
    one_example,
)
from dpnc.options import PER_EXAMPLE  # the routes' names, one home with the options' choices
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.clipping import clipped_sum
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.release import mean_release, release_sum
from dpnc.privacy.releases import Release
from dpnc.tier import per_layer
from dpnc.tier.base import (
    PrivateStats,
    StepHooks,
    StepInfo,
    check_arguments,
    raise_after_release,
    require_ready,
    step_randomness,
    validate_model,
)
from dpnc.tier.layer_kinds import layer_names
from dpnc.tier.model_state import ModelStateChanged, ModuleNotReady, StateGuard

_LAYER_NOT_ONCE = (
    "per_example='layers': a trained parameter is not in a supported layer ("
    + ", ".join(layer_names())
    + "; not tied), or a trained layer did not run, or vmap could not run the forward, "
    "so the per-example gradients are not products of per-example rows; use per_example='vmap' (or "
    "'auto', which then keeps to vmap)"
)


class ClippedSum(NamedTuple):
    """Σ_i clip_C(∇ℓ_i) over a batch as one flat vector, with the per-example losses and what
    clipping did.

    All of it is a statistic of the private batch: only :func:`release_sum` of ``total`` may be
    published."""

    total: torch.Tensor
    losses: torch.Tensor
    clipped: int
    nonfinite: int


class _Bound(nn.Module):
    """``loss_fn`` as a module whose only child is ``model``, so ``functional_call`` swaps the
    model's parameters."""

    def __init__(self, model: nn.Module, loss_fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.model = model
        object.__setattr__(
            self, "_loss_fn", loss_fn
        )  # not registered, even when it is the model itself

    def forward(self, *inputs: Any) -> torch.Tensor:
        return self._loss_fn(*inputs)


def clipped_gradient_sum(
    model: nn.Module,
    loss_fn: Callable[..., torch.Tensor],
    inputs: tuple,
    params: dict[str, torch.Tensor],
    C: float,
    *,
    per_example: str = "vmap",
    microbatch: int = 16,
) -> ClippedSum:
    """Σ_i clip_C(∇_θ ℓ_i) over the batch ``inputs``, θ = ``params`` (names of
    ``model.named_parameters``).

    ``loss_fn(*inputs)`` returns the per-example losses of a batch, shape (b,); it is evaluated one
    example at a time (inputs sliced to a leading dimension of 1). ``per_example="vmap"``:
    ``params`` swapped into ``model`` by ``torch.func.functional_call`` under
    ``vmap(grad_and_value)``, ``microbatch`` examples at a time (memory microbatch × #parameters).
    ``"loop"``: plain autograd, one example's forward and ``torch.autograd.grad`` at a time, which
    runs whatever torch can differentiate (packed sequences into an RNN, which ``torch.func`` cannot
    take: their tensors have no storage beneath its transforms). A gradient with a non-finite entry
    counts as 0 (before clipping) and is counted. The caller divides by its fixed B
    (:func:`release_sum`)."""
    if per_example not in ("vmap", "loop"):
        raise ValueError(f"per_example must be 'vmap' or 'loop'; got {per_example!r}")
    d = sum(p.numel() for p in params.values())
    first = next(iter(params.values()))
    total = torch.zeros(d, dtype=first.dtype, device=first.device)
    chunks = (_vmapped if per_example == "vmap" else _looped)(
        model, loss_fn, inputs, params, microbatch
    )
    losses, clipped, nonfinite = [], 0, 0
    for flat, values in chunks:
        summed = clipped_sum(
            flat.to(total.dtype), C, vector=True
        )  # non-finite rows set to 0, each clipped to C, summed
        del flat
        total += summed.total
        clipped, nonfinite = clipped + int(summed.clipped), nonfinite + int(summed.nonfinite)
        losses.append(values.detach().reshape(-1))
    return ClippedSum(total, torch.cat(losses) if losses else torch.zeros(0), clipped, nonfinite)


def _vmapped(model, loss_fn, inputs, params, microbatch):
    """(per-example gradients (m, d), losses (m,)) by ``vmap(grad_and_value)``, ``microbatch`` at a
    time."""
    from torch.func import functional_call, grad_and_value, vmap

    names = list(params)
    swapped = {f"model.{n}": p.detach() for n, p in params.items()}
    fixed = {f"model.{n}": p.detach() for n, p in model.named_parameters() if n not in params}
    one = _Bound(model, one_example(loss_fn))

    def loss_one(p, *example):
        return functional_call(one, (p, fixed), example)

    per_chunk = vmap(
        grad_and_value(loss_one), in_dims=(None, *([0] * len(inputs))), randomness="different"
    )
    for start in range(0, batch_rows(inputs), microbatch):
        grads, values = per_chunk(
            swapped, *map_leaves(lambda t, start=start: t[start : start + microbatch], inputs)
        )
        m = int(values.shape[0])
        yield torch.cat([grads[f"model.{n}"].reshape(m, -1) for n in names], 1), values


def _looped(model, loss_fn, inputs, params, microbatch):
    """(one example's gradient (1, d), its loss (1,)), example by example, by plain autograd: the
    model's own forward on that example alone, so its gradient is a function of it alone (the
    sensitivity is C)."""
    one, tensors = one_example(loss_fn), list(params.values())
    for i in range(batch_rows(inputs)):
        loss = one(*map_leaves(lambda t, i=i: t[i], inputs))
        grads = (
            torch.autograd.grad(loss, tensors, allow_unused=True)
            if loss.requires_grad
            else [None] * len(tensors)  # no trained parameter reached: a zero gradient
        )
        parts = [
            torch.zeros_like(p) if g is None else (g.to_dense() if g.layout != torch.strided else g)
            for p, g in zip(tensors, grads)
        ]  # a sparse embedding's gradient is dense here: flattened with the others
        yield torch.cat([g.reshape(1, -1) for g in parts], 1), loss.detach().reshape(1)


def route_clipped_sum(
    model: nn.Module,
    loss_fn: Callable[..., torch.Tensor],
    inputs: tuple,
    params: dict[str, torch.Tensor],
    C: float,
    *,
    per_example: str = "auto",
    microbatch: int = 16,
) -> tuple[ClippedSum, str]:
    """Σ_i clip_C(∇_θ ℓ_i) by the route ``per_example`` names, and the route that formed it.

    ``"layers"``: :func:`dpnc.tier.per_layer.layer_clipped_sum` (refused where a layer runs more
    than once per forward); ``"vmap"``/``"loop"``: :func:`clipped_gradient_sum`; ``"auto"``: layers,
    else vmap (:class:`VmapUnsupported` where vmap cannot batch a layer, e.g. ``nn.GRU``:
    :class:`DPOptimizer` then takes the loop). Gradients are enabled within. The one place the
    routes are chosen (:class:`DPOptimizer` and :func:`dpnc.lm.per_example_clipped_sum`)."""
    if per_example not in PER_EXAMPLE:
        raise ValueError(f"per_example must be one of {PER_EXAMPLE}; got {per_example!r}")
    refuse_no_route(model, params)
    with torch.enable_grad(), mappable(model):  # a stock Hugging Face model maps over the examples
        if per_example in ("auto", "layers"):
            fields = per_layer.layer_clipped_sum(model, loss_fn, inputs, params, C)
            if fields is not None:
                return ClippedSum(*fields), "layers"
            if per_example == "layers":
                raise ValueError(_LAYER_NOT_ONCE)
            per_example = "vmap"
        try:
            return clipped_gradient_sum(
                model, loss_fn, inputs, params, C, per_example=per_example, microbatch=microbatch
            ), per_example
        except torch.OutOfMemoryError:
            raise
        except RuntimeError:
            if per_example != "vmap":
                raise
            # torch's own message is not shown: it names shapes, which hold the (secret) size of the
            # batch
            raise VmapUnsupported(
                "per_example='vmap' failed on this model: some layers (e.g. nn.GRU, nn.LSTM) have "
                "no batching rule under torch.func.vmap. Use per_example='loop' (or 'auto', which "
                "then takes it)"
            ) from None


def refuse_no_route(model: nn.Module, params: dict[str, torch.Tensor]) -> None:
    """ValueError naming each layer whose trained parameters no route can differentiate per example:
    a lazy layer not yet initialised (no shape, so no gradient to form) or parameters on the meta
    device (no values). Checked when the optimizer is made and before a route runs the loss, so the
    refusal costs no privacy; whatever else torch can differentiate, the loop takes."""
    found: dict[str, list[str]] = {}  # one line per layer, its parameters named
    for name, p in params.items():
        owner = name.rpartition(".")[0]
        layer = f"{owner or 'model'} ({type(model.get_submodule(owner)).__name__})"
        if isinstance(p, nn.parameter.UninitializedParameter):
            why = (
                "not initialised yet (a lazy layer); run one forward on public inputs of the "
                "right shape before making the optimizer private"
            )
        elif p.is_meta:
            why = "on the meta device (no values); load the weights"
        else:
            continue
        found.setdefault(f"{layer}, {{}}: {why}", []).append(name)
    problems = [line.format(", ".join(names)) for line, names in found.items()]
    if problems:
        raise ValueError(
            "no per-example route can take this model (nothing was drawn or charged):\n  "
            + "\n  ".join(problems)
        )


def refuse_coupled_loss(
    model: nn.Module, loss_fn: Callable[..., torch.Tensor], inputs: tuple
) -> None:
    """ValueError where ``loss_fn`` couples the examples: the loss of an example in the batch
    differs from its loss alone (an in-batch contrastive loss, a loss centred over the batch). Every
    route forms an example's gradient from that example alone (the sensitivity bound needs it), so
    such a loss would silently train on almost nothing. Two examples are compared, the model in eval
    mode for the comparison (no dropout draws)."""
    modes = {m: m.training for m in model.modules()}
    model.eval()
    try:
        with torch.no_grad():
            together = loss_fn(*inputs)
            alone = [one_example(loss_fn)(*map_leaves(lambda t, i=i: t[i], inputs)) for i in (0, 1)]
    except Exception:
        # inputs that cannot be taken one example at a time here: the route itself checks them
        return
    finally:
        for m, training in modes.items():
            m.training = training
    if not isinstance(together, torch.Tensor) or together.ndim != 1 or len(together) < 2:
        return  # not one loss per example: refused by the shape check
    if not torch.allclose(together[:2], torch.stack(alone), rtol=1e-4, atol=1e-6, equal_nan=True):
        raise ValueError(
            "loss_fn couples the examples of a batch: an example's loss in the batch differs from its "
            "loss alone (an in-batch contrastive loss, or one centred over the batch). dpnc forms each "
            "example's gradient from that example alone, so this loss would train on almost nothing; "
            "compute each example's loss from its own inputs (for a contrastive loss, put the pairs or "
            "negatives into one dataset row). This batch is charged, nothing was released"
        )


class VmapUnsupported(ValueError):
    """torch.func.vmap could not form this model's per-example gradients (a layer without a batching
    rule)."""


class DPOptimizer(StepHooks, torch.optim.Optimizer):
    """DP-SGD / DP-AdamW / DP-<any torch optimizer>: per-example clipping and one noisy release per
    step.

    Implements: Abadi et al. 2016 (DP-SGD, Algorithm 1), with the wrapped optimizer's update (Yu et
    al. 2022's DP-AdamW recipe for fine-tuning) and Poisson batches whose mean has the fixed
    denominator B. ``param_groups``, ``state`` and ``defaults`` are the wrapped optimizer's
    (schedulers work); ``state_dict`` adds the step count and never the noise source.

    One ``step(loss_fn)``:

    1. per-example gradients g_i = ∇_θ ℓ_i(θ) of the batch the loader just yielded (the pending
       batch of its :class:`~dpnc.batches.LoaderBatches`), by the ``per_example`` route, over all
       trainable parameters the optimizer holds;
    2. each g_i with a non-finite entry set to 0 (counted), then clipped to ‖g_i‖ ≤ C over all
       parameters;
    3. the clipped sum released by :func:`dpnc.privacy.release.release_sum`: divided by the fixed B,
       plus secret noise of std σ = noise_multiplier·Δ, one ledger entry in real units (Δ = C/B
       under add/remove);
    4. the noisy mean set as ``.grad`` of every parameter and the wrapped optimizer's ``step()``
       taken.

    Refused before the batch is touched (``ValueError``, nothing released, the batch left pending):
    a model that is not ready (checked at every step: :func:`dpnc.tier.base.validate_model`), a
    layer no route can differentiate (:func:`refuse_no_route`, when the optimizer is made), a
    ``loss_fn`` that takes no arguments, explicit ``inputs`` that are not the very objects the loader
    yielded, a second step on one batch, a step beyond ``steps``. After it is touched, a model whose
    state changed (:class:`dpnc.tier.model_state.StateGuard`, which poisons the run) or a batch
    written since the loader yielded it is refused and charged: its release recorded, nothing
    published, the batch spent. A ``loss_fn`` that raises (or does not return one loss per example)
    still releases, one example at a time, the raising ones counting 0, and then the exception is
    raised. An empty Poisson batch releases noise only (``loss_fn`` not called).

    Args:
        optimizer: the torch optimizer to wrap (its parameters must be parameters of ``model``; all
            groups are clipped together: C bounds each example's gradient over every parameter).
        model: the ``nn.Module`` whose parameters ``loss_fn`` uses (checked before every step: no
            BatchNorm that uses batch statistics).
        clip: C > 0, the bound on each example's gradient norm.
        noise_multiplier: σ/Δ ≥ 0 (0: no noise, recorded as not private, ε = ∞).
        batches: the batch source: a :class:`dpnc.engine.LoaderBatches` (the loader's pending batch;
            its sampler gives the fixed B and the privacy event).
        accountant: records every release.
        noise: the secret noise source (a fresh one by default).
        per_example: how the per-example gradients' clipped sum is formed: ``"layers"`` (from each
            layer's activations and output gradients, :mod:`dpnc.tier.per_layer`: the layer types of
            :data:`dpnc.tier.layer_kinds.KINDS`, listed in the docs' layer table; the loss vmapped
            over the examples, per example by construction), ``"vmap"`` (``microbatch`` examples per
            vectorised ``torch.func`` pass), ``"loop"`` (one at a time by autograd; any model torch
            can differentiate, packed sequences too), or ``"auto"`` (the default: ``"layers"`` where
            every trainable parameter's layer is supported and its rows belong to the examples, else
            ``"vmap"``, else ``"loop"`` where vmap cannot batch a layer).
        microbatch: examples per vmapped chunk (memory: microbatch × #parameters).
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        *,
        model: nn.Module,
        clip: float,
        noise_multiplier: float,
        batches,
        accountant: Accountant,
        noise: NoiseSource | None = None,
        per_example: str = "auto",
        microbatch: int = 16,
    ) -> None:
        if not isinstance(optimizer, torch.optim.Optimizer) or isinstance(optimizer, DPOptimizer):
            raise ValueError(
                f"optimizer must be a torch.optim.Optimizer (not yet private); got {optimizer!r}"
            )
        if not isinstance(model, nn.Module):
            raise ValueError(f"model must be a torch.nn.Module; got {type(model).__name__}")
        check_arguments(clip=clip, noise_multiplier=noise_multiplier)
        if math.isinf(clip):
            raise ValueError("clip must be finite (the sensitivity is clip/B)")
        if per_example not in PER_EXAMPLE:
            raise ValueError(f"per_example must be one of {PER_EXAMPLE}; got {per_example!r}")
        if isinstance(microbatch, bool) or not isinstance(microbatch, int) or microbatch < 1:
            raise ValueError(f"microbatch must be an integer >= 1; got {microbatch!r}")
        require_ready(model, dropout=False)  # and again before every step
        if not isinstance(batches, LoaderBatches):
            raise ValueError(
                f"batches must be a dpnc.batches.LoaderBatches (the loader's pending batch); got "
                f"{type(batches).__name__}"
            )
        names = {id(p): n for n, p in model.named_parameters()}
        trainable = [
            p for group in optimizer.param_groups for p in group["params"] if p.requires_grad
        ]
        if not trainable or any(id(p) not in names for p in trainable):
            raise ValueError(
                "optimizer must hold trainable parameters of model (loss_fn is differentiated with "
                "respect to them through the model); got "
                f"{sum(id(p) not in names for p in trainable)} that are not and {len(trainable)} in all"
            )
        batches.check_relation(accountant.relation)
        super().__init__(
            optimizer.param_groups, optimizer.defaults
        )  # torch's hooks and step patching
        self.param_groups, self.state, self.defaults = (
            optimizer.param_groups,
            optimizer.state,
            optimizer.defaults,
        )
        self.optimizer, self.model = optimizer, model
        self.params = {names[id(p)]: p for p in trainable}
        self.group = batches.group  # data parallel: every rank starts from rank 0's parameters
        if self.group is not None:
            self.group.broadcast_parameters_(trainable)
        refuse_no_route(model, self.params)
        self.clip, self.noise_multiplier = float(clip), float(noise_multiplier)
        self.batches, self.accountant = batches, accountant
        self.noise = noise if noise is not None else NoiseSource()
        self.microbatch = microbatch
        layers = (
            per_example in ("auto", "layers")
            and per_layer.supported(model, self.params) is not None
        )
        if per_example == "layers" and not layers:
            raise ValueError(
                "per_example='layers' needs every trainable parameter in one of: "
                f"{', '.join(layer_names())} (not tied); use 'vmap'"
            )
        self.per_example = (
            "layers" if layers else ("vmap" if per_example == "auto" else per_example)
        )
        # "auto" keeps to vmap where a supported layer turns out to run twice in a forward (e.g. a
        # prompt head that encodes its label prompts with the same encoder): the same clipped sum,
        # by the route that is exact there
        self._fallback = "vmap" if per_example == "auto" else None
        self.steps = 0
        self._coupling_checked = False  # at the first batch of two or more examples
        self.guard = StateGuard(model, ready=lambda module: validate_model(module, dropout=False))
        batches.charge = self._charge
        self.guard.attach(batches)

    def step_release(self) -> Release:
        """The ledger entry each step makes (public; what a trainer counts for a step that may have
        happened)."""
        return mean_release(
            self.clip,
            self.noise_multiplier,
            sampler=self.batches,
            accountant=self.accountant,
            noise=self.noise,
        )

    def step(
        self,
        loss_fn: Callable[..., torch.Tensor] | None = None,  # type: ignore[override]
        *inputs: Any,
    ) -> torch.Tensor:
        """One DP step on the pending batch: ``loss_fn(*batch)`` gives its per-example losses, shape
        (b,).

        The optimizer hands ``loss_fn`` the batch the loader just yielded (tensors, or
        dicts/lists/tuples of them, all with leading dimension b) and maps it over the examples;
        ``step(loss_fn, *inputs)`` is accepted only when ``inputs`` are that batch's very objects.
        Returns the mean of the per-example losses (not private: a statistic of the training data;
        ``nan`` on an empty batch; under a process group, this rank's examples'). Hooks of
        :meth:`register_step_hook` then get the step's :class:`StepInfo`."""
        self.guard.refuse_if_poisoned("this step")
        check_loss_fn(loss_fn)
        require_ready(
            self.model, dropout=False
        )  # at every step: model.train() after construction is refused
        batches, before = self.batches, self.accountant.releases
        batches.check_ready()  # nothing pending, or all steps taken: refused before anything runs
        check_loss_arity(loss_fn, batches.arguments())
        if inputs:
            batches.check_inputs(inputs)
        self.guard.refuse_written_batch(batches)
        batch = batches.sample()
        touched = [
            True
        ]  # the user's code has run since the draw: a change of state there is charged

        def seen(*args):
            touched[0] = True
            return loss_fn(*args)

        try:
            self.guard.check()  # the model as the draw found it
            touched[0] = False
            inputs = batches.inputs()
            rows, drawn = batch_rows(inputs), len(batches.part(batch))  # this rank's part
            if rows != drawn:
                raise ValueError(
                    f"the batch's inputs must have one row per example drawn ({drawn}); got {rows}"
                )
            failure = None
            # every module the loss runs is watched (on leaving, no forward wrote any state), and
            # its random draws (dropout) come from a fork of torch's generator
            first = next(iter(self.params.values()))
            with (
                self.guard.watching(),
                step_randomness(self.noise.secret, self.steps, first.device),
            ):
                try:
                    summed = self._clipped_sum(seen, inputs) if rows else self._zero_sum()
                except (ModelStateChanged, ModuleNotReady):
                    raise
                except Exception as error:
                    # One noisy release per drawn batch all the same: the examples whose loss raises
                    # count 0
                    failure = error
                    summed = self._tolerant_sum(seen, inputs)
                if failure is None and rows >= 2 and not self._coupling_checked:
                    self._coupling_checked = True
                    refuse_coupled_loss(self.model, seen, inputs)
            noisy, stats, entry = self._release(summed)
        except BaseException:
            self._after_refusal(batches, touched[0], before)
            raise
        batches.finish()
        self._apply(noisy)
        self.steps += 1
        self._report_step(StepInfo(self.steps - 1, None, noisy, entry, stats))
        if failure is not None:
            raise_after_release(failure)
        return summed.losses.mean() if rows else torch.tensor(math.nan)

    def _release(self, summed: ClippedSum) -> tuple[torch.Tensor, PrivateStats, Release]:
        """The noisy mean of the clipped sum (the whole batch's under a group: each rank's part
        summed in one all_reduce that carries rank 0's noise,
        :meth:`~dpnc.distributed.Group.release_sum`, the same value on every rank; rank 0 alone
        records), the step's private statistics and its ledger entry."""
        entry = self.step_release()

        def release(total: torch.Tensor) -> torch.Tensor:
            return release_sum(
                total,
                self.clip,
                sampler=self.batches,
                noise=self.noise,
                accountant=self.accountant,
                noise_multiplier=self.noise_multiplier,
                release=entry,
            )

        losses = summed.losses
        finite = torch.isfinite(losses)
        parts = (float(losses[finite].sum()), int(finite.sum()), summed.clipped, summed.nonfinite)
        rows = len(losses)
        if self.group is None:
            noisy = release(summed.total)
        else:
            noisy, *parts, rows = self.group.release_sum(
                summed.total,
                *parts,
                rows,
                release=release,
                denominator=self.batches.batch_size,
                entry=entry,
            )
        loss, counted, clipped, nonfinite = parts
        stats = PrivateStats(
            loss / counted if counted else math.nan, clipped / max(rows, 1), nonfinite
        )
        return noisy, stats, entry

    def _zero_sum(self) -> ClippedSum:
        first = next(iter(self.params.values()))
        d = sum(p.numel() for p in self.params.values())
        return ClippedSum(
            torch.zeros(d, dtype=first.dtype, device=first.device), torch.zeros(0), 0, 0
        )

    def _tolerant_sum(self, loss_fn, inputs) -> ClippedSum:
        """The clipped sum one example at a time, an example whose loss (or gradient) raises
        counting 0 (and as non-finite): each example's part is a function of that example alone, so
        the sensitivity stays C."""
        total, losses, clipped, nonfinite = self._zero_sum()
        losses = []
        with torch.enable_grad():
            for i in range(batch_rows(inputs)):
                one = map_leaves(lambda t, i=i: t[i : i + 1], inputs)
                try:
                    part = clipped_gradient_sum(
                        self.model, loss_fn, one, self.params, self.clip, per_example="loop"
                    )
                except (ModelStateChanged, ModuleNotReady):
                    raise
                except Exception:
                    losses.append(torch.full((1,), math.nan))
                    nonfinite += 1
                    continue
                total += part.total
                clipped, nonfinite = clipped + part.clipped, nonfinite + part.nonfinite
                losses.append(part.losses.detach().cpu().to(torch.float32))
        return ClippedSum(total, torch.cat(losses), clipped, nonfinite)

    def _clipped_sum(self, loss_fn, inputs) -> ClippedSum:
        route = "auto" if self.per_example == "layers" and self._fallback else self.per_example
        try:
            summed, self.per_example = route_clipped_sum(
                self.model,
                loss_fn,
                inputs,
                self.params,
                self.clip,
                per_example=route,
                microbatch=self.microbatch,
            )
        except VmapUnsupported:
            if self._fallback is None:  # the user asked for vmap
                raise
            # "auto": a layer vmap cannot batch (e.g. nn.GRU), so one example at a time, as exact
            # (nothing released)
            summed, self.per_example = route_clipped_sum(
                self.model,
                loss_fn,
                inputs,
                self.params,
                self.clip,
                per_example="loop",
                microbatch=self.microbatch,
            )
        return summed

    def _apply(self, noisy: torch.Tensor) -> None:
        """Set the noisy mean as each parameter's gradient, take the wrapped optimizer's step, clear
        the gradients."""
        offset = 0
        for p in self.params.values():
            p.grad = noisy[offset : offset + p.numel()].view_as(p).to(p.dtype).clone()
            offset += p.numel()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        """The wrapped optimizer's state and the step count (public); never the noise source or the
        batches."""
        self.guard.refuse_if_poisoned("saving the optimizer's state")
        return {**self.optimizer.state_dict(), "dpnc": {"steps": self.steps}}

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        extra = state_dict.pop("dpnc", None)
        self.optimizer.load_state_dict(state_dict)
        self.param_groups, self.state = (
            self.optimizer.param_groups,
            self.optimizer.state,
        )  # torch built new ones
        if extra is not None:
            self.steps = extra["steps"]
