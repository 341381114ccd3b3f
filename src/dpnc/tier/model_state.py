"""One rule for a model's state during a private step: nothing the model holds changes but by the optimizer.

Between the moment a step's batch is drawn and its release, no parameter and no buffer of the model may change
except by the optimizer's own moves (a zeroth-order step's x ± λu and its update; a first-order step's update,
after the release). Anything else that writes them while the batch is in hand writes the batch into the model:
BatchNorm's or InstanceNorm's running statistics in train mode, ``Embedding(max_norm=...)`` renormalising the rows
it looked up, a custom layer that keeps a buffer of what it saw. ``state_dict()`` would then publish a statistic
of the secret batch without noise.

:class:`StateGuard` enforces the rule by construction, whatever the module: it reads the version counter (which
every in-place write bumps), the identity and the storage of every parameter and buffer when the batch is drawn
and before every forward pass, and compares them after the pass and before the release. A change is refused with
a message naming the module, and the buffers are put back as they were (a parameter written in place cannot be:
the message says so). :data:`MESSAGES` words the refusal by module type; it is not the guard.

:func:`static_problems` finds the offenders that can be seen without running the model (train-mode running
statistics, ``max_norm``), so that they are refused before any batch is touched: a refusal that happens only
when a row is large (``max_norm``) would itself tell something of the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain

import torch
from torch import nn

_NORM = nn.modules.batchnorm._NormBase  # BatchNorm*, InstanceNorm*, SyncBatchNorm, LazyBatchNorm*


def _norm_message(module: nn.Module) -> str:
    if isinstance(module, nn.modules.batchnorm._BatchNorm):
        return (
            "BatchNorm in train mode mixes examples and stores the batch's mean in running_mean; replace it with "
            "GroupNorm: model = dpnc.fix_model(model) (as Opacus's ModuleValidator.fix). model.eval() only if its "
            "running statistics were learned on public data (from scratch it freezes the initial ones)"
        )
    return (
        "InstanceNorm with running statistics in train mode stores a statistic of the batch in running_mean/"
        "running_var; set track_running_stats=False (each example is then normalised by its own statistics) "
        "or call .eval() on it"
    )


# How the refusal is worded for a module of a known type (the first match); any other module gets the default.
MESSAGES: tuple[tuple[type[nn.Module], Callable[[nn.Module], str]], ...] = (
    (_NORM, _norm_message),
    (
        nn.Embedding,
        lambda m: (
            "Embedding(max_norm=...) renormalises the rows it looks up in place, so the weights "
            "show which tokens were in the batch; set max_norm=None"
        ),
    ),
    (
        nn.EmbeddingBag,
        lambda m: (
            "EmbeddingBag(max_norm=...) renormalises the rows it looks up in place; set "
            "max_norm=None"
        ),
    ),
)


def describe(module: nn.Module) -> str:
    for kind, message in MESSAGES:
        if isinstance(module, kind):
            return message(module)
    return (
        f"{type(module).__name__} writes its parameters or buffers during the forward (in place or by "
        "assigning new tensors), so they hold a statistic of the batch; keep such state out of the model, or "
        "update it from released values only"
    )


def static_problems(model: nn.Module) -> list[str]:
    """The modules of ``model`` seen to write their state in a forward without running it, each with its message."""
    problems = []
    for name, module in model.named_modules():
        train_stats = isinstance(module, _NORM) and module.training and module.track_running_stats
        if (
            train_stats
            or getattr(module, "max_norm", None) is not None
            and isinstance(module, (nn.Embedding, nn.EmbeddingBag))
        ):
            problems.append(f"{name or 'model'}: {describe(module)}")
    return problems


class ModelStateChanged(ValueError):
    """A parameter or buffer of the model changed between a step's draw and its release, not by the optimizer."""


class StateGuard:
    """Marks the state of every parameter and buffer of ``model`` and refuses any change since the mark.

    ``mark()`` records, per tensor, its identity, storage and version counter (and keeps a copy of each buffer, to
    put back); ``check()`` raises :class:`ModelStateChanged` naming each module whose tensors changed, after putting
    the buffers back. The optimizer marks at the draw and before each forward pass it runs, and checks after each
    pass and at the step's start: its own moves happen between a check and the next mark.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self._marks: dict[str, tuple] | None = None
        self._buffers: dict[str, torch.Tensor] = {}

    def _tensors(self):
        return chain(
            ((n, t, False) for n, t in self.model.named_parameters(remove_duplicate=False)),
            (
                (n, t, True)
                for n, t in self.model.named_buffers(remove_duplicate=False)
                if t is not None
            ),
        )

    @staticmethod
    def _state(t: torch.Tensor) -> tuple:
        try:
            storage = t.data_ptr()
        except (
            RuntimeError
        ):  # a tensor without storage (one a torch.func transform let escape into the module)
            storage = None
        return id(t), storage, t._version, tuple(t.shape)

    def mark(self) -> None:
        self._marks, self._buffers = {}, {}
        for name, t, is_buffer in self._tensors():
            self._marks[name] = self._state(t)
            if is_buffer:
                self._buffers[name] = t.detach().clone()

    def check(self) -> None:
        if self._marks is None:
            return
        now = {name: (self._state(t), t, is_buffer) for name, t, is_buffer in self._tensors()}
        changed = sorted(
            set(self._marks) ^ set(now)
            | {n for n, (state, _, _) in now.items() if self._marks.get(n, state) != state}
        )
        if not changed:
            return
        written = False
        for name in changed:
            if name in now and name in self._buffers:
                self._restore(name, now[name][1])
            elif name in self._buffers:  # a buffer removed
                self._restore(name, None)
            elif name in now:
                written = True  # a parameter: no copy is kept (it would double the model's memory)
        modules = dict(self.model.named_modules())
        owners = dict.fromkeys(name.rpartition(".")[0] for name in changed)
        lines = [
            f"{owner or 'model'} ({', '.join(n for n in changed if n.rpartition('.')[0] == owner)}): "
            f"{describe(modules[owner]) if owner in modules else 'a tensor was added or removed'}"
            for owner in owners
        ]
        after = (
            " Its parameters were written with the batch in hand: do not save or publish this model; rebuild it"
            if written
            else " Its buffers were put back as they were before the batch."
        )
        self._marks = None
        raise ModelStateChanged(
            "model state changed during a private step, not by the optimizer (no parameter or "
            "buffer may change between the draw of a batch and its release):\n  "
            + "\n  ".join(lines)
            + "\n"
            + after.strip()
        )

    def _restore(self, name: str, tensor: torch.Tensor) -> None:
        owner, _, local = name.rpartition(".")
        module = self.model.get_submodule(owner) if owner else self.model
        saved = self._buffers[name]
        if (
            id(tensor) == self._marks[name][0] and tensor.shape == saved.shape
        ):  # written in place: write it back
            with torch.no_grad():
                tensor.copy_(saved)
        else:  # assigned anew: the saved copy takes its place
            module._buffers[local] = saved
