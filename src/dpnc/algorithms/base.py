"""The contract every dpnc algorithm keeps, whichever paper it comes from.

:class:`Algorithm` is a frozen config with ``from_theory``, ``practical``, ``cost``, ``claim``
and ``run`` (its docstring states the contract and the counting words shared by all families);
:class:`Setting` is what is public about a problem; :class:`Run` is what every run returns: the
output, the ledger, the paper's claim and typed :class:`Stats`."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from dpnc.checks import check_integer, check_positive
from dpnc.privacy.accountant import Accountant, PrivacyReport
from dpnc.privacy.budget import ZCDP, Budget

if TYPE_CHECKING:
    from dpnc.problems.base import Constants


@dataclass(frozen=True)
class Setting:
    """What is public about a problem: declared constants, n, d, and a bound on F(x0) − inf F.

    Never read off the private data; every constructor (``from_theory``, ``practical``) reads its
    constants here.

    Attributes:
        constants: the objective's public :class:`~dpnc.problems.base.Constants`.
        n: the dataset size (public); d: the dimension.
        gap: a public bound on F(x0) − inf F (one name for DPZero's/KLT's Φ, ZTC's F*, Menart's F0),
            or None.
    """

    constants: Constants
    n: int
    d: int
    gap: float | None = None

    def __post_init__(self) -> None:
        check_integer(n=self.n, d=self.d)
        if self.gap is not None:
            check_positive(gap=self.gap)

    @classmethod
    def of(cls, problem, *, gap: float | None = None) -> Setting:
        """The setting of an :class:`~dpnc.problems.base.Objective`: its constants, n and dim (all
        public)."""
        return cls(problem.constants, int(problem.n), int(problem.dim), gap)

    def require_gap(self, who: str) -> float:
        """``gap``, refused when None (a constructor whose rule needs it)."""
        if self.gap is None:
            raise ValueError(f"{who} needs setting.gap, a public bound on F(x0) − inf F; got None")
        return float(self.gap)


@dataclass(frozen=True)
class Cost:
    """The work of one run, known before running: per-example function evaluations, per-example
    gradients and examples read (for methods that may stop early, the most the schedule allows)."""

    evaluations: int = 0
    gradients: int = 0
    samples: int = 0


def approximate(budget, who: str) -> Budget:
    """The (ε, δ) budget of a family whose paper speaks (ε, δ) (DPZero, KLT, the practical O2NC
    rules)."""
    if isinstance(budget, Budget):
        return budget
    raise TypeError(f"{who} takes an (ε, δ) Budget (its paper's language); got {budget!r}")


def zcdp(budget) -> ZCDP:
    """The zCDP budget of a family whose paper speaks ρ: a :class:`ZCDP` as is, a :class:`Budget` by
    the optimal conversion (the largest ρ whose zCDP guarantee implies (ε, δ))."""
    if isinstance(budget, ZCDP):
        return budget
    if isinstance(budget, Budget):
        return budget.to_zcdp()
    raise TypeError(f"budget must be a Budget (ε, δ) or a ZCDP (ρ); got {budget!r}")


@dataclass
class Stats:
    """Counters every algorithm reports (families extend it).

    ``evaluations``/``gradients`` count per-example function values and gradients; ``clipped``
    counts per-example terms changed by clipping and ``nonfinite`` NaN/±inf values set to 0 before
    it. These are statistics of the private data: do not log them publicly."""

    steps: int = 0
    evaluations: int = 0
    gradients: int = 0
    clipped: int = 0
    nonfinite: int = 0


@dataclass
class Run:
    """One run of an algorithm: what every algorithm returns, so that experiments never branch on
    the family.

    Attributes:
        algorithm: the config that ran (a frozen :class:`Algorithm`).
        output: the point the algorithm returns (its theorem's output rule).
        last: the last iterate (equal to ``output`` for last-iterate methods).
        accountant: every release of the run.
        stats: the family's typed :class:`Stats`.
        beyond_theory: why the paper's privacy statement does not cover this run (e.g. a subsampled
            sampler where the theorem is full batch), or None: then :attr:`paper_claim` is the
            config's :meth:`Algorithm.claim`.
        private: False when something other than the noise voids the guarantee (e.g. a sensitivity
            the run could not enforce); the ledger's own secret flag is combined with it in
            :meth:`report`.
        notes: privacy notes for the report (what a guarantee rests on).
        trace: what the family keeps for judging the output (e.g. O2NC's block averages and points,
            for a Goldstein certificate; KL's iterates), or None.
    """

    algorithm: Any
    output: torch.Tensor
    last: torch.Tensor
    accountant: Accountant
    stats: Stats = field(default_factory=Stats)
    beyond_theory: str | None = None
    private: bool = True
    notes: list[str] = field(default_factory=list)
    trace: Any = None

    @property
    def paper_claim(self) -> str:
        """The paper's own privacy statement for this run (printed beside the accountant's ε, never
        used in place of it): the config's :meth:`Algorithm.claim`, or "none" and the reason when
        the run is beyond the theorem."""
        if self.beyond_theory is not None:
            return f"none: {self.beyond_theory}"
        return self.algorithm.claim()

    def report(self, delta: float) -> PrivacyReport:
        """ε(δ) by every accountant that applies, ρ where zCDP, the paper's claim and the notes."""
        report = self.accountant.report(delta, paper_claim=self.paper_claim)
        report.notes.extend(self.notes)
        report.private = report.private and self.private
        return report


