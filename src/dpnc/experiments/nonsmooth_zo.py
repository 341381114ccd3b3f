"""Private zeroth-order nonsmooth nonconvex optimization: error against samples (Zhang–Tran–Cutkosky).

The paper has no experiments; this is the first. On ℓ1 regression (nonsmooth, 1-Lipschitz per
example) it runs O2NC with the private variance-reduced oracle (Algorithms 3–5, Theorem 4.9's
parameters) and with the naive oracle (Algorithm 6, App. E's parameters) for several sample sizes M,
dimensions d and privacy levels, several seeds each, and measures at the output w̄

* a certified upper bound on ‖∂F(w̄)‖_{2δ} (the guarantee's quantity): the min-norm convex combination
  of exact gradients of the test objective at the epoch's points (all within δ of w̄) and at points
  drawn uniformly from the 2δ-ball (:func:`dpnc.certify.goldstein_certificate`);
* the test loss F(w̄) − F(x*) on fresh data from the same law (single pass: the guarantee is about the
  population objective);
* the theory's bound at the same parameters (:func:`dpnc.algorithms.zo_o2nc.guarantee`).

Log-log slopes of the certified bound against M, fitted per seed, are printed with their 95 % interval over the
seeds beside the theory's exponents; every claim is judged on such intervals (:mod:`dpnc.experiments.claims`).
Run it with :func:`dpnc.experiments.protocol.run_experiment` (``EXPERIMENT``, a config) and write it with
:func:`dpnc.experiments.protocol.write`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dpnc.algorithms.zo_o2nc import ZhangTranCutkosky, guarantee, paper_rho
from dpnc.experiments import claims as stats
from dpnc.experiments.nonsmooth_report import (Measured, NonsmoothExperiment, NonsmoothGrid, Task, at,
                                               constants, figure, measure, medians)
from dpnc.experiments.protocol import Claim, Result
from dpnc.experiments.report import POSITIVE, by_seed, check_value, loglog_slope, privacy_claim

METHODS = ("variance-reduced", "naive")
LABEL = {"variance-reduced": "variance-reduced + tree (Alg. 4–5)", "naive": "naive (Alg. 6)"}


@dataclass(frozen=True)
class NonsmoothConfig(NonsmoothGrid):
    """The grid; defaults are ``--full`` (:data:`FULL`), :data:`QUICK` the CI-sized default of the command."""

    METHODS = METHODS

    dims: tuple[int, ...] = field(default=(5, 10, 20), metadata={"help": "Dimensions d, e.g. 5,10,20."})
    samples: tuple[int, ...] = field(default=(4_000, 16_000, 64_000, 256_000), metadata={
        "help": "Sample sizes M (each >= 4; a single pass over M fresh examples), e.g. 2000,8000,32000."})
    methods: tuple[str, ...] = field(default=METHODS, metadata={
        "help": "Oracles: variance-reduced, naive or both (comma-separated)."})
    seeds: int = field(default=5, metadata={"help": "Seeds per setting."})
    smoothing: float = field(default=0.2, metadata={"help": "Smoothing radius δ (certified at radius 2δ)."})

    def validate(self) -> None:
        super().validate()
        check_value("smoothing", self.smoothing, POSITIVE)


FULL = NonsmoothConfig()
QUICK = NonsmoothConfig(dims=(4, 8), samples=(1_000, 4_000, 16_000), seeds=3)


@dataclass(frozen=True)
class ZORow(Measured):
    """One run: the measurements, its M and the theorem's parameters (T, K, B1, B2, m, σ) and bound."""

    M: int
    rho: float
    T: int
    K: int
    B1: int
    B2: int
    m: int
    sigma: float
    theory_bound: float


