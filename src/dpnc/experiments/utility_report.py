"""Claims, tables and the figure of :mod:`dpnc.experiments.utility`, computed from its rows alone.

Every claim is judged on a 95 % interval over seeds (:func:`dpnc.experiments.claims.verdict`): the methods of one
(problem, ε, n) run on the same data for each seed, so differences are **paired by seed**
(:func:`~dpnc.experiments.claims.paired_interval`: Student's t over the per-seed differences). A claim whose
interval straddles its threshold says "no signal".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path

from dpnc.experiments.claims import Interval, mean_interval, paired_interval, verdict
from dpnc.experiments.protocol import Claim

RATIO = 1.5   # "the best dpnc method is within 1.5× of the best baseline's excess risk"


def _ok(rows: Sequence) -> list:
    return [r for r in rows if r.status == "ok" and r.family != "reference" and math.isfinite(r.excess_risk)]


def by_seed(rows: Sequence, problem: str, epsilon: float, n: int) -> dict[str, dict[int, float]]:
    """method → {seed: excess risk} over the runs that ran (status ok) at (problem, ε, n)."""
    out: dict[str, dict[int, float]] = {}
    for r in _ok(rows):
        if (r.problem, r.epsilon, r.n) == (problem, epsilon, n):
            out.setdefault(r.method, {})[r.seed] = r.excess_risk
    return out


def _paired(a: dict[int, float], b: dict[int, float], weight: float = 1.0) -> Interval:
    """weight·b_s − a_s over the seeds both ran, its mean and 95 % t interval (none for one seed or none shared)."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return Interval(math.nan, -math.inf, math.inf, 0, "no seed in common")
    return paired_interval([weight * b[s] for s in seeds], [a[s] for s in seeds])


def _half(interval: Interval, scale: float = 1.0) -> str:
    """The interval's half-width (× ``scale``) for a table, ∞ when it has none."""
    width = interval.high - interval.low
    return f"{scale * width / 2:.2g}" if math.isfinite(width) else "∞"


def _fmt(values: dict[int, float]) -> str:
    return _stat(list(values.values()))


def winner_claim(values: dict[str, dict[int, float]], where: str) -> Claim | None:
    """The method with the lowest mean excess risk, and whether it beats the runner-up beyond the interval."""
    if len(values) < 2:
        return None
    order = sorted(values, key=lambda m: statistics.fmean(values[m].values()))
    best, second = order[0], order[1]
    diff = _paired(values[best], values[second])
    mb, ms = statistics.fmean(values[best].values()), statistics.fmean(values[second].values())
    ratio = f"{ms / mb:.2f}×" if mb > 0 else "n/a (best ≤ 0)"
    return Claim(f"{where}: {best} has the lowest excess risk, below the runner-up {second}",
                 verdict(diff.low, diff.high, 0.0),
                 f"{best} {_fmt(values[best])} vs {second} {_fmt(values[second])} (ratio {ratio}); paired difference "
                 f"{diff.estimate:.3g} ± {_half(diff)} over {diff.seeds} seeds")


def tuned_baselines(families: dict[str, str]) -> set[str]:
    """The privately tuned baselines (``*-tuned``): the issue's yardstick."""
    return {m for m, f in families.items() if f == "baseline" and m.endswith("-tuned")}


def _best(values: dict[str, dict[int, float]], names) -> str | None:
    names = [m for m in values if m in names]
    return min(names, key=lambda m: statistics.fmean(values[m].values())) if names else None


def baseline_claim(values: dict[str, dict[int, float]], families: dict[str, str], where: str,
                   against: set[str] | None = None, what: str = "the best baseline") -> Claim | None:
    """"The best dpnc method's excess risk is within 1.5× of the best baseline's" (of the baselines ``against``;
    default every baseline): judged on the paired per-seed 1.5·baseline − dpnc (holds if its interval lies above
    0, fails if at or below 0, no signal otherwise)."""
    ours = _best(values, {m for m, f in families.items() if f == "dpnc"})
    theirs = _best(values, against if against is not None else {m for m, f in families.items() if f == "baseline"})
    if ours is None or theirs is None:
        return None
    margin = _paired(values[ours], values[theirs], weight=RATIO)
    mo, mt = statistics.fmean(values[ours].values()), statistics.fmean(values[theirs].values())
    ratio = f"{mo / mt:.2f}×" if mt > 0 else "n/a (baseline ≤ 0)"
    return Claim(f"{where}: the best dpnc method ({ours}) is within {RATIO:g}× of {what} ({theirs})",
                 verdict(margin.low, margin.high, 0.0),
                 f"{ours} {_fmt(values[ours])} vs {theirs} {_fmt(values[theirs])} = {ratio}; {RATIO:g}·baseline − dpnc "
                 f"= {margin.estimate:.3g} ± {_half(margin)} over {margin.seeds} paired seeds")


