"""The nonsmooth-rates claims (and nonsmooth-compare's), each one object
(:class:`~dpnc_reproduce.judging.ClaimSpec`): declared before the run and judged on its rows from
the same spec.

The theorems' exponents of n(β), one-sided in their variable's regime (d → ∞; ε, β → 0; α
reported, not testable by slope here); the papers' comparisons, paired per seed; KLT's √d
improvement on ZTC; the held-out certificate; the accounting. The measurements (n(β), the fitted
exponents, the theorems' n) are in :mod:`.report`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from dpnc_reproduce import claims as stats
from dpnc_reproduce import facts
from dpnc_reproduce.common import ACCOUNTED
from dpnc_reproduce.judging import ClaimSpec, Verdict, on_view
from dpnc_reproduce.loglog import loglog_fit
from dpnc_reproduce.nonsmooth_rates.report import (
    COMPARISONS,
    LABEL,
    LOG_POWER,
    SYMBOL,
    THEOREMS,
    Exponent,
    _ratio,
    exponents,
    paired_log_ratio,
    reason,
    theory_n,
    thresholds,
)
from dpnc_reproduce.nonsmooth_rates.run import RateRow, RatesConfig
from dpnc_reproduce.protocol import Claim

COUNTS = "{parts_hold} hold, {parts_fail} fail, {parts_no_signal} no signal (of {parts})"
BOUND = (
    "the bound's ({terms}: between {bound_slope_low:+.2f} and {bound_slope_high:+.2f} over this "
    "grid by its terms' unknown constants, {bound_slope:+.2f} at constants 1)"
)
GROWS_STATEMENT = (
    "{objective}, {label}: n(β) grows with {symbol} no faster than the theorem's bound: the exponent "
    "in {what} is at most " + BOUND + " + {tolerance:.2f} at both ends ({symbol} → ∞, one-sided)"
)
SHRINKS_STATEMENT = (
    "{objective}, {label}: n(β) grows no faster than the theorem's bound as {symbol} shrinks: the "
    "exponent in {what} is at least " + BOUND + " − {tolerance:.2f} at both ends ({symbol} → 0, "
    "one-sided: a steeper slope violates it)"
)
EXPONENT_EVIDENCE = (
    "fitted {fitted}; tolerance {tolerance_text}; {ends}; {reached} with n(β) inside the grid "
    "[{n_start}, {n_max}] at every point",
    "; {reason}",
)
ENDS = "; a verdict only where both ends agree, else 'depends on the constants' with both shown"
SLOPE_TEST = (
    "95 % t interval over the per-seed slopes; censored seeds kept ([n_max, ∞), [1, n_start]), no "
    f"verdict above {stats.MAX_CENSORED:.0%} censored; one seed: no verdict"
)


class Measured:
    """One run's rows as the claims read them: the rows, the config, the fitted exponents at the
    main β and each seed's n(β) at the main β by (objective, method, d, ε, α, seed)."""

    def __init__(self, rows: Sequence[RateRow], config: RatesConfig):
        self.rows, self.config = rows, config
        self.exponents = [e for e in exponents(rows, config) if e.beta in (None, config.main_beta)]
        self.table = {
            (t.objective, t.method, t.d, t.epsilon, t.alpha, t.seed): t
            for t in thresholds(rows, config)
            if t.beta == config.main_beta
        }


def exponent_verdict(e: Exponent, m: Measured) -> Verdict:
    """An exponent of n(β) judged one-sided at both ends of its bound's slope range."""
    cfg, tol = m.config, e.tolerance.value
    over = f"{SYMBOL[e.variable]} ∈ {{{', '.join(f'{x:g}' for x in e.over)}}}"
    what = (
        f"β (over {over}; d={e.cell[0]}, ε={e.cell[1]:g}, α={e.cell[2]:g})"
        if e.variable == "beta"
        else f"{SYMBOL[e.variable]} at β = {e.beta:g} (over {over})"
    )
    words = {
        "objective": e.objective,
        "label": LABEL[e.method],
        "symbol": SYMBOL[e.variable],
        "what": what,
        "terms": THEOREMS[e.method].terms,
        "fitted": e.fitted,
        "tolerance_text": e.tolerance,
        "ends": stats.ends_text(e.ends, e.at_ends, regime=e.regime, tol=tol),
        "reached": e.reached,
        "n_start": cfg.n_start,
        "n_max": cfg.n_max,
    }
    if not e.verdict:
        words["reason"] = reason(e, m.rows, cfg)
    numbers = facts.interval(e.fitted) | {
        "bound_slope": e.theory,
        "bound_slope_low": e.ends[0],
        "bound_slope_high": e.ends[1],
        "tolerance": tol,
        "limit": e.limit,
        "limit_low": stats.rate_limit(e.ends[0], regime=e.regime, tol=tol),
        "limit_high": stats.rate_limit(e.ends[1], regime=e.regime, tol=tol),
        "rule": facts.verdict(e.rule),
        "rule_low": facts.verdict(e.at_ends[0]),
        "rule_high": facts.verdict(e.at_ends[1]),
        "seeds_reached": e.fitted.seeds - e.fitted.censored,
    }
    return Verdict(e.verdict, numbers, words, e.status)


