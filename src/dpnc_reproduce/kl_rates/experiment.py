"""The kl-rates reproduction for :func:`dpnc_reproduce.protocol.run_experiment`: :mod:`.run`
computes, :mod:`.claims` declares and judges, :mod:`.report` fits and renders."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import dpnc_reproduce.kl_rates.claims as judged
import dpnc_reproduce.kl_rates.figures as figures
import dpnc_reproduce.kl_rates.report as report
import dpnc_reproduce.kl_rates.run as run
from dpnc_reproduce.judging import ClaimSpec
from dpnc_reproduce.kl_rates.run import FULL, QUICK, KLRatesConfig, KLRow, KLTask
from dpnc_reproduce.protocol import Experiment, Result


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

    def specs(self, config: KLRatesConfig) -> Sequence[ClaimSpec]:
        return judged.SPECS

    def describe(self, result: Result) -> str:
        return report.describe(result)

    def render(self, result: Result) -> str:
        return report.render(result)

    def tables(self, result: Result) -> dict[str, list[dict]]:
        return {"slopes.csv": report.slopes(result.rows)}

    def plot(self, result: Result, out: Path) -> list[Path]:
        return figures.plot(result, out)


EXPERIMENT = KLRates()
