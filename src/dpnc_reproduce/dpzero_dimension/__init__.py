"""DPZero's central claim against the trained dimension: private zeroth-order fine-tuning keeps
almost all of non-private MeZO's gain while training every parameter, because its noise does not grow with d.

On all-MiniLM-L6-v2 (the head of :mod:`dpnc.lm.heads`, zero-shot capable), for the trained modes of
:mod:`dpnc.lm.trainable` in order of d — ``head`` (the linear head), ``bias`` (BitFit), ``lora`` (rank 8),
``top-1`` and ``top-2`` (the top layers above a cached frozen prefix, :mod:`dpnc.lm.cache`) and ``all`` — each
(task, mode) is one unit of work in one process (:mod:`.run`):

1. its recipe (lr, C) is chosen on the first seed's train split: every candidate of the mode's grid
   (:data:`~.run.GRIDS`) is trained on the train part and scored on the held-out part (a fixed fifth; the test split
   is never read: the trainer is handed the two parts), MeZO and DPZero at the largest ε separately;
2. per seed: MeZO, DPZero at each ε (and DP-AdamW where asked) and zero-shot, trained on the whole train split
   with the chosen recipe and scored on the test split, per example (for paired intervals).

:mod:`.report` declares the claims before the run and judges them: the project's own claim (the paper never varies d)
as the slope of DPZero − MeZO
against log10 d over the modes where MeZO learns (one-sided, a stated margin), the per-mode share of MeZO's gain
kept (Fieller), MeZO − zero-shot per mode; :mod:`.render` writes the tables, the diagnostics of why a mode does not
learn (MeZO's per-step signal ‖ĝ‖ against DPZero's noise σC/B and the lr), and ``fig_dimension.png``.
The trainer runs are dpzero-lm's (:func:`dpnc_reproduce.dpzero_lm.run.run_trainer`).
"""

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
