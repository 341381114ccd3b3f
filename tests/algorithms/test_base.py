"""dpnc.algorithms.base: the public setting, budgets in each paper's language, and the rule that a
config runs only on an objective whose declared constants imply those it was built for."""

import dataclasses
from typing import ClassVar

import pytest

from dpnc.algorithms.base import Algorithm, Setting, approximate, zcdp
from dpnc.privacy.budget import ZCDP, Budget
from dpnc.problems.base import Constants


class Declared:
    """An objective seen through what check_problem reads: its constants."""

    def __init__(self, **constants) -> None:
        self.constants = Constants(**constants)
        self.n, self.dim = 10, 3


def test_a_setting_is_the_objectives_public_record():
    problem = Declared(L0=2.0)
    setting = Setting.of(problem, gap=1.5)
    assert (setting.constants, setting.n, setting.d, setting.gap) == (problem.constants, 10, 3, 1.5)
    assert setting.require_gap("DPZero.from_theory") == 1.5
    with pytest.raises(ValueError, match=r"KLT needs setting.gap, .*; got None"):
        Setting.of(problem).require_gap("KLT")
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        Setting(problem.constants, 0, 3)
    with pytest.raises(ValueError, match="gap must be a finite number > 0"):
        Setting(problem.constants, 10, 3, gap=0.0)


def test_budgets_are_taken_in_the_papers_language():
    budget = Budget(1.0, 1e-6)
    assert approximate(budget, "KLT") is budget
    with pytest.raises(TypeError, match=r"KLT takes an \(ε, δ\) Budget"):
        approximate(ZCDP(0.5), "KLT")
    assert zcdp(ZCDP(0.5)) == ZCDP(0.5)
    assert zcdp(budget) == budget.to_zcdp()
    with pytest.raises(TypeError, match="budget must be a Budget"):
        zcdp(1.0)


@dataclasses.dataclass(frozen=True)
class BuiltFor(Algorithm):
    """A config built for L0 and κ (the rest of the interface is not asked for here)."""

    name: ClassVar[str] = "built-for"
    family: ClassVar[str] = "test"
    constant_fields: ClassVar[tuple[str, ...]] = ("L0", "kappa")
    L0: float = 2.0
    kappa: float | None = 2.0

    from_theory = practical = run = claim = cost = None


def test_a_bound_may_be_looser_than_declared_never_tighter_and_kappa_must_match():
    config = BuiltFor()
    assert config.built_for() == {"L0": 2.0, "kappa": 2.0}
    config.check_problem(Declared(L0=2.0, kappa=2.0))
    config.check_problem(Declared(L0=1.0, kappa=2.0))  # an L-Lipschitz f is 2-Lipschitz
    for declared in (Declared(L0=3.0, kappa=2.0), Declared(L0=2.0, kappa=1.5), Declared(L0=2.0)):
        with pytest.raises(ValueError, match="built-for was built for other public constants"):
            config.check_problem(declared)
    BuiltFor(kappa=None).check_problem(Declared(L0=2.0))  # both undeclared: nothing to imply
