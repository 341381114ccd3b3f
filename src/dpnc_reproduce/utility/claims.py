"""The utility claims, each one object (:class:`~dpnc_reproduce.judging.ClaimSpec`): declared before
the run and judged on its rows from the same spec.

Each paper method is judged on its own: a progress margin first (:data:`~.report.PROGRESS`), then
paired geometric ratios against the hand-set, privately tuned and compute-matched baselines
(:data:`~.report.YARDSTICKS`), and for the O2NC methods the Goldstein certificate; a claim holds
when every (problem, ε) cell holds. The cells and their intervals: :mod:`.report`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from dpnc_reproduce import facts
from dpnc_reproduce.claims import all_hold
from dpnc_reproduce.judging import ClaimSpec, Verdict
from dpnc_reproduce.protocol import Claim
from dpnc_reproduce.utility.report import (
    MATCHED,
    PRIVACY,
    PROGRESS,
    RATIO,
    YARDSTICKS,
    _certified,
    _fmt,
    _ok,
    _where,
    cells,
    certificate_cells,
    paper_methods,
)

# every claim on cells: the counts, then each cell (failing first) as the claim describes it
CELLS = (
    "{absent}",
    "{parts_hold} hold, {parts_fail} fail, {parts_no_signal} no verdict of {parts} cells "
    "(problem × ε at the largest n); {cells_text}",
)
ABSENT = "did not run at any problem's largest n"
PAIRED = (
    "per cell: 95 % t interval over seeds of the per-seed log ratio (k − 1 df, paired by seed; "
    "geometric mean), one seed: no verdict; the claim: every cell holds"
)


def _cells_text(cs: list[dict], describe: Callable[[dict], str]) -> str:
    order = sorted(cs, key=lambda c: {False: 0, None: 1, True: 2}[c["verdict"]])
    return "; ".join(f"{_where(c)}: {describe(c)}" for c in order)


def _progress(rows: Sequence, config, method: str) -> list[Verdict]:
    cs = cells(rows, config, method, "hand-set") or cells(rows, config, method, "matched")
    if not cs:
        return [Verdict(None, {}, {"absent": ABSENT})]
    for c in cs:
        c["verdict"] = c["margin"]
    numbers = facts.parts(
        {(c["problem"], f"eps{c['epsilon']:g}"): c["progress"] for c in cs},
        1 - PROGRESS,
        {(c["problem"], c["epsilon"]): c["margin"] for c in cs},
    )
    shown = _cells_text(cs, lambda c: f"remaining fraction {_fmt(c['progress'])}")
    return [Verdict(all_hold([c["margin"] for c in cs]), numbers, {"cells_text": shown})]


def _within(rows: Sequence, config, method: str, yardstick: str) -> list[Verdict]:
    cs = cells(rows, config, method, yardstick)
    if not cs:
        return [Verdict(None, {}, {"absent": ABSENT})]

    def describe(c: dict) -> str:
        parts = [
            f"{'matched' if b.startswith(MATCHED) else b} {_fmt(iv)}×"
            for b, iv in c["ratios"].items()
        ]
        margin = "fails" if c["margin"] is False else "no signal"
        return ", ".join(parts) + ("" if c["margin"] is True else f" (progress margin {margin})")

    numbers = facts.parts(
        {
            (c["problem"], f"eps{c['epsilon']:g}", b): iv
            for c in cs
            for b, iv in c["ratios"].items()
        },
        RATIO,
        {(c["problem"], c["epsilon"]): c["verdict"] for c in cs},
    ) | {
        facts.name(c["problem"], f"eps{c['epsilon']:g}", "margin"): facts.verdict(c["margin"])
        for c in cs
    }
    holds = all_hold([c["verdict"] for c in cs])
    return [Verdict(holds, numbers, {"cells_text": _cells_text(cs, describe)})]


def _certificate(rows: Sequence, config, method: str) -> list[Verdict]:
    cs = certificate_cells(rows, config, method)
    if not cs:
        return [Verdict(None, {}, {"absent": "no certified run"})]

    def describe(c: dict) -> str:
        note = "" if c["margin"] is True else f" (certificate / start {_fmt(c['progress'])})"
        return f"{_fmt(c['ratio'])}× ({c['ours']:.3g} vs {c['theirs']:.3g}){note}"

    numbers = facts.parts(
        {(c["problem"], f"eps{c['epsilon']:g}"): c["ratio"] for c in cs},
        RATIO,
        {(c["problem"], c["epsilon"]): c["verdict"] for c in cs},
    ) | facts.parts({(c["problem"], f"eps{c['epsilon']:g}", "progress"): c["progress"] for c in cs})
    holds = all_hold([c["verdict"] for c in cs])
    return [Verdict(holds, numbers, {"cells_text": _cells_text(cs, describe)})]


def _privacy(rows: Sequence) -> list[Verdict]:
    """Every private run's accountant spent at most its target ε (the reference and seeded runs
    excluded)."""
    runs = [r for r in _ok(rows) if r.private]
    over = [r for r in runs if not r.epsilon_spent <= r.epsilon * (1 + 1e-6)]
    worst = max((r.epsilon_spent / r.epsilon for r in runs), default=math.nan)
    others = sorted({r.method for r in _ok(rows) if not r.private})
    numbers = {"runs": len(runs), "runs_over": len(over), "max_ratio": worst}
    numbers["not_private"] = len(others)
    words = {"others": ", ".join(others)} if others else {}
    return [Verdict(not over if runs else None, numbers, words)]


ACCOUNTED = ClaimSpec(
    PRIVACY,
    (
        "{runs} runs, max ε spent / target {max_ratio:.4f}, {runs_over} over",
        "; not counted (not private by their own report): {others}",
    ),
    "at most",
    "ε",
    "every run",
    _privacy,
)


def progress_spec(config, method: str) -> ClaimSpec:
    """The progress margin: the method closes at least :data:`~.report.PROGRESS` of the start's gap
    in every cell."""
    return ClaimSpec(
        f"{method}: closes at least {PROGRESS:.0%} of the start's gap F(x0) − F(x̂) at every "
        "problem and ε where it runs (the progress margin)",
        CELLS,
        "below",
        f"{1 - PROGRESS:g} (remaining fraction)",
        "per cell: 95 % t interval of the mean remaining fraction of F(x0) − F(x̂) (k − 1 df) below "
        f"{1 - PROGRESS:g}",
        lambda rows: _progress(rows, config, method),
    )


def within_spec(config, method: str, yardstick: str) -> ClaimSpec:
    """Within :data:`~.report.RATIO` of a yardstick's baselines in every cell, after the margin."""
    what = YARDSTICKS[yardstick][0]
    return ClaimSpec(
        f"{method}: within {RATIO:g}× of {what} at every problem and ε where it runs (geometric "
        f"mean of the paired ratio, after the {PROGRESS:.0%} progress margin)",
        CELLS,
        "below",
        f"{RATIO:g} (ratio of outcomes), gated by the progress margin",
        PAIRED,
        lambda rows: _within(rows, config, method, yardstick),
    )


