"""Objectives with known facts, as per-example losses usable by every algorithm."""

from dpnc.problems.base import Problem
from dpnc.problems.nonsmooth import (
    LOSSES,
    AbsLinear,
    L1Regression,
    MaxOfAffine,
    RobustRegression,
    Solution,
    TwoLayerReLU,
)
from dpnc.problems.quadratic import HESSIANS, Quadratic

__all__ = [
    "HESSIANS",
    "LOSSES",
    "AbsLinear",
    "L1Regression",
    "MaxOfAffine",
    "Problem",
    "Quadratic",
    "RobustRegression",
    "Solution",
    "TwoLayerReLU",
]
