"""The nonsmooth-rates experiment's analysis: the sample complexity n(β) per seed, its fitted
exponents beside the theorems', the papers' comparisons, the certificate claim, the summary's text
and tables, the figure.

The config and the runs are in :mod:`dpnc_reproduce.nonsmooth_rates.run`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from dpnc.algorithms import ALGORITHMS, Setting, zcdp
from dpnc.privacy import Budget
from dpnc.problems import Constants
from dpnc_reproduce import claims as stats
from dpnc_reproduce.loglog import (
    GROWS,
    SHRINKS,
    Tolerance,
    dropped_log_tolerance,
    loglog_fit,
    term_slopes,
)
from dpnc_reproduce.nonsmooth_rates.run import METHODS, RateRow, RatesConfig, far_field
from dpnc_reproduce.protocol import Result

LABEL = {name: entry.label for name, entry in METHODS.items()}


class Theorem(NamedTuple):
    """What the report says of one method's theorem: ``terms``, its n as a sum of terms in (d, ε, α,
    β) (ε through ρ ∝ ε for ZTC; :func:`theory_n`); ``setting``, how its parameters are set here;
    ``log_power``, the power p of the (ln N)^p its Õ drops (the tolerance of its exponent claims,
    :func:`tolerance`)."""

    terms: str
    setting: str
    log_power: float


# The polylog each theorem's n drops (its Õ), as a power p of ln N (N the theorem's n at the point;
# the logs' arguments T, Σ are at most n), applied to all of N (an upper envelope: only the privacy
# term carries it). ZTC (Thm 4.9): σ ∝ √ℓ_T with ℓ_T = ⌊log₂T⌋ + 1, its n ∝ σ: (ln N)^½; naive (App.
# E): n ∝ σ²: (ln N)^1; KLT single pass (Thm 3.1, 6.1): σ ∝ √(log Σ·log(1/δ)) and E‖TREE‖ ∝ σ√(d log
# Σ), n ∝ that: (ln N)^1; multi-pass (Thm 4.1 + Prop 5.1): its m's and the gap's logs, (ln N)^1. The
# tolerance of each exponent claim is what this factor adds to the least-squares slope over that
# claim's grid (:func:`dpnc_reproduce.loglog.dropped_log_tolerance`). Declared here on 2026-11-27,
# after the committed rows (2026-11-22 to 11-24) were measured; the RATE_TOL = 0.1 it replaces was
# set on 11-26, also after them.
THEOREMS: dict[str, Theorem] = {
    "zo-o2nc": Theorem("d/(αβ³) + d^{3/2}/(ραβ²)", "m = d directions", 0.5),
    "klt": Theorem(
        "√d/(αβ³) + d/(εαβ²)",
        "m set for **equal function evaluations** (KLT's ≤ ZTC's at the same n)",
        1.0,
    ),
    "zo-o2nc:naive": Theorem(
        "(√d + 1 + d^{3/2}/ρ)²/(αβ³)", "Appendix E's T and K with m = d directions (as ZTC's)", 1.0
    ),
    "klt:first-order": Theorem(
        "√d/(αβ³) + d/(εαβ²) (as Thm 3.1)", "its variance-matching m capped at d", 1.0
    ),
    "klt:multi-pass": Theorem(
        "d^{3/4}/(ε√α·β^{3/2}) + d/β² (ERM + Prop 5.1's gap)",
        "its variance-matching m capped at d, T ≤ {steps}",
        1.0,
    ),
}
assert set(THEOREMS) == set(METHODS), "every method of the table has its theorem's words here"
LOG_POWER = {
    name: theorem.log_power for name, theorem in THEOREMS.items()
}  # the name the declarations use


VARIABLES = ("d", "epsilon", "alpha", "beta")
SYMBOL = {"d": "d", "epsilon": "ε", "alpha": "α", "beta": "β"}
# Each variable's regime: a sample complexity n ≤ C·N(d, ε, α, β) is a statement about large d and
# small ε, α, β, so for ε, α and β a slope *steeper* (more negative) than N's is the violating
# direction.
REGIME = {"d": GROWS, "epsilon": SHRINKS, "alpha": SHRINKS, "beta": SHRINKS}
NOT_TESTABLE = "not testable by slope here"
# A variable the instance confounds: its slope does not test the theorem here, whatever the rule
# says.
CONFOUNDED = {
    "alpha": "not testable by slope here: on this instance the target region ‖∂F‖_2α ≤ β grows with α "
    "(the table below the exponents), so n(β) falls faster with α than any bound's 1/α for a reason "
    "the theorems do not model"
}


def crossing(series: Sequence[tuple[int, float]], beta: float) -> float:
    """The n where Ē(n) first reaches β: linear in log n between the grid points around the first
    crossing; the first n if it is reached there already (left-censored, flagged by the caller), inf
    if never."""
    for j, (n, value) in enumerate(series):
        if value <= beta:
            if j == 0:
                return float(n)
            n0, v0 = series[j - 1]
            t = (v0 - beta) / (v0 - value)
            return math.exp(math.log(n0) + t * (math.log(n) - math.log(n0)))
    return math.inf


@dataclass(frozen=True)
class Threshold:
    """n(β) of one seed of one cell and method (inf: not reached by n_max; ``censored``: reached at
    the first n); β in units of :func:`far_field`."""

    objective: str
    method: str
    d: int
    epsilon: float
    alpha: float
    beta: float
    seed: int
    n_beta: float
    censored: bool


def thresholds(rows: Sequence[RateRow], config: RatesConfig) -> list[Threshold]:
    series: dict[tuple, list[tuple[int, float]]] = {}
    for r in rows:
        series.setdefault((r.objective, r.method, r.d, r.epsilon, r.alpha, r.seed), []).append(
            (r.n, r.expected_norm)
        )
    out = []
    for key, points in series.items():
        points.sort()
        unit = far_field(config, key[0])
        for beta in config.betas:
            n_beta = crossing(points, beta * unit)
            out.append(Threshold(*key[:5], beta, key[5], n_beta, points[0][1] <= beta * unit))
    return out


def theory_n(
    method: str, *, d: int, epsilon: float, alpha: float, beta: float, config: RatesConfig
) -> float:
    """The theorem's n for (d, ε, α, β) with constants 1 (L = 1, Φ = start distance); logs dropped.

    For E‖∂F(x_out)‖_{2α} ≤ β, with ρ the paper's ρ(ε, δ_DP) and Φ = F(x₀) − inf F (docs/papers.md,
    ZTC §3, Thm 4.9; KLT §3, v2 Thm 3.1):

        ZTC (variance-reduced, Thm 4.9):  n ≍ (Φ + Lα)·d·L²/(αβ³) + (Φ + Lα)·d^{3/2}·L/(ραβ²)
        KLT (single-pass ZO, Thm 3.1):    n ≍ Φ·L²·√d/(αβ³) + Φ·L·d/(εαβ²)

    Naive (App. E): its bound (Φ + α)T/(αn) + (√d + 1 + d^{3/2}/ρ)/√T at its best T is ≍ ((Φ +
    α)/(αn))^{1/3}·(√d + 1 + d^{3/2}/ρ)^{2/3}, so n ≍ (Φ + α)(√d + 1 + d^{3/2}/ρ)²/(αβ³). Thm 6.1
    (first order) has Thm 3.1's n (docs/papers.md, KLT §2.5). Multi-pass (Thm 4.1) bounds the
    *empirical* norm; the population's adds Prop 5.1's gap L√(d/n), hence its d/β² term."""
    setting = Setting(
        Constants(L0=1.0), 1, d, gap=config.start_distance
    )  # n unused: the rate gives it
    budget = Budget(epsilon, config.dp_delta)
    entry = METHODS[method]
    oracle = entry.options["oracle"]
    n = ALGORITHMS[entry.algorithm].samples_needed(
        setting, budget, beta, smoothing=alpha, oracle=oracle
    )
    return (
        n + d / beta**2 if oracle == "multi-pass" else n
    )  # the empirical norm's n + Prop 5.1's gap


@dataclass(frozen=True)
class Exponent:
    objective: str
    method: str
    variable: str
    beta: float | None  # None: the β exponent (over all betas)
    cell: tuple  # the fixed values
    theory: float
    fitted: stats.Interval
    verdict: (
        bool | None
    )  # the regime's one-sided rule (None for a confounded variable: see ``rule``)
    reached: str  # e.g. "9/10 seeds"
    over: tuple  # the values of the variable fitted over (the whole sweep)
    tolerance: Tolerance | None = None
    rule: bool | None = None  # the one-sided rule's own verdict (also for a confounded variable)
    ends: tuple[float, float] | None = (
        None  # the bound's slope range by its terms' unknown constants
    )
    at_ends: tuple[bool | None, bool | None] = (None, None)  # the rule at each end
    status: str = ""  # DEPENDS where the two ends disagree

    @property
    def regime(self) -> str:
        return REGIME[self.variable]

    @property
    def limit(self) -> float:
        return stats.rate_limit(self.theory, regime=self.regime, tol=self.tolerance.value)


def exponents(rows: Sequence[RateRow], config: RatesConfig) -> list[Exponent]:
    """Every fitted exponent with its theorem exponent and verdict."""
    table = {
        (t.objective, t.method, t.d, t.epsilon, t.alpha, t.beta, t.seed): t
        for t in thresholds(rows, config)
    }
    base = (config.base_d, config.base_epsilon, config.base_alpha)
    out = []

    def value(o, m, cell, beta, s):
        return censored_n(table.get((o, m, *cell, beta, s)), config)

    for o in config.objectives:
        cells = config.cells(o)
        sweeps = {
            "d": [c for c in cells if c[1:] == base[1:]],
            "epsilon": [c for c in cells if (c[0], c[2]) == (base[0], base[2])],
            "alpha": [c for c in cells if c[:2] == base[:2]],
        }
        for m in config.methods:
            for variable, sweep in sweeps.items():
                if len(sweep) < 2:
                    continue
                index = VARIABLES.index(variable)
                xs = [c[index] for c in sweep]
                for beta in config.betas:
                    ys = [[value(o, m, c, beta, s) for c in sweep] for s in range(config.seeds)]
                    at = [dict(d=c[0], epsilon=c[1], alpha=c[2], beta=beta) for c in sweep]
                    theory = [theory_n(m, **p, config=config) for p in at]
                    terms = [theory_terms(m, **p, config=config) for p in at]
                    out.append(_exponent(o, m, variable, beta, base, xs, ys, theory, terms))
            if base in cells and len(config.betas) > 1:
                ys = [[value(o, m, base, b, s) for b in config.betas] for s in range(config.seeds)]
                at = [dict(d=base[0], epsilon=base[1], alpha=base[2], beta=b) for b in config.betas]
                theory = [theory_n(m, **p, config=config) for p in at]
                terms = [theory_terms(m, **p, config=config) for p in at]
                out.append(
                    _exponent(o, m, "beta", None, base, list(config.betas), ys, theory, terms)
                )
    return out


def theory_terms(
    method: str, *, d: int, epsilon: float, alpha: float, beta: float, config: RatesConfig
) -> tuple[float, ...]:
    """The terms of the theorem's n (:data:`THEOREMS`, constants 1, logs dropped) at (d, ε, α, β),
    each with the unknown O-constant the theorem gives it (their ratio moves the bound's slope over
    a finite grid, :func:`dpnc_reproduce.loglog.term_slopes`). Their sum is :func:`theory_n` except
    for the naive oracle, whose n ≍ (Φ + α)(√d + 1 + d^{3/2}/ρ)²/(αβ³) has one constant per term
    inside the square: its terms are the squares (the slope's range is the same: twice the range of
    √d, 1, d^{3/2}/ρ)."""
    phi = config.start_distance
    scale = (phi + alpha) / alpha
    if method in ("zo-o2nc", "zo-o2nc:naive"):
        rho = zcdp(Budget(epsilon, config.dp_delta)).rdp_rho
        if method == "zo-o2nc":
            return scale * d / beta**3, scale * d**1.5 / (rho * beta**2)
        return tuple(scale * t**2 / beta**3 for t in (math.sqrt(d), 1.0, d**1.5 / rho))
    if method == "klt:multi-pass":
        return math.sqrt(phi) * d**0.75 / (epsilon * math.sqrt(alpha) * beta**1.5), d / beta**2
    return phi * math.sqrt(d) / (alpha * beta**3), phi * d / (epsilon * alpha * beta**2)


def censored_n(t: Threshold | None, config: RatesConfig) -> stats.Value:
    """n(β) of one seed as a value for a fit: censored where the n grid does not pin it — not
    reached by n_max: [n_max, ∞); reached at the first n: [1, n_start] (counted at n_start); a
    missing run: (0, ∞)."""
    if t is None:
        return stats.Censored(0.0, math.inf)
    if not math.isfinite(t.n_beta):
        return stats.Censored(float(config.n_max), math.inf)
    return stats.Censored(1.0, float(config.n_start)) if t.censored else t.n_beta


def tolerance(
    method: str, variable: str, xs: Sequence[float], theory: Sequence[float]
) -> Tolerance:
    """The exponent claim's tolerance over its grid: what (ln N)^p (:data:`LOG_POWER`) adds to the
    slope."""
    return dropped_log_tolerance(
        xs,
        [(list(theory), LOG_POWER[method])],
        regime=REGIME[variable],
        formula=f"(ln N)^{LOG_POWER[method]:g}",
    )


def _exponent(o, m, variable, beta, cell, xs, ys, theory, terms=None) -> Exponent:
    """The exponent over the whole sweep, censored seeds kept
    (:func:`dpnc_reproduce.claims.slope_interval`), judged one-sided against the theorem's over the
    same points in the variable's regime (:data:`REGIME`), with the tolerance of its dropped logs
    over these points, at both ends of the range its terms' unknown constants allow
    (:func:`dpnc_reproduce.claims.rate_at_ends`: a verdict only where both ends agree); a confounded
    variable (:data:`CONFOUNDED`) gets no verdict (the rule's verdict is kept in ``rule``).
    ``terms``: the theorem's terms at each point (:func:`theory_terms`); None: the bound is one term
    (``theory``)."""
    terms = [(t,) for t in theory] if terms is None else terms
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    xs_, ys_ = [xs[i] for i in order], [[y[i] for i in order] for y in ys]
    theory_ = [theory[i] for i in order]
    fitted = stats.slope_interval(xs_, ys_)
    bound = loglog_fit(xs_, theory_)
    tol = tolerance(m, variable, xs_, theory_)
    ends = term_slopes(
        xs_, [[t[k] for t in (terms[i] for i in order)] for k in range(len(terms[0]))]
    )
    rule, status, at = stats.rate_at_ends(fitted, ends, regime=REGIME[variable], tol=tol.value)
    reached = (
        f"{sum(not any(isinstance(v, stats.Censored) for v in y) for y in ys_)}/{len(ys)} seeds"
    )
    return Exponent(
        o,
        m,
        variable,
        beta,
        cell,
        bound,
        fitted,
        None if variable in CONFOUNDED else rule,
        reached,
        tuple(xs_),
        tol,
        rule,
        ends,
        at,
        NOT_TESTABLE if variable in CONFOUNDED else status,
    )


def reason(e: Exponent, rows: Sequence[RateRow], config: RatesConfig) -> str:
    """The measured reason an exponent does not hold."""
    f, limit = e.fitted, e.limit
    if not (math.isfinite(f.low) or math.isfinite(f.high)):
        return f"no interval ({f.note or 'no seed'})"
    if e.variable in CONFOUNDED:
        return (
            f"the one-sided rule alone would say {_rule_word(e.rule)} (limit {limit:+.2f}); "
            + CONFOUNDED[e.variable]
        )
    if e.status == stats.DEPENDS:
        return "the verdict depends on the ratio of the theorem's constants (its two ends above disagree)"
    if e.verdict is False:
        side = "above" if e.regime == GROWS else "below"
        limit = stats.rate_limit(
            max(e.ends) if e.regime == GROWS else min(e.ends),
            regime=e.regime,
            tol=e.tolerance.value,
        )
        return (
            f"measured n(β) grows faster with {'' if e.regime == GROWS else '1/'}{SYMBOL[e.variable]} than "
            f"the theorem's bound allows over these points (all of the interval {side} {limit:+.2f})"
        )
    if f.high == math.inf and e.regime == GROWS or f.low == -math.inf and e.regime == SHRINKS:
        return f"censored seeds leave the interval open on the violating side ({f.note}): it cannot clear {limit:+.2f}"
    return f"the interval straddles {limit:+.2f}"


def _rule_word(v: bool | None) -> str:
    return "no signal" if v is None else "holds" if v else "fails"


# (fewer, more, claim): ``fewer`` reaches β with fewer samples than ``more``, judged paired per
# seed.
COMPARISONS = (
    (
        "klt",
        "zo-o2nc",
        "at equal function evaluations KLT single-pass ZO reaches β = {beta:g} with fewer samples than "
        "ZTC (KLT's √d improvement)",
    ),
    (
        "zo-o2nc",
        "zo-o2nc:naive",
        "at equal function evaluations ZTC's variance-reduced oracle reaches β = {beta:g} "
        "with fewer samples than its naive oracle (Thm 4.9's improvement on App. E)",
    ),
    (
        "klt:first-order",
        "klt",
        "KLT first-order (exact gradients: no d-fold estimation variance) reaches β = {beta:g} "
        "with fewer samples than KLT zeroth-order (Thm 6.1 promises the same n with Ω̃(d²) "
        "fewer oracle calls, so this is the gradients' own effect)",
    ),
    (
        "klt:multi-pass",
        "klt",
        "KLT multi-pass (each example read T times) reaches β = {beta:g} with fewer samples "
        "than single-pass (Thm 4.1's d^{{3/4}}/β^{{3/2}} against Thm 3.1's √d/β³)",
    ),
)


def paired_log_ratio(n_more: float, n_fewer: float, n_max: int) -> stats.Value | None:
    """log₂(n_more/n_fewer) of one seed; when only one reached β by n_max, the other's n(β) lies in
    [n_max, ∞), so the ratio is censored: only ``fewer`` reached: [log₂(n_max/n_fewer), ∞); only
    ``more`` reached: (−∞, log₂(n_more/n_max)] — each counted at its finite end. None when neither
    reached β."""
    if not (math.isfinite(n_more) or math.isfinite(n_fewer)):
        return None
    at = math.log2(min(n_more, n_max) / min(n_fewer, n_max))
    if math.isfinite(n_more) and math.isfinite(n_fewer):
        return at
    return stats.Censored(at, math.inf) if math.isfinite(n_fewer) else stats.Censored(-math.inf, at)


def _ratio(ztc: Threshold | None, klt: Threshold | None, config: RatesConfig) -> stats.Value:
    """n_ZTC(β)/n_KLT(β) of one seed, censored where either n(β) is (:func:`censored_n`)."""
    a, b = censored_n(ztc, config), censored_n(klt, config)
    if not isinstance(a, stats.Censored) and not isinstance(b, stats.Censored):
        return a / b
    (alo, ahi), (blo, bhi) = (
        (v.lower, v.upper) if isinstance(v, stats.Censored) else (v, v) for v in (a, b)
    )
    low = alo / bhi if bhi < math.inf else 0.0
    high = ahi / blo if blo > 0 else math.inf
    at_a = a.at if isinstance(a, stats.Censored) else a
    at_b = b.at if isinstance(b, stats.Censored) else b
    return stats.Censored(
        low, high, at_a / at_b if at_a > 0 and at_b > 0 and math.isfinite(at_a / at_b) else None
    )


def describe(result: Result) -> str:
    c = result.config
    return (
        f"Objectives: f(x, (p, σ)) = σ‖x − p‖, L = 1 exactly; `radial`: every σ = +1, p = x* + s·g/√d, "
        f"s = {c.spread} (convex); `radial-nonconvex`: a fraction q = {c.repel} of σ = −1 with s_r = "
        f"{c.repel_spread} (x* a local maximum, a sphere of minima). x₀ at distance {c.start_distance} from "
        f"x* in a seeded direction, Φ = {c.start_distance}. Every method with its theorem's parameters for n "
        f"(`from_theory`; KLT v2 in safe mode: clipped): "
        + "; ".join(
            f"{m}: {THEOREMS[m].setting}".format(steps=c.multipass_max_steps) for m in c.methods
        )
        + f". (ε, δ_DP = {c.dp_delta:g}); {c.seeds} seeds per cell; "
        f"n doubling from {c.n_start} to at most {c.n_max}. Certificates on {c.n_test} held-out examples, "
        f"rim axis from {c.n_axis} others, {c.certificate_samples} uniform points + {c.rim} rim pairs; "
        f"concentration term at probability 0.95.\n\n"
        "Judging an exponent (an upper bound, one-sided, in the direction of its variable's regime): in "
        "d (d → ∞) it holds when its 95 % interval over the seeds lies below the theorem's exponent over this grid "
        "+ tol, fails when all of it lies above; in ε and β (x → 0: the theorems are about small ε and β) it "
        "holds when the interval lies above the theorem's exponent − tol and fails when all of it lies below (n(β) "
        "rising faster than the bound as ε or β shrinks); otherwise no signal. tol is what the theorem's dropped "
        "logs, (ln N)^p (p: ZTC ½, naive and KLT 1), add to a slope over that claim's grid, shown beside each "
        "claim (until 27 Nov 2026: 0.1 for every grid, set after these rows were measured). α is not judged: the "
        "target region grows with α on this instance. Censored seeds are kept "
        f"(conservatively) and counted; above {stats.MAX_CENSORED:.0%} of them, no verdict."
    )
