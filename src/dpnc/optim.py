"""The old path of the model tier's zeroth-order optimizers (:mod:`dpnc.tier`): kept so that code written against
``dpnc.optim`` still runs. New code imports :mod:`dpnc.tier`."""

from dpnc.tier.base import (
    PrivateStats,
    StepHooks,
    StepInfo,
    check_arguments,
    require_ready,
    validate_model,
)
from dpnc.tier.zeroth_order import DPZero, MeZO

__all__ = [
    "DPZero",
    "MeZO",
    "PrivateStats",
    "StepHooks",
    "StepInfo",
    "check_arguments",
    "require_ready",
    "validate_model",
]
