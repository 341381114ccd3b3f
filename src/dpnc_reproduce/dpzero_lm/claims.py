"""The dpzero-lm claims (docs/papers.md, DPZero §4.2) as they should read for this model and
recipe, each one object (:class:`~dpnc_reproduce.judging.ClaimSpec`): declared before the run and
judged after it from the same spec, in the order the tables show them.

An accuracy claim "a − b exceeds θ" holds only when the whole 95 % interval of a − b lies above θ,
fails when all of it lies at or below θ, and has no signal (None) otherwise. The interval is a t
interval with the Welch–Satterthwaite degrees of freedom of its seed and test-set parts: paired by
test example and seed where every run kept its per-example results, else unpaired (wider). One
seed: no verdict. The paper's three Table 2 claims are judged per task and as the paper states
them, on every task run (one failing task fails the claim): "close to MeZO" against its largest
drop at ε = 6; the share of MeZO's gain over zero-shot that DPZero at ε = 6 keeps, at least 0.90
(Fieller's interval); MeZO above zero-shot. The statistics: :mod:`dpnc_reproduce.claims`; the
helpers that pair the runs: :mod:`.report`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cached_property

import dpnc_reproduce.dpzero_lm.tables as tables
from dpnc_reproduce import facts
from dpnc_reproduce.claims import (
    Interval,
    accuracy_difference,
    all_hold,
    below,
    exceeds,
    paired_accuracy_difference,
    within,
)
from dpnc_reproduce.dpzero_lm.report import (
    CAPTION_TOL,
    FO_COST,
    MAX_RUN_MINUTES,
    MIN_SHARE,
    NOT_FULL,
    PAPER_GAIN,
    PAPER_MAX_DROP,
    PAPER_MAX_DROP_TASK,
    PAPER_SHARES,
    POWERED,
    STEP_COST,
    _accuracies,
    _accuracies_of,
    _every_task,
    _label,
    _paired,
    _points,
    _share,
    _share_verdict,
    _t5_accuracies,
    _t5_paired,
    gain_share,
    powered_verdict,
)
from dpnc_reproduce.dpzero_lm.run import PRIVATE, TASKS, LMConfig, LMRow
from dpnc_reproduce.dpzero_lm.tables import PAPER_TABLE2
from dpnc_reproduce.judging import ClaimSpec, Verdict, on_view
from dpnc_reproduce.protocol import Claim
from dpnc_reproduce.variance import UNDERPOWERED

T_TEST = (
    "95 % t interval of the accuracy difference (points), Welch–Satterthwaite df of its seed and "
    "test-set parts, paired by test example and seed where per-example results exist; one seed: no "
    "verdict"
)
EVERY_TASK = "; judged per task and on every task (every task must hold)"
# a powered claim's evidence: the difference (or share), what is compared, the accuracies
EVIDENCE = ("{shown} ({compared}", "; {accuracies}", ")", *POWERED)
# a claim on every task: each task's interval, the tasks not run, the tasks underpowered
ON_EVERY_TASK = (
    "{listed} ({compared})",
    "; not judged (not run here): {missing}",
    "; underpowered for this design (not judged): {weak}",
)


class Runs:
    """What the claims read from one run's rows: Table 2, the accuracy differences with their
    intervals, and the per-task claims' verdicts."""

    def __init__(self, rows: Sequence[LMRow], cfg: LMConfig):
        self.rows, self.cfg = rows, cfg
        self.t2 = tables.table2(rows, cfg)
        self.test_of = {r.task: r.test_examples for r in rows}
        self.run = [t for t in TASKS if t in cfg.tasks]

    def difference(self, task: str, a: str, b: str) -> Interval | None:
        """a − b on ``task`` (points) and its 95 % interval; None where either did not run."""
        if task not in self.t2.get(a, {}) or task not in self.t2.get(b, {}):
            return None
        paired = _paired(self.rows, task, a, b)
        if paired is not None:
            return paired_accuracy_difference(*paired)
        return accuracy_difference(
            _accuracies_of(self.rows, task, a),
            _accuracies_of(self.rows, task, b),
            self.test_of[task],
        )

    def compared(
        self, task: str, a: str, b: str, judge: Callable, expected: float, threshold: float, **more
    ) -> Verdict | None:
        """The powered claim on a − b (:func:`~.report.powered_verdict`), if both ran; ``more``:
        what else its statement reads."""
        iv = self.difference(task, a, b)
        if iv is None:
            return None
        words = more | {
            "task": task,
            "shown": _points(iv),
            "compared": f"{_label(a)} − {_label(b)}",
            "accuracies": _accuracies(self.t2, task, a, b),
        }
        return powered_verdict(iv, judge(iv, threshold), expected, threshold, words)

    @cached_property
    def close(self) -> dict[str, Interval]:
        pairs = {t: self.difference(t, "mezo", "dpzero ε=6") for t in self.run}
        return {t: d for t, d in pairs.items() if d is not None}

    @cached_property
    def mezo(self) -> dict[str, Interval]:
        pairs = {t: self.difference(t, "mezo", "zero-shot") for t in self.run}
        return {t: d for t, d in pairs.items() if d is not None}

    @cached_property
    def shares(self) -> dict[str, Interval]:
        shares = {t: gain_share(self.rows, t, self.mezo.get(t)) for t in self.run}
        return {t: iv for t, iv in shares.items() if iv is not None}

    @cached_property
    def per_task(self) -> list[tuple[str, str, Verdict]]:
        """(kind, task, verdict) per task run, kinds "close", "share" and "mezo" in that order."""
        out = []
        for t in self.run:
            if t in self.close:
                drop = PAPER_TABLE2["mezo"][t][0] - PAPER_TABLE2["dpzero ε=6"][t][0]
                words = {"task": t, "drop": drop, "shown": _points(self.close[t])}
                words |= {
                    "compared": "MeZO − DPZero ε=6",
                    "accuracies": _accuracies(self.t2, t, "mezo", "dpzero ε=6"),
                }
                holds = below(self.close[t], PAPER_MAX_DROP)
                verdict = powered_verdict(self.close[t], holds, drop, PAPER_MAX_DROP, words)
                out.append(("close", t, verdict))
            if t in self.shares:
                iv = self.shares[t]
                words = {"task": t, "share_paper": PAPER_SHARES[t], "shown": _share(iv)}
                words |= {
                    "compared": "(DPZero ε=6 − zero-shot) / (MeZO − zero-shot)",
                    "accuracies": _accuracies(self.t2, t, "zero-shot", "mezo", "dpzero ε=6"),
                }
                holds = _share_verdict(iv)
                verdict = powered_verdict(iv, holds, PAPER_SHARES[t], MIN_SHARE, words, unit="")
                out.append(("share", t, verdict))
            if t in self.mezo:
                gain = PAPER_TABLE2["mezo"][t][0] - PAPER_TABLE2["zero-shot"][t][0]
                words = {"task": t, "mezo_gain": gain, "shown": _points(self.mezo[t])}
                words["compared"] = "MeZO − zero-shot"
                verdict = powered_verdict(
                    self.mezo[t], exceeds(self.mezo[t], 0.0), gain, 0.0, words
                )
                out.append(("mezo", t, verdict))
        return out

    def on_every_task(self, kind: str, shown: Callable, compared: str, missing: bool) -> Verdict:
        """The paper's claim of ``kind`` on every task run: all its per-task verdicts hold."""
        intervals = {"close": self.close, "share": self.shares, "mezo": self.mezo}[kind]
        parts = [(t, v) for k, t, v in self.per_task if k == kind]
        verdicts = {t: v.holds for t, v in parts}
        weak = [t for t, v in parts if v.status == UNDERPOWERED]
        left = [t for t in TASKS if t not in self.close] if missing else []
        words = {"listed": "; ".join(f"{t}: {shown(d)}" for t, d in intervals.items())}
        words |= {"compared": compared} | ({"missing": ", ".join(left)} if left else {})
        words |= {"weak": ", ".join(weak)} if weak else {}
        threshold = {"close": PAPER_MAX_DROP, "share": MIN_SHARE, "mezo": 0.0}[kind]
        numbers = _every_task(intervals, threshold, verdicts, weak, left)
        return Verdict(all_hold(list(verdicts.values())), numbers, words)


