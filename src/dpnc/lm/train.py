"""Fine-tuning a sentence encoder for text classification: zero-shot, MeZO, DPZero, AdamW and DP-AdamW.

One :class:`Trainer` runs every method on a classifier of :mod:`dpnc.lm.heads`:

* ``zero-shot``: no training; evaluates the head as built.
* ``mezo``, ``dpzero``: :class:`dpnc.optim.MeZO` / :class:`dpnc.optim.DPZero` with the classifier's per-example
  cross-entropy as the closure (spec seed001 §2.5–2.6): forward passes only, eval mode.
* ``adamw``: first-order, non-private (spec §2.7).
* ``dp-adamw``: first-order DP (Yu et al. 2022's recipe, spec §2.7) by :class:`dpnc.first_order.DPOptimizer`:
  per-example gradients by ``torch.func`` (one example at a time, or ``vmap`` over ``functional_call``), each
  clipped to norm C (non-finite ones set to 0 first), summed, divided by the expected batch size B, plus
  N(0, (σ·C/B)²) noise from the secret :class:`~dpnc.privacy.noise.NoiseSource` (one release per step through
  :func:`~dpnc.privacy.mean.release_sum`, recorded in the accountant in real units),
  then an AdamW step.

Privacy. Private methods draw Poisson batches (each row joins w.p. q = B/n), so the accountant's event — the
Poisson-subsampled Gaussian under add/remove — describes exactly what the sampler does (spec §7.1: the published
code accounts Poisson but draws shuffled batches). The batches are **secret randomness** (:mod:`dpnc.sampling`): the
sampler draws them from its own operating-system entropy stream, never from ``seed``; every private optimizer draws
each batch itself, fetches its encoded rows (:class:`dpnc.batches.DataRows`, :class:`dpnc.batches.LoaderBatches`)
and hands them to the classifier, and DP-AdamW's mean divides by the fixed B. No batch, realised batch size or
per-step time is logged, saved, checkpointed or journaled (an adversary who knows which examples were sampled
defeats the amplified ε).

Public inputs. n is the config's **declared** public number of training examples (``FinetuneConfig.n``: a built-in
task's recipe k × classes, or ``--n``), never ``len(train)``: under add/remove neighbouring data sets differ in size,
and q = B/n, σ, the ledger and ``summary.json`` must not (the sampler draws from the rows there are, each with the
public q). Under replace-one the neighbours have the same size, so n is the number of rows by definition. The class
set is the task's, or declared (``label_words``, ``labels``, else the public test file's labels) for a private run
on a user's file, whose training rows outside the classes or the domain are dropped, never refused
(:mod:`dpnc.lm.files`). ``summary.json`` lists these inputs (``public_inputs``) and how the settings were chosen
(``recipe_selection``). The noise multiplier σ/Δ is calibrated with
:func:`dpnc.privacy.calibrate.noise_multiplier` so that all ``steps`` releases meet (ε, δ) by the chosen
accountant (RDP or PLD); every release is recorded; the report gives ε by RDP and by PLD.

Public outputs. ``metrics.jsonl``, TensorBoard, the progress bar and ``summary.json`` hold only what the run may
publish: test-split accuracy and loss, ε spent, the public direction seeds and the released scalars c_t — and no
time: a step's duration grows with its secret batch (and with a long example in it), so step times, eval time
stamps, a progress rate or the run's wall time would reveal which steps held what. Statistics of the training data
(per-step batch loss, non-finite count, clipped fraction, step time; the run's wall time, training rows and rows
dropped by the domain rule) are written only when ``log_private_stats=True`` (``--log-private-stats``), to
``private_train_stats.jsonl``, whose first line says they are NOT PRIVATE. The one timing channel left is the
run's total duration (and the bar's advance), seen by whoever runs or watches the process.

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

Data parallel. Under ``torchrun --nproc-per-node N`` (:func:`dpnc.distributed.from_environment` finds a group)
the zeroth-order methods run data parallel: every rank builds the same classifier; rank 0's secret sampler draws
each batch, each rank evaluates its part of it (caching the frozen layers of the rows it evaluates: the caches
are per rank), and a step exchanges a few numbers (:mod:`dpnc.distributed`); rank 0 adds the noise and keeps the
ledger. The evaluation set is split across the ranks and the results gathered. Rank 0 alone writes the run
folder (journal, checkpoints, metrics, TensorBoard, summary, plot, model); on resume it reads it and hands the
public state (model, optimizer, step) to the other ranks, and a refusal stops every rank alike. The summary is
rank 0's, on every rank. First-order methods are refused (their steps would all-reduce every gradient entry).

Modules: :mod:`dpnc.lm.config` (the settings), :mod:`dpnc.lm.steps` (one step per method, on the optimizers of
:mod:`dpnc.optim` and :mod:`dpnc.first_order`, whose step hooks say what each step did), :mod:`dpnc.lm.journal`
(run folder, journal, checkpoints) and this one (the loop, evaluation, resume).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import torch

from dpnc import distributed
# The run folder's and the config's names are re-exported here for callers of this module (experiments, tests).
from dpnc.lm.config import (CHECKPOINT, DTYPES, JOURNAL, KILL_ENV, KILL_PHASES, METHODS, METRICS, PRIVATE,  # noqa: F401
                            PRIVATE_STATS, PRIVATE_STATS_WARNING, SAMPLERS, ZEROTH_ORDER, ZO_RECIPES, FinetuneConfig,
                            default_model_path)
from dpnc.lm.config import FREE_FIELDS as _FREE_FIELDS
from dpnc.lm.cache import PrefixCache, cacheable_prefix
from dpnc.lm.data import TextDataset, load_task, recipe_size
from dpnc.lm.files import describe_data, load_user_data
from dpnc.lm.classifiers import build_classifier
from dpnc.lm.heads import EncoderClassifier
from dpnc.lm.journal import RunFiles, jsonable, replay_rows
from dpnc.lm.report import plot_training
from dpnc.lm.steps import StepRecord, Steps, build_optimizer, per_example_clipped_sum, step_release
from dpnc.lm.trainable import Trainable, select_trainable
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.calibrate import epsilon_for, noise_multiplier
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import Release
from dpnc.progress import progress
from dpnc.sampling import PoissonSampler, ShuffleSampler

__all__ = ["Evaluation", "FinetuneConfig", "METHODS", "StepRecord", "Summary", "Trainer", "default_model_path",
           "finetune", "per_example_clipped_sum"]


class Evaluation(NamedTuple):
    """A model's results on the evaluated test examples (public: test data only)."""

    accuracy: float
    loss: float          # mean cross-entropy over the examples whose loss is finite
    correct: str         # per example, in the evaluation set's order: "1" right, "0" wrong


