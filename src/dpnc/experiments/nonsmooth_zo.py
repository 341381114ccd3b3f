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

Fitted log-log slopes of the certified bound against M are printed beside the theory's exponents.
"""

from __future__ import annotations

import functools
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from dpnc.algorithms.zo_o2nc import ZhangTranCutkosky, guarantee, paper_rho
from dpnc.certify import certify_run
from dpnc.experiments.report import (check_grid, fmt_slope, group_medians, loglog_slope, privacy_claim, save_result,
                                     write_csv)
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.noise import NoiseSource
from dpnc.problems.nonsmooth import L1Regression

METHODS = ("variance-reduced", "naive")
LABEL = {"variance-reduced": "variance-reduced + tree (Alg. 4–5)", "naive": "naive (Alg. 6)"}


@dataclass(frozen=True)
class NonsmoothConfig:
    """The grid; defaults are ``--full``, :data:`QUICK` the CI-sized default of the command."""

    dims: tuple[int, ...] = (5, 10, 20)
    samples: tuple[int, ...] = (4_000, 16_000, 64_000, 256_000)
    epsilons: tuple[float, ...] = (1.0, 8.0)
    methods: tuple[str, ...] = METHODS
    seeds: int = 5
    dp_delta: float = 1e-6
    smoothing: float = 0.2
    start_distance: float = 1.0
    n_test: int = 4_000
    certificate_samples: int = 64
    label_noise: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        check_grid(self, METHODS)

    @property
    def runs(self) -> int:
        return len(self.dims) * len(self.epsilons) * len(self.samples) * len(self.methods) * self.seeds


QUICK = NonsmoothConfig(dims=(4, 8), samples=(1_000, 4_000, 16_000), seeds=3)


def run_experiment(config: NonsmoothConfig = QUICK, *, progress: bool = True, workers: int = 2) -> dict:
    """Every (d, ε, M, method, seed) run, ``workers`` processes at a time; returns rows and the configuration.

    Runs are independent (each draws its own secret noise in its own process), so they spread over
    processes with one torch thread each: the steps are small tensor operations that threads do not speed up.
    """
    start = time.perf_counter()
    tasks = [(d, e, M, method, seed) for d in config.dims for e in config.epsilons for M in config.samples
             for method in config.methods for seed in range(config.seeds)]
    bar = tqdm(total=len(tasks), desc="nonsmooth-zo", disable=not progress)
    if workers <= 1:
        rows = []
        for task in tasks:
            rows.append(_one_run(config, *task))
            bar.update()
    else:
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                              else "spawn")
        with ProcessPoolExecutor(workers, mp_context=context, initializer=torch.set_num_threads,
                                 initargs=(1,)) as pool:
            futures = [pool.submit(_one_run, config, *task) for task in tasks]
            for future in as_completed(futures):
                future.result()  # surface a failure at once
                bar.update()
            rows = [f.result() for f in futures]
    bar.close()
    return {"config": asdict(config), "rows": rows, "seconds": time.perf_counter() - start}


@functools.lru_cache(maxsize=8)
def instance(config: NonsmoothConfig, d: int):
    """The data (train pool, fresh test set) and the start x₀ at distance 1 from x* for dimension d.

    ``config`` needs ``samples``, ``n_test``, ``label_noise``, ``start_distance`` and ``seed`` (shared with
    :mod:`dpnc.experiments.nonsmooth_compare`).

    Everything here is public: the law's planted x* and a public direction for x₀. The guarantee is
    about the population F (a single pass over fresh samples), which x* minimises because the label
    noise is symmetric; so F* = L·‖x₀ − x*‖ ≥ F(x₀) − inf F is public and may calibrate the private run.
    (On the finite test set x* is only nearly optimal: the reported F(w̄) − F(x*) can dip below 0.)
    """
    data = L1Regression.synthetic(max(config.samples) + config.n_test, d, noise=config.label_noise,
                                  seed=config.seed + d)
    test = data.subset(torch.arange(max(config.samples), data.n))
    direction = torch.randn(d, generator=torch.Generator().manual_seed(config.seed + 1000 + d), dtype=torch.float64)
    x0 = data.x_star + config.start_distance * direction / torch.linalg.vector_norm(direction)
    return data, test, x0, float(test.value(data.x_star))


def _one_run(config: NonsmoothConfig, d: int, epsilon: float, M: int, method: str, seed: int) -> dict:
    data, test, x0, optimum = instance(config, d)
    train = data.subset(torch.arange(M))
    L = data.constants.L0
    F_star = L * config.start_distance
    algorithm = ZhangTranCutkosky.from_theory(M=M, d=d, L=L, delta=config.smoothing,
                                              rho=paper_rho(epsilon, config.dp_delta), F_star=F_star, oracle=method)
    tic = time.perf_counter()
    gen = torch.Generator().manual_seed(10_000 * config.seed + seed)
    run = algorithm.run(train, x0, noise=NoiseSource(), accountant=Accountant("replace-one"), generator=gen,
                        keep_points=True)
    seconds = time.perf_counter() - tic
    certificate = certify_run(run, test, samples=config.certificate_samples, generator=gen)
    report = run.report(config.dp_delta)
    return {"d": d, "epsilon": epsilon, "rho": algorithm.rho, "M": M, "method": method, "seed": seed,
            "T": algorithm.period, "K": algorithm.epochs, "B1": algorithm.B1, "B2": algorithm.B2, "m": algorithm.m,
            "sigma": algorithm.sigma, "samples_used": run.stats.samples_used, "evaluations": run.stats.evaluations,
            "clipped": run.stats.clipped, "certified_grad_norm": certificate.bound,
            "grad_norm": float(torch.linalg.vector_norm(test.gradient(run.output))),
            "excess_loss": float(test.value(run.output)) - optimum,
            "distance": float(torch.linalg.vector_norm(run.output - data.x_star)),
            "theory_bound": guarantee(algorithm, d=d, L=L, F_star=F_star),
            "epsilon_zcdp": report.epsilon_zcdp, "epsilon_rdp": report.epsilon_rdp, "epsilon_pld": report.epsilon_pld,
            "seconds": seconds}


# --- summaries -------------------------------------------------------------------------------------


def medians(rows: list[dict], metric: str) -> dict[tuple[int, float, str], list[tuple[int, float]]]:
    """(d, ε, method) → [(M, median over seeds of ``metric``)] sorted by M."""
    return group_medians(rows, metric, ("d", "epsilon", "method"), "M")


def check_claims(rows: list[dict], config: dict) -> list[tuple[str, bool, str]]:
    """The theory's qualitative predictions, checked on the measured medians."""
    cert, theory = medians(rows, "certified_grad_norm"), medians(rows, "theory_bound")
    claims = []
    largest = max(config["samples"])
    pairs = [(d, e) for d in config["dims"] for e in config["epsilons"]]
    if set(config["methods"]) == set(METHODS):
        wins = [(d, e) for d, e in pairs
                if dict(cert[(d, e, "variance-reduced")])[largest] < dict(cert[(d, e, "naive")])[largest]]
        claims.append((f"at the largest M = {largest}, the variance-reduced oracle certifies a smaller "
                       "‖∂F‖_2δ than the naive one (spec §5.17)", len(wins) == len(pairs),
                       f"better in {len(wins)} of {len(pairs)} (d, ε) cells"))
    if len(config["samples"]) > 1:
        loss = medians(rows, "excess_loss")
        for method in config["methods"]:
            parts, falls = [], []
            for d, e in pairs:
                Ms, c = zip(*cert[(d, e, method)])
                falls.append(c[-1] < c[0])
                loss_slope = loglog_slope(*zip(*loss[(d, e, method)]))
                bound_slope = loglog_slope(*zip(*theory[(d, e, method)]))
                parts.append(f"d={d}, ε={e:g}: {fmt_slope(loglog_slope(Ms, c), c)} "
                             f"(loss {loss_slope:.2f}, bound {bound_slope:.2f})")
            claims.append((f"{LABEL[method]}: the certified ‖∂F‖_2δ falls from the smallest to the largest M "
                           "(fitted log-log slopes; the theory's rate: M^-1/3 to M^-1/2 for Alg. 4–5, M^-1/3 for "
                           "Alg. 6)", all(falls), "; ".join(parts)))
    claims.append(privacy_claim(rows))
    return claims