def exponent_spec(variables: tuple[str, ...], declared: Sequence[str]) -> ClaimSpec:
    """The exponents of n(β) in ``variables`` (all of one regime), per objective and method."""
    grows = GROWS_STATEMENT if variables == ("d",) else SHRINKS_STATEMENT
    return ClaimSpec(
        grows,
        EXPONENT_EVIDENCE,
        *declared[1:],
        lambda m: [exponent_verdict(e, m) for e in m.exponents if e.variable in variables],
        declared=declared[0],
    )


EXPONENTS = (
    exponent_spec(
        ("d",),
        (
            "each method's exponent of n(β) in d (d → ∞)",
            "at most (one-sided: an upper bound), at both ends of the range its terms' unknown "
            "constants allow",
            "the theorem's n's log-log slope over the same points (each end: one term's own slope) "
            "+ the tolerance of its dropped logs (LOG_POWER: (ln N)^p over that grid)",
            SLOPE_TEST + ENDS,
        ),
    ),
    exponent_spec(
        ("epsilon", "beta"),
        (
            "each method's exponent of n(β) in ε and β (x → 0)",
            "at least (one-sided: an upper bound as x shrinks; a steeper slope violates it), at "
            "both ends of the range its terms' unknown constants allow",
            "the theorem's n's log-log slope over the same points (each end: one term's own slope) "
            "− the tolerance of its dropped logs over that grid",
            SLOPE_TEST + ENDS,
        ),
    ),
    exponent_spec(
        ("alpha",),
        (
            "each method's exponent of n(β) in α",
            "not judged",
            "—",
            "reported; the instance's target region grows with α (CONFOUNDED): not testable by "
            "slope here",
        ),
    ),
)


def comparison_verdicts(m: Measured, fewer: str, more: str) -> list[Verdict]:
    """Per objective: in every cell, the paired (same data, same seed) log₂ ratio
    n_more(β)/n_fewer(β) at the main β (:func:`~.report.paired_log_ratio`), its mean and 95 % t
    interval over the seeds where at least one of the two reached β."""
    cfg, out = m.config, []
    for o in cfg.objectives:
        parts, verdicts, intervals = [], {}, {}
        for cell in cfg.cells(o):
            pairs = [
                (m.table.get((o, more, *cell, s)), m.table.get((o, fewer, *cell, s)))
                for s in range(cfg.seeds)
            ]
            pairs = [(a.n_beta, b.n_beta) for a, b in pairs if a and b]
            ratios = [paired_log_ratio(a, b, cfg.n_max) for a, b in pairs]
            ratios = [r for r in ratios if r is not None]
            only_fewer = sum(1 for a, b in pairs if not math.isfinite(a) and math.isfinite(b))
            only_more = sum(1 for a, b in pairs if math.isfinite(a) and not math.isfinite(b))
            iv = (
                stats.censored_mean_interval(ratios, what="censored")
                if ratios
                else stats.Interval(math.nan, -math.inf, math.inf, 0, "none")
            )
            intervals[cell], verdicts[cell] = iv, stats.exceeds(iv, 0.0)
            censored = (
                f", of which {only_fewer} where only {fewer} and {only_more} where only {more} "
                "reached β (censored: counted at n_max, the open side unbounded)"
                if only_fewer or only_more
                else ""
            )
            parts.append(
                f"d={cell[0]}, ε={cell[1]:g}, α={cell[2]:g}: {iv} ({len(ratios)} seeds{censored})"
            )
        named = {(f"d{d}", f"eps{e:g}", f"alpha{a:g}"): v for (d, e, a), v in verdicts.items()}
        numbers = facts.parts(
            {(f"d{d}", f"eps{e:g}", f"alpha{a:g}"): iv for (d, e, a), iv in intervals.items()},
            0.0,
            verdicts,
        ) | {facts.name(*k, "holds"): facts.verdict(v) for k, v in named.items()}
        words = {"objective": o, "cells_text": "; ".join(parts)}
        out.append(Verdict(stats.all_hold(list(verdicts.values())), numbers, words))
    return out