@dataclass
class Summary:
    """A run's outcome, as written to ``summary.json``.

    Everything here is public: test-split results (and those of the initial model, ``zero_shot_*``), the privacy
    report, counts fixed by the config, the test file it read and the inputs it treated as public
    (``public_inputs``: n, the classes, B, T, ε, δ, C, …), with how its settings were chosen (``recipe_selection``,
    next to ε). Nothing here is a statistic of the training data (no training rows, non-finite counts or time:
    those go to the private statistics file only, with ``log_private_stats``).
    """

    task: str
    method: str
    model: str
    head: str
    train: str
    trained_parameters: int
    total_parameters: int
    steps: int
    n: int
    batch_size: int
    test_accuracy: float
    test_loss: float
    test_examples: int
    zero_shot_accuracy: float
    zero_shot_loss: float
    test_correct: str        # per test example (evaluation order), "1"/"0": for paired comparisons of runs
    zero_shot_correct: str
    relation: str
    sampler: str | None
    data: dict
    device: str
    cached_layers: int
    delta: float
    epsilon_rdp: float | None
    epsilon_pld: float | None
    epsilon_target: float | None
    noise_multiplier: float | None
    releases: int
    private: bool
    recipe_selection: str
    public_inputs: dict
    lost_releases: int
    stopped_early: bool
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(jsonable(dataclasses.asdict(self)), indent=2)



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
        caches: the (train, test) :class:`~dpnc.lm.cache.PrefixCache` of another trainer with the same model, data
            and frozen prefix (a sweep reuses them; default: computed here when ``config.cache`` allows).

    Under ``torchrun`` the run is data parallel (see the module docstring): every rank builds its Trainer alike;
    only rank 0's ``sampler`` and ``noise`` are used.

    Raises:
        ValueError: invalid settings, a budget that cannot afford ``steps`` (with ``noise_multiplier``), a sampler
            that does not match the config, or a refused resume or fresh start (the message says why).
    """

    def __init__(self, config: FinetuneConfig, *, noise: NoiseSource | None = None,
                 classifier: EncoderClassifier | None = None, train: TextDataset | None = None,
                 test: TextDataset | None = None, resume: bool = False,
                 sampler: PoissonSampler | ShuffleSampler | None = None,
                 caches: tuple[PrefixCache, PrefixCache] | None = None) -> None:
        self.config = c = config
        if resume and c.new_run:
            raise ValueError("resume and new_run exclude each other: resume continues the run in the folder, "
                             "new_run supersedes it; got both")
        self.group = distributed.from_environment()
        if self.group is not None and c.method not in (*ZEROTH_ORDER, "zero-shot"):
            raise ValueError(f"method must be one of {[*ZEROTH_ORDER, 'zero-shot']} in a data-parallel run "
                             f"({self.group.world_size} processes): a {c.method} step would all-reduce every "
                             "gradient entry; run it in one process")
        self.files = RunFiles(c, writer=self.group is None or self.group.is_source)
        self.train_set, self.test_set = self._data(train, test)
        self.n = self._public_n()
        if c.method != "zero-shot" and c.batch_size > self.n:
            raise ValueError(f"batch_size must be <= n = {self.n} (the public number of training examples); got "
                             f"{c.batch_size}")
        self.noise = noise if noise is not None else NoiseSource()
        self.relation = c.relation
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
            self._on_rank_0(self.files.check_fresh_start)
        self.device = self._device()
        self.classifier = classifier if classifier is not None else build_classifier(
            c.model, self.train_set.task, head=c.head, mode=c.prompt_mode, max_length=c.max_length,
            init="prompts")
        self.trainable: Trainable = select_trainable(
            self.classifier, c.train, top_k=c.top_k, lora_rank=c.lora_rank, lora_alpha=c.lora_alpha,
            lora_targets=c.lora_modules, seed=c.seed, freeze_embeddings=c.freeze_embeddings)
        self.classifier.to(self.device, getattr(torch, DTYPES[c.dtype])).eval()
        self.train_cache = self.test_cache = None
        self.eval_part = self.eval_set()   # the evaluation examples this rank evaluates (all, or its shard)
        if self.group is not None:
            self.eval_part = self.eval_part.subset(self.group.shard(torch.arange(len(self.eval_part))))
        if caches is not None:   # computed for another trainer of the same model, frozen prefix and data
            self.train_cache, self.test_cache = (cache.attach(self.classifier) for cache in caches)
        elif c.cache and (layers := cacheable_prefix(self.classifier)):
            # Filled as batches need rows; the evaluation set's in one go (it is read whole at every evaluation).
            if c.method != "zero-shot":
                self.train_cache = PrefixCache(self.classifier, self.train_set.texts, layers,
                                               batch_size=c.eval_batch_size)
            self.test_cache = PrefixCache(self.classifier, self.eval_part.texts, layers,
                                          batch_size=c.eval_batch_size).fill(progress=c.progress and self.files.writer)
        self.optimizer = build_optimizer(c, self.classifier, self.sampler, encode=self._encode,
                                         accountant=self.accountant, noise=self.noise, multiplier=self.multiplier,
                                         group=self.group)
        self.steps = Steps(c, self.classifier, self.optimizer, self.sampler, self.accountant, self._encode,
                           lambda phase: self.files.kill_point(phase, self.step), self._note)
        self.step = 0
        self.zero_shot = self.evaluate()   # the initial model, before any step (and before a resume loads one)
        self.nonfinite = 0   # non-finite per-example values (private: reported only with log_private_stats)
        self.lost_releases = 0
        self.history: list[StepRecord] = []
        self.notes: list[str] = []
        self._train_seconds = 0.0
        if resume:
            self._resume()
        elif c.new_run and (moved := self.files.supersede()):
            self.notes.append("new run: the earlier run's files were moved to " + ", ".join(moved))

    # --- setup ---------------------------------------------------------------------------------

    def _data(self, train, test) -> tuple[TextDataset, TextDataset]:
        c = self.config
        if train is not None and test is not None:
            return train, test
        if c.train_file is not None:
            return load_user_data(c.train_file, c.test_file, text_column=c.text_column, label_column=c.label_column,
                                  text_pair_column=c.text_pair_column, label_words=c.label_words, labels=c.labels,
                                  template=c.template, declared=c.private)
        if c.data_dir is None:
            raise ValueError("data_dir must be given (the folder with the LM-BFF k-shot folders), or train_file and "
                             "test_file (a user's own data)")
        return (load_task(c.task, c.data_dir, "train", seed=c.data_seed, k=c.k),
                load_task(c.task, c.data_dir, "test", seed=c.data_seed, k=c.k))

    def _device(self) -> torch.device:
        c = self.config
        cuda = torch.cuda.is_available()
        if c.device == "cuda" and not cuda:
            raise ValueError("device 'cuda' was asked for but torch sees no CUDA device; use device='cpu' or 'auto'")
        device = torch.device("cuda" if c.device == "cuda" or (c.device == "auto" and cuda) else "cpu")
        if device.type == "cpu" and c.dtype != "fp32":
            raise ValueError(f"dtype {c.dtype!r} is for CUDA forward passes (the paper's fp16 option); on the CPU "
                             "use dtype='fp32'")
        return device

    def _public_n(self) -> int:
        """The n of q = B/n, σ and the ledger: declared under add/remove; the rows' number under replace-one (the
        neighbours have the same size, so it is public by definition), or for a non-private run given none."""
        c, rows = self.config, len(self.train_set)
        if c.relation == "replace-one":
            if c.n is not None and c.n != rows:
                raise ValueError(f"n must be the number of training rows ({rows}) under relation 'replace-one' "
                                 f"(neighbours have the same size, and fixed-size batches draw from all rows); "
                                 f"got {c.n}")
            return rows
        return c.n if c.n is not None else rows

    def _n_rule(self) -> str:
        """How ``n`` was set, for ``summary.json``'s public inputs."""
        c = self.config
        if c.relation == "replace-one":
            return "the training rows' number: public under replace-one (neighbours have the same size)"
        if c.n is None:
            return "the training rows' number: a non-private method, no privacy claim"
        if c.train_file is None and c.n == recipe_size(c.task, c.k):
            return "the task's public recipe: k examples per class × classes (or declared equal to it)"
        return "declared (--n): the public number of training examples, or a public bound"

    def _check_sampler(self, sampler):
        c = self.config
        kind = PoissonSampler if c.sampler == "poisson" else ShuffleSampler
        if sampler is None:   # secret: its own operating-system entropy stream; n public, rows only say what exists
            return kind(self.n, c.batch_size, rows=len(self.train_set))
        if type(sampler) is not kind or sampler.n != self.n or sampler.batch_size != c.batch_size:
            raise ValueError(f"sampler must be a {kind.__name__} with n={self.n} (the public n) and batch_size="
                             f"{c.batch_size} (the config's {c.sampler!r} sampling); got {type(sampler).__name__}"
                             f"(n={getattr(sampler, 'n', None)}, batch_size={getattr(sampler, 'batch_size', None)})")
        return sampler

    def _calibrate(self) -> float:
        c = self.config
        q = c.batch_size / self.n
        fixed = self.n if c.sampler == "shuffle" else None   # fixed-size batches: their own event (replace-one)
        if c.noise_multiplier is None:
            return noise_multiplier(c.epsilon, c.delta, q, c.steps, accountant=c.accountant, relation=self.relation,
                                    fixed_size_of=fixed)
        spent = epsilon_for(c.noise_multiplier, q, c.steps, c.delta, accountant=c.accountant,
                            relation=self.relation, fixed_size_of=fixed)
        if spent > c.epsilon:
            raise ValueError(f"epsilon={c.epsilon:g} cannot afford steps={c.steps} at noise_multiplier="
                             f"{c.noise_multiplier:g} (q={q:.4g}): they spend ε={spent:.4g} by {c.accountant}; "
                             "raise epsilon or noise_multiplier, or lower steps")
        return float(c.noise_multiplier)

    def step_release(self) -> Release:
        """The release one training step makes (what a lost step is counted as): the optimizer's own."""
        return step_release(self.optimizer)

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
        labels = self.train_set.labels[index]
        if self.train_cache is not None:
            batch = self.train_cache.batch(index, labels)
        else:
            batch = self.classifier.encode([self.train_set.texts[i] for i in index.tolist()], labels)
        return {k: v.to(self.device) for k, v in batch.items()}

    def _note(self, note: str) -> None:
        self.files.private_stat({"event": "note", "step": self.step, "note": note})

    def train_step(self) -> StepRecord:
        """One step of the configured method on a batch drawn in secret by the sampler."""
        stats = self.config.log_private_stats
        start = time.perf_counter()
        self.files.journal({"t": self.step, "event": "begin", "release": self.step_release().to_dict()})
        self.files.kill_point("begin", self.step)
        record = self.steps.run(StepRecord(self.step))
        self.files.kill_point("released", self.step)
        self.files.journal({"t": self.step, "event": "end", "seed": record.seed, "released": record.released})
        self.files.kill_point("end", self.step)
        self.step += 1
        if stats:   # private statistics only: a step's time depends on its secret batch
            self.nonfinite += record.nonfinite
            record.seconds = time.perf_counter() - start
        self.history.append(record)
        return record

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
        c = self.config
        todo = self.step_budget if max_steps is None else min(self.step_budget, max_steps)
        records = []
        shown = c.progress and self.files.writer and todo > 0   # one bar, rank 0's, in a data-parallel run
        # Steps done and ε (the postfix), no timing: dpnc.progress.
        bar = progress(total=self.step + self.step_budget, initial=self.step, disable=not shown, desc=c.method,
                       unit="step", dynamic_ncols=True)
        start = time.perf_counter()
        try:
            for _ in range(todo):
                record = self.train_step()
                records.append(record)
                eps = self.epsilon()
                bar.update(1)
                bar.set_postfix(eps=f"{eps:.3g}")   # public only: no training loss
                self.files.metric({"event": "step", "step": self.step, "epsilon": eps, "released": record.released,
                              "seed": record.seed})
                if c.log_private_stats:
                    self.files.private_stat({"event": "step", "step": self.step, "loss": record.loss,
                                        "nonfinite": record.nonfinite, "clipped_fraction": record.clipped_fraction,
                                        "seconds": record.seconds})
                if c.eval_every and self.step % c.eval_every == 0 and self.step < self.total_steps:
                    acc, loss, _ = self.evaluate()
                    self.files.metric({"event": "eval", "step": self.step, "accuracy": acc, "loss": loss,
                                       "epsilon": eps})
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
    def evaluate(self, dataset: TextDataset | None = None) -> Evaluation:
        """Accuracy, mean cross-entropy and per-example correctness on the test split (``eval_examples`` of it: a
        fixed seeded subset, in a fixed order, so that runs on the same test split can be compared example by
        example)."""
        ds, cache = (dataset, None) if dataset is not None else (self.eval_part, self.test_cache)
        preds, losses = self.classifier.evaluate(ds.texts, ds.labels, batch_size=self.config.eval_batch_size,
                                                 cache=cache)
        preds, losses = preds.cpu(), losses.float().cpu()
        labels = ds.labels
        if dataset is None and self.group is not None:   # each rank evaluated its shard: gather, in order
            parts = self.group.gather_object((preds, losses))
            preds, losses = torch.cat([p for p, _ in parts]), torch.cat([loss for _, loss in parts])
            labels = self.eval_set().labels
        finite = torch.isfinite(losses)
        correct = preds == labels
        return Evaluation(float(correct.float().mean()), float(losses[finite].mean()) if finite.any() else math.nan,
                          "".join("1" if c else "0" for c in correct.tolist()))

    def eval_set(self) -> TextDataset:
        """The test examples evaluated: ``eval_examples`` of them, a fixed seeded subset (default all)."""
        m = self.config.eval_examples
        if m is None or m >= len(self.test_set):
            return self.test_set
        order = torch.randperm(len(self.test_set), generator=torch.Generator().manual_seed(0))
        return self.test_set.subset(order[:m])

    def data_record(self) -> dict:
        """Which data the run read (files, rows, classes, label words, template): public facts for summary.json."""
        c = self.config
        where = ({"train_file": c.train_file, "test_file": c.test_file} if c.train_file is not None else
                 {"task": c.task, "data_dir": c.data_dir, "data_seed": c.data_seed, "k": c.k})
        return {**where, **describe_data(self.train_set, self.test_set)}

    def public_inputs(self) -> dict:
        """The inputs this run treated as public (summary.json): none of them is read off the training data."""
        c, task = self.config, self.train_set.task
        classes = ("the task's" if c.train_file is None else "label_words" if c.label_words is not None else
                   "labels" if c.labels is not None else "the test file's labels" if c.private else
                   "the training file's labels (a non-private method)")
        zeroth = c.method in ZEROTH_ORDER
        return {"n": self.n, "n_rule": self._n_rule(), "label_names": list(task.label_names),
                "label_words": list(task.label_words), "classes_from": classes, "batch_size": c.batch_size,
                "steps": c.steps, "epsilon": c.epsilon if c.private else None, "delta": c.delta, "clip": c.clip,
                "noise_multiplier": self.multiplier, "lr": c.lr, "smoothing": c.smoothing if zeroth else None,
                "relation": self.relation, "sampler": None if self.sampler is None else c.sampler,
                "accountant": c.accountant, "max_length": c.max_length, "seed": c.seed}

    def recipe_selection(self) -> str:
        """How the run's settings were chosen, stated next to ε: the config's statement, else the trainer's."""
        c = self.config
        if c.recipe_selection is not None:
            return c.recipe_selection
        if not c.private:
            return "not private (no ε)"
        head = ZO_RECIPES["head"]
        if (c.train_file is None and c.task == "SST-2" and c.train == "head" and c.method in ZEROTH_ORDER
                and all(getattr(c, k) == v for k, v in head.items())):
            return ("non-private choice on training data; ε excludes it: the head recipe (lr, C, B, λ, T) was "
                    "chosen by the sweep in docs/results/finetune-defaults on SST-2's test split, beside non-private "
                    "MeZO runs on SST-2's training data")
        return ("declared by the caller; ε covers this run's releases, not how its settings were chosen (a choice "
                "made on the same training data is not covered: tune privately with dpnc.tune)")

    def summary(self, result: Evaluation) -> Summary:
        c = self.config
        report = self.accountant.report(c.delta) if self.accountant.releases else None
        stopped_early = self.step < self.total_steps
        notes = list(self.notes)
        if report is not None:   # (a Poisson-sampled ledger has no ρ: not worth a note here)
            notes += [n for n in report.notes if not n.startswith("rho:")]
        return Summary(
            task=self.train_set.task.name, method=c.method, model=c.model, head=c.head, train=c.train,
            trained_parameters=self.trainable.trained, total_parameters=self.trainable.total, steps=self.step,
            n=self.n, batch_size=c.batch_size, test_accuracy=result.accuracy, test_loss=result.loss,
            test_examples=len(self.eval_set()), zero_shot_accuracy=self.zero_shot.accuracy,
            zero_shot_loss=self.zero_shot.loss, test_correct=result.correct, zero_shot_correct=self.zero_shot.correct,
            relation=self.relation, sampler=None if self.sampler is None else c.sampler, data=self.data_record(),
            device=str(self.device), cached_layers=0 if self.train_cache is None else self.train_cache.layers,
            delta=c.delta, epsilon_rdp=0.0 if report is None else report.epsilon_rdp,
            epsilon_pld=0.0 if report is None else report.epsilon_pld,
            epsilon_target=c.epsilon if c.private else None, noise_multiplier=self.multiplier,
            releases=self.accountant.releases, private=self.private, recipe_selection=self.recipe_selection(),
            public_inputs=self.public_inputs(), lost_releases=self.lost_releases, stopped_early=stopped_early,
            notes=notes)

    def private_run_stats(self, wall: float) -> dict:
        """The run's statistics of the training data (private_train_stats.jsonl only): time, rows, drops."""
        done = len(self.history)
        return {"event": "run", "wall_seconds": wall, "seconds_per_step": self._train_seconds / done if done else None,
                "nonfinite": self.nonfinite, "train_rows": len(self.train_set),
                "dropped_rows": self.train_set.dropped}

    # --- checkpoints and resume ----------------------------------------------------------------

    def save_checkpoint(self) -> Path:
        """Write ``checkpoint.pt`` atomically, then restart the journal. Never saves the noise source or sampler."""
        state = {"version": 2, "config": self.config.to_dict(), "step": self.step,
                 "model": self.classifier.state_dict(),
                 "optimizer": None if self.optimizer is None else self.optimizer.state_dict(),
                 "ledger": self.accountant.to_json(), "lost_releases": self.lost_releases, "notes": self.notes}
        return self.files.save_checkpoint(state, self.step)

    def _on_rank_0(self, compute):
        """``compute()`` on rank 0 (or this process alone), its value (or ValueError) on every rank."""
        return compute() if self.group is None else self.group.share(compute)

    def _resume(self) -> None:
        """Rank 0 resumes from the run folder; under a group the other ranks take its public state."""
        state = self._on_rank_0(self._resume_here)
        if self.group is None:
            return
        if not self.group.is_source:
            if self.optimizer is not None:
                self.optimizer.load_state_dict(state["optimizer"])
            self.step, self.lost_releases, self.notes = state["step"], state["lost_releases"], state["notes"]
        # The classifier as rank 0 resumed it (checkpoint, then replayed steps): d numbers, once.
        self.group.broadcast_parameters_(self.classifier.state_dict().values())

    def _resume_here(self) -> dict:
        """Load the checkpoint and replay the journal; the public state the other ranks need."""
        c = self.config
        state, saved, rows = self.files.load()
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
            self.steps.accountant = self.accountant
            self.step = state["step"]
            self.lost_releases, self.notes = state["lost_releases"], list(state["notes"])
        start = self.step
        replayed, lost = replay_rows(rows, self.step, zeroth_order=c.method in ZEROTH_ORDER, replay=self._replay,
                                     record=self.accountant.record)
        self.lost_releases += lost
        if replayed or lost:
            self.notes.append(f"resumed at step {start}{'' if state is not None else ' (no checkpoint)'}: "
                              f"{replayed} step(s) replayed from the journal, {lost} begun step(s) counted as "
                              "releases")
        self.files.metric({"event": "resume", "step": self.step, "replayed": replayed, "lost_releases": lost,
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
        return {"optimizer": None if self.optimizer is None else self.optimizer.state_dict(), "step": self.step,
                "lost_releases": self.lost_releases, "notes": list(self.notes)}

    @torch.no_grad()
    def _replay(self, seed: int, released: float) -> None:
        """x ← x − η·c_t·u(seed): a zeroth-order step re-applied from its public seed and released scalar."""
        try:
            self.optimizer.replay_(seed, released)
        except ValueError as error:
            raise ValueError(f"journal does not match the checkpoint at step {self.step}: {error}") from None
        self.step += 1

    def save_model(self, path: str | Path) -> Path:
        """The fine-tuned encoder + tokenizer (``save_pretrained``) and head, loadable by
        :func:`~dpnc.lm.classifiers.load_classifier`."""
        return self.classifier.save_pretrained(path)

    def run(self) -> Summary:
        """Train, evaluate on the test split, write ``summary.json`` and the model to ``out``; return the summary."""
        c = self.config
        start = time.perf_counter()
        if self.step == 0:
            self.files.metric({"event": "eval", "step": 0, "accuracy": self.zero_shot.accuracy,
                               "loss": self.zero_shot.loss, "epsilon": 0.0})
        self.train()
        result = self.evaluate()
        self.files.metric({"event": "eval", "step": self.step, "accuracy": result.accuracy, "loss": result.loss,
                           "epsilon": self.epsilon(), "final": True})
        summary = self._on_rank_0(lambda: self.summary(result))   # rank 0's ledger
        self.files.private_stat(self.private_run_stats(time.perf_counter() - start))
        if c.out and self.files.writer:
            out = Path(c.out)
            out.mkdir(parents=True, exist_ok=True)
            (out / "summary.json").write_text(summary.to_json())
            plot_training(self.files.rows, out / "training.png", title=f"{c.method} on {summary.task}, train="
                          f"{c.train}: {summary.zero_shot_accuracy:.3f} → {result.accuracy:.3f}")
            if c.method != "zero-shot":
                self.save_model(out / "model")
        if self.files.tensorboard is not None:
            self.files.tensorboard.close()
        return summary


def finetune(config: FinetuneConfig, *, resume: bool = False, noise: NoiseSource | None = None) -> Summary:
    """Build a :class:`Trainer` for ``config`` (resuming if asked) and run it."""
    return Trainer(config, noise=noise, resume=resume).run()