def certificate_spec(config, method: str) -> ClaimSpec:
    """The O2NC methods' Goldstein certificate against their compute-matched DP-SGD's."""
    return ClaimSpec(
        f"{method}: its Goldstein certificate (held-out ‖∂F‖ at radius 2δ) is within {RATIO:g}× of "
        "its compute-matched DP-SGD's at every nonsmooth problem and ε, after halving the start's "
        "certificate",
        CELLS,
        "below",
        f"{RATIO:g}, gated by certificate / start certificate < {1 - PROGRESS:g}",
        PAIRED,
        lambda rows: _certificate(rows, config, method),
    )


def method_specs(config, method: str) -> list[ClaimSpec]:
    """One paper method's claims: the progress margin, within 1.5× of each yardstick that runs, the
    Goldstein certificate where it applies."""
    yardsticks = [y for y in YARDSTICKS if y != "matched" or config.matched]
    certified = config.matched and _certified(config, method)
    return [
        progress_spec(config, method),
        *(within_spec(config, method, y) for y in yardsticks),
        *([certificate_spec(config, method)] if certified else []),
    ]


def specs(config) -> list[ClaimSpec]:
    """Per paper method (:func:`method_specs`), then the accounting."""
    return [s for m in paper_methods(config) for s in method_specs(config, m)] + [ACCOUNTED]


def within_claim(rows: Sequence, config, method: str, yardstick: str) -> Claim:
    """One method's claim against one yardstick (:func:`within_spec`), judged on ``rows``."""
    return within_spec(config, method, yardstick).claims(rows)[0]


def privacy_claim(rows: Sequence) -> Claim:
    """:data:`ACCOUNTED` judged on ``rows``."""
    return ACCOUNTED.claims(rows)[0]
