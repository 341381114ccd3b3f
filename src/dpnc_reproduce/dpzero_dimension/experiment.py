"""The dpzero-dimension reproduction for :func:`dpnc_reproduce.protocol.run_experiment`: :mod:`.run`
computes, :mod:`.claims` declares and judges, :mod:`.report` measures, :mod:`.render` shows."""

from __future__ import annotations

from pathlib import Path

import dpnc_reproduce.dpzero_dimension.claims as judged
import dpnc_reproduce.dpzero_dimension.render as render
import dpnc_reproduce.dpzero_dimension.run as run
from dpnc_reproduce.dpzero_dimension.run import FULL, QUICK, DimConfig, DimRow, DimTask
from dpnc_reproduce.dpzero_lm.experiment import DPZeroLM
from dpnc_reproduce.judging import ClaimSpec
from dpnc_reproduce.protocol import Experiment, Result


class DPZeroDimension(Experiment[DimConfig, DimTask, DimRow]):
    """DPZero's central claim against the trained dimension d: on MiniLM, does private zeroth-order
    fine-tuning keep MeZO's gain over zero-shot as d grows from a linear head to every parameter
    (head, bias, LoRA, top-1, top-2, all)? Each mode's recipe is chosen on a held-out part of the
    training split."""

    name = "dpzero-dimension"
    title = "DPZero paper, the share of MeZO's gain kept against the trained dimension d"
    sizes = (
        "--quick (default): SST-2, head and top-1, seed 42, ε = 6, T = 30, B = 8, 48 test examples (a smoke "
        "run, minutes); --full: SST-2 and TREC × seeds 42, 13, 21 × head, bias, LoRA, top-1, top-2, all × "
        "zero-shot, MeZO, DPZero ε = 6 and 2, T = 1000, B = 16, each (task, mode) with its recipe chosen on "
        "held-out training rows."
    )
    Config, QUICK, FULL, Row = DimConfig, QUICK, FULL, DimRow
    runner = run

    bind_output = (
        DPZeroLM.bind_output
    )  # the same rule: runs go under the output folder unless runs_dir is given

    def specs(self, config: DimConfig) -> list[ClaimSpec]:
        return judged.specs(config)

    def describe(self, result: Result) -> str:
        return render.describe(result)

    def render(self, result: Result) -> str:
        return render.render(result)

    def tables(self, result: Result) -> dict[str, list[dict]]:
        return render.tables(result)

    def plot(self, result: Result, out: Path) -> list[Path]:
        return render.plot(result, out)


EXPERIMENT = DPZeroDimension()