def _privacy(runs: Runs) -> list[Verdict]:
    private = [r for r in runs.rows if r.method in PRIVATE]
    if not private:
        return []
    over = [
        p
        for p in private
        if not (p.epsilon_rdp <= p.epsilon * (1 + 1e-9) and p.epsilon_pld <= p.epsilon * (1 + 1e-9))
    ]
    rdp, pld = (
        max(getattr(p, k) / p.epsilon for p in private) for k in ("epsilon_rdp", "epsilon_pld")
    )
    numbers = {"runs": len(private), "runs_over": len(over), "max_rdp_ratio": rdp}
    numbers["max_pld_ratio"] = pld
    return [Verdict(not over, numbers, {"runs_within": len(private) - len(over)})]


def _gains(runs: Runs, tasks: Sequence[str], epsilons: Sequence[int]) -> list[Verdict]:
    """DPZero at each ε beats zero-shot on each task (both ran), Table 2's lower bound."""
    verdicts = (
        runs.compared(t, f"dpzero ε={e}", "zero-shot", exceeds, PAPER_GAIN[(t, e)], 0.0, e=e)
        for t in tasks
        for e in epsilons
    )
    return [v for v in verdicts if v is not None]


def _caption(runs: Runs) -> list[Verdict]:
    # within ±1: two one-sided tests; the paper's 0.7 lies 0.3 inside the nearer edge
    paper = PAPER_TABLE2["mezo"]["SST-2"][0] - PAPER_TABLE2["dpzero ε=2"]["SST-2"][0]
    verdict = runs.compared(
        "SST-2", "mezo", "dpzero ε=2", lambda iv, tol: within(iv, 0.0, tol), paper, CAPTION_TOL
    )
    return [] if verdict is None else [verdict]


