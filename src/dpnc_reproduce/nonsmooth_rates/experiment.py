"""The nonsmooth-rates reproduction for :func:`dpnc_reproduce.protocol.run_experiment`: :mod:`.run`
computes, :mod:`.report` judges and renders."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import dpnc_reproduce.nonsmooth_rates.claims as judged
import dpnc_reproduce.nonsmooth_rates.render as render
import dpnc_reproduce.nonsmooth_rates.report as report
import dpnc_reproduce.nonsmooth_rates.run as run
from dpnc_reproduce.judging import ClaimSpec
from dpnc_reproduce.method_table import rename
from dpnc_reproduce.nonsmooth_rates.run import FULL, QUICK, RENAMED, RateRow, RatesConfig
from dpnc_reproduce.protocol import Experiment, Result


class NonsmoothRates(Experiment):
    """ZTC vs KLT on radial objectives (L = 1 exactly, closed-form population Goldstein norm): the
    sample size n needed to reach β, its fitted exponents in d, ε, α and β beside the theorems', at
    equal function evaluations."""

    name = "nonsmooth-rates"
    title = "Private nonsmooth optimization: measured sample complexity n(β) against d, ε, α, β (ZTC, KLT)"
    sizes = (
        "--quick (default): d ∈ {4, 8}, n ≤ 8 000, 3 seeds, minutes; --full: d up to 64, n ≤ 16 000, 10 seeds, "
        "radial and radial-nonconvex (about 40 min on 2 cores)."
    )
    claims_heading = "Claims (theorems' exponents, equal-evaluation comparison, certificate)"
    Config, QUICK, FULL, Row = RatesConfig, QUICK, FULL, RateRow
    runner = run

    def upgrade(self, data: dict) -> dict:
        """A result written before 28 Nov 2026 names the methods the old way (``ztc``, ``klt-zo``):
        the registry's names (:data:`~dpnc_reproduce.nonsmooth_rates.run.RENAMED`,
        :func:`~dpnc_reproduce.method_table.rename`)."""
        return rename(data, RENAMED)

    def tasks(self, config: RatesConfig) -> list[tuple]:
        return config.tasks()

    def specs(self, config: RatesConfig) -> list[ClaimSpec]:
        return judged.specs(config)

    def describe(self, result: Result) -> str:
        return report.describe(result)

    def render(self, result: Result) -> str:
        return render.render(result.rows, result.config)

    def tables(self, result: Result) -> dict[str, list[dict]]:
        return {
            "thresholds.csv": [
                dataclasses.asdict(t) for t in report.thresholds(result.rows, result.config)
            ]
        }

    def plot(self, result: Result, out: Path) -> list[Path]:
        return [render.plot(result, out / "fig_sample_complexity.png")]


EXPERIMENT = NonsmoothRates()
