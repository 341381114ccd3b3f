"""Online-to-nonconvex conversion (O2NC; Cutkosky, Mehta & Orabona 2023) with projected OGD.

One driver (:func:`o2nc`) for Zhang–Tran–Cutkosky (Algorithm 3) and Kornowski–Liu–Talwar
(Algorithm 2), and :class:`O2NCAlgorithm`, the one config shape of both families, whose ``run``
builds the family's private oracle and drives it (docs/papers.md, ZTC §2 A3 and KLT §2.2)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from dpnc.algorithms.base import Algorithm, Run
from dpnc.algorithms.oracles import OracleStats
from dpnc.checks import check_integer, check_positive
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.noise import NoiseSource
from dpnc.progress import progress as progress_bar

Oracle = Callable[[int, torch.Tensor], torch.Tensor]  # (t, w_t) -> g̃_t, t = 1, 2, …

OUTPUT_RULES = ("random-block", "last")
"""What :meth:`O2NCAlgorithm.run` returns as ``Run.output``: ``"random-block"`` (the papers' rule: the average
of a uniformly chosen completed block, whose Goldstein-stationarity the theorems bound in expectation) or
``"last"`` (the last iterate x_{T+1}; public post-processing of the released g̃, so no privacy cost, but no
theorem bounds its stationarity)."""

CLIP_RATE_WARNING = 0.5  # warn when more than half of the per-example increments were clipped


def project_ball(v: torch.Tensor, radius: float) -> torch.Tensor:
    """Π_D(v) = v·min(1, D/‖v‖), the Euclidean projection onto the ball of radius D."""
    norm = float(torch.linalg.vector_norm(v))
    return v if norm <= radius else v * (radius / norm)


class ProjectedOGD:
    """Projected online gradient descent on {‖Δ‖ ≤ D}: Δ ← Π_D(Δ − η·g), starting from Δ = 0.

    Regret D·G·√T against any ‖u‖ ≤ D after T rounds with η = D/(G√T) and E‖g‖² ≤ G².
    """

    def __init__(self, dim: int, D: float, eta: float, dtype: torch.dtype = torch.float64) -> None:
        check_positive(D=D)
        check_positive(allow_zero=True, eta=eta)
        self.D, self.eta = float(D), float(eta)
        self.dim, self.dtype = dim, dtype
        self.reset()

    def reset(self) -> None:
        """Restart: Δ = 0."""
        self.delta = torch.zeros(self.dim, dtype=self.dtype)

    def update(self, g: torch.Tensor) -> None:
        """Feed the linear loss ⟨g, ·⟩."""
        self.delta = project_ball(self.delta - self.eta * g, self.D)


@dataclass
class O2NCResult:
    """The output and what a user (or a certificate) needs to judge it.

    Attributes:
        output: w̄ of the chosen block, shape (d,).
        output_block: its index k (0-based) among the completed blocks.
        block_averages: (K, d), w̄^k of every completed block.
        x: the last iterate x_{steps+1}.
        steps: oracle queries made.
        points: (K, block, d) every w_t of every completed block if ``keep_points``, else None.
        max_increment: the largest ‖Δ_t‖ played (≤ D).
        max_move: the largest ‖w_{t+1} − w_t‖ inside a block (≤ 2D).
    """

    output: torch.Tensor
    output_block: int
    block_averages: torch.Tensor
    x: torch.Tensor
    steps: int
    points: torch.Tensor | None
    max_increment: float
    max_move: float

    @property
    def output_points(self) -> torch.Tensor | None:
        """The w_t averaged into the output (each within block·D of it), for a certificate."""
        return None if self.points is None else self.points[self.output_block]


def o2nc(
    oracle: Oracle,
    x0: torch.Tensor,
    *,
    D: float,
    eta: float,
    steps: int,
    block: int,
    reset_each_block: bool,
    generator: torch.Generator,
    keep_points: bool = False,
    progress: bool = False,
    on_step: Callable[[int, torch.Tensor, torch.Tensor], None] | None = None,
) -> O2NCResult:
    """Run O2NC with projected OGD for ``steps`` oracle queries (ZTC Algorithm 3 / KLT Algorithm 2).

    Per step t: w_t = x_t + s_t·Δ_t with s_t ~ U[0, 1]; x_{t+1} = x_t + Δ_t; g̃_t = oracle(t, w_t);
    Δ_{t+1} = Π_D(Δ_t − η·g̃_t). With ``reset_each_block`` the learner restarts (Δ = 0) at the first
    step of each block. Returns the average of w over a uniformly chosen completed block.

    The learner plays increments Δ_t in the ball ‖Δ‖ ≤ D and the oracle is queried at a uniformly
    random point of the segment, so that F(x_{t+1}) − F(x_t) = E_s⟨∇F(w_t), Δ_t⟩ and the learner's
    regret on the linear losses ⟨g̃_t, ·⟩ bounds the progress. Every w_t of a block of length M lies
    within M·D of the block average, so small gradients along a block certify Goldstein stationarity
    of its average. Zhang–Tran–Cutkosky: ``block=T``, ``reset_each_block=True`` (K epochs of T
    steps, the learner restarts with Δ = 0 each epoch, D = δ/T); Kornowski–Liu–Talwar: ``block=M``,
    ``reset_each_block=False`` (the learner never resets; the trailing steps that do not fill a
    block are not averaged). The driver is public post-processing: it sees only the oracle's
    (already private) outputs, and its randomness (s_t, the output block) comes from a public
    generator.

    ``on_step(t, w_t, g̃_t)`` is called after every query (logging; it must not change its
    arguments)."""
    if x0.ndim != 1:
        raise ValueError(f"x0 must be a vector (d,); got shape {tuple(x0.shape)}")
    check_integer(steps=steps, block=block)
    if block > steps:
        raise ValueError(
            f"block must be <= steps={steps} so that at least one block completes; got {block}"
        )
    learner = ProjectedOGD(x0.shape[0], D, eta, dtype=x0.dtype)
    x = x0.clone()
    blocks = steps // block
    averages = torch.zeros(blocks, x0.shape[0], dtype=x0.dtype)
    points = torch.zeros(blocks, block, x0.shape[0], dtype=x0.dtype) if keep_points else None
    max_increment = max_move = 0.0
    w_prev = None
    for t in progress_bar(range(1, steps + 1), desc="O2NC", disable=not progress, leave=False):
        k, i = divmod(t - 1, block)
        if i == 0:
            w_prev = None
            if reset_each_block:
                learner.reset()
        s = float(torch.rand((), generator=generator, dtype=x0.dtype))
        w = x + s * learner.delta
        x = x + learner.delta
        g = oracle(t, w)
        learner.update(g)
        max_increment = max(max_increment, float(torch.linalg.vector_norm(learner.delta)))
        if w_prev is not None:
            max_move = max(max_move, float(torch.linalg.vector_norm(w - w_prev)))
        w_prev = w
        if k < blocks:
            averages[k] += w / block
            if points is not None:
                points[k, i] = w
        if on_step is not None:
            on_step(t, w, g)
    chosen = int(torch.randint(blocks, (), generator=generator))
    return O2NCResult(
        output=averages[chosen].clone(),
        output_block=chosen,
        block_averages=averages,
        x=x,
        steps=steps,
        points=points,
        max_increment=max_increment,
        max_move=max_move,
    )


# --- practical settings (not a theorem's): the rules both families' ``practical`` share -----------


def practical_travel(constants, travel: float | None, gap: float | None = None) -> float:
    """How far the iterates may move in total, T·D: ``travel`` if given, else the radius of the
    region where the public constants are declared (a run that starts inside it can reach any point
    of it), else 2Φ/L0 with Φ = ``gap`` ≥ F(x₀) − inf F (twice the distance Φ/L0 that a drop of Φ
    allows: where no region is declared, the bound on the drop is the public length scale).

    Raises:
        ValueError: if none is given (the rule needs a public length scale).
    """
    if travel is not None:
        check_positive(travel=travel)
        return float(travel)
    region = getattr(constants, "region", None)
    if region is not None:
        return float(region.radius)
    if gap is not None and getattr(constants, "L0", None) is not None:
        check_positive(gap=gap)
        return 2 * float(gap) / constants.L0
    raise ValueError(
        "travel must be given (the total distance T·D the iterates may move) when the constants "
        "declare no region and the setting no gap; got travel=None, region=None and gap=None"
    )


def practical_period(
    *, n: int, d: int, rho: float, noise_ratio: float = 0.5, min_periods: int = 4
) -> int:
    """Σ (KLT; ZTC's epoch T) for a tree whose anchors use B1 = Σ examples and whose two radii are
    balanced.

    With every per-example term clipped to r (anchor) and r/Σ (increment), each tree node has σ =
    (2r/Σ)· √(Lvl/(2ρ)) (zCDP ρ; Lvl = ⌊log₂Σ⌋ + 1 nodes per example), and a release's noise has
    norm about σ·√(d·Lvl) = r·(Lvl/Σ)·√(2d/ρ). The rule takes the smallest power of two Σ for which
    that is at most ``noise_ratio``·r (the noise of every released gradient no larger than half an
    example's clip radius), but no larger than n/(2·``min_periods``), so that one pass holds at
    least ``min_periods`` periods (the anchor is what corrects the running sum: longer periods let
    it go stale). Public: reads n, d, ρ only."""
    check_integer(n=n, d=d, min_periods=min_periods)
    check_positive(rho=rho, noise_ratio=noise_ratio)
    cap = max(1, n // (2 * min_periods))
    Sigma = 1
    while Sigma * 2 <= cap and (Sigma.bit_length() / Sigma) * math.sqrt(2 * d / rho) > noise_ratio:
        Sigma *= 2
    return Sigma


# --- the one config shape and run of both families ------------------------------------------------


@dataclass
class O2NCStats(OracleStats):
    """What a private O2NC run spent and where its output came from (private statistics: do not log
    publicly except the public ones: ``output_block``, ``max_increment``, ``max_move``,
    ``samples_used``).

    Attributes:
        output_block: index k (0-based) of the block whose average is the output.
        max_increment: the largest ‖Δ_t‖ played (≤ D).
        max_move: the largest ‖w_{t+1} − w_t‖ inside a block (≤ 2D).
        samples_used: examples read (single pass: each once; multi-pass: n).
    """

    output_block: int = 0
    max_increment: float = 0.0
    max_move: float = 0.0
    samples_used: int = 0


class O2NCAlgorithm(Algorithm):
    """Private O2NC: a family's oracle driven by :func:`o2nc` (ZTC Algorithm 3, KLT Algorithm 2).

    Subclasses are frozen dataclasses with the fields ``smoothing`` (the smoothing radius, ZTC's δ,
    KLT's α: the output targets (2·smoothing, β)-stationarity of F), ``D``, ``eta``, ``steps``,
    ``period``, ``B1``, ``B2``, ``m``, ``paper``, ``output_rule`` (one of :data:`OUTPUT_RULES`) (and
    ``block``, a field or a property), and supply :meth:`make_oracle` (the family's private oracle)
    and the privacy statement (:meth:`claim`, :meth:`privacy_notes`)."""

    reset_each_block: ClassVar[bool]
    smoothing: float  # a field of every subclass (annotation only: this class is not a dataclass)

    @property
    def stationarity_radius(self) -> float:
        """2·smoothing: the output targets (2·smoothing, β)-Goldstein stationarity of F (ZTC's 2δ,
        KLT's 2α)."""
        return 2 * self.smoothing

    @property
    def anchors(self) -> int:
        """Anchor steps A = ⌈steps/period⌉ (one per tree period)."""
        return -(-self.steps // self.period)

    @property
    def samples(self) -> int:
        """Examples one single pass reads: B1·A + B2·(steps − A)."""
        return self.B1 * self.anchors + self.B2 * (self.steps - self.anchors)

    def _check_counts(self) -> None:
        check_integer(
            steps=self.steps, period=self.period, block=self.block, B1=self.B1, B2=self.B2, m=self.m
        )
        if self.block > self.steps:
            raise ValueError(
                f"block must be <= steps={self.steps} so that one block completes; got {self.block}"
            )
        if self.period > self.steps:
            raise ValueError(f"period must be <= steps={self.steps}; got {self.period}")

    def make_oracle(
        self, problem, *, noise: NoiseSource, accountant: Accountant, generator: torch.Generator
    ):
        """The family's private oracle for ``problem``: a callable (t, w_t) → g̃_t with ``stats``
        and ``samples_used``, recording every release in ``accountant``."""
        raise NotImplementedError

    def privacy_notes(self) -> list[str]:
        """What the guarantee rests on, for the report."""
        return []

    def summary(self) -> dict[str, float]:
        """The public schedule, for tables: counting words, D, η, m and the noise of anchors and
        increments."""
        return {
            "steps": self.steps,
            "period": self.period,
            "block": self.block,
            "B1": self.B1,
            "B2": self.B2,
            "m": self.m,
            "D": self.D,
            "eta": self.eta,
        }

    def run(
        self,
        problem,
        x0: torch.Tensor,
        *,
        noise: NoiseSource,
        accountant: Accountant,
        generator: torch.Generator,
        keep_points: bool = False,
        progress: bool = False,
    ) -> Run:
        """O2NC for ``steps`` queries of the family's private oracle on ``problem``'s data, from
        ``x0``.

        ``generator`` is the public stream (directions, ball points, s_t, the output block); privacy
        noise comes from ``noise``; every release is recorded in ``accountant``. ``keep_points``
        keeps every w_t of every completed block in the trace (for
        :func:`dpnc.certify.certify_run`)."""
        self.check_problem(problem)
        oracle = self.make_oracle(problem, noise=noise, accountant=accountant, generator=generator)
        trace = o2nc(
            oracle,
            x0.to(torch.float64),
            D=self.D,
            eta=self.eta,
            steps=self.steps,
            block=self.block,
            reset_each_block=self.reset_each_block,
            generator=generator,
            keep_points=keep_points,
            progress=progress,
        )
        spent = oracle.stats
        stats = O2NCStats(
            steps=trace.steps,
            evaluations=spent.evaluations,
            gradients=spent.gradients,
            clipped=spent.clipped,
            nonfinite=spent.nonfinite,
            beyond_radius=spent.beyond_radius,
            increments=spent.increments,
            increments_clipped=spent.increments_clipped,
            output_block=trace.output_block,
            max_increment=trace.max_increment,
            max_move=trace.max_move,
            samples_used=oracle.samples_used,
        )
        self._warn_clip_rate(stats)
        output = trace.x if getattr(self, "output_rule", "random-block") == "last" else trace.output
        return Run(
            self, output, trace.x, accountant, stats, notes=self.privacy_notes(), trace=trace
        )

    def _warn_clip_rate(self, stats: O2NCStats) -> None:
        """Warn (``warnings.warn``, never a public log: the rate is a statistic of the private data)
        when an oracle that clips its increments clipped more than half of them: the running sum
        then tracks the gradient poorly (the increments' radius is too small for the step D, or m
        too small)."""
        if not self.paper and stats.increments_clipped and stats.clip_rate > CLIP_RATE_WARNING:
            warnings.warn(
                f"{stats.clip_rate:.0%} of the per-example increments were clipped (more than "
                f"{CLIP_RATE_WARNING:.0%}): the variance-reduced gradient is biased towards the period's "
                "anchor; use a smaller D, a longer smoothing radius, common directions or more of them (m)",
                RuntimeWarning,
                stacklevel=3,
            )
