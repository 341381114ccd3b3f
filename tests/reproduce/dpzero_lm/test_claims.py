"""dpzero-lm's claims on constructed rows: they hold, fail or have no signal by where the
interval lies, paired by test example where the rows carry per-example results."""

from __future__ import annotations

import dataclasses
import math

import pytest
from scipy import stats

from dpnc_reproduce import claims as claims_lib
from dpnc_reproduce import protocol
from dpnc_reproduce.dpzero_lm import claims as lm_claims
from dpnc_reproduce.dpzero_lm.experiment import EXPERIMENT
from tests.reproduce.dpzero_lm.rows import CLEAR, FULL_SET, lm_row, lm_rows, with_correct

CLAIMS = [
    "every private run is (ε, δ)-DP: ε by RDP and by PLD, from the run's own ledger with the declared n "
    "(k × classes), ≤ the target",
    "SST-2: DPZero at ε = 6 beats zero-shot (Table 2; the paper's gain +13.2 points)",
    "SST-2: DPZero at ε = 2 beats zero-shot (Table 2; the paper's gain +12.8 points)",
    "SST-2: DPZero at ε = 2 is within 1 point of MeZO (the Table 3 caption; the paper: 92.5 vs 91.8)",
    "SST-5: DPZero at ε = 6 beats zero-shot (Table 2; the paper's gain +13.8 points)",
    "TREC: DPZero at ε = 6 beats zero-shot (Table 2; the paper's gain +55.6 points)",
    "DPZero at ε = 6 loses at most 2.6 points to MeZO on every task (the paper's largest drop at ε = 6, on SNLI)",
    "fine-tuning (MeZO) beats zero-shot on every task",
    "every run finishes within 30 minutes on this machine (building the trainer, filling the caches where it "
    "did, training, evaluating)",
]
SHARE = "DPZero at ε = 6 keeps at least 0.90 of MeZO's gain over zero-shot on every task (the paper: 0.90–0.98)"
PAPER_SHARE = {"SST-2": "0.98", "SST-5": "0.90", "TREC": "0.98"}
PAPER_DROP = {"SST-2": "0.3", "SST-5": "1.5", "TREC": "1.3"}
PAPER_MEZO_GAIN = {"SST-2": "+13.5", "SST-5": "+15.3", "TREC": "+56.9"}
CAPTION = CLAIMS[3]


def _per_task(task: str) -> list[str]:
    return [
        f"{task}: DPZero at ε = 6 loses at most 2.6 points to MeZO (the paper's drop {PAPER_DROP[task]})",
        f"{task}: DPZero at ε = 6 keeps at least 0.90 of MeZO's gain over zero-shot "
        f"(the paper: {PAPER_SHARE[task]})",
        f"{task}: fine-tuning (MeZO) beats zero-shot (the paper's gain {PAPER_MEZO_GAIN[task]} points)",
    ]


def _claims(rows) -> dict:
    claims = lm_claims.check_claims(rows, FULL_SET)
    tasks = [t for t in ("SST-2", "SST-5", "TREC") if any(r.task == t for r in rows)]
    assert [c.statement for c in claims] == CLAIMS[:8] + [SHARE, CLAIMS[8]] + [
        s for t in tasks for s in _per_task(t)
    ]
    return {c.statement: c.holds for c in claims}


def test_the_claims_hold_when_the_whole_interval_clears_the_threshold():
    acc = CLEAR
    holds = _claims(lm_rows(acc, spread=0.3))  # 10⁶ test examples, seeds ±0.3: narrow intervals
    assert all(h for c, h in holds.items() if "keeps at least" not in c and c != CAPTION)
    assert [h for c, h in holds.items() if "keeps at least" in c] == [
        None
    ] * 4  # no per-example results to pair
    # the caption's "within 1 point": the paper's 0.7 lies 0.3 inside its edge, below what 3 seeds
    # detect here; but MeZO − DPZero ε=2 = 3 points, the interval clear of ±1: the interval decides
    # first, it fails
    caption = {c.statement: c for c in lm_claims.check_claims(lm_rows(acc, spread=0.3), FULL_SET)}[
        CAPTION
    ]
    assert caption.holds is False and caption.status == ""
    assert (
        caption.facts["interval_holds"] == 0
        and caption.facts["low"] > caption.facts["threshold"] == 1.0
    )
    assert caption.facts["mde"] > caption.facts["paper_distance"] == pytest.approx(0.3)


