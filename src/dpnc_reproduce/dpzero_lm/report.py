"""The dpzero-lm experiment's claims: the paper's (docs/papers.md, DPZero §4.2) as they should read
for this model and recipe, judged on the rows, and their declaration before the run."""

from __future__ import annotations

import math
from collections.abc import Sequence

import dpnc_reproduce.dpzero_lm.tables as tables
from dpnc_reproduce import facts
from dpnc_reproduce.claims import (
    Interval,
    accuracy_difference,
    all_hold,
    below,
    exceeds,
    from_bits,
    paired_accuracy_difference,
    paired_ratio,
    within,
)
from dpnc_reproduce.dpzero_lm.run import PRIVATE, TASKS, LMConfig, LMRow
from dpnc_reproduce.dpzero_lm.tables import PAPER_TABLE2
from dpnc_reproduce.protocol import Claim, Declared
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


def declare(config: LMConfig) -> list[Declared]:
    t = (
        "95 % t interval of the accuracy difference (points), Welch–Satterthwaite df of its seed and test-set "
        "parts, paired by test example and seed where per-example results exist; one seed: no verdict"
    )
    return [
        Declared(
            "every private run is (ε, δ)-DP by its own ledger",
            "at most",
            "the target ε (RDP and PLD)",
            "every run",
        ),
        Declared(
            "SST-2: DPZero ε = 6 − zero-shot and DPZero ε = 2 − zero-shot",
            "above",
            "0 points (Table 2's lower bound; the paper's gains +13.2 and +12.8 shown beside)",
            t,
        ),
        Declared(
            "SST-5, SNLI, MNLI, RTE, TREC (each run): DPZero ε = 6 − zero-shot",
            "above",
            "0 points",
            t,
        ),
        Declared(
            "SST-2: MeZO − DPZero ε = 2 (the Table 3 caption)",
            "within",
            f"±{CAPTION_TOL:g} point",
            t,
        ),
        Declared(
            "MeZO − DPZero ε = 6, on every task run",
            "at most",
            f"{PAPER_MAX_DROP:.1f} points (the paper's largest drop, {PAPER_MAX_DROP_TASK})",
            t + "; judged per task and on every task (every task must hold)",
        ),
        Declared(
            "MeZO − zero-shot, on every task run",
            "above",
            "0 points",
            t + "; judged per task and on every task (every task must hold)",
        ),
        Declared(
            "(DPZero ε = 6 − zero-shot) / (MeZO − zero-shot), on every task run",
            "above",
            f"{MIN_SHARE:.2f} (the paper: {min(PAPER_SHARES.values()):.2f}–"
            f"{max(PAPER_SHARES.values()):.2f})",
            "Fieller's 95 % interval of the ratio of the paired mean gains (per-seed and per-example "
            "parts of x − r·y, Welch–Satterthwaite df at the estimate); no verdict where MeZO's gain "
            "interval includes 0 or lies below it, or with one seed; judged per task and on every task "
            "(every task must hold)",
        ),
        Declared(
            "the longest run's wall time",
            "at most",
            f"{MAX_RUN_MINUTES} minutes",
            "the measured time",
        ),
        Declared(
            "Table 3's cost claims (DPZero's step costs MeZO's; DP-AdamW's more)",
            "as stated",
            "only with every parameter trained (--train all): in head mode the frozen encoder dominates",
            "measured time and memory",
        ),
        Declared(
            "sphere − Gaussian directions (Table 5)",
            "no difference detectable",
            "0 (reported with the resolution: the interval's half-width)",
            t + "; paired by seed and test example where per-example results exist",
        ),
    ]


