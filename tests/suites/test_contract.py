"""The contract every algorithm keeps, checked the same way for each one.

For every algorithm of every family (cases in ``tests/suites/contract/``): a config is a frozen
``Algorithm`` with ``from_theory``; invalid configurations are refused at construction, before any
data is touched; a run returns a ``Run`` whose ledger has one entry per release with sensitivities
in real units, refuses an objective that declares other public constants than the config was built
for, and states the config's ``claim()``; the run is deterministic given the public seeds, seeded
(test) noise and seeded batches; ``report(delta)`` has every field, and says "not private" for
seeded noise.

The constructors' contract: every registered class builds by ``from_theory(setting, budget,
**choices)`` and ``practical(setting, budget, **options)`` on a tiny
:class:`~dpnc.algorithms.base.Setting`, runs by ``run(problem, x0, *, noise, accountant,
generator)`` (no defaults), spends at most its budget (the accountant's ε at the budget's δ, or its
ρ for a zCDP budget), states ``claim()`` and a ``cost(setting)``; and its σ = 0, C = ∞ twin (where
the class has those fields) reports "not private"."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import pkgutil

import pytest
import torch

import tests.suites.contract
from dpnc.algorithms.base import BOUNDS, Algorithm, Cost, Run, Stats
from dpnc.algorithms.registry import ALGORITHMS, FAMILIES
from dpnc.privacy import Accountant, NoiseSource
from dpnc.privacy.budget import ZCDP


def _cases():
    cases = []
    for module in pkgutil.iter_modules(tests.suites.contract.__path__):
        cases += importlib.import_module(f"tests.suites.contract.{module.name}").CASES
    return cases


CASES = _cases()
IDS = [case.name for case in CASES]


def _run(case, seed: int = 0) -> Run:
    problem = case.problem()
    accountant = Accountant(case.relation)
    return case.run(
        case.build(),
        problem,
        case.x0(problem),
        NoiseSource.for_testing(seed),
        accountant,
        torch.Generator().manual_seed(seed),
    )


def test_every_registered_algorithm_has_a_case():
    """A class added to the registry without a contract case fails here."""
    assert {type(case.build()) for case in CASES} >= set(ALGORITHMS.values())
    assert {case.build().family for case in CASES} == set(FAMILIES)
    assert all(cls.name == name for name, cls in ALGORITHMS.items())


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_config_is_a_frozen_algorithm_with_from_theory(case):
    algorithm = case.build()
    assert isinstance(algorithm, Algorithm) and dataclasses.is_dataclass(algorithm)
    field = dataclasses.fields(algorithm)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(algorithm, field, getattr(algorithm, field))
    assert callable(type(algorithm).from_theory) and isinstance(algorithm.paper, bool)
    assert isinstance(algorithm.name, str) and algorithm.name


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_invalid_configurations_are_refused_at_construction(case):
    assert case.invalid, "every algorithm refuses some configuration"
    for override in case.invalid:
        with pytest.raises(ValueError):
            case.build(**override)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_one_ledger_entry_per_release_in_real_units(case):
    run = _run(case)
    assert isinstance(run, Run) and isinstance(run.stats, Stats)
    ledger = run.accountant.ledger
    assert sum(entry.count for entry in ledger) == run.accountant.releases == case.releases
    if case.sensitivities is not None:
        got = [_sensitivity(entry.release) for entry in ledger]
        assert got == pytest.approx(case.sensitivities, rel=1e-12)


def _sensitivity(release) -> float:
    """Δ of the innermost mechanism (through sampling and tree wrappers)."""
    while not hasattr(release, "sensitivity"):
        release = release.mechanism
    return release.sensitivity


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_deterministic_given_public_seeds_and_seeded_noise(case):
    first, second, other = _run(case, 0), _run(case, 0), _run(case, 1)
    assert torch.equal(first.output, second.output) and torch.equal(first.last, second.last)
    assert first.stats == second.stats
    assert not torch.equal(first.output, other.output), (
        "the seeds must matter (else the test proves nothing)"
    )


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_report_has_every_field_and_says_not_private_for_seeded_noise(case):
    run = _run(case)
    report = run.report(1e-5)
    assert report.delta == 1e-5 and report.releases == case.releases
    assert report.relation == case.relation
    assert report.epsilon > 0
    assert report.private is False  # seeded noise (and batches): never private
    assert run.output.shape == run.last.shape
    # the claim's one source: the config's claim(), or "none" and why where the run is beyond the
    # theorem
    expected = run.algorithm.claim() if run.beyond_theory is None else f"none: {run.beyond_theory}"
    assert report.paper_claim == run.paper_claim == expected


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_run_refuses_a_problem_whose_constants_do_not_imply_the_configs(case):
    """A config holds the public constants it was built for; a run on an objective whose declared
    constants do not imply them (a tighter bound, another κ) is refused before any release: its σ,
    sensitivities and claim would rest on a bound the objective does not give. A looser bound is
    implied."""
    algorithm = case.build()
    built = algorithm.built_for()
    if not built:
        pytest.skip(
            f"{case.name}: its fields are hyper-parameters only (C, η, σ); the run reads no constant"
        )
    problem = case.problem()
    assert built == {name: getattr(problem.constants, name) for name in built}
    for name, value in built.items():
        tighter = dataclasses.replace(algorithm, **{name: value / 1.001})
        accountant = Accountant(case.relation)
        with pytest.raises(
            ValueError, match=f"other public constants than the problem declares: {name} = "
        ):
            case.run(
                tighter,
                problem,
                case.x0(problem),
                NoiseSource.for_testing(0),
                accountant,
                torch.Generator().manual_seed(0),
            )
        assert accountant.releases == 0
        looser = dataclasses.replace(algorithm, **{name: value * 1.001})
        if name in BOUNDS:
            looser.check_problem(problem)  # an L-Lipschitz f is 1.001·L-Lipschitz
        else:
            with pytest.raises(ValueError, match=f"{name} = "):
                looser.check_problem(problem)


# --- the constructors' contract -------------------------------------------------------------------


def _made(cls):
    """The case that says how to build ``cls`` from its constructors (one per registered class)."""
    for case in CASES:
        if type(case.build()) is cls and case.constructors is not None:
            return case
    raise AssertionError(
        f"{cls.__name__} has no contract case with constructors (tests/suites/contract/)"
    )


REGISTERED = sorted(ALGORITHMS)


@pytest.mark.parametrize("name", REGISTERED)
def test_every_registered_class_has_the_one_signature(name):
    cls = ALGORITHMS[name]
    for method in ("from_theory", "practical"):
        params = list(inspect.signature(getattr(cls, method)).parameters)
        assert params[:2] == ["setting", "budget"], (method, params)
    run = inspect.signature(cls.run).parameters
    for arg in ("noise", "accountant", "generator"):
        assert (
            run[arg].kind is inspect.Parameter.KEYWORD_ONLY
            and run[arg].default is inspect.Parameter.empty
        )
    assert list(run)[1:3] == ["problem", "x0"]


def _spent_within(budget, run: Run) -> None:
    """ρ of the ledger for a zCDP budget; else ε at the budget's δ by the best accountant that
    applies (the report's)."""
    if isinstance(budget, ZCDP):
        assert run.accountant.rho() <= budget.rho * (1 + 1e-9)
    else:
        assert run.report(budget.delta).epsilon <= budget.epsilon * (1 + 1e-9)


@pytest.mark.parametrize("constructor", ["from_theory", "practical"])
@pytest.mark.parametrize("name", REGISTERED)
def test_constructors_on_a_tiny_setting_spend_at_most_the_budget(name, constructor):
    cls = ALGORITHMS[name]
    case = _made(cls)
    made = case.constructors
    problem = (made.problem or case.problem)()
    setting = made.setting(problem)
    options = made.theory if constructor == "from_theory" else made.practical
    algorithm = getattr(cls, constructor)(setting, made.budget, **options)
    assert type(algorithm) is cls
    cost = algorithm.cost(setting)
    assert isinstance(cost, Cost) and min(cost.evaluations, cost.gradients, cost.samples) >= 0
    assert cost.evaluations + cost.gradients > 0 and 0 < cost.samples <= setting.n
    assert isinstance(algorithm.claim(), str) and algorithm.claim()
    accountant = Accountant(made.relation)
    run = algorithm.run(
        problem,
        case.x0(problem),
        noise=NoiseSource.for_testing(0),
        accountant=accountant,
        generator=torch.Generator().manual_seed(0),
    )
    assert isinstance(run, Run) and run.output.shape == (setting.d,)
    if cls.private:
        _spent_within(made.budget, run)
    else:
        assert run.report(1e-5).private is False and math.isinf(run.report(1e-5).epsilon)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_non_private_twin_says_not_private(case):
    twin = case.build().non_private()
    if twin is None:
        pytest.skip(
            f"{case.name}: no σ = 0 twin (its σ is set from ρ > 0 inside the run: Menart et al.)"
        )
    for name in ("noise_multiplier", "C"):
        if name in {f.name for f in dataclasses.fields(twin)}:
            assert getattr(twin, name) == (0.0 if name == "noise_multiplier" else math.inf)
    problem = case.problem()
    run = case.run(
        twin,
        problem,
        case.x0(problem),
        NoiseSource(),
        Accountant(case.relation),
        torch.Generator().manual_seed(0),
    )
    report = run.report(1e-5)
    assert report.private is False and math.isinf(report.epsilon)


@pytest.mark.parametrize("name", REGISTERED)
def test_sample_complexity_and_stationarity_radius_are_read_from_the_class(name):
    """``samples_needed(setting, budget, beta)`` (None where the family states no rate) and
    ``stationarity_radius`` (None where the output targets no Goldstein radius) are part of the
    contract: consumers read them instead of branching on names. A rate needs more examples for a
    smaller β; O2NC's radius is twice its smoothing."""
    cls = ALGORITHMS[name]
    made = _made(cls).constructors
    problem = (made.problem or _made(cls).problem)()
    setting = made.setting(problem)
    choices = {"smoothing": made.theory["smoothing"]} if "smoothing" in made.theory else {}
    coarse, fine = (
        cls.samples_needed(setting, made.budget, beta, **choices) for beta in (0.2, 0.1)
    )
    algorithm = cls.from_theory(setting, made.budget, **made.theory)
    if coarse is not None:
        assert 0 < coarse < fine
    radius = algorithm.stationarity_radius
    assert radius is None or radius == 2 * algorithm.smoothing > 0
    assert (radius is None) == (not hasattr(algorithm, "smoothing"))
