"""DPZero paper, synthetic experiment: Figures 1–3 and Table 4 (docs/papers.md, DPZero §4.1).

DPZero, DPGD-0th and DP-GD on the quadratics of effective rank d, √d and log d at the paper's (ε, δ)
and noise; each point the grid's best on the training metric (test floor beside it), each task a
batched (step size × C) grid, the output the last iterate (the paper does not say which; DPZero
§7.7). See docs/dpzero.md ("Reproducing the DPZero paper's synthetic experiment")."""

from dpnc_reproduce.dpzero_synthetic.experiment import EXPERIMENT, DPZeroSynthetic
from dpnc_reproduce.dpzero_synthetic.run import (
    FULL,
    QUICK,
    SyntheticConfig,
    SyntheticRow,
    SyntheticTask,
)

__all__ = [
    "EXPERIMENT",
    "DPZeroSynthetic",
    "FULL",
    "QUICK",
    "SyntheticConfig",
    "SyntheticRow",
    "SyntheticTask",
]
