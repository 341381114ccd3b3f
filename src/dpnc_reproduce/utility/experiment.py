"""The utility reproduction for :func:`dpnc_reproduce.protocol.run_experiment`: :mod:`.run`
computes, :mod:`.claims` declares and judges, :mod:`.report` renders."""

from __future__ import annotations

from pathlib import Path

import dpnc_reproduce.utility.claims as judged
import dpnc_reproduce.utility.report as report
import dpnc_reproduce.utility.run as run
from dpnc_reproduce.judging import ClaimSpec
from dpnc_reproduce.method_table import rename
from dpnc_reproduce.protocol import Experiment, Result
from dpnc_reproduce.utility.config import FULL, QUICK, RENAMED, UtilityConfig
from dpnc_reproduce.utility.methods import methods
from dpnc_reproduce.utility.run import UtilityRow


class Utility(Experiment):
    """Each paper's method against DP-GD / DP-SGD (and Opacus on the network) on problems with
    public constants: excess risk, test accuracy, cost and ε spent, per problem, ε, n and seed."""

    name = "utility"
    title = "Utility on problems with public constants: each paper's method against DP-GD / DP-SGD"
    sizes = (
        "--quick (default): breast-cancer logistic and ℓ1 regression, ε = 4, n ∈ {40, 200}, 3 seeds, 6 "
        "methods and their compute-matched DP-SGD (about 1 min); --full: 6 problems × ε ∈ {1, 4} × n = 1000 "
        "(real data capped at its pool: cancer 455; digits at ε = 1 only) × 5 seeds × 13 methods "
        "and 8 compute-matched DP-SGD, ZTC/KLT zeroth order with m ≤ 128 directions (about an hour with 1 "
        "worker on a 2-core machine shared with other runs)."
    )
    claims_heading = "Claims (95 % intervals over seeds; 'no signal' where an interval straddles)"
    Config, QUICK, FULL, Row = UtilityConfig, QUICK, FULL, UtilityRow
    runner = run

    def upgrade(self, data: dict) -> dict:
        """A result written before 28 Nov 2026 names the methods the old way (``klt-fo``): the
        registry's names (:data:`~dpnc_reproduce.utility.config.RENAMED`,
        :func:`~dpnc_reproduce.method_table.rename`)."""
        return rename(data, RENAMED)

    def specs(self, config: UtilityConfig) -> list[ClaimSpec]:
        return judged.specs(config)

    def describe(self, result: Result) -> str:
        return report.describe(result.config)

    def render(self, result: Result) -> str:
        return report.render(result.rows, result.config, methods(result.config))

    def plot(self, result: Result, out: Path) -> list[Path]:
        return report.plot(result.rows, result.config, out)


EXPERIMENT = Utility()
