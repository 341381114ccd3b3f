"""The dpzero-lm experiment's claims: the paper's (docs/papers.md, DPZero §4.2) as they should read
for this model and recipe, judged on the rows, and their declaration before the run."""

from __future__ import annotations

import math
from collections.abc import Sequence

import dpnc_reproduce.dpzero_lm.tables as tables
from dpnc_reproduce import facts
from dpnc_reproduce.claims import (
    Interval,
    exceeds,
    from_bits,
    paired_ratio,
)
from dpnc_reproduce.dpzero_lm.run import LMRow
from dpnc_reproduce.dpzero_lm.tables import PAPER_TABLE2
from dpnc_reproduce.judging import ClaimSpec, Verdict, judged
from dpnc_reproduce.protocol import Claim
from dpnc_reproduce.variance import UNDERPOWERED, powered

# The paper's "close to MeZO" (DPZero §4.2): its largest drop MeZO − DPZero at ε = 6 over its Table
# 2 tasks.
PAPER_MAX_DROP_TASK, PAPER_MAX_DROP = max(
    (
        (t, round(PAPER_TABLE2["mezo"][t][0] - PAPER_TABLE2["dpzero ε=6"][t][0], 1))
        for t in PAPER_TABLE2["mezo"]
    ),
    key=lambda item: item[1],
)


# The paper's Table 2: the share of MeZO's gain over zero-shot that DPZero at ε = 6 keeps, (DPZero −
# zero-shot) / (MeZO − zero-shot), per task; its smallest (0.90, SST-5) is the claim's threshold.
PAPER_SHARES = {
    t: (PAPER_TABLE2["dpzero ε=6"][t][0] - PAPER_TABLE2["zero-shot"][t][0])
    / (PAPER_TABLE2["mezo"][t][0] - PAPER_TABLE2["zero-shot"][t][0])
    for t in PAPER_TABLE2["mezo"]
}
MIN_SHARE = 0.90
# Table 2's lower bounds as the paper's data give them: DPZero beats zero-shot, "> 0" (the "> 5" and
# "> 3" points declared until 27 Nov 2026 were chosen after SST-2 had been measured, and no paper
# number gives them); the paper's own gains are shown beside.
PAPER_GAIN = {
    (t, e): PAPER_TABLE2[f"dpzero ε={e}"][t][0] - PAPER_TABLE2["zero-shot"][t][0]
    for t in PAPER_TABLE2["mezo"]
    for e in (6, 2)
}
# The Table 3 caption: DPZero at ε = 2 is within 1 point of MeZO on SST-2 (92.5 vs 91.8).
CAPTION_TOL = 1.0
MAX_RUN_MINUTES = (
    30  # the claim: every run (cache filling included) finishes within this on the machine used
)


# A powered claim's evidence after its own: where the design was declared underpowered, or the
# post-hoc MDE (information only); :func:`powered_verdict` records the fields of the one that applies.
POWERED = (
    "; underpowered (declared before the data): the design detects {underpowered_mde:.2f}{unit} "
    "(80 % power), the paper's value lies {paper_distance:.2f}{unit} from the threshold, and the "
    "interval straddles it",
    "; post-hoc MDE {posthoc_mde:.2f}{unit} (80 % power, this run's spread; information only), the "
    "paper's distance to the threshold {paper_distance:.2f}{unit}",
)


