"""Zeroth-order optimizers for models, in the style of ``torch.optim``.

``DPZero`` and ``MeZO`` run the steps of :mod:`dpnc.algorithms.dpzero` on a model's trainable
parameters through a :class:`~dpnc.space.ModuleSpace`: forward passes only, the direction regenerated
from its seed, inference-level memory. Like ``torch.optim.LBFGS`` they need a closure. The optimizer
draws each step's batch from its sampler (secretly when the accounting uses amplification by
subsampling) and calls ``closure(batch)``, which must return the **per-example** losses of exactly
that batch, shape (len(batch),), evaluated in eval mode (dropout would change f between the two
passes). Anything else is refused, so the batch the ledger describes is the batch that was used.

Example:
    >>> opt = DPZero(model.parameters(), lr=1e-6, clip=200.0, smoothing=1e-3, noise_multiplier=13.5,
    ...              sampler=PoissonSampler(n=1024, batch_size=64), accountant=Accountant("add/remove"))
    >>> for _ in range(T):
    ...     loss = opt.step(lambda batch: per_example_loss(model, dataset[batch]))
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterable

import torch
from torch import nn

from dpnc.algorithms import dpzero as alg
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.noise import NoiseSource
from dpnc.sampling import BatchClosure, Sampler
from dpnc.space import ModuleSpace


def validate_model(model: nn.Module) -> list[str]:
    """Every reason ``model`` breaks a zeroth-order step's assumptions (empty if none).

    Active dropout makes f(x + λu) and f(x − λu) use different masks; train-mode BatchNorm mixes the
    examples of a batch, so one example's loss depends on the others (sensitivity breaks).
    """
    problems = []
    for name, module in model.named_modules():
        if isinstance(module, nn.modules.dropout._DropoutNd) and module.training and module.p > 0:
            problems.append(f"{name or 'model'}: dropout (p={module.p}) is active; call model.eval()")
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and module.training:
            problems.append(f"{name or 'model'}: BatchNorm in train mode mixes examples; call model.eval()")
    return problems


def require_ready(model: nn.Module) -> None:
    """Raise ValueError listing every reason of :func:`validate_model` (nothing if the model is ready)."""
    if problems := validate_model(model):
        raise ValueError("model is not ready for zeroth-order steps:\n  " + "\n  ".join(problems))


def check_arguments(**kwargs: float) -> None:
    """Validate zeroth-order optimizer arguments (lr, smoothing, clip, noise_multiplier), named as the user wrote them.

    Public so that a caller (e.g. :func:`dpnc.make_private`) can check them before slow work such as calibration.
    """
    rules = {"lr": (">= 0 and finite", lambda v: v >= 0 and math.isfinite(v)),
             "smoothing": ("> 0 and finite", lambda v: v > 0 and math.isfinite(v)),
             "clip": ("> 0 (inf only without noise)", lambda v: v > 0 and not math.isnan(v)),
             "noise_multiplier": (">= 0 and finite", lambda v: v >= 0 and math.isfinite(v))}
    for name, value in kwargs.items():
        rule, ok = rules[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(float(value)):
            raise ValueError(f"{name} must be {rule}; got {value!r}")
    if math.isinf(kwargs.get("clip", 1.0)) and kwargs.get("noise_multiplier", 0.0) > 0:
        raise ValueError("clip must be finite when noise_multiplier > 0 (the sensitivity is 2·clip/B)")


class _ZerothOrder(torch.optim.Optimizer):
    """Shared machinery: one parameter group, public seeds, the accountant and the secret noise."""

    def __init__(self, params: Iterable[torch.Tensor], defaults: dict, *, sampler: Sampler,
                 accountant: Accountant, noise: NoiseSource | None, direction: str, seed: int | None,
                 model: nn.Module | None) -> None:
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("zeroth-order optimizers support one parameter group (the direction spans all)")
        if model is not None:
            require_ready(model)
        sampler.check_relation(accountant.relation)
        self.space = ModuleSpace(self.param_groups[0]["params"], direction=direction)
        self.sampler, self.accountant = sampler, accountant
        self.noise = noise if noise is not None else NoiseSource()
        # The direction seeds are public (they may be logged); drawn from their own generator.
        self.seed = secrets.randbits(62) if seed is None else seed
        self.generator = torch.Generator().manual_seed(self.seed)
        self.steps = 0
        self.last_log: alg.StepLog | None = None

    def _algorithm(self, group: dict):
        raise NotImplementedError

    @torch.no_grad()
    def step(self, closure: BatchClosure) -> torch.Tensor:  # type: ignore[override]
        """One step on a batch the sampler draws. ``closure(batch)`` returns its per-example losses.

        Returns the batch's mean loss at x (not private: a statistic of the training data).
        """
        if closure is None:
            raise ValueError("a zeroth-order step needs a closure returning per-example losses")
        group = self.param_groups[0]
        seed = alg.public_seeds(self.generator, 1)[0]
        log = self._algorithm(group).step(self.space, closure, seed, sampler=self.sampler,
                                          noise=self.noise, accountant=self.accountant)
        self.steps += 1
        self.last_log = log
        return log.loss

    def state_dict(self) -> dict:
        state = super().state_dict()
        # Public state only; the NoiseSource is secret and never saved.
        state["dpnc"] = {"steps": self.steps, "seed": self.seed,
                         "generator": self.generator.get_state()}
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        extra = state_dict.pop("dpnc", None)
        super().load_state_dict(state_dict)
        if extra is not None:
            self.steps, self.seed = extra["steps"], extra["seed"]
            self.generator.set_state(extra["generator"])


class DPZero(_ZerothOrder):
    """DPZero for models (Zhang et al. 2024, Algorithm 2 with minibatches and the seed trick).

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
        model: if given, validated once (dropout, BatchNorm) with every problem listed.
    """

    def __init__(self, params, *, lr: float, clip: float, smoothing: float = 1e-3, noise_multiplier: float,
                 sampler: Sampler, accountant: Accountant, noise: NoiseSource | None = None,
                 direction: str = "gaussian", seed: int | None = None, discrete: bool = False,
                 model: nn.Module | None = None) -> None:
        check_arguments(lr=lr, clip=clip, smoothing=smoothing, noise_multiplier=noise_multiplier)
        super().__init__(params, {"lr": lr, "clip": clip, "smoothing": smoothing,
                                  "noise_multiplier": noise_multiplier, "discrete": discrete},
                         sampler=sampler, accountant=accountant, noise=noise, direction=direction, seed=seed,
                         model=model)

    def _algorithm(self, group):
        return alg.DPZero(group["lr"], group["smoothing"], group["clip"], group["noise_multiplier"],
                          group["discrete"])


class MeZO(_ZerothOrder):
    """MeZO / ZO-SGD for models (Malladi et al. 2023): not private; the report says ε = ∞."""

    def __init__(self, params, *, lr: float, smoothing: float = 1e-3, sampler: Sampler,
                 accountant: Accountant | None = None, direction: str = "gaussian", seed: int | None = None,
                 model: nn.Module | None = None) -> None:
        check_arguments(lr=lr, smoothing=smoothing)
        super().__init__(params, {"lr": lr, "smoothing": smoothing}, sampler=sampler,
                         accountant=accountant or Accountant(), noise=None, direction=direction, seed=seed,
                         model=model)

    def _algorithm(self, group):
        return alg.MeZO(group["lr"], group["smoothing"])
