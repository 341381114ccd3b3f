"""DPZero paper, LM fine-tuning: Tables 2, 3 and 5 (docs/papers.md, DPZero §4.2) on MiniLM.

The runs are what ``dpnc finetune`` runs by default (a config field left None takes the
trainer's), one process per k-shot folder sharing the frozen-prefix caches
(:class:`~.run.LMGroup`). The model, the accounting and what ε does not cover: docs/dpzero.md,
"Reproducing the paper's Tables 2, 3, 5"."""

from dpnc_reproduce.dpzero_lm.experiment import EXPERIMENT, DPZeroLM
from dpnc_reproduce.dpzero_lm.run import FULL, QUICK, TASK_RECIPES, LMConfig, LMGroup, LMRow, LMTask

__all__ = [
    "EXPERIMENT",
    "DPZeroLM",
    "FULL",
    "QUICK",
    "TASK_RECIPES",
    "LMConfig",
    "LMGroup",
    "LMRow",
    "LMTask",
]
