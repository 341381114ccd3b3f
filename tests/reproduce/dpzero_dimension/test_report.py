"""dpzero-dimension's report: the share of MeZO's gain and the slope against d, against a hand
computation."""

from __future__ import annotations

import math
import statistics

import pytest

from dpnc_reproduce.dpzero_dimension import report
from tests.reproduce.dpzero_dimension.rows import BITS, D, dim_rows


def _acc(bits):
    return 100 * bits.count("1") / len(bits)


def test_share_and_slope_against_a_hand_computation():
    rows = dim_rows()
    for mode in ("head", "bias"):
        gains = [
            (
                _acc(BITS[mode, s][2]) - _acc(BITS[mode, s][0]),
                _acc(BITS[mode, s][1]) - _acc(BITS[mode, s][0]),
            )
            for s in (42, 13)
        ]
        hand = statistics.fmean(g[0] for g in gains) / statistics.fmean(g[1] for g in gains)
        iv = report.share(rows, "SST-2", mode, 6.0)
        assert iv.estimate == pytest.approx(hand) and iv.seeds == 2
        gap = report.difference(rows, "SST-2", mode, ("dpzero", 6.0), ("mezo", None))
        assert gap.estimate == pytest.approx(statistics.fmean(g[0] - g[1] for g in gains))
    # Over two modes the least-squares slope is the difference of their DPZero − MeZO over that of
    # log10 d.
    gap = {
        m: statistics.fmean(_acc(BITS[m, s][2]) - _acc(BITS[m, s][1]) for s in (42, 13))
        for m in ("head", "bias")
    }
    slope = report.slope(rows, "SST-2", ["head", "bias"], 6.0)
    assert slope.estimate == pytest.approx(
        (gap["bias"] - gap["head"]) / math.log10(D["bias"] / D["head"])
    )
    assert (
        math.isfinite(slope.low)
        and slope.low < slope.estimate < slope.high
        and slope.df is not None
    )
