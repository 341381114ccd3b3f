"""The dpzero-lm reproduction for :func:`dpnc_reproduce.protocol.run_experiment`: :mod:`.run`
computes, :mod:`.claims` declares and judges, :mod:`.tables` and :mod:`.render` show."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import dpnc_reproduce.dpzero_lm.claims as judged
import dpnc_reproduce.dpzero_lm.render as render
import dpnc_reproduce.dpzero_lm.run as run
import dpnc_reproduce.dpzero_lm.tables as tables
from dpnc_reproduce.dpzero_lm.run import FULL, QUICK, LMConfig, LMGroup, LMRow
from dpnc_reproduce.judging import ClaimSpec
from dpnc_reproduce.protocol import Experiment, Result


class DPZeroLM(Experiment[LMConfig, LMGroup, LMRow]):
    """DPZero paper, Tables 2, 3 and 5: zero-shot, MeZO, DPZero (ε = 6, 2), AdamW and DP-AdamW
    fine-tuning of a sentence encoder on the LM-BFF tasks, with Gaussian and sphere directions,
    beside the paper's numbers."""

    name = "dpzero-lm"
    title = "DPZero paper, language-model fine-tuning (Tables 2, 3 and 5)"
    sizes = (
        "--quick (default): SST-2, seed 42, zero-shot, MeZO and DPZero at ε = 6 and 2, 300 steps (a smoke run, "
        "minutes); --full: SST-2, SST-5, SNLI, MNLI, RTE, TREC × seeds 42, 13, 21 (SNLI and MNLI: the three "
        "training seeds on their one k-shot folder, 42) with each task's recipe (TASK_RECIPES, chosen "
        "non-privately on held-out training rows), Table 2 only. Tables 3 and 5 run with --fo-methods "
        "adamw,dp-adamw and --sphere-tasks SST-2,SST-5."
    )
    Config, QUICK, FULL, Row = LMConfig, QUICK, FULL, LMRow
    runner = run

    def isolated(self, config: LMConfig) -> bool:
        return config.isolate

    def bind_output(self, config: LMConfig, out: Path) -> LMConfig:
        return (
            config
            if config.runs_dir is not None
            else dataclasses.replace(config, runs_dir=str(out / "runs"))
        )

    def specs(self, config: LMConfig) -> list[ClaimSpec]:
        return judged.specs(config)

    def describe(self, result: Result) -> str:
        return render.describe(result)

    def render(self, result: Result) -> str:
        return render.render(result)

    def tables(self, result: Result) -> dict[str, list[dict]]:
        return {"privacy.csv": tables.privacy_rows(result.rows)}

    def plot(self, result: Result, out: Path) -> list[Path]:
        return render.plot(result, out)


EXPERIMENT = DPZeroLM()