def powered_verdict(
    iv: Interval,
    holds: bool | None,
    expected: float,
    threshold: float,
    words: dict | None = None,
    *,
    unit: str = " points",
    declared_mde: float | None = None,
) -> Verdict:
    """A claim read from its interval first: an interval that lies beyond the threshold decides it
    (holds or fails) whatever the design's power; a rejection at the 5 % level stands. Only an
    interval that straddles the threshold can read "underpowered for this design", and only where
    the design was declared so before the data: ``declared_mde``, the minimum detectable effect (80
    % power, one-sided at 5 %) that the declaration computed by the same variance model that judges,
    exceeds the distance between the paper's value (``expected``) and ``threshold``. Without a
    declaration a straddling interval reads no signal; the MDE computed from the run's own spread
    (:func:`~dpnc_reproduce.variance.minimum_detectable_effect`, post hoc) is shown as information
    only (:data:`POWERED`). ``words``: what the claim's own texts read."""
    _, mde = powered(iv, expected, threshold, one_sided=True)
    distance = abs(expected - threshold)
    read = facts.interval(iv, threshold) | {
        "paper": expected,
        "paper_distance": distance,
        "mde": mde,
        "interval_holds": facts.verdict(holds),
    }
    if declared_mde is not None:
        read["declared_mde"] = declared_mde
    words = {**(words or {}), "unit": unit}
    if holds is None and declared_mde is not None and declared_mde > distance:
        return Verdict(None, read, words | {"underpowered_mde": declared_mde}, UNDERPOWERED)
    return Verdict(holds, read, words | ({"posthoc_mde": mde} if math.isfinite(mde) else {}))


_STATED = ClaimSpec("{statement}", ("{evidence}", *POWERED), "", "", "", lambda rows: [])


def powered_claim(
    statement: str,
    iv: Interval,
    holds: bool | None,
    expected: float,
    threshold: float,
    evidence: str,
    *,
    unit: str = " points",
    declared_mde: float | None = None,
) -> Claim:
    """:func:`powered_verdict` as a claim with the given statement and evidence (a claim declared
    elsewhere, e.g. a declared run's)."""
    words = {"statement": statement, "evidence": evidence}
    verdict = powered_verdict(
        iv, holds, expected, threshold, words, unit=unit, declared_mde=declared_mde
    )
    return judged(_STATED, verdict)


def _every_task(
    intervals: dict[str, Interval],
    threshold: float,
    verdicts: dict[str, bool | None],
    underpowered: list[str],
    missing: Sequence[str] = (),
) -> dict[str, float]:
    """A claim on every task's facts: each task's interval, the threshold, the verdicts' counts, how
    many tasks were underpowered (not judged) and how many were not run."""
    return facts.parts(intervals, threshold, verdicts) | {
        "underpowered": len(underpowered),
        "tasks_not_run": len(missing),
    }


def gain_share(rows: Sequence[LMRow], task: str, gain: Interval | None) -> Interval | None:
    """(DPZero ε=6 − zero-shot) / (MeZO − zero-shot) on ``task`` with Fieller's interval
    (:func:`~dpnc_reproduce.claims.paired_ratio`, paired by test example and seed); None where a
    method did not run; no interval without per-example results, or where MeZO's gain (``gain``, its
    interval) is not above 0."""
    dp, mz = (
        _paired(rows, task, "dpzero ε=6", "zero-shot"),
        _paired(rows, task, "mezo", "zero-shot"),
    )
    if gain is None or not _accuracies_of(rows, task, "dpzero ε=6"):
        return None
    if dp is None or mz is None or dp[1] != mz[1]:
        return Interval(
            math.nan, -math.inf, math.inf, 0, "no per-example results to pair: no interval"
        )
    x = [[100.0 * (a - z) for a, z in zip(u, v)] for u, v in zip(*dp)]
    y = [[100.0 * (a - z) for a, z in zip(u, v)] for u, v in zip(*mz)]
    iv = paired_ratio(x, y)
    if gain.low <= 0:  # the share of a gain that may be 0 or negative says nothing
        why = (
            "MeZO's gain over zero-shot is not above 0"
            if gain.high > 0 or math.isinf(gain.high)
            else "MeZO does not gain over zero-shot"
        )
        return Interval(
            iv.estimate,
            -math.inf,
            math.inf,
            iv.seeds,
            f"{why} ({_points(gain)}): no verdict",
            iv.df,
        )
    return iv


def _share_verdict(iv: Interval) -> bool | None:
    return exceeds(iv, MIN_SHARE) if math.isfinite(iv.low) and math.isfinite(iv.high) else None


def _share(iv: Interval) -> str:
    est = f"{iv.estimate:.2f}" if math.isfinite(iv.estimate) else "—"
    if not (math.isfinite(iv.low) and math.isfinite(iv.high)):
        return f"{est}, no interval ({iv.note})"
    return f"{est} [{iv.low:.2f}, {iv.high:.2f}] (95 % {iv.note}, Welch–Satterthwaite df {iv.df:.1f} at the estimate)"


