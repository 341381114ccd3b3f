"""dpnc audit, the command: its JSON on stdout and in --out, and bad input refused as a usage error
before any run starts."""

import json

import pytest
from typer.testing import CliRunner

from dpnc.cli import app

runner = CliRunner(env={"COLUMNS": "250"})


def test_command_prints_json(tmp_path):
    out = tmp_path / "audit.json"
    result = runner.invoke(
        app,
        [
            "audit",
            "dpzero",
            "--runs",
            "200",
            "--json",
            "--no-progress",
            "--broken",
            "sigma",
            "--sigma-factor",
            "10",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["mechanism"] == "dpzero" and data["broken"] == "sigma" and data["violation"]
    assert json.loads(out.read_text()) == data


@pytest.mark.parametrize(
    "args, option",
    [
        (["magic"], "MECHANISM"),
        (["dpzero", "--runs", "0"], "--runs"),
        (["dpzero", "--broken", "magic"], "--broken"),
        (["dpzero", "--broken", "public-batches"], "--broken"),
        (["dpzero", "--sigma-factor", "0"], "--sigma-factor"),
        (["dpzero", "--epsilon", "0"], "--epsilon"),
        (["dpzero", "--epsilon", "nan"], "--epsilon"),
        (["dpzero", "--delta", "1"], "--delta"),
        (["dpzero", "--confidence", "1.5"], "--confidence"),
    ],
)
def test_command_bad_input_is_a_usage_error(args, option, monkeypatch):
    import dpnc.audit.core

    def started(*a, **k):
        raise AssertionError("the audit started before the input was validated")

    monkeypatch.setattr(dpnc.audit.core, "run_audit", started)
    result = runner.invoke(app, ["audit", *args, "--no-progress"])
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    assert option in result.output
