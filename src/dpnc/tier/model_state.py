"""One rule for a model's state in a private step: nothing it holds changes but by the optimizer.

Between the moment a step's batch is drawn and its release, no parameter and no buffer of the model
may change except by the optimizer's own moves: any other write (train-mode running statistics, a
layer's buffer of what it saw) would publish the secret batch in ``state_dict()`` without noise.
:class:`StateGuard` enforces it for every module the loss runs; the rule in full: docs/privacy.md."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_pre_hook

from dpnc.batches import leaves

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


# How the refusal is worded for a module of a known type (the first match); any other module gets
# the default.
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
    """The modules of ``model`` seen to write their state in a forward without running it, each with
    its message: refused before any batch is touched, since a refusal that happens only when a row
    is large (``max_norm``) would itself tell something of the batch."""
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
    """A parameter or buffer of the model (or of a module its loss ran), or a tensor of the batch,
    changed between a step's draw and its release, not by the optimizer. The run is poisoned from
    then on (:class:`RunPoisoned`)."""


class RunPoisoned(ModelStateChanged):
    """A step or a save refused because an earlier check of the run found a write (the first offence
    is quoted)."""


class ModuleNotReady(ValueError):
    """A module outside ``model`` ran in a step and fails the model's checks; refused before its
    forward ran."""


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """``t``'s bit patterns as integers (no copy): compared exactly, NaNs and signed zeros
    included."""
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    return t.view(_BITS[t.element_size()]) if t.is_floating_point() else t


def fingerprint(t: torch.Tensor) -> torch.Tensor | None:
    """An exact fingerprint of ``t``'s values: the int64 sums of its bit patterns along the last
    dimension.

    One read of ``t`` and one number per row kept (a copy would double a model's memory); any write
    of other values changes it but one that keeps every row's sum of bit patterns (a permutation
    within a row). None for a tensor without storage (one a torch.func transform let escape into a
    module: its identity already tells)."""
    try:
        bits = _bits(t)
    except RuntimeError:
        return None
    if bits.ndim == 0:
        return bits.reshape(1).long()
    try:  # whole 8-byte words: summed natively, ~15x faster than widening each narrower element
        bits = bits.view(torch.int64)
    except RuntimeError:  # a row that is not a whole number of aligned words
        pass
    return bits.sum(-1, dtype=torch.int64)


def _differ(pairs: list[tuple[torch.Tensor | None, torch.Tensor | None]]) -> list[bool]:
    """Whether each pair of tensors differs bit for bit, with one device synchronisation per device
    (not per pair)."""
    flags: dict[torch.device, list[torch.Tensor]] = {}
    where = []
    for a, b in pairs:
        if a is None or b is None or a.shape != b.shape or a.device != b.device:
            where.append(a is not b)
            continue
        on = flags.setdefault(a.device, [])
        where.append((a.device, len(on)))
        on.append((_bits(a) != _bits(b)).any())
    read = {device: torch.stack(f).tolist() for device, f in flags.items()}
    return [w if isinstance(w, bool) else read[w[0]][w[1]] for w in where]


@dataclass
class _Tensor:
    """A tensor the guard watches: its owner (None: the batch), the owner's name in messages and the
    local name."""

    owner: nn.Module
    where: str  # "" for the model itself
    local: str
    tensor: torch.Tensor
    buffer: bool

    @property
    def label(self) -> str:
        return f"{self.where}.{self.local}" if self.where else self.local


def _module_tensors(module: nn.Module, where: str) -> Iterator[_Tensor]:
    for local, t in module._parameters.items():
        if t is not None:
            yield _Tensor(module, where, local, t, False)
    for local, t in module._buffers.items():
        if t is not None:
            yield _Tensor(module, where, local, t, True)


class StateGuard:
    """Marks the state of every parameter and buffer of ``model`` and refuses any change since the
    mark.

    ``mark()`` records, per tensor, its identity, storage and version counter, and its values: a
    copy of each buffer (to compare and put back) and a :func:`fingerprint` of each parameter, so a
    write through ``.data`` (which no version counter sees) is caught too. ``check()`` raises
    :class:`ModelStateChanged` naming each module whose tensors changed, after putting the buffers
    back (a parameter written in place, which no copy can put back, is set to NaN), and poisons the
    run: :meth:`refuse_if_poisoned` then refuses every later step and save, quoting the first
    offence (a later step would publish the written state).

    ``watching()`` wraps a step's loss evaluation: every module whose forward runs within it, inside
    ``model`` or not (a frozen backbone the loss calls), is held to the same rule, marked at first
    sight by a global forward pre-hook (before its forward can write) and refused there if
    ``ready(module)`` lists problems (the model's own checks); leaving it checks. ``hold(inputs)``
    watches the batch's tensors the same way.

    The optimizer marks at the draw and before each forward pass it runs, and checks after each pass
    and at the step's start: its own moves happen between a check and the next mark."""

    def __init__(
        self, model: nn.Module, ready: Callable[[nn.Module], list[str]] | None = None
    ) -> None:
        self.model, self.ready = model, ready
        self.poisoned: str | None = None  # the first offence's message
        self._marks: dict[str, tuple] | None = None
        self._outside: list[
            tuple[nn.Module, str]
        ] = []  # modules outside the model seen since the mark
        self._seen: set[int] = set()
        self._batch: list[tuple[torch.Tensor, int, torch.Tensor | None]] = []

    def _tensors(self) -> Iterator[_Tensor]:
        for name, module in self.model.named_modules(remove_duplicate=False):
            yield from _module_tensors(module, name)
        for module, where in self._outside:
            yield from _module_tensors(module, where)

    @staticmethod
    def _state(t: torch.Tensor) -> tuple:
        try:
            storage = t.data_ptr()
        except RuntimeError:  # a tensor without storage (one a torch.func transform let escape)
            storage = None
        return id(t), storage, t._version, tuple(t.shape)

    def _measure(self, entry: _Tensor) -> tuple:
        t = entry.tensor
        value = t.detach().clone() if entry.buffer else fingerprint(t)
        return self._state(t), value, entry

    def mark(self) -> None:
        self._outside, self._seen = [], set()
        self._marks = {e.label: self._measure(e) for e in self._tensors()}

    def hold(self, inputs) -> None:
        """Watch the tensors of a batch (as the loader yields it, or as the step fetched it) from
        now on."""
        self._batch = [
            (t, t._version, fingerprint(t)) for t in leaves(inputs) if isinstance(t, torch.Tensor)
        ]

    def attach(self, batches) -> None:
        """Be the guard of a make_private loader's :class:`~dpnc.batches.LoaderBatches`: marked at
        each draw, and holding each batch it yields (its tensors' values, which a write through
        ``.data`` changes unseen by the version counters the loader reads)."""
        batches.guard = self

    def refuse_written_batch(self, batches) -> None:
        """Before a step takes the pending batch: one written since the loader yielded it is charged
        and dropped."""
        if self._batch and self.batch_written():
            batches.charge_dropped()
            raise ValueError(
                "inputs must hold what the loader yielded: a tensor of the batch was written in place since "
                "(e.g. xb -= xb.mean(0), xb.copy_(...) or xb.data.copy_(...)), so the batch the loss would see "
                "is not the one the ledger describes. Transform a batch inside loss_fn, out of place, per "
                "example; this batch is charged and dropped"
            )

    def batch_written(self) -> bool:
        """Whether a tensor of the held batch was written since :meth:`hold` (in place, or through
        ``.data``)."""
        versions = any(t._version != v for t, v, _ in self._batch)
        return versions or any(_differ([(fingerprint(t), f) for t, _, f in self._batch]))

    def refuse_if_poisoned(self, what: str) -> None:
        if self.poisoned is not None:
            raise RunPoisoned(
                f"this run is poisoned: {what} is refused, because a step found a write it may not hold "
                "(the model, or what its loss ran, holds or held state written with a secret batch in hand, "
                "and a later step or save would publish it). Rebuild the model and the run. The first "
                f"offence:\n{self.poisoned}"
            )

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Within: every module whose forward runs is watched from its first sight; on leaving,
        :meth:`check`."""
        self._seen = {id(m) for m in self.model.modules()}
        handle = register_module_forward_pre_hook(self._first_sight)
        try:
            yield
        finally:
            handle.remove()
            self.check()  # also when the body raised: a write it left is the graver news

    def _first_sight(self, module: nn.Module, args) -> None:
        if id(module) in self._seen or self._marks is None:
            return
        where = f"outside:{type(module).__name__}"
        where += f"#{len(self._outside)}" if any(w == where for _, w in self._outside) else ""
        for name, m in module.named_modules():
            if id(m) not in self._seen:
                self._seen.add(id(m))
                self._outside.append((m, f"{where}.{name}" if name else where))
                for entry in _module_tensors(m, self._outside[-1][1]):
                    self._marks[entry.label] = self._measure(entry)
        problems = self.ready(module) if self.ready is not None else []
        if problems:  # the checks name the module they are given "model": here it is not the model
            problems = [p.replace("model:", f"{type(module).__name__}:", 1) for p in problems]
            raise ModuleNotReady(
                f"loss_fn ran a {type(module).__name__} that is not part of the model given to the "
                "optimizer, and every module a private step runs is held to the model's rules; refused "
                "before its forward (nothing was written):\n  " + "\n  ".join(problems)
            )

    def check(self) -> None:
        if self._marks is None:
            return
        now = {e.label: e for e in self._tensors()}
        changed = set(self._marks) ^ set(now)
        same = []
        for label, entry in now.items():
            if label in self._marks:
                state, value, _ = self._marks[label]
                if state != self._state(entry.tensor):
                    changed.add(label)
                else:
                    same.append((label, entry))
        pairs = [
            (e.tensor if e.buffer else fingerprint(e.tensor), self._marks[label][1])
            for label, e in same
        ]
        changed |= {label for (label, _), differ in zip(same, _differ(pairs)) if differ}
        batch = self.batch_written()
        if not changed and not batch:
            return
        marks, self._marks, self._batch = self._marks, None, []
        written = any(not marks[n][2].buffer for n in changed if n in marks and n in now)
        for label in sorted(changed):
            mark = marks.get(label)
            if mark is not None and mark[2].buffer:
                _restore(mark, now.get(label))
            elif label in now and not now[label].buffer and now[label].tensor.is_floating_point():
                # no copy of a parameter is kept to put it back, and its values would publish the
                # batch to any reader (named_parameters, parameters_to_vector): they become NaN
                with torch.no_grad():
                    now[label].tensor.fill_(math.nan)
        owners: dict[str, list[str]] = {}
        for label in sorted(changed):
            entry = now.get(label) or marks[label][2]
            owners.setdefault(entry.where, []).append(label)
        modules = {**{w: m for m, w in self._outside}, **dict(self.model.named_modules())}
        lines = [
            f"{where or 'model'} ({', '.join(labels)}): "
            + (describe(modules[where]) if where in modules else "a tensor was added or removed")
            for where, labels in owners.items()
        ]
        if batch:
            lines.append(
                "the batch handed to loss_fn: written during the step (in place or through .data)"
            )
        if any(w.startswith("outside:") for w in owners):
            lines.append(
                "(outside:... names a module loss_fn ran that is not part of the model given to the "
                "optimizer: its state is held to the same rule)"
            )
        after = (
            "Its parameters were written with the batch in hand: they are set to NaN (nothing can put them "
            "back); rebuild the model"
            if written
            else "Its buffers were put back as they were before the batch."
        )
        message = (
            "model state changed during a private step, not by the optimizer (no parameter or "
            "buffer may change between the draw of a batch and its release):\n  "
            + "\n  ".join(lines)
            + "\n"
            + after
        )
        if self.poisoned is None:
            self.poisoned = message
            # the model itself is what a user saves: its state_dict() (torch.save, save_pretrained)
            # is refused too
            self.model.register_state_dict_pre_hook(
                lambda *_: self.refuse_if_poisoned("saving the model (state_dict)")
            )
        raise ModelStateChanged(message)


def _restore(mark: tuple, tensor: torch.Tensor | None) -> None:
    """Put a buffer back as the mark found it: its values written back, or the saved copy in its
    place."""
    (ident, _, _, shape), saved, entry = mark
    if tensor is not None and id(tensor) == ident and tuple(tensor.shape) == shape:
        with torch.no_grad():
            tensor.copy_(saved)
    else:
        entry.owner._buffers[entry.local] = saved
