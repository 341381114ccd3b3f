"""``make_private``: a model, a dataset and a privacy target in; optimizer, loader and accountant
out, so the user keeps a plain torch loop (Opacus's ``PrivacyEngine.make_private`` is the model).

See docs/getting-started.md for its use and docs/privacy.md for the batch contract and its
refusals."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data import Sampler as TorchSampler
from torch.utils.data.dataloader import default_collate

from dpnc import distributed
from dpnc.batches import LoaderBatches
from dpnc.checks import check_integer
from dpnc.declared import delta_note, n_note, tell_owner
from dpnc.options import option_names, options_of
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.budget import Budget, check_delta, check_epsilon
from dpnc.privacy.noise import NoiseSource
from dpnc.sampling import PoissonSampler
from dpnc.self_audit import SelfAudit
from dpnc.tier.base import StepHooks, check_arguments, require_ready
from dpnc.tier.first_order import DPOptimizer
from dpnc.tier.registry import OPTIMIZERS as REGISTRY
from dpnc.tier.registry import names, refuse_others, wrapping
from dpnc.tier.wiring import wire
from dpnc.tier.zeroth_order import DPZeroOptimizer, MeZOOptimizer

OPTIMIZERS = names("make_private")  # the registry's names make_private offers


class PoissonBatchSampler(TorchSampler):
    """The loader's ``batch_sampler``: yields the indices of the secret Poisson batches, ``steps``
    in all.

    Each pass (``iter``) yields up to ``per_epoch`` batches (all that remain when None), each a
    fresh secret Poisson draw. A pass begun after all ``steps`` batches were drawn raises
    ValueError: the budget was calibrated for them, and a loop that silently yielded nothing would
    look like training."""

    def __init__(self, batches: LoaderBatches, per_epoch: int | None = None) -> None:
        super().__init__()
        self.batches = batches
        self.per_epoch = per_epoch

    def __iter__(self):
        if self.batches.remaining <= 0:
            raise ValueError(
                f"the loader has yielded all steps={self.batches.steps} batches the noise was calibrated "
                "for: another pass would spend beyond the privacy budget. Build a new run with "
                "make_private(..., continue_from=accountant) for more steps (its ε adds to this one's, "
                "in the accountant it returns), or ask for enough steps or epochs at the start"
            )
        count = 0
        while self.batches.remaining > 0 and (self.per_epoch is None or count < self.per_epoch):
            count += 1
            yield self.batches.part(self.batches.draw()).tolist()
        self.batches.charge_dropped()  # the pass's last batch, if no step took it

    def __len__(self) -> int:
        remaining = self.batches.remaining
        return remaining if self.per_epoch is None else min(self.per_epoch, remaining)


class _HoldingCollate:
    """The user's (or torch's default) collate, whose batch is held as the pending batch's inputs.

    An empty Poisson batch becomes a 0-row batch of the dataset's structure (``template``; None when
    the collate accepts ``[]`` itself)."""

    def __init__(
        self, collate_fn: Callable[[list], Any], template: Any, batches: LoaderBatches
    ) -> None:
        self.collate_fn, self.template, self.batches = collate_fn, template, batches

    def __call__(self, items: list) -> Any:
        empty = len(items) == 0 and self.template is not None
        batch = _empty_like(self.template) if empty else self.collate_fn(items)
        return self.batches.hold(_plain(batch))


def _plain(batch: Any) -> Any:
    """A ``Mapping`` subclass (transformers' ``BatchEncoding``) as a plain dict: torch.func maps
    over dicts."""
    return dict(batch) if isinstance(batch, Mapping) and type(batch) is not dict else batch


def _empty_like(batch: Any) -> Any:
    """A batch of the same structure with 0 rows and fresh storage (none of ``batch``'s values)."""
    if isinstance(batch, torch.Tensor):
        if batch.ndim == 0:
            raise ValueError("a collated batch holds a 0-d tensor, which has no batch dimension")
        return torch.empty((0, *batch.shape[1:]), dtype=batch.dtype, device=batch.device)
    if isinstance(batch, np.ndarray):
        return np.empty((0, *batch.shape[1:]), dtype=batch.dtype)
    if isinstance(batch, Mapping):
        return type(batch)({k: _empty_like(v) for k, v in batch.items()})
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple
        return type(batch)(*(_empty_like(v) for v in batch))
    if isinstance(batch, (list, tuple)):
        if all(
            isinstance(v, (str, bytes, int, float)) for v in batch
        ):  # a list of per-example scalars
            return type(batch)()
        return type(batch)(_empty_like(v) for v in batch)
    raise ValueError(
        f"cannot build an empty batch from a collated {type(batch).__name__}; pass a "
        "collate_fn that returns tensors, arrays, lists, tuples or dicts of them, or one that "
        "accepts an empty list"
    )


def _empty_template(data: Dataset, collate_fn: Callable[[list], Any]) -> Any:
    """The structure of a collated batch, to build empty batches from (checked at construction)."""
    try:
        collate_fn([])
    except Exception:  # default_collate and most custom ones refuse []: build from the structure
        return _empty_like(collate_fn([data[0]]))
    return None


def make_private(
    model: nn.Module,
    *,
    data: Dataset,
    n: int | None = None,
    optimizer: str | type[torch.optim.Optimizer] | torch.optim.Optimizer = "dpzero",
    target_epsilon: float | None = None,
    delta: float | None = None,
    steps: int | None = None,
    epochs: int | None = None,
    batch_size: int,
    noise_multiplier: float | None = None,
    accountant: str = "pld",
    collate_fn: Callable[[list], Any] | None = None,
    testing_seed: int | None = None,
    audit: SelfAudit | None = None,
    continue_from: Accountant | None = None,
    **options: Any,
) -> tuple[DPZeroOptimizer | MeZOOptimizer | DPOptimizer, DataLoader, Accountant]:
    """A private training run: optimizer, loader of secret Poisson batches, accountant.

    Implements: DPZero (Zhang et al. 2024, Algorithm 2 with Poisson minibatches and the seed trick),
    or DP-SGD (Abadi et al. 2016) with any torch optimizer's update, with the noise multiplier
    calibrated by ``accountant`` (PLD by default) to (target_epsilon, delta) after T steps under
    add/remove, at sampling rate q = batch_size / n: T = ``steps``, or ``epochs`` × ⌈n / batch_size⌉
    (Opacus's ``make_private_with_epsilon``). The returned accountant answers ``epsilon(delta)`` /
    ``get_epsilon(delta)`` by that same accountant (its ``report`` gives RDP, PLD and zCDP side by
    side). Its rules (the batch contract, the refusals): docs/getting-started.md and
    docs/privacy.md.

    The optimizer's options (``**options``) build its registry entry's :mod:`dpnc.options` class,
    whose defaults and rules are the only ones: None leaves an option's default, and one the
    optimizer does not take is refused unless None.

    Args:
        model: the ``nn.Module`` to train; its trainable parameters are optimized. Zeroth order: in
            eval mode (no active dropout, no train-mode BatchNorm); first order: no train-mode
            BatchNorm.
        data: a map-style torch ``Dataset`` (``len`` and ``__getitem__``) of at least one example.
        n: the **public** number of training examples, or a public bound on it (required for private
            optimizers). It sets q = batch_size / n, the noise and the ledger; ``len(data)`` never
            does, because under add/remove it differs between neighbouring datasets (the ledger
            would tell them apart). Every row of ``data`` joins each batch with probability q,
            whatever their number. MeZO: ``len(data)`` by default. An n more than 2× away from
            ``len(data)``, and δ ≥ 1/n, are remarked on to the data's owner as a
            ``dpnc.declared.DataWarning`` (it reads the data: keep it out of published files).
        optimizer: ``"dpzero"`` (private), ``"mezo"`` (not private; then leave ``target_epsilon``,
            ``delta``, ``clip`` and ``noise_multiplier`` unset), or first order: ``"dp-adamw"``,
            ``"dp-sgd"``, a ``torch.optim.Optimizer`` subclass, built as ``cls(params, lr=lr,
            **optimizer_kwargs)``, or (as Opacus takes it) an instance built on the model's
            trainable parameters, e.g. ``torch.optim.SGD(model.parameters(), lr=0.1)``, wrapped as
            it is (its ``lr`` and state are its own: leave ``lr`` and ``optimizer_kwargs`` unset). A
            dpnc optimizer (already private) is refused.
        target_epsilon: ε > 0 to spend in T steps (private optimizers, unless ``noise_multiplier``).
        delta: δ in (0, 1) (with ``target_epsilon``).
        steps: number of steps T >= 1: the loader yields exactly that many batches over its lifetime
            (one ``for`` loop yields them all; a loop broken off early resumes where it stopped).
            Give ``steps`` or ``epochs``.
        epochs: number of epochs E >= 1, instead of ``steps``: T = E × ⌈n / batch_size⌉, and each
            ``for batch in loader`` is one epoch of ⌈n / batch_size⌉ fresh secret Poisson batches
            (each example joins each batch with probability q, so an epoch sees it about once), as a
            DataLoader's epochs; ``len(loader)`` is the epoch's length. Either way a pass begun
            after all T batches were drawn raises ValueError (never a silent empty epoch).
        batch_size: expected batch size B, 1 <= B <= n (the fixed denominator of each mean).
        accountant: ``"pld"`` (default; the tighter) or ``"rdp"``: calibrates the noise, and is the
            default answer of the returned accountant's ``epsilon(delta)``.
        noise_multiplier: σ/Δ >= 0 to use instead of calibrating to ``target_epsilon`` (then leave
            that and ``delta`` unset); 0 adds no noise (not private: ε = ∞; for baselines and
            tests).
        collate_fn: how the loader collates a batch (torch's default if None). On an empty
            Poisson batch the loader yields an empty batch of the dataset's structure (every tensor
            with 0 rows, built once from the first example's collated structure, holding none of
            its values), so the loop body runs as for any batch; a ``collate_fn`` that accepts
            ``[]`` builds it itself. The loader has no worker processes: they would prefetch, and
            the batch just yielded would no longer be the pending one.
        testing_seed: tests only. Seeds the batch sampler and the privacy noise, so batches are
            reproducible; every release is marked not secret and every report says NOT PRIVATE.
        audit: a :class:`dpnc.self_audit.SelfAudit` (private optimizers, one process): its canaries
            join ``data``, each with probability ½ (secret), n becomes n + m, and ``audit.result()``
            gives the run's one-run ε lower bound after training (docs/audit.md). The run trains on
            other data than a plain one.
        continue_from: the accountant of an earlier run on the same data (or
            ``Accountant.from_json`` of its saved ledger): the returned accountant starts with its
            entries, so its ε is the two runs' together; ``target_epsilon`` calibrates this run's
            steps alone.
        **options: the optimizer's options by name, its registry entry's :mod:`dpnc.options` class
            (the one place of their defaults, rules and help): ``lr`` (step size >= 0, in
            ``param_groups`` so schedulers work; required unless ``optimizer`` is an instance),
            ``clip`` (C > 0 of each example's scalar difference or gradient norm; required by the
            private optimizers), ``smoothing``, ``direction``, ``seed`` (the public direction seed,
            safe to log) and ``cache_directions`` (zeroth order), ``optimizer_kwargs`` (e.g.
            ``weight_decay``), ``per_example`` (``"auto"``, ``"layers"``, ``"vmap"`` or ``"loop"``)
            and ``microbatch`` (first order). Any other name is refused.

    Under ``torchrun`` (:func:`dpnc.distributed.from_environment` finds a group) the run is data
    parallel (docs/distributed.md): the loader yields this rank's part of each batch and rank
    0's accountant holds the ledger.

    Returns:
        ``(optimizer, loader, accountant)``. ``optimizer.step(loss_fn)`` takes the batch the loader
        just yielded, calls ``loss_fn(*batch)`` (a list or tuple batch unpacked, a dict as one
        argument) for its per-example losses, and returns their mean. On an empty batch
        ``loss_fn`` is not called and the mean is ``nan``: DPZero releases noise only (recorded
        like any step), MeZO makes no update.

    Raises:
        ValueError: an argument out of range (named, with the rule), an unsupported optimizer, a
            DistributedDataParallel wrapper, or a model not ready for the optimizer's steps; all
            before any example is touched by a step.
    """
    # the optimizer's options, by the names of dpnc.options (numpy scalars as Python numbers)
    chosen = {k: _python_number(v) for k, v in options.items() if k in option_names()}
    unknown = {k: v for k, v in options.items() if k not in chosen}
    if unknown:
        raise TypeError(_unknown_arguments(unknown))
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    if isinstance(model, nn.parallel.DistributedDataParallel):
        raise ValueError(
            "model must be the module itself, not a DistributedDataParallel wrapper: under torchrun dpnc's "
            "step sums the ranks' clipped gradients itself (one noisy release per batch), which DDP's "
            "all-reduce of the gradients would repeat; pass model.module and call it in loss_fn"
        )
    # numpy scalars (a config read with numpy, a grid from np.arange) as the Python numbers every
    # check expects
    n, steps, epochs, batch_size, testing_seed = map(
        _python_number, (n, steps, epochs, batch_size, testing_seed)
    )
    target_epsilon, delta, noise_multiplier = map(
        _python_number, (target_epsilon, delta, noise_multiplier)
    )
    first_order = _first_order_class(optimizer)
    instance = optimizer if isinstance(optimizer, torch.optim.Optimizer) else None
    _check_model(model, first_order is not None)
    rows = _check_data(data)
    name = optimizer.lower() if isinstance(optimizer, str) else "first-order"
    private = (
        REGISTRY[name].private if isinstance(optimizer, str) else True
    )  # a wrapped torch optimizer: DP
    if n is None and private:
        raise ValueError(
            "n must be the public number of training examples (or a public bound on it): it sets "
            "q = batch_size / n and the noise, and dpnc never reads it off the private data; got None"
        )
    n = rows if n is None else n
    check_integer(n=n)
    if (
        audit is not None
    ):  # the canaries drawn in join the data; the public n grows by m (docs/audit.md)
        data, n = _self_audited(audit, data, n, delta, name)
        rows = _check_data(data)
    if (steps is None) == (epochs is None):
        raise ValueError(
            f"give exactly one of steps and epochs (T = epochs × ⌈n / batch_size⌉); got steps={steps!r}, "
            f"epochs={epochs!r}"
        )
    check_integer(**({"steps": steps} if epochs is None else {"epochs": epochs}))
    if not (
        isinstance(batch_size, int) and not isinstance(batch_size, bool) and 1 <= batch_size <= n
    ):
        raise ValueError(
            f"batch_size must be an integer in [1, {n}] (n, the declared size); got {batch_size!r}"
        )
    per_epoch = None if epochs is None else -(-n // batch_size)
    steps = steps if epochs is None else epochs * per_epoch
    if accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be one of ['pld', 'rdp']; got {accountant!r}")
    if instance is not None:
        for key in ("lr", "optimizer_kwargs"):
            if (value := chosen.get(key)) is not None:
                raise ValueError(
                    f"{key} must be None when optimizer is an instance ({type(instance).__name__}: its "
                    f"param_groups hold its own lr and arguments); got {value!r}"
                )
    if collate_fn is not None and not callable(collate_fn):
        raise ValueError(f"collate_fn must be callable or None; got {collate_fn!r}")
    if testing_seed is not None and (
        not isinstance(testing_seed, int) or isinstance(testing_seed, bool) or testing_seed < 0
    ):
        raise ValueError(f"testing_seed must be an integer >= 0 or None; got {testing_seed!r}")
    if not private:
        for key, value in (
            ("target_epsilon", target_epsilon),
            ("delta", delta),
            ("noise_multiplier", noise_multiplier),
        ):
            if value is not None:
                who = REGISTRY[name].help.partition(":")[0]
                raise ValueError(
                    f"{key} must be None for optimizer={name!r} ({who} is not private: no noise, "
                    f"no clipping, ε = ∞); got {value!r}"
                )
    elif noise_multiplier is None:
        check_epsilon(target_epsilon, "target_epsilon")
        check_delta(delta)
    else:
        check_arguments(noise_multiplier=noise_multiplier)
        for key, value in (("target_epsilon", target_epsilon), ("delta", delta)):
            if value is not None:
                raise ValueError(
                    f"{key} must be None when noise_multiplier is given (it replaces calibrating "
                    f"to a target); got {value!r}"
                )
    # The user's torch optimizer (class or instance) is wrapped as dp-adamw's is.
    entry = REGISTRY[name] if isinstance(optimizer, str) else wrapping(first_order, instance)
    if not isinstance(optimizer, str):
        name = f"dp-{first_order.__name__.lower()}"
    refuse_others(name, entry, chosen)
    # the optimizer's own rules, checked before calibrating (noise will be added: clip must be
    # finite)
    options = options_of(
        entry.options, chosen, noised=private and (noise_multiplier is None or noise_multiplier > 0)
    )
    # The owner's view (n against len(data) reads the data): a DataWarning on the terminal, never in
    # the ledger.
    for note in (n_note(n, rows), None if delta is None else delta_note(delta, n)):
        if note is not None:
            tell_owner(note)

    group = distributed.from_environment()

    collate = collate_fn if collate_fn is not None else default_collate
    template = _empty_template(data, collate)

    if testing_seed is None:
        sampler, noise = PoissonSampler(n, batch_size, rows=rows), None
    else:
        sampler = PoissonSampler.for_testing(n, batch_size, seed=testing_seed, rows=rows)
        noise = NoiseSource.for_testing(testing_seed + 1)
    batches = LoaderBatches(sampler, steps, group)
    budget = (
        None
        if not private or noise_multiplier is not None
        else Budget(float(target_epsilon), float(delta))
    )
    ledger = Accountant("add/remove", method=accountant)
    if continue_from is not None:  # the earlier run's releases first: the report composes both
        if not isinstance(continue_from, Accountant):
            raise ValueError(
                "continue_from must be the earlier run's Accountant (Accountant.from_json of its saved "
                f"ledger); got {type(continue_from).__name__}"
            )
        ledger.extend(continue_from)
    opt, wiring = wire(
        model,
        name,
        entry=entry,
        sampler=sampler,
        n=n,
        steps=steps,
        accountant=ledger,
        budget=budget,
        noise_multiplier_given=None if noise_multiplier is None else float(noise_multiplier),
        calibrate_by=accountant,
        noise=noise,
        group=group,
        batches=batches,
        options=options,
    )
    opt.wiring = (
        wiring  # what the run's public outputs say about its privacy (dpnc.tier.wiring.Wiring)
    )
    if audit is not None:
        audit.watch(opt)
    loader = DataLoader(
        data,
        batch_sampler=PoissonBatchSampler(batches, per_epoch),
        collate_fn=_HoldingCollate(collate, template, batches),
        num_workers=0,
    )
    return opt, loader, ledger


def _self_audited(
    audit: Any, data: Dataset, n: int, delta: float | None, name: str
) -> tuple[Dataset, int]:
    """The run's data and public n with the audit's canaries drawn in (refusals first: nothing
    drawn)."""
    if not isinstance(audit, SelfAudit):
        raise ValueError(
            "audit must be a dpnc.self_audit.SelfAudit(m, row=..., coordinates=...) (the canary "
            f"design is declared, dpnc cannot build a canary input for an arbitrary model); got {audit!r}"
        )
    parallel = (
        distributed.world_size() > 1
    )  # read without starting a group (make_private starts it later)
    if name == "mezo" or parallel:
        raise ValueError(
            "audit needs a private optimizer in one process (MeZO claims nothing; a data-parallel "
            f"self-audit is not built); got optimizer={name!r}, data parallel: {parallel}"
        )
    return audit.attach(data, n, delta)


def _first_order_class(optimizer: Any) -> type[torch.optim.Optimizer] | None:
    """The class that steps for a first-order choice (a registry name's, or the user's torch
    optimizer class or instance's); None for a zeroth-order one; ValueError otherwise."""
    offered = list(names("make_private"))  # the registry as it is now
    if isinstance(optimizer, torch.optim.Optimizer):
        if isinstance(optimizer, StepHooks):
            raise ValueError(
                f"optimizer must be a name {offered}, a torch.optim.Optimizer subclass, or an "
                "instance of one built on the model's parameters (wrapped by make_private); got a "
                f"{type(optimizer).__name__}, already private: pass the torch optimizer it would wrap"
            )
        return type(optimizer)
    if isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer):
        if issubclass(optimizer, StepHooks):
            raise ValueError(
                f"optimizer must be a name {offered} or a non-private torch.optim.Optimizer "
                f"subclass to wrap; got {optimizer.__name__}"
            )
        return optimizer
    if not isinstance(optimizer, str) or optimizer.lower() not in offered:
        raise ValueError(
            f"optimizer must be one of {offered} or a torch.optim.Optimizer subclass; "
            f"got {optimizer!r} (or an instance built on the model's parameters)"
        )
    entry = REGISTRY[optimizer.lower()]
    return entry.cls if entry.order == 1 else None


def _check_model(model: nn.Module, first_order: bool) -> None:
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError(
            "model must have at least one trainable parameter (requires_grad=True); got none"
        )
    require_ready(model, dropout=not first_order)  # and again before every step


def _python_number(value):
    """A numpy integer or float scalar as Python's int or float; anything else as it is (checked
    later)."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


# Opacus's names for what make_private takes under another name (or does always).
OPACUS_NAMES = {
    "target_delta": "delta=",
    "max_grad_norm": "clip=",
    "module": "model (the first argument)",
    "data_loader": "data=loader.dataset, batch_size= (dpnc draws the secret Poisson batches itself)",
    "sample_rate": "batch_size= (the expected batch size; q = batch_size / n)",
    "poisson_sampling": "nothing: the loader always draws secret Poisson batches",
    "noise_generator": "nothing: the noise comes from a secret source (testing_seed= in tests only)",
    "secure_mode": "nothing: the noise source is seeded from operating-system entropy",
    "grad_sample_mode": "per_example= ('auto', 'layers', 'vmap' or 'loop')",
}


def _unknown_arguments(unknown: dict) -> str:
    hints = [f"{k} -> {OPACUS_NAMES[k]}" for k in unknown if k in OPACUS_NAMES]
    message = (
        f"make_private() got unexpected keyword arguments {sorted(unknown)} (the optimizers' "
        f"options are {', '.join(option_names())}: dpnc.options)"
    )
    if hints:
        message += "; Opacus's names, in dpnc: " + "; ".join(hints)
    return (
        message
        + ". It returns (optimizer, loader, accountant), not Opacus's (model, optimizer, loader)"
    )


def _check_data(data: Dataset) -> int:
    if isinstance(data, DataLoader):
        raise ValueError(
            "data must be a Dataset, not a DataLoader: pass data=loader.dataset and batch_size= "
            "(make_private builds the loader of secret Poisson batches itself)"
        )
    if (
        isinstance(data, tuple)
        and data
        and all(isinstance(t, torch.Tensor) and t.ndim for t in data)
        and len({len(t) for t in data}) == 1
    ):
        # (X, y): len is the number of tensors, so it would be a dataset of two "examples", X and y.
        # (A list of per-example tensors is a dataset, and stays one.)
        raise ValueError(
            "data must be a Dataset of examples; got a tuple of tensors with one length, as (X, y). "
            "Wrap them: data=torch.utils.data.TensorDataset(X, y)"
        )
    if isinstance(data, torch.utils.data.IterableDataset) or not (
        hasattr(data, "__len__") and hasattr(data, "__getitem__")
    ):
        raise ValueError(
            f"data must be a map-style torch Dataset (with __len__ and __getitem__); "
            f"got {type(data).__name__}"
        )
    n = len(data)
    if n < 1:
        raise ValueError(f"data must hold at least one example; got {n} examples")
    return n
