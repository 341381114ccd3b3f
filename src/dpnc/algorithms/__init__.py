"""One package per paper family (``dpzero``, ``ztc``, ``klt``, ``menart``); here the contract they
share (:mod:`.base`: Algorithm, Setting, Cost, Run, Stats), the base of the O2NC families
(:mod:`.o2nc`) and the registry of them all (:mod:`.registry`, loaded on first use: it imports
every family)."""

import importlib

from dpnc.algorithms.base import Algorithm, Cost, Run, Setting, Stats, zcdp
from dpnc.algorithms.o2nc import O2NCAlgorithm
from dpnc.privacy.budget import ZCDP, Budget

_REGISTRY = ("ALGORITHMS", "FAMILIES")

__all__ = [
    "ALGORITHMS",
    "FAMILIES",
    "ZCDP",
    "Algorithm",
    "Budget",
    "Cost",
    "O2NCAlgorithm",
    "Run",
    "Setting",
    "Stats",
    "zcdp",
]


def __getattr__(name: str):
    if name in _REGISTRY:
        return getattr(importlib.import_module("dpnc.algorithms.registry"), name)
    raise AttributeError(f"module 'dpnc.algorithms' has no attribute {name!r}")
