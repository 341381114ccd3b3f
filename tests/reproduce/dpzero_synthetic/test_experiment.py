"""dpzero-synthetic as an experiment: a tiny run from the command line writes every output (rows,
result, summary, privacy table, figures) and reads back as it was."""

import csv
import json

import pytest
from matplotlib.image import imread
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc_reproduce import protocol
from dpnc_reproduce.dpzero_synthetic import report
from dpnc_reproduce.dpzero_synthetic import run as exp
from dpnc_reproduce.dpzero_synthetic.experiment import EXPERIMENT
from tests.reproduce.dpzero_synthetic.tiny import TINY

FIGURES = ("fig1_test_grad_norm.png", "fig2_train_grad_norm.png", "fig3_loss.png")


def check_outputs(result, out):
    """Every output of a tiny run, against the result it was written from."""
    rows = result.rows
    assert len(rows) == 3 * 2 * 3 * 2 * 3 * 2  # hessians·dims·methods·T·stepsizes·clips
    # task order (Hessian, d, method, T), each task's (step size × C) grid in grid order
    assert [(r.hessian, r.d, r.method, r.T, r.stepsize, r.C) for r in rows] == [
        (h, d, m, T, s, c)
        for h in exp.HESSIANS
        for d in TINY.dims
        for m in exp.METHODS
        for T in TINY.steps
        for s in TINY.stepsizes
        for c in TINY.clips
    ]
    for r in rows:
        # The paper's σ certifies exactly ε = 2 by advanced composition; exact accounting says less.
        assert r.epsilon_paper == pytest.approx(2.0, rel=1e-9)
        assert r.epsilon_pld <= r.epsilon_rdp <= 2.0 and r.private
    privacy = report.privacy_rows(rows)
    assert [p["T"] for p in privacy] == list(TINY.steps)
    assert {"rows.csv", "privacy.csv", *FIGURES, "result.json", "summary.md"} <= {
        p.name for p in out.iterdir()
    }
    for name, records in (
        ("rows.csv", [protocol.csv_record(r) for r in rows]),
        ("privacy.csv", privacy),
    ):
        with (out / name).open() as f:  # every row, every column, as the run made it
            assert list(csv.DictReader(f)) == [
                {k: "" if v is None else str(v) for k, v in r.items()} for r in records
            ]
    with (out / "rows.csv").open() as f:  # the privacy of a T is in privacy.csv, once
        assert "epsilon_rdp" not in next(csv.reader(f))
    # the whole result, compared as JSON text (NaN-safe), and read back
    data = json.loads((out / "result.json").read_text())
    assert json.dumps({k: v for k, v in data.items() if k != "command"}) == json.dumps(
        result.to_json()
    )
    assert protocol.read(EXPERIMENT, out / "result.json").rows == rows
    for name, panel_rows in zip(FIGURES, (1, 1, 2)):
        # one panel per effective rank (3) across, one per metric down: 4.2 × 3.4 inches each at 120
        # dpi
        assert imread(out / name).shape[:2] == (round(3.4 * panel_rows * 120), round(4.2 * 3 * 120))
    summary = (out / "summary.md").read_text()
    assert "DPGD-0th is always worst" in summary and "| T | σ/Δ |" in summary
    assert "every run is (ε, δ) = (2, 1e-06)-DP" in summary
    assert [c.holds for c in result.claims][-1] is True  # the privacy claim


def test_tiny_cli_run_writes_every_output(tmp_path):
    """The command runs protocol.run_experiment and protocol.write (in two worker processes): one
    tiny run checks both, and the files are exactly these."""
    args = [
        "reproduce",
        "dpzero-synthetic",
        "--dims",
        "10,40",
        "--steps",
        "10,40",
        "--stepsizes",
        "0.01,0.1,1",
        "--clips",
        "1,10",
        "--n",
        "500",
        "--workers",
        "2",
        "--out",
        str(tmp_path),
    ]
    run = CliRunner(env={"COLUMNS": "250"}).invoke(app, args)
    assert run.exit_code == 0, run.output
    assert {p.name for p in tmp_path.iterdir()} == {
        "rows.csv",
        "privacy.csv",
        *FIGURES,
        "result.json",
        "summary.md",
    }
    result = protocol.read(EXPERIMENT, tmp_path / "result.json")
    assert result.config == TINY and result.workers == 2
    assert (
        json.loads((tmp_path / "result.json").read_text())["command"].startswith("dpnc ")
        and "# DPZero synthetic experiment (Figures 1–3)" in run.output
    )
    check_outputs(result, tmp_path)