# Constants that are upper bounds (Constants' L0, L1, weak_convexity L̃1 and the KL γ): a larger
# value also holds.
BOUNDS = frozenset({"L0", "L1", "weak_convexity", "gamma"})


def _implied(name: str, built: float | None, declared: float | None) -> bool:
    """Whether the declared constant implies the config's: a bound no larger than it, any other the
    same value (to rounding: a value may have passed through float()); an undeclared one implies
    nothing but None."""
    if built is None or declared is None:
        return built is None and declared is None
    same = math.isclose(float(built), float(declared), rel_tol=1e-12, abs_tol=0.0)
    return same or (name in BOUNDS and float(built) >= float(declared))


class Algorithm(ABC):
    """Base of every algorithm config (subclasses are frozen dataclasses).

    An algorithm is a **frozen config**: its hyper-parameters, checked when it is built (before any
    data is touched), plus

    * ``from_theory(setting, budget, **choices)``: a classmethod that sets the parameters from the
      paper's theorem for a :class:`Setting` (the public constants, n, d, the gap bound) and a
      budget (:class:`~dpnc.privacy.budget.Budget` (ε, δ) or :class:`~dpnc.privacy.budget.ZCDP` ρ),
      converted once, in the paper's own language (DPZero, KLT: (ε, δ); ZTC: its ρ =
      ``to_zcdp().rdp_rho``; Menart: zCDP ρ). The privacy δ exists only inside a budget (KLT's
      config keeps its :class:`~dpnc.privacy.budget.Budget` as one field); smoothing radii are
      called ``smoothing``; F(x0) − inf F is bounded by ``gap``;
    * ``practical(setting, budget, **options)``: documented practical settings (no theorem
      attached), same budget;
    * ``cost(setting) -> Cost``: the work of one run (function evaluations, gradients, examples
      read), known from the config and the setting before running; ``claim() -> str``: the paper's
      privacy statement, the one source of :attr:`Run.paper_claim`;
    * resolved constants: a config holds the values of the public constants it was built for as
      fields (``constant_fields``, named as in :class:`~dpnc.problems.base.Constants`), and ``run``
      never reads them off the objective: it refuses an objective whose declared constants do not
      imply them (:meth:`check_problem`), so σ, ρ, the claim and the ledger all refer to one L,
      valid for the objective;
    * ``paper: bool``: ``False`` (the default) runs the corrected form, ``True`` the printed one
      where they differ (docs/papers.md gives each correction, in its paper's spec sections);
    * ``run(problem, x0, *, noise, accountant, generator, ...) -> Run``: one run on an objective of
      :mod:`dpnc.problems` from the start point ``x0``, with privacy noise from ``noise`` (secret
      unless a test seeds it), every release recorded in ``accountant``, and public randomness
      (directions, O2NC's interpolation scalars, output choices) from ``generator``.

    Counting words mean the same in every family: ``steps``, queries of the private oracle or
    gradient steps, in total; ``period``, steps between resets of the tree mechanism (ZTC's epoch T,
    KLT's Σ); ``block``, steps averaged into one O2NC output candidate (ZTC: the period; KLT: M);
    ``rounds``, outer iterations of a multi-stage method (KL-Spider's rounds, proximal point's prox
    steps).

    Subclasses set ``name`` and ``family``, validate their fields in ``__post_init__`` with
    :func:`dpnc.checks.check_positive`/:func:`~dpnc.checks.check_integer` (so invalid configurations
    fail at construction), and implement :meth:`from_theory`, :meth:`practical`, :meth:`run`,
    :meth:`claim` and :meth:`cost`.

    ``private`` is False for a class that never spends a budget (MeZO): its constructors accept a
    budget (or None) and ignore it, and its runs report "not private". :meth:`non_private` gives the
    σ = 0, C = ∞ twin of a config where the class has those fields (None where it has not)."""

    name: ClassVar[str]
    family: ClassVar[str]
    private: ClassVar[bool] = True
    # The fields that hold public constants (named as in Constants): the values the config was built
    # for.
    constant_fields: ClassVar[tuple[str, ...]] = ()
    # a config with a printed form that differs from the corrected one declares a field instead
    paper = False

    @classmethod
    @abstractmethod
    def from_theory(cls, setting: Setting, budget: Budget | ZCDP, **choices) -> Algorithm:
        """The parameters the paper's theorem prescribes for ``setting`` and ``budget``."""

    @classmethod
    @abstractmethod
    def practical(cls, setting: Setting, budget: Budget | ZCDP, **options) -> Algorithm:
        """Documented practical settings for ``setting`` and ``budget`` (privacy exact, no theorem
        attached)."""

    @abstractmethod
    def run(
        self,
        problem,
        x0: torch.Tensor,
        *,
        noise,
        accountant: Accountant,
        generator: torch.Generator,
        **options,
    ) -> Run:
        """One run from ``x0``; every release goes to ``accountant``. It first calls
        :meth:`check_problem`."""

    @abstractmethod
    def claim(self) -> str:
        """The paper's privacy statement for this config (the one source of
        :attr:`Run.paper_claim`)."""

    @abstractmethod
    def cost(self, setting: Setting) -> Cost:
        """The work of one run on a problem of ``setting`` (before running)."""

    def built_for(self) -> dict[str, float]:
        """The public constants this config was built for: ``{name: value}`` over
        :attr:`constant_fields`."""
        return {name: getattr(self, name) for name in self.constant_fields}

    def check_problem(self, problem) -> None:
        """Refuse ``problem`` (before any release) unless its declared constants imply
        :meth:`built_for`: the config's σ, sensitivities and claim were computed from those values,
        so they must hold for the objective. A bound (:data:`BOUNDS`: L0, L1, weak_convexity, γ) may
        be looser than the declared one (an L-Lipschitz f is L′-Lipschitz for every L′ ≥ L), never
        tighter; any other constant (κ) must be the declared one."""
        built = self.built_for()
        if (
            not built
        ):  # built for no constant (DPZero's family: hyper-parameters only): nothing to imply
            return
        declared = problem.constants
        wrong = {
            name: (value, getattr(declared, name, None))
            for name, value in built.items()
            if not _implied(name, value, getattr(declared, name, None))
        }
        if wrong:
            pairs = ", ".join(
                f"{name} = {built!r} (the problem declares {own!r})"
                for name, (built, own) in wrong.items()
            )
            raise ValueError(
                f"{self.name} was built for other public constants than the problem declares: {pairs}; "
                "a bound may be looser than the declared one, never tighter, and κ must match: build the "
                "config from Setting.of(problem)"
            )

    @property
    def stationarity_radius(self) -> float | None:
        """The radius r of the (r, β)-Goldstein stationarity the output targets (O2NC: 2·smoothing),
        or None for a method whose theorem bounds the gradient norm or the excess instead."""
        return None

    @classmethod
    def samples_needed(
        cls, setting: Setting, budget: Budget | ZCDP, beta: float, **choices
    ) -> float | None:
        """The n at which the paper's theorem reaches accuracy ``beta`` on ``setting`` (constants 1,
        logs dropped), the budget converted in the paper's language; None where the family states no
        such rate."""
        return None

    def non_private(self) -> Algorithm | None:
        """The σ = 0, C = ∞ twin of this config (its report says not private), or None where the
        class has no such fields."""
        return None
