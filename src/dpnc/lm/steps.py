"""One training step of each fine-tuning method, on a batch the sampler drew in secret.

* ``mezo``, ``dpzero``: :class:`dpnc.tier.MeZOOptimizer` / :class:`dpnc.tier.DPZeroOptimizer` draw
  the batch themselves, fetch its encoded rows through the trainer's ``encode`` (a
  :class:`dpnc.batches.DataRows`) and hand them to the classifier, which gives the per-example
  cross-entropy of exactly that batch; forward passes only.
* ``dp-adamw``: :class:`dpnc.tier.DPOptimizer` around ``torch.optim.AdamW``: per-example gradients
  (per layer where it can, else ``torch.func``: the config's ``per_example``), clipped to C, one
  :func:`~dpnc.privacy.release.release_sum` per step (fixed B, secret noise). The trainer draws the
  batch from a :class:`dpnc.batches.LoaderBatches`, which encodes it, and the optimizer hands the
  classifier that batch.
* ``adamw``: non-private AdamW on the batch's mean loss with the fixed denominator B (one
  data-dependent release without noise, ε = ∞).

What a step did reaches the trainer through the optimizers' step hooks
(:class:`dpnc.tier.base.StepInfo`). The public parts go to a :class:`StepRecord`; training-data
statistics only when ``log_private_stats`` is on."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from dpnc.batches import DataRows
from dpnc.distributed import Group
from dpnc.lm.cache import PrefixCache
from dpnc.lm.config import FinetuneConfig
from dpnc.lm.data import TextDataset
from dpnc.lm.heads import EncoderClassifier
from dpnc.lm.journal import RunFiles
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.budget import Budget
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import NonPrivate, Release
from dpnc.tier.base import StepHooks, StepInfo
from dpnc.tier.first_order import ClippedSum, route_clipped_sum
from dpnc.tier.registry import OPTIMIZERS
from dpnc.tier.wiring import wire

Encode = Callable[[torch.Tensor], dict]


@dataclass
class StepRecord:
    """What one step did.

    ``step``, ``seed`` (the public direction seed) and ``released`` (the released scalar c_t of a
    zeroth-order step) are public. ``loss``, ``nonfinite``, ``clipped_fraction`` and ``seconds`` are
    statistics of the training data, NOT private: they are None unless the config sets
    ``log_private_stats``. The batch is never kept."""

    step: int
    seed: int | None = None
    released: float | None = None
    loss: float | None = None
    nonfinite: int | None = None
    clipped_fraction: float | None = None
    seconds: float | None = None


def encode_rows(
    classifier: EncoderClassifier,
    dataset: TextDataset,
    cache: PrefixCache | None,
    device: torch.device,
    index: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """The classifier's input for the examples ``index`` of ``dataset``, through ``cache`` (its
    frozen layers) when there is one: a batch of training rows the sampler drew, or the time
    estimate's public rows."""
    labels = dataset.labels[index]
    if cache is not None:
        batch = cache.batch(index, labels)
    else:
        batch = classifier.encode([dataset.texts[i] for i in index.tolist()], labels)
    return {k: v.to(device) for k, v in batch.items()}


def per_example_clipped_sum(
    model: EncoderClassifier,
    batch: dict[str, torch.Tensor],
    C: float,
    *,
    per_example: str = "auto",
    microbatch: int = 4,
) -> ClippedSum:
    """Σ_i clip_C(∇_θ ℓ_i(θ)) over the trainable parameters θ (flattened in ``named_parameters``
    order).

    The routes of :class:`dpnc.tier.DPOptimizer` (:func:`dpnc.tier.first_order.route_clipped_sum`)
    with the classifier as the loss function: ``"layers"``, ``"vmap"``, ``"loop"`` or ``"auto"``
    (layers, else vmap). All but ``"loop"`` run with a 4-D additive attention mask (HF's 2-D mask
    handling branches on the mask's values, which vmap cannot batch)."""
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    with _mask_for(model, per_example):
        return route_clipped_sum(
            model, model, (batch,), params, C, per_example=per_example, microbatch=microbatch
        )[0]


class _mask_for:
    """Within: the classifier builds the additive attention mask that ``vmap`` needs: on for every
    route that may run vmap (``"vmap"``; ``"auto"`` and ``"layers"``, whose first-batch check and
    fallback use it)."""

    def __init__(self, model: EncoderClassifier, per_example: str) -> None:
        self.model, self.on = model, per_example != "loop"

    def __enter__(self):
        self.before, self.model.additive_mask = (
            self.model.additive_mask,
            self.on or self.model.additive_mask,
        )

    def __exit__(self, *exc):
        self.model.additive_mask = self.before


def build_optimizer(
    config: FinetuneConfig,
    classifier: EncoderClassifier,
    sampler,
    *,
    encode: Encode,
    accountant: Accountant,
    noise: NoiseSource,
    n: int,
    group: Group | None = None,
    multiplier: float | None = None,
):
    """The method's optimizer over the classifier's trainable parameters (None for zero-shot), wired
    by :func:`dpnc.tier.wiring.wire` (the trainer's :class:`~dpnc.tier.wiring.Wiring` is
    ``optimizer.wiring``).

    ``encode``: the classifier's input for the train-set examples of given indices; the optimizer
    fetches each batch it draws through it. ``group``: a :class:`~dpnc.distributed.Group` for a
    data-parallel zeroth-order run (see :mod:`dpnc.distributed`). ``multiplier``: σ/Δ to use (a
    rehearsal's, an audit's broken variant); None: the wiring calibrates it to the config's budget
    (ε, δ), or takes its ``noise_multiplier``, as for ``make_private``."""
    c = config
    if c.method == "zero-shot":
        return None
    budget = Budget(c.epsilon, c.delta) if c.private and c.epsilon is not None else None
    optimizer, wiring = wire(
        classifier,
        c.method,
        sampler=sampler,
        n=n,
        steps=c.steps,
        accountant=accountant,
        budget=budget if multiplier is None else None,
        noise_multiplier_given=c.noise_multiplier if multiplier is None else multiplier,
        calibrate_by=c.accountant,
        noise=noise,
        group=group,
        data=DataRows(fetch=encode),
        options=c.optimizer_options(),  # the method's options (dpnc.options), from the config
        fixed_size_of=n if c.sampler == "shuffle" else None,  # fixed-size batches: their own event
    )
    optimizer.wiring = wiring
    return optimizer


