"""What the private O2NC oracles of Zhang–Tran–Cutkosky and Kornowski–Liu–Talwar share.

:class:`SinglePassOracle`: a problem read once (each example used once), the secret noise, the
accountant and the counters; :class:`TreeOracle`: the variance-reduced oracle with
tree-aggregated noise that both papers use, whose subclasses supply the two estimators."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dpnc.algorithms.base import Stats
from dpnc.privacy.accountant import Accountant, new_partition
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.tree import TreeMechanism
from dpnc.problems.base import Objective
from dpnc.sampling import SinglePass


@dataclass
class OracleStats(Stats):
    """What an oracle spent and corrected, summed over the run (private statistics: do not log
    publicly).

    ``clipped`` counts corrections that keep a sensitivity bound deterministic (finite differences
    beyond what an L-Lipschitz f allows; per-example estimates beyond a safe-mode radius);
    ``nonfinite`` counts NaN/±inf differences set to 0; ``beyond_radius`` counts per-example terms
    whose norm exceeded the radius their sensitivity assumes (clipped in a safe mode; in a
    paper-literal mode, the events its high-probability bound excludes). ``increments`` and
    ``increments_clipped`` count the per-example increment terms and those beyond their radius;
    :attr:`clip_rate` is their ratio. All are statistics of the private data: do not log them
    publicly (a clip rate, like a loss, can reveal whether one example is present)."""

    beyond_radius: int = 0
    increments: int = 0
    increments_clipped: int = 0

    @property
    def clip_rate(self) -> float:
        """The fraction of per-example increment terms beyond their radius (clipped in a safe mode);
        0 if none."""
        return self.increments_clipped / self.increments if self.increments else 0.0

    def add(self, estimate):
        """Count a :class:`~dpnc.estimators.VectorEstimate` and return it."""
        self.evaluations += estimate.evaluations
        self.clipped += estimate.clipped
        self.nonfinite += estimate.nonfinite
        return estimate


class SinglePassOracle:
    """An oracle that reads each example of ``problem`` at most once, in a fixed public order."""

    def __init__(
        self,
        problem: Objective,
        *,
        samples: int,
        noise: NoiseSource,
        accountant: Accountant,
        generator: torch.Generator,
        data: SinglePass | None = None,
    ) -> None:
        self.problem, self.noise, self.accountant, self.generator = (
            problem,
            noise,
            accountant,
            generator,
        )
        self.data = SinglePass(problem.n) if data is None else data
        if self.data.remaining < samples:
            raise ValueError(
                f"the run needs {samples} examples once each; only {self.data.remaining} are left"
            )
        self.stats = OracleStats()

    @property
    def samples_used(self) -> int:
        """Examples read so far (each once)."""
        return self.data.used


def check_move(w: torch.Tensor, w_prev: torch.Tensor, max_move: float) -> None:
    """Refuse ‖w − w_prev‖ > ``max_move`` (2D for O2NC): an increment's sensitivity assumes it, so a
    driver that broke it would silently break the privacy calibration."""
    move = float(torch.linalg.vector_norm(w - w_prev))
    if move > max_move * (1 + 1e-9):
        raise RuntimeError(
            f"‖w_t − w_(t−1)‖ = {move:.3g} exceeds {max_move:.3g}; the increment's "
            "sensitivity (and hence the privacy calibration) would not hold"
        )


class TreeOracle(SinglePassOracle):
    """Anchor + running sum of increments, released with tree noise reset every ``period`` steps.

    The variance-reduced oracle both papers use (ZTC Algorithms 4–5, KLT Algorithms 3 and 5). Time
    is cut into periods of Σ steps; a period opens with an *anchor* estimate on B1 fresh examples,
    then adds an *increment* estimate between consecutive query points on B2 fresh examples at every
    step:

        g_t = anchor(w_first) + Σ increment(w_j, w_{j−1}),   released as g̃_t = g_t + TREE(k),

    k the position in the period. The running sum g_t stays noiseless, so noise never accumulates,
    and the tree privatises all Σ prefix sums at once (Prop 2.5 / Thm 4.3): a data point enters one
    term, hence ⌊log₂Σ⌋ + 1 node releases. Periods use disjoint data, so they are accounted by
    parallel composition: one tree-aggregated Gaussian release under one partition. The papers
    differ only in the two estimators and in the sensitivity they prove for them: subclasses supply
    :meth:`anchor` and :meth:`increment`.

    Args:
        period: Σ, the steps of one tree (ZTC: the epoch T).
        B1, B2: fresh examples for the anchor and for each increment.
        sensitivity: a bound on how much replacing one example moves any one term (anchor or
            increment) of the running sum; with ``sigma`` it is the release the accountant records.
        sigma: the noise std of every tree node.
        max_move: the largest ‖w_t − w_{t−1}‖ the increment's sensitivity allows (2D for O2NC); a
            larger step raises instead of silently breaking the calibration.
        samples: examples the whole run will take (checked against what is left).
        label: names the accountant's partition.
    """

    def __init__(
        self,
        problem: Objective,
        *,
        period: int,
        B1: int,
        B2: int,
        sensitivity: float,
        sigma: float,
        max_move: float,
        label: str,
        **kwargs,
    ) -> None:
        super().__init__(problem, **kwargs)
        self.period, self.B1, self.B2, self.max_move = period, B1, B2, max_move
        self.tree = TreeMechanism(
            problem.dim, leaves=period, sensitivity=sensitivity, sigma=sigma, noise=self.noise
        )
        self.partition = new_partition(label)
        self.g = self.w_prev = None

    def anchor(self, w: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The period's first term: an estimate of ∇F(w) from the examples ``index``."""
        raise NotImplementedError

    def increment(self, w: torch.Tensor, w_prev: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """An estimate of ∇F(w) − ∇F(w_prev) from the examples ``index``."""
        raise NotImplementedError

    def __call__(self, t: int, w: torch.Tensor) -> torch.Tensor:
        k = (t - 1) % self.period + 1
        if k == 1:
            self.g = self.anchor(w, self.data.take(self.B1))
            self.accountant.record(self.tree.reset(), partition=self.partition)
        else:
            check_move(w, self.w_prev, self.max_move)
            self.g = self.g + self.increment(w, self.w_prev, self.data.take(self.B2))
        self.w_prev = w
        return self.tree(self.g, k)
