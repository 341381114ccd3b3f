"""The hyper-parameters of the model tier's optimizers: one frozen dataclass per registry entry
(peft's ``Config``), each field with its default, rule and help, checked in ``__post_init__``.

The front doors keep the run's shape and pass every other name through :func:`options_of`:
``make_private(**options)``, ``FinetuneConfig`` (a field, or ``options``), ``dpnc finetune`` (flags
generated from :data:`ALL`) and ``DPTrainer(**options)``, so a new knob is one field here."""

from __future__ import annotations

import copy
import functools
import math
import typing
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields

from dpnc.checks import Rule, check_value

__all__ = [
    "ALL",
    "DIRECTIONS",
    "PER_EXAMPLE",
    "AdamWOptions",
    "DPFirstOrderOptions",
    "DPZeroOptions",
    "MeZOOptions",
    "Options",
    "WrappedOptions",
    "check_noised",
    "check_options",
    "option_field",
    "option_names",
    "options_of",
]

PER_EXAMPLE = (
    "auto",
    "layers",
    "vmap",
    "loop",
)  # how a first-order step forms per-example gradients
DIRECTIONS = ("gaussian", "sphere")  # the zeroth-order directions u


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# The rules (what a value must be, a predicate), in the words of dpnc.tier.base.check_arguments,
# which reads them.
LR: Rule = (">= 0 and finite", lambda v: _number(v) and v >= 0 and math.isfinite(v))
SMOOTHING: Rule = ("> 0 and finite", lambda v: _number(v) and v > 0 and math.isfinite(v))
CLIP: Rule = ("> 0 (inf only without noise)", lambda v: _number(v) and v > 0 and not math.isnan(v))
NOISED_CLIP = "clip must be finite when noise_multiplier > 0 (the sensitivity is 2·clip/B)"


def _choice(choices: tuple[str, ...]) -> Rule:
    return f"one of {choices}", lambda v: v in choices


def _option(default, help: str, rule: Rule, **more) -> Field:
    """A field with its default, its rule and its help; ``more``: ``missing`` (the rule's words when
    the value is None), ``choices``, ``minimum`` (for the command line)."""
    return field(default=default, metadata={"help": help, "rule": rule, **more})


def _lr() -> Field:
    return _option(
        None,
        "Step size >= 0 (in param_groups: a scheduler edits it).",
        LR,
        missing="the step size, a number >= 0 (only an optimizer instance brings its own)",
    )


def _clip() -> Field:
    return _option(
        None,
        "Clipping threshold C > 0 of each example's contribution (DPZero: its scalar difference; first order: "
        "its gradient's norm); inf only without noise.",
        CLIP,
        missing="the clipping threshold C > 0 that a private optimizer needs (each example's "
        "contribution is clipped to C, and the noise is scaled to C). Start from clip=1.0 for a "
        "first-order gradient's norm, clip=5.0 for DPZero's scalar difference, and tune it so that a "
        "part of the examples is clipped (StepInfo.private_stats.clipped_fraction)",
    )


@dataclass(frozen=True, kw_only=True)
class Options:
    """The base of every entry's options: checks each field by its rule (``metadata["rule"]``)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            _check(f, getattr(self, f.name))


@dataclass(frozen=True, kw_only=True)
class MeZOOptions(Options):
    """MeZO's options (zeroth order, not private)."""

    lr: float | None = _lr()
    smoothing: float = _option(
        1e-3,
        "λ > 0 of the zeroth-order central difference (ℓ(x + λu) − ℓ(x − λu)) / 2λ.",
        SMOOTHING,
    )
    direction: str = _option(
        "gaussian",
        "Zeroth-order directions u: gaussian, or uniform on the sphere.",
        _choice(DIRECTIONS),
        choices=DIRECTIONS,
    )
    seed: int | None = _option(
        None,
        "Seed of the public direction generator (zeroth order); safe to log.",
        ("an integer >= 0 or None", lambda v: v is None or (_integer(v) and v >= 0)),
        minimum=0,
    )
    cache_directions: bool = _option(
        False,
        "Draw each step's direction once and keep it for x ± λu and the update: the same numbers, one "
        "generator pass a step instead of three, d more numbers of memory.",
        ("a bool", lambda v: isinstance(v, bool)),
    )