def step_release(optimizer) -> Release:
    """The ledger entry one step makes (written to the journal before the step: what a lost step
    counts as)."""
    return (
        optimizer.step_release() if isinstance(optimizer, StepHooks) else NonPrivate()
    )  # AdamW: ε = ∞


class Steps:
    """Runs one step of the trainer's method and fills its :class:`StepRecord` (from the optimizer's
    step hook)."""

    def __init__(
        self,
        config: FinetuneConfig,
        classifier: EncoderClassifier,
        optimizer,
        sampler,
        accountant: Accountant,
        encode: Encode,
        kill_point: Callable[[str], None],
        note: Callable[[str], None],
    ) -> None:
        self.config, self.classifier, self.optimizer = config, classifier, optimizer
        self.sampler, self.accountant, self.encode, self.kill_point = (
            sampler,
            accountant,
            encode,
            kill_point,
        )
        self.note = note  # a private-statistics note (written only with log_private_stats)
        self.info: StepInfo | None = None
        if isinstance(
            optimizer, StepHooks
        ):  # dpnc's optimizers report their steps (not the AdamW baseline)
            optimizer.register_step_hook(self._on_step)

    def _on_step(self, optimizer, info: StepInfo) -> None:
        self.info = info

    def journaled(self, files: RunFiles, t: int) -> StepRecord:
        """Step ``t``, journaled in ``files`` before and after it touches the data (what a resume
        reads): the trainer's step, and the time estimate's rehearsal of it (on public rows, in a
        folder of its own)."""
        files.journal({"t": t, "event": "begin", "release": step_release(self.optimizer).to_dict()})
        files.kill_point("begin", t)
        record = self.run(StepRecord(t))
        files.kill_point("released", t)
        files.journal({"t": t, "event": "end", "seed": record.seed, "released": record.released})
        files.kill_point("end", t)
        return record

    def run(self, record: StepRecord) -> StepRecord:
        self.info = None
        if OPTIMIZERS[self.config.method].order == 0:
            self._zeroth_order(record)
        elif isinstance(self.optimizer, StepHooks):  # a private first-order step (DPOptimizer)
            self._dp_adamw(record)
        else:  # the non-private AdamW baseline
            self._adamw(self.encode(self.sampler.sample()), record)
        return record

    def _zeroth_order(self, record: StepRecord) -> None:
        stats = self.config.log_private_stats
        seen: list[torch.Tensor] = []

        def loss_fn(
            batch: dict[str, torch.Tensor],
        ) -> torch.Tensor:  # handed the drawn batch, encoded
            if passes:
                self.kill_point("between")  # the second forward pass of this step
            passes.append(1)
            losses = self.classifier(batch)
            if stats:
                seen.append(losses.detach())
            return losses

        passes: list[int] = []
        self.optimizer.step(loss_fn)
        info = self.info
        record.seed, record.released = info.seed, float(info.released)
        if stats and self.optimizer.group is not None:  # this rank saw its shard only:
            private = info.private_stats  # the whole batch's, all-reduced
            record.loss, record.nonfinite = private.loss, private.nonfinite
            record.clipped_fraction = private.clipped_fraction
        elif stats:
            both = torch.stack(seen) if seen and seen[0].numel() else torch.zeros(2, 0)
            finite = torch.isfinite(both)
            record.nonfinite = int((~finite).any(0).sum())
            record.loss = float(both[finite].mean()) if finite.any() else math.nan
            record.clipped_fraction = info.private_stats.clipped_fraction

    def _dp_adamw(self, record: StepRecord) -> None:
        c = self.config
        self.optimizer.batches.draw()  # the secret Poisson batch, encoded and left pending
        with _mask_for(self.classifier, c.per_example):
            self.optimizer.step(
                self.classifier
            )  # handed that batch; the classifier gives the per-example losses
        if c.log_private_stats:
            private = self.info.private_stats
            record.loss, record.nonfinite = private.loss, private.nonfinite
            record.clipped_fraction = private.clipped_fraction

    def _adamw(self, batch: dict, record: StepRecord) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        with torch.enable_grad():
            losses = self.classifier(batch)
            finite = torch.isfinite(losses)
            if losses.numel():  # non-finite losses count as 0; the fixed denominator B
                (
                    torch.where(finite, losses, torch.zeros_like(losses)).sum()
                    / self.config.batch_size
                ).backward()
        grads_ok = all(
            p.grad is None or bool(torch.isfinite(p.grad).all())
            for p in self.classifier.parameters()
        )
        if grads_ok:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.accountant.record(NonPrivate())  # a data-dependent release without noise (ε = ∞)
        if self.config.log_private_stats:
            losses = losses.detach()
            finite = torch.isfinite(losses)
            record.loss = float(losses[finite].mean()) if finite.any() else math.nan
            record.nonfinite = int((~finite).sum())
            if not grads_ok:  # a non-finite loss poisoned the backward pass: the update was skipped
                self.note("non-finite gradient, update skipped")
