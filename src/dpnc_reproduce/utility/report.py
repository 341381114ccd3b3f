"""Claims, tables and the figure of :mod:`dpnc_reproduce.utility`, computed from its rows alone.

Each paper method is judged on its own against yardsticks declared before the run (:mod:`.claims`):
a progress margin first (:data:`PROGRESS`), then paired geometric ratios against the hand-set,
privately tuned and compute-matched baselines, and for the O2NC methods the Goldstein certificate; a
claim holds when every (problem, ε) cell holds. See docs/practical.md."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path

from dpnc_reproduce.claims import Interval, all_hold, below, geometric_ratio_interval, mean_interval
from dpnc_reproduce.utility.methods import compute, methods, targets_goldstein

RATIO = 1.5  # "within 1.5× of the baseline" (geometric mean of the paired ratio)
PROGRESS = 0.5  # the progress margin: at least half of the start's gap closed in a cell
LOSS_SCALE = {"relu-cancer"}  # no exact minimiser: ratios of training losses, not of excess risks
MATCHED = "matched:"
# a Goldstein certificate below this (L0 = 1 here) is read as this: stationary to the QP's resolution
CERT_FLOOR = 1e-6
YARDSTICKS = {
    "hand-set": ("the hand-set baselines (DP-GD T = gd_steps, DP-SGD B = √n)", ("dp-gd", "dp-sgd")),
    "tuned": (
        "the privately tuned baselines (DP-GD, DP-SGD, step size by random stopping)",
        ("dp-gd-tuned", "dp-sgd-tuned"),
    ),
    "matched": (
        "its compute-matched DP-SGD (same gradient evaluations, 1 gradient = 2 function evaluations)",
        (),
    ),
}
PRIVACY = "every private run's accountant spends at most the target ε (tightest of RDP, PLD, zCDP)"


def _ok(rows: Sequence) -> list:
    return [
        r
        for r in rows
        if r.status == "ok" and r.family != "reference" and math.isfinite(r.excess_risk)
    ]


def outcome(row) -> float:
    """The outcome a ratio is taken of: the excess risk, or the training loss on :data:`LOSS_SCALE`
    problems."""
    return row.train_loss if row.problem in LOSS_SCALE else row.excess_risk


def by_seed(
    rows: Sequence, problem: str, epsilon: float, n: int, field=outcome
) -> dict[str, dict[int, float]]:
    """method → {seed: ``field(row)``} over the runs that ran (status ok) at (problem, ε, n)."""
    out: dict[str, dict[int, float]] = {}
    for r in _ok(rows):
        if (r.problem, r.epsilon, r.n) == (problem, epsilon, n):
            out.setdefault(r.method, {})[r.seed] = field(r)
    return out


def remaining(row) -> float:
    """The fraction of the start's gap F(x0) − F(x̂) still open at the output (≤ 0: at or below the
    reference)."""
    return row.excess_risk / row.start_gap if row.start_gap > 0 else math.nan


def ratio(a: dict[int, float], b: dict[int, float]) -> Interval:
    """Geometric mean of a_s / b_s over the seeds both ran, and its 95 % interval (paired t on the
    logs)."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return Interval(math.nan, -math.inf, math.inf, 0, "no seed in common")
    return geometric_ratio_interval([a[s] for s in seeds], [b[s] for s in seeds])


def progress(fractions: dict[int, float]) -> tuple[Interval, bool | None]:
    """The mean remaining fraction over seeds (t interval, k − 1 df) and whether it is below 1 −
    PROGRESS."""
    values = list(fractions.values())
    iv = mean_interval(values)
    return iv, (
        below(iv, 1 - PROGRESS) if math.isfinite(iv.low) or math.isfinite(iv.high) else None
    )


def gate(margin: bool | None, within: bool | None) -> bool | None:
    """A cell's verdict: a failing ratio fails; a holding ratio holds only where the progress margin
    holds."""
    return False if within is False else True if (within is True and margin is True) else None


def _fmt(iv: Interval, digits: str = ".3g") -> str:
    if not math.isfinite(iv.estimate):
        return "—"
    if not (math.isfinite(iv.low) and math.isfinite(iv.high)):
        return f"{iv.estimate:{digits}} [{iv.low:{digits}}, {iv.high:{digits}}]" + (
            f" ({iv.note})" if iv.note else ""
        )
    return f"{iv.estimate:{digits}} [{iv.low:{digits}}, {iv.high:{digits}}]"


def paper_methods(config) -> list[str]:
    registry = methods(config)
    return [m for m in config.methods if registry[m].family == "dpnc"]


