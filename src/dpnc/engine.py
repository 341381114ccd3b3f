"""``make_private``: a model, a dataset and a privacy target in; optimizer, loader and accountant out.

The façade wires what a user would otherwise wire by hand (Opacus's ``PrivacyEngine.make_private``
is the model): a secret Poisson sampler, the noise multiplier calibrated to the target, an
``Accountant("add/remove")`` and a zeroth-order optimizer of :mod:`dpnc.optim` that records every
release in it. The user keeps a plain torch loop::

    optimizer, loader, accountant = dpnc.make_private(
        model, data=dataset, optimizer="dpzero", target_epsilon=4.0, delta=1e-5,
        steps=600, batch_size=32, lr=0.05, clip=5.0)
    for xb, yb in loader:                        # exactly `steps` secret Poisson batches
        optimizer.step(lambda: per_example_loss(model(xb), yb))
    print(accountant.report(1e-5))

How the pieces hold together:

* **One batch, one release.** The loader is a real :class:`torch.utils.data.DataLoader` whose
  ``batch_sampler`` (:class:`PoissonBatchSampler`) draws each batch from the secret
  :class:`~dpnc.sampling.PoissonSampler` and leaves it *pending* in a :class:`LoaderBatches`. The
  optimizer's sampler is that :class:`LoaderBatches`: a step takes the pending batch (and no other),
  so the batch the closure evaluated is the batch the ledger describes. The closure's losses must
  have one entry per example of it (checked by :func:`dpnc.sampling.batch_losses`).
* **Refusals.** ``step`` raises ``ValueError`` — with nothing released and the parameters as they
  were — when the closure's losses do not match the pending batch, when no batch is pending (a
  second step on one batch would use data the ledger describes once), and after ``steps`` steps.
  A refused step leaves its batch pending, so a corrected closure may retry it.
* **Empty batches.** Poisson sampling may draw no example at all. The loader then yields an *empty
  batch of the dataset's structure* (every tensor with 0 rows, built once at construction from the
  collated structure of the first example, holding none of its values), so the user's loop body
  runs as for any batch; ``optimizer.step`` does **not** call the closure on it and DPZero releases
  noise only (its mean over the fixed denominator B is 0), which the ledger records like any other
  step. The returned loss is then ``nan`` (the mean of no losses). MeZO makes no update on an empty
  batch. A user ``collate_fn`` that accepts ``[]`` builds the empty
  batch itself.
* **Exactly ``steps`` batches.** The loader yields ``steps`` batches over its lifetime (a loop broken
  off early resumes where it stopped); ``len(loader)`` is the number left, never a realised size.
  ``num_workers`` is 0: worker processes prefetch batches, so "the batch the loader just yielded" would
  no longer be the pending one.

**Data parallel.** Under ``torchrun --nproc-per-node N`` (``WORLD_SIZE`` > 1, or a process group the script
initialised) the same script runs data parallel (:mod:`dpnc.distributed`): each rank builds the same run; at
each iteration rank 0's secret sampler alone draws the batch, which is broadcast, and each rank's loader yields
its own contiguous part of it (the other ranks' samplers draw nothing); a step exchanges a few numbers
(one ``all_reduce`` of the partial sums, rank 0's released scalar) and every rank applies the same update.
Rank 0 adds the noise and keeps the ledger: read ``accountant.report`` there (the other ranks' stay empty).
Zeroth-order optimizers only (a first-order step would all-reduce every gradient entry: that is DDP's job).

``optimizer="mezo"`` gives MeZO (not private: the report says ε = ∞; no calibration, no clip).

**First order.** ``optimizer="dp-adamw"``, ``"dp-sgd"`` or any ``torch.optim.Optimizer`` subclass gives a
:class:`~dpnc.first_order.DPOptimizer` wrapping that optimizer: per-example gradients by ``torch.func``, each
clipped to ``clip`` over all parameters, one noisy release of their mean per step (fixed denominator B)::

    optimizer, loader, accountant = dpnc.make_private(
        model, data=dataset, optimizer="dp-adamw", target_epsilon=4.0, delta=1e-5,
        steps=600, batch_size=32, lr=1e-3, clip=1.0)
    for xb, yb in loader:
        optimizer.step(lambda xb, yb: per_example_loss(model(xb), yb), xb, yb)

It needs the batch itself (``step(loss_fn, *inputs)``) to map ``loss_fn`` over its examples; the zeroth-order
optimizers accept the same call, so one loop serves all. ``optimizer.register_step_hook(fn)`` reports each step
(:class:`dpnc.optim.StepInfo`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data import Sampler as TorchSampler
from torch.utils.data.dataloader import default_collate

from dpnc import distributed
from dpnc.algorithms.dpzero import calibrate_noise
from dpnc.first_order import PER_EXAMPLE, DPOptimizer, validate_first_order
from dpnc.optim import DPZero, MeZO, check_arguments, require_ready
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import Relation, Release
from dpnc.sampling import PoissonSampler

ZEROTH_ORDER = ("dpzero", "mezo")
FIRST_ORDER = {"dp-adamw": torch.optim.AdamW, "dp-sgd": torch.optim.SGD}
OPTIMIZERS = (*ZEROTH_ORDER, *FIRST_ORDER)


class LoaderBatches:
    """The optimizer's sampler in a :func:`make_private` run: it hands out the loader's pending batch.

    The loader's batch sampler calls :meth:`draw` (a fresh secret Poisson batch, left pending); the
    optimizer's step calls :meth:`sample`, which takes the pending batch. Releases and the relation
    check are delegated to the :class:`~dpnc.sampling.PoissonSampler`, so each step is accounted as a
    Poisson-subsampled Gaussian at q = batch_size / n. Secret: never log what :meth:`sample` returns.

    With a :class:`~dpnc.distributed.Group`, :meth:`draw` is rank 0's draw broadcast to every rank (the other
    ranks' samplers are never used), so every rank holds the same pending batch (``shared``: the optimizer's
    step does not broadcast it again) and the loader yields this rank's part of it (:meth:`part`).
    """

    def __init__(self, sampler: PoissonSampler, steps: int, group: distributed.Group | None = None) -> None:
        self._sampler = sampler
        self.group = group
        self.shared = group is not None   # every rank's sample() is the same batch already
        self.steps = steps
        self.batch_size = sampler.batch_size
        self.drawn = 0   # batches the loader has drawn (public: one per loop iteration)
        self.used = 0    # batches a step has taken (= steps taken)
        self._pending: torch.Tensor | None = None
        self._taken: torch.Tensor | None = None  # the batch of the step in progress

    @property
    def secret(self) -> bool:
        return self._sampler.secret

    @property
    def remaining(self) -> int:
        """Batches the loader may still draw."""
        return self.steps - self.drawn

    def check_ready(self) -> None:
        """Refuse a step now if it could not take a batch (nothing pending, or all steps taken)."""
        if self.used >= self.steps:
            raise ValueError(f"steps must be at most {self.steps} (the number the run was built and its noise "
                             "calibrated for); all of them were taken. Build a new run with make_private for more")
        if self._pending is None:
            raise ValueError("no batch is pending: call optimizer.step once per batch the loader yields "
                             "(a second step on one batch would use data the privacy ledger describes once)")

    def draw(self) -> torch.Tensor:
        """Draw the next secret batch for the loader and leave it pending for the optimizer."""
        if self.remaining <= 0:
            raise ValueError(f"all steps={self.steps} batches have been drawn; the privacy budget was "
                             f"calibrated for {self.steps} steps")
        batch = self._sampler.sample() if self.group is None else self.group.broadcast_batch(self._sampler)
        self._pending = batch
        self.drawn += 1
        return batch

    def part(self, batch: torch.Tensor) -> torch.Tensor:
        """The examples of ``batch`` this process evaluates: all of them, or this rank's shard under a group."""
        return batch if self.group is None else self.group.shard(batch)

    def sample(self) -> torch.Tensor:
        """Take the pending batch (the one the loader yielded last) for one step."""
        self.check_ready()
        batch, self._pending = self._pending, None
        self._taken = batch
        self.used += 1
        return batch

    def give_back(self) -> None:
        """Undo :meth:`sample` after a refused step that released nothing: its batch is pending again."""
        if self._taken is not None and self._pending is None:
            self._pending, self._taken = self._taken, None
            self.used -= 1

    def release(self, sensitivity: float, sigma: float) -> Release:
        return self._sampler.release(sensitivity, sigma)

    def check_relation(self, relation: Relation | str) -> None:
        self._sampler.check_relation(relation)

    def __getstate__(self):
        raise TypeError("LoaderBatches holds secret batches and cannot be pickled or checkpointed")