@dataclass(frozen=True, kw_only=True)
class DPZeroOptions(MeZOOptions):
    """DPZero's options: MeZO's and the clipping threshold."""

    clip: float | None = _clip()


@dataclass(frozen=True, kw_only=True)
class WrappedOptions(Options):
    """The options of a private first-order step around an optimizer instance of the user's
    (``make_private``): the instance brings its own lr and arguments."""

    clip: float | None = _clip()
    per_example: str = _option(
        "auto",
        "How per-example gradients are formed: auto (per layer where every trained layer is a kind of the "
        "per-layer route, docs/layers.md; else vmap, else the loop where vmap cannot batch a layer), layers, "
        "vmap (torch.func) or loop (one example at a time).",
        _choice(PER_EXAMPLE),
        choices=PER_EXAMPLE,
    )
    microbatch: int = _option(
        16,
        "Examples per vmapped chunk (the vmap route, or auto's vmap).",
        ("an integer >= 1", lambda v: _integer(v) and v >= 1),
        minimum=1,
    )


def _optimizer_kwargs() -> Field:
    return _option(
        None,
        "Further arguments of the torch optimizer, e.g. {'weight_decay': 0.01}.",
        ("a dict or None", lambda v: v is None or isinstance(v, Mapping)),
    )


@dataclass(frozen=True, kw_only=True)
class DPFirstOrderOptions(WrappedOptions):
    """DP-AdamW's and DP-SGD's options (and those of a torch optimizer class make_private wraps)."""

    lr: float | None = _lr()
    optimizer_kwargs: Mapping | None = _optimizer_kwargs()


@dataclass(frozen=True, kw_only=True)
class AdamWOptions(Options):
    """The non-private AdamW baseline's options."""

    lr: float | None = _lr()
    optimizer_kwargs: Mapping | None = _optimizer_kwargs()


ALL = (MeZOOptions, DPZeroOptions, WrappedOptions, DPFirstOrderOptions, AdamWOptions)


def _integer(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check(f: Field, value) -> None:
    if value is None and "missing" in f.metadata:
        raise ValueError(f"{f.name} must be {f.metadata['missing']}; got None")
    check_value(f.name, value, f.metadata["rule"])


@functools.cache
def _fields() -> dict[str, Field]:
    """Every option's field by name (the first class's where several declare it), its ``type``
    resolved."""
    found: dict[str, Field] = {}
    for cls in ALL:
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            if f.name not in found:
                found[f.name] = copy.copy(f)
                found[f.name].type = hints[f.name]
    return found


def option_names() -> tuple[str, ...]:
    """The names of every option of every class, in :data:`ALL`'s order."""
    return tuple(_fields())


def option_field(name: str) -> Field:
    """The field of option ``name``: its default, its type, and in ``metadata`` its help, rule, and
    where they apply ``choices`` and ``minimum`` (what a command line's option needs)."""
    return _fields()[name]


def check_options(values: Mapping[str, object]) -> None:
    """Each value by the rule of the option of its name (a config that holds every method's values
    checks those its method does not take as well)."""
    known = _fields()
    for name, value in values.items():
        _check(known[name], value)


def options_of(cls: type[Options], values: Mapping[str, object], *, noised: bool) -> Options:
    """``cls`` built from the values of its fields in ``values`` (a value None leaves the field's
    default; other names are not read), checked by its rules and :func:`check_noised`: the one way a
    front door builds options."""
    given = {f.name: values[f.name] for f in fields(cls) if values.get(f.name) is not None}
    options = cls(**given)
    check_noised(options, noised)
    return options


def check_noised(options: Options, noised: bool) -> None:
    """A noised run's clip is finite: the noise is scaled to it."""
    if noised and math.isinf(getattr(options, "clip", 0.0) or 0.0):
        raise ValueError(NOISED_CLIP)