def cells(rows: Sequence, config, method: str, yardstick: str) -> list[dict]:
    """Per (problem, ε) at the problem's largest n where ``method`` ran: its progress, its ratio to
    each baseline of ``yardstick`` and the gated cell verdict."""
    out = []
    for problem in config.problems:
        n = config.sizes(problem)[-1]
        for epsilon in config.epsilons:
            values = by_seed(rows, problem, epsilon, n)
            if method not in values:
                continue
            fractions = by_seed(rows, problem, epsilon, n, remaining)[method]
            prog, margin = progress(fractions)
            names = (MATCHED + method,) if yardstick == "matched" else YARDSTICKS[yardstick][1]
            ratios = {b: ratio(values[method], values[b]) for b in names if b in values}
            if not ratios:
                continue
            within = all_hold([below(iv, RATIO) for iv in ratios.values()])
            out.append(
                {
                    "problem": problem,
                    "epsilon": epsilon,
                    "n": n,
                    "progress": prog,
                    "margin": margin,
                    "ratios": ratios,
                    "within": within,
                    "verdict": gate(margin, within),
                }
            )
    return out


def certificate_cells(rows: Sequence, config, method: str) -> list[dict]:
    """Per nonsmooth (problem, ε) at its largest n where ``method`` was certified: certificate /
    start certificate (the margin) and certificate / its compute-matched baseline's (the ratio)."""
    out = []
    for problem in config.problems:
        n = config.sizes(problem)[-1]
        for epsilon in config.epsilons:
            cert = by_seed(
                rows,
                problem,
                epsilon,
                n,
                lambda r: (
                    max(r.certificate, CERT_FLOOR)
                    if math.isfinite(r.certificate)
                    else r.certificate
                ),
            )
            start = by_seed(
                rows, problem, epsilon, n, lambda r: max(r.start_certificate, CERT_FLOOR)
            )
            ours, theirs = cert.get(method, {}), cert.get(MATCHED + method, {})
            ours = {s: v for s, v in ours.items() if not math.isnan(v)}
            if not ours or not theirs:
                continue
            prog = ratio(ours, start[method])
            margin = below(prog, 1 - PROGRESS) if math.isfinite(prog.estimate) else None
            iv = ratio(ours, theirs)
            within = below(iv, RATIO) if math.isfinite(iv.estimate) else None
            out.append(
                {
                    "problem": problem,
                    "epsilon": epsilon,
                    "n": n,
                    "progress": prog,
                    "margin": margin,
                    "ratio": iv,
                    "within": within,
                    "verdict": gate(margin, within),
                    "ours": statistics.geometric_mean(
                        [v for v in ours.values() if v > 0] or [math.nan]
                    ),
                    "theirs": statistics.geometric_mean(
                        [v for v in theirs.values() if v > 0] or [math.nan]
                    ),
                }
            )
    return out


def _where(c: dict) -> str:
    return f"{c['problem']} ε = {c['epsilon']:g}"


def _certified(config, method: str) -> bool:
    nonsmooth = ("relu-cancer", "l1-regression", "max-affine")
    return targets_goldstein(method) and any(p in nonsmooth for p in config.problems)


