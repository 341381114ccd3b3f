"""Zeroth-order optimizers for models, in the style of ``torch.optim``: DPZero and MeZO (base:
:mod:`dpnc.tier.base`).

They run the steps of :mod:`dpnc.algorithms.dpzero` on a model by forward passes only, at
inference-level memory, and hand the loss function the batch they draw. The steps and an example:
docs/dpzero.md; data parallel: docs/distributed.md; step hooks: docs/getting-started.md."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from dpnc import distributed
from dpnc.algorithms import dpzero as alg
from dpnc.batches import (
    DataRows,
    LoaderBatches,
    check_loss_arity,
    check_loss_fn,
    map_leaves,
    one_example,
)
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.release import mean_release
from dpnc.privacy.releases import NonPrivate, Release
from dpnc.sampling import BatchClosure, Sampler, batch_losses
from dpnc.space import ModuleSpace
from dpnc.tier.base import (
    PrivateStats,
    StepHooks,
    StepInfo,
    check_arguments,
    raise_after_release,
    require_ready,
    validate_model,
)
from dpnc.tier.direction_cache import CachedModuleSpace
from dpnc.tier.model_state import ModelStateChanged, ModuleNotReady, StateGuard


class _ZerothOrder(StepHooks, torch.optim.Optimizer):
    """Shared machinery: one parameter group, public seeds, the accountant, the secret noise and the
    batch source."""

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        defaults: dict,
        *,
        sampler: Sampler,
        accountant: Accountant,
        noise: NoiseSource | None,
        direction: str,
        seed: int | None,
        model: nn.Module,
        data=None,
        collate_fn=None,
        group: distributed.Group | None = None,
        cache_directions: bool = False,
    ) -> None:
        super().__init__(params, defaults)
        if not isinstance(cache_directions, bool):
            raise ValueError(f"cache_directions must be a bool; got {cache_directions!r}")
        if len(self.param_groups) != 1:
            raise ValueError(
                "zeroth-order optimizers support one parameter group (the direction spans all)"
            )
        if not isinstance(model, nn.Module):
            raise ValueError(
                f"model must be the torch.nn.Module whose parameters are optimized (checked before "
                f"every step); got {model!r}"
            )
        require_ready(model)
        sampler.check_relation(accountant.relation)
        # Where each step's inputs come from: the make_private loader's pending batch, or rows of
        # `data`.
        self.rows: DataRows | LoaderBatches
        if isinstance(sampler, LoaderBatches):
            if data is not None:
                raise ValueError(
                    "data must be None with a make_private loader (the loader yields the batches)"
                )
            self.rows = sampler
        elif data is None:
            raise ValueError(
                "data must be the training data (a tuple of tensors or a map-style Dataset): the "
                "optimizer draws each batch from it and hands the batch to the loss function"
            )
        else:
            self.rows = (
                data if isinstance(data, DataRows) else DataRows(data, collate_fn=collate_fn)
            )
        self.model = model
        # The cached space generates each step's direction once instead of three times (d more
        # numbers of memory).
        space = CachedModuleSpace if cache_directions else ModuleSpace
        self.space = space(self.param_groups[0]["params"], direction=direction)
        self.sampler, self.accountant = sampler, accountant
        self.noise = noise if noise is not None else NoiseSource()
        # The direction seeds are public (they may be logged); drawn from their own generator.
        self.seed = secrets.randbits(62) if seed is None else seed
        if group is not None and not isinstance(group, distributed.Group):
            raise ValueError(f"group must be a dpnc.distributed.Group or None; got {group!r}")
        self.group = group
        if group is not None:  # every rank starts from rank 0's public seed and parameters
            self.seed = group.broadcast_seed(self.seed)
            group.broadcast_parameters_(self.space.params)
        self.generator = torch.Generator().manual_seed(self.seed)
        self.steps = 0
        self.guard = StateGuard(model, ready=validate_model)
        if isinstance(sampler, LoaderBatches):
            sampler.charge = self._charge
            self.guard.attach(sampler)

    @property
    def _aggregation(self) -> distributed.Group | distributed.Local:
        """The group a step's sums are aggregated over: the process group, or this process alone."""
        return distributed.LOCAL if self.group is None else self.group

    def _step(
        self, group: dict, seed: int, closure: BatchClosure
    ) -> tuple[torch.Tensor, torch.Tensor, PrivateStats]:
        """One step along ``seed``: (the released scalar, the batch's mean loss, the step's private
        statistics)."""
        raise NotImplementedError

    def step_release(self) -> Release:
        """The ledger entry each step makes (public; what a trainer counts for a step that may have
        happened)."""
        raise NotImplementedError

    @torch.no_grad()
    def step(
        self,
        loss_fn: Callable[..., torch.Tensor] | None = None,  # type: ignore[override]
        *inputs: Any,
    ) -> torch.Tensor:
        """One step on the batch the optimizer draws: ``loss_fn(*batch)`` returns its per-example
        losses.

        The optimizer hands ``loss_fn`` the inputs of the batch it drew (rows of ``data``, or the
        batch a :func:`~dpnc.make_private` loader just yielded); ``step(loss_fn, *inputs)`` is
        accepted only when ``inputs`` are that loader's very objects. ``loss_fn`` must return the
        per-example losses of exactly those rows, shape (len(batch),); one that reads other data
        besides its arguments cannot be detected by any library, and is the user's to avoid. Returns
        the batch's mean loss
        at x (not private: a statistic of the training data; ``nan`` on an empty batch). Hooks
        registered with :meth:`register_step_hook` then get the step's :class:`StepInfo`.

        Raises ``ValueError``, releasing nothing and leaving the parameters as they were, when the
        model is not ready (:func:`validate_model`, checked at every step), ``loss_fn`` takes no
        batch, ``inputs`` are not the pending batch, or (a make_private run) no batch is pending or
        all steps were taken. A state change (:class:`~dpnc.tier.model_state.ModelStateChanged`) is
        charged, releases nothing and poisons the run. A ``loss_fn`` that raises, or whose losses
        are not one per example, still releases (each example alone, those that raise counting 0)
        and moves the parameters; its exception is raised after."""
        self.guard.refuse_if_poisoned("this step")
        check_loss_fn(loss_fn)
        check_loss_arity(loss_fn, self.rows.arguments())  # before any draw: nothing is charged
        require_ready(self.model)  # at every step: model.train() after construction is refused here
        loader = self.sampler if isinstance(self.sampler, LoaderBatches) else None
        if loader is not None:
            loader.check_ready()
            if inputs:
                loader.check_inputs(inputs)
        elif inputs:
            raise ValueError(
                "inputs must be left out: this optimizer draws each batch from its data and hands it "
                "to loss_fn; call optimizer.step(loss_fn)"
            )
        fetched: list = [None, None]  # (indices, inputs): the step's forward passes share one fetch
        touched = [False]  # whether loss_fn (or the user's code since the draw) has seen the batch
        failure: list[Exception | None] = [None]  # the first exception loss_fn raised in this step

        def closure(indices: torch.Tensor) -> torch.Tensor:
            if fetched[0] is not indices:
                fetched[:] = [indices, self.rows.rows(indices)]
                self.guard.hold(fetched[1])
            touched[0] = True
            # the step's own moves (x ± λu) happen between passes, never within one
            self.guard.mark()
            with self.guard.watching():  # every module the loss runs, and checked after
                return self._losses(loss_fn, indices, fetched[1], failure)

        group, before = self.param_groups[0], self.accountant.releases
        seed = alg.public_seeds(self.generator, 1)[0]
        try:
            if loader is not None:
                touched[0] = (
                    True  # the state the draw marked must be intact (the user's code ran since)
                )
                self.guard.refuse_written_batch(loader)
                self.guard.check()
                touched[0] = False
            released, loss, stats = self._step(group, seed, closure)
        except BaseException:
            self._after_refusal(loader, touched[0], before)
            raise
        if loader is not None:
            loader.finish()
        self.steps += 1
        # The entry this step recorded (merged with equal ones); only rank 0 records under a group.
        recorded = self.group is None or self.group.is_source
        release = self.accountant.ledger[-1].release if recorded else self.step_release()
        self._report_step(StepInfo(self.steps - 1, seed, released, release, stats))
        if failure[0] is not None:
            raise_after_release(failure[0])
        return loss

    def _losses(self, loss_fn, indices: torch.Tensor, inputs: tuple, failure: list) -> torch.Tensor:
        """The batch's per-example losses; where ``loss_fn`` raises (or returns another shape), each
        example's alone, NaN where it raises: its a_i then counts 0, and the step releases and moves
        as any step does (a step that released nothing would show in the published model which steps
        raised). The first exception is kept in ``failure`` for the step to raise after its
        release."""
        try:
            return batch_losses(lambda _: loss_fn(*inputs), indices, who="loss_fn")
        except (ModelStateChanged, ModuleNotReady):
            raise
        except Exception as error:
            failure[0] = failure[0] or error
        one, values, device = one_example(loss_fn), [], self.space.params[0].device
        for i in range(len(indices)):
            try:
                values.append(float(one(*map_leaves(lambda t, i=i: t[i], inputs))))
            except (ModelStateChanged, ModuleNotReady):
                raise
            except Exception:
                values.append(float("nan"))
        return torch.tensor(values, dtype=torch.float64, device=device)

    @torch.no_grad()
    def replay_(self, seed: int, released: float) -> None:
        """Re-apply a finished step from its public values: x ← x − lr·c_t·u(seed). No data, no
        release.

        The next seed of the public generator must be ``seed`` (the step being replayed); refused
        otherwise. Used to resume a run from a journal of (seed, released c_t) pairs:
        post-processing of released values."""
        drawn = alg.public_seeds(self.generator, 1)[0]
        if drawn != seed:
            raise ValueError(
                f"seed must be the next public direction seed of this optimizer ({drawn}) to replay "
                f"step {self.steps}; got {seed}"
            )
        self.space.update_(seed, -self.param_groups[0]["lr"] * released)
        self.steps += 1

    def state_dict(self) -> dict:
        self.guard.refuse_if_poisoned("saving the optimizer's state")
        state = super().state_dict()
        # Public state only; the NoiseSource is secret and never saved.
        state["dpnc"] = {
            "steps": self.steps,
            "seed": self.seed,
            "generator": self.generator.get_state(),
        }
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        extra = state_dict.pop("dpnc", None)
        super().load_state_dict(state_dict)
        if extra is not None:
            self.steps, self.seed = extra["steps"], extra["seed"]
            self.generator.set_state(extra["generator"])