class NonsmoothZO(NonsmoothExperiment):
    """Zhang–Tran–Cutkosky (no experiments in the paper): certified ‖∂F‖_2δ and loss against samples M for the
    private variance-reduced oracle vs the naive one, at several d and ε, with fitted slopes."""

    name = "nonsmooth-zo"
    title = "Private zeroth-order nonsmooth optimization: error against samples (Zhang–Tran–Cutkosky)"
    sizes = ("--quick (default): d ∈ {4, 8}, M up to 16 000, 3 seeds, minutes on 2 cores; --full: d up to 20, "
             "M up to 256 000, 5 seeds (hours).")
    Config, QUICK, FULL, Row = NonsmoothConfig, QUICK, FULL, ZORow

    def run_one(self, config: NonsmoothConfig, task: Task) -> ZORow:
        """One run of (d, ε, M, method, seed)."""
        d, epsilon, M, method, _ = task
        L, F_star = constants(config, d)
        algorithm = ZhangTranCutkosky.from_theory(M=M, d=d, L=L, delta=config.smoothing,
                                                  rho=paper_rho(epsilon, config.dp_delta), F_star=F_star,
                                                  oracle=method)
        return ZORow(**measure(config, algorithm, task, M=M, rho=algorithm.rho, T=algorithm.period,
                               K=algorithm.epochs, B1=algorithm.B1, B2=algorithm.B2, m=algorithm.m,
                               sigma=algorithm.sigma, theory_bound=guarantee(algorithm, d=d, L=L, F_star=F_star)))

    def claims(self, rows: Sequence[ZORow], config: NonsmoothConfig) -> list[Claim]:
        return check_claims(rows, config)

    def describe(self, result: Result) -> str:
        cfg = result.config
        return (f"{cfg.objective()} Smoothing δ = {cfg.smoothing}; (ε, δ_DP) with δ_DP = {cfg.dp_delta:g}, ρ from "
                "the optimal zCDP conversion; parameters from Theorem 4.9 (variance-reduced) and App. E (naive, "
                f"B = 1); {cfg.seeds} seeds; a single pass over M samples.")

    def render(self, result: Result) -> str:
        rows = result.rows
        cert, loss, theory = (by_m(rows, k) for k in ("certified_grad_norm", "excess_loss", "theory_bound"))
        lines = ["## Medians over seeds\n",
                 "| d | ε | method | M | T | K | σ | certified ‖∂F‖_2δ | F(w̄) − F(x*) | theory bound |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        first = {(r.d, r.epsilon, r.method, r.M): r for r in reversed(rows)}
        for (d, e, method), series in sorted(cert.items()):
            for (M, c), (_, l), (_, b) in zip(series, loss[(d, e, method)], theory[(d, e, method)]):
                r = first[(d, e, method, M)]
                lines.append(f"| {d} | {e:g} | {method} | {M} | {r.T} | {r.K} | {r.sigma:.3g} | {c:.4g} | "
                             f"{l:.4g} | {b:.4g} |")
        lines += ["", "Figures: `fig_certified.png`, `fig_loss.png`; every run: `rows.csv`."]
        return "\n".join(lines)

    def plot(self, result: Result, out: Path) -> list[Path]:
        return [plot_against_m(result, out / "fig_certified.png", "certified_grad_norm", "certified ‖∂F(w̄)‖_2δ"),
                plot_against_m(result, out / "fig_loss.png", "excess_loss", "test F(w̄) − F(x*)")]


EXPERIMENT = NonsmoothZO()


def by_m(rows: Sequence[ZORow], metric: str) -> dict[tuple[int, float, str], list[tuple[int, float]]]:
    """(d, ε, method) → [(M, median over seeds of ``metric``)] sorted by M."""
    return medians(rows, metric, ("d", "epsilon", "method"), "M")


def check_claims(rows: Sequence[ZORow], config: NonsmoothConfig) -> list[Claim]:
    """The theory's qualitative predictions, judged on 95 % intervals over the seeds: the difference of the mean
    certificates at the largest M, and the log-log slope against M fitted per seed."""
    theory, loss = by_m(rows, "theory_bound"), by_m(rows, "excess_loss")
    claims = []
    largest = max(config.samples)
    pairs = [(d, e) for d in config.dims for e in config.epsilons]
    if set(config.methods) == set(METHODS):
        gaps = {(d, e): stats.difference_interval(
            at(rows, "certified_grad_norm", d=d, epsilon=e, M=largest, method="naive"),
            at(rows, "certified_grad_norm", d=d, epsilon=e, M=largest, method="variance-reduced")) for d, e in pairs}
        verdicts = {k: stats.exceeds(iv, 0.0) for k, iv in gaps.items()}
        claims.append(Claim(f"at the largest M = {largest}, the variance-reduced oracle certifies a smaller "
                            "‖∂F‖_2δ than the naive one (spec §5.17): naive − variance-reduced > 0 in every (d, ε) "
                            "cell", stats.all_hold(list(verdicts.values())),
                            stats.judged(verdicts) + "; " + "; ".join(f"d={d}, ε={e:g}: {gaps[(d, e)]}"
                                                                      for d, e in pairs)))
    if len(config.samples) > 1:
        series = by_seed(rows, "certified_grad_norm", ("d", "epsilon", "method"), "M")
        for method in config.methods:
            parts, verdicts = [], {}
            for d, e in pairs:
                slope = stats.slope_interval(*series[(d, e, method)])
                verdicts[(d, e)] = stats.below(slope, 0.0)
                parts.append(f"d={d}, ε={e:g}: {slope} (median loss {loglog_slope(*zip(*loss[(d, e, method)])):.2f}, "
                             f"bound {loglog_slope(*zip(*theory[(d, e, method)])):.2f})")
            claims.append(Claim(f"{LABEL[method]}: the certified ‖∂F‖_2δ falls with M: its log-log slope, fitted per "
                                "seed, is < 0 in every (d, ε) cell (the theory's rate: M^-1/3 to M^-1/2 for Alg. 4–5, "
                                "M^-1/3 for Alg. 6)", stats.all_hold(list(verdicts.values())),
                                stats.judged(verdicts) + "; " + "; ".join(parts)))
    claims.append(privacy_claim(rows))
    return claims


def plot_against_m(result: Result, path: Path, metric: str, ylabel: str) -> Path:
    """``metric`` against M, one panel per d: median and range over seeds per (method, ε); for the certified bound
    the theory's bound faint beside it."""
    rows, cfg = result.rows, result.config
    values, bounds = by_m(rows, metric), by_m(rows, "theory_bound")
    styles = list(zip([(m, e) for m in cfg.methods for e in cfg.epsilons],
                      [(c, s) for c in ("C0", "C3") for s in ("-", "--", ":")]))

    def draw(ax, d):
        for (method, epsilon), (color, style) in styles:
            Ms, ys = zip(*values[(d, epsilon, method)])
            spread = [[getattr(r, metric) for r in rows if (r.d, r.epsilon, r.method, r.M) == (d, epsilon, method, M)]
                      for M in Ms]
            ax.errorbar(Ms, ys, yerr=[[y - min(s) for y, s in zip(ys, spread)],
                                      [max(s) - y for y, s in zip(ys, spread)]],
                        color=color, linestyle=style, marker="o", capsize=2, label=f"{method}, ε={epsilon:g}")
            if metric == "certified_grad_norm":
                ax.plot(*zip(*bounds[(d, epsilon, method)]), color=color, linestyle=style, alpha=0.3)
        ax.set(xlabel="samples M", ylabel=ylabel, title=f"d = {d}")

    return figure(path, cfg.dims, draw, f"ℓ1 regression, δ = {cfg.smoothing}, median and range over {cfg.seeds} "
                  "seeds" + (" (faint: the theory's bound)" if metric == "certified_grad_norm" else ""))