def privacy_claim(rows: Sequence) -> Claim:
    """Every private run's accountant spent at most its target ε (the reference and seeded runs excluded)."""
    runs = [r for r in _ok(rows) if r.private]
    over = [r for r in runs if not r.epsilon_spent <= r.epsilon * (1 + 1e-6)]
    worst = max((r.epsilon_spent / r.epsilon for r in runs), default=math.nan)
    others = sorted({r.method for r in _ok(rows) if not r.private})
    note = f"; not counted (not private by their own report): {', '.join(others)}" if others else ""
    return Claim("every private run's accountant spends at most the target ε (tightest of RDP, PLD, zCDP)",
                 not over if runs else None, f"{len(runs)} runs, max ε spent / target {worst:.4f}, "
                 f"{len(over)} over{note}")


def claims(rows: Sequence, config) -> list[Claim]:
    """Per problem and ε at the problem's largest n: the winner, and the 1.5× claim against the best privately tuned
    baseline (the issue's yardstick); then privacy."""
    from dpnc.experiments.utility import methods

    families = {name: m.family for name, m in methods(config).items()}
    out = []
    for problem in config.problems:
        n = config.sizes(problem)[-1]
        for epsilon in config.epsilons:
            values = by_seed(rows, problem, epsilon, n)
            where = f"{problem}, ε = {epsilon:g}, n = {n}"
            tuned = baseline_claim(values, families, where, tuned_baselines(families),
                                   "the best privately tuned baseline")
            out += [c for c in (winner_claim(values, where), tuned) if c]
    out.append(privacy_claim(rows))
    return out


# --- why the papers' methods lose, from the rows -------------------------------------------------------------

ZEROTH_ORDER = ("dpzero", "ztc", "klt-zo", "ztc-theory", "klt-zo-theory")   # forward passes only
HAND_SET = {"dp-gd-tuned": "dp-gd", "dp-sgd-tuned": "dp-sgd"}              # the tuned baseline's untuned self


def _mean(values: dict[int, float] | None) -> float:
    return statistics.fmean(values.values()) if values else math.nan


def _scale(config, problem: str, n: int) -> tuple[int, float, float, float]:
    """d, the declared L0, the median per-example gradient norm at the public start x0, and the start's excess
    F(x0) − F(x̂), on data seed 0: how far the worst-case constant that sets clip radii and noise is from the data's
    gradients, and how much of the initial gap a method closed."""
    import torch

    from dpnc.experiments.utility import instance

    inst = instance(config, problem, n, 0)
    train = inst.train
    g = train.gradients(inst.x0.expand(train.n, 1, train.dim), torch.arange(train.n))[:, 0]
    gap = float(train.value(inst.x0) - train.value(inst.reference))
    return train.dim, float(train.constants.L0), float(torch.linalg.vector_norm(g, dim=-1).median()), gap