class DPZeroOptimizer(_ZerothOrder):
    """DPZero for models (Zhang et al. 2024, Algorithm 2 with minibatches and the seed trick).

    c_t = (1/B) Σ_i clip_C(a_i) + z_t through :func:`dpnc.privacy.release.private_mean` (non-finite
    a_i set to 0 first, the fixed denominator B, secret noise z_t of std σ = noise_multiplier·Δ, one
    ledger entry in real units: Δ = 2C/B replace-one, C/B add/remove), then x ← x − α·c_t·u_t.

    Args:
        params: the model's parameters (those with requires_grad=False are left alone).
        lr: step size α (read from ``param_groups`` at every step, so schedulers work).
        clip: clipping threshold C of the per-example scalar differences.
        smoothing: λ of the central difference.
        noise_multiplier: σ/Δ of the released scalar, Δ the sensitivity of the batch mean (2C/B
            replace-one, C/B add/remove, B = ``sampler.batch_size``). Calibrate it with
            :func:`dpnc.algorithms.dpzero.calibrate_noise`.
        sampler: how batches are drawn; it decides how each release is accounted.
        accountant: records every release.
        noise: the secret noise source (a fresh one by default).
        direction: ``"gaussian"`` or ``"sphere"``.
        seed: seed of the public direction generator (random by default; safe to log).
        discrete: exact discrete Gaussian noise (full batch only).
        model: the ``nn.Module`` whose parameters these are; checked before every step
            (:func:`validate_model`: dropout, BatchNorm), with every problem listed.
        data: the training data the batches are drawn from: a tuple of tensors with one row per
            example, a map-style ``Dataset`` (collated by ``collate_fn``), or a
            :class:`dpnc.batches.DataRows`. ``step`` hands ``loss_fn`` the drawn rows. (None only
            with a :func:`dpnc.make_private` loader's batches.)
        collate_fn: how a ``Dataset``'s items form a batch (torch's ``default_collate`` by default).
        group: a :class:`dpnc.distributed.Group` to run data parallel (rank 0 samples, adds the
            noise and records; the other ranks' sampler, noise and accountant are unused); None:
            this process alone.
        cache_directions: generate each step's direction u once and keep it for x ± λu and the
            update (:class:`dpnc.tier.direction_cache.CachedModuleSpace`: the same numbers, one
            generator pass per step instead of three, d more numbers of memory in the parameters'
            dtype); off by default: the seed trick's inference-level memory.
    """

    def __init__(
        self,
        params,
        *,
        lr: float,
        clip: float,
        smoothing: float = 1e-3,
        noise_multiplier: float,
        sampler: Sampler,
        accountant: Accountant,
        noise: NoiseSource | None = None,
        direction: str = "gaussian",
        seed: int | None = None,
        discrete: bool = False,
        model: nn.Module,
        data=None,
        collate_fn=None,
        group: distributed.Group | None = None,
        cache_directions: bool = False,
    ) -> None:
        check_arguments(lr=lr, clip=clip, smoothing=smoothing, noise_multiplier=noise_multiplier)
        super().__init__(
            params,
            {
                "lr": lr,
                "clip": clip,
                "smoothing": smoothing,
                "noise_multiplier": noise_multiplier,
                "discrete": discrete,
            },
            sampler=sampler,
            accountant=accountant,
            noise=noise,
            direction=direction,
            seed=seed,
            model=model,
            data=data,
            collate_fn=collate_fn,
            group=group,
            cache_directions=cache_directions,
        )

    def _step(self, group, seed, closure):
        # The model tier runs the algorithm's own step (one step, two tiers): private_mean of the
        # clipped a_i.
        config = alg.DPZero(
            eta=group["lr"],
            lam=group["smoothing"],
            C=group["clip"],
            noise_multiplier=group["noise_multiplier"],
            discrete=group["discrete"],
        )
        log = config.step(
            self.space,
            closure,
            seed,
            sampler=self.sampler,
            noise=self.noise,
            accountant=self.accountant,
            group=self._aggregation,
        )
        return (
            log.released,
            log.loss,
            PrivateStats(float(log.loss), float(log.clipped_fraction), int(log.nonfinite)),
        )

    def step_release(self) -> Release:
        group = self.param_groups[0]
        return mean_release(
            group["clip"],
            group["noise_multiplier"],
            sampler=self.sampler,
            accountant=self.accountant,
            noise=self.noise,
        )


