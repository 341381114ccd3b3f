"""The model tier: the optimizers users train ``torch`` models with, their registry and their one
wiring.

* :mod:`~dpnc.tier.base`: what a step reports (:class:`StepInfo`), the model checks, the argument
  checks; :mod:`~dpnc.tier.model_state`: the model-state rule (no parameter or buffer changes during
  a private step).
* :mod:`~dpnc.tier.zeroth_order`: :class:`DPZeroOptimizer`, :class:`MeZOOptimizer`;
  :mod:`~dpnc.tier.first_order`: :class:`DPOptimizer` (per-layer, vmap and loop routes of
  :mod:`~dpnc.tier.per_layer`).

Every optimizer here ends in ``Optimizer``: ``dpnc.algorithms.dpzero``'s ``DPZero`` and ``MeZO`` are
the papers' configurations of the same algorithms (their symbols: eta, lam, C, T).
"""

from dpnc.tier.base import PrivateStats, StepInfo, check_arguments, require_ready, validate_model
from dpnc.tier.first_order import DPOptimizer
from dpnc.tier.zeroth_order import DPZeroOptimizer, MeZOOptimizer

__all__ = [
    "DPOptimizer",
    "DPZeroOptimizer",
    "MeZOOptimizer",
    "PrivateStats",
    "StepInfo",
    "check_arguments",
    "require_ready",
    "validate_model",
]
