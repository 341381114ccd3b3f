"""Useful on a user's own problem? Each paper's algorithm against DP-GD / DP-SGD at equal (ε, δ).

``dpnc reproduce utility``: every method (:func:`~.methods.methods`: hand-set and privately tuned
baselines, the paper methods by registry name) on problems whose constants are public
(:func:`~.config.instance`), over ε, n and seeds, against the non-private optimum; claims:
:mod:`.report`. See docs/practical.md."""

from dpnc_reproduce.utility.config import FULL, QUICK, UtilityConfig
from dpnc_reproduce.utility.experiment import EXPERIMENT, Utility
from dpnc_reproduce.utility.run import UtilityRow

__all__ = ["FULL", "QUICK", "UtilityConfig", "EXPERIMENT", "Utility", "UtilityRow"]
