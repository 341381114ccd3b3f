"""The numbers a claim is read from (``Claim.facts``), named the same way everywhere.

Tests assert a claim's facts, not its evidence's prose, so a reworded sentence keeps a test true
and a moved number fails it. The names: docs/reproducing.md ("The numbers a claim is read from")."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from dpnc_reproduce.claims import Interval


def name(*words: object) -> str:
    """A fact's name from its words: lower case, each word's runs of other characters than ``a-z 0-9
    . + - _`` made one ``-``, the words joined by ``_`` (``name("SST-2", "low") == "sst-2_low"``; a
    word that is a name already stays as it is)."""
    slugs = (re.sub(r"[^a-z0-9.+_-]+", "-", str(w).lower()).strip("-") for w in words)
    return "_".join(s for s in slugs if s)


def interval(
    iv: Interval, threshold: float | None = None, *, prefix: object = ""
) -> dict[str, float]:
    """An interval's numbers (and the ``threshold`` it is judged against, if given), each name after
    ``prefix``."""
    out: dict[str, float] = {
        "estimate": iv.estimate,
        "low": iv.low,
        "high": iv.high,
        "seeds": iv.seeds,
        "censored": iv.censored,
    } | ({} if iv.df is None else {"df": iv.df})
    if threshold is not None:
        out["threshold"] = threshold
    return {name(prefix, k): v for k, v in out.items()}


def verdict(holds: bool | None) -> float:
    """A verdict as a number: 1 holds, 0 fails, NaN no signal."""
    return math.nan if holds is None else float(holds)


def counts(verdicts: Iterable[bool | None]) -> dict[str, int]:
    """How many parts of a conjunction hold, fail and have no signal, and how many there are."""
    values = list(verdicts)
    return {
        "parts": len(values),
        "parts_hold": values.count(True),
        "parts_fail": values.count(False),
        "parts_no_signal": values.count(None),
    }


def parts(
    intervals: Mapping[object, Interval],
    threshold: float | None = None,
    verdicts: Mapping[object, bool | None] | None = None,
) -> dict[str, float]:
    """A conjunction's facts: each part's interval under its name (a key that is a tuple names it
    word by word), the ``threshold`` once, and with ``verdicts`` (part → verdict) their
    :func:`counts`."""
    out: dict[str, float] = {}
    for key, iv in intervals.items():
        out |= interval(iv, prefix=name(*key) if isinstance(key, tuple) else name(key))
    if threshold is not None:
        out["threshold"] = threshold
    return out | (counts(verdicts.values()) if verdicts is not None else {})
