"""The dpzero-dimension claims, each one object (:class:`~dpnc_reproduce.judging.ClaimSpec`):
declared before the run and judged on its rows from the same spec.

The project's own claim (the paper never varies d), that DPZero keeps MeZO's gain whatever the
trained dimension d: per task, a one-sided slope of DPZero − MeZO against log10 d over the modes
where MeZO learns, above −:data:`~.report.SLOPE_MARGIN` points per decade, and on every task;
beside it, per task and mode, whether MeZO learns and the share of its gain DPZero keeps. The
quantities and their intervals: :mod:`.report`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from dpnc_reproduce import facts
from dpnc_reproduce.claims import Interval, all_hold, exceeds
from dpnc_reproduce.dpzero_dimension.report import (
    MIN_SHARE,
    SLOPE_MARGIN,
    dimension,
    learns,
    modes_of,
    share,
    slope,
    test_rows,
)
from dpnc_reproduce.judging import ClaimSpec, Verdict, every_run, on_view

WORD = {True: "holds", False: "fails", None: "no signal"}
OWN = "the project's own claim: the paper never varies d"
PAIRED = (
    "95 % t interval, paired by test example and seed, Welch–Satterthwaite df of the seed part "
    "(k − 1) and the test-example part (m − 1); one seed: no verdict"
)


class Runs:
    """One run's rows as the claims read them: the tasks, and per task the modes in which MeZO
    learns (:func:`~.report.learns`, computed once)."""

    def __init__(self, rows: Sequence, config):
        self.rows, self.config = list(rows), config
        self.tasks = list(dict.fromkeys(r.task for r in test_rows(self.rows)))
        self._gains: dict[str, dict[str, Interval]] = {}

    def gains(self, task: str) -> dict[str, Interval]:
        if task not in self._gains:
            self._gains[task] = learns(self.rows, task)
        return self._gains[task]

    def learned(self, task: str) -> list[str]:
        return [m for m, iv in self.gains(task).items() if exceeds(iv, 0.0)]

    def slope_verdict(self, task: str, e: float) -> Verdict:
        """DPZero ε − MeZO against log10 d over the modes where MeZO learns (two at least)."""
        learned = self.learned(task)
        iv = slope(self.rows, task, learned, e) if len(learned) >= 2 else None
        read = {"modes_learned": len(learned), "threshold": -SLOPE_MARGIN}
        words = {"task": task, "e": e}
        if iv is None:
            return Verdict(None, read, words | {"few": ", ".join(learned)})
        words |= {"interval": iv, "over": ", ".join(learned)}
        return Verdict(exceeds(iv, -SLOPE_MARGIN), read | facts.interval(iv), words)


def _slopes(runs: Runs, e: float) -> list[Verdict]:
    return [runs.slope_verdict(t, e) for t in runs.tasks]


def _every_task(runs: Runs, e: float) -> list[Verdict]:
    per_task = {t: runs.slope_verdict(t, e).holds for t in runs.tasks}
    if not per_task:
        return []
    numbers = facts.counts(per_task.values()) | {
        facts.name(t, "holds"): facts.verdict(v) for t, v in per_task.items()
    }
    listed = "; ".join(f"{t}: {WORD[v]}" for t, v in per_task.items())
    return [Verdict(all_hold(list(per_task.values())), numbers, {"listed": listed})]


def _learns(runs: Runs) -> list[Verdict]:
    return [
        Verdict(
            exceeds(iv, 0.0),
            facts.interval(iv, 0.0),
            {"task": t, "mode": m, "d": dimension(runs.rows, t, m), "interval": iv},
        )
        for t in runs.tasks
        for m, iv in runs.gains(t).items()
    ]


def _shares(runs: Runs) -> list[Verdict]:
    eps, out = max(runs.config.epsilons), []
    for t in runs.tasks:
        gains = runs.gains(t)
        for mode in modes_of(runs.rows, t):
            iv = share(runs.rows, t, mode, eps)
            if iv is None:
                continue
            gained = gains.get(mode) is not None and exceeds(gains[mode], 0.0)
            numbers = facts.interval(iv, MIN_SHARE) | {"mezo_gain_holds": facts.verdict(gained)}
            words = {"task": t, "mode": mode, "interval": iv}
            if not gained and math.isfinite(iv.low):
                words["note"] = "; MeZO's gain is not above 0: no verdict"
            out.append(Verdict(exceeds(iv, MIN_SHARE) if gained else None, numbers, words))
    return out


def specs(config) -> list[ClaimSpec]:
    """Every claim of a run of ``config``, in the tables' order (the slope claims and the claims on
    every task one spec per ε); the judges share one :class:`Runs` of the rows they are given."""
    eps = max(config.epsilons)
    judged = [
        *map(slope_spec, config.epsilons),
        *map(every_task_spec, config.epsilons),
        learns_spec(config.steps),
        shares_spec(eps),
    ]
    return [PRIVACY, *on_view(judged, lambda rows: Runs(rows, config))]


PRIVACY = every_run(
    "every private run is (ε, δ)-DP: ε by RDP and by PLD from its own ledger ≤ the target",
    "{runs_within} of {runs} runs",
    lambda r: max(r.epsilon_rdp, r.epsilon_pld) / r.epsilon,
    names=(None, "runs_over"),
    select=lambda r: r.phase == "test" and r.private,
    slack=1e-9,
    threshold="the target ε (RDP and PLD)",
)


def slope_spec(e: float) -> ClaimSpec:
    """Per task: DPZero ε − MeZO does not fall faster than the margin per decade of d."""
    said = (
        f"DPZero ε = {e:g} − MeZO does not fall faster than {SLOPE_MARGIN:g} point per decade of d "
        f"(the share of MeZO's gain kept does not fall with d; {OWN})"
    )
    return ClaimSpec(
        ("{task}: ", said),
        (
            "no signal: MeZO learns in {modes_learned} mode(s) ({few}); a slope needs two",
            "{interval} over {over} (DPZero ε=" + f"{e:g}" + " − MeZO)",
        ),
        "above",
        f"−{SLOPE_MARGIN:g} points per decade of d",
        PAIRED + "; the slope a fixed least-squares combination of the modes in which MeZO learns "
        "(its claim below holds); fewer than two such modes: no verdict",
        lambda runs: _slopes(runs, e),
        declared=f"per task: {said}",
    )


def every_task_spec(e: float) -> ClaimSpec:
    """The slope claim of ε on every task."""
    return ClaimSpec(
        f"on every task: the share of MeZO's gain that DPZero ε = {e:g} keeps does not fall with d "
        f"(slope above −{SLOPE_MARGIN:g} point per decade; {OWN})",
        "{listed}",
        "above",
        f"−{SLOPE_MARGIN:g} points per decade of d, on every task",
        "every task's slope claim holds",
        lambda runs: _every_task(runs, e),
    )


def learns_spec(steps: int) -> ClaimSpec:
    """Per task and mode: does MeZO learn in ``steps`` steps?"""
    said = f"MeZO beats zero-shot in T = {steps} steps"
    return ClaimSpec(
        ("{task}, {mode} (d = {d:,}): ", said),
        "{interval} points (MeZO − zero-shot)",
        "above",
        "0 points",
        PAIRED,
        _learns,
        declared=f"per task and mode: {said}",
    )


def shares_spec(eps: float) -> ClaimSpec:
    """Per task and mode: the share of MeZO's gain that DPZero at the largest ε keeps."""
    said = f"DPZero ε = {eps:g} keeps at least {MIN_SHARE:.2f} of MeZO's gain"
    return ClaimSpec(
        ("{task}, {mode}: ", said),
        ("{interval}", "{note}"),
        "above",
        f"{MIN_SHARE:.2f} (the paper's smallest Table 2 share)",
        "Fieller's 95 % interval of the ratio of paired mean gains; no verdict where MeZO's gain "
        "interval includes 0, or with one seed",
        _shares,
        declared=f"per task and mode: {said}",
    )


def check_claims(rows: Sequence, config) -> list:
    """Every claim of :func:`specs` judged on ``rows``."""
    return [claim for spec in specs(config) for claim in spec.claims(rows)]
