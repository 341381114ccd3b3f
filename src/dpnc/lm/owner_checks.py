"""The data owner's checks of a private run's training data, before any release.

The person who runs ``dpnc finetune`` holds the training data. A mistake in it — labels spelled ``positive`` where
the declared classes say ``Positive``, a header-only file, an extra label in the test file that builds a head with
a class no training row has, a declared n far from the file's rows — would otherwise pass silently: the domain rule
drops every row outside the declared classes (never refusing one, since a refusal that depends on one row would
itself be a release), the run spends its ε and reports an untrained model.

These checks read the training data, so what they say is a statistic of it, outside the run's (ε, δ). They speak
to the owner alone: a :class:`DataWarning` on the terminal (and, with ``--log-private-stats``, a line of the private
statistics file), never a line of ``summary.json``, ``metrics.jsonl``, TensorBoard or the model folder. A refusal
stops the run before the first step, so it writes nothing and spends nothing; whoever sees only the published
files sees no run. Where the start of a run must not depend on the data (a pipeline whose runs are themselves
observed), the ``allow_*`` settings turn each refusal into a warning. See docs/privacy.md, "The owner's checks".
"""

from __future__ import annotations

from collections.abc import Mapping

from dpnc.declared import DataWarning, delta_note, n_note, tell_owner
from dpnc.lm.data import TextDataset

__all__ = ["DataWarning", "check_training_data"]

_SHOWN = 10  # labels listed in a message


def check_training_data(
    train: TextDataset,
    *,
    n: int,
    delta: float | None,
    allow_empty_train: bool = False,
    allow_missing_classes: bool = False,
) -> list[str]:
    """Check the training set a private run will draw from; warn the owner and return what was found.

    Args:
        train: the training set as the domain rule left it (``dropped`` and ``dropped_labels`` say what it left out).
        n: the declared n.
        delta: the run's δ (None: no privacy claim).
        allow_empty_train: warn instead of refusing when no training row is left.
        allow_missing_classes: warn instead of refusing when a declared class has no training row.

    Returns:
        The messages, each also issued as a :class:`DataWarning` (the owner's terminal).

    Raises:
        ValueError: nothing would be trained on (no row left), or a class with no training row, unless allowed.
            The message reads the data: it is for the owner, raised before anything is written or released.
    """
    task, kept = train.task, len(train)
    rows = kept + train.dropped
    notes, refusals = [], []
    if train.dropped_labels:
        notes.append(_unknown_labels(train.dropped_labels, task.label_names))
    if kept == 0:
        why = (
            f"all {rows:,} rows of {_name(train)} were dropped by the domain rule"
            if rows
            else f"{_name(train)} holds no data row (a header only?)"
        )
        (notes if allow_empty_train else refusals).append(
            f"no training row is left: {why}, so the run would spend its ε and train nothing. Fix the file or "
            "the declared classes"
            + (
                ""
                if allow_empty_train
                else ", or pass --allow-empty-train "
                "(allow_empty_train=True) where the start must not depend on the data"
            )
        )
    else:
        counts = train.class_counts()
        missing = [name for name, count in counts.items() if count == 0]
        if missing:
            (notes if allow_missing_classes else refusals).append(
                f"classes with no training row: {missing} of the declared {list(task.label_names)}: the head gets a "
                f"class nothing trains. Declare the classes (--labels or --label-words; by default a private run "
                f"takes the test file's labels)"
                + (
                    ""
                    if allow_missing_classes
                    else ", or pass --allow-missing-classes (allow_missing_classes=True)"
                )
            )
    if rows and (note := n_note(n, rows)) is not None:  # (no rows: said above)
        notes.append(note)
    if delta is not None and (note := delta_note(delta, n)) is not None:
        notes.append(note)
    for note in notes:
        tell_owner(note, stacklevel=3)
    if refusals:
        raise ValueError(
            "refused before any release (owner check: this message reads the training data; keep it "
            "out of published files): " + "; ".join(refusals)
        )
    return notes


def _unknown_labels(counts: Mapping[str, int], classes) -> str:
    """Labels outside the declared classes, with their rows and a case-insensitive near match where one exists."""
    folded = {name.casefold(): name for name in classes}
    shown = []
    for label, count in sorted(counts.items(), key=lambda kv: -kv[1])[:_SHOWN]:
        near = folded.get(label.casefold())
        shown.append(f"{label!r} ({_rows(count)}" + (f"; did you mean {near!r}?)" if near else ")"))
    more = f" and {len(counts) - _SHOWN} more" if len(counts) > _SHOWN else ""
    total = sum(counts.values())
    return (
        f"{_rows(total)} of the training file {'has a label' if total == 1 else 'have labels'} outside the "
        f"declared classes {list(classes)}, dropped by the domain rule: {', '.join(shown)}{more}"
    )


def _rows(count: int) -> str:
    return f"{count:,} row" + ("" if count == 1 else "s")


def _name(train: TextDataset) -> str:
    return train.source.rsplit("/", 1)[-1] or "the training file"
