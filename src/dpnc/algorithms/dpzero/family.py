"""What the DPZero family's configs share (:mod:`dpnc.algorithms.dpzero.configs`): the per-step log
and stats, the public seeds, the family's base class (validation, the closure, the run loop, the
output rule), the practical step-size rule and the finite-pair filter of MeZO.

Symbols as in :mod:`dpnc.algorithms.dpzero.configs`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from dpnc.algorithms.base import Algorithm, Cost, Run, Setting, Stats, approximate
from dpnc.checks import check_choice, check_integer
from dpnc.estimators import ClosedForm, TwoPoint
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.budget import Budget
from dpnc.privacy.calibrate import noise_multiplier
from dpnc.privacy.noise import NoiseSource
from dpnc.sampling import FullBatch, Sampler
from dpnc.space import DIRECTIONS, FlatSpace

Number = float | torch.Tensor


# --- per-step log and the family's stats ----------------------------------------------------------


@dataclass
class StepLog:
    """What one step did (tensors have one entry per run in a grid, else are scalars).

    ``released`` is public (the noisy c_t or vector); ``loss``, ``clipped_fraction``, ``nonfinite``
    and ``examples`` (the realised batch size) are statistics of the private batch: do not log them
    publicly."""

    loss: torch.Tensor
    clipped_fraction: torch.Tensor
    released: torch.Tensor
    nonfinite: torch.Tensor
    examples: int = 0


@dataclass
class ZerothOrderStats(Stats):
    """The family's :class:`~dpnc.algorithms.base.Stats` (counts summed over the runs of a grid).

    ``seeds``: the public direction seeds, one per step (may be logged); ``tau``: the output
    iterate's index when ``paper=True`` (public), else None."""

    seeds: list[int] = field(default_factory=list)
    tau: int | None = None

    def add(self, log: StepLog, runs: int, per_example: str) -> None:
        self.steps += 1
        if not log.examples:  # an empty batch: noise only
            return
        count = log.examples * runs
        if per_example == "evaluations":
            self.evaluations += 2 * count
        else:
            self.gradients += count
        self.clipped += int(torch.round(log.clipped_fraction * log.examples).sum())
        self.nonfinite += int(torch.as_tensor(log.nonfinite).sum())


def public_seeds(gen: torch.Generator, T: int) -> list[int]:
    """T direction seeds from a public generator (logged; they reveal nothing about the noise)."""
    return [int(s) for s in torch.randint(0, 2**62, (T,), generator=gen)]


# --- the shared run loop --------------------------------------------------------------------------


