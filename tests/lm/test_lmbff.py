"""Reading the LM-BFF k-shot task folders (dpnc.lm.lmbff.load_task) on the real files: the data
README's integrity checks (rows and classes per split and seed), split aliases, each layout's
columns, errors that name what exists, and a private read's domain rule."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch

from dpnc.lm.data import TASKS
from dpnc.lm.files import load_file
from dpnc.lm.lmbff import load_task
from tests.shared_data import DATA, needs_data

SEEDS = (13, 21, 42, 87, 100)

# (task, split) -> class counts in class order; the README's integrity checks (TREC dev and the MNLI
# test splits' per-class counts are not in the README: measured from the files, and they sum to the
# README's totals).
COUNTS = {
    ("SST-2", "train"): [512, 512],
    ("SST-2", "dev"): [512, 512],
    ("SST-2", "test"): [428, 444],
    ("SST-5", "train"): [512] * 5,
    ("SST-5", "dev"): [512] * 5,
    ("SST-5", "test"): [133, 276, 192, 219, 180],
    ("TREC", "train"): [512, 512, 86, 512, 512, 512],
    ("TREC", "dev"): [512, 512, 0, 512, 323, 384],
    ("TREC", "test"): [138, 94, 9, 65, 81, 113],
    ("RTE", "train"): [512, 512],
    ("RTE", "dev"): [512, 512],
    ("RTE", "test"): [146, 131],
    ("SNLI", "train"): [512, 512, 512],
    ("SNLI", "dev"): [512, 512, 512],
    ("SNLI", "test"): [347, 312, 341],  # entailment, neutral, contradiction
    ("MNLI", "train"): [512, 512, 512],
    ("MNLI", "dev"): [512, 512, 512],
    ("MNLI", "test"): [333, 318, 349],
    ("MNLI", "test_mismatched"): [350, 316, 334],
}
TOTALS = {
    ("SST-2", "train"): 1024,
    ("SST-2", "dev"): 1024,
    ("SST-2", "test"): 872,
    ("SST-5", "train"): 2560,
    ("SST-5", "dev"): 2560,
    ("SST-5", "test"): 1000,
    ("TREC", "train"): 2646,
    ("TREC", "dev"): 2243,
    ("TREC", "test"): 500,
    ("RTE", "train"): 1024,
    ("RTE", "dev"): 1024,
    ("RTE", "test"): 277,
    ("SNLI", "train"): 1536,
    ("SNLI", "dev"): 1536,
    ("SNLI", "test"): 1000,
    ("MNLI", "train"): 1536,
    ("MNLI", "dev"): 1536,
    ("MNLI", "test"): 1000,
    ("MNLI", "test_mismatched"): 1000,
}
CASES = [
    (task, split, seed)
    for (task, split) in COUNTS
    for seed in (SEEDS if task in ("SST-2", "SST-5", "TREC", "RTE") else (42,))
]


@needs_data
@pytest.mark.parametrize(("task", "split", "seed"), CASES)
def test_row_counts_and_label_distribution(task, split, seed):
    ds = load_task(task, DATA, split, seed=seed)
    counts = COUNTS[(task, split)]
    assert len(ds) == TOTALS[(task, split)] == sum(counts)
    assert ds.class_counts() == dict(zip(TASKS[task].label_names, counts))
    assert ds.labels.dtype == torch.long and ds.labels.shape == (len(ds),)
    assert ds.task is TASKS[task]
    assert Path(ds.source).parent.name == f"512-{seed}"


@needs_data
def test_trec_true_n_is_not_k_times_classes():
    """Spec §7.3: the accountant must use n = 2646 rows, not K·classes = 3072."""
    train = load_task("trec", DATA, "train")
    assert len(train) == 2646 != 512 * TASKS["TREC"].num_classes
    assert train.class_counts()["2"] == 86
    assert load_task("trec", DATA, "dev").class_counts()["2"] == 0


@needs_data
def test_mnli_split_aliases_and_files():
    assert Path(load_task("MNLI", DATA, "dev").source).name == "dev_matched.tsv"
    assert Path(load_task("MNLI", DATA, "test").source).name == "test_matched.tsv"
    assert Path(load_task("MNLI", DATA, "test_matched").source).name == "test_matched.tsv"
    assert Path(load_task("MNLI", DATA, "test_mismatched").source).name == "test_mismatched.tsv"


@needs_data
@pytest.mark.parametrize("task", ["SST-2", "SST-5", "TREC", "RTE"])
def test_test_file_shared_across_seeds_and_train_differs(task):
    test0 = load_task(task, DATA, "test", seed=SEEDS[0])
    for seed in SEEDS[1:]:
        test = load_task(task, DATA, "test", seed=seed)
        assert test.texts == test0.texts and torch.equal(test.labels, test0.labels)
    assert (
        load_task(task, DATA, "train", seed=13).texts
        != load_task(task, DATA, "train", seed=42).texts
    )


@needs_data
@pytest.mark.parametrize("seed", SEEDS)
def test_train_dev_disjoint(seed):
    """SST-2 train/dev share no sentence (README). SST-5/TREC share a few sentences, but only ones
    the original train set holds several times: no text is used more often across train + dev than
    it occurs in the source."""
    sst2 = [load_task("SST-2", DATA, split, seed=seed).texts for split in ("train", "dev")]
    assert not set(sst2[0]) & set(sst2[1])
    for task, path in (("SST-5", "sst-5/original/train.tsv"), ("TREC", "trec/original/train.csv")):
        source = load_file(DATA / path, text_column=1, label_column=0).texts
        source = Counter(t.replace("-lrb-", "(").replace("-rrb-", ")") for t in source)
        used = Counter(
            load_task(task, DATA, "train", seed=seed).texts
            + load_task(task, DATA, "dev", seed=seed).texts
        )
        assert all(source[t] >= c for t, c in used.items())


@needs_data
def test_texts_are_stripped_and_pairs_are_tuples():
    sst2 = load_task("SST-2", DATA, "train")
    raw = (
        (DATA / "SST-2/k-shot-1k-test/512-42/train.tsv").read_text(encoding="utf-8").split("\n")[1]
    )
    assert raw.split("\t")[0].endswith(
        " "
    )  # the file has the trailing space the README warns about
    assert sst2.texts[0] == raw.split("\t")[0].rstrip()
    assert all(t == t.strip() and isinstance(t, str) for t in sst2.texts)
    for name in ("RTE", "SNLI", "MNLI"):
        ds = load_task(name, DATA, "train")
        assert all(
            isinstance(t, tuple) and len(t) == 2 and t == (t[0].strip(), t[1].strip())
            for t in ds.texts
        )
    mnli = load_task("MNLI", DATA, "train")
    assert mnli.texts[0] == ("That's all right.", "That's fine.")


@needs_data
def test_snli_variable_columns_read_by_header_position_and_last_field():
    """SNLI rows have 11, 14 or 15 fields; sentence1/2 are header columns 8/9 and the label is the
    last field."""
    path = DATA / "SNLI/k-shot-1k-test/512-42/dev.tsv"
    lines = [line.split("\t") for line in path.read_text(encoding="utf-8").split("\n")[1:] if line]
    assert {len(r) for r in lines} == {11, 14, 15}
    ds = load_task("SNLI", DATA, "dev")
    for row, text, label in zip(lines, ds.texts, ds.labels.tolist()):
        assert text == (row[7].strip(), row[8].strip())
        assert ds.task.label_names[label] == row[-1]
    same = load_file(
        path,
        text_column="sentence1",
        text_pair_column="sentence2",
        label_column="gold_label",
        label_names=TASKS["SNLI"].label_names,
    )
    assert same.texts == ds.texts and torch.equal(same.labels, ds.labels)


@needs_data
def test_sst5_csv_quoting():
    ds = load_task("SST-5", DATA, "train")
    assert ds.texts[0] == (
        "more of the same from taiwanese auteur tsai ming-liang , which is good news to anyone who 's fallen under "
        "the sweet , melancholy spell of this unique director 's previous films ."
    )
    assert int(ds.labels[0]) == 3
    assert not any(t.startswith('"') for t in ds.texts)


@needs_data
def test_load_task_errors_name_what_exists(tmp_path):
    with pytest.raises(ValueError, match="task must be one of"):
        load_task("QQP", DATA)
    with pytest.raises(
        ValueError, match=r"split must be one of \['train', 'dev', 'test'\] for SST-2; got 'valid'"
    ):
        load_task("SST-2", DATA, "valid")
    with pytest.raises(ValueError, match="'test_mismatched'"):
        load_task("MNLI", DATA, "validation")
    with pytest.raises(
        FileNotFoundError, match=r"seeds available for k=512: \['13', '21', '42', '87', '100'\]"
    ):
        load_task("SST-2", DATA, seed=7)
    with pytest.raises(FileNotFoundError, match=r"seeds available for k=512: \['42'\]"):
        load_task("SNLI", DATA, seed=13)
    with pytest.raises(FileNotFoundError, match=r"seeds available for k=16: \[\]"):
        load_task("RTE", DATA, k=16)
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        load_task("SST-2", tmp_path / "nowhere")
    (tmp_path / "SST-2" / "k-shot-1k-test" / "512-42").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"task folders there: \['SST-2'\]"):
        load_task("RTE", tmp_path)
    with pytest.raises(
        FileNotFoundError, match=r"no 'dev' file dev.tsv for SST-2 .*files there: \[\]"
    ):
        load_task("SST-2", tmp_path, "dev")


def test_a_private_read_of_a_task_split_drops_rows_outside_it(tmp_path):
    # Before: a private run read a built-in task's training split strictly, so one row with a label
    # outside the task stopped the run, and the message printed that row's label. lenient applies
    # the domain rule (dpnc.lm.files).
    folder = tmp_path / "SST-2" / "k-shot-1k-test" / "512-42"
    folder.mkdir(parents=True)
    (folder / "train.tsv").write_text(
        "sentence\tlabel\ngood\t1\nsecret diagnosis\tHIV-positive\n\nbad\t0\nlonely\n"
    )
    with pytest.raises(ValueError, match="HIV-positive"):
        load_task("SST-2", tmp_path, "train")  # a plain read still refuses, naming the label
    kept = load_task("SST-2", tmp_path, "train", lenient=True)
    # the blank line is a record too (replace-one counts records): 3 dropped, 2 kept
    assert (kept.texts, kept.labels.tolist(), kept.dropped) == (["good", "bad"], [1, 0], 3)


@needs_data
@pytest.mark.parametrize("task", list(TASKS))
def test_a_private_read_of_the_shipped_training_splits_keeps_every_row(task):
    # The domain rule (dpnc.lm.files.read_private) reads the LM-BFF training files as the plain read
    # does.
    plain, private = load_task(task, DATA, "train"), load_task(task, DATA, "train", lenient=True)
    assert (
        private.texts == plain.texts
        and torch.equal(private.labels, plain.labels)
        and private.dropped == 0
    )
    assert (private.source, private.origin) == (plain.source, plain.origin)
