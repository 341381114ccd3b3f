"""The shared base of dpnc's model-tier optimizers: what a step reports (:class:`StepInfo`, its
hooks), the charge of a refused step, the model checks every private step runs
(:func:`require_ready`; the model-state rule is :mod:`dpnc.tier.model_state`'s) and the argument
checks of the optimizers and their front doors."""

from __future__ import annotations

import contextlib
import math
import secrets
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from dpnc.batches import LoaderBatches
from dpnc.checks import check_value
from dpnc.distributed import Group
from dpnc.options import NOISED_CLIP, check_options
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.releases import Release
from dpnc.tier.model_state import static_problems


@dataclass(frozen=True)
class PrivateStats:
    """NOT PRIVATE: un-noised statistics of one step's batch. ε does not cover them; keep them
    private.

    ``loss``: the batch's mean loss (nan on an empty batch); ``clipped_fraction``: the fraction of
    the batch whose value (scalar difference or gradient) was clipped; ``nonfinite``: how many
    examples had a non-finite value (set to 0 before clipping). Each reveals something of the
    examples in the secret batch."""

    loss: float
    clipped_fraction: float
    nonfinite: int


@dataclass(frozen=True)
class StepInfo:
    """What one optimizer step did, handed to the hooks of :meth:`register_step_hook`.

    Public (may be logged, saved, published): ``step``, the 0-based index of the step; ``seed``, its
    public direction seed (zeroth-order steps; None for first-order ones); ``released``, the
    quantity the step released (DPZero's noisy scalar c_t, MeZO's un-noised c_t, the first-order
    noisy mean gradient as a flat vector); ``release``, the ledger entry it made. ``private_stats``
    is NOT public: see :class:`PrivateStats`."""

    step: int
    seed: int | None
    released: torch.Tensor
    release: Release
    private_stats: PrivateStats


StepHook = Callable[[torch.optim.Optimizer, StepInfo], None]


class StepHooks:
    """``register_step_hook(fn)``: fn(optimizer, info) after every step (mixed into dpnc's
    optimizers), and the charge of a drawn batch that no step released for (``_charge``)."""

    accountant: Accountant
    group: Group | None = (
        None  # a data-parallel run's process group (only its source rank keeps the ledger)
    )

    def step_release(self) -> Release:
        """The ledger entry one step makes."""
        raise NotImplementedError

    def _charge(self) -> None:
        """Record the release a step makes, for a drawn batch whose step was refused after touching
        it (a state change) or that no step took: nothing is published for it, but the ledger's
        length is then a function of the number of draws alone (a loop that skips a batch would
        otherwise show in it)."""
        if self.group is None or self.group.is_source:
            self.accountant.record(self.step_release())

    def _after_refusal(self, loader: LoaderBatches | None, seen: bool, before: int) -> None:
        """A step raised having released nothing since ``before``: a batch its code had ``seen`` is
        charged and spent (the ledger counts every draw); one refused before the data may be retried
        (pending again)."""
        if self.accountant.releases != before:
            return
        if seen:
            self._charge()
            if loader is not None:
                loader.finish()
        elif loader is not None:
            loader.give_back()

    def register_step_hook(self, hook: StepHook) -> RemovableHandle:
        """Call ``hook(optimizer, info)`` with a :class:`StepInfo` after each step; ``.remove()``
        the handle to stop."""
        if not callable(hook):
            raise ValueError(f"hook must be callable as hook(optimizer, info); got {hook!r}")
        hooks = self.__dict__.setdefault("_dpnc_step_hooks", OrderedDict())
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def _report_step(self, info: StepInfo) -> None:
        for hook in list(self.__dict__.get("_dpnc_step_hooks", {}).values()):
            hook(self, info)


def raise_after_release(error: Exception) -> None:
    """Raise what a step's loss raised, once the step has released and moved the model as any step
    does.

    One noisy release per drawn batch, whatever the loss does: a step that released nothing would
    leave the model where it was, and the published model would tell which steps raised
    (docs/privacy.md)."""
    error.add_note(
        "dpnc: this step still released: the examples whose loss raised counted 0, the noise was added "
        "and the update applied"
    )
    error.dpnc_released = True  # a trainer may go on: the step is as complete as any other
    raise error


