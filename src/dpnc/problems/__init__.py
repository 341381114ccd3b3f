"""Objectives with known facts, as per-example losses usable by every algorithm."""

from dpnc.problems.base import Constants, Objective, Problem
from dpnc.problems.kl import (
    HuberLinear,
    KLObjective,
    LeastSquares,
    PowerGrowth,
    PseudoHuber,
    SinePL,
    TwoSidedPower,
    check_kl,
    lower_bound_cor1,
    lower_bound_thm7,
    lower_bound_thm8,
    sample_ball,
    thm7_instance,
    thm8_instance,
)
from dpnc.problems.kl import Quadratic as KLQuadratic
from dpnc.problems.kl_objective import DataFree, default_weak_convexity
from dpnc.problems.logistic import LogisticRegression, unit_features
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
from dpnc.problems.radial import RadialDistance

__all__ = [
    "HESSIANS",
    "LOSSES",
    "AbsLinear",
    "Constants",
    "DataFree",
    "HuberLinear",
    "KLObjective",
    "KLQuadratic",
    "LeastSquares",
    "LogisticRegression",
    "PowerGrowth",
    "PseudoHuber",
    "SinePL",
    "TwoSidedPower",
    "check_kl",
    "default_weak_convexity",
    "lower_bound_cor1",
    "lower_bound_thm7",
    "lower_bound_thm8",
    "sample_ball",
    "thm7_instance",
    "thm8_instance",
    "unit_features",
    "L1Regression",
    "MaxOfAffine",
    "Objective",
    "Problem",
    "Quadratic",
    "RadialDistance",
    "RobustRegression",
    "Solution",
    "TwoLayerReLU",
]