def _wall_time(runs: Runs) -> list[Verdict]:
    if not runs.rows:
        return []
    longest = max(runs.rows, key=lambda r: r.wall_seconds)
    numbers = {"longest_minutes": longest.wall_seconds / 60, "limit_minutes": MAX_RUN_MINUTES}
    holds = longest.wall_seconds <= 60 * MAX_RUN_MINUTES
    return [Verdict(holds, numbers, {"longest": longest.run})]


def _table3_step(runs: Runs) -> list[Verdict]:
    """Table 3: a DPZero step costs a MeZO step's time and memory; testable only where every
    parameter is trained (the paper's setting), measured anyway otherwise."""
    t3 = {r.method: r for r in tables.table3(runs.rows, runs.cfg)}
    if "mezo" not in t3 or "dpzero" not in t3:
        return []
    zo, mezo = t3["dpzero"], t3["mezo"]
    fastest = (
        zo.min_seconds_per_step / mezo.min_seconds_per_step
        if mezo.min_seconds_per_step
        else math.nan
    )
    numbers = {
        "fastest_ratio": fastest,
        "memory_difference_mib": zo.peak_rss_mib - mezo.peak_rss_mib,
    }
    if runs.cfg.train != "all":  # Table 3 fine-tunes every parameter: here the encoder dominates
        return [Verdict(None, numbers, {"why": _not_full(runs.cfg)}, NOT_FULL)]
    ratio = (
        zo.median_seconds_per_step / mezo.median_seconds_per_step
        if mezo.median_seconds_per_step
        else math.nan
    )
    numbers = {**numbers, "median_ratio": ratio}
    holds = abs(fastest - 1) <= 0.10 and abs(numbers["memory_difference_mib"]) <= 50
    return [Verdict(holds, numbers)]


def _table3_first_order(runs: Runs) -> list[Verdict]:
    """Table 3: DP-AdamW costs more time per step and more memory than DPZero."""
    t3 = {r.method: r for r in tables.table3(runs.rows, runs.cfg)}
    if not {"mezo", "dpzero", "dp-adamw"} <= t3.keys():
        return []
    if runs.cfg.train != "all":
        return [Verdict(None, {}, {"why": _not_full(runs.cfg)}, NOT_FULL)]
    fo, zo = t3["dp-adamw"], t3["dpzero"]
    time_ratio = fo.median_seconds_per_step / zo.median_seconds_per_step
    numbers = {"time_ratio": time_ratio, "memory_ratio": fo.peak_rss_mib / zo.peak_rss_mib}
    return [Verdict(time_ratio > 1 and fo.peak_rss_mib > zo.peak_rss_mib, numbers)]


