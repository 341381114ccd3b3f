"""Golden regression test: every algorithm's output on a fixed seeded configuration, recorded before
a refactor.

The cases (tests/suites/golden/cases.py) call the public API with seeded test noise and sampling;
the stored numbers (tests/suites/golden/outputs.json) must be reproduced to abs 1e-12 + rel 1e-12.
If a case's *call* changes with an API, rewrite the call; if its *numbers* change, the behaviour
changed."""

import json
import math

import pytest

from tests.suites.golden.cases import CASES, OUTPUTS, compute

TOL = 1e-12


@pytest.fixture(scope="module")
def golden():
    return json.loads(OUTPUTS.read_text())


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=TOL, abs_tol=TOL)


def test_every_case_is_recorded(golden):
    assert sorted(golden) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_matches_golden(name, golden):
    expected, got = golden[name], compute(name)
    assert sorted(got) == sorted(expected), (
        f"{name}: keys differ: got {sorted(got)}, stored {sorted(expected)}"
    )
    problems = []
    for key, want in expected.items():
        have = got[key]
        if isinstance(want, list):
            if not isinstance(have, list) or len(have) != len(want):
                problems.append(f"{key}: stored a list of {len(want)}, got {have!r}")
                continue
            problems += [
                f"{key}[{i}]: got {h!r}, stored {w!r}"
                for i, (h, w) in enumerate(zip(have, want))
                if not _same(float(h), float(w))
            ]
        elif isinstance(have, list) or not _same(float(have), float(want)):
            problems.append(f"{key}: got {have!r}, stored {want!r}")
    assert not problems, f"{name}: {len(problems)} mismatches:\n  " + "\n  ".join(problems[:20])
