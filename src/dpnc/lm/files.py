"""A user's own labelled text files: CSV, TSV or JSON lines, read into ``TextDataset``s for
fine-tuning.

``load_user_data`` is what ``dpnc finetune --train-file ... --test-file ...`` reads; a private
run's training file is read by a domain rule that drops rows instead of refusing them, since a
refusal would tell whether a row is in the data. The formats and rules: docs/finetuning.md."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path

import torch

from dpnc.lm.data import DEFAULT_PAIR_TEMPLATE, DEFAULT_TEMPLATE, Task, TextDataset
from dpnc.lm.paths import public_path
from dpnc.lm.rows import read_field, read_rows

__all__ = [
    "canonical_label",
    "describe_data",
    "load_file",
    "load_user_data",
    "parse_label_words",
    "parse_labels",
]

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_EXACT = (
    Decimal(10) ** 30
)  # integers below this are written out exactly; larger ones as floats ("1e+40")
_SHOWN = 10  # unknown labels listed in a message

Column = str | int


def canonical_label(value) -> str:
    """The label ``value`` as compared and stored: stripped text, with one spelling per number.

    Examples:
        >>> [canonical_label(v) for v in ("1", "1.0", " 1 ", 1, 1.0, "0.50", "-0", "positive ")]
        ['1', '1', '1', '1', '1', '0.5', '0', 'positive']
    """
    text = str(value).strip()
    if not _NUMBER.fullmatch(text):
        return text
    try:
        number = Decimal(text)
        if number == number.to_integral_value() and abs(number) < _EXACT:
            return str(int(number))
    except (
        ArithmeticError
    ):  # an exponent beyond Decimal's context (e.g. "0e-99999999999999999999"): kept as text
        return text
    as_float = float(number)
    if not math.isfinite(as_float):
        return text
    return (
        str(int(as_float)) if as_float.is_integer() and abs(as_float) < _EXACT else repr(as_float)
    )


def parse_label_words(label_words: str | Mapping | None) -> dict[str, str] | None:
    """``{label: word}`` from a mapping or the CLI string ``"negative=terrible,positive=great"``;
    None stays None.

    The order given is the class order. Labels are canonicalised like the files' labels (``"1.0"``
    is ``"1"``); words are stripped. A label or word cannot contain ``,`` in the string form, nor a
    label ``=``: pass a mapping.

    Raises:
        ValueError: another type, an item without ``=``, an empty label or word, a label given
            twice, or two classes with the same word (a prompt head could not tell them apart).
    """
    if label_words is None:
        return None
    if isinstance(label_words, str):
        items = []
        for item in label_words.split(","):
            label, sep, word = item.partition("=")
            if not sep:
                raise ValueError(
                    "label_words must be 'label=word' pairs separated by commas (e.g. 'negative=terrible,"
                    f"positive=great'); got the item {item!r} in {label_words!r}"
                )
            items.append((label, word))
    elif isinstance(label_words, Mapping):
        items = list(label_words.items())
    else:
        raise ValueError(
            f"label_words must be None, a mapping {{label: word}} or a string 'label=word,...'; got {label_words!r}"
        )
    if not items:
        raise ValueError(f"label_words must give at least one label=word pair; got {label_words!r}")
    words: dict[str, str] = {}
    for label, word in items:
        key, word = canonical_label(label), str(word).strip()
        if not key or not word:
            raise ValueError(
                f"label_words needs a label and a word in every pair; got {label!r}={word!r}"
            )
        if key in words:
            raise ValueError(
                f"label_words gives label {key!r} twice (labels are compared as numbers where they are)"
            )
        words[key] = word
    seen: dict[str, str] = {}
    for key, word in words.items():
        if word in seen:
            raise ValueError(
                f"label_words must be distinct; labels {seen[word]!r} and {key!r} both get {word!r}"
            )
        seen[word] = key
    return words


def parse_labels(labels: str | Sequence | None) -> tuple[str, ...] | None:
    """The declared class list from ``"negative,positive"`` or a sequence (canonicalised, in the
    order given).

    Raises:
        ValueError: fewer than 2 labels, an empty label, or a label given twice.
    """
    if labels is None:
        return None
    items = labels.split(",") if isinstance(labels, str) else list(labels)
    names = tuple(canonical_label(x) for x in items)
    if len(names) < 2 or not all(names) or len(set(names)) != len(names):
        raise ValueError(
            f"labels must be at least 2 distinct non-empty labels, comma-separated in class order "
            f"(e.g. 'negative,positive'); got {labels!r}"
        )
    return names


def load_user_data(
    train_file: str | Path,
    test_file: str | Path | None,
    *,
    text_column: Column,
    label_column: Column,
    text_pair_column: Column | None = None,
    label_words: str | Mapping | None = None,
    labels: str | Sequence | None = None,
    template: str | None = None,
    declared: bool = False,
    test_public: bool = False,
) -> tuple[TextDataset, TextDataset]:
    """A training file and a test file of one's own, read as one task.

    ``declared=False``: the training file's labels are the classes; the test file's labels must be
    among them (a test file may lack a class). ``declared=True`` (a private run): the classes are
    ``label_words``'s, else ``labels``, else the labels of a test file declared public
    (``test_public``; sorted); the training file is read by the domain rule of docs/finetuning.md
    (rows outside it dropped and counted in ``train.dropped``, never refused). Both files have the
    same columns and format rules; the test file is always read strictly.

    Args:
        train_file: the training rows (their number is not the accountant's n: that is declared).
        test_file: the evaluation rows, or None (a train-only run: the test set is empty).
        text_column: the sentence (pair tasks: the first sentence).
        label_column: the label.
        text_pair_column: the second sentence of a pair task, or None for single sentences.
        label_words: None (the words are the label names, classes in sorted order), a mapping
            ``{label: word}``, or the CLI string ``"negative=terrible,positive=great"``; the order
            given is the class order, and every label of the training file needs exactly one word.
        labels: the declared classes in class order (``"negative,positive"`` or a sequence); with
            ``label_words``, it must name the same labels.
        template: the prompt template (``dpnc.lm.data``); default ``"{sentence} It was
            {label_word}."``, or for pairs ``"{sentence1|drop_punct}? {label_word},
            {sentence2|lower_first}"`` (docs/papers.md, DPZero §4.2).

    Returns:
        ``(train, test)``, sharing one ``Task`` named after the training file.

    Raises:
        FileNotFoundError: a file that does not exist.
        ValueError: a refused row (docs/finetuning.md), a training set with fewer than 2 classes,
            label words that miss a training label or name a label it does not hold, a test label
            that is not a class (naming each with the first line it occurs on), or a bad template.
            With ``declared``, none of these depends on a training row: only the test file and the
            declared classes are checked; classes not declared, and no test file declared public to
            take them from.
    """
    words = parse_label_words(label_words)
    names = parse_labels(labels)
    if words is not None and names is not None and tuple(words) != names:
        raise ValueError(
            f"labels must name the classes of label_words, in the same order; got labels {list(names)} "
            f"and label_words for {list(words)}"
        )
    train_path = _file(train_file)
    test_path = None if test_file is None else _file(test_file)
    columns = (text_column, text_pair_column, label_column)
    pair = text_pair_column is not None
    if declared or names is not None:
        test_rows = None if test_path is None else _Rows.read(test_path, *columns)
        given = "label_words" if words is not None else "labels" if names is not None else None
        if given is None and (test_rows is None or not test_public):
            raise ValueError(
                "the classes of a private run must be declared (labels or label_words): never the training "
                "file's labels, nor those of a test file not declared public"
            )
        if words is None:
            classes = names if names is not None else tuple(_sorted_labels(set(test_rows.labels)))
            if len(classes) < 2:
                raise ValueError(
                    f"labels must be declared (label_words or labels) when the test file "
                    f"{test_path.name} holds fewer than 2 labels ({list(classes)})"
                )
            words = {name: name for name in classes}
        task = _task(train_path.name, tuple(words), tuple(words.values()), pair, template)
        return read_private(train_path, task, *columns), _test_set(test_rows, task, given)
    train_rows = _Rows.read(train_path, *columns)
    counts = Counter(train_rows.labels)
    if len(counts) < 2:
        only, n = next(iter(counts.items()))
        raise ValueError(
            f"the training set must hold at least 2 classes; {train_path.name} has only {only!r} ({n} rows)"
        )
    if words is None:
        names = _sorted_labels(counts)
        words = {name: name for name in names}
    else:
        missing = [lab for lab in _sorted_labels(counts) if lab not in words]
        if missing:
            raise ValueError(
                f"label_words must give a word for every label of {train_path.name}; missing: {missing} "
                f"(label_words name {list(words)})"
            )
        extra = [lab for lab in words if lab not in counts]
        if extra:
            raise ValueError(
                f"label_words name labels that {train_path.name} does not hold: {extra}; its labels: "
                f"{_sorted_labels(counts)}"
            )
    task = _task(train_path.name, tuple(words), tuple(words.values()), pair, template)
    test_rows = None if test_path is None else _Rows.read(test_path, *columns)
    return train_rows.dataset(task), _test_set(test_rows, task, train_path.name)


def _test_set(rows: _Rows | None, task: Task, classes_of: str | None) -> TextDataset:
    """The test rows as a dataset of ``task``; none (a train-only run): an empty one."""
    if rows is None:
        return TextDataset(task, [], torch.zeros(0, dtype=torch.long), "", {})
    return rows.dataset(task, classes_of=classes_of)


def load_file(
    path: str | Path,
    *,
    text_column: Column,
    text_pair_column: Column | None = None,
    label_column: Column,
    label_names: Sequence[str] | None = None,
    label_words: Sequence[str] | None = None,
    template: str | None = None,
    delimiter: str | None = None,
    header: bool | None = None,
) -> TextDataset:
    """One labelled text file of one's own, read by the rules of docs/finetuning.md.

    Args:
        path: the file (``.csv``, ``.tsv``, ``.jsonl``/``.json``; any other extension needs
            ``delimiter``: ``","`` reads as CSV, anything else as TSV).
        text_column: the sentence (pair tasks: the first sentence).
        text_pair_column: the second sentence of a pair task, or None for single sentences.
        label_column: the label.
        label_names: the labels, class id = index (canonicalised like the file's); default the
            file's labels, sorted (numerically if all are numbers).
        label_words: the label word per class; default the label names.
        template: the prompt template; default as in ``load_user_data``.
        delimiter: the field separator (overrides the extension's).
        header: whether the first row is a header; default: yes iff some column is given by name.
            Ignored for JSON lines.

    Returns:
        A ``TextDataset`` whose task is named after the file.

    Raises:
        FileNotFoundError: no such file.
        ValueError: an unknown format, an empty file, a missing column (the message lists the
            header), a refused row, fewer than 2 labels, or a label not among ``label_names`` (the
            message lists the unknown labels).
    """
    path = _file(path)
    rows = _Rows.read(
        path, text_column, text_pair_column, label_column, delimiter=delimiter, header=header
    )
    if label_names is None:
        label_names = _sorted_labels(set(rows.labels))
        if len(label_names) < 2:
            raise ValueError(
                f"{path.name} must hold at least 2 distinct labels in {label_column!r}; found only {label_names} "
                f"({len(rows.labels)} rows)"
            )
    names = tuple(canonical_label(x) for x in label_names)
    words = tuple(label_words) if label_words is not None else names
    return rows.dataset(_task(path.name, names, words, text_pair_column is not None, template))


def read_private(
    path: Path,
    task: Task,
    text_column: Column,
    text_pair_column: Column | None,
    label_column: Column,
    *,
    header: bool | None = None,
) -> TextDataset:
    """A private run's training file as a dataset of ``task`` (its classes declared), read by the
    domain rule of docs/finetuning.md: a row outside it is dropped and counted (``dropped``),
    never refused. The one reading of private training rows: a user's file (:func:`load_user_data`)
    and a built-in task's split (:func:`dpnc.lm.lmbff.load_task` with ``lenient``)."""
    rows = _Rows.read(
        path, text_column, text_pair_column, label_column, header=header, lenient=True
    )
    return rows.dataset(task, drop_unknown=True)


def describe_data(train: TextDataset, test: TextDataset) -> dict:
    """Which data a run used, as JSON-able data for its ``summary.json``.

    Files, format, the test split's rows and class counts, the classes with their label words, the
    template, and the columns read (from ``TextDataset.origin``; None where a dataset does not
    record them). Public values only: nothing is recorded of the training split but its file's name
    — its number of rows (which differs between neighbours under add/remove: the accountant's n is
    declared instead), its class counts and its dropped rows are un-noised statistics of the
    training data. The classes are public in a private run (declared, or the test file's:
    ``load_user_data(declared=True)``).

    Raises:
        ValueError: ``train`` and ``test`` of different tasks (their class ids would not mean the
            same).
    """
    if train.task != test.task:
        raise ValueError(
            f"train and test must share one task; got {train.task.name!r} and {test.task.name!r}"
        )
    task, origin = train.task, train.origin
    return {
        "train_file": public_path(train.source),
        "test_file": public_path(test.source) if test.source else None,
        "format": origin.get("format"),
        "test_rows": len(test),
        "test_class_counts": test.class_counts(),
        "label_names": list(task.label_names),
        "label_words": list(task.label_words),
        "template": task.template,
        "pair": task.pair,
        "text_column": origin.get("text_column"),
        "text_pair_column": origin.get("text_pair_column"),
        "label_column": origin.get("label_column"),
    }


# ---------------------------------------------------------------------------------------------------------------
# Reading


class _Rows:
    """A file's rows read and checked: texts, canonical labels and the line each row starts on."""

    def __init__(
        self, path: Path, texts: list, labels: list[str], lines: list[int], origin: dict
    ) -> None:
        self.path, self.texts, self.labels, self.lines, self.origin = (
            path,
            texts,
            labels,
            lines,
            origin,
        )

    dropped = 0  # rows left out by the domain rule (lenient reading only)

    @classmethod
    def read(
        cls,
        path: Path,
        text_column: Column,
        pair_column: Column | None,
        label_column: Column,
        *,
        delimiter: str | None = None,
        header: bool | None = None,
        lenient: bool = False,
    ) -> _Rows:
        """The file's rows; ``lenient`` (a private training file): drop each row outside the domain
        (docs/finetuning.md) instead of refusing it. The columns are checked against the header first
        either way."""
        given = [c for c in (text_column, pair_column, label_column) if c is not None]
        for c in given:
            if not isinstance(c, str | int) or isinstance(c, bool):
                raise ValueError(
                    f"columns must be header names (str) or field positions (int); got {c!r}"
                )
        fmt = _format(path, delimiter)
        if header is None:
            header = any(isinstance(c, str) for c in given)
        rows, columns, width = read_rows(path, fmt, delimiter, header, lenient=lenient)
        if lenient and fmt != "jsonl":  # the file's structure decides a refusal, never one row
            for c in given:
                if isinstance(c, str) and c not in columns:
                    raise ValueError(
                        f"column {c!r} is not in the header of {path.name}; columns: {list(columns)}"
                    )
        # The width every row is held to: the header's; without one, the first row's, except in a
        # private file, where no row may set the rule for the others (each row then only needs the
        # fields its columns name).
        first = rows[0][1] if rows and not lenient and width is None else None
        first_width = len(first) if isinstance(first, list) else None
        texts, labels, lines, dropped = [], [], [], 0
        for line, row in rows:
            try:
                if isinstance(row, list) and (width is not None or first_width is not None):
                    check_width(row, width, first_width, fmt, path, line)
                text = _nonempty(row, columns, text_column, path, line, "text column")
                if pair_column is not None:
                    text = (
                        text,
                        _nonempty(row, columns, pair_column, path, line, "text pair column"),
                    )
                label = canonical_label(
                    _nonempty(row, columns, label_column, path, line, "label column")
                )
            except ValueError:
                if not lenient:
                    raise
                dropped += 1
                continue
            texts.append(text)
            labels.append(label)
            lines.append(line)
        origin = {
            "format": fmt,
            "text_column": text_column,
            "text_pair_column": pair_column,
            "label_column": label_column,
        }
        read = cls(path, texts, labels, lines, origin)
        read.dropped = dropped
        return read

    def dataset(
        self, task: Task, classes_of: str | None = None, *, drop_unknown: bool = False
    ) -> TextDataset:
        """The rows as a dataset of ``task``; every label must be a class (``classes_of``: where
        they come from), or with ``drop_unknown`` (the domain rule) a row whose label is not a class
        is dropped and counted."""
        index = {name: i for i, name in enumerate(task.label_names)}
        if drop_unknown:
            keep = [i for i, label in enumerate(self.labels) if label in index]
            labels = torch.tensor([index[self.labels[i]] for i in keep], dtype=torch.long)
            unknown = Counter(
                label for label in self.labels if label not in index
            )  # for the owner's checks only
            return TextDataset(
                task,
                [self.texts[i] for i in keep],
                labels,
                str(self.path),
                dict(self.origin),
                dropped=self.dropped + len(self.labels) - len(keep),
                dropped_labels=dict(unknown),
            )
        unknown: dict[str, int] = {}
        for label, line in zip(self.labels, self.lines):
            if label not in index:
                unknown.setdefault(label, line)
        if unknown:
            shown = ", ".join(
                f"{lab!r} (first at line {line})" for lab, line in list(unknown.items())[:_SHOWN]
            )
            more = f" and {len(unknown) - _SHOWN} more" if len(unknown) > _SHOWN else ""
            source = f" (the classes of {classes_of})" if classes_of else ""
            raise ValueError(
                f"labels of {self.path.name} must be among {list(task.label_names)}{source}; found {shown}{more}"
            )
        labels = torch.tensor([index[lab] for lab in self.labels], dtype=torch.long)
        return TextDataset(task, self.texts, labels, str(self.path), dict(self.origin))


def _file(path: str | Path) -> Path:
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"path {str(path)!r} is not a file")
    return path


def _format(path: Path, delimiter: str | None) -> str:
    ext = path.suffix.lower().lstrip(".")
    if ext in ("jsonl", "json"):
        return "jsonl"
    if ext == "csv" or (ext != "tsv" and delimiter == ","):
        return "csv"
    if ext == "tsv" or delimiter is not None:
        return "tsv"
    raise ValueError(
        f"path must end in .csv, .tsv, .jsonl or .json, or give a delimiter; got {path.name!r}"
    )


def check_width(
    row: list, header_width: int | None, first_width: int | None, fmt: str, path: Path, line: int
) -> None:
    """A row with fewer fields than the header lacks a value (a label read from it would be another
    field), and a CSV row with more has a comma outside quotes (its fields are shifted). TSV rows
    may have more (GLUE's NLI files add annotator labels; the header's last column is read as each
    row's last field). Without a header, the first row sets the width (not in a private training
    file: :meth:`_Rows.read`)."""
    width, against = (
        (header_width, "the header's")
        if header_width is not None
        else (first_width, "the first row's")
    )
    if len(row) < width:
        raise ValueError(
            f"{path.name} line {line} has {len(row)} fields, fewer than {against} {width}: {row!r}"[
                :300
            ]
        )
    if fmt == "csv" and len(row) > width:
        raise ValueError(
            f"{path.name} line {line} has {len(row)} fields, more than {against} {width} (quote a field that "
            f"holds a comma): {row!r}"[:300]
        )


def _nonempty(row, columns: dict, column: Column, path: Path, line: int, what: str) -> str:
    value = read_field(row, columns, column, path, line, what)
    if not value:
        raise ValueError(f"{what} {column!r} is empty in {path.name} line {line}")
    return value


def _sorted_labels(labels) -> list[str]:
    """Labels in class order: numerically when all are numbers (so "2" < "10"), else as text."""
    labels = list(labels)
    if all(_NUMBER.fullmatch(x) for x in labels):
        return sorted(labels, key=lambda x: (Decimal(x), x))
    return sorted(labels)


def _task(name: str, names: tuple, words: tuple, pair: bool, template: str | None) -> Task:
    default = DEFAULT_PAIR_TEMPLATE if pair else DEFAULT_TEMPLATE
    return Task(
        name=name,
        label_names=names,
        label_words=words,
        pair=pair,
        template=template if template is not None else default,
    )
