"""The kl-rates claims, each one object (:class:`~dpnc_reproduce.judging.ClaimSpec`): declared before
the run and judged on its rows from the same spec, in the order the tables show them.

The fits and the reasons a rate fails are in :mod:`dpnc_reproduce.kl_rates.report`; the statistics
in :mod:`dpnc_reproduce.claims`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from dpnc_reproduce import claims as stats
from dpnc_reproduce import facts
from dpnc_reproduce.judging import ClaimSpec, Verdict, every_run
from dpnc_reproduce.kl_rates.report import (
    EXPLICIT,
    REGIME,
    WORDS,
    _at_ends,
    _fmt,
    _interval,
    medians,
    observed,
    reason,
    slopes,
)
from dpnc_reproduce.kl_rates.run import LABEL, TRIVIAL, KLRow
from dpnc_reproduce.protocol import Claim

COUNTS = "{parts_hold} hold, {parts_fail} fail, {parts_no_signal} no signal (of {parts})"

BUDGET = every_run(
    "every run spends at most its zCDP budget ρ (the accountant's ρ; adaptive GD + selection: "
    "ρ' = 8ρ/9 by the filter plus ρ'/8 for the exponential mechanism)",
    "max ρ spent / ρ = {max_rho_ratio:.6f} over {runs} runs; {runs_over} run(s) over; "
    "ε at δ (zCDP conversion): {epsilons}",
    lambda r: r.rho_spent / r.rho,
    names=("max_rho_ratio", "runs_over"),
    slack=1e-9,
    facts=lambda rows: {
        facts.name("max_epsilon_rho", f"{rho:g}"): eps for rho, eps in _epsilons(rows).items()
    },
    words=lambda rows: {
        "epsilons": "; ".join(f"ρ = {rho:g}: ε ≤ {eps:.3g}" for rho, eps in _epsilons(rows).items())
    },
    threshold="ρ",
)

REGION = every_run(
    "every iterate (the proximal point method's inner iterates included) stays in the region where "
    "L0 is declared, so the sensitivity the ledger charges holds",
    "max distance from the centre / radius = {max_distance_ratio:.6f} over {runs} runs; "
    "sensitivity: {sensitivities}",
    lambda r: r.region_distance / r.radius,
    names=("max_distance_ratio", "runs_outside"),
    slack=1e-12,
    words=lambda rows: {"sensitivities": ", ".join(sorted({r.sensitivity for r in rows}))},
    threshold="the radius",
)

SPIDER = every_run(
    "KL-Spider: F(w_out) − F* ≤ Φfloor in every run (Theorem 1, w.p. ≥ 1 − β each)",
    "{runs_within} of {runs} runs; max excess / Φfloor {max_excess_ratio:.3g}",
    lambda r: r.excess / r.bound,
    names=("max_excess_ratio", "runs_above"),
    select=lambda r: r.algorithm == "kl-spider",  # the n sweep and the ρ sweep
    threshold="Φfloor",
)


def _epsilons(rows: Sequence[KLRow]) -> dict[float, float]:
    """The largest ε at δ (the zCDP conversion) per ρ."""
    return {
        rho: max(r.epsilon for r in rows if r.rho == rho) for rho in sorted({r.rho for r in rows})
    }


def inner_verdicts(rows: Sequence[KLRow]) -> list[Verdict]:
    """Per objective of the inner-steps sweep: does ``factor``× the rule's inner steps lower the
    excess by less than half (in log) of what an optimisation-limited excess would fall?"""
    check, out = [r for r in rows if r.sweep == "inner"], []
    for o in dict.fromkeys(r.objective for r in check):
        mine = [r for r in check if r.objective == o]
        more = max(r.inner_factor for r in mine)
        logs = {
            f: [math.log(r.excess) for r in mine if r.inner_factor == f and r.excess > 0]
            for f in (1.0, more)
        }
        iv = stats.difference_interval(logs[more], logs[1.0])
        # were the optimisation error to rule, the excess (∝ error^(κ/2)) would fall by more^(κ/2):
        # judged against half that fall in log, the midpoint between "no change" and
        # "optimisation-limited"
        kappa = mine[0].kappa
        midpoint = -kappa / 4 * math.log(more)
        steps = [r.inner_steps for r in mine]
        numbers = facts.interval(iv, midpoint) | {
            "factor": more,
            "seeds_more": len(logs[more]),
            "seeds_base": len(logs[1.0]),
            "inner_steps_min": min(steps),
            "kappa": kappa,
            "inner_steps_max": max(steps),
        }
        words = {"objective": o, "n": mine[0].n, "interval": iv}
        words |= {"fall_limit": math.exp(-midpoint), "fall": more ** (kappa / 2)}
        out.append(Verdict(stats.exceeds(iv, midpoint), numbers, words))
    return out


INNER = ClaimSpec(
    "proximal point on {objective} (κ = {kappa:g}): the inner steps do not limit the excess — at "
    "n = {n}, {factor:g}× the rule's inner steps lowers the excess by less than {fall_limit:.3g}×, "
    "half (in log) of the {fall:.3g}× an optimisation-limited excess would fall (mean log ratio, "
    "interval over seeds)",
    "log(excess at {factor:g}×) − log(excess at 1×): {interval} (threshold {threshold:.2f}), "
    "{seeds_more} and {seeds_base} seeds; inner steps per round {inner_steps_min} and "
    "{inner_steps_max}",
    "above",
    "−κ/4·log(factor)",
    "Welch t interval of mean log excess, two arms of seeds",
    inner_verdicts,
    declared="proximal point: more inner steps lower the excess by less than half (in log) the "
    "optimisation-limited fall",
)


def rate_verdicts(rows: Sequence[KLRow]) -> list[Verdict]:
    """Per (algorithm, objective, d, regime) with at least 3 points: the one-sided rate rule at both
    ends of its bound's slope range (the proximal point's also needs its inner-steps check; a bound
    with explicit constants is judged on itself, its slope reported unjudged)."""
    inner = {v.words["objective"]: v.holds for v in inner_verdicts(rows)}
    out = []
    for s in slopes(rows):
        if s["points"] < 3:
            continue  # two points make a slope but not a check
        fit, (ok, status, at) = _interval(s), _at_ends(s)
        ends, tol = (s["bound_slope_low"], s["bound_slope_high"]), s["tol"]
        words = {
            "label": f"{LABEL[s['algorithm']]} on {s['objective']} (κ = {s['kappa']:g}), d = {s['d']}",
            "fit": fit,
            "upper": _interval(s, "upper"),
            "ends": stats.ends_text(ends, at, regime=REGIME, tol=tol),
            "bound_text": _fmt(s["bound_slope"]),
            "limit_text": _fmt(s["bound_slope"] + tol),
        }
        words |= {k: s[k] for k in ("regime", "x_min", "x_max", "tol_formula", "predicted")}
        if s["inner_low"] is not None:  # few inner steps at the low end: optimisation-limited?
            words |= {"inner_low": s["inner_low"], "inner_high": s["inner_high"]}
        read = {
            "slope": fit.estimate,
            "slope_low": fit.low,
            "slope_high": fit.high,
            "tolerance": tol,
            "limit": s["bound_slope"] + tol,
            "bound_slope_low": ends[0],
            "bound_slope_high": ends[1],
            "limit_low": ends[0] + tol,
            "limit_high": ends[1] + tol,
            "rule_low": facts.verdict(at[0]),
            "rule_high": facts.verdict(at[1]),
            "points": s["points"],
            "seeds": s["seeds"],
            "capped_runs": s["capped"],
            "start_share_low": s["start_ratio_low"],
            "slope_rule": facts.verdict(observed(s)),
        }  # what the reasons read; the slope rule alone
        if s["algorithm"] == "proximal-point" and s["objective"] in inner:
            words["inner_check"] = WORDS[inner[s["objective"]]]
            read["inner_check"] = facts.verdict(inner[s["objective"]])
            ok = stats.all_hold([ok, inner[s["objective"]]])
        if s["algorithm"] in EXPLICIT:  # explicit constants: the bound itself is tested
            words["slope_rule_alone"] = WORDS[ok]
            ok, status = None, EXPLICIT[s["algorithm"]]
        elif ok is not True:
            words["reason"] = reason(s)
        out.append(Verdict(ok, read, words, status))
    return out


RATES = ClaimSpec(
    "{label}, {regime} regime: the excess falls no slower than the theorem's upper bound — slope "
    "against n√ρ/√d ≤ the bound's own slope over these points + {tolerance:.2f} (its dropped logs "
    "over these points; x → ∞, one-sided), at both ends of the range its terms' unknown constants "
    "allow",
    (
        "per-seed slopes {fit} over {points} points, x ∈ [{x_min:.3g}, {x_max:.3g}] (upper half: "
        "{upper}); bound's own slope at constants 1 {bound_text} (+ {tolerance:.3f} = {limit_text}; "
        "tolerance: {tol_formula}); {ends}; the theorem's exponent {predicted:.2f}",
        "; inner steps per round {inner_low} at the lowest x, {inner_high} at the highest",
        "; its inner-steps check (below): {inner_check}",
        "; the slope rule alone: {slope_rule_alone}",
        ". Reason: {reason}",
    ),
    "at most (one-sided: an upper bound), at both ends of the range its terms' unknown constants "
    "allow",
    "the bound's own slope over the same points (each end: one term's own slope) + the tolerance "
    "of its dropped logs over them (report.tolerance)",
    "95 % t interval over the per-seed slopes (≥ 3 points); one seed: no verdict; the proximal "
    "point also needs its inner-steps check; a verdict only where both ends agree, else 'depends "
    "on the constants' with both shown",
    rate_verdicts,
    declared="each (algorithm, objective, d, regime): slope of the excess against n√ρ/√d",
)


def nsr_verdicts(rows: Sequence[KLRow]) -> list[Verdict]:
    """At each n√ρ the ρ sweep shares with the n sweep: the two differ by less than 3× (one claim,
    every pair a part)."""
    sweep, main = [r for r in rows if r.sweep == "rho"], [r for r in rows if r.sweep == "n"]
    keys = ("algorithm", "objective", "d")
    reference, pairs = medians(main, "excess", keys, "nsr"), {}
    for key, points in medians(sweep, "excess", keys, "nsr").items():
        known = dict(reference.get(key, []))
        for nsr in (nsr for nsr, _ in points if nsr in known):

            def logs(rs, key=key, nsr=nsr):
                return [
                    math.log(r.excess) if r.excess > 0 else -math.inf
                    for r in rs
                    if (r.algorithm, r.objective, r.d, r.nsr) == (*key, nsr)
                ]

            pairs[(key[0], nsr)] = stats.difference_interval(logs(sweep), logs(main))
    if not pairs:
        return []
    verdicts = {k: stats.within(iv, 0.0, math.log(3)) for k, iv in pairs.items()}
    numbers = facts.parts(
        {(a, f"{nsr:.0e}"): iv for (a, nsr), iv in pairs.items()}, verdicts=verdicts
    )
    ratios = "; ".join(f"{a} at n√ρ = {nsr:.0e}: {iv}" for (a, nsr), iv in pairs.items())
    return [
        Verdict(
            stats.all_hold(list(verdicts.values())),
            numbers | {"tolerance": math.log(3)},
            {"ratios": ratios},
        )
    ]


NSR = ClaimSpec(
    "the runs depend on n and ρ only through n√ρ: at the same n√ρ, the ρ-sweep runs (n fixed) and "
    "the n-sweep runs (ρ = 1) differ by less than 3× (mean log excess, interval over seeds)",
    COUNTS + "; log ratio: {ratios}",
    "within",
    "±log 3",
    "Welch t interval of mean log excess; every point",
    nsr_verdicts,
)


def lower_bound_verdicts(rows: Sequence[KLRow]) -> list[Verdict]:
    """At every non-trivial point with a lower bound: is the excess above it (mean log ratio)?"""
    points: dict[tuple, list[float]] = {}
    for r in rows:
        if r.lower_bound is not None and r.sweep == "n" and r.regime != TRIVIAL:
            points.setdefault((r.algorithm, r.objective, r.d, r.x), []).append(
                math.log(r.excess / r.lower_bound) if r.excess > 0 else -math.inf
            )
    if not points:
        return []
    fits = {k: stats.mean_interval(v) for k, v in points.items()}
    verdicts = [stats.exceeds(iv, 0.0) for iv in fits.values()]
    estimates = [iv.estimate for iv in fits.values() if math.isfinite(iv.estimate)]
    numbers = facts.counts(verdicts) | {
        "threshold": 0.0,
        "min_estimate": min(estimates, default=math.nan),
        "max_estimate": max(estimates, default=math.nan),
    }
    words = {"lowest": min(estimates), "highest": max(estimates)} if estimates else {}
    return [Verdict(stats.all_hold(verdicts), numbers, words)]


LOWER_BOUND = ClaimSpec(
    "(information) the excess is above the class lower bound at every non-trivial point: mean "
    "log(excess / lower bound) over seeds > 0 (constants and logs dropped; the lower bound is a "
    "worst case over the class, a fixed instance may go below it)",
    (COUNTS, "; mean log ratio from {lowest:.2f} to {highest:.2f}"),
    "above",
    "0 (mean log ratio)",
    "95 % t interval over seeds; every point",
    lower_bound_verdicts,
)

SPECS = (BUDGET, REGION, SPIDER, RATES, INNER, NSR, LOWER_BOUND)


def check_claims(rows: Sequence[KLRow]) -> list[Claim]:
    """The theory's checkable statements, judged on the measured numbers (reported whether or not
    they hold), in :data:`SPECS`' order."""
    return [claim for spec in SPECS for claim in spec.claims(rows)]
