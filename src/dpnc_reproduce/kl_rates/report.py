"""The kl-rates experiment's fits, claims and rendering: log-log slopes of the medians, the theory's
claims judged on them, the setting, the tables and the figures.

The config, the tasks and the runs are in :mod:`dpnc_reproduce.kl_rates.run`; its experiment calls
:func:`slopes` (``slopes.csv``), :func:`describe`, :func:`render` and :func:`plot`; the claims,
judged on these fits, are in :mod:`dpnc_reproduce.kl_rates.claims`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from dpnc_reproduce import claims as stats
from dpnc_reproduce.common import by_seed, group_medians, loglog_slope
from dpnc_reproduce.kl_rates.run import ADAPTIVE, ALGORITHMS, OBJECTIVES, TRIVIAL, KLRow
from dpnc_reproduce.loglog import GROWS, Tolerance, dropped_log_tolerance, term_slopes
from dpnc_reproduce.protocol import Result

# How every rate claim is judged: the theorems are upper bounds on the excess as x = n√ρ/√d → ∞, so
# a rate holds when the per-seed slopes' 95 % t interval lies below the bound's own slope over the
# same points plus the tolerance of the logs that bound drops (:func:`tolerance`), fails when all of
# it lies above, and has no signal otherwise (:func:`dpnc_reproduce.claims.rate_within_bound`,
# regime GROWS); the reason is measured on the rows. The proximal point's rate also needs its
# inner-steps check (same rows) to hold: otherwise its low-n points may be optimisation-limited. The
# tolerance replaced a single RATE_TOL = 0.1 (set on 11-26, after the rows it judged); it is derived
# per grid but was itself declared after the committed rows.
REGIME = GROWS
# the theorems' failure probability β in ℓ = ln(n√ρ/β): every committed run's (KLRatesConfig's default)
BETA = 0.05
WORDS = {True: "holds", False: "fails", None: "no signal"}
# A theorem with explicit constants is tested on its bound, measured / bound ≤ 1 in every run, not
# on a slope: KL-Spider's Φfloor (Thm 1, Cf = 48, its K and log(1/β′) computed); its slope claims
# stay, reported unjudged.
EXPLICIT = {
    "kl-spider": "judged on its explicit bound instead (excess ≤ Φfloor in every run, below)"
}
# a median excess above this share of F(w0) − F* at the lowest x: the start caps the excess there
FLOOR = 0.25


def medians(
    rows: Sequence[KLRow], metric: str, keys: Sequence[str], x: str
) -> dict[tuple, list[tuple]]:
    """:func:`~dpnc_reproduce.common.group_medians` of typed rows."""
    return group_medians([vars(r) for r in rows], metric, keys, x)


def tolerance(algorithm: str, regime: str, kappa: float, d: int, xs: Sequence[float]) -> Tolerance:
    """The logs a rate's bound drops, as a slope over its grid x = n√ρ/√d (n√ρ = x√d).

    KL-Spider's Φfloor and the proximal point's bound are computed with their log factors (K,
    log(1/β′), T, log(n²log²(1/β′)/(dβ′))): nothing dropped, 0. Adaptive GD (Thm 4, and Thm 5's
    selection on its iterates) drops ℓ = ln(n√ρ/β) and p_max ∝ ln(n√ρ) (its constants (1 + 8γ²L1)
    and log F0 also dropped): in the κ/2 regime its term carries ℓ^{κ/2}, in the 2κ/(4−κ) regime
    (ℓ·p_max)^{κ/(4−κ)}."""
    if algorithm not in ADAPTIVE:
        return Tolerance(0.0, "none dropped: the bound is computed with its log factors")
    nsr = [x * math.sqrt(d) for x in xs]
    ell = [v / BETA for v in nsr]
    if regime == "κ/2":
        factors, formula = [(ell, kappa / 2)], f"ℓ^{kappa / 2:g}, ℓ = ln(n√ρ/β)"
    else:
        p = kappa / (4 - kappa)
        factors, formula = [(ell, p), ([max(v, math.e) for v in nsr], p)], f"(ℓ·ln n√ρ)^{p:.3g}"
    return dropped_log_tolerance(xs, factors, regime=REGIME, formula=formula)


def predicted(regime: str, kappa: float) -> float:
    """The exponent of x = n√ρ/√d that the regime's term predicts."""
    return {"κ": -kappa, "2κ/(4−κ)": -2 * kappa / (4 - kappa), "κ/2": -kappa / 2}[regime]