def describe(config) -> str:
    return (
        f"Problems: {', '.join(config.problems)} (public constants: least squares d = {config.ls_dim} on the "
        "unit sphere, |b| ≤ 1.2, region radius 2, μ = ⌊n/d⌋/n; see `dpnc.problems.logistic`, "
        f"`TwoLayerReLU` with R = {config.relu_radius:g}, ℓ1 regression d = {config.l1_dim}, max of "
        f"{config.maxaff_pieces} affine pieces d = {config.maxaff_dim}, L0 = 1, Φ = 2); (ε, δ) with "
        f"δ = {config.dp_delta:g}; {config.seeds} seeds (data and noise vary; every method of a cell runs on the "
        "same data per seed). Excess risk = F_train(x) − F_train(x̂), x̂ the non-private optimum of the same "
        f"training set (the network's: the best of {config.reference_steps} non-private Adam steps, so its excess "
        "may be < 0; its ratios are of training losses). Hand-set baselines: DP-GD "
        f"T = {config.gd_steps}, DP-SGD {config.sgd_epochs:g} epochs at B = √n. `*-tuned`: the baseline's step "
        "size tuned privately over η × {1/4, 1, 4} by random stopping (geometric K, E[K] = 4), inside the same ε. "
        "`matched:<method>`: DP-SGD (Poisson, C = L0, σ by the accountant) whose expected gradient evaluations "
        "equal the method's compute, counted as gradients + function evaluations / 2 (one gradient ≈ a forward "
        "and a backward pass ≈ the two forward passes of a two-point difference); B = √n, raised up to n so that "
        f"T ≤ {config.matched_max_steps} where the compute allows. DPZero: T from its Theorem 3 with r = d "
        "(n(d + 2)ε / (4√(d log(e + ε/δ)))), η, C, λ its practical rule at that T. The other papers' methods: "
        "their families' `practical(...)` settings (ZTC and KLT zeroth order and KLT multi-pass with "
        f"m = min(d, {config.zo_directions}) directions, KLT multi-pass T = {config.klt_mp_steps}); Menart et "
        "al.'s with F0 = Φ. The papers' methods are not tuned. Goldstein certificates (nonsmooth problems, O2NC "
        "methods and their matched baselines): `dpnc.certify.goldstein_certificate` on the held-out set at radius "
        f"2δ (twice the method's smoothing), {config.certificate_samples} uniform ball points and {config.rim} rim "
        f"pairs; a certificate below {CERT_FLOOR:g} is read as {CERT_FLOOR:g} (stationary to the QP's resolution; "
        "L0 = 1 on these problems). Claims: each paper method on its own (declared before the run; no "
        f"best-of-several), geometric means of paired ratios with 95 % t intervals, within {RATIO:g}× only after "
        f"closing {PROGRESS:.0%} of the start's gap."
    )


def _geo(values: list[float]) -> str:
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return "—"
    if min(values) <= 0:
        return "≤ 0 in some seed"
    return f"{statistics.geometric_mean(values):.3g}"


def _stat(values: list[float], scale: float = 1.0, digits: str = ".3g") -> str:
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return "—"
    return f"{scale * statistics.median(values):{digits}}"


def ratio_table(rows: Sequence, config) -> list[str]:
    """Per problem, ε (largest n) and paper method: remaining gap fraction and the geometric-mean
    ratio to every baseline with its 95 % interval."""
    baselines = [
        b for b in ("dp-gd", "dp-sgd", "dp-gd-tuned", "dp-sgd-tuned") if b in config.methods
    ]
    lines = [
        "| problem | ε | n | method | remaining gap fraction | "
        + " | ".join(f"÷ {b}" for b in baselines)
        + (" | ÷ matched | matched's B, T |" if config.matched else " |"),
        "|" + "---|" * (5 + len(baselines) + (2 if config.matched else 0)),
    ]
    for problem in config.problems:
        n = config.sizes(problem)[-1]
        for epsilon in config.epsilons:
            values = by_seed(rows, problem, epsilon, n)
            fractions = by_seed(rows, problem, epsilon, n, remaining)
            for method in paper_methods(config):
                if method not in values:
                    continue
                cells_ = [
                    _fmt(ratio(values[method], values[b])) if b in values else "—"
                    for b in baselines
                ]
                if config.matched:
                    m = MATCHED + method
                    cells_.append(_fmt(ratio(values[method], values[m])) if m in values else "—")
                    notes = sorted(
                        {
                            r.note
                            for r in _ok(rows)
                            if (r.problem, r.epsilon, r.n, r.method) == (problem, epsilon, n, m)
                        }
                    )
                    cells_.append(
                        notes[0].split(" for ")[0] if len(notes) == 1 else f"{len(notes)} settings"
                    )
                lines.append(
                    f"| {problem} | {epsilon:g} | {n} | {method} | {_fmt(progress(fractions[method])[0])} | "
                    + " | ".join(cells_)
                    + " |"
                )
    return lines