class PoissonBatchSampler(TorchSampler):
    """The loader's ``batch_sampler``: yields the indices of the secret Poisson batches, ``steps`` in all."""

    def __init__(self, batches: LoaderBatches) -> None:
        super().__init__()
        self.batches = batches

    def __iter__(self):
        while self.batches.remaining > 0:
            yield self.batches.part(self.batches.draw()).tolist()

    def __len__(self) -> int:
        return self.batches.remaining


class _EmptyAwareCollate:
    """The user's (or torch's default) collate; an empty batch becomes a 0-row batch of the same structure."""

    def __init__(self, collate_fn: Callable[[list], Any], template: Any) -> None:
        self.collate_fn, self.template = collate_fn, template

    def __call__(self, items: list) -> Any:
        return _empty_like(self.template) if len(items) == 0 else self.collate_fn(items)


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
        if all(isinstance(v, (str, bytes, int, float)) for v in batch):  # a list of per-example scalars
            return type(batch)()
        return type(batch)(_empty_like(v) for v in batch)
    raise ValueError(f"cannot build an empty batch from a collated {type(batch).__name__}; pass a "
                     "collate_fn that returns tensors, arrays, lists, tuples or dicts of them, or one that "
                     "accepts an empty list")


def _empty_template(data: Dataset, collate_fn: Callable[[list], Any]) -> Any:
    """The structure of a collated batch, to build empty batches from (checked at construction)."""
    try:
        collate_fn([])
    except Exception:  # default_collate and most custom ones refuse []: build from the structure
        return _empty_like(collate_fn([data[0]]))
    return None


