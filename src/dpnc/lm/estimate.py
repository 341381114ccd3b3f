"""How long the rest of a fine-tuning run will take, said before its first step, timed on public
inputs only.

A step's time is a statistic of its secret batch (how many rows it holds, how long they are, whether
their frozen layers are cached yet: docs/privacy.md, "Side channels"), so the estimate never times
the training data. What it rehearses and counts: :class:`Estimator`, :class:`Estimate`."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from dpnc.lm.cache import PrefixCache
from dpnc.lm.config import FinetuneConfig
from dpnc.lm.data import TextDataset
from dpnc.lm.evaluation import spent_epsilon
from dpnc.lm.heads import EncoderClassifier
from dpnc.lm.journal import RunFiles
from dpnc.lm.report import plot_training, pyplot
from dpnc.lm.steps import Steps, build_optimizer, encode_rows
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import Release

WARM = 5  # the most warm steps rehearsed
SHARE = 20  # one warm step per this many steps of the run (at least one)
PARTS = (
    ("steps", "steps"),
    ("frozen_layers", "frozen layers"),
    ("epsilon", "ε"),
    ("evaluations", "evaluations"),
    ("checkpoints", "checkpoints"),
    ("end", "the end"),
)


@dataclass(frozen=True)
class Estimate:
    """Seconds the rest of a run should take, by part, and what was timed.

    Each part is counted from the run's public settings and timed on public inputs:

    * steps: the first (cold: first calls, a route's first-batch check) and the others at the mean
      of 1 to 5 warm ones, one per 20 steps of the run (the rehearsal costs about 5% of the steps'
      time);
    * frozen layers: a training row's are computed the first time a batch holds it
      (:mod:`dpnc.lm.cache`), and the run meets n·(1 − (1 − q)^T) rows on average (n and q = B/n
      are public), each at the time a test row took at setup;
    * ε: computed every ⌈T/10⌉ steps, at each evaluation and at the last step; the first and the
      last are computed on a copy of the ledger (cached: the run reuses them), the others counted
      at their mean;
    * evaluations: each evaluation of the run and the final one, at the time the untrained model's
      took at setup;
    * checkpoints: one written to the throwaway folder, times the number the run writes;
    * the end: the training plot, drawn (empty) into the throwaway folder.

    Not counted: writing the model and the summary, the progress bar, the process's start and exit.
    """

    steps: float
    frozen_layers: float
    epsilon: float
    evaluations: float
    checkpoints: float
    end: float
    rehearsed: int  # steps of the run's own step rehearsed, the cold first one included
    examples: int  # the test examples they ran on

    @property
    def total(self) -> float:
        return sum(getattr(self, name) for name, _ in PARTS)

    def parts(self) -> str:
        """The parts over a tenth of the total, e.g. "steps ~4.2 s, frozen layers ~6.1 s"."""
        return ", ".join(
            f"{label} {duration(getattr(self, name))}"
            for name, label in PARTS
            if getattr(self, name) > 0.1 * self.total
        )


def duration(seconds: float) -> str:
    """``seconds`` as a rough duration ("~4.2 s", "~40 s", "~3.5 min", "~12 min", "~2.1 h")."""
    if seconds < 10:
        return f"~{seconds:.1f} s"
    if seconds < 60:
        return f"~{seconds:.0f} s"
    if seconds < 3600:
        return f"~{seconds / 60:.{1 if seconds < 600 else 0}f} min"
    return f"~{seconds / 3600:.1f} h"


class Estimator:
    """The time of the rest of a run: rehearsed and counted on public inputs, leaving the run as it
    was.

    It rehearses the run's own step, :meth:`~dpnc.lm.steps.Steps.journaled` (the method's optimizer
    with its checks of the model, the journal's two fsynced lines) and its metrics row, on rows of
    the test split, with a throwaway optimizer, ledger, noise source and run folder (beside the
    run's, on the same disk), then puts the trained parameters back bit for bit; the rest of the run
    is counted from its public settings (:class:`Estimate`). In a data-parallel run the step is
    rehearsed in one process on its share of a batch, without the exchange between the processes.

    Args:
        config: the run's settings.
        classifier: the run's model: rehearsed on, then put back bit for bit.
        rows: the test examples this process evaluates (the rehearsal's public rows).
        cache: their frozen layers, or None.
        device: where the model runs.
        sampler: the run's sampler, for its public description (n, B, q, its release); never drawn
            from.
        multiplier: σ/Δ, or None for a non-private method.
        n: the public number of training examples.
        world_size: the run's processes.
        setup_seconds: what the trainer timed on public inputs at setup: ``"evaluation"`` (the
            untrained model's evaluation) and ``"frozen_row"`` (a test row's frozen layers, when it
            cached them).
        caches_training_rows: whether the run caches the frozen layers of the training rows its
            batches meet (each counted at ``"frozen_row"``).
    """

    def __init__(
        self,
        config: FinetuneConfig,
        classifier: EncoderClassifier,
        rows: TextDataset,
        cache: PrefixCache | None,
        *,
        device: torch.device,
        sampler,
        multiplier: float | None,
        n: int,
        world_size: int,
        setup_seconds: dict[str, float],
        caches_training_rows: bool,
    ) -> None:
        self.config, self.classifier, self.rows, self.cache = config, classifier, rows, cache
        self.device, self.sampler, self.multiplier, self.n = device, sampler, multiplier, n
        self.world_size, self.setup_seconds = world_size, setup_seconds
        self.caches_training_rows = caches_training_rows

    def estimate(
        self,
        marks: list[tuple[bool, bool, bool]],
        *,
        ledger: Accountant,
        release: Release,
        checkpoint: dict | None,
    ) -> Estimate | None:
        """The time of the next ``len(marks)`` steps and of the run's end; None without test
        examples to time it on.

        Args:
            marks: what the loop does after each of those steps besides it (ε, evaluation,
                checkpoint: ``Trainer.marks``).
            ledger: the run's ledger now (copied: ε is timed on its copies).
            release: the release one step makes.
            checkpoint: the run's checkpoint state now (written once to time it), or None when the
                run writes none.
        """
        c, steps = self.config, len(marks)
        if not steps or not len(self.rows):
            return None
        with _scratch(c) as files:
            seconds = self._rehearse(files, steps)
            written = 0.0
            if checkpoint is not None:
                written = _seconds(lambda: files.save_checkpoint(checkpoint, checkpoint["step"]))
            end = _time_plot(files) if c.out else 0.0
        warm = seconds[1:] or seconds
        frozen, row = 0.0, self.setup_seconds.get("frozen_row")
        if self.caches_training_rows and row is not None:
            # a row's chance to be in this process's share of a batch
            q = min(1.0, c.batch_size / (self.n * self.world_size))
            frozen = row * self.n * (1 - (1 - q) ** steps)
        points = [after for after, (eps, _, _) in enumerate(marks, 1) if eps]
        return Estimate(
            steps=seconds[0] + (steps - 1) * sum(warm) / len(warm),
            frozen_layers=frozen,
            epsilon=self._epsilon_seconds(points, ledger, release),
            evaluations=self.setup_seconds["evaluation"] * (1 + sum(ev for _, ev, _ in marks)),
            checkpoints=written * (sum(ck for _, _, ck in marks) + c.checkpointing),
            end=end,
            rehearsed=len(seconds),
            examples=len(self.rows),
        )

    def line(self, steps: int, estimate: Estimate | None) -> str:
        """What the trainer prints before ``steps`` steps: their ``estimate``, and what it was timed
        on."""
        if estimate is None:
            return (
                f"{steps} steps on {self.device} (no time estimate: no test examples to time it on)"
            )
        examples = (
            f"{estimate.examples} public test examples"
            if self.config.test_public
            else f"the test file's {estimate.examples} examples (not declared public)"
        )
        return (
            f"estimated time: {duration(estimate.total)} for {steps} steps on {self.device} "
            f"({estimate.parts()}; {estimate.rehearsed} steps of this run's own step, an evaluation and ε "
            f"timed on {examples}, never on the training data; the bar shows steps and ε only, no rate: "
            "a step's time depends on its secret batch)"
        )

    def _rehearse(self, files: RunFiles, steps: int) -> list[float]:
        """Seconds of the run's own step on public rows: the first (cold), then 1 to WARM warm
        ones."""
        clf, count = self.classifier, 1 + min(WARM, max(1, steps // SHARE), steps - 1)
        c = dataclasses.replace(self.config, steps=count)  # its optimizer draws `count` batches
        index = torch.arange(math.ceil(c.batch_size / self.world_size)) % len(self.rows)
        encode = functools.partial(encode_rows, clf, self.rows, self.cache, self.device)
        sampler, ledger = _PublicRows(self.sampler, index), Accountant(c.relation)
        optimizer = build_optimizer(
            c,
            clf,
            sampler,
            encode=encode,
            accountant=ledger,
            noise=NoiseSource(),  # its own: the run's noise draws nothing here
            multiplier=self.multiplier,
            n=self.n,
        )
        rehearsal = Steps(c, clf, optimizer, sampler, ledger, encode, _nothing, _nothing)
        kept = [(p, p.detach().clone(), _copy(p.grad)) for p in clf.parameters() if p.requires_grad]
        seconds = []
        try:
            for t in range(count):
                start = time.perf_counter()
                files.step_rows(t + 1, rehearsal.journaled(files, t))
                seconds.append(time.perf_counter() - start)
        finally:
            with torch.no_grad():  # the model as it was, bit for bit
                for p, value, grad in kept:
                    p.copy_(value)
                    p.grad = grad
        return seconds

    def _epsilon_seconds(self, points: list[int], ledger: Accountant, release: Release) -> float:
        """The ε computations after ``points`` more steps: the first and the last made now on a
        copy of ``ledger`` (the run finds them cached), the others counted at their mean."""
        if not points:
            return 0.0
        c, made = self.config, sorted({points[0], points[-1]})
        seconds = []
        for point in made:
            copy = _copy_ledger(ledger, release, point)
            seconds.append(_seconds(functools.partial(spent_epsilon, copy, c.delta, c.accountant)))
        return sum(seconds) / len(seconds) * (len(points) - len(made))


class _PublicRows:
    """The rehearsal's sampler: the run's sampler's public description (n, B, q, its release) and
    every batch the same public rows; it never draws from the run's secret stream."""

    secret = False  # nothing is secret about these rows
    shared = True

    def __init__(self, like, index: torch.Tensor) -> None:
        self._like, self._index = like, index
        self.n, self.batch_size, self.rate = like.n, like.batch_size, like.rate

    def sample(self) -> torch.Tensor:
        return self._index

    def release(self, sensitivity: float, sigma: float) -> Release:
        return self._like.release(sensitivity, sigma)

    def check_relation(self, relation) -> None:
        self._like.check_relation(relation)


@contextlib.contextmanager
def _scratch(config: FinetuneConfig) -> Iterator[RunFiles]:
    """The rehearsal's run files: in a temporary folder beside the run's folder (on its disk, so
    that an fsync costs what the journal's does), removed after; none are written when the run
    writes none."""
    quiet = {"report_to": "none", "log_private_stats": False}
    if config.run_dir is None:
        yield RunFiles(dataclasses.replace(config, **quiet), kill_points=False)
        return
    near = next(p for p in config.run_dir.parents if p.is_dir())
    with tempfile.TemporaryDirectory(prefix=".dpnc-estimate-", dir=near) as folder:
        scratch = dataclasses.replace(
            config,
            out=str(Path(folder) / "out") if config.out else None,
            checkpoint_dir=folder if config.checkpoint_dir else None,
            **quiet,
        )
        yield RunFiles(scratch, kill_points=False)


def _time_plot(files: RunFiles) -> float:
    """Seconds to draw the training plot, matplotlib's import left out (made now, as the run's plot
    would)."""
    path = Path(files.config.out) / "training.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    pyplot()
    return _seconds(lambda: plot_training([], path))


def _copy_ledger(accountant: Accountant, release: Release, count: int) -> Accountant:
    """``accountant``'s ledger and ``count`` more ``release``: the run's ledger after as many
    steps."""
    ledger = Accountant(accountant.relation, accountant.method)
    ledger.extend(accountant)
    ledger.record(release, count)
    return ledger


def _seconds(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def _copy(grad: torch.Tensor | None) -> torch.Tensor | None:
    return None if grad is None else grad.detach().clone()


def _nothing(_: str) -> None:
    """The rehearsal's kill point and private note: none."""
