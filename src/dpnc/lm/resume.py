"""Checkpoints and resume of a fine-tuning run.

A resumed run never under-counts ε: every step that began is in the journal before it touches the
data, so a resume replays it or counts it as a release. What the journal and a checkpoint hold, how
a resume replays, and when a fresh start is refused: docs/finetuning.md; under ``torchrun``:
docs/distributed.md."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import torch

from dpnc.lm.config import FREE_FIELDS as _FREE_FIELDS
from dpnc.lm.config import FinetuneConfig, public_fields
from dpnc.lm.evaluation import spent_epsilon
from dpnc.lm.heads import EncoderClassifier
from dpnc.lm.journal import RunFiles, replay_rows
from dpnc.privacy.accountant import Accountant
from dpnc.space import GROUP, STREAM

__all__ = ["Checkpoints", "Resumed"]


class Resumed(NamedTuple):
    """A resumed run's public state: the checkpoint's, then the journal's steps after it."""

    step: int
    ledger: Accountant  # the checkpoint's (else the fresh run's), with the journal's releases
    lost_releases: int
    notes: list[str]


class Checkpoints:
    """A run's ``checkpoint.pt`` and its resume from the run folder.

    It is handed the run files, the classifier and the optimizer, never the data, the noise source
    or the sampler: a resumed run draws fresh secret noise and batches. On resume (with or without
    a checkpoint), a zeroth-order step that finished is replayed from the journal
    (x ← x − η·c_t·u(seed_t): no data access, no new release, no batch needed); any other step that
    began is a release that may have happened: it is added to the ledger, and the run stops that
    many steps early.

    Args:
        files: the run's files (the journal and the checkpoint are read and written there).
        classifier: the model whose trained parameters are saved and restored.
        optimizer: the method's optimizer (its public state; None for zero-shot).
        config: the run's settings (saved by their public names; a resume must match them).
    """

    def __init__(
        self, files: RunFiles, classifier: EncoderClassifier, optimizer, config: FinetuneConfig
    ) -> None:
        self.files, self.classifier = files, classifier
        self.optimizer, self.config = optimizer, config

    def save(self, step: int, ledger: Accountant, lost_releases: int, notes: list[str]) -> Path:
        """Write ``checkpoint.pt`` atomically, then restart the journal. Never saves the noise
        source or sampler."""
        return self.files.save_checkpoint(self.state(step, ledger, lost_releases, notes), step)

    def state(self, step: int, ledger: Accountant, lost_releases: int, notes: list[str]) -> dict:
        """What ``checkpoint.pt`` holds: the run's public state after ``step`` steps (the trained
        parameters, the optimizer state, for zeroth-order optimizers the public direction
        generator, the step, the ledger as ``Accountant.to_json``, the lost releases, the notes
        and the config; never the noise source or the sampler)."""
        # The trained parameters only: the rest is the base model the config names, rebuilt on
        # resume (a head-only checkpoint held the whole 90 MB encoder).
        trained = {
            name: p.detach() for name, p in self.classifier.named_parameters() if p.requires_grad
        }
        return {
            "version": 2,
            "config": self.config.public_dict(),  # as the journal's header: no full path
            "step": step,
            "model": trained,
            "model_trained_only": True,
            "optimizer": None if self.optimizer is None else self.optimizer.state_dict(),
            "ledger": ledger.to_json(),
            "lost_releases": lost_releases,
            "notes": notes,
        }

    def resume(self, ledger: Accountant) -> Resumed:
        """Load the checkpoint (if any) into the classifier and optimizer, replay the journal after
        it, write the ``resume`` metrics row and (when checkpointing) fold the journal into a new
        checkpoint. ``ledger``: the fresh run's, kept when there is no checkpoint (the run then
        resumes from the initial model, at step 0).

        Raises:
            ValueError: a different config, a journal this dpnc cannot replay, a checkpoint of
                another model, or a run with nothing left to do (its budget spent).
        """
        c = self.config
        state, saved, rows, stream = self.files.load()
        self._check_same_run(saved, stream, bool(rows))
        step, lost_releases, notes = 0, 0, []
        if state is not None:
            self._load(state)
            ledger = Accountant.from_json(state["ledger"])
            step, lost_releases, notes = state["step"], state["lost_releases"], list(state["notes"])
        start = step

        def replay(seed: int, released: float) -> None:
            nonlocal step
            self._replay(seed, released, step)
            step += 1

        replayed, lost = replay_rows(
            rows, start, zeroth_order=c.zeroth_order, replay=replay, record=ledger.record
        )
        lost_releases += lost
        if replayed or lost:
            notes.append(
                f"resumed at step {start}{'' if state is not None else ' (no checkpoint)'}: "
                f"{replayed} step(s) replayed from the journal, {lost} begun step(s) counted as "
                "releases"
            )
        self.files.metric(
            {
                "event": "resume",
                "step": step,
                "replayed": replayed,
                "lost_releases": lost,
                "releases": ledger.releases,
            }
        )
        # A run killed after its last step (before its final checkpoint) is resumed to be finished:
        # evaluated and saved, with no step left to take. One with nothing to replay (no step
        # budget left: T minus steps done, minus lost releases) has nothing to resume.
        if step + lost_releases >= c.steps and not (replayed or lost):
            self._refuse_finished(step, ledger, lost_releases)
        if c.checkpointing:
            self.save(step, ledger, lost_releases, notes)  # fold the journal into the checkpoint
        return Resumed(step, ledger, lost_releases, notes)

    def _refuse_finished(self, step: int, ledger: Accountant, lost_releases: int) -> None:
        c = self.config
        if c.private:
            epsilon = spent_epsilon(ledger, c.delta, c.accountant)
            raise ValueError(
                f"the privacy budget is already spent: the ledger holds {ledger.releases} "
                f"releases (ε = {epsilon:.4g} by {c.accountant}, target {c.epsilon:g}) of "
                f"the {c.steps} that (ε, δ) affords; nothing left to train"
            )
        raise ValueError(
            f"the run has already finished: {step} of {c.steps} steps done and "
            f"{lost_releases} lost; nothing to resume"
        )

    def _check_same_run(self, saved: dict, stream: int, journaled: bool) -> None:
        """Refuse a config that differs from the saved one, and journaled steps this dpnc would
        replay along other directions."""
        c = self.config
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
        if stream != STREAM and c.zeroth_order and journaled and self.optimizer.space.d > GROUP:
            raise ValueError(
                f"cannot resume: the journal's steps moved the model along directions drawn the way "
                f"dpnc did before (direction stream {stream}), and this dpnc draws them otherwise for "
                f"models of more than {GROUP:,} trained parameters (stream {STREAM}): replaying them "
                "would move the model along other directions. Finish the run with the dpnc that began "
                "it, or start a new one (new_run / --new-run)."
            )

    def _load(self, state: dict) -> None:
        """The checkpoint's trained parameters into the classifier, its public state into the
        optimizer."""
        partial = state.get(
            "model_trained_only", False
        )  # (older checkpoints hold the whole state_dict)
        missing, unexpected = self.classifier.load_state_dict(state["model"], strict=not partial)
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

    @torch.no_grad()
    def _replay(self, seed: int, released: float, step: int) -> None:
        """x ← x − η·c_t·u(seed): zeroth-order step ``step`` re-applied from its public seed and
        released scalar."""
        try:
            self.optimizer.replay_(seed, released)
        except ValueError as error:
            raise ValueError(
                f"journal does not match the checkpoint at step {step}: {error}"
            ) from None
