"""The registry of the model-tier optimizers: every name a user can train a ``torch`` model with.

``make_private`` (its ``optimizer=`` names), the text trainer (``FinetuneConfig.method``,
:mod:`dpnc.lm.steps`), the command line's ``--method`` (choices and help) and the audit's model-tier
mechanisms read :data:`OPTIMIZERS`; each builds an optimizer through :func:`dpnc.tier.wiring.wire`,
which calls the entry's ``build`` with the entry's options (its :mod:`dpnc.options` class, built by
the door with :func:`dpnc.options.options_of`). Adding an optimizer is one class, one line here and
one case in ``tests/suites/test_tier_contract.py`` (which fails for an entry without one, and for an
option some door that offers the entry does not reach)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal

import torch

from dpnc.batches import DataRows, LoaderBatches
from dpnc.distributed import Group
from dpnc.options import (
    AdamWOptions,
    DPFirstOrderOptions,
    DPZeroOptions,
    MeZOOptions,
    Options,
    WrappedOptions,
)
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import Relation
from dpnc.tier.first_order import DPOptimizer
from dpnc.tier.zeroth_order import DPZeroOptimizer, MeZOOptimizer

__all__ = [
    "BOTH",
    "OPTIMIZERS",
    "RELATIONS",
    "FrontDoor",
    "Parts",
    "Spec",
    "names",
    "private_first_order",
    "refuse_others",
    "spec",
    "wrapping",
    "zeroth_order",
]

if TYPE_CHECKING:
    from torch import nn

FrontDoor = Literal["make_private", "trainer"]
BOTH: tuple[FrontDoor, ...] = ("make_private", "trainer")
RELATIONS = tuple(r.value for r in Relation)  # every private entry's ledger supports both


@dataclass
class Parts:
    """What a front door hands an entry's ``build``: the model and its trainable parameters, where
    batches come from, the noise multiplier (None: not private), the ledger, the secret noise, the
    process group and the options.

    ``batches`` is the make_private loader's pending batch (:class:`~dpnc.batches.LoaderBatches`),
    or None when the optimizer draws from ``sampler`` itself and reads the rows through ``data``
    (the trainer); ``options`` is the entry's options object (:attr:`Spec.options`), checked when it
    was built."""

    model: nn.Module
    params: list[torch.Tensor]
    sampler: object
    steps: int
    noise_multiplier: float | None
    accountant: Accountant
    noise: NoiseSource | None = None
    group: Group | None = None
    batches: LoaderBatches | None = None
    data: DataRows | None = None
    options: Options = None  # type: ignore[assignment]

    def loader_batches(self) -> LoaderBatches:
        """The pending-batch source a first-order step takes its batch from: the loader's, or one
        over the sampler that fetches rows through ``data`` (the trainer draws each batch before the
        step)."""
        if self.batches is not None:
            return self.batches
        return LoaderBatches(self.sampler, self.steps, self.group, fetch=self.data.rows)

    def zeroth_order_source(self) -> dict:
        """A zeroth-order optimizer's batch source: the loader's pending batch, or the sampler and
        the rows."""
        if self.batches is not None:
            return {"sampler": self.batches}
        return {"sampler": self.sampler, "data": self.data}


@dataclass(frozen=True)
class Spec:
    """One model-tier optimizer as the front doors see it.

    Attributes:
        cls: the class whose ``step`` runs (DPZero, MeZO, DPOptimizer, a torch optimizer for a
            non-private baseline).
        private: whether its releases are noised (a run with it claims a finite ε).
        order: 0 for zeroth order (forward passes only), 1 for first order (per-example gradients).
        relations: the neighbouring relations its ledger supports.
        help: one line for ``--help`` and the docs.
        build: ``build(parts) -> optimizer``, reading ``parts.options`` (an instance of
            ``options``).
        options: the class of its options (:mod:`dpnc.options`): fields with defaults, rules and
            help. Every front door that offers the entry reaches each field
            (``tests/suites/test_tier_contract.py``).
        doors: the front doors that offer it (the non-private AdamW baseline is the trainer's only).
    """

    cls: type
    private: bool
    order: Literal[0, 1]
    relations: tuple[str, ...]
    help: str
    build: Callable[[Parts], torch.optim.Optimizer]
    options: type[Options]
    doors: tuple[FrontDoor, ...] = BOTH


def zeroth_order(
    cls: type[DPZeroOptimizer] | type[MeZOOptimizer],
) -> Callable[[Parts], torch.optim.Optimizer]:
    """The build of a zeroth-order optimizer from :class:`~dpnc.options.DPZeroOptions` (private:
    with clip and σ) or :class:`~dpnc.options.MeZOOptions`."""

    def build(p: Parts) -> torch.optim.Optimizer:
        o = p.options
        private = (
            {"clip": o.clip, "noise_multiplier": p.noise_multiplier, "noise": p.noise}
            if p.noise_multiplier is not None
            else {}
        )
        return cls(
            p.params,
            lr=o.lr,
            smoothing=o.smoothing,
            accountant=p.accountant,
            direction=o.direction,
            seed=o.seed,
            model=p.model,
            group=p.group,
            cache_directions=o.cache_directions,
            **private,
            **p.zeroth_order_source(),
        )

    return build


def private_first_order(
    inner: type[torch.optim.Optimizer], instance: torch.optim.Optimizer | None = None
) -> Callable[[Parts], DPOptimizer]:
    """The build of a :class:`DPOptimizer` around ``inner``, from
    :class:`~dpnc.options.DPFirstOrderOptions`; or around ``instance``, wrapped as it is (its lr and
    state are its own), from :class:`~dpnc.options.WrappedOptions`."""

    def build(p: Parts) -> DPOptimizer:
        o = p.options
        wrapped = instance
        if wrapped is None:
            try:
                wrapped = inner(p.params, lr=o.lr, **dict(o.optimizer_kwargs or {}))
            except TypeError as error:
                raise ValueError(
                    f"optimizer_kwargs must be arguments of {inner.__name__}; got "
                    f"{o.optimizer_kwargs!r} ({error})"
                ) from None
        return DPOptimizer(
            wrapped,
            model=p.model,
            clip=o.clip,
            noise_multiplier=p.noise_multiplier,
            batches=p.loader_batches(),
            accountant=p.accountant,
            noise=p.noise,
            per_example=o.per_example,
            microbatch=o.microbatch,
        )

    return build


def _adamw(p: Parts) -> torch.optim.AdamW:
    return torch.optim.AdamW(p.params, lr=p.options.lr, **dict(p.options.optimizer_kwargs or {}))


OPTIMIZERS: dict[str, Spec] = {
    "dpzero": Spec(
        DPZeroOptimizer,
        True,
        0,
        RELATIONS,
        "DPZero: private zeroth order (forward passes only)",
        zeroth_order(DPZeroOptimizer),
        DPZeroOptions,
    ),
    "mezo": Spec(
        MeZOOptimizer,
        False,
        0,
        RELATIONS,
        "MeZO: zeroth order, not private",
        zeroth_order(MeZOOptimizer),
        MeZOOptions,
    ),
    "dp-adamw": Spec(
        DPOptimizer,
        True,
        1,
        RELATIONS,
        "DP-AdamW: per-example clipped gradients, AdamW's update",
        private_first_order(torch.optim.AdamW),
        DPFirstOrderOptions,
    ),
    "dp-sgd": Spec(
        DPOptimizer,
        True,
        1,
        RELATIONS,
        "DP-SGD: per-example clipped gradients, SGD's update",
        private_first_order(torch.optim.SGD),
        DPFirstOrderOptions,
        doors=("make_private",),
    ),
    "adamw": Spec(
        torch.optim.AdamW,
        False,
        1,
        RELATIONS,
        "AdamW: first order, not private",
        _adamw,
        AdamWOptions,
        doors=("trainer",),
    ),
}


def names(
    door: FrontDoor, *, private: bool | None = None, order: int | None = None
) -> tuple[str, ...]:
    """The registry's names a front door offers (in registry order), optionally only the private
    ones or one order."""
    return tuple(
        name
        for name, spec in OPTIMIZERS.items()
        if door in spec.doors
        and (private is None or spec.private == private)
        and (order is None or spec.order == order)
    )


def spec(name: str, door: FrontDoor | None = None) -> Spec:
    """The entry called ``name`` (ValueError listing the names the door offers otherwise)."""
    offered = names(door) if door is not None else tuple(OPTIMIZERS)
    if name not in offered:
        raise ValueError(f"optimizer must be one of {list(offered)}; got {name!r}")
    return OPTIMIZERS[name]


def wrapping(
    inner: type[torch.optim.Optimizer], instance: torch.optim.Optimizer | None = None
) -> Spec:
    """The entry of a user's torch optimizer class (or ``instance``) that make_private wraps as
    dp-adamw's is."""
    options = WrappedOptions if instance is not None else DPFirstOrderOptions
    return Spec(
        DPOptimizer,
        True,
        1,
        RELATIONS,
        f"DP-{inner.__name__}",
        private_first_order(inner, instance),
        options,
        doors=("make_private",),
    )


def refuse_others(name: str, entry: Spec, values: Mapping[str, object]) -> None:
    """At a door whose every option argument may be set (make_private): a value (not None) of an
    option that the entry does not take is refused, naming the entries that take it, instead of
    being dropped unread."""
    for key, value in values.items():
        if value is None or key in _fields(entry):
            continue
        takers = [n for n in names("make_private") if key in _fields(OPTIMIZERS[n])]
        orders = {OPTIMIZERS[n].order for n in takers}
        kind = (
            "zeroth-order"
            if orders == {0}
            else "first-order"
            if orders == {1}
            else "private"
            if all(OPTIMIZERS[n].private for n in takers)
            else "some"
        )
        raise ValueError(
            f"{key} must be None for optimizer={name!r}: {key} is for {kind} optimizers only "
            f"({', '.join(takers)}); got {value!r}"
        )


def _fields(entry: Spec) -> set[str]:
    return {f.name for f in fields(entry.options)}
