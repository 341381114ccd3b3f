"""Menart et al.'s practical settings against their theory settings, on least squares.

Least squares with d = 7 (``LeastSquares.generate(7, n, seed, noise=0.05, sufficient=True)``: 1000 rows ±q_j on the
unit sphere, each repeated n/1000 times), its public constants (γ² = 3.5, L0 = 3.2, L1 = 1, region radius 2),
ρ = 0.5 zCDP, start w0 = 0. For n = 2·10³, 2·10⁴, 2·10⁵ it prints the mean final excess F(w) − F* over the data
seeds (secret noise, so the numbers move a little between invocations) of each algorithm's ``from_theory`` and
``practical`` settings, their ratio, and the largest ledger ρ. ``ProximalPoint.from_theory`` asks for 10⁵–10⁹ inner
steps per round here, so it runs with ``max_inner_iters=200`` (the practical cap), which the table says.

    python benchmarks/kl_practical.py              # 5 data seeds, about a minute on 2 cores
    python benchmarks/kl_practical.py --seeds 2    # quicker
"""

from __future__ import annotations

import argparse
import statistics

import torch

from dpnc.algorithms.base import Setting
from dpnc.algorithms.menart import AdaptiveGD, KLSpider, ProximalPoint
from dpnc.privacy import NoiseSource
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.budget import ZCDP
from dpnc.problems.kl import LeastSquares

RHO, D = 0.5, 7
SETTINGS = {
    "KL-Spider": (lambda s: KLSpider.from_theory(s, ZCDP(RHO)), lambda s: KLSpider.practical(s, ZCDP(RHO))),
    "adaptive GD": (lambda s: AdaptiveGD.from_theory(s, ZCDP(RHO)),
                    lambda s: AdaptiveGD.practical(s, ZCDP(RHO))),
    "proximal point": (lambda s: ProximalPoint.from_theory(s, ZCDP(RHO), max_inner_iters=200),
                       lambda s: ProximalPoint.practical(s, ZCDP(RHO))),
}


def measure(build, n: int, seeds: int) -> tuple[float, float, float]:
    """(mean start excess, mean final excess, largest ledger ρ) over data seeds 0..seeds−1."""
    start, end, spent = [], [], []
    for seed in range(seeds):
        f = LeastSquares.generate(D, n, seed=seed, noise=0.05, sufficient=True)
        accountant = Accountant()
        run = build(Setting.of(f)).run(f, None, noise=NoiseSource(), accountant=accountant,
                                        generator=torch.Generator())
        start.append(float(f.value(torch.zeros(D, dtype=torch.float64))) - f.constants.F_star)
        end.append(float(f.value(run.output)) - f.constants.F_star)
        spent.append(accountant.rho())
    return statistics.fmean(start), statistics.fmean(end), max(spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="data seeds averaged (default 5)")
    parser.add_argument("--n", type=int, nargs="+", default=[2_000, 20_000, 200_000])
    args = parser.parse_args()
    print(f"least squares d = {D}, ρ = {RHO} zCDP, w0 = 0; mean excess F(w) − F* over {args.seeds} data seeds\n")
    print("| algorithm | n | start | from_theory | practical | theory / practical | ledger ρ (max) |")
    print("|---|---|---|---|---|---|---|")
    for name, (theory, practical) in SETTINGS.items():
        for n in args.n:
            start, end_theory, rho_theory = measure(theory, n, args.seeds)
            _, end_practical, rho_practical = measure(practical, n, args.seeds)
            print(f"| {name} | {n:.0e} | {start:.3g} | {end_theory:.3g} | {end_practical:.3g} | "
                  f"{end_theory / end_practical:.3g} | {max(rho_theory, rho_practical):.6f} |", flush=True)
    print("\nproximal point from_theory runs with max_inner_iters=200 (Theorem 9's T_A is not runnable here).")


if __name__ == "__main__":
    main()