def _not_full(cfg: LMConfig) -> str:
    return (
        f"not testable here: --train {cfg.train} trains a small part of the model, so its frozen "
        "encoder dominates time and memory; Table 3's claims are about full-parameter fine-tuning"
    )


def _table5(runs: Runs) -> list[Verdict]:
    """Table 5, sphere against Gaussian directions: the paper's own data (differences up to 0.6
    points with s.e. up to 1.3) could show no equivalence margin, so the claim is reported as a
    difference test: a difference is detected (the claim fails) where the interval excludes 0;
    otherwise "no difference detectable at this resolution", with the resolution (the interval's
    half-width). Paired by seed and test example where every seed kept its per-example results, else
    unpaired."""
    rows, cfg = runs.rows, runs.cfg
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
                runs.test_of[task],
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
    numbers = facts.parts({(t, f"eps{e:g}"): iv for (t, e), iv in diffs.items()}, 0.0)
    numbers |= {"detected": len(detected), "resolution": resolution}
    listed = "; ".join(f"{t} ε={e:g}: {_points(iv)}" for (t, e), iv in diffs.items())
    return [
        Verdict(
            False if detected else None, numbers, {"listed": listed}, "" if detected else status
        )
    ]


def specs(config: LMConfig) -> list[ClaimSpec]:
    """Every claim of a run of ``config`` (:data:`SPECS`), judged on one :class:`Runs` of the
    rows."""
    return on_view(SPECS, lambda rows: Runs(rows, config))


GAIN = "{task}: DPZero at ε = {e} beats zero-shot (Table 2; the paper's gain {paper:+.1f} points)"
# one per task and kind (:attr:`Runs.per_task`): each verdict records the field of its own statement
PER_TASK = (
    "{task}: DPZero at ε = 6 loses at most "
    + f"{PAPER_MAX_DROP:.1f}"
    + " points to MeZO (the paper's drop {drop:.1f})",
    "{task}: DPZero at ε = 6 keeps at least "
    + f"{MIN_SHARE:.2f}"
    + " of MeZO's gain over zero-shot (the paper: {share_paper:.2f})",
    "{task}: fine-tuning (MeZO) beats zero-shot (the paper's gain {mezo_gain:+.1f} points)",
)


def _every(
    runs: Runs, kind: str, shown: Callable, compared: str, *, missing: bool
) -> list[Verdict]:
    intervals = {"close": runs.close, "share": runs.shares, "mezo": runs.mezo}[kind]
    return [runs.on_every_task(kind, shown, compared, missing)] if intervals else []


