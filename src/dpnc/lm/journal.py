"""The trainer's run folder: public metrics, private statistics on request, the journal,
checkpoints, resume.

Each file gets only what it may hold, so a public file never carries a time or a training
statistic. What each file holds: docs/privacy.md, "What each output reveals"; the journal and
resume: docs/finetuning.md."""

from __future__ import annotations

import json
import math
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import torch

from dpnc.lm.config import (
    CHECKPOINT,
    JOURNAL,
    KILL_ENV,
    KILL_PHASES,
    METRICS,
    PRIVATE_STATS,
    PRIVATE_STATS_WARNING,
    FinetuneConfig,
)
from dpnc.lm.report import TensorBoard, plot_training
from dpnc.privacy.releases import Release
from dpnc.self_audit import SelfAuditResult
from dpnc.space import STREAM


class RunFiles:
    """The files of one run of ``config``: each method writes one kind, and only what that file may
    hold."""

    def __init__(
        self, config: FinetuneConfig, *, writer: bool = True, kill_points: bool = True
    ) -> None:
        self.config = config
        self.writer = (
            writer  # False on the ranks other than 0 of a data-parallel run: they write nothing
        )
        self._journal_sound = (
            False  # checked once per process that the journal ends with a whole line
        )
        # a test's kill point is the run's: the time estimate's rehearsal (kill_points=False) has
        # none
        self._kill_at = kill_point_from_env() if kill_points else None
        self.rows: list[dict] = []  # this process's metrics rows (public), for the plot
        self.tensorboard = None
        if config.report_to == "tensorboard" and writer:
            self.tensorboard = TensorBoard(
                Path(config.out or ".") / "tensorboard", hparams=config.hyperparameters()
            )

    def kill_point(self, phase: str, step: int) -> None:
        """Test-only: SIGKILL this process at ``DPNC_TEST_KILL_AT=phase:step`` (nothing
        otherwise)."""
        if self._kill_at is not None and self._kill_at == (phase, step):
            os.kill(os.getpid(), signal.SIGKILL)

    def metric(self, row: dict) -> None:
        """A line of ``metrics.jsonl``: public values only (test results, ε, seeds, released
        values), no time stamp; also kept for the plot and sent to TensorBoard when asked."""
        self.rows.append(row)
        if self.tensorboard is not None:
            self.tensorboard.write(row)
        if self.config.out and self.writer:
            path = Path(self.config.out) / METRICS
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as f:
                f.write(json.dumps(jsonable(row)) + "\n")

    def step_rows(self, step: int, record, epsilon: float | None = None) -> None:
        """After step ``step``, its :class:`~dpnc.lm.steps.StepRecord` ``record``: a metrics line
        of its public values (direction seed, released scalar, ``epsilon`` when computed) and, with
        ``log_private_stats``, a line of its statistics of the training data."""
        row = {"event": "step", "step": step, "released": record.released, "seed": record.seed}
        if epsilon is not None:
            row["epsilon"] = epsilon
        self.metric(row)
        self.private_stat(
            {
                "event": "step",
                "step": step,
                "loss": record.loss,
                "nonfinite": record.nonfinite,
                "clipped_fraction": record.clipped_fraction,
                "seconds": record.seconds,
            }
        )

    def eval_row(self, step: int, result, epsilon: float, *, final: bool = False) -> None:
        """A metrics line of an evaluation after ``step`` steps: its test-split ``result`` (an
        :class:`~dpnc.lm.evaluation.Evaluation`) and the ε spent."""
        row = {
            "event": "eval",
            "step": step,
            "accuracy": result.accuracy,
            "loss": result.loss,
            "epsilon": epsilon,
        }
        if final:
            row["final"] = True
        self.metric(row)

    def private_stat(self, row: dict) -> None:
        """A line of ``private_train_stats.jsonl`` (only with ``log_private_stats``), under a NOT
        PRIVATE header."""
        c = self.config
        if not (c.log_private_stats and c.out and self.writer):
            return
        path = Path(c.out) / PRIVATE_STATS
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            if f.tell() == 0:
                f.write(json.dumps({"event": "header", "warning": PRIVATE_STATS_WARNING}) + "\n")
            f.write(json.dumps(jsonable(row)) + "\n")

    def publish(self, summary, *, title: str) -> Path | None:
        """The run's end in ``out``: ``summary.json`` (a :class:`~dpnc.lm.evaluation.Summary`), the
        self-audit's result and the training plot (titled ``title``); the folder, or None when this
        process writes none."""
        if not (self.config.out and self.writer):
            return None
        out = Path(self.config.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(summary.to_json())
        if summary.self_audit is not None:  # `dpnc audit --one-run out` prints it
            SelfAuditResult(**summary.self_audit).save(out)
        plot_training(self.rows, out / "training.png", title=title)
        return out

    def close(self) -> None:
        """Close TensorBoard's writer (when the run logs to it)."""
        if self.tensorboard is not None:
            self.tensorboard.close()

    def header(self) -> dict:
        # The config by its public names: the journal travels with the run folder (resume compares
        # public names)
        return {
            "event": "run",
            "version": 2,
            "directions": STREAM,
            "config": self.config.public_dict(),
        }

    def journal(self, row: dict) -> None:
        """Append a line to the journal (its first line: the run's config), flushed to disk before
        going on."""
        folder = self.config.run_dir
        if folder is None or not self.writer:
            return
        path = folder / JOURNAL
        folder.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            if (
                f.tell() > 0 and not self._journal_sound
            ):  # a kill may have torn the last line: end it first
                with path.open("rb") as g:
                    g.seek(-1, os.SEEK_END)
                    if g.read(1) != b"\n":
                        f.write("\n")
                self._journal_sound = True
            if f.tell() == 0:
                f.write(json.dumps(self.header()) + "\n")
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def save_checkpoint(self, state: dict, step: int) -> Path:
        """Write ``checkpoint.pt`` atomically, then restart the journal (its steps are in the
        checkpoint now)."""
        folder = self.config.run_dir  # checkpoint_dir, else out
        if not self.writer:
            return folder / CHECKPOINT
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / (CHECKPOINT + ".tmp")
        torch.save(state, tmp)
        self.kill_point("checkpoint", step)
        os.replace(tmp, folder / CHECKPOINT)
        self.kill_point("replaced", step)
        journal_tmp = folder / (
            JOURNAL + ".tmp"
        )  # a journal holding only the header, swapped in atomically
        with journal_tmp.open("w") as f:
            f.write(json.dumps(self.header()) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(journal_tmp, folder / JOURNAL)
        return folder / CHECKPOINT

    def load(self) -> tuple[dict | None, dict, list[dict], int]:
        """(the checkpoint's state or None, the saved config, the journal's step rows, the
        :data:`dpnc.space.STREAM` that drew the journal's directions: 1 for a journal that does not
        say), for resume."""
        folder = self.config.run_dir
        if folder is None:
            raise ValueError(
                "cannot resume: checkpoint_dir (or out) must be given: the run folder with the journal"
            )
        header, rows = read_journal(folder / JOURNAL)
        stream = (header or {}).get("directions", 1)
        if (folder / CHECKPOINT).exists():
            state = torch.load(folder / CHECKPOINT, weights_only=False)
            return state, state["config"], rows, stream
        if header is not None:  # killed before the first checkpoint: start from the initial model
            return None, header["config"], rows, stream
        raise ValueError(
            f"cannot resume: no {CHECKPOINT} and no {JOURNAL} with a run header in run folder "
            f"{str(folder)!r}"
        )

    def check_fresh_start(self) -> None:
        """Refuse to start a second ledger over a run folder that holds one (unless ``new_run``)."""
        c = self.config
        folder = c.run_dir
        if folder is None or c.new_run:
            return
        found = [name for name in (CHECKPOINT, JOURNAL) if (folder / name).exists()]
        if found:
            raise ValueError(
                f"run folder {str(folder)!r} already holds an earlier run ({', '.join(found)}): its "
                "releases are in that ledger, and a fresh start would begin a second one over the same "
                "data. Resume it (--resume), pass --new-run to supersede it (the old files are moved "
                "aside), or choose another folder"
            )

    def supersede(self) -> list[str]:
        """``new_run``: move an earlier run's journal, checkpoint and outputs into
        ``<folder>.superseded-<time>/`` beside each folder, never inside it: the old run's released
        values must not be published in ``out/`` beside a summary whose ε leaves them out
        (publishing both is composing both ledgers: docs/privacy.md). The ``<time>`` is when the
        run starts, before it reads any training row."""
        c = self.config
        if not self.writer:
            return []
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        moved = []
        places = [(c.run_dir, (JOURNAL, CHECKPOINT, CHECKPOINT + ".tmp"))]
        if c.out:
            places.append((Path(c.out), (METRICS, PRIVATE_STATS, "summary.json")))
        for folder, names in places:
            for name in names:
                if folder is not None and (folder / name).exists():
                    archive = folder.parent / f"{folder.name}.superseded-{stamp}"
                    archive.mkdir(exist_ok=True)
                    os.replace(folder / name, archive / name)
                    # named beside the run folder, not by its full path: the notes go to
                    # summary.json
                    moved.append(f"{archive.name}/{name}")
        return moved


def replay_rows(
    rows: list[dict],
    step: int,
    *,
    zeroth_order: bool,
    replay: Callable[[int, float], None],
    record: Callable[[Release], None],
) -> tuple[int, int]:
    """Replay finished zeroth-order steps at and after ``step``; count every other begun step.
    (replayed, lost).

    The rows are read in order. A 'begin' followed by its 'end' is a finished step: a zeroth-order
    one is replayed (``replay(seed, released)``, which advances the step) and its release recorded,
    a first-order one only recorded (it cannot be replayed without the data). A 'begin' with no
    'end' (the process died in it) is recorded as a release that may have happened, and the model is
    left as it was before that step — as the process that resumed after it was. Releases are
    recorded as the journal wrote them (old journals hold zeroth-order releases per unit of C: the
    same ε, since accounting depends on σ/Δ only)."""
    replayed = lost = 0
    pending: dict | None = None
    current = step

    def lose(row):
        nonlocal lost
        record(Release.from_dict(row["release"]))
        lost += 1

    for row in rows:
        if row.get("t", -1) < step and pending is None:
            continue  # before the checkpoint: already in its ledger
        if row["event"] == "begin":
            if pending is not None:
                lose(pending)
            pending = row
        elif row["event"] == "end" and pending is not None and row["t"] == pending["t"]:
            if zeroth_order and row.get("released") is not None and pending["t"] == current:
                replay(row["seed"], row["released"])
                record(Release.from_dict(pending["release"]))
                replayed += 1
                current += 1
            else:
                lose(pending)
            pending = None
    if pending is not None:
        lose(pending)
    return replayed, lost


def read_journal(path: Path) -> tuple[dict | None, list[dict]]:
    """(the run header or None, the step rows). A line torn by a kill mid-write is skipped: a step's
    'begin' line is fsynced before the step touches the data, so a torn 'begin' means the step never
    ran, and a torn 'end' leaves its 'begin', which counts the step as a release."""
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


def kill_point_from_env() -> tuple[str, int] | None:
    value = os.environ.get(KILL_ENV)
    if not value:
        return None
    phase, _, step = value.partition(":")
    if phase not in KILL_PHASES or not step.isdigit():
        raise ValueError(
            f"{KILL_ENV} must be 'phase:step' with phase in {KILL_PHASES}; got {value!r}"
        )
    return phase, int(step)


def jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value
