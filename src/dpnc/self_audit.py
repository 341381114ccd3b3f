"""Every run can audit itself: m canaries in the training data, each in with probability ½, scored
from the values the run releases, give the one-run ε lower bound beside the ledger's ε, for the run
and the user's own code (loss, collate, model). Steinke, Nasr, Jagielski. Privacy auditing with one
(1) training run. NeurIPS 2023 (arXiv:2305.08846). See docs/audit.md, "One run audits itself"."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import ConcatDataset, Dataset

from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.one_run import OneRunResult, one_run_audit
from dpnc.privacy.releases import Gaussian, Poisson, Release, Sampled
from dpnc.tier.first_order import DPOptimizer
from dpnc.tier.zeroth_order import DPZeroOptimizer

#: the scores, declared before any run (one-run confidence is shared over them and the k grid): the
#: exact LLR of the claimed Poisson-Gaussian release and its reverse, the plain sum (a canary that
#: enters every step, as through a loss that reads the whole dataset) and its reverse (a loss that
#: centres over the batch pushes it down)
STATISTICS = ("llr", "llr-reversed", "sum")

RESULT_FILE = "self_audit.json"
_WIDTH = 100  # columns of the printed result (dpnc audit --one-run, dpnc finetune --self-audit)

DIFFERENT_RUN = (
    "self-audited: the training data held the canaries drawn in (each of m with probability 1/2), so "
    "this is a different run from a plain one (its model and accuracy differ); n in the ledger is the "
    "declared n plus m"
)

NOT_MEASURED = (
    "not measured: no evaluation was passed (result(accuracy=..., canary_free_accuracy=...) records this "
    "run's accuracy and a canary-free twin run's)"
)
TWIN_NOT_RUN = (
    "not measured: no canary-free twin run (same settings, no audit) was evaluated to compare with"
)
ONE_PAIR = (
    "canary-free twin run's accuracy minus this run's, on the same evaluation data: one pair of runs, so the "
    "difference holds both runs' noise (no interval: repeated pairs give one)"
)


@dataclass(frozen=True)
class SelfAuditResult:
    """What a self-audit publishes: the one-run bound, its counts, the claim, the accuracy cost and
    the note on the run.

    ``flagged`` is ``epsilon_lower_bound > claimed_epsilon``: the run broke its claim, at
    ``confidence``.

    The accuracy fields are measured only when the caller measured them (:func:`accuracy_cost`):
    ``accuracy`` is this run's on the caller's evaluation data, ``canary_free_accuracy`` a
    canary-free twin run's (same settings, no audit) on the same data, and ``accuracy_cost`` their
    difference; ``accuracy_note`` says which were measured."""

    epsilon_lower_bound: float
    claimed_epsilon: float
    flagged: bool
    best_possible: float
    m: int
    guesses: int
    correct: int
    delta: float
    confidence: float
    private: bool
    note: str = DIFFERENT_RUN
    accuracy: float | None = None
    canary_free_accuracy: float | None = None
    accuracy_cost: float | None = None
    accuracy_note: str = NOT_MEASURED

    @classmethod
    def of(
        cls,
        bound: OneRunResult,
        claimed: float,
        private: bool,
        *,
        accuracy: float | None = None,
        canary_free_accuracy: float | None = None,
    ) -> SelfAuditResult:
        return cls(
            bound.epsilon_lower_bound,
            claimed,
            bound.epsilon_lower_bound > claimed,
            bound.best_possible,
            bound.m,
            bound.guesses,
            bound.correct,
            bound.delta,
            bound.confidence,
            private,
            **accuracy_cost(accuracy, canary_free_accuracy),
        )

    def to_dict(self) -> dict:
        return asdict(self)

    def save(self, folder: str | Path) -> Path:
        """Write ``folder/self_audit.json`` (public fields only: docs/privacy.md); ``dpnc audit
        --one-run folder`` prints it."""
        path = Path(folder) / RESULT_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, folder: str | Path) -> SelfAuditResult:
        """The result a run saved in ``folder`` (ValueError naming the file when there is none)."""
        path = Path(folder) / RESULT_FILE
        if not path.is_file():
            raise ValueError(
                f"{path} does not exist: save a self-audited run's result with "
                "audit.result().save(folder)"
            )
        fields = json.loads(path.read_text())
        return cls(**fields)

    def __str__(self) -> str:
        verdict = "FLAGGED: the run broke its claim" if self.flagged else "no violation found"
        if self.accuracy_cost is not None:
            cost = (
                f"accuracy {self.accuracy:.4f}, canary-free twin {self.canary_free_accuracy:.4f}: cost "
                f"{self.accuracy_cost:+.4f} ({self.accuracy_note})"
            )
        elif self.accuracy is not None:
            cost = f"accuracy {self.accuracy:.4f}; cost {self.accuracy_note}"
        else:
            cost = f"accuracy cost {self.accuracy_note}"
        lines = [
            f"one-run audit ({self.m} canaries{'' if self.private else ', NOT PRIVATE: seeded'}): "
            f"ε ≥ {self.epsilon_lower_bound:.3f} at {self.confidence:.0%} (claimed {self.claimed_epsilon:.3f}, "
            f"δ = {self.delta:g}): {verdict}",
            f"{self.correct} of {self.guesses} guesses correct; the best bound {self.m} canaries could show: "
            f"{self.best_possible:.3f}",
            cost,
            f"note: {self.note}",
        ]
        # one item a line, each wrapped for a terminal (it was one line of some 600 characters)
        return "\n".join(
            "\n".join(textwrap.wrap(line, _WIDTH, subsequent_indent="    ")) for line in lines
        )


def accuracy_cost(accuracy: float | None, canary_free_accuracy: float | None) -> dict:
    """The accuracy fields of a :class:`SelfAuditResult`, from what the caller measured (nothing is
    estimated).

    The cost is ``canary_free_accuracy − accuracy`` only when a canary-free twin run (same settings,
    no audit) was evaluated on the same data: one pair of runs, so it holds both runs' noise and has
    no interval (repeated pairs give one, as make_private's benchmark in docs/audit.md does). Both
    are accuracies in [0, 1] of data the caller may publish (a public test split); ValueError
    otherwise, or for a twin's accuracy without this run's."""
    for name, value in (("accuracy", accuracy), ("canary_free_accuracy", canary_free_accuracy)):
        if value is not None and not (
            isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1
        ):
            raise ValueError(f"{name} must be an accuracy in [0, 1] or None; got {value!r}")
    if canary_free_accuracy is not None and accuracy is None:
        raise ValueError(
            "canary_free_accuracy needs accuracy, this run's on the same evaluation data: the cost is "
            "their difference"
        )
    if accuracy is None:
        return {}
    if canary_free_accuracy is None:
        return {"accuracy": float(accuracy), "accuracy_note": TWIN_NOT_RUN}
    return {
        "accuracy": float(accuracy),
        "canary_free_accuracy": float(canary_free_accuracy),
        "accuracy_cost": float(canary_free_accuracy) - float(accuracy),
        "accuracy_note": ONE_PAIR,
    }


class SelfAudit:
    """A run's own one-run audit (docs/audit.md): build it, pass it as ``make_private(...,
    audit=...)``.

    Args:
        m: number of canaries, >= 2.
        row: ``row(k, sign) -> example``: a dataset example whose per-example loss is sign·L·θ[k] (+
            terms free of θ[k]) with L far above the clip, in the structure of the run's other
            examples (a public design).
        coordinates: at least m flat indices into the trainable parameters (``model.parameters()``
            order) that the canaries may own; the other examples should not move them (a reserved
            input feature).
        confidence: of the bound, in (0, 1).
        testing_seed: tests only; seeds the inclusions, coordinates and signs, and marks the result
            not private.
    """

    def __init__(
        self,
        m: int,
        *,
        row: Callable[[int, int], Any],
        coordinates: Sequence[int],
        confidence: float = 0.95,
        testing_seed: int | None = None,
    ) -> None:
        if not isinstance(m, int) or isinstance(m, bool) or m < 2:
            raise ValueError(f"m must be an integer >= 2 (the number of canaries); got {m!r}")
        if not callable(row):
            raise ValueError(f"row must be callable as row(k, sign) -> example; got {row!r}")
        coordinates = [int(k) for k in coordinates]
        if len(set(coordinates)) < m or min(coordinates) < 0:
            raise ValueError(
                f"coordinates must hold at least m = {m} distinct flat indices >= 0; got "
                f"{len(set(coordinates))} distinct"
            )
        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
        self.m, self.row, self.confidence = m, row, confidence
        source = NoiseSource() if testing_seed is None else NoiseSource.for_testing(testing_seed)
        self.private = source.secret
        # the design and the inclusions: secret, never published (only the bound and its counts are)
        pick = source.permutation(len(coordinates))[:m]
        self._k = torch.tensor(coordinates)[pick]
        self._sign = torch.where(source.uniform(m) < 0.5, -1.0, 1.0).double()
        self._included = (source.uniform(m) < 0.5).numpy()
        self._stats = {name: np.zeros(m) for name in STATISTICS}
        self._optimizer = None
        self._delta: float | None = None

    # -- wiring (called by make_private) -----------------------------------------------------------
    def attach(self, data: Dataset, n: int, delta: float | None) -> tuple[Dataset, int]:
        """The run's data (``data`` and the canaries drawn in, after it) and its public n (the
        declared n + m)."""
        if self._optimizer is not None:
            raise ValueError("this SelfAudit is already attached to a run; build one per run")
        rows = [
            self.row(int(k), int(s))
            for k, s, inside in zip(self._k, self._sign, self._included)
            if inside
        ]
        self._delta = delta
        return (ConcatDataset([data, _Rows(rows)]) if rows else data), n + self.m

    def watch(self, optimizer: DPZeroOptimizer | DPOptimizer) -> None:
        """Score every canary from each step's public release (a step hook of ``optimizer``).

        Raises ValueError, before any step, unless ``optimizer`` is dpnc's
        :class:`~dpnc.tier.DPZeroOptimizer` or :class:`~dpnc.tier.DPOptimizer` whose declared step
        release is a Poisson-subsampled Gaussian (the scores read its q and σ/Δ), and unless the
        coordinates index its trainable parameters."""
        if isinstance(
            optimizer, DPOptimizer
        ):  # first order: the trainable parameters by name, in order
            trainable = list(optimizer.params.values())
        elif isinstance(
            optimizer, DPZeroOptimizer
        ):  # zeroth order: the parameters the directions span
            trainable = list(optimizer.space.params)
        else:
            raise ValueError(
                "a self-audit watches dpnc's DPZero or DPOptimizer (the optimizers whose release the "
                f"canary scores are written for); got a {type(optimizer).__name__}"
            )
        _poisson_gaussian(optimizer.step_release())  # refused here, not mid-run
        count = sum(p.numel() for p in trainable)
        if int(self._k.max()) >= count:
            raise ValueError(
                f"coordinates must index the {count} trainable parameter entries; got "
                f"{int(self._k.max())}"
            )
        self._optimizer = optimizer
        optimizer.register_step_hook(self._score)

    def _score(self, optimizer: DPZeroOptimizer | DPOptimizer, info) -> None:
        released = info.released.detach().double().cpu()
        if isinstance(
            optimizer, DPOptimizer
        ):  # first order: the noisy mean gradient, a flat vector
            along = released.reshape(-1)[self._k]
        else:  # zeroth order: c_t along the public u_t (its sign at k_j)
            u = optimizer.space.direction(info.seed).double().cpu()
            along = torch.sign(u[self._k]) * released.reshape(-1)[0]
        q, unit, multiplier = _poisson_gaussian(info.release)
        y = (
            self._sign * along / unit
        ).numpy()  # the release along canary j, in units of the sensitivity
        self._stats["sum"] += y
        for name, sign in (("llr", 1.0), ("llr-reversed", -1.0)):
            # the Poisson-Gaussian log-likelihood ratio of "in" at the public q and σ/Δ (per step)
            self._stats[name] += np.logaddexp(
                np.log1p(-q), np.log(q) + (sign * y - 0.5) / multiplier**2
            )

    # -- the verdict -------------------------------------------------------------------------------
    def result(
        self,
        *,
        delta: float | None = None,
        claimed_epsilon: float | None = None,
        accuracy: float | None = None,
        canary_free_accuracy: float | None = None,
    ) -> SelfAuditResult:
        """The one-run bound at ``delta`` (default make_private's) beside ``claimed_epsilon``
        (default the ledger's ε at that δ), with the accuracy cost where the caller measured it
        (:func:`accuracy_cost`: this run's ``accuracy`` and a canary-free twin run's, on the same
        public evaluation data)."""
        if self._optimizer is None:
            raise ValueError(
                "this SelfAudit has not watched a run: pass it to make_private(..., audit=...)"
            )
        delta = self._delta if delta is None else delta
        if delta is None or not 0 < delta < 1:
            raise ValueError(
                f"delta must be in (0, 1) (make_private's delta, or given here); got {delta!r}"
            )
        if claimed_epsilon is None:
            claimed_epsilon = float(self._optimizer.accountant.get_epsilon(delta))
        scores = {**self._stats, "sum-reversed": -self._stats["sum"]}
        bound = one_run_audit(scores, self._included, delta=delta, confidence=self.confidence)
        private = self.private and self._optimizer.accountant.secret
        return SelfAuditResult.of(
            bound,
            claimed_epsilon,
            private,
            accuracy=accuracy,
            canary_free_accuracy=canary_free_accuracy,
        )


class _Rows(Dataset):
    """The canary rows drawn in, as a map-style dataset."""

    def __init__(self, rows: list) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
        return self.rows[i]


def _poisson_gaussian(release: Release) -> tuple[float, float, float]:
    """(q, Δ, σ/Δ) of a step's ledger entry: ``Sampled(Poisson(q), Gaussian(Δ, σ))`` with q < 1, the
    only release the scores are written for (ValueError naming the release otherwise)."""
    if not (
        isinstance(release, Sampled)
        and isinstance(release.sampling, Poisson)
        and release.sampling.q < 1
        and isinstance(release.mechanism, Gaussian)
        and release.mechanism.sigma > 0
    ):
        raise ValueError(
            "a self-audit scores Poisson-subsampled Gaussian releases with noise, "
            f"Sampled(Poisson(q < 1), Gaussian(Δ, σ > 0)); got {release!r}"
        )
    gaussian = release.mechanism
    return (
        float(release.sampling.q),
        float(gaussian.sensitivity),
        float(gaussian.sigma / gaussian.sensitivity),
    )
