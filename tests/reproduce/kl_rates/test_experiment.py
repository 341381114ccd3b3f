"""kl-rates as an experiment: a tiny run writes every output and reads back as it was, and the
command line runs a tiny grid."""

import csv
import dataclasses
import json

from typer.testing import CliRunner

from dpnc.cli import app
from dpnc_reproduce import protocol
from dpnc_reproduce.kl_rates import report
from dpnc_reproduce.kl_rates.experiment import EXPERIMENT
from tests.reproduce.kl_rates.rows import TINY


def test_outputs_are_written(tiny, tmp_path):
    paths = protocol.write(tiny, tmp_path, "dpnc reproduce kl-rates (test)")
    assert {p.name for p in paths} == {
        "rows.csv",
        "slopes.csv",
        "fig_excess.png",
        "fig_grad_norm.png",
        "result.json",
        "summary.md",
    }
    slopes = report.slopes(tiny.rows)
    for name, rows in (
        ("rows.csv", [dataclasses.asdict(r) for r in tiny.rows]),
        ("slopes.csv", slopes),
    ):
        with (tmp_path / name).open() as f:  # every row, every column, as the run made it
            assert list(csv.DictReader(f)) == [
                {k: "" if v is None else str(v) for k, v in r.items()} for r in rows
            ]
    # the whole result, compared as JSON text (NaN-safe), and read back into typed rows
    saved = json.loads((tmp_path / "result.json").read_text())
    assert json.dumps(saved) == json.dumps(
        {**tiny.to_json(), "command": "dpnc reproduce kl-rates (test)"}
    )
    again = protocol.read(EXPERIMENT, tmp_path / "result.json")
    assert again.rows == tiny.rows and again.config == TINY
    assert json.dumps([c.to_json() for c in again.claims]) == json.dumps(
        [c.to_json() for c in tiny.claims]
    )  # NaN
    summary = (tmp_path / "summary.md").read_text()
    for text in (
        "dpnc reproduce kl-rates (test)",
        "## Claims",
        "Fitted log-log slopes",
        "predicted",
        "Gradient norm of the output",
        "Medians over seeds",
        "every run is private",
        "constants and log factors dropped",
        "≤ Φfloor in every run (Theorem 1, w.p. ≥ 1 − β each) | yes",
        "`rows.csv`",
        f"{len(tiny.rows)} runs, 1 at a time",
    ):
        assert text in summary, text
    assert "results.csv" not in summary


def test_cli_runs_a_tiny_grid(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "reproduce",
            "kl-rates",
            "--algorithms",
            "kl-spider,proximal-point",
            "--objectives",
            "quadratic",
            "--dims",
            "1",
            "--nsrs",
            "1e4,1e5",
            "--prox-samples",
            "50,100",
            "--max-inner-iters",
            "10",
            "--inner-check-n",
            "0",
            "--seeds",
            "1",
            "--reproducible",
            "--seed",
            "7",
            "--workers",
            "1",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Fitted log-log slopes" in result.output
    assert (
        tmp_path / "summary.md"
    ).read_text() in result.output  # the summary printed is the one written
    assert "NOT PRIVATE" in (tmp_path / "summary.md").read_text()
    saved = json.loads((tmp_path / "result.json").read_text())
    cfg = saved["config"]
    assert (cfg["algorithms"], cfg["objectives"], cfg["dims"], cfg["nsrs"]) == (
        ["kl-spider", "proximal-point"],
        ["quadratic"],
        [1],
        [1e4, 1e5],
    )
    assert (cfg["prox_samples"], cfg["max_inner_iters"], cfg["seeds"]) == ([50, 100], 10, 1)
    assert (cfg["reproducible"], cfg["seed"]) == (True, 7)
    assert sorted(
        (r["algorithm"], r["objective"], r["d"], r["n"]) for r in saved["rows"] if r["sweep"] == "n"
    ) == [
        ("kl-spider", "quadratic", 1, 10**4),
        ("kl-spider", "quadratic", 1, 10**5),
        ("proximal-point", "power-3", 1, 50),
        ("proximal-point", "power-3", 1, 100),
    ]  # one seed per setting
    with (tmp_path / "rows.csv").open() as f:  # the rows file holds the same runs
        records = list(csv.DictReader(f))
    assert [(r["algorithm"], int(r["n"]), float(r["excess"])) for r in records] == [
        (r["algorithm"], r["n"], r["excess"]) for r in saved["rows"]
    ]
    assert all(r["private"] == "False" for r in records)
    assert {p.name for p in tmp_path.iterdir()} == {
        "rows.csv",
        "slopes.csv",
        "result.json",
        "summary.md",
        "fig_excess.png",
    }  # no adaptive GD: no gradient figure
