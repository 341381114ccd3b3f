"""Fine-tuning a text classifier: zero-shot, MeZO, DPZero, AdamW and DP-AdamW.

One :class:`Trainer` runs every method (``dpnc finetune``), so private and non-private runs share
the data, the evaluation, the journal and the public outputs. What each method trains, what the run
writes and why it holds no time: docs/finetuning.md and docs/privacy.md; under ``torchrun``:
docs/distributed.md."""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch

from dpnc import distributed
from dpnc.lm.cache import PrefixCache, cacheable_prefix
from dpnc.lm.canaries import canary_free_accuracy, for_run
from dpnc.lm.classifiers import build_classifier

# The run folder's and the config's names are re-exported here for callers of this module
# (experiments, tests).
from dpnc.lm.config import (  # noqa: F401
    CHECKPOINT,
    DTYPES,
    JOURNAL,
    KILL_ENV,
    KILL_PHASES,
    METHODS,
    METRICS,
    PRIVATE,
    PRIVATE_STATS,
    PRIVATE_STATS_WARNING,
    SAMPLERS,
    ZEROTH_ORDER,
    ZO_RECIPES,
    FinetuneConfig,
    default_model_path,
)
from dpnc.lm.data import TextDataset
from dpnc.lm.estimate import Estimate, Estimator
from dpnc.lm.evaluation import (
    Evaluation,
    Evaluator,
    Reporter,
    Summary,
    data_record,
    eval_set,
    spent_epsilon,
)
from dpnc.lm.files import load_user_data
from dpnc.lm.heads import EncoderClassifier
from dpnc.lm.journal import RunFiles
from dpnc.lm.lmbff import load_task
from dpnc.lm.owner_checks import check_training_data, tell_owner
from dpnc.lm.resume import Checkpoints
from dpnc.lm.staging import Staging
from dpnc.lm.steps import (
    StepRecord,
    Steps,
    build_optimizer,
    encode_rows,
    per_example_clipped_sum,
    step_release,
)
from dpnc.lm.trainable import Trainable, select_trainable
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import Release
from dpnc.progress import progress
from dpnc.sampling import PoissonSampler, ShuffleSampler
from dpnc.tier.base import StepHooks

__all__ = [
    "Evaluation",
    "FinetuneConfig",
    "METHODS",
    "StepRecord",
    "Summary",
    "Trainer",
    "default_model_path",
    "finetune",
    "per_example_clipped_sum",
]

# The most step rows of metrics.jsonl that carry ε (plus the last and the evaluations'). ε by PLD
# costs 0.1-2 s a call on a busy 2-core machine: 100 points took 88 of a 2-minute 300-step run. 10,
# as many as the default evaluations (every steps // 10), fall on the evaluations' steps, which
# carry ε anyway: quick start 2's 50 steps computed ε 23 times with 20 points, 10 times with 10
# (0.23 s of CPU each, measured on a busy machine).
EPSILON_POINTS = 10


