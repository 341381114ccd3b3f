"""The LM-BFF ``k-shot-1k-test`` task folders that MeZO and DPZero fine-tune on: ``load_task``.

The tasks (labels, label words, prompt templates) are :mod:`dpnc.lm.data`'s; a split read as a
private run's training file goes through the domain rule of :mod:`dpnc.lm.files` (``lenient``). Rows
are read with :mod:`dpnc.lm.rows`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch

from dpnc.lm.data import Task, TextDataset, get_task
from dpnc.lm.files import read_private
from dpnc.lm.rows import read_field, read_rows

__all__ = ["load_task"]


@dataclass(frozen=True)
class _Layout:
    folder: str
    ext: str
    text: str | int
    label: str | int
    text_pair: str | int | None = None
    splits: tuple[tuple[str, str], ...] = (("train", "train"), ("dev", "dev"), ("test", "test"))


_LAYOUTS = {
    "SST-2": _Layout("SST-2", "tsv", "sentence", -1),
    "SST-5": _Layout("sst-5", "csv", 1, 0),
    "TREC": _Layout("trec", "csv", 1, 0),
    "RTE": _Layout("RTE", "tsv", "sentence1", -1, "sentence2"),
    "SNLI": _Layout("SNLI", "tsv", "sentence1", -1, "sentence2"),
    "MNLI": _Layout(
        "MNLI",
        "tsv",
        "sentence1",
        -1,
        "sentence2",
        splits=(
            ("train", "train"),
            ("dev", "dev_matched"),
            ("dev_matched", "dev_matched"),
            ("test", "test_matched"),
            ("test_matched", "test_matched"),
            ("test_mismatched", "test_mismatched"),
        ),
    ),
}


def load_task(
    name: str,
    data_dir: str | Path,
    split: str = "train",
    *,
    seed: int = 42,
    k: int = 512,
    lenient: bool = False,
) -> TextDataset:
    """One split of an LM-BFF ``k-shot-1k-test`` folder:
    ``<data_dir>/<TASK>/k-shot-1k-test/<k>-<seed>/<split>``.

    The layout MeZO and DPZero read (``--data_dir data/k-shot-1k-test/$TASK/$K-$SEED``): ``train``
    is K examples per class (fewer where a class has fewer: TREC's Expression has 86), ``dev``
    another K per class from the original train set, ``test`` up to 1000 examples of the original
    evaluation set.

    Args:
        name: a task of ``TASKS`` (case-insensitive).
        data_dir: the folder holding the task folders (``SST-2``, ``sst-5``, ``trec``, ``RTE``,
            ``SNLI``, ``MNLI``).
        split: ``"train"``, ``"dev"`` or ``"test"``; MNLI also ``"test_mismatched"`` (``"test"`` =
            test_matched, ``"dev"`` = dev_matched, which is the K-shot dev sample from train).
        seed: the data seed of the folder (LM-BFF: 13, 21, 42, 87, 100).
        k: examples per class.
        lenient: read the split as a private run's training file (:mod:`dpnc.lm.files`, the domain
            rule): a row that cannot be read or whose label is not one of the task's is dropped and
            counted (``dataset.dropped``), never refused, and no message shows it.

    Returns:
        The dataset; ``len()`` is the number of rows kept (``len() + dropped``: the file's records).

    Raises:
        ValueError: an unknown task or split (the message lists the known ones).
        FileNotFoundError: a missing folder or file (the message lists the tasks, seeds or files
            that exist).
    """
    task = get_task(name)
    layout = _LAYOUTS[task.name]
    splits = dict(layout.splits)
    if split not in splits:
        raise ValueError(f"split must be one of {list(splits)} for {task.name}; got {split!r}")
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"data_dir {str(root)!r} is not a folder")
    task_dir = root / layout.folder / "k-shot-1k-test"
    if not task_dir.is_dir():
        present = sorted(p.name for p in root.iterdir() if (p / "k-shot-1k-test").is_dir())
        raise FileNotFoundError(
            f"no {layout.folder}/k-shot-1k-test folder for {task.name} in {str(root)!r}; task folders there: {present}"
        )
    folder = task_dir / f"{k}-{seed}"
    if not folder.is_dir():
        present = sorted((p.name for p in task_dir.iterdir() if p.is_dir()), key=_folder_order)
        seeds = [p.split("-", 1)[1] for p in present if p.startswith(f"{k}-")]
        raise FileNotFoundError(
            f"no folder {k}-{seed} for {task.name} in {str(task_dir)!r}; seeds available for k={k}: {seeds} "
            f"(folders: {present})"
        )
    path = folder / f"{splits[split]}.{layout.ext}"
    if not path.is_file():
        files = sorted(p.name for p in folder.iterdir())
        raise FileNotFoundError(
            f"no {split!r} file {path.name} for {task.name} in {str(folder)!r}; files there: {files}"
        )
    header = layout.ext == "tsv"
    fmt = "tsv" if header else "csv"
    origin = {
        "format": fmt,
        "text_column": layout.text,
        "text_pair_column": layout.text_pair,
        "label_column": layout.label,
        "task": task.name,
        "split": split,
        "seed": seed,
        "k": k,
    }
    if lenient:
        private = read_private(
            path, task, layout.text, layout.text_pair, layout.label, header=header
        )
        return dataclasses.replace(private, source=str(path), origin=origin)
    rows, columns, _ = read_rows(path, fmt, None, header)
    return _build(task, path, rows, columns, layout.text, layout.text_pair, layout.label, origin)


def _folder_order(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in name.split("-"))


def _build(
    task: Task, path: Path, rows, columns, text_col, pair_col, label_col, origin: dict
) -> TextDataset:
    index = {name: i for i, name in enumerate(task.label_names)}
    texts, labels, unknown = [], [], {}
    for line, row in rows:
        first = read_field(row, columns, text_col, path, line)
        texts.append(
            (first, read_field(row, columns, pair_col, path, line))
            if pair_col is not None
            else first
        )
        label = read_field(row, columns, label_col, path, line)
        if label in index:
            labels.append(index[label])
        else:
            unknown.setdefault(label, line)
    if unknown:
        shown = ", ".join(
            f"{lab!r} (first at line {line})" for lab, line in list(unknown.items())[:10]
        )
        raise ValueError(
            f"labels of {path.name} must be among {list(task.label_names)}; found {shown}"
        )
    return TextDataset(task, texts, torch.tensor(labels, dtype=torch.long), str(path), origin)