class _LoaderStep:
    """``step(closure)`` with a zero-argument closure on the batch the loader just yielded."""

    sampler: LoaderBatches
    accountant: Accountant

    def step(self, closure: Callable[..., torch.Tensor], *inputs: Any) -> torch.Tensor:  # type: ignore[override]
        """One step on the pending batch; ``closure(*inputs)`` returns its per-example losses, shape (len(batch),).

        ``closure()`` without ``inputs`` (it holds the batch itself), or ``step(loss_fn, xb, yb)`` as for the
        first-order :class:`~dpnc.first_order.DPOptimizer`.

        Returns the batch's mean loss (not private: a statistic of the training data; ``nan`` on an
        empty batch). Raises ``ValueError``, releasing nothing and restoring the parameters, when the
        losses do not match the batch, no batch is pending, or all ``steps`` steps were taken.
        """
        if closure is None or not callable(closure):
            raise ValueError(f"closure must be a callable returning the per-example losses of the batch "
                             f"the loader just yielded; got {closure!r}")
        batches, before = self.sampler, self.accountant.releases
        batches.check_ready()  # nothing pending, or all steps taken: refused before anything runs
        try:
            return super().step(lambda _batch: closure(*inputs))  # type: ignore[misc]
        except BaseException:
            if self.accountant.releases == before:  # nothing released: the batch may be retried
                batches.give_back()
            raise


