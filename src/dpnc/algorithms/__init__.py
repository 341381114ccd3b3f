"""One module per paper family; the contract (:mod:`.base`: Algorithm, Setting, Cost, Run, Stats)
and the registry (:mod:`.registry`)."""

from dpnc.algorithms.base import Algorithm, Cost, Run, Setting, Stats
from dpnc.privacy.budget import ZCDP, Budget

__all__ = ["ZCDP", "Algorithm", "Budget", "Cost", "Run", "Setting", "Stats"]
