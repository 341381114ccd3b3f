"""The nonsmooth-rates experiment's tables and figure: the exponents beside the theorems', the
median n(β), the certificates' tightness, the instance's target region,
``fig_sample_complexity.png`` (the claims are judged in
:mod:`dpnc_reproduce.nonsmooth_rates.report`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path

import torch
from scipy.optimize import brentq

from dpnc_reproduce import claims as stats
from dpnc_reproduce.nonsmooth_rates.report import (
    CONFOUNDED,
    SYMBOL,
    THEOREMS,
    VARIABLES,
    Exponent,
    _rule_word,
    exponents,
    theory_n,
    thresholds,
)
from dpnc_reproduce.nonsmooth_rates.run import RateRow, RatesConfig, law
from dpnc_reproduce.protocol import Result


def render(rows: Sequence[RateRow], config: RatesConfig) -> str:
    lines = [
        "## Exponents of n(β): theorem (over this grid, constants 1) vs fitted (mean over seeds, 95 % t "
        "interval)\n",
        "Seeds whose n(β) is censored (not reached by n_max: [n_max, ∞); reached at the first n: [1, n_start]) at "
        "some point of a sweep are kept: the estimate counts them at n_max (n_start), the interval takes the "
        "range of their slopes (conservative), the note counts them; above "
        f"{stats.MAX_CENSORED:.0%} of the seeds, no verdict. Every sweep point is kept.\n",
        "The theorem's exponent over a finite grid depends on the unknown ratio of its terms' constants: it "
        "lies between the terms' own slopes (column 'theorem: ends'), and a verdict is given only where both "
        "ends agree (else: depends on the constants).\n",
        "| objective | method | exponent in | regime | β | over | theorem (constants 1) | theorem: ends | "
        "tolerance | fitted | verdict | "
        "complete seeds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in exponents(rows, config):
        lines.append(
            f"| {e.objective} | {e.method} | {SYMBOL[e.variable]} | {e.regime} | "
            f"{'all' if e.beta is None else f'{e.beta:g}'} | {', '.join(f'{x:g}' for x in e.over)} | "
            f"{e.theory:+.2f} | {e.ends[0]:+.2f} … {e.ends[1]:+.2f} | {e.tolerance.value:.2f} | "
            f"{e.fitted} | {_verdict(e)} | {e.reached} |"
        )
    terms = "; ".join(f"{m} {THEOREMS[m].terms}" for m in config.methods)
    lines += [
        "",
        f"Theorems' n (constants 1): {terms}. Pure "
        "exponents: d 1…3/2 (ZTC), 1/2…1 (KLT single pass), 1…3 (naive), 3/4…1 (multi-pass); ε 0…−1 (naive "
        "0…−2); α −1 (ZTC: (Φ + α)/α); β −3…−2.",
        "",
        target_region(config),
        "",
        "## Median n(β) over seeds (— : not reached by n_max in most seeds)\n",
        "| objective | method | d | ε | α | "
        + " | ".join(f"β={b:g}" for b in config.betas)
        + " | m; median evaluations at the largest n it ran (÷ ZTC's there) |",
        "|---|---|---|---|---|" + "---|" * len(config.betas) + "---|",
    ]
    th = thresholds(rows, config)
    for o in config.objectives:
        for cell in config.cells(o):
            for m in config.methods:
                meds = []
                for b in config.betas:
                    vals = [
                        t.n_beta
                        for t in th
                        if (t.objective, t.method, t.d, t.epsilon, t.alpha, t.beta)
                        == (o, m, *cell, b)
                    ]
                    med = statistics.median(vals) if vals else math.inf
                    meds.append("—" if not math.isfinite(med) else f"{med:,.0f}")
                lines.append(
                    f"| {o} | {m} | {cell[0]} | {cell[1]:g} | {cell[2]:g} | "
                    + " | ".join(meds)
                    + f" | {evaluation_cost(rows, o, cell, m)} |"
                )
    lines += [
        "",
        "Equal evaluations: at every n KLT single-pass ZO gets the largest m with its evaluations ≤ ZTC's "
        "(ZTC and its naive oracle: 2d per example; KLT: 2m per anchor example, 4m per increment example). "
        "What still differs: the schedules (T, D, Σ, η of each theorem), KLT's per-example clipping (safe "
        "mode), its independent directions at z_t and z_{t−1} (ZTC's DIFF shares them), and KLT's output over "
        "T/M blocks without resets. KLT first-order counts gradients; multi-pass reads every example at each of "
        "its T steps.",
        "",
        "## Certificate tightness (held-out, at the drawn output)\n",
        "| true ‖∂F‖_2α | runs | median certificate − truth (uniform + rim) | uniform only | "
        "population bound − truth | population bound < truth |",
        "|---|---|---|---|---|---|",
    ]
    for low, high, label in (
        (0, 0.05, "< 0.05 (near stationarity)"),
        (0.05, 0.5, "0.05 – 0.5"),
        (0.5, 2, "≥ 0.5 (far)"),
    ):
        band = [r for r in rows if low <= r.output_norm < high]
        if not band:
            continue
        med = {
            k: statistics.median([getattr(r, k) - r.output_norm for r in band])
            for k in ("certified", "certified_uniform", "population_bound")
        }
        lines.append(
            f"| {label} | {len(band)} | {med['certified']:+.4f} | {med['certified_uniform']:+.4f} | "
            f"{med['population_bound']:+.4f} | {sum(r.population_bound < r.output_norm for r in band)} |"
        )
    total = sum(r.seconds for r in rows)
    lines += [
        "",
        f"Run time inside the algorithms: {total / 60:.1f} min over {len(rows)} runs.",
        "",
        "Figure: `fig_sample_complexity.png`; every run: `rows.csv`; every n(β): `thresholds.csv`.",
    ]
    return "\n".join(lines)


def evaluation_cost(rows: Sequence[RateRow], objective: str, cell: tuple, method: str) -> str:
    """The m and median evaluations of ``method`` at the largest n it ran in the cell, and their
    ratio to ZTC's at that n when ZTC ran it."""
    mine = [r for r in rows if (r.objective, r.d, r.epsilon, r.alpha) == (objective, *cell)]
    ns = [r.n for r in mine if r.method == method]
    if not ns:
        return "—"
    largest = max(ns)

    def median_evaluations(m):
        values = [r.evaluations for r in mine if r.method == m and r.n == largest]
        return statistics.median(values) if values else None

    ms = sorted({r.m for r in mine if r.method == method and r.n == largest})
    ours, ztc = median_evaluations(method), median_evaluations("zo-o2nc")
    ratio = f" ({ours / ztc:.2f})" if ztc and method != "zo-o2nc" else ""
    return f"m = {'/'.join(map(str, ms))}; n = {largest}: {ours:,.0f}{ratio}"