class PrivateDPZero(_LoaderStep, DPZero):
    """:class:`dpnc.optim.DPZero` fed by a :func:`make_private` loader (closure takes no argument)."""


class PrivateMeZO(_LoaderStep, MeZO):
    """:class:`dpnc.optim.MeZO` fed by a :func:`make_private` loader (not private: ε = ∞)."""


@functools.lru_cache(maxsize=64)
def _noise_multiplier(target_epsilon: float, delta: float, steps: int, n: int, batch_size: int) -> float:
    """σ/Δ for Poisson add/remove by PLD (a function of public inputs only, so cached)."""
    return calibrate_noise("pld", target_epsilon, delta, steps, n, batch_size=batch_size)


def make_private(model: nn.Module, *, data: Dataset, optimizer: str | type[torch.optim.Optimizer] = "dpzero",
                 target_epsilon: float | None = None, delta: float | None = None, steps: int,
                 batch_size: int, lr: float, clip: float | None = None, noise_multiplier: float | None = None,
                 smoothing: float = 1e-3, collate_fn: Callable[[list], Any] | None = None,
                 direction: str = "gaussian", seed: int | None = None, optimizer_kwargs: dict | None = None,
                 per_example: str = "vmap", microbatch: int = 16, testing_seed: int | None = None,
                 ) -> tuple[PrivateDPZero | PrivateMeZO | DPOptimizer, DataLoader, Accountant]:
    """A private training run: optimizer, loader of secret Poisson batches, accountant.

    Implements: DPZero (Zhang et al. 2024, Algorithm 2 with Poisson minibatches and the seed trick), or DP-SGD
    (Abadi et al. 2016) with any torch optimizer's update, with the noise multiplier calibrated by PLD to
    (target_epsilon, delta) after ``steps`` steps under add/remove, at sampling rate q = batch_size / len(data).
    See the module docstring for the rules.

    Args:
        model: the ``nn.Module`` to train; its trainable parameters are optimized. Zeroth order: in eval mode
            (no active dropout, no train-mode BatchNorm); first order: no train-mode BatchNorm.
        data: a map-style torch ``Dataset`` (``len`` and ``__getitem__``) of n >= 1 examples.
        optimizer: ``"dpzero"`` (private), ``"mezo"`` (not private; then leave ``target_epsilon``, ``delta``,
            ``clip`` and ``noise_multiplier`` unset), or first order: ``"dp-adamw"``, ``"dp-sgd"`` or a
            ``torch.optim.Optimizer`` subclass, built as ``cls(params, lr=lr, **optimizer_kwargs)``.
        target_epsilon: ε > 0 to spend in ``steps`` steps (private optimizers, unless ``noise_multiplier``).
        delta: δ in (0, 1) (with ``target_epsilon``).
        steps: number of steps T >= 1: the loader yields exactly that many batches.
        batch_size: expected batch size B, 1 <= B <= n (the fixed denominator of each mean).
        lr: step size >= 0 (in ``optimizer.param_groups``, so schedulers work).
        clip: clipping threshold C > 0: of each per-example scalar difference (DPZero) or gradient norm (first
            order).
        noise_multiplier: σ/Δ >= 0 to use instead of calibrating to ``target_epsilon`` (then leave that and
            ``delta`` unset); 0 adds no noise (not private: ε = ∞; for baselines and tests).
        smoothing: λ > 0 of the central difference (zeroth order).
        collate_fn: how the loader collates a batch (torch's default if None).
        direction: ``"gaussian"`` or ``"sphere"`` directions (zeroth order).
        seed: seed of the public direction generator (zeroth order; random by default; safe to log).
        optimizer_kwargs: further arguments of the first-order torch optimizer (e.g. ``weight_decay``).
        per_example: ``"vmap"`` or ``"loop"``: how the first-order per-example gradients are formed.
        microbatch: examples per vmapped chunk (first order).
        testing_seed: tests only. Seeds the batch sampler and the privacy noise, so batches are
            reproducible; every release is marked not secret and every report says NOT PRIVATE.

    Under ``torchrun`` (:func:`dpnc.distributed.from_environment` finds a group) the run is data parallel: see the
    module docstring; the loader yields this rank's part of each batch and rank 0's accountant holds the ledger.

    Returns:
        ``(optimizer, loader, accountant)``. ``optimizer.step(loss_fn, *inputs)`` takes the batch the loader just
        yielded and a function giving its per-example losses (zeroth order also: a zero-argument closure
        returning them), and returns their mean.

    Raises:
        ValueError: an argument out of range (named, with the rule), an unsupported optimizer, a first-order
            optimizer under a data-parallel group, or a model not ready for the optimizer's steps; all before any
            example is touched by a step.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    first_order = _first_order_class(optimizer)
    _check_model(model, first_order is not None)
    n = _check_data(data)
    name = optimizer.lower() if isinstance(optimizer, str) else "first-order"
    _check_int("steps", steps, 1)
    _check_int("batch_size", batch_size, 1, n)
    check_arguments(lr=lr, smoothing=smoothing)   # the optimizer's own rules, checked before calibrating
    if collate_fn is not None and not callable(collate_fn):
        raise ValueError(f"collate_fn must be callable or None; got {collate_fn!r}")
    if direction not in ("gaussian", "sphere"):
        raise ValueError(f"direction must be one of ['gaussian', 'sphere']; got {direction!r}")
    for key, value in (("seed", seed), ("testing_seed", testing_seed)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ValueError(f"{key} must be an integer >= 0 or None; got {value!r}")
    if name == "mezo":
        for key, value in (("target_epsilon", target_epsilon), ("delta", delta), ("clip", clip),
                           ("noise_multiplier", noise_multiplier)):
            if value is not None:
                raise ValueError(f"{key} must be None for optimizer='mezo' (MeZO is not private: no noise, "
                                 f"no clipping, ε = ∞); got {value!r}")
    elif noise_multiplier is None:
        _check_number("target_epsilon", target_epsilon, "> 0 and finite", lambda v: v > 0 and math.isfinite(v))
        _check_number("delta", delta, "in (0, 1)", lambda v: 0 < v < 1)
        check_arguments(clip=clip, noise_multiplier=1.0)   # noise will be added: clip must be finite
    else:
        check_arguments(clip=clip, noise_multiplier=noise_multiplier)
        for key, value in (("target_epsilon", target_epsilon), ("delta", delta)):
            if value is not None:
                raise ValueError(f"{key} must be None when noise_multiplier is given (it replaces calibrating "
                                 f"to a target); got {value!r}")
    if first_order is None:
        if optimizer_kwargs is not None:
            raise ValueError(f"optimizer_kwargs is for first-order optimizers only; got {optimizer_kwargs!r}")
    else:
        if seed is not None or direction != "gaussian":
            raise ValueError("seed and direction are for zeroth-order optimizers only (a first-order step has no "
                             f"direction); got seed={seed!r}, direction={direction!r}")
        if per_example not in PER_EXAMPLE:
            raise ValueError(f"per_example must be one of {list(PER_EXAMPLE)}; got {per_example!r}")
        _check_int("microbatch", microbatch, 1)
        if optimizer_kwargs is not None and not isinstance(optimizer_kwargs, Mapping):
            raise ValueError(f"optimizer_kwargs must be a dict or None; got {optimizer_kwargs!r}")

    group = distributed.from_environment()
    if group is not None and first_order is not None:
        raise ValueError(f"optimizer must be zeroth order ({list(ZEROTH_ORDER)}) in a data-parallel run "
                         f"({group.world_size} processes): a first-order step would all-reduce every gradient "
                         f"entry (use DistributedDataParallel for that); got {optimizer!r}")

    collate = collate_fn if collate_fn is not None else default_collate
    template = _empty_template(data, collate)
    collate_empty = collate if template is None else _EmptyAwareCollate(collate, template)

    if testing_seed is None:
        sampler, noise = PoissonSampler(n, batch_size), None
    else:
        sampler = PoissonSampler.for_testing(n, batch_size, seed=testing_seed)
        noise = NoiseSource.for_testing(testing_seed + 1)
    batches = LoaderBatches(sampler, steps, group)
    accountant = Accountant("add/remove")
    if name != "mezo" and noise_multiplier is None:
        sigma = _noise_multiplier(float(target_epsilon), float(delta), steps, n, batch_size)
    else:
        sigma = None if noise_multiplier is None else float(noise_multiplier)
    opt: PrivateDPZero | PrivateMeZO | DPOptimizer
    if first_order is not None:
        params = [p for p in model.parameters() if p.requires_grad]
        try:
            inner = first_order(params, lr=lr, **dict(optimizer_kwargs or {}))
        except TypeError as error:
            raise ValueError(f"optimizer_kwargs must be arguments of {first_order.__name__}; got "
                             f"{optimizer_kwargs!r} ({error})") from None
        opt = DPOptimizer(inner, model=model, clip=clip, noise_multiplier=sigma, batches=batches,
                          accountant=accountant, noise=noise, per_example=per_example, microbatch=microbatch)
    elif name == "dpzero":
        opt = PrivateDPZero(
            model.parameters(), lr=lr, clip=clip, smoothing=smoothing, noise_multiplier=sigma,
            sampler=batches, accountant=accountant, noise=noise, direction=direction, seed=seed, model=model,
            group=group)
    else:
        opt = PrivateMeZO(model.parameters(), lr=lr, smoothing=smoothing, sampler=batches,
                          accountant=accountant, direction=direction, seed=seed, model=model, group=group)
    loader = DataLoader(data, batch_sampler=PoissonBatchSampler(batches), collate_fn=collate_empty,
                        num_workers=0)
    return opt, loader, accountant


def _first_order_class(optimizer: Any) -> type[torch.optim.Optimizer] | None:
    """The torch optimizer class of a first-order choice; None for a zeroth-order one; ValueError otherwise."""
    if isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer):
        if issubclass(optimizer, (DPZero, MeZO, DPOptimizer)):
            raise ValueError(f"optimizer must be a name {list(OPTIMIZERS)} or a non-private torch.optim.Optimizer "
                             f"subclass to wrap; got {optimizer.__name__}")
        return optimizer
    if not isinstance(optimizer, str) or optimizer.lower() not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {list(OPTIMIZERS)} or a torch.optim.Optimizer subclass; "
                         f"got {optimizer!r}")
    return FIRST_ORDER.get(optimizer.lower())


def _check_model(model: nn.Module, first_order: bool) -> None:
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("model must have at least one trainable parameter (requires_grad=True); got none")
    if not first_order:
        require_ready(model)
    elif problems := validate_first_order(model):
        raise ValueError("model is not ready for per-example gradients:\n  " + "\n  ".join(problems))


def _check_data(data: Dataset) -> int:
    if isinstance(data, torch.utils.data.IterableDataset) or not (
            hasattr(data, "__len__") and hasattr(data, "__getitem__")):
        raise ValueError(f"data must be a map-style torch Dataset (with __len__ and __getitem__); "
                         f"got {type(data).__name__}")
    n = len(data)
    if n < 1:
        raise ValueError(f"data must hold at least one example; got {n} examples")
    return n


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low and (high is None or value <= high)
    if not ok:
        rule = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}] (n = len(data))"
        raise ValueError(f"{name} must be {rule}; got {value!r}")


def _check_number(name: str, value: Any, rule: str, ok: Callable[[float], bool]) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not ok(float(value)):
        raise ValueError(f"{name} must be {rule}; got {value!r}")