def explain(rows: Sequence, config, families: dict[str, str]) -> list[str]:
    """Per problem, at its largest n: where the best paper method is not within 1.5× of the best privately tuned
    baseline, the reasons, each a number measured in these rows (or read off the public instance)."""
    tuned, ours = tuned_baselines(families), {m for m, f in families.items() if f == "dpnc"}
    lines = []
    for problem in config.problems:
        sizes = config.sizes(problem)
        n = sizes[-1]
        losses, wins = [], []
        for epsilon in config.epsilons:
            values = by_seed(rows, problem, epsilon, n)
            p, b = _best(values, ours), _best(values, tuned)
            if p is None or b is None:
                continue
            claim = baseline_claim(values, families, "", tuned, "")
            ratio = _mean(values[p]) / _mean(values[b]) if _mean(values[b]) > 0 else math.inf
            entry = (epsilon, p, b, ratio, claim.holds, values)
            (wins if claim.holds is True or ratio <= RATIO else losses).append(entry)
        if not losses and not wins:
            continue
        head = f"- **{problem}** (n = {n}): "
        if wins:
            head += "within 1.5× at " + ", ".join(f"ε = {e:g} ({p} {r:.2f}× {b})" for e, p, b, r, _, _ in wins)
            head += "; " if losses else "."
        if not losses:
            lines.append(head)
            continue
        head += "**not** within 1.5× at " + ", ".join(
            f"ε = {e:g} ({p} {r:.2f}× {b}{'' if h is False else ', no signal'})" for e, p, b, r, h, _ in losses) + "."
        why = []
        # 1. which of the papers' methods could not run here, and why
        skipped = {}
        for r in rows:
            if r.problem == problem and r.n == n and r.family == "dpnc" and r.status != "ok" and r.method in ours:
                skipped.setdefault(r.method, r.status.removeprefix("n/a: ").split(" (")[0][:90])
        if skipped:
            why.append("did not run: " + "; ".join(f"{m} ({w})" for m, w in sorted(skipped.items())))
        # 2. the tuned baselines' advantage: a step size picked privately, against their hand-set selves (at the
        # ε where the paper methods lose most)
        e, p, b, _, _, values = max(losses, key=lambda entry: entry[3])
        picks: dict[str, int] = {}
        for row in rows:
            if (row.problem, row.n, row.epsilon, row.method, row.status) == (problem, n, e, b, "ok"):
                pick = row.note.removeprefix("tuned: ")
                picks[pick] = picks.get(pick, 0) + 1
        hand = HAND_SET.get(b)
        if hand in values:
            mp, mb, mh = _mean(values[p]), _mean(values[b]), _mean(values[hand])
            why.append(f"ε = {e:g}: {b} picked {', '.join(f'{k} ({v}×)' for k, v in sorted(picks.items()))} over "
                       f"the seeds and reached {mb:.3g} (the tuning is paid from the same ε); the hand-set {hand} "
                       f"reached {mh:.3g} = {mh / mp:.2g}× {p}'s {mp:.3g}; the papers' methods set their steps "
                       "from the declared constants, untuned")
        # 3. zeroth order against first order
        zo = _best(values, {m for m in ZEROTH_ORDER if m in ours})
        fo = _best(values, ours - set(ZEROTH_ORDER))
        d, L0, median, gap = _scale(config, problem, n)
        if gap > 0:
            closed_p, closed_b = 100 * (1 - _mean(values[p]) / gap), 100 * (1 - _mean(values[b]) / gap)
            why.append(f"ε = {e:g}: the start x0 has excess {gap:.3g} (data seed 0); {p} closed {closed_p:.1f} % of "
                       f"that gap, {b} {closed_b:.1f} %")
        if zo is not None and fo is not None:
            why.append(f"ε = {e:g}: zeroth order (variance ∝ d = {d}): the best, {zo}, {_mean(values[zo]):.3g} = "
                       f"{_mean(values[zo]) / _mean(values[fo]):.2f}× the best first-order paper method {fo}")
        # 4. the worst-case constant against the data's gradients
        if median > 0:
            tight = ("clip radii and noise are set for a worst case the data do not reach" if L0 / median >= 2 else
                     "L0 is nearly tight here, so the worst-case constant is not what separates the methods")
            why.append(f"the declared L0 = {L0:.3g} is {L0 / median:.2g}× the median per-example gradient norm at x0 "
                       f"({median:.3g}; data seed 0): {tight}")
        # 5. the rate in n
        if len(sizes) > 1:
            small = by_seed(rows, problem, e, sizes[0])
            if p in small and b in small and _mean(values[p]) > 0 and _mean(values[b]) > 0:
                fall_p, fall_b = _mean(small[p]) / _mean(values[p]), _mean(small[b]) / _mean(values[b])
                why.append(f"ε = {e:g}, n {sizes[0]} → {n}: {p}'s excess falls {fall_p:.3g}×, {b}'s {fall_b:.3g}×")
        lines.append(head + "".join(f"\n  - {w}" for w in why))
    return lines


# --- tables and figure ---------------------------------------------------------------------------------------


def describe(config) -> str:
    return (f"Problems: {', '.join(config.problems)} (public constants: least squares d = {config.ls_dim} on the "
            "unit sphere, |b| ≤ 1.2, region radius 2, μ = ⌊n/d⌋/n; see `dpnc.problems.logistic`, "
            f"`TwoLayerReLU` with R = {config.relu_radius:g}, ℓ1 regression d = {config.l1_dim}, max of "
            f"{config.maxaff_pieces} affine pieces d = {config.maxaff_dim}, L0 = 1, Φ = 2); (ε, δ) with "
            f"δ = {config.dp_delta:g}; {config.seeds} seeds (data and noise vary). Excess risk = F_train(x) − "
            "F_train(x̂), x̂ the non-private optimum of the same training set (the network's: the best of "
            f"{config.reference_steps} non-private Adam steps, so its excess may be < 0). Hand-set parameters: DP-GD "
            f"T = {config.gd_steps}, DP-SGD {config.sgd_epochs:g} epochs at B = √n, DPZero T = {config.dpzero_steps}. "
            "The papers' methods: their families' `practical(...)` settings (the `-theory` variants: the theorems' "
            f"`from_theory`, O2NC with α = {config.alpha:g}, KLT m ≤ {config.max_directions}; the practical ZTC and "
            f"KLT zeroth order with m = min(d, {config.zo_directions}) directions); Menart et al.'s with "
            "F0 = Φ, the public bound on F(x0) − F*. "
            "`*-tuned`: the baseline's step size tuned privately over η × {1/4, 1, 4} by random stopping (geometric "
            "K, E[K] = 4), the tuning inside the same ε. The papers' methods are not tuned. Intervals: 95 %, paired by "
            "seed. The 'best dpnc method' is picked after the fact (a selection the interval does not cover).")