def target_region(config: RatesConfig) -> str:
    """How far from x* the instance's ‖∂F‖_2α ≤ β (main β, base d, radial, closed form) for each α:
    the region the runs must reach grows with α, part of why n(β) falls faster with α than the
    theorems' 1/α."""
    d, beta, R = config.base_d, config.main_beta, config.start_distance
    law_ = law(config, "radial", d, 0, 1, 0)
    e = torch.zeros(d, dtype=torch.float64)
    e[0] = 1.0
    parts = []
    for alpha in sorted(config.alphas):

        def gap(rho, alpha=alpha):
            return float(law_.goldstein_norm(law_.center + rho * e, 2 * alpha)) - beta

        if gap(R) <= 0 or 2 * alpha >= R:
            parts.append(f"α = {alpha:g}: already at x₀")
            continue
        rho = brentq(gap, 2 * alpha, R)
        parts.append(
            f"α = {alpha:g}: up to ‖x − x*‖ = {rho:.3f} (distance to travel {R - rho:.3f})"
        )
    return (
        f"The instance's target region: the population ‖∂F(x)‖_2α ≤ β = {beta:g} (radial, d = {d}) for "
        + "; ".join(parts)
        + ". A larger α makes the target larger as well as the theorems' smoothing easier, so "
        "n(β) can fall faster with α than their 1/α."
    )


def _verdict(e: Exponent) -> str:
    if e.variable in CONFOUNDED:
        return f"not testable by slope here (rule alone: {_rule_word(e.rule)})"
    if e.status:
        return f"{e.status} (ends: {_rule_word(e.at_ends[0])}, {_rule_word(e.at_ends[1])})"
    return "no signal" if e.verdict is None else "holds" if e.verdict else "**fails**"


def plot(result: Result, path: Path) -> Path:
    """n(main β) against d, ε and α: median over seeds and the theorem's bound scaled to meet it at
    the base."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = result.config
    th = [
        t
        for t in thresholds(result.rows, cfg)
        if t.beta == cfg.main_beta and t.objective == "radial"
    ]
    base = (cfg.base_d, cfg.base_epsilon, cfg.base_alpha)
    swept = [
        v
        for v, values in (("d", cfg.dims), ("epsilon", cfg.epsilons), ("alpha", cfg.alphas))
        if len(values) > 1
    ]
    swept = swept or ["d"]
    fig, axes = plt.subplots(1, len(swept), figsize=(4.5 * len(swept) + 2.5, 4.2), squeeze=False)
    axes = axes[0]
    for ax, variable in zip(axes, swept):
        i = VARIABLES.index(variable)
        for method, color in zip(cfg.methods, ("C0", "C3", "C1", "C2", "C4")):
            cells = sorted(
                {
                    (t.d, t.epsilon, t.alpha)
                    for t in th
                    if t.method == method
                    and all((t.d, t.epsilon, t.alpha)[j] == base[j] for j in range(3) if j != i)
                },
                key=lambda c: c[i],
            )
            xs, meds = [], []
            for c in cells:
                vals = [
                    t.n_beta for t in th if t.method == method and (t.d, t.epsilon, t.alpha) == c
                ]
                med = statistics.median(vals)
                if math.isfinite(med):
                    xs.append(c[i])
                    meds.append(med)
            if xs:
                ax.plot(xs, meds, "o-", color=color, label=f"{method} (median n(β))")
                bound = [
                    theory_n(
                        method, d=c[0], epsilon=c[1], alpha=c[2], beta=cfg.main_beta, config=cfg
                    )
                    for c in cells
                    if c[i] in xs
                ]
                ax.plot(
                    xs,
                    [b * meds[0] / bound[0] for b in bound],
                    "--",
                    color=color,
                    alpha=0.5,
                    label=f"{method} theorem (scaled)",
                )
        ax.set(
            xscale="log", yscale="log", xlabel=SYMBOL[variable], ylabel=f"n(β = {cfg.main_beta:g})"
        )
        ax.grid(alpha=0.3)
    axes[-1].legend(
        fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0)
    )  # beside the panels, not on the data
    fig.suptitle(
        f"radial objective, L = 1: samples to reach E‖∂F‖_2α ≤ {cfg.main_beta:g}\n"
        f"({cfg.seeds} seeds; dashed: theorem's bound through the first point)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