def check_claims(rows: Sequence[LMRow], cfg: LMConfig) -> list[Claim]:
    """The paper's claims (DPZero §4.2) as they should read for this model and recipe, each with our
    numbers.

    An accuracy claim "a − b exceeds θ" holds only when the whole 95 % interval of a − b lies above
    θ, fails when all of it lies at or below θ, and has no signal (None) otherwise
    (:func:`~dpnc_reproduce.claims.verdict`). The interval is a t interval with the
    Welch–Satterthwaite degrees of freedom of its seed and test-set parts: paired
    (:func:`~dpnc_reproduce.claims.paired_accuracy_difference`: both methods scored on the same test
    examples, seeds paired) where every run kept its per-example results, else unpaired
    (:func:`~dpnc_reproduce.claims.accuracy_difference`, independent binomials: wider). One seed: no
    verdict. The paper's three Table 2 claims are judged per task and as the paper states them, on
    every task run (one failing task fails the claim): "close to MeZO" against its largest drop at ε
    = 6 (2.6 points); the share of MeZO's gain over zero-shot that DPZero at ε = 6 keeps, at least
    0.90 (:func:`gain_share`: Fieller's interval); MeZO above zero-shot."""
    test_of = {r.task: r.test_examples for r in rows}
    claims = []
    private = [r for r in rows if r.method in PRIVATE]
    if private:
        over = [
            p
            for p in private
            if not (
                p.epsilon_rdp <= p.epsilon * (1 + 1e-9) and p.epsilon_pld <= p.epsilon * (1 + 1e-9)
            )
        ]
        rdp, pld = (
            max(getattr(p, k) / p.epsilon for p in private) for k in ("epsilon_rdp", "epsilon_pld")
        )
        claims.append(
            Claim(
                "every private run is (ε, δ)-DP: ε by RDP and by PLD, from the run's own ledger with "
                "the declared n (k × classes), ≤ the target",
                not over,
                f"{len(private) - len(over)} of {len(private)} runs; max RDP ε / target "
                f"{rdp:.4f}, max PLD ε / target {pld:.4f}",
                facts={
                    "runs": len(private),
                    "runs_over": len(over),
                    "max_rdp_ratio": rdp,
                    "max_pld_ratio": pld,
                },
            )
        )
    t2 = tables.table2(rows, cfg)

    def difference(task: str, a: str, b: str) -> Interval | None:
        """a − b on ``task`` (points) and its 95 % interval; None where either did not run."""
        if task not in t2.get(a, {}) or task not in t2.get(b, {}):
            return None
        paired = _paired(rows, task, a, b)
        if paired is not None:
            return paired_accuracy_difference(*paired)
        return accuracy_difference(
            _accuracies_of(rows, task, a), _accuracies_of(rows, task, b), test_of[task]
        )

    def judge(task: str, a: str, b: str, threshold: float, statement: str, expected: float) -> None:
        """The claim "a − b > threshold" on ``task``, if both ran; ``expected``: the paper's a − b
        (for its power)."""
        iv = difference(task, a, b)
        if iv is None:
            return
        claims.append(
            powered_claim(
                statement,
                iv,
                exceeds(iv, threshold),
                expected,
                threshold,
                f"{_points(iv)} ({_label(a)} − {_label(b)}; {_accuracies(t2, task, a, b)})",
            )
        )

    for e in (6, 2):
        judge(
            "SST-2",
            f"dpzero ε={e}",
            "zero-shot",
            0.0,
            f"SST-2: DPZero at ε = {e} beats zero-shot (Table 2; the "
            f"paper's gain {PAPER_GAIN[('SST-2', e)]:+.1f} points)",
            PAPER_GAIN[("SST-2", e)],
        )
    caption = difference("SST-2", "mezo", "dpzero ε=2")
    if (
        caption is not None
    ):  # within ±1: two one-sided tests; the paper's 0.7 lies 0.3 inside the nearer edge
        paper = PAPER_TABLE2["mezo"]["SST-2"][0] - PAPER_TABLE2["dpzero ε=2"]["SST-2"][0]
        claims.append(
            powered_claim(
                f"SST-2: DPZero at ε = 2 is within {CAPTION_TOL:g} point of MeZO "
                "(the Table 3 caption; the paper: 92.5 vs 91.8)",
                caption,
                within(caption, 0.0, CAPTION_TOL),
                paper,
                CAPTION_TOL,
                f"{_points(caption)} (MeZO − DPZero ε=2; {_accuracies(t2, 'SST-2', 'mezo', 'dpzero ε=2')})",
            )
        )
    for task in ("SST-5", "SNLI", "MNLI", "RTE", "TREC"):
        judge(
            task,
            "dpzero ε=6",
            "zero-shot",
            0.0,
            f"{task}: DPZero at ε = 6 beats zero-shot (Table 2; the "
            f"paper's gain {PAPER_GAIN[(task, 6)]:+.1f} points)",
            PAPER_GAIN[(task, 6)],
        )
    run = [t for t in TASKS if t in cfg.tasks]
    close = {t: d for t in run if (d := difference(t, "mezo", "dpzero ε=6")) is not None}
    mezo = {t: d for t in run if (d := difference(t, "mezo", "zero-shot")) is not None}
    shares = {t: iv for t in run if (iv := gain_share(rows, t, mezo.get(t))) is not None}
    per_task: list[Claim] = []
    verdicts: dict[str, dict[str, bool | None]] = {"close": {}, "share": {}, "mezo": {}}
    for t in run:
        if t in close:
            drop = PAPER_TABLE2["mezo"][t][0] - PAPER_TABLE2["dpzero ε=6"][t][0]
            c = powered_claim(
                f"{t}: DPZero at ε = 6 loses at most {PAPER_MAX_DROP:.1f} points to MeZO (the paper's "
                f"drop {drop:.1f})",
                close[t],
                below(close[t], PAPER_MAX_DROP),
                drop,
                PAPER_MAX_DROP,
                f"{_points(close[t])} (MeZO − DPZero ε=6; {_accuracies(t2, t, 'mezo', 'dpzero ε=6')})",
            )
            per_task.append(c)
            verdicts["close"][t] = c.holds
        if t in shares:
            c = powered_claim(
                f"{t}: DPZero at ε = 6 keeps at least {MIN_SHARE:.2f} of MeZO's gain over zero-shot "
                f"(the paper: {PAPER_SHARES[t]:.2f})",
                shares[t],
                _share_verdict(shares[t]),
                PAPER_SHARES[t],
                MIN_SHARE,
                _share(shares[t]) + f" ((DPZero ε=6 − zero-shot) / (MeZO − zero-shot); "
                f"{_accuracies(t2, t, 'zero-shot', 'mezo', 'dpzero ε=6')})",
                unit="",
            )
            per_task.append(c)
            verdicts["share"][t] = c.holds
        if t in mezo:
            gain = PAPER_TABLE2["mezo"][t][0] - PAPER_TABLE2["zero-shot"][t][0]
            c = powered_claim(
                f"{t}: fine-tuning (MeZO) beats zero-shot (the paper's gain {gain:+.1f} points)",
                mezo[t],
                exceeds(mezo[t], 0.0),
                gain,
                0.0,
                f"{_points(mezo[t])} (MeZO − zero-shot)",
            )
            per_task.append(c)
            verdicts["mezo"][t] = c.holds
    missing = [t for t in TASKS if t not in close]
    not_run = f"; not judged (not run here): {', '.join(missing)}" if missing else ""
    weak: dict[str, list[str]] = {k: [] for k in verdicts}
    for c in per_task:
        if c.status == UNDERPOWERED:
            kind = (
                "share"
                if "keeps at least" in c.statement
                else "close"
                if "loses at most" in c.statement
                else "mezo"
            )
            weak[kind].append(c.statement.split(":")[0])

    def underpowered(kind: str) -> str:
        return (
            f"; underpowered for this design (not judged): {', '.join(weak[kind])}"
            if weak[kind]
            else ""
        )

    if close:  # the paper's claim, on every task: DPZero at ε = 6 is close to MeZO
        claims.append(
            Claim(
                f"DPZero at ε = 6 loses at most {PAPER_MAX_DROP:.1f} points to MeZO on every task (the "
                f"paper's largest drop at ε = 6, on {PAPER_MAX_DROP_TASK})",
                all_hold(list(verdicts["close"].values())),
                "; ".join(f"{t}: {_points(d)}" for t, d in close.items())
                + " (MeZO − DPZero ε=6)"
                + not_run
                + underpowered("close"),
                facts=_every_task(close, PAPER_MAX_DROP, verdicts["close"], weak["close"], missing),
            )
        )
    if mezo:
        claims.append(
            Claim(
                "fine-tuning (MeZO) beats zero-shot on every task",
                all_hold(list(verdicts["mezo"].values())),
                "; ".join(f"{t}: {_points(d)}" for t, d in mezo.items())
                + " (MeZO − zero-shot)"
                + underpowered("mezo"),
                facts=_every_task(mezo, 0.0, verdicts["mezo"], weak["mezo"]),
            )
        )
    if shares:
        claims.append(
            Claim(
                f"DPZero at ε = 6 keeps at least {MIN_SHARE:.2f} of MeZO's gain over zero-shot on every "
                f"task (the paper: {min(PAPER_SHARES.values()):.2f}–{max(PAPER_SHARES.values()):.2f})",
                all_hold(list(verdicts["share"].values())),
                "; ".join(f"{t}: {_share(iv)}" for t, iv in shares.items())
                + " ((DPZero ε=6 − zero-shot) / (MeZO − zero-shot))"
                + not_run
                + underpowered("share"),
                facts=_every_task(shares, MIN_SHARE, verdicts["share"], weak["share"], missing),
            )
        )
    if rows:
        longest = max(rows, key=lambda r: r.wall_seconds)
        claims.append(
            Claim(
                f"every run finishes within {MAX_RUN_MINUTES} minutes on this machine (building the "
                "trainer, filling the caches where it did, training, evaluating)",
                longest.wall_seconds <= 60 * MAX_RUN_MINUTES,
                f"longest: {longest.run}, {longest.wall_seconds / 60:.1f} min",
                facts={
                    "longest_minutes": longest.wall_seconds / 60,
                    "limit_minutes": MAX_RUN_MINUTES,
                },
            )
        )
    claims += per_task + _table3_claims(rows, cfg) + _table5_claims(rows, cfg, test_of)
    return claims


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
    """A claim read from its interval first: an interval that lies beyond the threshold decides it
    (holds or fails) whatever the design's power; a rejection at the 5 % level stands. Only an
    interval that straddles the threshold can read "underpowered for this design", and only where
    the design was declared so before the data: ``declared_mde``, the minimum detectable effect (80
    % power, one-sided at 5 %) that the declaration computed by the same variance model that judges,
    exceeds the distance between the paper's value (``expected``) and ``threshold``. Without a
    declaration a straddling interval reads no signal; the MDE computed from the run's own spread
    (:func:`~dpnc_reproduce.variance.minimum_detectable_effect`, post hoc) is shown as information
    only."""
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
    if holds is None and declared_mde is not None and declared_mde > distance:
        return Claim(
            statement,
            None,
            evidence + f"; underpowered (declared before the data): the design detects "
            f"{declared_mde:.2f}{unit} (80 % power), the paper's value lies {distance:.2f}{unit} from the "
            "threshold, and the interval straddles it",
            UNDERPOWERED,
            read,
        )
    if not math.isfinite(mde):
        return Claim(statement, holds, evidence, facts=read)
    return Claim(
        statement,
        holds,
        evidence
        + f"; post-hoc MDE {mde:.2f}{unit} (80 % power, this run's spread; information only), the "
        f"paper's distance to the threshold {distance:.2f}{unit}",
        facts=read,
    )


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