def _fmt(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "—"


def _interval(s: dict, part: str = "") -> stats.Interval:
    """The per-seed slope interval of a :func:`slopes` record (``part`` "upper": over the upper half
    of x)."""
    name = "seed_slope_upper" if part == "upper" else "seed_slope"
    note = (
        "fewer than 3 points" if part and not math.isfinite(s[name]) else s.get(f"{name}_note", "")
    )
    return stats.Interval(s[name], s[f"{name}_low"], s[f"{name}_high"], s["seeds"], note or "")


def slopes(rows: Sequence[KLRow]) -> list[dict]:
    """Per (algorithm, objective, d, regime) of the n sweep, over the non-trivial points: the fitted
    slope of the median (and of the mean) excess against x, also over the upper half of the x range
    (NaN with fewer than 3 points there), the predicted exponent and the bound's own slope over the
    same points; and the slopes fitted per seed (``seed_slope``, whole range and upper half) with
    their 95 % t interval over the seeds (``…_low``, ``…_high``; infinite with one seed), on which
    the claims are judged."""
    main = [r for r in rows if r.sweep == "n" and r.regime != TRIVIAL]
    keys = ("algorithm", "objective", "d", "regime")
    med, mean_rows = medians(main, "excess", keys, "x"), {}
    for r in main:
        mean_rows.setdefault(tuple(getattr(r, k) for k in keys), {}).setdefault(r.x, []).append(
            r.excess
        )
    bound = medians(main, "bound", keys, "x")
    grad = medians(main, "grad_norm", keys, "x")
    grad_bound = medians([r for r in main if r.grad_bound is not None], "grad_bound", keys, "x")
    terms = _term_medians(main, keys)
    seeds = by_seed(main, "excess", keys, "x")
    groups: dict[tuple, dict[float, list[KLRow]]] = {}
    for r in main:
        groups.setdefault(tuple(getattr(r, k) for k in keys), {}).setdefault(r.x, []).append(r)
    order = {a: i for i, a in enumerate(ALGORITHMS)}
    out = []
    for key in sorted(med, key=lambda k: (order[k[0]], k[1], k[2], k[3])):
        if len(med[key]) < 2:
            continue
        xs, ys = zip(*med[key])
        kappa = OBJECTIVES[key[1]][0]
        means = [statistics.fmean(mean_rows[key][x]) for x in xs]
        upper = (
            len(xs) // 2
        )  # the upper half of the range (≥ 3 points), where the asymptotic term rules
        seed_xs, seed_ys = seeds[key]
        whole = stats.slope_interval(seed_xs, seed_ys)
        top = (
            stats.slope_interval(seed_xs[upper:], [ys[upper:] for ys in seed_ys])
            if len(xs) - upper >= 3
            else stats.Interval(math.nan, -math.inf, math.inf, 0, "fewer than 3 points")
        )
        tol = tolerance(key[0], key[3], kappa, key[2], xs)
        out.append(
            {
                "algorithm": key[0],
                "objective": key[1],
                "kappa": kappa,
                "d": key[2],
                "regime": key[3],
                "tol": tol.value,
                "tol_formula": tol.formula,
                "points": len(xs),
                "x_min": min(xs),
                "x_max": max(xs),
                "slope": loglog_slope(xs, ys),
                "slope_mean": loglog_slope(xs, means),
                "slope_upper": loglog_slope(xs[upper:], ys[upper:])
                if len(xs) - upper >= 3
                else math.nan,
                "predicted": predicted(key[3], kappa),
                "bound_slope": loglog_slope(*zip(*bound[key])),
                **_ends(xs, [dict(terms[t][key]) for t in terms if key in terms[t]], bound[key]),
                "grad_slope": loglog_slope(*zip(*grad[key])),
                "grad_bound_slope": (
                    loglog_slope(*zip(*grad_bound[key])) if key in grad_bound else None
                ),
                "seeds": whole.seeds,
                "seed_slope": whole.estimate,
                "seed_slope_low": whole.low,
                "seed_slope_high": whole.high,
                "seed_slope_note": whole.note,
                "seed_slope_upper": top.estimate,
                "seed_slope_upper_low": top.low,
                "seed_slope_upper_high": top.high,
                **_diagnostics(groups[key], xs),
            }
        )
    return out


TERMS = ("bound_dim_term", "bound_noise_term", "bound_rest")  # Theorem 4's three terms, constants 1


def _term_medians(rows: Sequence[KLRow], keys: Sequence[str]) -> dict[str, dict]:
    """Adaptive GD's bound term by term (its 2κ/(4−κ) term, its κ/2 term and the rest,
    (1/(n√ρ))^{κ/(2−κ)}): each term's median per group and x
    (:func:`~dpnc_reproduce.common.group_medians`)."""
    split = [
        vars(r) | {"bound_rest": r.bound - r.bound_dim_term - r.bound_noise_term}
        for r in rows
        if r.bound_dim_term is not None and r.bound_noise_term is not None
    ]
    return {t: group_medians(split, t, keys, "x") for t in TERMS}


def _ends(xs: Sequence[float], terms: Sequence[dict], bound: Sequence[tuple]) -> dict:
    """The range of the bound's slope over ``xs`` that its terms' unknown O-constants allow
    (:func:`dpnc_reproduce.loglog.term_slopes`): each term's own slope, a term counted where it is
    more than 1e-9 of the bound at some point (a rounding remainder is not a term). A bound of one
    term (or computed with its constants): its own slope at both ends."""
    total = dict(bound)
    kept = [[t[x] for x in xs] for t in terms if any(t.get(x, 0.0) > 1e-9 * total[x] for x in xs)]
    low, high = term_slopes(xs, kept) if kept else (loglog_slope(*zip(*bound)),) * 2
    return {"bound_slope_low": low, "bound_slope_high": high}


def _diagnostics(by_x: dict[float, list[KLRow]], xs: Sequence[float]) -> dict:
    """What the reasons for a slope are read from: at the lowest and highest x, the median excess
    over F(w0) − F* and over the bound; at the lowest x, adaptive GD's 2κ/(4−κ) term over its κ/2
    term; the median over the points of the standard deviation of log excess between seeds; the runs
    whose inner steps were capped below the rule."""

    def med(x, f):
        return statistics.median(f(r) for r in by_x[x])

    low, high = xs[0], xs[-1]
    logs = [[math.log(r.excess) for r in by_x[x] if r.excess > 0] for x in xs]
    first = by_x[low][0]
    return {
        "start_ratio_low": med(low, lambda r: r.excess / r.start_excess),
        "bound_ratio_low": med(low, lambda r: r.excess / r.bound),
        "bound_ratio_high": med(high, lambda r: r.excess / r.bound),
        "terms_ratio_low": (
            first.bound_dim_term / first.bound_noise_term
            if first.bound_dim_term is not None and first.bound_noise_term
            else None
        ),
        "log_sd": statistics.median(statistics.stdev(v) if len(v) > 1 else math.nan for v in logs),
        "capped": sum(
            r.inner_steps is not None and r.inner_steps < r.inner_rule for x in xs for r in by_x[x]
        ),
        "inner_low": first.inner_steps,
        "inner_high": by_x[high][0].inner_steps,
    }


def observed(s: dict, part: str = "") -> bool | None:
    """Does a :func:`slopes` record's excess fall no slower than its bound's own slope over the same
    points (plus its tolerance, :func:`tolerance`)? (``part`` "upper": over the upper half of x.)"""
    return _at_ends(s, part)[0]


def _at_ends(s: dict, part: str = "") -> tuple[bool | None, str, tuple]:
    """:func:`dpnc_reproduce.claims.rate_at_ends` of a :func:`slopes` record: the rule at both ends
    of the bound's slope range (its terms' unknown constants), a verdict only where they agree."""
    ends = (s["bound_slope_low"], s["bound_slope_high"])
    return stats.rate_at_ends(_interval(s, part), ends, regime=REGIME, tol=_tol(s))


def _tol(s: dict) -> float:
    """A :func:`slopes` record's tolerance (:func:`tolerance`, computed from the rows by
    :func:`slopes`)."""
    return s["tol"]


def _observed_text(s: dict) -> str:
    if s["points"] < 3:
        return "— (2 points)"
    return {True: "yes", False: "**no**", None: "no signal"}[observed(s)]


def reason(s: dict) -> str:
    """Why a :func:`slopes` record's rate does not hold, read off the measured numbers."""
    fit, limit = _interval(s), s["bound_slope_high"] + _tol(s)
    if not (math.isfinite(fit.low) and math.isfinite(fit.high)):
        return f"no interval ({fit.note or 'fewer than 2 seeds with a slope'})"
    out = [
        f"all of the interval lies above the bound's slope + {_tol(s):.3f} = {limit:.2f}: the excess falls slower "
        "than the bound"
        if fit.low > limit
        else "the verdict depends on the ratio of the theorem's constants (its two ends disagree)"
        if _at_ends(s)[1]
        else f"the interval straddles {limit:.2f} (±{(fit.high - fit.low) / 2:.2f} wide; log excess spreads by "
        f"{s['log_sd']:.2g} between seeds at a point, {s['seeds']} seeds, {s['points']} points)"
    ]
    if s["capped"]:
        out.append(f"the inner cap bound in {s['capped']} runs")
    if s["start_ratio_low"] > FLOOR:
        out.append(
            f"a floor from the excess at x0: at the lowest x the median excess is already "
            f"{s['start_ratio_low']:.2g} of F(w0) − F*"
        )
    if s["regime"] == "κ/2" and (s["terms_ratio_low"] or 0) > 0.3:
        out.append(
            f"next to the crossover: the 2κ/(4−κ) term is {s['terms_ratio_low']:.2g}× the κ/2 term at the "
            "lowest x"
        )
    upper = _interval(s, "upper")
    if math.isfinite(upper.estimate):
        out.append(f"over the upper half of x: {WORDS[observed(s, 'upper')]} ({upper})")
    return "; ".join(out)


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    q = (
        statistics.quantiles(values, n=4, method="inclusive")
        if len(values) > 1
        else [values[0]] * 3
    )
    return q[0], q[1], q[2]


def _capped(rows: Sequence[KLRow]) -> int:
    return sum(r.inner_steps is not None and r.inner_steps < r.inner_rule for r in rows)


def describe(result: Result) -> str:
    """The setting: privacy of the noise, the objectives and their constants, the budget, the bounds
    drawn."""
    rows, cfg = result.rows, result.config
    private = all(r.private for r in rows)
    kinds = sorted({r.objective for r in rows}, key=list(OBJECTIVES).index)
    lines = [
        (
            "Privacy noise: secret (operating-system entropy); every run is private."
            if private
            else "Privacy noise: **NOT PRIVATE** — seeded test sources (`--reproducible`), for replaying the numbers."
        ),
        "",
        "Objectives (data-free: n copies of one example, so n enters only through the noise), each on the ball "
        f"of radius 1 around w*, started at w0 = w* + {cfg.start_fraction:g}·(1, …, 1)/√d, F0 = (γL0)^κ (the "
        "algorithms' default). Every iterate, the proximal point method's inner iterates included, is projected "
        "onto that ball, the region where L0 is declared (sensitivity: "
        f"{', '.join(sorted({r.sensitivity for r in rows}))}; see `dpnc.algorithms.menart.common`):",
        "",
    ]
    for o in kinds:
        r = next(r for r in rows if r.objective == o)
        lines.append(
            f"- `{o}`: {OBJECTIVES[o][1]}, κ = {OBJECTIVES[o][0]:g}, γ = {r.gamma:.4g}, "
            f"L0 = {r.L0:.4g} (at d = {r.d}), F0 = {r.F0:.4g}"
        )
    lines += [
        "",
        f"Budget ρ = 1 (ρ-zCDP, replace-one) in the n sweep, n = n√ρ; ρ sweep ρ ∈ {list(cfg.rhos)} at "
        f"n = {cfg.rho_sweep_n:.0e}, d = {cfg.rho_sweep_dim}, `{cfg.rho_sweep_objective}`. "
        f"β = {cfg.beta}, ε reported at δ = {cfg.dp_delta:g} (zCDP conversion), {cfg.seeds} seeds. "
        f"Calibrated noise (paper=False, Menart et al. §1.2). Proximal point: d = 1; its inner noisy projected GD runs "
        f"{cfg.inner_scale:g}× the steps at which its optimisation error meets Theorem 9's statistical term, "
        "⌈n²ρ_A/(d·ℓ)⌉ with ρ_A = ρ/T, ℓ = log(n²log²(2/β_A)/(dβ_A)) (`kl_proximal.statistical_inner_steps`: "
        "it grows like (n√ρ)², so the inner error stays below the statistical term at every n√ρ), capped at "
        f"{cfg.max_inner_iters} (the cap bound in {_capped(rows)} runs); check at n = {cfg.inner_check_n} "
        f"with {cfg.inner_check_factor:g}× those steps, {cfg.inner_check_seeds} seeds per arm.",
        "",
        "Bounds drawn and fitted, at each run's constants: Spider — Φfloor of its schedule (Theorem 1, exact "
        "constants, Cf = 48); proximal point — Theorem 2's (γL0√(T·d·log(…))/(n√ρ))^κ with the O-constant 1; "
        "adaptive GD — Theorem 4 with the O-constant 1 and its log factors ℓ, p_max dropped: "
        "(γL0√d/(n√ρ))^{2κ/(4−κ)} + (max{γ²,1}L0²/(min{L1,1}n√ρ))^{κ/2} + (1/(n√ρ))^{κ/(2−κ)}; a point is in "
        "the 2κ/(4−κ) regime when the first term is the larger. Lower bounds: Corollary 1's (γL0√d/(n√ρ))^κ "
        "for κ ∈ (1, 2]; for κ > 2 at d = 1, Theorem 8's ¼(γL0/(nε))^κ at ε = √ρ — both with constants and "
        "log factors dropped (Ω̃), and both worst cases over the class of (γ, κ)-KL, L0-Lipschitz functions, "
        "not bounds for the fixed instance. Slopes are fitted over the points where the bound is below F0 "
        '("trivial" points, where the theorem promises nothing, are drawn but not fitted).',
    ]
    return "\n".join(lines)


def render(result: Result) -> str:
    """The fitted slopes beside the predictions, the gradient norms, the medians over seeds, the
    cost, notes."""
    rows, slope_rows = result.rows, slopes(result.rows)
    lines = [
        "## Fitted log-log slopes of the excess against n√ρ/√d\n",
        'Median (and mean) over seeds at each point; "bound": the slope of the drawn bound over the same '
        "points (log factors make finite-range slopes shallower than the exponent). Adaptive GD + selection: "
        "the selected point is one of Algorithm 3's iterates, and Theorem 5 bounds only its ‖∇F‖; its "
        '"predicted" is Algorithm 3\'s exponent.\n',
        "Per seed: the slopes fitted on each seed's excess, their mean and 95 % t interval over the seeds "
        '(the claims are judged on it: "observed", with 3 points or more, as in the claims table).\n',
        "| algorithm | objective (κ) | d | regime | points | x range | per seed [95 %] | per seed, upper half "
        "[95 %] | fitted (median) | fitted (mean) | fitted (median, upper half of x) | predicted | bound | "
        "observed |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in slope_rows:
        lines.append(
            f"| {s['algorithm']} | {s['objective']} ({s['kappa']:g}) | {s['d']} | {s['regime']} | "
            f"{s['points']} | {s['x_min']:.2g} – {s['x_max']:.2g} | {_interval(s)} | "
            f"{_interval(s, 'upper')} | {_fmt(s['slope'])} | "
            f"{_fmt(s['slope_mean'])} | {_fmt(s['slope_upper'])} | {s['predicted']:.2f} | "
            f"{_fmt(s['bound_slope'])} | {_observed_text(s)} |"
        )
    grad = [s for s in slope_rows if s["algorithm"] in ADAPTIVE]
    if grad:
        lines += [
            "",
            "## Gradient norm of the output: last iterate vs private selection\n",
            "Slopes of the median ‖∇F(w_out)‖ against n√ρ/√d. Theorem 5 (selection) bounds it by "
            "Õ(√d/(n√ρ) + 1/(√n·ρ^{1/4})) in the best case: slope −1/2 once the second term rules; "
            '"Thm 5 bound" is its slope (O-constant 1) over the same points.\n',
            "| objective (κ) | d | regime | adaptive GD (last iterate) | + selection | Thm 5 bound |",
            "|---|---|---|---|---|---|",
        ]
        table = {(s["objective"], s["d"], s["regime"], s["algorithm"]): s for s in grad}
        for o, d, regime in dict.fromkeys((s["objective"], s["d"], s["regime"]) for s in grad):
            last, sel = (
                table.get((o, d, regime, "adaptive-gd")),
                table.get((o, d, regime, "adaptive-gd+select")),
            )
            lines.append(
                f"| {o} ({OBJECTIVES[o][0]:g}) | {d} | {regime} | "
                f"{_fmt(last['grad_slope']) if last else '—'} | {_fmt(sel['grad_slope']) if sel else '—'} | "
                f"{_fmt(sel['grad_bound_slope']) if sel and sel['grad_bound_slope'] is not None else '—'} |"
            )
    lines += [
        "",
        "## Medians over seeds\n",
        "Sweep: n (ρ = 1), ρ, or the proximal point method's inner check (× its factor of inner steps).\n",
        "| algorithm | objective | d | n√ρ | ρ | sweep | regime | excess: median [quartiles] | bound | "
        "lower bound | ‖∇F(w_out)‖ | updates | queries | max ρ spent | ε at δ | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple, list[KLRow]] = {}
    for r in rows:  # the inner check's runs apart, one group per factor
        groups.setdefault(
            (
                r.algorithm,
                r.objective,
                r.d,
                r.nsr,
                r.rho,
                r.sweep,
                r.inner_factor if r.sweep == "inner" else None,
            ),
            [],
        ).append(r)
    order = {a: i for i, a in enumerate(ALGORITHMS)}
    for key in sorted(
        groups, key=lambda k: (order[k[0]], k[1], k[2], k[5], k[4] != 1.0, k[6] or 0, k[3])
    ):
        g = groups[key]
        lo, m, hi = _quartiles([r.excess for r in g])
        lb = g[0].lower_bound
        sweep = f"inner ×{key[6]:g}" if key[5] == "inner" else key[5]
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {key[3]:.3g} | {key[4]:g} | {sweep} | {g[0].regime} | "
            f"{m:.3g} [{lo:.2g}, {hi:.2g}] | {g[0].bound:.3g} | {'—' if lb is None else f'{lb:.3g}'} | "
            f"{statistics.median(r.grad_norm for r in g):.3g} | "
            f"{statistics.median(r.steps for r in g):g} | {statistics.median(r.queries for r in g):g} | "
            f"{max(r.rho_spent for r in g):.4g} | {max(r.epsilon for r in g):.3g} | "
            f"{statistics.median(r.seconds for r in g):.2f} |"
        )
    lines += [
        "",
        "## Cost per algorithm (totals over the grid)\n",
        "| algorithm | runs | updates | gradient queries | wall time (s) |",
        "|---|---|---|---|---|",
    ]
    for a in ALGORITHMS:
        mine = [r for r in rows if r.algorithm == a]
        if mine:
            lines.append(
                f"| {a} | {len(mine)} | {sum(r.steps for r in mine):.3g} | "
                f"{sum(r.queries for r in mine):.3g} | {sum(r.seconds for r in mine):.1f} |"
            )
    lines += [
        "",
        "## Notes\n",
        "- Every rate claim is judged one-sided on the per-seed slopes' 95 % t interval over the seeds (the "
        "theorems are upper bounds): it holds when the interval lies below the bound's own slope over the same "
        "points + the tolerance of the logs that bound drops over those points (0 for KL-Spider and the proximal "
        "point, whose bounds keep their logs; adaptive GD's ℓ and p_max otherwise; until 27 Nov 2026 one 0.1 for "
        "every grid, set after these rows), fails when all of it lies above, no signal otherwise — with the "
        "reason measured "
        "on the rows (the inner cap, a floor from the excess at x0, a regime crossover, noise). A slope steeper "
        "than the bound's is consistent with it; no tightness is claimed. The proximal point's rate also needs "
        "its inner-steps check to hold. One rule for every algorithm and regime.",
        "- n and ρ enter all four algorithms only through n√ρ on these data-free objectives (every noise scale "
        "and every schedule is a function of n√ρ), so the ρ sweep checks the implementation, not the theory.",
        "- `pseudo-huber` is (γ, 1)-KL on the ball, but near its minimum it is ½‖w‖² to second order, i.e. "
        "locally PL (κ = 2, γ ≈ 1/√2): once an algorithm is close to w*, it converges at the κ = 2 rate. "
        "A slope steeper than −κ there is the instance being easier than the worst case, not a contradiction "
        "(Theorem 1 is an upper bound). Corollary 1's lower bound needs κ = 1 + Ω(1): none is drawn for κ = 1.",
        "- Spider's Φfloor carries √(K·log(1/β′)) with K growing like log(n√ρ), and the proximal point "
        "bound √(T·log(…)) likewise: their slopes over a finite range are shallower than −κ; compare the "
        "fitted slope with the bound's slope as well as with −κ.",
        "- Adaptive GD stops once its noisy gradient norm N_t (noise σ̂ = L0/(√n·ρ^{1/4})) stops being "
        "informative; its κ/2 term is that noise floor. The 2κ/(4−κ) term rules only while d ≳ n√ρ, hence "
        "the runs at d ≥ 10⁴ (adaptive GD only). At small d its excess can sit decades below its bound at "
        "the low end of the range and plateau there before it falls, which makes a fit over the whole range "
        'shallower than the asymptotic slope: the "upper half" column fits only the larger half of x.',
        "- Seeds: at d ≤ 10 adaptive GD's final error is a few Gaussian coordinates, so its excess spreads over "
        "about a decade between seeds (the noise is secret and fresh each run), hence the intervals over "
        "seeds. Spider's spread is tiny (its schedule, not the noise, sets the excess).",
        "- The proximal point method's inner solves run the steps at which their optimisation error meets "
        "Theorem 9's statistical term (about n²ρ_A/(d·ℓ), growing like (n√ρ)²), far below the theorem's "
        "n²ρ_A·log²(2/β_A)/d (never a privacy cost: σ is set for the steps actually run). A fixed cap (issue "
        "#12: 300 steps) let the optimisation error stop shrinking with n and flattened the slope; the inner "
        "check claim measures whether more steps would still lower the excess. Its cost, about (n√ρ)²/ℓ "
        "noisy gradient steps per run, bounds the n range. The rule balances the two errors' asymptotic "
        "terms only: at the low end of n it gives a few steps per round (3–5 at n ≤ 50), where the weighted "
        "average still carries the prox centre's weight, so those points can be optimisation-limited (their "
        "excess too high, the fitted slope too steep); the evidence prints the steps at both ends. Its excess "
        "spreads over about two decades between seeds (≈ |Z|^κ for a near-Gaussian final error Z), so its "
        "slope intervals are wide.",
        "- The regime of an adaptive-GD point is read off the simplified bound (constants 1), which need not "
        "place the crossover where the data do; fits over a few points next to a crossover, or next to the "
        "trivial region (where the excess saturates near F(w0)), mix the two behaviours.",
        "",
        "Figures: `fig_excess.png` (rows: algorithms; columns: objectives), `fig_grad_norm.png`; every run: "
        "`rows.csv`; the fits: `slopes.csv`; everything: `result.json`.",
    ]
    return "\n".join(lines)