SHARES = f"{min(PAPER_SHARES.values()):.2f}–{max(PAPER_SHARES.values()):.2f}"
OTHERS = ("SST-5", "SNLI", "MNLI", "RTE", "TREC")
# every claim in the tables' order, each judge reading a :class:`Runs` of the rows (:func:`specs`)
SPECS = (
    ClaimSpec(
        "every private run is (ε, δ)-DP: ε by RDP and by PLD, from the run's own ledger with "
        "the declared n (k × classes), ≤ the target",
        "{runs_within} of {runs} runs; max RDP ε / target {max_rdp_ratio:.4f}, max PLD ε / "
        "target {max_pld_ratio:.4f}",
        "at most",
        "the target ε (RDP and PLD)",
        "every run",
        _privacy,
    ),
    ClaimSpec(
        GAIN,
        EVIDENCE,
        "above",
        "0 points (Table 2's lower bound; the paper's gains "
        f"{PAPER_GAIN[('SST-2', 6)]:+.1f} and {PAPER_GAIN[('SST-2', 2)]:+.1f} shown beside)",
        T_TEST,
        lambda runs: _gains(runs, ("SST-2",), (6, 2)),
        declared="SST-2: DPZero ε = 6 − zero-shot and DPZero ε = 2 − zero-shot",
    ),
    ClaimSpec(
        f"SST-2: DPZero at ε = 2 is within {CAPTION_TOL:g} point of MeZO (the Table 3 caption; "
        "the paper: 92.5 vs 91.8)",
        EVIDENCE,
        "within",
        f"±{CAPTION_TOL:g} point",
        T_TEST,
        _caption,
    ),
    ClaimSpec(
        GAIN,
        EVIDENCE,
        "above",
        "0 points",
        T_TEST,
        lambda runs: _gains(runs, OTHERS, (6,)),
        declared=f"{', '.join(OTHERS)} (each run): DPZero ε = 6 − zero-shot",
    ),
    ClaimSpec(
        f"DPZero at ε = 6 loses at most {PAPER_MAX_DROP:.1f} points to MeZO on every task (the "
        f"paper's largest drop at ε = 6, on {PAPER_MAX_DROP_TASK})",
        ON_EVERY_TASK,
        "at most",
        f"{PAPER_MAX_DROP:.1f} points (the paper's largest drop, {PAPER_MAX_DROP_TASK})",
        T_TEST + EVERY_TASK,
        lambda runs: _every(runs, "close", _points, "MeZO − DPZero ε=6", missing=True),
    ),
    ClaimSpec(
        "fine-tuning (MeZO) beats zero-shot on every task",
        ON_EVERY_TASK,
        "above",
        "0 points",
        T_TEST + EVERY_TASK,
        lambda runs: _every(runs, "mezo", _points, "MeZO − zero-shot", missing=False),
    ),
    ClaimSpec(
        f"DPZero at ε = 6 keeps at least {MIN_SHARE:.2f} of MeZO's gain over zero-shot on every "
        f"task (the paper: {SHARES})",
        ON_EVERY_TASK,
        "above",
        f"{MIN_SHARE:.2f} (the paper: {SHARES})",
        "Fieller's 95 % interval of the ratio of the paired mean gains (per-seed and "
        "per-example parts of x − r·y, Welch–Satterthwaite df at the estimate); no verdict "
        "where MeZO's gain interval includes 0 or lies below it, or with one seed" + EVERY_TASK,
        lambda runs: _every(
            runs,
            "share",
            _share,
            "(DPZero ε=6 − zero-shot) / (MeZO − zero-shot)",
            missing=True,
        ),
    ),
    ClaimSpec(
        f"every run finishes within {MAX_RUN_MINUTES} minutes on this machine (building the "
        "trainer, filling the caches where it did, training, evaluating)",
        "longest: {longest}, {longest_minutes:.1f} min",
        "at most",
        f"{MAX_RUN_MINUTES} minutes",
        "the measured time",
        _wall_time,
    ),
    ClaimSpec(
        PER_TASK,
        EVIDENCE,
        "",
        "",
        "",
        lambda runs: [v for _, _, v in runs.per_task],
        declares=False,  # the parts of the three claims on every task, declared with them
    ),
    ClaimSpec(
        STEP_COST,
        (
            "{why}; measured anyway: fastest-step time ratio DPZero / MeZO "
            "{fastest_ratio:.2f}, peak memory difference {memory_difference_mib:+.0f} MiB",
            "time ratio DPZero / MeZO: fastest steps {fastest_ratio:.2f}, medians "
            "{median_ratio:.2f}; peak memory difference {memory_difference_mib:+.0f} MiB",
        ),
        "within",
        "10 % (fastest step), 50 MiB (peak memory); only with every parameter trained "
        "(--train all): in head mode the frozen encoder dominates",
        "measured time and memory",
        _table3_step,
    ),
    ClaimSpec(
        FO_COST,
        ("{why}", "DP-AdamW / DPZero: time ×{time_ratio:.1f}, memory ×{memory_ratio:.2f}"),
        "above",
        "1 (time and memory ratios); only with every parameter trained (--train all)",
        "measured time and memory",
        _table3_first_order,
    ),
    ClaimSpec(
        "sphere and Gaussian directions do about as well (Table 5; the paper's largest "
        "difference is 0.6 points): a difference is detected where the interval excludes 0",
        "{listed} (sphere − Gaussian)",
        "no difference detectable",
        "0 (reported with the resolution: the interval's half-width)",
        T_TEST + "; paired by seed and test example where per-example results exist",
        _table5,
    ),
)


def check_claims(rows: Sequence[LMRow], cfg: LMConfig) -> list[Claim]:
    """Every claim of :func:`specs` judged on ``rows``."""
    return [claim for spec in specs(cfg) for claim in spec.claims(rows)]
