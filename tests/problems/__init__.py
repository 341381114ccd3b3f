"""The nonsmooth problems the tests of dpnc.problems build (each once), and random points for
them."""

import functools

import torch

from dpnc.problems import (
    AbsLinear,
    L1Regression,
    MaxOfAffine,
    Problem,
    RobustRegression,
    TwoLayerReLU,
)
from tests.toys import generator

F64 = torch.float64


@functools.cache
def make(name: str) -> Problem:
    return {
        "abs-linear": lambda: AbsLinear.random(7, seed=1),
        "l1": lambda: L1Regression.synthetic(60, 7, noise=0.1, seed=2),
        "robust": lambda: RobustRegression.synthetic(60, 7, outliers=0.2, seed=3),
        "max-affine": lambda: MaxOfAffine.synthetic(60, 7, 4, seed=4),
        "relu-hinge": lambda: TwoLayerReLU.breast_cancer(
            hidden=4, loss="hinge", radius=5.0, seed=0
        ),
        "relu-absolute": lambda: TwoLayerReLU.breast_cancer(
            hidden=4, loss="absolute", radius=5.0, seed=0
        ),
    }[name]()


NAMES = ["abs-linear", "l1", "robust", "max-affine", "relu-hinge", "relu-absolute"]


def points(problem: Problem, *shape: int, seed: int = 0) -> torch.Tensor:
    """Random points of shape (*shape, d); for TwoLayerReLU inside its ball, radii spread over [0,
    R]."""
    g = generator(seed)
    x = torch.randn(*shape, problem.dim, generator=g, dtype=F64)
    if isinstance(problem, TwoLayerReLU):
        radius = problem.radius * torch.rand(*shape, 1, generator=g, dtype=F64)
        return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True) * radius
    return 2 * x
