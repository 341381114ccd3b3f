"""Progress bars for private runs: how far along, never how fast.

A step's running time grows with its realised batch and with the length of its examples, so a bar's
rate (it/s), elapsed and remaining time are statistics of the secret batches: published (a terminal
log, a CI transcript) they identify the steps that held a long canary. Every dpnc bar on a private
run shows counts (and a postfix the caller sets, e.g. ε) only, and refreshes on every update: tqdm's
default skips refreshes by elapsed time, so *which* states a bar printed would depend on step times
too."""

from __future__ import annotations

import math
import sys

from tqdm.auto import tqdm

# no {rate}, {elapsed}, {remaining}
BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}{postfix}"


# the most lines a bar writes to a file or pipe (where each refresh is a new line, not a redraw)
LOG_LINES = 20


def progress(iterable=None, **kwargs) -> tqdm:
    """``tqdm(iterable, **kwargs)`` without timing in what it prints, refreshed on every update on a
    terminal, and every ⌈total/20⌉ updates when its output is not one (a log file would get a line
    per step): a schedule by count, public like the step count, never by time."""
    out = kwargs.get("file") or sys.stderr
    total = kwargs.get("total") or (len(iterable) if hasattr(iterable, "__len__") else None)
    every = 1 if _terminal(out) or not total else max(1, math.ceil(total / LOG_LINES))
    return tqdm(
        iterable, **{"mininterval": 0, "miniters": every, **kwargs, "bar_format": BAR_FORMAT}
    )


def _terminal(out) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
