"""Checkpoints and resume of a fine-tuning run.

The run folder (``checkpoint_dir``, else ``out``) holds a journal (``journal.jsonl``): a header with
the config, then each step *before* it touches the data (its release) and after (its public
direction seed and, for zeroth-order methods, the released scalar c_t), each line fsynced. Every
``checkpoint_every`` steps and at the end, ``checkpoint.pt`` in the run folder (written when
``checkpoint_dir`` or ``checkpoint_every`` is given) holds the classifier, the optimizer state (for
zeroth-order optimizers: the public direction generator), the step, the privacy ledger
(``Accountant.to_json``) and the config — never the noise source or the sampler (a resumed run draws
fresh secret noise and batches) — and the journal restarts. On resume (with or without a checkpoint:
without one, from the initial model):

* a zeroth-order step that finished is replayed from the journal (x ← x − η·c_t·u(seed_t): no data
  access, no new release, no batch needed), so the run continues exactly where it was killed;
* any other step that began (first-order methods, or a step killed mid-way) is a release that may
  have happened: it is added to the ledger, and the run stops that many steps early, so the total
  number of releases — hence ε — never exceeds what the budget affords. A resumed run never
  under-counts ε.

A run folder that holds a journal or a checkpoint refuses a fresh start (a second ledger over the
same data would under-count): resume it, or pass ``new_run=True`` (``--new-run``), which moves the
old journal, checkpoint and metrics into a ``<folder>.superseded-<time>/`` folder beside it first.
Resume refuses a different config (the fields that define the run) and a budget that is already
spent.

:class:`ResumeMixin` holds the :class:`dpnc.lm.train.Trainer`'s methods that write a checkpoint and
resume from the run folder (:class:`dpnc.lm.journal.RunFiles` reads and writes the files). Under
``torchrun``, rank 0 resumes and hands the public state to the other ranks."""

from __future__ import annotations

from pathlib import Path

import torch

from dpnc.lm.config import FREE_FIELDS as _FREE_FIELDS
from dpnc.lm.config import public_fields
from dpnc.lm.journal import replay_rows
from dpnc.privacy.accountant import Accountant
from dpnc.space import GROUP, STREAM
from dpnc.tier.base import StepHooks

__all__ = ["ResumeMixin"]