def _stat(values: list[float], scale: float = 1.0, digits: str = ".3g") -> str:
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return "—"
    interval = mean_interval(values)      # mean ± the 95 % t half-width over seeds
    return f"{scale * interval.estimate:{digits}}" + ("" if len(values) < 2 else f" ± {_half(interval, scale)}")


def render(rows: Sequence, config, registry: dict) -> str:
    families = {name: m.family for name, m in registry.items()}
    why = explain(rows, config, families)
    lines = (["## The papers' methods against the best privately tuned baseline, and why they lose where they do\n",
              "Generated from the rows at each problem's largest n (ratios of mean excess risk; the paired 95 % "
              "intervals are in the claims above).\n", *why, ""] if why else [])
    lines += ["## Mean ± 95 % half-width over seeds\n",
             "| problem | ε | n | method | excess risk | test accuracy % | seconds | evaluations | gradients | "
             "max ε spent | runs |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    names = ("non-private", *config.methods)
    for problem in config.problems:
        for epsilon in config.epsilons:
            for n in config.sizes(problem):
                for method in names:
                    mine = [r for r in rows if (r.problem, r.epsilon, r.n, r.method) == (problem, epsilon, n, method)]
                    ok = [r for r in mine if r.status == "ok"]
                    if not ok:
                        continue
                    spent = max(r.epsilon_spent for r in ok)
                    lines.append(f"| {problem} | {epsilon:g} | {n} | {method} | "
                                 f"{_stat([r.excess_risk for r in ok])} | "
                                 f"{_stat([r.test_accuracy for r in ok], 100, '.1f')} | "
                                 f"{statistics.fmean(r.seconds for r in ok):.2f} | "
                                 f"{statistics.fmean(r.evaluations for r in ok):.3g} | "
                                 f"{statistics.fmean(r.gradients for r in ok):.3g} | "
                                 f"{'∞' if math.isinf(spent) else f'{spent:.3g}'} | {len(ok)}/{len(mine)} |")
    skipped = {}
    for r in rows:
        if r.status != "ok":
            skipped.setdefault((r.problem, r.method), r.status)
    if skipped:
        lines += ["", "## Runs that did not run\n", "| problem | method | why (first case) |", "|---|---|---|"]
        lines += [f"| {p} | {m} | {why} |" for (p, m), why in sorted(skipped.items())]
    lines += ["", "## Methods\n", "| name | family | what |", "|---|---|---|"]
    lines += [f"| {m} | {registry[m].family} | {registry[m].label} |" for m in config.methods]
    lines += ["", "Figure: `fig_excess_vs_n.png`; every run: `rows.csv`."]
    return "\n".join(lines)


def plot(rows: Sequence, config, out: Path) -> list[Path]:
    """Mean excess risk against n, one panel per (ε, problem), one line per method (log-log; ≤ 0 at the floor)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    floor = 1e-5
    eps, problems = config.epsilons, config.problems
    fig, axes = plt.subplots(len(eps), len(problems), figsize=(4.2 * len(problems), 3.4 * len(eps)), squeeze=False)
    for i, epsilon in enumerate(eps):
        for j, problem in enumerate(problems):
            ax = axes[i][j]
            for k, method in enumerate(config.methods):
                points = []
                for n in config.sizes(problem):
                    values = by_seed(rows, problem, epsilon, n).get(method)
                    if values:
                        points.append((n, max(statistics.fmean(values.values()), floor)))
                if points:
                    xs, ys = zip(*points)
                    ax.plot(xs, ys, marker="o", color=f"C{k % 10}", linestyle="-" if k < 10 else "--", label=method)
            ax.set(xscale="log", yscale="log", xlabel="n", ylabel="excess risk", title=f"{problem}, ε = {epsilon:g}")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Mean excess empirical risk over {config.seeds} seeds (floor {floor:g})")
    fig.tight_layout()
    path = out / "fig_excess_vs_n.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
