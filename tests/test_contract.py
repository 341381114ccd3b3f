"""The contract every algorithm keeps (issue 14), checked the same way for each one.

For every algorithm of every family (cases in ``tests/contract/``): a config is a frozen ``Algorithm``
with ``from_theory``; invalid configurations are refused at construction, before any data is touched;
a run returns a ``Run`` whose ledger has one entry per release with sensitivities in real units; the run is
deterministic given the public seeds, seeded (test) noise and seeded batches; ``report(delta)`` has every
field, and says "not private" for seeded noise.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

import pytest
import torch

import tests.contract
from dpnc.algorithms.base import Algorithm, Run, Stats
from dpnc.algorithms.registry import ALGORITHMS, FAMILIES
from dpnc.privacy import Accountant, NoiseSource


def _cases():
    cases = []
    for module in pkgutil.iter_modules(tests.contract.__path__):
        cases += importlib.import_module(f"tests.contract.{module.name}").CASES
    return cases


CASES = _cases()
IDS = [case.name for case in CASES]


def _run(case, seed: int = 0) -> Run:
    problem = case.problem()
    accountant = Accountant(case.relation)
    return case.run(case.build(), problem, case.x0(problem), NoiseSource.for_testing(seed), accountant,
                    torch.Generator().manual_seed(seed))


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
    assert not torch.equal(first.output, other.output), "the seeds must matter (else the test proves nothing)"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_report_has_every_field_and_says_not_private_for_seeded_noise(case):
    run = _run(case)
    report = run.report(1e-5)
    assert report.delta == 1e-5 and report.releases == case.releases
    assert report.relation == case.relation
    assert report.epsilon > 0
    assert report.private is False        # seeded noise (and batches): never private
    assert run.output.shape == run.last.shape
