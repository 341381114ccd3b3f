"""Real SST-2 rows written as a user's own CSV file (columns review, sentiment), for the tests that
run dpnc on a user's file rather than on a task folder; and the docs' small own-data example."""

from __future__ import annotations

import csv
from pathlib import Path

from dpnc.lm import load_task
from tests.shared_data import DATA

LABELS = ("negative", "positive")
COLUMNS = ("review", "sentiment")


def balanced(ds, count: int) -> list[int]:
    """``count`` rows of ``ds``, half of each class, the two classes alternating (the LM-BFF files
    are sorted by class)."""
    by_class = [[i for i in range(len(ds)) if int(ds.labels[i]) == c][: count // 2] for c in (0, 1)]
    return [i for pair in zip(*by_class) for i in pair]


def sst2_rows(split: str, count: int, names=LABELS) -> list[tuple[str, str]]:
    """``count`` rows of an SST-2 split as (text, label name), balanced (:func:`balanced`)."""
    ds = load_task("SST-2", DATA, split)
    return [(ds.texts[i], names[int(ds.labels[i])]) for i in balanced(ds, count)]


def write_csv(path: Path, rows) -> Path:
    """``rows`` under a (review, sentiment) header, in a folder made if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([COLUMNS, *rows])
    return path


def reviews(folder: Path) -> tuple[Path, Path]:
    """The docs' own-data example files: 80 training rows, 20 test rows."""
    rows = [
        ("a wonderful film", "positive"),
        ("I hated it", "negative"),
        ("great acting", "positive"),
        ("a boring mess", "negative"),
    ] * 25
    train, test = folder / "reviews.csv", folder / "reviews_test.csv"
    return write_csv(train, rows[:80]), write_csv(test, rows[80:])
