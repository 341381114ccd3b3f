"""The kl-rates reproduction for :func:`dpnc_reproduce.protocol.run_experiment`: :mod:`.run`
computes, :mod:`.report` judges and renders."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import dpnc_reproduce.kl_rates.figures as figures
import dpnc_reproduce.kl_rates.report as report
import dpnc_reproduce.kl_rates.run as run
from dpnc_reproduce.kl_rates.run import FULL, QUICK, KLRatesConfig, KLRow, KLTask
from dpnc_reproduce.protocol import Claim, Declared, Experiment, Result


class KLRates(Experiment[KLRatesConfig, KLTask, KLRow]):
    """Menart et al. (no experiments in the paper): excess risk against n√ρ/√d for KL-Spider,
    adaptive noisy GD (with and without private selection) and the proximal point method at several
    κ, with fitted slopes beside the predicted exponents, the theorems' bounds and the lower
    bounds."""

    name = "kl-rates"
    title = "DP optimization under the KL condition (Menart et al.): excess risk against n√ρ/√d"
    sizes = (
        "--quick (default): d ∈ {1, 10, 100} (+10⁵ for adaptive GD), n√ρ up to 10⁹, proximal point "
        "n ≤ 1000 on ‖w‖^1.5, 10 seeds (40 per arm in the inner check), 20 minutes on 2 cores shared with "
        "other jobs (load ≈ 10); --full: d up to 10³ (+10⁴, 10⁵), proximal point at 7 n on two objectives, "
        "27 minutes there."
    )
    claims_heading = "Claims (the theorems' predictions, judged on our runs)"
    Config, QUICK, FULL, Row = KLRatesConfig, QUICK, FULL, KLRow
    runner = run

    def claims(self, rows: Sequence[KLRow], config: KLRatesConfig) -> list[Claim]:
        return report.check_claims(rows)

    def declare(self, config: KLRatesConfig) -> list[Declared]:
        return [
            Declared("every run spends at most its ρ", "at most", "ρ", "every run"),
            Declared(
                "every iterate stays in the declared region", "at most", "the radius", "every run"
            ),
            Declared("KL-Spider: F(w_out) − F* ≤ Φfloor", "at most", "Φfloor", "every run"),
            Declared(
                "each (algorithm, objective, d, regime): slope of the excess against n√ρ/√d",
                "at most (one-sided: an upper bound), at both ends of the range its terms' unknown "
                "constants allow",
                "the bound's own slope over the same points (each end: one term's own slope) + the "
                "tolerance of its dropped logs over them (report.tolerance)",
                "95 % t interval over the per-seed slopes (≥ 3 points); one seed: no verdict; the proximal "
                "point also needs its inner-steps check; a verdict only where both ends agree, else "
                "'depends on the constants' with both shown",
            ),
            Declared(
                "proximal point: more inner steps lower the excess by less than half (in log) the "
                "optimisation-limited fall",
                "above",
                "−κ/4·log(factor)",
                "Welch t interval of mean log excess, two arms of seeds",
            ),
            Declared(
                "the runs depend on n and ρ only through n√ρ",
                "within",
                "±log 3",
                "Welch t interval of mean log excess; every point",
            ),
            Declared(
                "(information) excess above the class lower bound",
                "above",
                "0 (mean log ratio)",
                "95 % t interval over seeds; every point",
            ),
        ]

    def describe(self, result: Result) -> str:
        return report.describe(result)

    def render(self, result: Result) -> str:
        return report.render(result)

    def tables(self, result: Result) -> dict[str, list[dict]]:
        return {"slopes.csv": report.slopes(result.rows)}

    def plot(self, result: Result, out: Path) -> list[Path]:
        return figures.plot(result, out)


EXPERIMENT = KLRates()
