"""Progress bars for private runs: how far along, never how fast.

A step's running time grows with its realised batch and with the length of its examples, so a bar's rate
(it/s), elapsed and remaining time are statistics of the secret batches: published (a terminal log, a CI
transcript) they identify the steps that held a long canary. Every dpnc bar on a private run shows counts only.
"""

from __future__ import annotations

from tqdm.auto import tqdm

BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}"   # no {rate}, {elapsed} or {remaining}


def progress(iterable=None, **kwargs) -> tqdm:
    """``tqdm(iterable, **kwargs)`` without timing in what it prints."""
    return tqdm(iterable, bar_format=BAR_FORMAT, **kwargs)