def comparison_spec(fewer: str, more: str, claim: str, beta: float) -> ClaimSpec:
    """``fewer`` reaches β with fewer samples than ``more``, in every cell, per objective."""
    said = claim.format(beta=beta).replace("{", "{{").replace("}", "}}")
    return ClaimSpec(
        ("{objective}: ", f"{said}: log₂(n_{more}/n_{fewer}) > 0 in every cell"),
        COUNTS + "; {cells_text}",
        "above",
        "0",
        "95 % t interval over paired seeds; one side censored: a censored ratio",
        lambda m: comparison_verdicts(m, fewer, more),
    )


def improvement_verdicts(m: Measured) -> list[Verdict]:
    """KLT's √d improvement on ZTC as the papers state it: an upper bound Ω(√d) times smaller, not a
    tight one. So the claim is the conjunction of n_ZTC(β)/n_KLT(β) > 1 in every cell of the d
    sweep at the base (ε, α) and the main β (the paired log₂ ratio's interval above 0, as the
    comparisons) and a one-sided slope of ln(n_ZTC/n_KLT) in ln d ≥ 0 − tol (the improvement does
    not shrink as d grows). A seed whose n(β) is censored on one side gives a censored ratio, kept
    by :func:`dpnc_reproduce.claims.slope_interval`. The tolerance is what the two bounds' dropped
    logs ((ln N_ZTC)^½ over (ln N_KLT)^1) add to the ratio's slope over this grid, either sign."""
    cfg, out = m.config, []
    base = (cfg.base_epsilon, cfg.base_alpha)
    for o in cfg.objectives:
        dims = sorted(c[0] for c in cfg.cells(o) if c[1:] == base)
        if len(dims) < 3:
            continue
        pair = {
            (d, s): (m.table.get((o, "zo-o2nc", d, *base, s)), m.table.get((o, "klt", d, *base, s)))
            for d in dims
            for s in range(cfg.seeds)
        }
        ratios = [[_ratio(*pair[(d, s)], cfg) for d in dims] for s in range(cfg.seeds)]
        fit = stats.slope_interval(dims, ratios)
        cells = {d: _paired_cell(pair, d, cfg) for d in dims}
        per_cell = {d: stats.exceeds(iv, 0.0) for d, iv in cells.items()}
        tol, bounds = _bounds_ratio(dims, cfg)
        sloped = stats.exceeds(fit, -tol)
        numbers = (
            facts.parts({(f"d{d}",): iv for d, iv in cells.items()}, 0.0, per_cell)
            | facts.interval(fit)
            | {
                "slope_threshold": -tol,
                "tolerance": tol,
                "bound_slope": bounds,
                "slope_holds": facts.verdict(sloped),
            }
        )
        shown = "; ".join(f"d={d}: {iv} ({stats.WORDS[per_cell[d]]})" for d, iv in cells.items())
        words = {"objective": o, "grid": ", ".join(map(str, dims)), "cells_text": shown}
        words |= {"fit": fit, "slope_word": stats.WORDS[sloped]}
        out.append(Verdict(stats.all_hold([*per_cell.values(), sloped]), numbers, words))
    return out


def _paired_cell(pair: dict, d: int, cfg: RatesConfig) -> stats.Interval:
    """The mean paired log₂(n_ZTC/n_KLT) over the seeds at ``d`` (censored seeds kept)."""
    logs = [
        paired_log_ratio(a.n_beta, b.n_beta, cfg.n_max)
        for s in range(cfg.seeds)
        if all(pair[(d, s)])
        for a, b in [pair[(d, s)]]
    ]
    logs = [v for v in logs if v is not None]
    if not logs:
        return stats.Interval(math.nan, -math.inf, math.inf, 0, "none")
    return stats.censored_mean_interval(logs, what="censored")


