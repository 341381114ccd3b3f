"""Contract cases: one module per algorithm family (``dpzero.py``, ``nonsmooth.py``, ``kl.py``),
each with ``CASES: list[ContractCase]``, collected by ``tests/suites/test_contract.py``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from dpnc.algorithms.base import Algorithm, Setting
from dpnc.privacy.budget import ZCDP, Budget
from dpnc.problems.base import Objective


@dataclass
class Constructors:
    """How the contract test builds an algorithm class from its constructors on a tiny problem.

    Attributes:
        budget: a small budget in the family's language (Budget (ε, δ) or ZCDP ρ).
        gap: the setting's bound on F(x0) − inf F (None: the class does not need it).
        theory: ``from_theory``'s choices (e.g. DPZero's effective rank, ZTC's smoothing).
        practical: ``practical``'s options.
        relation: the accountant's neighbouring relation for these runs.
        problem: the objective for these runs (None: the case's), one whose constants the
            constructors read.
    """

    budget: Budget | ZCDP
    gap: float | None = None
    theory: dict = field(default_factory=dict)
    practical: dict = field(default_factory=dict)
    relation: str = "replace-one"
    problem: Callable[[], Objective] | None = None

    def setting(self, problem: Objective) -> Setting:
        return Setting.of(problem, gap=self.gap)


@dataclass
class ContractCase:
    """How to run one algorithm of the contract on a tiny problem with seeded (test) randomness.

    Attributes:
        name: the algorithm's name (the test id).
        make: builds a valid config (``Algorithm``), e.g. ``lambda: DPZero(eta=0.1, ...)``.
        invalid: keyword overrides each of which must make construction raise ``ValueError``,
            applied as ``build(**override)``; ``build`` is ``make``'s keyword form.
        build: ``build(**fields)`` → config; ``make()`` must equal ``build()``.
        problem: builds the objective.
        x0: the start point for the problem.
        run: ``run(algorithm, problem, x0, noise, accountant, generator)`` → ``Run``: the call with
            every other argument the family needs (samplers seeded with ``for_testing``), so that
            the test holds them fixed.
        releases: the number of releases the ledger must count for this run (entries × their
            counts).
        sensitivities: the Δ each ledger entry must carry, in real units, in ledger order (None: not
            checked, e.g. a non-private baseline).
        relation: the accountant's neighbouring relation.
        constructors: how to build the class by ``from_theory`` and ``practical`` on this case's
            problem (one case per registered class has it).
    """

    name: str
    build: Callable[..., Algorithm]
    invalid: list[dict]
    problem: Callable[[], Objective]
    x0: Callable[[Objective], torch.Tensor]
    run: Callable
    releases: int
    sensitivities: list[float] | None = None
    relation: str = "replace-one"
    tags: set[str] = field(default_factory=set)
    constructors: Constructors | None = None


def ones_start(problem: Objective) -> torch.Tensor:
    """The start point x0 = (1, …, 1) in float64."""
    return torch.ones(problem.dim, dtype=torch.float64)


def keyword_builder(config: Algorithm) -> Callable[..., Algorithm]:
    """``build(**override)``: a config of ``config``'s class from its fields with ``override`` on
    top, built by the constructor so that its checks run (shallow: a Budget field stays one)."""
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    return lambda **override: type(config)(**{**fields, **override})
