"""The data owner's checks of a private run's training data, before any release.

They catch the mistakes the domain rule would let pass silently (a label spelled differently, an
empty file, a declared n far off), so a run does not spend its ε on an untrained model. What they
read is outside (ε, δ), so they speak to the owner alone, never to a published file: the checks,
what they may say and where, docs/privacy.md, "The owner's checks"."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from dpnc.declared import PREFIX, DataWarning, delta_note, n_note
from dpnc.lm.data import TextDataset

__all__ = ["DataWarning", "check_training_data", "tell_owner"]

_SHOWN = 10  # labels listed in a message


def check_training_data(
    train: TextDataset,
    *,
    n: int,
    delta: float | None,
    n_declared: bool = True,
    allow_empty_train: bool = False,
    allow_missing_classes: bool = False,
    allow_label_mismatch: bool = False,
    allow_n_mismatch: bool = False,
    allow_replacement_chars: bool = False,
) -> list[str]:
    """Check the training set a run will draw from; tell the owner and return what was found.

    Args:
        train: the training set as the domain rule left it (``dropped`` and ``dropped_labels`` say
            what it left out).
        n: the n of the ledger.
        delta: the run's δ (None: no privacy claim).
        n_declared: whether the owner declared n (``--n``); a built-in task's recipe n is only
            remarked on.
        allow_*: tell instead of refusing (docs/privacy.md, "The owner's checks").

    Returns:
        The notes told to the owner (:func:`tell_owner`), refusals allowed included.

    Raises:
        ValueError: a check failed and is not allowed. The message reads the data: it is for the
            owner, raised before anything is written or released.
    """
    task, kept = train.task, len(train)
    rows = kept + train.dropped
    notes, refusals = [], []

    def found(note: str, allowed: bool, flag: str) -> None:
        if allowed:
            notes.append(note)
        else:
            refusals.append(f"{note}, or pass {flag} ({flag[2:].replace('-', '_')}=True)")

    if (line := _first_bad_line(train.source)) is not None:
        found(
            f"{_name(train)} is not UTF-8 (line {line} has other bytes, read as U+FFFD, so the run would "
            "train on damaged text). Re-save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
            allow_replacement_chars,
            "--allow-replacement-chars",
        )
    if train.dropped_labels:
        note, near = _unknown_labels(train.dropped_labels, task.label_names)
        if near:
            found(
                note + ". Fix the labels or declare the classes as the file spells them",
                allow_label_mismatch,
                "--allow-label-mismatch",
            )
        else:
            notes.append(note)
    if kept == 0:
        why = (
            f"all {rows:,} rows of {_name(train)} were dropped by the domain rule"
            if rows
            else f"{_name(train)} holds no data row (a header only?)"
        )
        found(
            f"no training row is left: {why}, so the run would spend its ε and train nothing. Fix the file or "
            "the declared classes",
            allow_empty_train,
            "--allow-empty-train",
        )
    else:
        counts = train.class_counts()
        missing = [name for name, count in counts.items() if count == 0]
        if missing:
            found(
                f"classes with no training row: {missing} of the declared {list(task.label_names)}: the head gets "
                "a class nothing trains. Declare the classes (--labels or --label-words)",
                allow_missing_classes,
                "--allow-missing-classes",
            )
    if rows and (note := n_note(n, rows)) is not None:  # (no rows: said above)
        if n_declared:
            found(note, allow_n_mismatch, "--allow-n-mismatch")
        else:
            notes.append(note)
    if delta is not None and (note := delta_note(delta, n)) is not None:
        notes.append(note)
    for note in notes:
        tell_owner(note)
    if refusals:
        raise ValueError(
            "refused before any release (owner check: this message reads the training data; keep it "
            "out of published files): " + "; ".join(refusals)
        )
    return notes


def tell_owner(note: str) -> None:
    """``note`` on the owner's terminal (standard error): one plain line, no source line of dpnc."""
    print(PREFIX + note, file=sys.stderr, flush=True)


def _first_bad_line(source: str) -> int | None:
    """The first line of the file ``source`` holding bytes that are not UTF-8 (None: all UTF-8, or
    no file)."""
    path = Path(source)
    if not path.is_file():
        return None
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            return number
    return None


def _unknown_labels(counts: Mapping[str, int], classes) -> tuple[str, bool]:
    """Labels outside the declared classes, with their rows and a case-insensitive near match where
    one exists; and whether any label has one."""
    folded = {name.casefold(): name for name in classes}
    near_any = any(label.casefold() in folded for label in counts)
    shown = []
    for label, count in sorted(counts.items(), key=lambda kv: -kv[1])[:_SHOWN]:
        near = folded.get(label.casefold())
        shown.append(f"{label!r} ({_rows(count)}" + (f"; did you mean {near!r}?)" if near else ")"))
    more = f" and {len(counts) - _SHOWN} more" if len(counts) > _SHOWN else ""
    total = sum(counts.values())
    return (
        f"{_rows(total)} of the training file {'has a label' if total == 1 else 'have labels'} outside the "
        f"declared classes {list(classes)}, dropped by the domain rule: {', '.join(shown)}{more}",
        near_any,
    )


def _rows(count: int) -> str:
    return f"{count:,} row" + ("" if count == 1 else "s")


def _name(train: TextDataset) -> str:
    return train.source.rsplit("/", 1)[-1] or "the training file"
