"""run_audit: the result as JSON with the claim beside the bound, and a variant, factor or mechanism it
cannot run refused by name."""

import json

import pytest

from dpnc.audit import run_audit


def test_public_batches_are_refused_for_a_mechanism_that_samples_none():
    with pytest.raises(ValueError, match="does not apply to 'dpzero'"):
        run_audit("dpzero", 100, "public-batches")
    with pytest.raises(ValueError, match="sigma_factor must be"):
        run_audit("dpzero", 100, "sigma", sigma_factor=0)
    with pytest.raises(ValueError, match="mechanism must be one of"):
        run_audit("magic", 100)
    with pytest.raises(ValueError, match="runs must be an integer >= 4"):
        run_audit("dpzero", 2)


def test_result_is_json_with_the_claim_beside_the_bound():
    result = run_audit("kl-spider-checkpoint", 200)
    data = json.loads(result.to_json())
    for key in (
        "mechanism",
        "broken",
        "claimed_epsilon",
        "epsilon_lower_bound",
        "audit_delta",
        "claimed_epsilon_at_audit_delta",
        "confidence",
        "runs",
        "tests",
        "profile",
        "statistic",
        "canary",
        "claim",
        "parameters",
        "violation",
        "margin",
    ):
        assert key in data
    assert data["runs"] == 200 and all(
        t["test"]["positives"] == t["test"]["negatives"] == 100 for t in data["tests"]
    )
    assert data["claim"]["epsilon_pld"] == pytest.approx(data["claimed_epsilon"])
    assert all(
        t["test"]["confidence"] == pytest.approx(1 - 0.05 / len(data["tests"]))
        for t in data["tests"]
    )
    assert "claimed ε" in str(result) and data["canary_effect"]["shift"] > 0