def _table3_claims(rows: Sequence[LMRow], cfg: LMConfig) -> list[Claim]:
    t3 = {r.method: r for r in tables.table3(rows, cfg)}
    if "mezo" not in t3 or "dpzero" not in t3:
        return []
    zo, mezo = t3["dpzero"], t3["mezo"]
    fastest = (
        zo.min_seconds_per_step / mezo.min_seconds_per_step
        if mezo.min_seconds_per_step
        else math.nan
    )
    if (
        cfg.train != "all"
    ):  # the paper's Table 3 fine-tunes every parameter; here the frozen encoder dominates
        why = (
            f"not testable here: --train {cfg.train} trains a small part of the model, so its frozen encoder "
            "dominates time and memory; Table 3's claims are about full-parameter fine-tuning"
        )
        out = [
            Claim(
                STEP_COST,
                None,
                f"{why}; measured anyway: fastest-step time ratio DPZero / MeZO {fastest:.2f}, peak memory "
                f"difference {zo.peak_rss_mib - mezo.peak_rss_mib:+.0f} MiB",
                NOT_FULL,
                {
                    "fastest_ratio": fastest,
                    "memory_difference_mib": zo.peak_rss_mib - mezo.peak_rss_mib,
                },
            )
        ]
        if "dp-adamw" in t3:
            out.append(Claim(FO_COST, None, why, NOT_FULL))
        return out
    ratio = (
        zo.median_seconds_per_step / mezo.median_seconds_per_step
        if mezo.median_seconds_per_step
        else math.nan
    )
    fastest = (
        zo.min_seconds_per_step / mezo.min_seconds_per_step
        if mezo.min_seconds_per_step
        else math.nan
    )
    mem = zo.peak_rss_mib - mezo.peak_rss_mib
    claims = [
        Claim(
            STEP_COST,
            abs(fastest - 1) <= 0.10 and abs(mem) <= 50,
            f"time ratio DPZero / MeZO: fastest steps {fastest:.2f}, medians {ratio:.2f}; peak memory "
            f"difference {mem:+.0f} MiB",
            facts={"fastest_ratio": fastest, "median_ratio": ratio, "memory_difference_mib": mem},
        )
    ]
    if "dp-adamw" in t3:
        fo = t3["dp-adamw"]
        time_ratio = fo.median_seconds_per_step / zo.median_seconds_per_step
        claims.append(
            Claim(
                FO_COST,
                time_ratio > 1 and fo.peak_rss_mib > zo.peak_rss_mib,
                f"DP-AdamW / DPZero: time ×{time_ratio:.1f}, "
                f"memory ×{fo.peak_rss_mib / zo.peak_rss_mib:.2f}",
                facts={"time_ratio": time_ratio, "memory_ratio": fo.peak_rss_mib / zo.peak_rss_mib},
            )
        )
    return claims