def certificate_table(rows: Sequence, config) -> list[str]:
    lines = [
        "| problem | ε | n | method | certificate (geo. mean) | matched's | certificate ÷ start's | "
        "÷ matched's |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for method in paper_methods(config):
        for c in certificate_cells(rows, config, method):
            lines.append(
                f"| {c['problem']} | {c['epsilon']:g} | {c['n']} | {method} | {c['ours']:.3g} | "
                f"{c['theirs']:.3g} | {_fmt(c['progress'])} | {_fmt(c['ratio'])} |"
            )
    return lines if len(lines) > 2 else []


def render(rows: Sequence, config, registry: dict) -> str:
    lines = [
        "## Each paper method against each baseline (geometric mean of the paired ratio, 95 % interval)\n",
        f"At each problem's largest n. Ratios < 1: the paper method is better. The remaining gap fraction is "
        f"(F(x) − F(x̂)) / (F(x0) − F(x̂)) (mean [95 % t interval]); a within-{RATIO:g}× cell counts only where "
        f"it is below {1 - PROGRESS:g}. Ratios on relu-cancer are of training losses.\n",
        *ratio_table(rows, config),
        "",
    ]
    cert = certificate_table(rows, config)
    if cert:
        lines += [
            "## Goldstein certificates (nonsmooth problems, held-out set, radius 2δ of each O2NC method)\n",
            *cert,
            "",
        ]
    names = ("non-private", *config.methods)
    lines += [
        "## Every run: median over seeds\n",
        "| problem | ε | n | method | excess risk (median) | excess (geo. mean) | test accuracy % | seconds | "
        "evaluations | gradients | compute (gradients) | max ε spent | runs |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for problem in config.problems:
        for epsilon in config.epsilons:
            for n in config.sizes(problem):
                present = {
                    r.method for r in rows if (r.problem, r.epsilon, r.n) == (problem, epsilon, n)
                }
                order = [m for m in names if m in present]
                order += [m for m in sorted(present) if m not in order]
                for method in order:
                    mine = [
                        r
                        for r in rows
                        if (r.problem, r.epsilon, r.n, r.method) == (problem, epsilon, n, method)
                    ]
                    ok = [r for r in mine if r.status == "ok"]
                    if not ok:
                        continue
                    spent = max(r.epsilon_spent for r in ok)
                    secs = [r.seconds for r in ok if math.isfinite(r.seconds)]
                    lines.append(
                        f"| {problem} | {epsilon:g} | {n} | {method} | "
                        f"{_stat([r.excess_risk for r in ok])} | {_geo([r.excess_risk for r in ok])} | "
                        f"{_stat([r.test_accuracy for r in ok], 100, '.1f')} | "
                        f"{statistics.fmean(secs) if secs else math.nan:.2f} | "
                        f"{statistics.fmean(r.evaluations for r in ok):.3g} | "
                        f"{statistics.fmean(r.gradients for r in ok):.3g} | "
                        f"{statistics.fmean(compute(r.evaluations, r.gradients) for r in ok):.3g} | "
                        f"{'∞' if math.isinf(spent) else f'{spent:.3g}'} | {len(ok)}/{len(mine)} |"
                    )
    skipped = {}
    for r in rows:
        if r.status != "ok":
            skipped.setdefault((r.problem, r.method), r.status)
    if skipped:
        lines += [
            "",
            "## Runs that did not run\n",
            "| problem | method | why (first case) |",
            "|---|---|---|",
        ]
        lines += [f"| {p} | {m} | {why} |" for (p, m), why in sorted(skipped.items())]
    lines += ["", "## Methods\n", "| name | family | what |", "|---|---|---|"]
    lines += [f"| {m} | {registry[m].family} | {registry[m].label} |" for m in config.methods]
    if config.matched:
        lines.append(
            "| matched:<method> | matched | DP-SGD with the paper method's compute (see above) |"
        )
    lines += ["", "Figure: `fig_excess_vs_n.png`; every run: `rows.csv`."]
    return "\n".join(lines)


def plot(rows: Sequence, config, out: Path) -> list[Path]:
    """Mean excess risk against n, one panel per (ε, problem), one line per method (log-log; ≤ 0 at
    the floor)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    floor = 1e-5
    eps, problems = config.epsilons, config.problems
    fig, axes = plt.subplots(
        len(eps), len(problems), figsize=(4.2 * len(problems), 3.4 * len(eps)), squeeze=False
    )
    for i, epsilon in enumerate(eps):
        for j, problem in enumerate(problems):
            ax = axes[i][j]
            for k, method in enumerate(config.methods):
                points = []
                for n in config.sizes(problem):
                    values = by_seed(rows, problem, epsilon, n, lambda r: r.excess_risk).get(method)
                    if values:
                        points.append((n, max(statistics.median(values.values()), floor)))
                if points:
                    xs, ys = zip(*points)
                    ax.plot(
                        xs,
                        ys,
                        marker="o",
                        color=f"C{k % 10}",
                        linestyle="-" if k < 10 else "--",
                        label=method,
                    )
            ax.set(
                xscale="log",
                yscale="log",
                xlabel="n",
                ylabel="excess risk",
                title=f"{problem}, ε = {epsilon:g}",
            )
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Median excess empirical risk over {config.seeds} seeds (floor {floor:g})")
    fig.tight_layout()
    path = out / "fig_excess_vs_n.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
