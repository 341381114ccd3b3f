"""A binary sentiment CSV the project has never seen, built from the original SST-5 files.

An acceptance check for ``dpnc finetune --train-file ... --test-file ...``: a file with the user's
own column names (``review``, ``sentiment``) and string labels (``negative``/``positive``), in the
CSV quoting a spreadsheet writes, unlike any LM-BFF folder the code was built on. SST-5 classes 0, 1
become ``negative``, 3, 4 ``positive``; 2 (neutral) is dropped, which is how SST-2 was made from SST
(its test set is the same 1821 sentences). PTB bracket tokens (``-lrb-``, ``-rrb-``) become ``(``
and ``)``, as in the LM-BFF files.

Lives with the tests, not in ``dpnc``: the library never knows where the project's data lies. Also a
script:

    python -m tests.lm.sentiment_csv ../shared/data/sst-5/original /tmp/sentiment --train-rows 1000 --seed 0
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

SST5_TO_SENTIMENT = {
    "0": "negative",
    "1": "negative",
    "3": "positive",
    "4": "positive",
}  # "2" (neutral) dropped
COLUMNS = ("review", "sentiment")


def read_sst5_sentiment(path: str | Path) -> list[tuple[str, str]]:
    """``(review, sentiment)`` rows of an SST-5 original TSV (no header, label first), neutral rows
    dropped."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        label, text = line.split("\t", 1)
        if label in SST5_TO_SENTIMENT:
            text = text.strip().replace("-lrb-", "(").replace("-rrb-", ")")
            rows.append((text, SST5_TO_SENTIMENT[label]))
    return rows


def write_sentiment_csv(
    sst5_original_dir: str | Path, out_dir: str | Path, *, train_rows: int = 1000, seed: int = 0
) -> tuple[Path, Path]:
    """Write ``sentiment_train.csv`` (a seeded class-balanced sample) and ``sentiment_test.csv``
    (every binary row).

    Args:
        sst5_original_dir: the folder with SST-5's ``train.tsv`` and ``test.tsv``
            (``../shared/data/sst-5/original``).
        out_dir: where to write the two files (created if missing).
        train_rows: rows of the training file, half per class; an even number ≥ 2, at most twice the
            smaller class.
        seed: the sample's seed (the same seed writes the same bytes).

    Returns:
        ``(train_path, test_path)``.
    """
    src = Path(sst5_original_dir)
    train = read_sst5_sentiment(src / "train.tsv")
    by_class = {s: [r for r in train if r[1] == s] for s in ("negative", "positive")}
    smallest = min(len(rows) for rows in by_class.values())
    if (
        isinstance(train_rows, bool)
        or not isinstance(train_rows, int)
        or train_rows < 2
        or train_rows % 2
        or train_rows > 2 * smallest
    ):
        raise ValueError(
            f"train_rows must be an even int in [2, {2 * smallest}] (half per class); got {train_rows!r}"
        )
    rng = random.Random(seed)
    sample = [r for rows in by_class.values() for r in rng.sample(rows, train_rows // 2)]
    rng.shuffle(sample)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = out / "sentiment_train.csv", out / "sentiment_test.csv"
    for path, rows in zip(paths, (sample, read_sst5_sentiment(src / "test.tsv"))):
        with path.open("w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
            writer.writerow(COLUMNS)
            writer.writerows(rows)
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sst5_original_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--train-rows", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for path in write_sentiment_csv(
        args.sst5_original_dir, args.out_dir, train_rows=args.train_rows, seed=args.seed
    ):
        print(path)


if __name__ == "__main__":
    main()