class Trainer:
    """Runs one :class:`FinetuneConfig`: builds (or resumes) the classifier, trains, evaluates,
    saves.

    It sets the run up and holds the parts that do the work, each handed only what it needs:
    :class:`~dpnc.lm.journal.RunFiles` (the run folder: metrics, private statistics, journal,
    outputs), :class:`~dpnc.lm.steps.Steps` (one step per method, on the optimizers of
    :mod:`dpnc.tier`), :class:`~dpnc.lm.evaluation.Evaluator` (the test-split evaluation),
    :class:`~dpnc.lm.evaluation.Reporter` (``summary.json``), :class:`~dpnc.lm.resume.Checkpoints`
    (checkpoints and resume) and :class:`~dpnc.lm.estimate.Estimator` (the time estimate); the
    settings are :mod:`dpnc.lm.config`.

    Args:
        config: the run.
        noise: the secret noise source (a fresh ``NoiseSource()`` by default; tests pass
            ``NoiseSource.for_testing``, which marks every result not private).
        classifier: a prebuilt classifier (default: built from ``config.model``).
        train, test: datasets (default: loaded from ``config.data_dir``).
        resume: continue the run journaled (and maybe checkpointed) in ``config.run_dir`` (refused
            if there is nothing to resume, if the config differs or if the budget is spent). Without
            it, a run folder holding a journal or checkpoint is refused unless ``config.new_run``.
        sampler: the batch sampler (default: a fresh secret one of the config's kind; tests pass
            ``PoissonSampler.for_testing``, which marks every result not private). It must match the
            config.
        caches: the (train, test) :class:`~dpnc.lm.cache.PrefixCache` of another trainer with the
            same model, data and frozen prefix (a sweep reuses them; default: computed here when
            ``config.cache`` allows).

    Under ``torchrun`` the run is data parallel (docs/distributed.md): every rank builds its
    Trainer alike; only rank 0's ``sampler`` and ``noise`` are used.

    Raises:
        ValueError: invalid settings, a budget that cannot afford ``steps`` (with
            ``noise_multiplier``), a sampler that does not match the config, or a refused resume or
            fresh start (the message says why).
    """

    def __init__(
        self,
        config: FinetuneConfig,
        *,
        noise: NoiseSource | None = None,
        classifier: EncoderClassifier | None = None,
        train: TextDataset | None = None,
        test: TextDataset | None = None,
        resume: bool = False,
        sampler: PoissonSampler | ShuffleSampler | None = None,
        caches: tuple[PrefixCache, PrefixCache] | None = None,
    ) -> None:
        self.config = c = config
        if resume and c.new_run:
            raise ValueError(
                "resume and new_run exclude each other: resume continues the run in the folder, "
                "new_run supersedes it; got both"
            )
        self.group = distributed.from_environment()
        if self.group is not None and c.method == "adamw":
            raise ValueError(
                f"method must be private or zeroth order in a data-parallel run ({self.group.world_size} "
                "processes): the non-private AdamW baseline runs in one process; got 'adamw'"
            )
        self.files = RunFiles(c, writer=self.group is None or self.group.is_source)
        self.train_set, self.test_set = self._data(train, test)
        self.owner_notes: list[
            str
        ] = []  # the owner's checks' notes: the terminal and the private statistics only
        self.n = self._public_n()
        # The owner's checks (they read the data), before any release.
        if c.method != "zero-shot":
            self.owner_notes += check_training_data(
                self.train_set,
                n=self.n,
                delta=c.delta if c.private else None,
                n_declared=c.train_file is not None,
                allow_empty_train=c.allow_empty_train,
                allow_missing_classes=c.allow_missing_classes,
                allow_label_mismatch=c.allow_label_mismatch,
                allow_n_mismatch=c.allow_n_mismatch,
                allow_replacement_chars=c.allow_replacement_chars,
            )
        # --self-audit M: the canaries drawn in join the data after the owner's checks; the public n
        # grows by M
        self.canaries = for_run(
            c,
            self.train_set.task,
            secret=noise is None or noise.secret,
            resume=resume,
            parallel=self.group is not None,
        )
        if self.canaries is not None:
            self.train_set, self.n = self.canaries.join(self.train_set), self.n + c.self_audit
        if c.method != "zero-shot" and c.batch_size > self.n:
            raise ValueError(
                f"batch_size must be <= n = {self.n} (the public number of training examples); got "
                f"{c.batch_size}"
            )
        self.noise = noise if noise is not None else NoiseSource()
        self.relation = c.relation
        self.accountant = Accountant(self.relation)
        self.sampler = None
        if c.method != "zero-shot":
            self.sampler = self._check_sampler(sampler)
            self.sampler.check_relation(self.relation)
        elif sampler is not None:
            raise ValueError(
                "sampler must be None for method='zero-shot' (it draws no batches); got "
                f"{type(sampler).__name__}"
            )
        if not resume:
            self._on_rank_0(self.files.check_fresh_start)
        for note in self.owner_notes:
            self.files.private_stat({"event": "owner_check", "note": note})
        self.device = self._device()
        self.classifier = (
            classifier
            if classifier is not None
            else build_classifier(
                c.model,
                self.train_set.task,
                head=c.head,
                mode=c.prompt_mode,
                max_length=c.max_length,
                init="prompts",
            )
        )
        self.trainable: Trainable = select_trainable(
            self.classifier,
            c.train,
            top_k=c.top_k,
            lora_rank=c.lora_rank,
            lora_alpha=c.lora_alpha,
            lora_targets=c.lora_modules,
            seed=c.seed,
            freeze_embeddings=c.freeze_embeddings,
        )
        self.classifier.to(self.device, getattr(torch, DTYPES[c.dtype])).eval()
        self.train_cache = self.test_cache = None
        # test examples timed at setup, for the time estimate (dpnc.lm.estimate)
        self.setup_seconds: dict[str, float] = {}
        # the test examples evaluated, and those this rank evaluates (all, or its shard)
        examples = self.eval_part = eval_set(self.test_set, c.eval_examples)
        if self.group is not None:
            self.eval_part = examples.subset(self.group.shard(torch.arange(len(examples))))
        if (
            caches is not None
        ):  # computed for another trainer of the same model, frozen prefix and data
            if (
                c.self_audit
            ):  # this run's training rows hold its own secret canaries, which no other run shares
                raise ValueError("caches cannot be shared with a self-audited run (--self-audit)")
            self.train_cache, self.test_cache = (cache.attach(self.classifier) for cache in caches)
        elif c.cache and (layers := cacheable_prefix(self.classifier)):
            # Filled as batches need rows; the evaluation set's in one go (it is read whole at every
            # evaluation).
            if c.method != "zero-shot":
                self.train_cache = PrefixCache(
                    self.classifier, self.train_set.texts, layers, batch_size=c.eval_batch_size
                )
            start = time.perf_counter()
            self.test_cache = PrefixCache(
                self.classifier, self.eval_part.texts, layers, batch_size=c.eval_batch_size
            ).fill(progress=c.progress and self.files.writer)
            if rows := len(self.eval_part):
                self.setup_seconds["frozen_row"] = (time.perf_counter() - start) / rows
        self.evaluator = Evaluator(
            self.classifier,
            examples,
            self.eval_part,
            cache=self.test_cache,
            batch_size=c.eval_batch_size,
            group=self.group,
        )
        self.optimizer = build_optimizer(
            c,
            self.classifier,
            self.sampler,
            encode=self._encode,
            accountant=self.accountant,
            noise=self.noise,
            n=self.n,
            group=self.group,
        )
        # σ/Δ as the wiring calibrated it to the budget (None: not private, or zero-shot)
        self.multiplier = self.optimizer and self.optimizer.wiring.noise_multiplier
        self.steps = Steps(
            c,
            self.classifier,
            self.optimizer,
            self.sampler,
            self.accountant,
            self._encode,
            lambda phase: self.files.kill_point(phase, self.step),
            self._note,
        )
        self.checkpoints = Checkpoints(self.files, self.classifier, self.optimizer, c)
        self.step = 0
        start = time.perf_counter()
        # the initial model, before any step (and before a resume loads one)
        self.zero_shot = self.evaluate()
        self.setup_seconds["evaluation"] = time.perf_counter() - start
        self.reporter = Reporter(
            c,
            task=self.train_set.task,
            n=self.n,
            multiplier=self.multiplier,
            sampler=None if self.sampler is None else c.sampler,
            trainable=self.trainable,
            device=self.device,
            cached_layers=0 if self.train_cache is None else self.train_cache.layers,
            test_examples=len(examples),
            zero_shot=self.zero_shot,
            private=self.private,
            world_size=self.world_size,
        )
        self.estimator = Estimator(
            c,
            self.classifier,
            self.eval_part,
            self.test_cache,
            device=self.device,
            sampler=self.sampler,
            multiplier=self.multiplier,
            n=self.n,
            world_size=self.world_size,
            setup_seconds=self.setup_seconds,
            caches_training_rows=self.train_cache is not None,
        )
        self.nonfinite = (
            0  # non-finite per-example values (private: reported only with log_private_stats)
        )
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
            return load_user_data(
                c.train_file,
                c.test_file,
                text_column=c.text_column,
                label_column=c.label_column,
                text_pair_column=c.text_pair_column,
                label_words=c.label_words,
                labels=c.labels,
                template=c.template,
                declared=c.private,
                test_public=c.test_public,
            )
        if c.data_dir is None:
            raise ValueError(
                "data_dir must be given (the folder with the LM-BFF k-shot folders), or train_file and "
                "test_file (a user's own data)"
            )
        return (
            load_task(c.task, c.data_dir, "train", seed=c.data_seed, k=c.k, lenient=c.private),
            load_task(c.task, c.data_dir, "test", seed=c.data_seed, k=c.k),
        )

    def _device(self) -> torch.device:
        c = self.config
        cuda = torch.cuda.is_available()
        if c.device == "cuda" and not cuda:
            raise ValueError(
                "device 'cuda' was asked for but torch sees no CUDA device; use device='cpu' or 'auto'"
            )
        device = torch.device(
            "cuda" if c.device == "cuda" or (c.device == "auto" and cuda) else "cpu"
        )
        if device.type == "cpu" and c.dtype != "fp32":
            raise ValueError(
                f"dtype {c.dtype!r} is for CUDA forward passes (the paper's fp16 option); on the CPU "
                "use dtype='fp32'"
            )
        return device

    def _public_n(self) -> int:
        """The n of q = B/n, σ and the ledger: declared (a built-in task's is its recipe, k per
        class × classes), under every relation; the rows' number only for a non-private run given
        none (it claims nothing)."""
        # Under replace-one n is the number of slots of the fixed-size batches: a record the domain
        # rule drops is an empty slot, and records beyond n are never drawn (the sampler's rows stop
        # at n; the owner is told).
        c, rows = self.config, len(self.train_set) + self.train_set.dropped
        if c.n is not None and c.relation == "replace-one" and len(self.train_set) > c.n:
            note = (
                f"the training file holds more examples than the declared n = {c.n}: under replace-one "
                f"only the first {c.n} are drawn"
            )
            tell_owner(note)
            self.owner_notes.append(note)
        return c.n if c.n is not None else rows

    def _check_sampler(self, sampler):
        c = self.config
        kind = PoissonSampler if c.sampler == "poisson" else ShuffleSampler
        if (
            sampler is None
        ):  # secret: its own operating-system entropy stream; n public, rows only say what exists
            rows = (
                len(self.train_set) if kind is PoissonSampler else min(len(self.train_set), self.n)
            )  # n slots
            return kind(self.n, c.batch_size, rows=rows)
        if type(sampler) is not kind or sampler.n != self.n or sampler.batch_size != c.batch_size:
            raise ValueError(
                f"sampler must be a {kind.__name__} with n={self.n} (the public n) and batch_size="
                f"{c.batch_size} (the config's {c.sampler!r} sampling); got {type(sampler).__name__}"
                + (
                    f"(n={sampler.n}, batch_size={sampler.batch_size})"
                    if isinstance(sampler, PoissonSampler | ShuffleSampler)
                    else ""
                )
            )
        return sampler

    def step_release(self) -> Release:
        """The release one training step makes (what a lost step is counted as): the optimizer's
        own."""
        return step_release(self.optimizer)

    @property
    def world_size(self) -> int:
        """The processes of this run: the wiring's record (zero-shot, which wires no optimizer: the
        group's)."""
        if self.optimizer is not None:
            return self.optimizer.wiring.world_size
        return 1 if self.group is None else self.group.world_size

    @property
    def total_steps(self) -> int:
        return self.config.steps

    @property
    def private(self) -> bool:
        """True when the run's ε holds: a private method with secret noise and secret batches."""
        return (
            self.config.private
            and self.noise.secret
            and self.sampler is not None
            and self.sampler.secret
        )

    # --- evaluation and report ------------------------------------------------------------------

    def evaluate(self, dataset: TextDataset | None = None) -> Evaluation:
        """Accuracy, mean cross-entropy and per-example correctness on the evaluated test examples
        (:meth:`eval_set`, in their fixed order), or on ``dataset``."""
        return self.evaluator.evaluate(dataset)

    def eval_set(self) -> TextDataset:
        """The test examples evaluated: ``eval_examples`` of them, a fixed seeded subset (default
        all)."""
        return self.evaluator.examples

    def summary(self, result: Evaluation) -> Summary:
        """What ``summary.json`` holds after ``result``, the run's last evaluation: public values
        only."""
        return self.reporter.summary(
            result,
            data=data_record(self.config, self.train_set, self.test_set),
            ledger=self.accountant,
            step=self.step,
            lost_releases=self.lost_releases,
            notes=self.notes,
            self_audit=self.self_audit(result),
        )

    def self_audit(self, result: Evaluation) -> dict | None:
        """The run's one-run audit (``--self-audit M``; None without), with the accuracy cost
        against the canary-free twin run when ``canary_free_run`` names one (public: the bound, its
        counts, test accuracies)."""
        c = self.config
        if self.canaries is None:
            return None
        twin = None if c.canary_free_run is None else canary_free_accuracy(c.canary_free_run, c)
        return self.canaries.result(
            self.classifier,
            delta=c.delta,
            claimed_epsilon=self.epsilon(),
            private=self.private,
            accuracy=result.accuracy,
            canary_free_accuracy=twin,
            batch_size=c.eval_batch_size,
        ).to_dict()

    def _private_run_stats(self, wall: float) -> dict:
        """The run's statistics of the training data (private_train_stats.jsonl only): time, rows,
        drops."""
        done = len(self.history)
        return {
            "event": "run",
            "wall_seconds": wall,
            "seconds_per_step": self._train_seconds / done if done else None,
            "nonfinite": self.nonfinite,
            "train_rows": len(self.train_set),
            "dropped_rows": self.train_set.dropped,
        }

    # --- checkpoints and resume -----------------------------------------------------------------

    def save_checkpoint(self) -> Path:
        """Write ``checkpoint.pt`` atomically, then restart the journal. Never saves the noise
        source or sampler."""
        return self.checkpoints.save(self.step, self.accountant, self.lost_releases, self.notes)

    def _resume(self) -> None:
        """Rank 0 resumes from the run folder; under a group the other ranks take its public
        state."""
        state = self._on_rank_0(self._resume_here)
        if self.group is None:
            return
        if not self.group.is_source:
            if self.optimizer is not None:
                self.optimizer.load_state_dict(state["optimizer"])
            self.step, self.lost_releases, self.notes = (
                state["step"],
                state["lost_releases"],
                state["notes"],
            )
        # The classifier as rank 0 resumed it (checkpoint, then replayed steps): d numbers, once.
        self.group.broadcast_parameters_(self.classifier.state_dict().values())

    def _resume_here(self) -> dict:
        """Resume (:meth:`~dpnc.lm.resume.Checkpoints.resume`) and take up its state; the public
        state the other ranks need."""
        step, ledger, lost_releases, notes = self.checkpoints.resume(self.accountant)
        if ledger is not self.accountant:  # the checkpoint's, recorded in from now on
            self.accountant = self.steps.accountant = ledger
            if isinstance(self.optimizer, StepHooks):  # dpnc's optimizers record in it themselves
                self.optimizer.accountant = ledger
        self.step, self.lost_releases, self.notes = step, lost_releases, notes
        return {
            "optimizer": None if self.optimizer is None else self.optimizer.state_dict(),
            "step": self.step,
            "lost_releases": self.lost_releases,
            "notes": list(self.notes),
        }

    # --- one step ------------------------------------------------------------------------------

    def _encode(self, index: torch.Tensor) -> dict[str, torch.Tensor]:
        """The classifier's input for the examples ``index`` of the train set (a batch the sampler
        drew)."""
        return encode_rows(self.classifier, self.train_set, self.train_cache, self.device, index)

    def _note(self, note: str) -> None:
        self.files.private_stat({"event": "note", "step": self.step, "note": note})

    def train_step(self) -> StepRecord:
        """One step of the configured method on a batch drawn in secret by the sampler."""
        stats = self.config.log_private_stats
        start = time.perf_counter()
        record = self.steps.journaled(self.files, self.step)
        self.step += 1
        if stats:  # private statistics only: a step's time depends on its secret batch
            self.nonfinite += record.nonfinite
            record.seconds = time.perf_counter() - start
        self.history.append(record)
        return record

    # --- the loop ------------------------------------------------------------------------------

    @property
    def step_budget(self) -> int:
        """Steps this run may still take: T minus steps done, minus lost releases (so ε never
        exceeds the plan)."""
        return max(self.total_steps - self.step - self.lost_releases, 0)

    def train(self, max_steps: int | None = None) -> list[StepRecord]:
        """Run until ``steps`` (or until ``max_steps`` more steps: a test's simulated kill, no final
        checkpoint).

        Writes a metrics line per step and per evaluation (public values only), checkpoints every
        ``checkpoint_every`` steps and at the end (when checkpointing:
        :attr:`FinetuneConfig.checkpointing`)."""
        c = self.config
        todo = self.step_budget if max_steps is None else min(self.step_budget, max_steps)
        records = []
        shown = (
            c.progress and self.files.writer and todo > 0
        )  # one bar, rank 0's, in a data-parallel run
        if shown:  # before a long run (LoRA on a CPU: hours), say so: timed on test examples only
            print(self.estimate_line(todo), flush=True)
        # Steps done and ε (the postfix), no timing: dpnc.progress.
        bar = progress(
            total=self.step + self.step_budget,
            initial=self.step,
            disable=not shown,
            desc=c.method,
            unit="step",
            dynamic_ncols=True,
        )
        start = time.perf_counter()
        try:
            for _ in range(todo):
                record = self.train_step()
                records.append(record)
                epsilon, evaluating, checkpoint = self.marks(self.step)
                eps = self.epsilon() if epsilon else None
                if epsilon:
                    bar.set_postfix(eps=f"{eps:.3g}")  # public only: no training loss
                bar.update(1)
                self.files.step_rows(self.step, record, eps)
                if evaluating:
                    self.files.eval_row(self.step, self.evaluate(), eps)
                if checkpoint:
                    self.save_checkpoint()
        finally:
            bar.close()
            self._train_seconds += time.perf_counter() - start
        if max_steps is None and c.checkpointing:
            self.save_checkpoint()
        return records

    def marks(self, step: int) -> tuple[bool, bool, bool]:
        """What the loop does after step ``step`` besides it: compute ε, evaluate, checkpoint
        (public: the settings decide)."""
        c = self.config
        evaluating = (
            bool(c.eval_every)
            and c.evaluated
            and step % c.eval_every == 0
            and step < self.total_steps
        )
        # ε by PLD takes ~60-130 ms a call (a step of a head: ~2 ms), so it is computed at most ~20
        # times a run: every `every` steps (public: the run's length decides), at the last step and
        # with each evaluation.
        every = max(1, math.ceil(self.total_steps / EPSILON_POINTS))
        last = step >= self.total_steps - self.lost_releases  # no step budget left
        checkpoint = bool(c.checkpoint_every) and step % c.checkpoint_every == 0
        return step % every == 0 or last or evaluating, evaluating, checkpoint

    def estimate(self, steps: int) -> Estimate | None:
        """The time of the next ``steps`` steps and of the run's end (:mod:`dpnc.lm.estimate`):
        never timed on the training data (a step's time is a statistic of its secret batch); None
        without steps to take or test examples to time them on."""
        if steps <= 0 or self.optimizer is None or not len(self.eval_part):
            return None
        return self.estimator.estimate(
            [self.marks(s) for s in range(self.step + 1, self.step + steps + 1)],
            ledger=self.accountant,
            release=self.step_release(),
            checkpoint=(
                self.checkpoints.state(self.step, self.accountant, self.lost_releases, self.notes)
                if self.config.checkpointing
                else None
            ),
        )

    def estimate_line(self, steps: int) -> str:
        """What the trainer prints before ``steps`` steps: the estimate, and what it was timed
        on."""
        return self.estimator.line(steps, self.estimate(steps))

    def estimate_seconds(self, steps: int) -> float:
        """A rough time for ``steps`` more steps and the run's end (0 without test examples to time
        them on)."""
        estimate = self.estimate(steps)
        return 0.0 if estimate is None else estimate.total

    def epsilon(self, method: str | None = None) -> float:
        """ε spent so far at the config's δ (0 before any release, ∞ for non-private methods), by
        ``method`` (default: the config's accountant)."""
        return spent_epsilon(self.accountant, self.config.delta, method or self.config.accountant)

    def _on_rank_0(self, compute):
        """``compute()`` on rank 0 (or this process alone), its value (or ValueError) on every
        rank."""
        return compute() if self.group is None else self.group.share(compute)

    def save_model(self, path: str | Path) -> Path:
        """The fine-tuned encoder + tokenizer (``save_pretrained``) and head, loadable by
        :func:`~dpnc.lm.classifiers.load_classifier`."""
        return self.classifier.save_pretrained(path)

    def run(self) -> Summary:
        """Train, evaluate on the test split, write ``summary.json`` and the model to ``out``;
        return the summary (under ``torchrun``, rank 0's, on every rank)."""
        c = self.config
        start = time.perf_counter()
        if self.step == 0 and c.evaluated:
            self.files.eval_row(0, self.zero_shot, 0.0)
        self.train()
        result = self.evaluate()
        if c.evaluated:  # (a train-only run: its last step's row holds the ε spent)
            self.files.eval_row(self.step, result, self.epsilon(), final=True)
        summary = self._on_rank_0(lambda: self.summary(result))  # rank 0's ledger
        self.files.private_stat(self._private_run_stats(time.perf_counter() - start))
        title = (
            f"{c.method} on {summary.task}, train="
            f"{c.train}: {summary.zero_shot_accuracy:.3f} → {result.accuracy:.3f}"
        )
        out = self.files.publish(summary, title=title)
        if out is not None and c.method != "zero-shot":
            self.save_model(out / "model")
        self.files.close()
        if self.files.writer:  # said before the first step; said again where the owner looks last
            for note in self.owner_notes:
                tell_owner(note)
        return summary


def finetune(
    config: FinetuneConfig, *, resume: bool = False, noise: NoiseSource | None = None
) -> Summary:
    """Build a :class:`Trainer` for ``config`` (resuming if asked) and run it.

    The run writes into ``<out>.partial``, renamed to ``out`` when it has finished: a failure before
    the first step leaves nothing, one after it the run's ledger (:mod:`dpnc.lm.staging`:
    ``--resume`` continues it)."""
    staging = Staging.plan(config, resume=resume)
    if staging is None:
        return Trainer(config, noise=noise, resume=resume).run()
    group = distributed.from_environment()
    writer = group is None or group.is_source  # rank 0 alone writes the run folder
    try:
        summary = Trainer(staging.config, noise=noise, resume=resume).run()
    except BaseException as error:  # KeyboardInterrupt too: nothing half-written stays behind
        if writer:
            staging.discard(error)
        raise
    if writer:
        staging.publish()
    return summary
