"""dpnc audit: every mechanism's real code path is audited in both directions.

For each mechanism, the correct configuration must not be flagged (empirical ε lower bound ≤ the ledger's
claimed ε) and every deliberately broken variant must be (lower bound > claim): σ/10 with the claim unchanged,
and for subsampled mechanisms batches from a public seed the adversary replays. So the audit can pass neither
vacuously (it demonstrably detects a false claim at the same number of runs) nor by luck of the noise (the
margins below were checked over repeated runs; the noise is secret, hence different at every run).
"""

import json

import pytest
from typer.testing import CliRunner

from dpnc.audit import MECHANISMS, run_audit
from dpnc.audit.command import BROKEN_NAMES, MECHANISM_NAMES
from dpnc.audit.mechanisms import BROKEN
from dpnc.cli import app

# runs per dataset: enough for each broken variant to be detected with a comfortable margin
RUNS = {"dpzero": 2000, "dpgd0th": 2000, "dpzero-poisson": 2000, "ztc-tree": 1000, "klt-tree": 1000,
        "kl-spider-checkpoint": 2000, "dpzero-optimizer": 600}
CASES = [(name, broken) for name, cls in MECHANISMS.items()
         for broken in (None, "sigma", *(("public-batches",) if cls.subsampled else ()))]


pytestmark = pytest.mark.usefixtures("one_thread")   # tests/conftest.py


@pytest.mark.parametrize("name, broken", CASES, ids=[f"{n}-{b or 'correct'}" for n, b in CASES])
def test_audit_flags_exactly_the_broken_variants(name, broken):
    result = run_audit(name, RUNS[name], broken)
    assert result.claimed_epsilon == pytest.approx(1.0, abs=0.1)  # the ledger's claim for the target ε = 1
    if broken is None:
        assert result.epsilon_lower_bound <= result.claimed_epsilon, result
        assert not result.violation
    else:
        assert result.epsilon_lower_bound > result.claimed_epsilon, result
        assert result.violation


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_the_canary_moves_each_release_by_the_recorded_sensitivity(name):
    """Noiseless replays of D and D′: the canary's effect on a release is the ledger's sensitivity (so the audit
    tests the claim at its worst case), and for unsampled Gaussian mechanisms its Gaussian-DP μ over all releases
    is the ledger's μ: the canary's privacy loss is exactly the claimed one."""
    effect = MECHANISMS[name]().canary_effect()
    assert effect["shift"] == pytest.approx(effect["sensitivity"], rel=1e-6)
    if MECHANISMS[name].subsampled:
        assert effect["mu"] is None
    else:
        assert effect["mu"] == pytest.approx(effect["claimed_mu"], rel=1e-9)


def test_every_mechanism_is_covered_and_listed_for_the_command_line():
    assert set(MECHANISM_NAMES) == set(MECHANISMS) and BROKEN_NAMES == BROKEN
    assert {"dpzero", "dpzero-poisson", "dpgd0th", "ztc-tree", "klt-tree", "kl-spider-checkpoint",
            "dpzero-optimizer"} <= set(MECHANISMS)
    subsampled = {name for name, cls in MECHANISMS.items() if cls.subsampled}
    assert subsampled == {"dpzero-poisson", "dpzero-optimizer"}


def test_the_claim_is_the_ledger_of_the_correct_configuration():
    mechanism = MECHANISMS["dpzero"]()
    report = mechanism.claim()
    assert report.private and report.releases == mechanism.T
    assert report.epsilon == report.epsilon_pld <= 1.0 + 1e-6 and report.epsilon_pld > 0.99  # PLD-calibrated


def test_public_batches_are_refused_for_a_mechanism_that_samples_none():
    with pytest.raises(ValueError, match="public-batches' applies to subsampled mechanisms"):
        run_audit("dpzero", 100, "public-batches")
    with pytest.raises(ValueError, match="mechanism must be one of"):
        run_audit("magic", 100)
    with pytest.raises(ValueError, match="runs must be an integer >= 4"):
        run_audit("dpzero", 2)


def test_result_is_json_with_the_claim_beside_the_bound():
    result = run_audit("kl-spider-checkpoint", 200)
    data = json.loads(result.to_json())
    for key in ("mechanism", "broken", "claimed_epsilon", "epsilon_lower_bound", "confidence", "runs", "test",
                "statistic", "canary", "claim", "parameters", "violation"):
        assert key in data
    assert data["runs"] == 200 and data["test"]["positives"] == data["test"]["negatives"] == 100
    assert data["claim"]["epsilon_pld"] == pytest.approx(data["claimed_epsilon"])
    assert "claimed ε" in str(result) and data["canary_effect"]["shift"] > 0


runner = CliRunner(env={"COLUMNS": "250"})


def test_command_prints_json(tmp_path):
    out = tmp_path / "audit.json"
    result = runner.invoke(app, ["audit", "dpzero", "--runs", "200", "--json", "--no-progress", "--broken", "sigma",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["mechanism"] == "dpzero" and data["broken"] == "sigma" and data["violation"]
    assert json.loads(out.read_text()) == data


@pytest.mark.parametrize("args, option", [
    (["magic"], "MECHANISM"),
    (["dpzero", "--runs", "0"], "--runs"),
    (["dpzero", "--broken", "magic"], "--broken"),
    (["dpzero", "--broken", "public-batches"], "--broken"),
    (["dpzero", "--epsilon", "0"], "--epsilon"),
    (["dpzero", "--epsilon", "nan"], "--epsilon"),
    (["dpzero", "--delta", "1"], "--delta"),
    (["dpzero", "--confidence", "1.5"], "--confidence"),
])
def test_command_bad_input_is_a_usage_error(args, option, monkeypatch):
    import dpnc.audit.core

    def started(*a, **k):
        raise AssertionError("the audit started before the input was validated")

    monkeypatch.setattr(dpnc.audit.core, "run_audit", started)
    result = runner.invoke(app, ["audit", *args, "--no-progress"])
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    assert option in result.output
