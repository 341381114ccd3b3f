"""The synthetic quadratic (docs/papers.md, DPZero §5): an Objective whose closed forms agree with
per-example autograd, and the constants it declares."""

import pytest
import torch

from dpnc.problems import Quadratic
from dpnc.problems.base import Objective


@pytest.fixture(scope="module")
def problem():
    return Quadratic.synthetic(10, "sqrt", n=50, seed=0)


def start(d, seed=0):
    return torch.randn(d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_the_quadratic_is_an_objective(problem):
    assert isinstance(problem, Objective) and problem.dim == problem.d
    index = torch.tensor([0, 3, 7])
    x = start(problem.d * 6, seed=15).reshape(3, 2, problem.d)
    reference = torch.stack(
        [
            torch.stack(
                [
                    problem.loss_one(problem.a)(x[i, j], problem.train[int(index[i])])
                    for j in range(2)
                ]
            )
            for i in range(3)
        ]
    )
    torch.testing.assert_close(problem.losses(x, index), reference, rtol=1e-12, atol=1e-12)
    points = x[0]
    torch.testing.assert_close(
        problem.losses_at(points, index),
        Objective.losses_at(problem, points, index),
        rtol=1e-12,
        atol=1e-12,
    )
    torch.testing.assert_close(
        problem.gradients(x, index),
        torch.func.vmap(
            torch.func.vmap(torch.func.grad(problem.loss_one(problem.a)), in_dims=(0, None))
        )(x, problem.train[index]),
    )
    torch.testing.assert_close(
        problem.value(points), problem.losses_at(points).mean(-1), rtol=1e-12, atol=1e-12
    )


def test_the_quadratic_declares_its_smoothness_and_no_lipschitz_constant(problem):
    constants = problem.constants
    assert constants.L1 == 1.0 and constants.L0 is None