def test_the_claims_fail_when_the_whole_interval_is_on_the_wrong_side():
    acc = {
        ("SST-2", "zero-shot"): 71.0,
        ("SST-2", "mezo"): 85.0,
        ("SST-2", "dp6"): 73.0,
        ("SST-2", "dp2"): 69.0,
        ("SST-5", "zero-shot"): 30.0,
        ("SST-5", "mezo"): 29.0,
        ("SST-5", "dp6"): 25.0,
        ("SST-5", "dp2"): 25.0,
        ("TREC", "zero-shot"): 40.0,
        ("TREC", "mezo"): 70.0,
        ("TREC", "dp6"): 45.0,
        ("TREC", "dp2"): 41.0,
    }
    rows = lm_rows(acc, spread=0.3)
    rows[-1] = dataclasses.replace(
        rows[-1], wall_seconds=31 * 60.0, epsilon_pld=2.1
    )  # TREC-21 DPZero ε=2
    holds = _claims(rows)
    # Table 2's lower bounds are "> 0": SST-2's +2 points at ε = 6 hold (the old "> 5" failed them)
    yes = {CLAIMS[1], CLAIMS[5], _per_task("SST-2")[2], _per_task("TREC")[2]}
    # the caption's interval (MeZO − DPZero ε=2 = 4 points) lies beyond ±1: it fails, whatever the
    # power
    assert holds == {
        c: True if c in yes else None if "keeps at least" in c else False for c in holds
    }
    got = {c.statement: c for c in lm_claims.check_claims(rows, FULL_SET)}
    assert got[CLAIMS[8]].facts == {"longest_minutes": 31.0, "limit_minutes": 30}
    assert (
        "TREC-21-dpzero-eps2" in got[CLAIMS[8]].evidence
    )  # the longest run is named (a name is no fact)
    unpaired = claims_lib.accuracy_difference(
        [72.7, 73.0, 73.3], [71.0] * 3, 10**6
    )  # DPZero ε=6 − zero-shot
    assert (
        got[CLAIMS[1]].facts["estimate"] == pytest.approx(2.0)
        and 1.0 < got[CLAIMS[1]].facts["low"] < 2.0
    )
    assert (got[CLAIMS[1]].facts["low"], got[CLAIMS[1]].facts["high"]) == pytest.approx(
        (unpaired.low, unpaired.high)
    )
    # the tasks without a comparison (SNLI, MNLI, RTE) are counted, the three run are judged
    assert got[CLAIMS[6]].facts["tasks_not_run"] == 3 and got[CLAIMS[6]].facts["parts"] == 3
    assert got[CLAIMS[6]].facts["parts_fail"] == 3 and got[CLAIMS[6]].facts["threshold"] == 2.6
    judged = {key.rsplit("_", 1)[0] for key in got[CLAIMS[6]].facts if key.endswith("_estimate")}
    assert judged == {
        "sst-2",
        "sst-5",
        "trec",
    }  # which three: the tasks run, each judged under its own name


def test_one_seed_decides_no_claim():
    """One seed of each method, 10⁶ test examples and a 14-point gap: no verdict (the seed part is
    unknown, never taken as 0)."""
    acc = {
        ("SST-2", "zero-shot"): 71.0,
        ("SST-2", "mezo"): 85.0,
        ("SST-2", "dp6"): 73.0,
        ("SST-2", "dp2"): 71.0,
        ("SST-5", "zero-shot"): 30.0,
        ("SST-5", "mezo"): 29.0,
        ("SST-5", "dp6"): 25.0,
        ("SST-5", "dp2"): 25.0,
        ("TREC", "zero-shot"): 40.0,
        ("TREC", "mezo"): 70.0,
        ("TREC", "dp6"): 45.0,
        ("TREC", "dp2"): 41.0,
    }
    rows = [r for r in lm_rows(acc) if r.seed == 42]
    holds = _claims(rows)
    assert [holds[c] for c in CLAIMS[1:8]] == [None] * 7
    one = {c.statement: c for c in lm_claims.check_claims(rows, FULL_SET)}[CLAIMS[1]].facts
    assert (
        one["seeds"] == 1 and (one["low"], one["high"]) == (-math.inf, math.inf) and "df" not in one
    )


