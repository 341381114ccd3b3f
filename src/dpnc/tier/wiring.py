"""The one wiring of a model-tier run: calibration, accountant and optimizer, for every front door.

``make_private`` (:mod:`dpnc.engine`), the text trainer (:class:`dpnc.lm.Trainer`) and any
integration (a Hugging Face ``Trainer``) call :func:`wire` with what they decided (the model, where
batches come from, the declared n, the budget or σ) and get the optimizer of
:data:`dpnc.tier.registry.OPTIMIZERS` and a :class:`Wiring`: the record of what the run's public
outputs say about its privacy (``summary.json``'s n, q, σ, steps, accountant, relation and process
count). A privacy rule (which n, which q, which accountant calibrates) is written here once.

Example (the trainer's use, with batches drawn by the optimizer from a secret sampler)::

    optimizer, wiring = wire(model, "dpzero", sampler=PoissonSampler(n, B, rows=len(rows)), n=n, steps=T,
                             budget=Budget(6.0, 1e-5), accountant=Accountant("add/remove"),
                             data=DataRows(fetch=encode), options=DPZeroOptions(lr=1e-6, clip=200.0))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import torch
from torch import nn

from dpnc.batches import DataRows, LoaderBatches
from dpnc.distributed import Group
from dpnc.options import Options, options_of
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.budget import Budget
from dpnc.privacy.calibrate import epsilon_for, noise_multiplier
from dpnc.privacy.noise import NoiseSource
from dpnc.tier.registry import OPTIMIZERS, Parts, Spec


@dataclass(frozen=True)
class Wiring:
    """What a run's public outputs say about how it was wired (all public: declared or chosen, never
    read off data).

    Attributes:
        method: the registry name.
        private: whether the run's releases are noised.
        n: the declared number of training examples (or a public bound) that sets q and the ledger.
        batch_size: the expected batch size B.
        sampling_rate: q = B / n.
        steps: the number of releases T the noise was calibrated for.
        noise_multiplier: σ/Δ (None for a non-private method).
        accountant: the accountant that calibrated σ (``"pld"`` or ``"rdp"``).
        relation: the neighbouring relation of the ledger.
        world_size: the number of processes of a data-parallel run (1 otherwise).
    """

    method: str
    private: bool
    n: int
    batch_size: int
    sampling_rate: float
    steps: int
    noise_multiplier: float | None
    accountant: str
    relation: str
    world_size: int = 1

    def public(self) -> dict:
        """The record as a JSON-ready dict (``summary.json``)."""
        return asdict(self)


def calibrate(
    spec: Spec,
    *,
    n: int,
    batch_size: int,
    steps: int,
    budget: Budget | None,
    noise_multiplier_given: float | None,
    accountant: str,
    relation: str,
    fixed_size_of: int | None = None,
) -> float | None:
    """σ/Δ for ``steps`` releases at q = B/n: calibrated to ``budget`` by ``accountant``, or the
    given one (checked against ``budget`` when both are given: a budget it cannot afford is
    refused); None for a non-private entry.

    ``fixed_size_of``: the n of fixed-size (shuffle) batches, whose releases are their own event
    (replace-one)."""
    if not spec.private:
        return None
    q = batch_size / n
    if noise_multiplier_given is None:
        return noise_multiplier(
            budget.epsilon,
            budget.delta,
            q,
            steps,
            accountant=accountant,
            relation=relation,
            fixed_size_of=fixed_size_of,
        )
    if budget is not None:
        spent = epsilon_for(
            noise_multiplier_given,
            q,
            steps,
            budget.delta,
            accountant=accountant,
            relation=relation,
            fixed_size_of=fixed_size_of,
        )
        if spent > budget.epsilon:
            raise ValueError(
                f"epsilon={budget.epsilon:g} cannot afford steps={steps} at noise_multiplier="
                f"{noise_multiplier_given:g} (q={q:.4g}): they spend ε={spent:.4g} by {accountant}; "
                "raise epsilon or noise_multiplier, or lower steps"
            )
    return float(noise_multiplier_given)


def wire(
    model: nn.Module,
    method: str,
    *,
    sampler,
    n: int,
    steps: int,
    accountant: Accountant,
    budget: Budget | None = None,
    noise_multiplier_given: float | None = None,
    calibrate_by: str = "pld",
    noise: NoiseSource | None = None,
    group: Group | None = None,
    batches: LoaderBatches | None = None,
    data: DataRows | None = None,
    options: Options | Mapping | None = None,
    fixed_size_of: int | None = None,
    entry: Spec | None = None,
) -> tuple[torch.optim.Optimizer, Wiring]:
    """The optimizer of registry entry ``method`` over ``model``'s trainable parameters, and its
    :class:`Wiring`.

    Args:
        model: the module to train (its parameters with ``requires_grad`` are optimized).
        method: a name of :data:`~dpnc.tier.registry.OPTIMIZERS`.
        sampler: the secret batch sampler (Poisson or shuffle), with the declared ``n`` and the
            batch size.
        n: the declared number of training examples (never ``len(data)``).
        steps: the number of steps T the budget covers.
        accountant: the run's ledger (its relation is the run's).
        budget: the (ε, δ) target that σ is calibrated to (private entries, unless
            ``noise_multiplier_given``).
        noise_multiplier_given: σ/Δ to use instead of calibrating (checked against ``budget`` if
            both are given).
        calibrate_by: ``"pld"`` or ``"rdp"``: the accountant that calibrates σ.
        noise: the secret noise source (a fresh one by default).
        group: a data-parallel run's process group (zeroth-order and private first-order entries).
        batches: the make_private loader's pending batch; None when the optimizer draws from
            ``sampler`` and reads the rows through ``data``.
        data: the rows (:class:`~dpnc.batches.DataRows`) when ``batches`` is None.
        options: the entry's options, an instance of its class (``Spec.options``,
            :mod:`dpnc.options`), or a mapping of their values by name, built into one by
            :func:`dpnc.options.options_of`.
        fixed_size_of: see :func:`calibrate`.
        entry: an entry outside the registry, called ``method`` (make_private's wrapping of a user's
            torch optimizer class or instance).

    Raises:
        ValueError: an unknown method, the non-private first-order baseline with a process group, or
            what the optimizer refuses.
    """
    entry = entry if entry is not None else OPTIMIZERS.get(method)
    if entry is None:
        raise ValueError(f"method must be one of {list(OPTIMIZERS)}; got {method!r}")
    if group is not None and not (entry.order == 0 or entry.private):
        raise ValueError(
            f"method must be private or zeroth order in a data-parallel run ({group.world_size} "
            f"processes): the non-private first-order baseline runs in one process; got {method!r}"
        )
    sigma = calibrate(
        entry,
        n=n,
        batch_size=sampler.batch_size,
        steps=steps,
        budget=budget,
        noise_multiplier_given=noise_multiplier_given,
        accountant=calibrate_by,
        relation=accountant.relation.value,
        fixed_size_of=fixed_size_of,
    )
    if not isinstance(options, entry.options):
        if not isinstance(options, Mapping | None):
            raise ValueError(
                f"options must be a {entry.options.__name__} (the options of {method!r}) or a mapping of "
                f"their values; got {type(options).__name__}"
            )
        options = options_of(entry.options, options or {}, noised=bool(sigma))
    params = [p for p in model.parameters() if p.requires_grad]
    parts = Parts(
        model,
        params,
        sampler,
        steps,
        sigma,
        accountant,
        noise,
        group,
        batches,
        data,
        options,
    )
    optimizer = entry.build(parts)
    record = Wiring(
        method,
        entry.private,
        n,
        sampler.batch_size,
        sampler.batch_size / n,
        steps,
        sigma,
        calibrate_by,
        accountant.relation.value,
        1 if group is None else group.world_size,
    )
    return optimizer, record