class ZerothOrderFamily(Algorithm):
    """``run`` for the four configs: T steps on a FlatSpace at x0, public seeds from
    ``generator``."""

    family: ClassVar[str] = "dpzero"
    per_example: ClassVar[str] = "evaluations"
    closed_form: ClassVar[bool] = (
        True  # the step needs only a_i and the mean loss (MeZO: the losses themselves)
    )
    steps: int
    paper: bool
    direction: str

    def _check_common(self) -> None:
        check_integer(steps=self.steps)
        if not isinstance(self.paper, bool):
            raise ValueError(f"paper must be a bool; got {self.paper!r}")
        check_choice("direction", self.direction, DIRECTIONS)

    def _closure(self, problem, space: FlatSpace):
        """What ``step`` takes besides the space: the per-example losses at the space's point(s),
        with the objective's closed-form two-point differences where it has them (``two_point``,
        e.g. the quadratic) and the config's step uses only the differences and their mean loss
        (:class:`~dpnc.estimators.ClosedForm`)."""
        losses = lambda batch: problem.losses_at(space.x, batch)  # noqa: E731
        if not self.closed_form:
            return losses
        return ClosedForm(losses, lambda u, lam, batch: problem.two_point(space.x, u, lam, batch))

    def _step(self, space, closure, seed, **kwargs) -> StepLog:
        return self.step(space, closure, seed, **kwargs)

    def claim(self) -> str:
        """The paper's privacy statement for this config (Lemma 2.2: full batch, advanced
        composition)."""
        m = self.noise_multiplier
        if m == 0:
            return "not private (noise_multiplier = 0: the clipped mean is released exactly)"
        return (
            f"(ε, δ)-DP for every ε, δ with 2√(2T·log(e + ε/δ))/ε ≤ σ/Δ = {m:.4g}, T = {self.steps} "
            "(Lemma 2.2, advanced composition; full batch, replace-one)"
        )

    def cost(self, setting: Setting) -> Cost:
        """T full-batch steps on n examples: 2n function evaluations a step (zeroth order) or n
        gradients (DP-GD); a subsampled sampler reads fewer."""
        per_step = setting.n * (2 if self.per_example == "evaluations" else 1)
        return Cost(
            evaluations=per_step * self.steps if self.per_example == "evaluations" else 0,
            gradients=per_step * self.steps if self.per_example == "gradients" else 0,
            samples=setting.n,
        )

    def non_private(self) -> ZerothOrderFamily:
        """The σ = 0, C = ∞ twin (its releases carry no noise: the report says not private)."""
        names = {f.name for f in dataclasses.fields(self)}
        twin = {"noise_multiplier": 0.0, "C": math.inf}
        return dataclasses.replace(self, **{k: v for k, v in twin.items() if k in names})

    def run(
        self,
        problem,
        x0: torch.Tensor,
        *,
        noise: NoiseSource,
        accountant: Accountant,
        generator: torch.Generator,
        sampler: Sampler | None = None,
        callback: Callable[[int, StepLog], None] | None = None,
    ) -> Run:
        """``steps`` steps on ``problem`` (an :class:`~dpnc.problems.base.Objective`) from ``x0``.

        Args:
            problem: per-example losses through ``losses_at(points, index)`` (DP-GD: gradients).
            x0: the start point (d,), or (K, d) for a grid of K runs that share their public
                directions and batches; ``eta`` and ``C`` may then be one per run.
            noise: the secret noise source (seeded only in tests: the report then says not private).
            accountant: records every release.
            generator: public randomness: the direction seeds (and τ when ``paper=True``).
            sampler: the batches (default: the full batch, as in the theorems); a subsampled sampler
                draws them in secret and its release carries the amplification.
            callback: ``callback(t, log)`` after step t (e.g. a progress bar; the log's statistics
                of the batch are private).

        Returns:
            A :class:`~dpnc.algorithms.base.Run` with :class:`ZerothOrderStats`; ``output`` is the
            last iterate, or x_τ with ``paper=True``.
        """
        self.check_problem(problem)
        sampler = sampler if sampler is not None else FullBatch(problem.n)
        sampler.check_relation(accountant.relation)
        space = FlatSpace(x0, self.direction)
        seeds = public_seeds(generator, self.steps)
        tau = int(torch.randint(self.steps, (1,), generator=generator)) if self.paper else None
        stats = ZerothOrderStats(seeds=seeds, tau=tau)
        runs = math.prod(space.runs)
        closure, output = self._closure(problem, space), None
        for t, seed in enumerate(seeds):
            if t == tau:
                output = space.x.clone()
            log = self._step(
                space, closure, seed, sampler=sampler, noise=noise, accountant=accountant
            )
            stats.add(log, runs, self.per_example)
            if callback is not None:
                callback(t, log)
        last = space.x
        private = getattr(self, "noise_multiplier", 0.0) > 0
        notes = (
            []
            if private
            else [f"{self.name} releases a data-dependent value without noise: not private"]
        )
        if (
            private and runs > 1
        ):  # the ledger holds one run's releases (release_sum): say what ε then covers
            notes.append(
                f"a grid of {runs} runs on the same data: ε is each run's; publishing more than one run's "
                f"output composes their releases ({runs} runs: the ledger's steps × {runs})"
            )
        beyond = (
            None
            if isinstance(sampler, FullBatch) or not private
            else "the paper's theory is full batch (docs/papers.md, DPZero §7.1); the ledger accounts the "
            "sampler's amplification"
        )
        return Run(
            self,
            output if output is not None else last,
            last,
            accountant,
            stats,
            beyond_theory=beyond,
            private=private,
            notes=notes,
        )