class ResumeMixin:
    """The :class:`~dpnc.lm.train.Trainer`'s checkpoints and resume (mixed into it; reads and sets
    its state)."""

    def save_checkpoint(self) -> Path:
        """Write ``checkpoint.pt`` atomically, then restart the journal. Never saves the noise
        source or sampler."""
        return self.files.save_checkpoint(self.checkpoint_state(), self.step)

    def checkpoint_state(self) -> dict:
        """What ``checkpoint.pt`` holds: the run's public state."""
        # The trained parameters only: the rest is the base model the config names, rebuilt on
        # resume (a head-only checkpoint held the whole 90 MB encoder).
        trained = {
            name: p.detach() for name, p in self.classifier.named_parameters() if p.requires_grad
        }
        return {
            "version": 2,
            "config": self.config.public_dict(),  # as the journal's header: no full path
            "step": self.step,
            "model": trained,
            "model_trained_only": True,
            "optimizer": None if self.optimizer is None else self.optimizer.state_dict(),
            "ledger": self.accountant.to_json(),
            "lost_releases": self.lost_releases,
            "notes": self.notes,
        }

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
        """Load the checkpoint and replay the journal; the public state the other ranks need."""
        c = self.config
        state, saved, rows, stream = self.files.load()
        # Compared by public names (the journal holds no full path; an older one's full paths are
        # named alike): a moved data file, or the model package installed elsewhere, is the same
        # run.
        saved = public_fields(saved)
        differ = [
            f"{k}: {saved.get(k)!r} → {v!r}"
            for k, v in c.public_dict().items()
            if k not in _FREE_FIELDS and saved.get(k) != v
        ]
        if differ:
            raise ValueError(
                "cannot resume with a different config (it would change the run or its privacy "
                "accounting): " + "; ".join(differ)
            )
        if stream != STREAM and c.zeroth_order and rows and self.optimizer.space.d > GROUP:
            raise ValueError(
                f"cannot resume: the journal's steps moved the model along directions drawn the way "
                f"dpnc did before (direction stream {stream}), and this dpnc draws them otherwise for "
                f"models of more than {GROUP:,} trained parameters (stream {STREAM}): replaying them "
                "would move the model along other directions. Finish the run with the dpnc that began "
                "it, or start a new one (new_run / --new-run)."
            )
        if state is not None:
            partial = state.get(
                "model_trained_only", False
            )  # (older checkpoints hold the whole state_dict)
            missing, unexpected = self.classifier.load_state_dict(
                state["model"], strict=not partial
            )
            frozen = {name for name, p in self.classifier.named_parameters() if not p.requires_grad}
            buffers = {name for name, _ in self.classifier.named_buffers()}
            if unexpected or not set(missing) <= frozen | buffers:
                raise ValueError(
                    f"cannot resume: the checkpoint's trained parameters do not match this model's "
                    f"(missing {sorted(set(missing) - frozen - buffers)[:5]}, unexpected "
                    f"{sorted(unexpected)[:5]})"
                )
            if self.optimizer is not None:
                self.optimizer.load_state_dict(state["optimizer"])
            self.accountant = Accountant.from_json(state["ledger"])
            if isinstance(
                self.optimizer, StepHooks
            ):  # dpnc's optimizers record in the ledger themselves
                self.optimizer.accountant = self.accountant
            self.steps.accountant = self.accountant
            self.step = state["step"]
            self.lost_releases, self.notes = state["lost_releases"], list(state["notes"])
        start = self.step
        replayed, lost = replay_rows(
            rows,
            self.step,
            zeroth_order=c.zeroth_order,
            replay=self._replay,
            record=self.accountant.record,
        )
        self.lost_releases += lost
        if replayed or lost:
            self.notes.append(
                f"resumed at step {start}{'' if state is not None else ' (no checkpoint)'}: "
                f"{replayed} step(s) replayed from the journal, {lost} begun step(s) counted as "
                "releases"
            )
        self.files.metric(
            {
                "event": "resume",
                "step": self.step,
                "replayed": replayed,
                "lost_releases": lost,
                "releases": self.accountant.releases,
            }
        )
        # A run killed after its last step (before its final checkpoint) is resumed to be finished:
        # evaluated and saved, with no step left to take. One with nothing to replay has nothing to
        # resume.
        if self.step_budget == 0 and not (replayed or lost):
            if c.private:
                raise ValueError(
                    f"the privacy budget is already spent: the ledger holds {self.accountant.releases} "
                    f"releases (ε = {self.epsilon():.4g} by {c.accountant}, target {c.epsilon:g}) of "
                    f"the {self.total_steps} that (ε, δ) affords; nothing left to train"
                )
            raise ValueError(
                f"the run has already finished: {self.step} of {self.total_steps} steps done and "
                f"{self.lost_releases} lost; nothing to resume"
            )
        if c.checkpointing:
            self.save_checkpoint()  # fold the journal into the checkpoint
        return {
            "optimizer": None if self.optimizer is None else self.optimizer.state_dict(),
            "step": self.step,
            "lost_releases": self.lost_releases,
            "notes": list(self.notes),
        }

    @torch.no_grad()
    def _replay(self, seed: int, released: float) -> None:
        """x ← x − η·c_t·u(seed): a zeroth-order step re-applied from its public seed and released
        scalar."""
        try:
            self.optimizer.replay_(seed, released)
        except ValueError as error:
            raise ValueError(
                f"journal does not match the checkpoint at step {self.step}: {error}"
            ) from None
        self.step += 1