class MeZOOptimizer(_ZerothOrder):
    """MeZO / ZO-SGD for models (Malladi et al. 2023): not private; the report says ε = ∞.

    c_t = (L(x + λu) − L(x − λu))/(2λ) of the realised batch's mean loss. An example with a
    non-finite loss at either point counts as 0 at both (so one bad example does not turn the update
    into NaN), and is counted. ``model``, ``data``, ``collate_fn``, ``group``, ``cache_directions``:
    as :class:`DPZeroOptimizer`'s (data parallel: every rank forms c_t from one all_reduce of 4
    numbers)."""

    def __init__(
        self,
        params,
        *,
        lr: float,
        smoothing: float = 1e-3,
        sampler: Sampler,
        accountant: Accountant | None = None,
        direction: str = "gaussian",
        seed: int | None = None,
        model: nn.Module,
        data=None,
        collate_fn=None,
        group: distributed.Group | None = None,
        cache_directions: bool = False,
    ) -> None:
        check_arguments(lr=lr, smoothing=smoothing)
        super().__init__(
            params,
            {"lr": lr, "smoothing": smoothing},
            sampler=sampler,
            accountant=accountant or Accountant(),
            noise=None,
            direction=direction,
            seed=seed,
            model=model,
            data=data,
            collate_fn=collate_fn,
            group=group,
            cache_directions=cache_directions,
        )

    def _step(self, group, seed, closure):
        config = alg.MeZO(
            group["lr"], group["smoothing"]
        )  # non-finite examples: a_i = 0, counted there
        log = config.step(
            self.space,
            closure,
            seed,
            sampler=self.sampler,
            noise=self.noise,
            accountant=self.accountant,
            group=self._aggregation,
        )
        return log.released, log.loss, PrivateStats(float(log.loss), 0.0, int(log.nonfinite))

    def step_release(self) -> Release:
        return NonPrivate(
            secret=self.sampler.secret
        )  # a data-dependent release with no noise (ε = ∞)