NOT_FULL = "not testable here (not full-parameter)"
STEP_COST = (
    "a DPZero step costs what a MeZO step costs (fastest-step time within 10 %, memory within 50 MiB; the "
    "runs ran at different times on a shared machine, so the least-disturbed step is compared)"
)
FO_COST = "DP-AdamW costs more time per step and more memory than DPZero"


def _table5_claims(rows: Sequence[LMRow], cfg: LMConfig, test_of: dict[str, int]) -> list[Claim]:
    """Table 5, sphere against Gaussian directions: the paper's own data (differences up to 0.6
    points with s.e. up to 1.3) could show no equivalence margin, so the claim is reported as a
    difference test: a difference is detected (the claim fails) where the interval excludes 0;
    otherwise "no difference detectable at this resolution", with the resolution (the interval's
    half-width). Paired by seed and test example where every seed kept its per-example results, else
    unpaired."""
    t5 = tables.table5(rows, cfg)
    pairs = [
        (task, eps)
        for eps in cfg.epsilons
        for task in cfg.sphere_tasks
        if task in t5.get(("sphere", eps), {}) and task in t5.get(("gaussian", eps), {})
    ]
    if not pairs:
        return []
    diffs = {}
    for task, eps in pairs:
        paired = _t5_paired(rows, task, eps)
        diffs[(task, eps)] = (
            paired_accuracy_difference(*paired)
            if paired is not None
            else accuracy_difference(
                _t5_accuracies(rows, task, "sphere", eps),
                _t5_accuracies(rows, task, "gaussian", eps),
                test_of[task],
            )
        )
    detected = [k for k, iv in diffs.items() if iv.low > 0 or iv.high < 0]
    finite = [iv for iv in diffs.values() if math.isfinite(iv.low) and math.isfinite(iv.high)]
    resolution = max(((iv.high - iv.low) / 2 for iv in finite), default=math.inf)
    status = (
        f"no difference detectable at this resolution (±{resolution:.1f} points)"
        if finite
        else "no signal"
    )
    return [
        Claim(
            "sphere and Gaussian directions do about as well (Table 5; the paper's largest difference is 0.6 "
            "points): a difference is detected where the interval excludes 0",
            False if detected else None,
            "; ".join(f"{t} ε={e:g}: {_points(iv)}" for (t, e), iv in diffs.items())
            + " (sphere − Gaussian)",
            "" if detected else status,
            facts.parts({(t, f"eps{e:g}"): iv for (t, e), iv in diffs.items()}, 0.0)
            | {"detected": len(detected), "resolution": resolution},
        )
    ]


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
