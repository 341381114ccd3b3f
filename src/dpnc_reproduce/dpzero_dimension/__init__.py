"""DPZero's central claim against the trained dimension: it keeps MeZO's gain whatever d it trains.

On all-MiniLM-L6-v2, for the trained modes of :mod:`dpnc.lm.trainable` (head, BitFit, LoRA,
top-1, top-2, all), each (task, mode) chooses its recipe on held-out training rows, then runs
every seed (:mod:`.run`); :mod:`.report` declares and judges the claims, :mod:`.render` writes
tables and the figure. See docs/dpzero.md ("Against the trained dimension")."""

from dpnc_reproduce.dpzero_dimension.experiment import EXPERIMENT, DPZeroDimension
from dpnc_reproduce.dpzero_dimension.run import (
    FULL,
    GRIDS,
    MODES,
    QUICK,
    DimConfig,
    DimRow,
    DimTask,
)

__all__ = [
    "EXPERIMENT",
    "DPZeroDimension",
    "FULL",
    "GRIDS",
    "MODES",
    "QUICK",
    "DimConfig",
    "DimRow",
    "DimTask",
]