def practical_step(constants, *, steps: int, gap: float | None) -> float:
    """The practical first-order step: 1/L1 on a smooth objective, else Φ/(L0²√T) (the distance Φ/L0
    that a drop of Φ allows, spread over √T steps); Φ = ``gap`` ≥ F(x0) − inf F is public."""
    return (
        1 / constants.L1 if constants.L1 is not None else gap / (constants.L0**2 * math.sqrt(steps))
    )


def practical_parameters(
    setting: Setting, budget: Budget, *, steps: int, zeroth_order: bool
) -> dict:
    """The practical settings of the DPZero family (full batch): a documented rule, no theorem
    attached.

    C = L0 (a per-example gradient, or the scalar uᵀ∇f ~ N(0, ‖∇f‖²), is of size L0 at most where
    the public constants hold; clipping binds only beyond them); T = ``steps``; η = 1/L1 on a smooth
    objective, else the subgradient step Φ/(L0²√T) with Φ ≥ F(x0) − inf F public (the distance Φ/L0
    spread over √T steps); divided by d + 2 for a zeroth-order estimate (E‖u uᵀ∇f‖² = (d + 2)‖∇f‖²
    for Gaussian u: the same expected progress per step needs a d + 2 times smaller step); σ/Δ the
    smallest the RDP accountant finds (ε, δ)-DP for T full-batch Gaussian releases (tighter than the
    papers' advanced composition). Read only from public inputs: the setting's constants, d and gap
    (Φ), the budget's (ε, δ) and ``steps``."""
    budget = approximate(budget, "the DPZero family")
    d, constants, gap = setting.d, setting.constants, setting.gap
    check_integer(steps=steps)
    L0, L1 = constants.L0, constants.L1
    if L0 is None:
        raise ValueError(
            "practical settings need the public per-example Lipschitz constant constants.L0"
        )
    if L1 is None and gap is None:
        raise ValueError(
            "practical settings need constants.L1 (smooth) or gap ≥ F(x0) − inf F (nonsmooth)"
        )
    eta = practical_step(constants, steps=steps, gap=gap)
    return {
        "eta": eta / (d + 2 if zeroth_order else 1),
        "C": float(L0),
        "steps": steps,
        "noise_multiplier": noise_multiplier(budget.epsilon, budget.delta, 1.0, steps),
    }


def theory_inputs(setting: Setting, budget: Budget, who: str) -> dict:
    """What the DPZero paper's theorems read: n, d, L = L0 (per-example Lipschitz), ℓ = L1
    (smoothness), (ε, δ)."""
    budget = approximate(budget, who)
    c = setting.constants
    if c.L0 is None or c.L1 is None:
        raise ValueError(
            f"{who}'s theorem needs constants.L0 (Lipschitz, its L) and constants.L1 (smoothness, its "
            f"ℓ); got L0={c.L0!r}, L1={c.L1!r}"
        )
    return {
        "n": setting.n,
        "d": setting.d,
        "L": c.L0,
        "ell": c.L1,
        "epsilon": budget.epsilon,
        "delta": budget.delta,
    }


def finite_pairs(diffs: TwoPoint) -> tuple[TwoPoint, torch.Tensor]:
    """The two-point losses with every example whose a_i is non-finite (a NaN/±inf loss at either
    point) set to 0 at *both* points, and their count per run: MeZO's update then ignores that
    example instead of turning NaN. Where every a_i is finite the losses are returned unchanged (bit
    for bit)."""
    ok = torch.isfinite(diffs.a)
    zero = torch.zeros((), dtype=diffs.plus.dtype, device=diffs.plus.device)
    return TwoPoint(
        torch.where(ok, diffs.plus, zero), torch.where(ok, diffs.minus, zero), diffs.lam
    ), (~ok).sum(-1)


# --- the algorithms -------------------------------------------------------------------------------