def test_the_claims_have_no_signal_where_the_interval_straddles_the_threshold():
    """300 test examples (±7 points near 75 %) or seeds that disagree: neither yes nor no, and "no
    signal" printed."""
    acc = {
        ("SST-2", "zero-shot"): 71.0,
        ("SST-2", "mezo"): 77.0,
        ("SST-2", "dp6"): 76.0,
        ("SST-2", "dp2"): 74.0,
        ("SST-5", "zero-shot"): 30.0,
        ("SST-5", "mezo"): 33.0,
        ("SST-5", "dp6"): 32.0,
        ("SST-5", "dp2"): 31.0,
        ("TREC", "zero-shot"): 40.0,
        ("TREC", "mezo"): 43.0,
        ("TREC", "dp6"): 42.0,
        ("TREC", "dp2"): 41.0,
    }
    rows = lm_rows(acc, test_examples=300)
    holds = _claims(rows)
    assert [holds[c] for c in CLAIMS[1:8]] == [None] * 7 and holds[CLAIMS[0]] and holds[CLAIMS[8]]
    assert (
        _claims(lm_rows(acc, spread=8.0)) == holds
    )  # 10⁶ examples, but seeds 8 points apart: still no signal
    result = protocol.Result(
        EXPERIMENT,
        FULL_SET,
        tuple(rows),
        tuple(lm_claims.check_claims(rows, FULL_SET)),
        60.0,
        2,
        protocol.machine(),
    )
    claims = protocol.summary(result, "test").split("## The paper's claims")[1].split("\n## ")[0]
    statuses = [c.status for c in result.claims if c.holds is None]
    assert claims.count("| no signal |") == statuses.count("") and claims.count("| yes |") == 2
    assert claims.count("| underpowered for this design |") == statuses.count(
        "underpowered for this design"
    )
    assert len(statuses) == 17


def test_paired_claims_see_a_gain_that_independent_binomials_hide():
    """SST-5's +3 points on 1000 examples: independent binomials (±4.1) leave no signal; paired by
    test example, two models that disagree only on the 3 % they gain hold the claim; two that
    disagree on 60 % do not."""
    acc = {
        ("SST-2", "zero-shot"): 71.0,
        ("SST-2", "mezo"): 77.0,
        ("SST-2", "dp6"): 76.0,
        ("SST-2", "dp2"): 74.0,
        ("SST-5", "zero-shot"): 32.0,
        ("SST-5", "mezo"): 34.0,
        ("SST-5", "dp6"): 35.0,
        ("SST-5", "dp2"): 34.0,
        ("TREC", "zero-shot"): 40.0,
        ("TREC", "mezo"): 43.0,
        ("TREC", "dp6"): 42.0,
        ("TREC", "dp2"): 41.0,
    }
    sst5 = CLAIMS[4]
    unpaired = {
        c.statement: c for c in lm_claims.check_claims(lm_rows(acc, test_examples=1000), FULL_SET)
    }
    binomials = claims_lib.accuracy_difference([35.0] * 3, [32.0] * 3, 1000)
    assert unpaired[sst5].holds is None and unpaired[sst5].facts["low"] == pytest.approx(
        binomials.low
    )
    paired = {
        c.statement: c
        for c in lm_claims.check_claims(with_correct(lm_rows(acc), agree=1.0), FULL_SET)
    }
    half = stats.t.ppf(0.975, 999) * math.sqrt(0.03 * 0.97 / 999) * 100  # seed part 0: df = m − 1
    assert paired[sst5].holds is True and paired[sst5].facts["df"] == pytest.approx(999)
    assert [paired[sst5].facts[k] for k in ("estimate", "low", "high")] == pytest.approx(
        [3.0, 3 - half, 3 + half]
    )
    shuffled = {
        c.statement: c.holds
        for c in lm_claims.check_claims(with_correct(lm_rows(acc), agree=0.7), FULL_SET)
    }
    assert shuffled[sst5] is None
    # a run without per-example results (an old result.json) falls back to the unpaired interval
    mixed = with_correct(lm_rows(acc), agree=1.0)
    mixed[0] = dataclasses.replace(mixed[0], correct="")
    fallback = {c.statement: c for c in lm_claims.check_claims(mixed, FULL_SET)}[CLAIMS[1]].facts
    sst2 = claims_lib.accuracy_difference(
        [r.accuracy for r in mixed if (r.task, r.epsilon) == ("SST-2", 6.0)],
        [r.accuracy for r in mixed if (r.task, r.method) == ("SST-2", "zero-shot")],
        1000,
    )
    assert (fallback["low"], fallback["high"], fallback["df"]) == pytest.approx(
        (sst2.low, sst2.high, sst2.df)
    )