def write_outputs(result: dict, out: Path, command: str) -> list[Path]:
    """results.csv, fig_certified.png, fig_loss.png, result.json and summary.md under ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    rows, cfg = result["rows"], result["config"]
    paths = [write_csv(out / "results.csv", rows)]
    for name, metric, ylabel in (("fig_certified.png", "certified_grad_norm", "certified ‖∂F(w̄)‖_2δ"),
                                 ("fig_loss.png", "excess_loss", "test F(w̄) − F(x*)")):
        values, bounds = medians(rows, metric), medians(rows, "theory_bound")
        fig, axes = plt.subplots(1, len(cfg["dims"]), figsize=(4.6 * len(cfg["dims"]), 3.8), squeeze=False)
        for ax, d in zip(axes[0], cfg["dims"]):
            for (method, epsilon), (color, style) in zip(
                    [(m, e) for m in cfg["methods"] for e in cfg["epsilons"]],
                    [(c, s) for c in ("C0", "C3") for s in ("-", "--", ":")]):
                Ms, ys = zip(*values[(d, epsilon, method)])
                spread = [[r[metric] for r in rows if (r["d"], r["epsilon"], r["method"], r["M"]) ==
                           (d, epsilon, method, M)] for M in Ms]
                ax.errorbar(Ms, ys, yerr=[[y - min(s) for y, s in zip(ys, spread)],
                                          [max(s) - y for y, s in zip(ys, spread)]],
                            color=color, linestyle=style, marker="o", capsize=2,
                            label=f"{method}, ε={epsilon:g}")
                if metric == "certified_grad_norm":
                    ax.plot(*zip(*bounds[(d, epsilon, method)]), color=color, linestyle=style, alpha=0.3)
            ax.set(xscale="log", yscale="log", xlabel="samples M", ylabel=ylabel, title=f"d = {d}")
            ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"ℓ1 regression, δ = {cfg['smoothing']}, median and range over {cfg['seeds']} seeds"
                     + (" (faint: the theory's bound)" if metric == "certified_grad_norm" else ""))
        fig.tight_layout()
        fig.savefig(out / name, dpi=120)
        plt.close(fig)
        paths.append(out / name)
    return paths + save_result(out, result, _summary(result, command))


def _summary(result: dict, command: str) -> str:
    rows, cfg = result["rows"], result["config"]
    lines = ["# Private zeroth-order nonsmooth optimization: error against samples (Zhang–Tran–Cutkosky)\n",
             f"Command: `{command}`  ",
             f"Run time: {result['seconds'] / 60:.1f} min on {torch.get_num_threads()} CPU threads.  ",
             f"Objective: ℓ1 regression |⟨a, x⟩ − b|, ‖a‖ ≤ 1 (L = 1), planted x*, label noise "
             f"{cfg['label_noise']}; smoothing δ = {cfg['smoothing']}; (ε, δ_DP) with δ_DP = {cfg['dp_delta']:g}, "
             f"ρ from the optimal zCDP conversion; parameters from Theorem 4.9 (variance-reduced) and App. E "
             f"(naive, B = 1); {cfg['seeds']} seeds; a single pass over M samples; measured on "
             f"{cfg['n_test']} fresh test samples.\n",
             "## Claims\n", "| claim | holds here | our numbers |", "|---|---|---|"]
    lines += [f"| {c} | {'yes' if ok else '**no**'} | {ev} |" for c, ok, ev in check_claims(rows, cfg)]
    cert, loss, theory = (medians(rows, k) for k in ("certified_grad_norm", "excess_loss", "theory_bound"))
    lines += ["", "## Medians over seeds\n",
              "| d | ε | method | M | T | K | σ | certified ‖∂F‖_2δ | F(w̄) − F(x*) | theory bound |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    first = {(r["d"], r["epsilon"], r["method"], r["M"]): r for r in rows}
    for (d, e, method), series in sorted(cert.items()):
        for (M, c), (_, l), (_, b) in zip(series, loss[(d, e, method)], theory[(d, e, method)]):
            r = first[(d, e, method, M)]
            lines.append(f"| {d} | {e:g} | {method} | {M} | {r['T']} | {r['K']} | {r['sigma']:.3g} | {c:.4g} | "
                         f"{l:.4g} | {b:.4g} |")
    lines += ["", "Figures: `fig_certified.png`, `fig_loss.png`; every run: `results.csv`.", ""]
    return "\n".join(lines)


