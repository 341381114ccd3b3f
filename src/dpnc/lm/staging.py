"""A fine-tuning run's output folder appears whole, or not at all.

:func:`dpnc.lm.train.finetune` writes into ``<out>.partial`` and renames it to ``out`` when the run
has finished, so a half-written folder is never taken for a result, and a folder that holds a
ledger is never removed. What happens after an exception, Ctrl-C or a kill: docs/finetuning.md."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from pathlib import Path

from dpnc.lm.config import CHECKPOINT, JOURNAL, FinetuneConfig

__all__ = ["PARTIAL_SUFFIX", "Staging"]

PARTIAL_SUFFIX = ".partial"


def _holds_ledger(folder: Path | None) -> bool:
    return folder is not None and any((folder / name).exists() for name in (JOURNAL, CHECKPOINT))


def _inside(path: Path, folder: Path) -> bool:
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


@dataclasses.dataclass(frozen=True)
class Staging:
    """Where a run of ``config`` writes until it has finished (``config``: the run, its ``out`` the
    staging folder).

    Build it with :meth:`plan`; :meth:`publish` on success, :meth:`discard` on failure.
    """

    config: FinetuneConfig
    final: Path
    partial: Path
    keep_on_failure: (
        bool  # the journal lives in a checkpoint_dir outside out, or the partial folder held an
    )
    # earlier run's ledger: the run stays resumable (and it does once it holds its own)

    @classmethod
    def plan(cls, config: FinetuneConfig, *, resume: bool) -> Staging | None:
        """The staging of a run of ``config``, or None where the run writes in place (no ``out``; an
        existing ``out`` that a resume or ``new_run`` continues or supersedes; one whose ledger
        refuses a fresh start).

        Raises:
            ValueError: a fresh run over an ``out`` that exists, is not empty and holds no ledger.
        """
        if config.out is None:
            return None
        final = Path(config.out)
        partial = final.with_name(final.name + PARTIAL_SUFFIX)
        checkpoint_dir = None if config.checkpoint_dir is None else Path(config.checkpoint_dir)
        inside = checkpoint_dir is not None and _inside(checkpoint_dir, final)
        final_used = final.exists() and (not final.is_dir() or any(final.iterdir()))
        if final_used:
            if resume or config.new_run or _holds_ledger(config.run_dir):
                return (
                    None  # as before: continued, superseded in place, or refused by the run folder
                )
            raise ValueError(
                f"out must be a new or empty folder: {str(final)!r} already holds files (a finished "
                "run's outputs?), which the new run's would mix with; choose another --out or remove it"
            )
        staged_checkpoints = config.checkpoint_dir
        if inside:
            staged_checkpoints = str(
                partial / checkpoint_dir.resolve().relative_to(final.resolve())
            )
        staged = dataclasses.replace(config, out=str(partial), checkpoint_dir=staged_checkpoints)
        if not resume and partial.exists() and not _holds_ledger(staged.run_dir):
            shutil.rmtree(
                partial
            )  # a run killed before its first step: no ledger, nothing to resume
        # An earlier run's ledger (a killed run's partial folder, a separate checkpoint_dir) is
        # never removed: only what this run wrote, and only where it holds this run's journal alone.
        keep = (checkpoint_dir is not None and not inside) or partial.exists()
        return cls(staged, final, partial, keep_on_failure=keep)

    def publish(self) -> Path:
        """Rename the finished run's folder into place (``out``, absent or empty)."""
        if self.final.is_dir() and not any(self.final.iterdir()):
            self.final.rmdir()
        os.replace(self.partial, self.final)
        return self.final

    def discard(self, error: BaseException) -> None:
        """After a failure: remove the unfinished folder if it holds no ledger (no step began);
        otherwise keep it, resumable, and say so."""
        if (
            not self.partial.exists() or self.keep_on_failure
        ):  # an earlier run's ledger, or a checkpoint_dir: kept
            return
        if _holds_ledger(self.config.run_dir):
            print(
                f"dpnc: the run stopped ({type(error).__name__}) after releasing values; its ledger is kept in "
                f"{str(self.partial)!r}. `--resume` continues it; `--new-run` starts over in its place, and the "
                "two runs' privacy costs then add up.",
                file=sys.stderr,
            )
            return
        shutil.rmtree(self.partial, ignore_errors=True)
        print(
            f"dpnc: the run stopped ({type(error).__name__}); its unfinished folder {str(self.partial)!r} was "
            f"removed (no step had begun) and nothing was written to {str(self.final)!r}. A re-run starts "
            "afresh.",
            file=sys.stderr,
        )