def _share_rows(gain_dp: list[int], gain_mezo: list[int], m: int = 1000, zero: int = 500) -> list:
    """SST-2 rows with per-example results on m examples: zero-shot right on the first ``zero``; per
    seed, MeZO also on the next gain_mezo[s] examples, DPZero on the next gain_dp[s] (a subset of
    MeZO's gain when smaller)."""

    def bits(k):
        return "".join("1" if i < k else "0" for i in range(m))

    rows = []
    for s, seed in enumerate((42, 13, 21)):
        for method, eps, k in (
            ("zero-shot", None, zero),
            ("mezo", None, zero + gain_mezo[s]),
            ("dpzero", 6.0, zero + gain_dp[s]),
            ("dpzero", 2.0, zero + gain_dp[s]),
        ):
            rows.append(
                lm_row("SST-2", seed, method, 100 * k / m, eps, test_examples=m, correct=bits(k))
            )
    return rows


def test_the_gain_share_is_judged_per_task_and_on_every_task_with_fieller():
    from dpnc_reproduce import claims as cl

    cfg = dataclasses.replace(FULL_SET, tasks=("SST-2",))
    statement = (
        "SST-2: DPZero at ε = 6 keeps at least 0.90 of MeZO's gain over zero-shot (the paper: 0.98)"
    )
    for dp, mezo, expect in (
        ([190, 192, 188], [200, 201, 199], True),  # keeps 0.95
        ([100, 104, 98], [200, 198, 201], False),  # keeps 0.5
        ([5, 3, 6], [4, 6, 5], None),
    ):  # MeZO gains ~0.5 %: too small to share
        rows = _share_rows(dp, mezo)
        got = {c.statement: c for c in lm_claims.check_claims(rows, cfg)}
        if expect is False:
            # the paper's 0.98 lies 0.08 above 0.90, below the 0.09 this design detects at 80 %
            # power (post hoc); the interval lies below 0.90: it fails, and so does the claim on
            # every task
            assert got[statement].holds is False and got[statement].status == ""
            assert got[statement].facts["interval_holds"] == 0 and got[SHARE].holds is False
            assert got[SHARE].facts["underpowered"] == 0 and got[SHARE].facts["parts_fail"] == 1
        else:
            assert got[statement].holds is expect and got[SHARE].holds is expect, (
                dp,
                mezo,
                got[statement].evidence,
            )
        # the interval is claims.paired_ratio on (DPZero − zero-shot, MeZO − zero-shot) per example
        # and seed
        z = [[int(c) for c in r.correct] for r in rows if r.method == "zero-shot"]
        x = [
            [100.0 * (int(c) - b) for c, b in zip(r.correct, zz)]
            for r, zz in zip([r for r in rows if r.epsilon == 6.0], z)
        ]
        y = [
            [100.0 * (int(c) - b) for c, b in zip(r.correct, zz)]
            for r, zz in zip([r for r in rows if r.method == "mezo"], z)
        ]
        iv = cl.paired_ratio(x, y)
        assert iv.estimate == pytest.approx(sum(dp) / sum(mezo))
        share = got[statement].facts
        if expect is not None:
            assert [share[k] for k in ("estimate", "low", "high", "df")] == pytest.approx(
                [iv.estimate, iv.low, iv.high, iv.df]
            )
            assert got[SHARE].facts["sst-2_low"] == share["low"]  # the same on every task
        else:  # Fieller's set is unbounded: no interval
            assert (share["low"], share["high"]) == (-math.inf, math.inf) == (iv.low, iv.high)
            assert (
                "includes 0" in got[statement].evidence
            )  # why, in words: the denominator's interval