def _key(label: str) -> dict:
    """Table 2's row label → the rows' fields ("dpzero ε=6" → method dpzero, ε 6; Gaussian
    directions)."""
    method, _, eps = label.partition(" ε=")
    return {"method": method, "epsilon": float(eps) if eps else None, "direction": "gaussian"}


def _paired(rows: Sequence[LMRow], task: str, a: str, b: str) -> tuple[list, list] | None:
    """The per-seed correctness vectors of a and b on ``task``, paired by seed; None unless every
    seed that either ran has both, with per-example results on the same number of test examples."""
    of = {
        label: {
            r.seed: r
            for r in rows
            if r.task == task and all(getattr(r, k) == v for k, v in _key(label).items())
        }
        for label in (a, b)
    }
    seeds = sorted(of[a])
    if not seeds or seeds != sorted(of[b]):
        return None
    pairs = [(of[a][s], of[b][s]) for s in seeds]
    if any(not x.correct or not y.correct or len(x.correct) != len(y.correct) for x, y in pairs):
        return None
    return [from_bits(x.correct) for x, _ in pairs], [from_bits(y.correct) for _, y in pairs]


def _accuracies_of(rows: Sequence[LMRow], task: str, label: str) -> list[float]:
    """The per-seed test accuracies (%) of Table 2's ``label`` on ``task``."""
    return [
        r.accuracy
        for r in rows
        if r.task == task and all(getattr(r, k) == v for k, v in _key(label).items())
    ]


def _points(iv: Interval) -> str:
    """An accuracy difference and its interval in points, with the t degrees of freedom."""
    if not (math.isfinite(iv.low) and math.isfinite(iv.high)):
        return f"{iv.estimate:+.1f} points, no interval ({iv.note})"
    return (
        f"{iv.estimate:+.1f} [{iv.low:+.1f}, {iv.high:+.1f}] points (95 % t interval, Welch–Satterthwaite "
        f"df {iv.df:.1f}, {iv.note}, {iv.seeds} seeds)"
    )


NOT_FULL = "not testable here (not full-parameter)"
STEP_COST = (
    "a DPZero step costs what a MeZO step costs (fastest-step time within 10 %, memory within 50 MiB; the "
    "runs ran at different times on a shared machine, so the least-disturbed step is compared)"
)
FO_COST = "DP-AdamW costs more time per step and more memory than DPZero"


def _t5_paired(rows: Sequence[LMRow], task: str, epsilon: float) -> tuple[list, list] | None:
    """DPZero's per-seed correctness vectors with sphere and with Gaussian directions on ``task`` at
    ``epsilon``, paired by seed; None unless every seed has both with per-example results of one
    length."""
    of = {
        d: {
            r.seed: r
            for r in rows
            if (r.task, r.method, r.direction, r.epsilon) == (task, "dpzero", d, epsilon)
        }
        for d in ("sphere", "gaussian")
    }
    seeds = sorted(of["sphere"])
    if not seeds or seeds != sorted(of["gaussian"]):
        return None
    pairs = [(of["sphere"][s], of["gaussian"][s]) for s in seeds]
    if any(not x.correct or not y.correct or len(x.correct) != len(y.correct) for x, y in pairs):
        return None
    return [from_bits(x.correct) for x, _ in pairs], [from_bits(y.correct) for _, y in pairs]


def _t5_accuracies(rows: Sequence[LMRow], task: str, direction: str, epsilon: float) -> list[float]:
    wanted = (task, "dpzero", direction, epsilon)
    return [r.accuracy for r in rows if (r.task, r.method, r.direction, r.epsilon) == wanted]


def _label(key: str) -> str:
    return {"zero-shot": "zero-shot", "mezo": "MeZO"}.get(key, key.replace("dpzero", "DPZero"))


def _accuracies(t2: dict, task: str, *keys: str) -> str:
    return ", ".join(f"{_label(k)} {tables.fmt(t2[k][task])} %" for k in keys)
