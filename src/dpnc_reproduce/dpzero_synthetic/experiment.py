"""The dpzero-synthetic reproduction for :func:`dpnc_reproduce.protocol.run_experiment`: :mod:`.run`
computes, :mod:`.claims` declares and judges, :mod:`.report` analyses and renders."""

from __future__ import annotations

from pathlib import Path

import dpnc_reproduce.dpzero_synthetic.claims as judged
import dpnc_reproduce.dpzero_synthetic.report as report
import dpnc_reproduce.dpzero_synthetic.run as run
from dpnc_reproduce.dpzero_synthetic.run import (
    FULL,
    QUICK,
    SyntheticConfig,
    SyntheticRow,
    SyntheticTask,
)
from dpnc_reproduce.judging import ClaimSpec
from dpnc_reproduce.protocol import Experiment, Result


class DPZeroSynthetic(Experiment[SyntheticConfig, SyntheticTask, SyntheticRow]):
    """DPZero paper, Figures 1–3: DPZero vs DPGD-0th vs DP-GD on quadratics of effective rank d, √d,
    log d."""

    name = "dpzero-synthetic"
    title = "DPZero synthetic experiment (Figures 1–3)"
    sizes = (
        "--quick (default): a subset of the grid, minutes on 2 cores; --full: the paper's Table 4 grid "
        "(many hours on 2 cores)."
    )
    Config, QUICK, FULL, Row = SyntheticConfig, QUICK, FULL, SyntheticRow
    runner = run

    def upgrade(self, data: dict) -> dict:
        """A result written before the protocol: its privacy was a table per T (``privacy``), now on
        every row."""
        if "privacy" not in data:
            return data
        by_T = {p["T"]: {k: v for k, v in p.items() if k != "T"} for p in data["privacy"]}
        return {
            **{k: v for k, v in data.items() if k != "privacy"},
            "rows": [{**by_T[r["T"]], **r} for r in data["rows"]],
        }

    def specs(self, config: SyntheticConfig) -> list[ClaimSpec]:
        return judged.specs(config)

    def describe(self, result: Result) -> str:
        return report.describe(result)

    def render(self, result: Result) -> str:
        return report.render(result)

    def tables(self, result: Result) -> dict[str, list[dict]]:
        return {"privacy.csv": report.privacy_rows(result.rows)}

    def plot(self, result: Result, out: Path) -> list[Path]:
        return report.plot(result, out)


EXPERIMENT = DPZeroSynthetic()
