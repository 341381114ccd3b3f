"""Progress bars for private runs: how far along, never how fast.

A step's running time grows with its realised batch and with the length of its examples, so a bar's rate
(it/s), elapsed and remaining time are statistics of the secret batches: published (a terminal log, a CI
transcript) they identify the steps that held a long canary. Every dpnc bar on a private run shows counts (and a
postfix the caller sets, e.g. ε) only, and refreshes on every update: tqdm's default skips refreshes by elapsed
time, so *which* states a bar printed would depend on step times too.
"""

from __future__ import annotations

from tqdm.auto import tqdm

BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}{postfix}"   # no {rate}, {elapsed}, {remaining}


def progress(iterable=None, **kwargs) -> tqdm:
    """``tqdm(iterable, **kwargs)`` without timing in what it prints, refreshed on every update."""
    return tqdm(iterable, **{"mininterval": 0, "miniters": 1, **kwargs, "bar_format": BAR_FORMAT})
