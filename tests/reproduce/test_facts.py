"""dpnc_reproduce.facts: the names and numbers every claim's facts are built from."""

import json
import math

from dpnc_reproduce import facts
from dpnc_reproduce.claims import Interval, mean_interval


def test_names_are_snake_case_words_joined_by_underscores():
    assert facts.name("SST-2", "low") == "sst-2_low"
    assert facts.name("radial", "d4", "eps2", "alpha0.1") == "radial_d4_eps2_alpha0.1"
    assert facts.name("r = O(log d), d=20") == "r-o-log-d-d-20"
    assert (
        facts.name("", "estimate") == "estimate"
        and facts.name("matched:dp-sgd") == "matched-dp-sgd"
    )


def test_an_interval_gives_its_numbers_and_threshold():
    iv = mean_interval([1.0, 2.0, 3.0])
    got = facts.interval(iv, 0.5)
    assert got == {
        "estimate": 2.0,
        "low": iv.low,
        "high": iv.high,
        "seeds": 3,
        "df": 2,
        "censored": 0,
        "threshold": 0.5,
    }
    none = facts.interval(
        Interval(1.0, -math.inf, math.inf, 1, "1 seed: no verdict"), prefix="SST-5"
    )
    assert set(none) == {
        "sst-5_estimate",
        "sst-5_low",
        "sst-5_high",
        "sst-5_seeds",
        "sst-5_censored",
    }  # no df
    assert none["sst-5_low"] == -math.inf and none["sst-5_high"] == math.inf  # no interval
    json.dumps(got)  # JSON numbers


def test_a_conjunction_gives_each_part_and_its_counts():
    parts = {
        ("radial", "d4"): mean_interval([1.0, 1.5]),
        "SST-2": mean_interval([-1.0, -2.0, -1.5]),
    }
    got = facts.parts(parts, 0.0, {"a": True, "b": False, "c": None, "d": True})
    assert got["radial_d4_estimate"] == 1.25 and got["sst-2_high"] == parts["SST-2"].high
    assert got["threshold"] == 0.0
    assert (got["parts"], got["parts_hold"], got["parts_fail"], got["parts_no_signal"]) == (
        4,
        2,
        1,
        1,
    )
    assert "parts" not in facts.parts(parts) and "threshold" not in facts.parts(parts)


def test_a_verdict_is_a_number():
    assert (
        facts.verdict(True) == 1.0
        and facts.verdict(False) == 0.0
        and math.isnan(facts.verdict(None))
    )
