"""Interval first, over every published result under docs/results/: a claim whose interval already
lies beyond its threshold (holds or fails by the interval) is never labelled "underpowered for this
design". That status is only for an interval that straddles the threshold, of a design declared so
before the data (or a claim declared without a run, which has no interval of its own).

The test reads each ``result.json``'s current claims (not the old verdicts kept under ``rejudged``):
a per-claim status needs the claim's facts to show a straddling interval (``interval_holds`` NaN, or
``low`` ≤ ``threshold`` ≤ ``high``) or no run (``not_run``); a conjunction's "underpowered for this
design (not judged): A, B" needs each named part's interval in its facts to straddle the threshold.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from dpnc_reproduce import facts

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
UNDERPOWERED = "underpowered for this design"
FILES = sorted(RESULTS.rglob("result.json"))


def _straddles(low: float, high: float, threshold: float) -> bool:
    return low <= threshold <= high


def _claims(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    return data.get("claims", []) if isinstance(data, dict) else []


def test_results_are_found():
    assert len(FILES) > 20 and any("dpzero-lm" in str(f) for f in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.parent.relative_to(RESULTS)))
def test_no_decisive_interval_is_labelled_underpowered(path):
    for c in _claims(path):
        where = f"{path.relative_to(RESULTS)}: {c['statement']}"
        f = c.get("facts") or {}
        if (c.get("status") or "").startswith(UNDERPOWERED):
            assert c.get("holds") is None, where
            if f.get("not_run"):
                continue
            assert "interval_holds" in f or {"low", "high", "threshold"} <= f.keys(), (
                f"{where}: an underpowered claim must carry its interval in its facts"
            )
            if "interval_holds" in f:
                assert math.isnan(f["interval_holds"]), f"{where}: its interval decides"
            else:
                assert _straddles(f["low"], f["high"], f["threshold"]), (
                    f"{where}: its interval decides"
                )
        listed = re.search(rf"; {UNDERPOWERED} \(not judged\): ([^;]+)$", c.get("evidence") or "")
        if listed:
            for part in listed.group(1).split(", "):
                key = facts.name(part)
                assert f"{key}_low" in f, f"{where}: {part}'s interval is not in the facts"
                assert _straddles(f[f"{key}_low"], f[f"{key}_high"], f["threshold"]), (
                    f"{where}: {part}'s interval decides, yet it is listed as underpowered"
                )