@contextlib.contextmanager
def step_randomness(secret: bool, step: int, device: torch.device) -> Iterator[None]:
    """torch's global generator forked for a step's own draws (dropout), from a secret seed:
    unforked, it would advance by the secret batch's size, and its state (saved by checkpoints, read
    by later code) would tell it. A testing run (``secret`` False) seeds by the step's index, so
    that it reproduces."""
    seed = secrets.randbits(63) if secret else step
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        # the forked generators alone (torch.manual_seed would also queue every CUDA device's
        # seeding, with a stack trace each time: a millisecond a step)
        torch.default_generator.manual_seed(seed)
        for index in devices:
            torch.cuda.default_generators[index].manual_seed(seed)
        yield


def validate_model(model: nn.Module, *, dropout: bool = True) -> list[str]:
    """Every reason ``model`` breaks a private step's assumptions (empty if none).

    Each example's loss must be a function of that example alone, a zeroth-order step's two forward
    passes must evaluate one function, and no forward may write the model's state. Refused: every
    module :func:`dpnc.tier.model_state.static_problems` finds (BatchNorm or InstanceNorm with
    running statistics in training mode, ``Embedding(max_norm=...)``); BatchNorm without running
    statistics (``track_running_stats=False``: it uses the batch's statistics even in eval mode);
    and, with ``dropout`` (zeroth order), active dropout (f(x + λu) and f(x − λu) would use
    different masks). Whatever else writes a parameter or buffer during a step is refused when it
    happens (:class:`dpnc.tier.model_state.StateGuard`); operations that mix the examples of a batch
    cannot be found by looking at modules (docs/privacy.md)."""
    problems, active = [], []
    for name, module in model.named_modules():
        where = name or "model"
        if (
            dropout
            and isinstance(module, nn.modules.dropout._DropoutNd)
            and module.training
            and module.p > 0
        ):
            active.append((where, module.p))
        if (
            isinstance(module, nn.modules.batchnorm._BatchNorm)
            and not module.training
            and (not module.track_running_stats or module.running_mean is None)
        ):
            problems.append(
                f"{where}: BatchNorm without running statistics normalises with the batch's "
                "statistics even in eval mode (examples mix); replace it with GroupNorm: model = "
                "dpnc.fix_model(model)"
            )
    if active:  # one line however many: a transformer has a dropout in every layer
        (where, p), others = active[0], [f"{w} (p={q})" for w, q in active[1:4]]
        also = f", also {', '.join(others)}" if others else ""
        more = f" and {len(active) - 4} more" if len(active) > 4 else ""
        problems.append(f"{where}: dropout (p={p}){also}{more} is active; call model.eval()")
    problems += static_problems(model)
    if len(problems) > 1:  # in the model's order of modules
        order = {name or "model": i for i, (name, _) in enumerate(model.named_modules())}
        problems.sort(key=lambda p: order.get(p.partition(":")[0], 0))
    return problems


def require_ready(model: nn.Module, *, dropout: bool = True) -> None:
    """Raise ValueError listing every reason of :func:`validate_model` (nothing if the model is
    ready)."""
    if problems := validate_model(model, dropout=dropout):
        kind = "zeroth-order steps" if dropout else "per-example gradients"
        raise ValueError(f"model is not ready for {kind}:\n  " + "\n  ".join(problems))


NOISE_MULTIPLIER = (
    ">= 0 and finite",
    lambda v: (
        isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and math.isfinite(v)
    ),
)


def check_arguments(**kwargs: float) -> None:
    """Validate optimizer arguments (lr, smoothing, clip, noise_multiplier), named as the user wrote
    them, by the rules of :mod:`dpnc.options`.

    Public so that a caller (e.g. :func:`dpnc.make_private`) can check them before slow work such as
    calibration."""
    for name, value in kwargs.items():
        if name == "noise_multiplier":
            check_value(name, value, NOISE_MULTIPLIER)
        else:  # the options' rules and their words for a missing value (dpnc.options), one home
            check_options({name: value})
    if math.isinf(kwargs.get("clip", 1.0)) and kwargs.get("noise_multiplier", 0.0) > 0:
        raise ValueError(NOISED_CLIP)
