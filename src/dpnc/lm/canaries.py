"""The text trainer's self-audit (``dpnc finetune --self-audit M``): input-space canaries scored
black-box.

The same one-run audit as :class:`dpnc.self_audit.SelfAudit` (Steinke, Nasr and Jagielski 2023),
with the canary a text classifier can carry whatever its model: M random texts (words of random
letters) with random labels from the task's declared class set, drawn from a secret
:class:`~dpnc.privacy.noise.NoiseSource`. Each joins the training data with probability ½ (secret),
after the real rows, and is then drawn into batches like any row. After training each canary is
scored black-box, by the trained classifier's loss on its own label (a canary it was trained on
should have a lower loss: the score is −loss, declared before the run), and the abstaining
top-k/bottom-k guesses give the one-run bound (:func:`dpnc.privacy.one_run.one_run_audit`).

Rules, as make_private's self-audit keeps them: the ledger's n is the declared n plus M (a public
bound: n plus the number of canaries in would publish that number); which canaries were in, their
texts and labels are never written anywhere (the summary holds the bound and its counts); the run is
a different run from a plain one (its data held the canaries drawn in), and its summary says so.
Black-box scoring of an input-space canary is a weak adversary (it sees the final model only, not
every release): a bound above the claim still proves a broken run, but a bound below it proves
nothing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch

from dpnc.checks import check_integer, check_probability
from dpnc.lm.data import Task, TextDataset
from dpnc.lm.journal import jsonable
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.one_run import one_run_audit
from dpnc.self_audit import SelfAuditResult

#: the canary texts: WORDS words of LETTERS random lowercase letters each (a public design; the
#: draws are secret)
WORDS, LETTERS = 8, 5
#: the score, declared before the run: a canary trained on should have a lower loss on its own label
STATISTIC = "negative-loss"
#: config fields a canary-free twin run may differ in (where it writes, what it shows; the audit
#: itself)
TWIN_MAY_DIFFER = (
    "self_audit",
    "canary_free_run",
    "new_run",
    "progress",
    "log_private_stats",
    "report_to",
    "eval_every",
    "checkpoint_every",
    "recipe_selection",
)


class TextCanaries:
    """M input-space canaries for the text trainer (module docstring).

    Args:
        m: number of canaries, >= 2.
        task: the run's task; the labels are drawn from its declared classes, the texts are pairs
            for a pair task.
        source: where the texts, labels and inclusions are drawn from: a secret ``NoiseSource()``
            (the default), or a seeded one in tests (the result then says NOT PRIVATE).
        confidence: of the bound, in (0, 1).
    """

    def __init__(
        self, m: int, task: Task, *, source: NoiseSource | None = None, confidence: float = 0.95
    ) -> None:
        check_integer(2, m=m)  # the number of canaries
        check_probability(confidence=confidence)
        self.m, self.task, self.confidence = m, task, confidence
        source = NoiseSource() if source is None else source
        self.private = source.secret
        # secret, never written: the texts, labels and which canaries are in
        texts = [_text(source) for _ in range(m)]
        self._texts = (
            [(a, b) for a, b in zip(texts, [_text(source) for _ in range(m)])]
            if task.pair
            else texts
        )
        self._labels = (
            (source.uniform(m) * task.num_classes).long().clamp_(max=task.num_classes - 1)
        )
        self._included = (source.uniform(m) < 0.5).numpy()

    def join(self, train: TextDataset) -> TextDataset:
        """``train`` with the canaries drawn in after its rows (the same task, origin and drop
        count)."""
        keep = np.flatnonzero(self._included).tolist()
        return TextDataset(
            train.task,
            [*train.texts, *(self._texts[j] for j in keep)],
            torch.cat([train.labels, self._labels[keep]]),
            train.source,
            train.origin,
            dropped=train.dropped,
            dropped_labels=train.dropped_labels,
        )

    @torch.no_grad()
    def scores(self, classifier, batch_size: int = 64) -> np.ndarray:
        """−(the classifier's loss on each canary's own label): black box, from the trained model
        alone."""
        _, losses = classifier.evaluate(self._texts, self._labels, batch_size=batch_size)
        losses = losses.double().cpu().numpy()
        return -np.where(np.isfinite(losses), losses, math.inf)  # a non-finite loss: the least "in"

    def result(
        self,
        classifier,
        *,
        delta: float,
        claimed_epsilon: float,
        private: bool,
        accuracy: float | None = None,
        canary_free_accuracy: float | None = None,
        batch_size: int = 64,
    ) -> SelfAuditResult:
        """The one-run bound of the trained ``classifier`` beside the run's ``claimed_epsilon`` at
        ``delta``, with the accuracy cost as measured (:func:`dpnc.self_audit.accuracy_cost`).
        ``private``: whether the run's noise and batches were secret (the result is private only if
        the canaries were too)."""
        bound = one_run_audit(
            {STATISTIC: self.scores(classifier, batch_size)},
            self._included,
            delta=delta,
            confidence=self.confidence,
        )
        return SelfAuditResult.of(
            bound,
            claimed_epsilon,
            private and self.private,
            accuracy=accuracy,
            canary_free_accuracy=canary_free_accuracy,
        )


def _text(source: NoiseSource) -> str:
    letters = (source.uniform(WORDS * LETTERS) * 26).long().clamp_(max=25).reshape(WORDS, LETTERS)
    return " ".join("".join(chr(ord("a") + int(c)) for c in word) for word in letters)


def for_run(
    config, task: Task, *, secret: bool, resume: bool, parallel: bool
) -> TextCanaries | None:
    """The canaries of a run (None without ``self_audit``). ``secret``: whether the run's noise is
    (a test's seeded noise seeds the canaries too, so the run replays). Refused on resume (the
    canaries drawn in are secret and not checkpointed: a resumed run would train on others) and data
    parallel (not built, as make_private's)."""
    if not config.self_audit:
        return None
    if resume or parallel:
        raise ValueError(
            "self_audit needs a fresh run in one process: the canaries drawn in are secret and never "
            f"checkpointed, and a data-parallel self-audit is not built; got resume={resume}, data "
            f"parallel: {parallel}"
        )
    if (
        config.canary_free_run is not None
    ):  # a twin that does not match is refused before any release
        canary_free_accuracy(config.canary_free_run, config)
    source = NoiseSource() if secret else NoiseSource.for_testing(config.seed + 1)
    return TextCanaries(config.self_audit, task, source=source)


def canary_free_accuracy(folder: str | Path, config) -> float:
    """The test accuracy of the canary-free twin run in ``folder`` (its summary.json), after
    checking it is a twin: the same settings as ``config`` but for :data:`TWIN_MAY_DIFFER`, no
    self-audit, every step taken."""
    path = Path(folder) / "summary.json"
    if not path.is_file():
        raise ValueError(
            f"canary_free_run must be a finished run's folder holding summary.json; {path} does not "
            "exist"
        )
    twin = json.loads(path.read_text())
    ours = json.loads(
        json.dumps(jsonable(config.hyperparameters()))
    )  # as the twin's summary.json wrote its own
    differ = sorted(
        k
        for k in set(ours) | set(twin.get("config", {}))
        if k not in TWIN_MAY_DIFFER and ours.get(k) != twin.get("config", {}).get(k)
    )
    if differ or twin.get("self_audit") or twin.get("steps") != config.steps:
        raise ValueError(
            f"canary_free_run must be a canary-free twin of this run (the same settings, no self-audit, "
            f"all {config.steps} steps); {path} differs in {differ or 'its self-audit or steps'}"
        )
    return float(twin["test_accuracy"])
