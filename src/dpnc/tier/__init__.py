"""The model tier: the optimizers users train ``torch`` models with, their registry and their one
wiring.

* :mod:`~dpnc.tier.base`: what a step reports (:class:`StepInfo`), the model checks, the argument
  checks; :mod:`~dpnc.tier.model_state`: the model-state rule (no parameter or buffer changes during
  a private step).
* :mod:`~dpnc.tier.zeroth_order`: :class:`DPZero`, :class:`MeZO`; :mod:`~dpnc.tier.first_order`:
  :class:`DPOptimizer` (per-layer, vmap and loop routes of :mod:`~dpnc.tier.per_layer`).
"""

from dpnc.tier.base import PrivateStats, StepInfo, check_arguments, require_ready, validate_model
from dpnc.tier.first_order import DPOptimizer
from dpnc.tier.zeroth_order import DPZero, MeZO

__all__ = [
    "DPOptimizer",
    "DPZero",
    "MeZO",
    "PrivateStats",
    "StepInfo",
    "check_arguments",
    "require_ready",
    "validate_model",
]