def _bounds_ratio(dims: Sequence[int], cfg: RatesConfig) -> tuple[float, float]:
    """The tolerance of the improvement's slope (what the two bounds' dropped logs add to the
    ratio's slope over ``dims``, either sign) and the slope of the bounds' own ratio (constants
    1), at the base (ε, α) and the main β."""
    at = {"epsilon": cfg.base_epsilon, "alpha": cfg.base_alpha, "beta": cfg.main_beta}
    theory = {m: [theory_n(m, d=d, **at, config=cfg) for d in dims] for m in ("zo-o2nc", "klt")}
    shift = LOG_POWER["zo-o2nc"] * loglog_fit(
        dims, [math.log(v) for v in theory["zo-o2nc"]]
    ) - LOG_POWER["klt"] * loglog_fit(dims, [math.log(v) for v in theory["klt"]])
    bounds = loglog_fit(dims, [a / b for a, b in zip(theory["zo-o2nc"], theory["klt"])])
    return max(abs(shift), 1e-9), bounds


def improvement_spec(beta: float) -> ClaimSpec:
    return ClaimSpec(
        "{objective}: KLT's √d improvement on ZTC (the papers' comparison of Thm 3.1 with Thm 4.9, "
        "an upper bound Ω(√d) times smaller, not tightness): n_ZTC/n_KLT at β = "
        + f"{beta:g}"
        + " is above 1 in every cell and the slope of ln(n_ZTC/n_KLT) in ln d (d ∈ {{{grid}}}) is at "
        "least 0 − {tolerance:.2f} (the improvement does not shrink as d grows; one-sided; the two "
        "bounds' dropped logs over this grid)",
        "per cell log₂(n_ZTC/n_KLT): {cells_text}; slope {fit} ({slope_word}); the two bounds' own "
        "ratio over these points (constants 1): slope {bound_slope:.2f}; tolerance "
        "{tolerance:.3f} = |½·slope(ln ln N_ZTC) − slope(ln ln N_KLT)|",
        "above (both)",
        "0 per cell; 0 − tolerance for the slope (the two bounds' dropped logs' slope difference "
        "over that grid)",
        "95 % t intervals over paired seeds and over the per-seed slopes; censored ratios kept",
        improvement_verdicts,
        declared="KLT's √d improvement on ZTC as the papers state it: log₂(n_ZTC(β)/n_KLT(β)) in "
        "every cell of the d sweep, and the slope of ln(n_ZTC(β)/n_KLT(β)) in ln d",
    )


def _certificate(rows: Sequence[RateRow]) -> list[Verdict]:
    below = [r for r in rows if r.population_bound < r.output_norm]
    numbers = {"runs": len(rows), "runs_below": len(below), "max_share": 0.05}
    return [Verdict(len(below) <= 0.05 * len(rows), numbers)]


CERTIFICATE = ClaimSpec(
    "the held-out certificate plus its concentration term (probability 0.95 each) bounds the "
    "closed-form population ‖∂F(x_out)‖_2α: violations in at most 5 % of runs",
    "{runs_below} of {runs} runs below the truth; tightness in the table below",
    "at most",
    "5 % of runs violating",
    "count",
    _certificate,
)


def comparisons(config: RatesConfig) -> list[ClaimSpec]:
    """The papers' comparisons whose two methods run (:data:`~.report.COMPARISONS`)."""
    return [
        comparison_spec(fewer, more, claim, config.main_beta)
        for fewer, more, claim in COMPARISONS
        if {fewer, more} <= set(config.methods)
    ]


def specs(config: RatesConfig) -> list[ClaimSpec]:
    """Every claim of a run of ``config``, in the tables' order: the exponents, the comparisons
    whose two methods run, KLT's improvement (where ZTC and KLT run), the certificate, the
    accounting."""
    improvement = [improvement_spec(config.main_beta)]
    measured = [
        *EXPONENTS,
        *comparisons(config),
        *(improvement if {"zo-o2nc", "klt"} <= set(config.methods) else []),
    ]
    return [*on_view(measured, lambda rows: Measured(rows, config)), CERTIFICATE, ACCOUNTED]


def comparison_claims(rows: Sequence[RateRow], config: RatesConfig) -> list[Claim]:
    """The papers' comparisons alone (:func:`comparisons`) judged on ``rows``."""
    viewed = on_view(comparisons(config), lambda rows: Measured(rows, config))
    return [claim for spec in viewed for claim in spec.claims(rows)]


def check_claims(rows: Sequence[RateRow], config: RatesConfig) -> list[Claim]:
    """Every claim of :func:`specs` judged on ``rows``."""
    return [claim for spec in specs(config) for claim in spec.claims(rows)]
