"""utility as an experiment: a tiny grid runs and writes every output, the command is registered,
and superseding a result keeps the replaced verdicts."""

import json
import math

import pytest
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc_reproduce import protocol
from dpnc_reproduce.utility import report
from dpnc_reproduce.utility.experiment import EXPERIMENT
from dpnc_reproduce.utility.methods import (
    MATCHED,
    REFERENCE,
)
from tests.reproduce.utility.rows import METHODS, TINY
from tests.reproduce.written import assert_written


@pytest.fixture(scope="module")
def tiny():  # the slow tier only (the tests that use it are marked): one tiny run of the whole grid
    return protocol.run_experiment(EXPERIMENT, TINY, progress=False, workers=1)


@pytest.mark.slow
def test_tiny_run_writes_every_output(tiny, tmp_path):
    rows = tiny.rows
    tasks = EXPERIMENT.tasks(TINY)
    matched = {"dpzero", "klt:first-order"} | {
        "adaptive-gd"
    }  # one compute-matched DP-SGD per paper method that ran
    assert len(tasks) == 2 * 2 * 2
    assert (
        len(rows) == len(tasks) * (1 + len(METHODS)) + 2 * 2 * 3 + 2 * 2 * 2
    )  # adaptive-gd: logistic only
    assert {r.method for r in rows if r.family == "matched"} == {MATCHED + m for m in matched}
    for r in rows:
        if r.method == REFERENCE:
            assert r.excess_risk == 0 and math.isinf(r.epsilon_spent) and not r.private
        elif r.problem == "l1-regression" and r.method == "adaptive-gd":  # needs L1: not applicable
            assert r.status.startswith("n/a") and math.isnan(r.excess_risk)
        else:
            assert r.status == "ok" and r.private, r
            assert r.epsilon_spent <= r.epsilon * (1 + 1e-6)
            assert r.excess_risk >= -1e-6 and r.evaluations + r.gradients > 0
            # a private tuning's time would reveal its secret K: withheld (NaN); every other run is
            # timed
            assert math.isnan(r.seconds) if r.method.endswith("-tuned") else r.seconds >= 0
            assert (
                (0 <= r.test_accuracy <= 1)
                if r.problem.startswith("logistic")
                else math.isnan(r.test_accuracy)
            )
            assert r.start_gap > 0
            # the Goldstein certificate: the O2NC methods and their matched baselines on the
            # nonsmooth problems only
            certified = r.problem == "l1-regression" and r.method in (
                "klt:first-order",
                MATCHED + "klt:first-order",
            )
            assert (
                (r.certificate >= 0 and r.start_certificate > 0)
                if certified
                else math.isnan(r.certificate)
            ), r
    summary = assert_written(
        tiny, tmp_path, "dpnc reproduce utility (test)", {"fig_excess_vs_n.png"}
    )
    for text in (
        "dpzero: within 1.5× of the hand-set baselines",
        "dpzero: within 1.5× of the privately tuned",
        "klt:first-order: within 1.5× of its compute-matched DP-SGD",
        "klt:first-order: its Goldstein certificate",
        "dpzero: closes at least 50% of the start's gap",
        "spends at most the target ε",
        "Declared before the run",
        "| problem | ε | n | method |",
        "Runs that did not run",
    ):
        assert text in summary
    assert (
        "best dpnc method" not in summary and "lowest excess risk" not in summary
    )  # no best-of after the fact
    assert tiny.claims[-1].holds is True  # privacy
    assert list(tiny.declared) == EXPERIMENT.declare(TINY) and len(tiny.declared) == len(
        tiny.claims
    )


def test_command_is_registered(tmp_path):
    result = CliRunner().invoke(app, ["reproduce", "utility", "--help"])
    assert (
        result.exit_code == 0 and "--klt-mp-steps" in result.output and "--quick" in result.output
    )


@pytest.mark.slow
def test_supersede_keeps_the_replaced_results_verdicts(tiny, tmp_path):
    protocol.write(tiny, tmp_path, "dpnc reproduce utility (test)")
    old = {
        "claims": [
            {"statement": report.PRIVACY, "holds": True, "evidence": "old privacy"},
            {
                "statement": "l1, ε = 1: the best dpnc method (klt-fo) is within 1.5× of the best baseline",
                "holds": False,
                "evidence": "2.97×",
            },
        ],
        "rejudged": [{"date": "2026-11-25", "rule": "earlier", "changes": [], "previous": []}],
        "command": "old command",
        "seconds": 60.0,
    }
    protocol.supersede(
        EXPERIMENT, tmp_path, old, "re-run", date="2026-11-26", notes=("grid trimmed",)
    )
    again = protocol.read(EXPERIMENT, tmp_path / "result.json")
    assert [r["rule"] for r in again.rejudged] == ["earlier", "re-run"]
    assert json.dumps([c.to_json() for c in again.claims]) == json.dumps(
        [c.to_json() for c in tiny.claims]
    )  # NaN
    changes = {c["statement"]: c for c in again.rejudged[-1]["changes"]}
    assert changes[report.PRIVACY]["new"] == "yes" and changes[report.PRIVACY]["old"] == "yes"
    best = changes["l1, ε = 1: the best dpnc method (klt-fo) is within 1.5× of the best baseline"]
    assert best["old"] == "**no**" and best["new"] == "removed" and best["old_evidence"] == "2.97×"
    summary = (tmp_path / "summary.md").read_text()
    assert (
        "grid trimmed" in summary
        and "2.97×" in summary
        and again.rejudged[-1]["previous_command"] == "old command"
    )
