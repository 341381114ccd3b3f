"""Every committed result of a registered experiment (:data:`dpnc_reproduce.EXPERIMENTS`) judges
again, from its stored rows, to exactly its stored claims: the same statements, verdicts, statuses
and evidence. The claim objects that judge a new run are the ones that judged the committed
results (docs/results/, whose verdicts the documentation pages show), so a change to a claim's
wording or rule fails here until the results are re-judged or re-rendered on purpose (and say so)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpnc_reproduce import EXPERIMENTS, protocol

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def _registered() -> list[Path]:
    return [
        path
        for path in sorted(RESULTS.rglob("result.json"))
        if json.loads(path.read_text()).get("experiment") in EXPERIMENTS
    ]


def _claims(claims) -> dict[str, tuple]:
    return {c.statement: (c.holds, c.status, c.evidence) for c in claims}


def test_the_committed_results_of_every_registered_experiment_are_found():
    found = {json.loads(p.read_text())["experiment"] for p in _registered()}
    assert found and found <= set(EXPERIMENTS)


@pytest.mark.parametrize("path", _registered(), ids=lambda p: str(p.parent.relative_to(RESULTS)))
def test_a_committed_result_judges_again_to_its_stored_claims(path):
    experiment = EXPERIMENTS[json.loads(path.read_text())["experiment"]]
    stored = protocol.read(experiment, path)
    again = experiment.claims(stored.rows, stored.config)
    assert len(again) == len(stored.claims)
    assert _claims(again) == _claims(stored.claims)
