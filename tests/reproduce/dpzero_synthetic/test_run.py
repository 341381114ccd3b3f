"""dpzero-synthetic's runs: the grids (independent of batching, the paper's Table 4), the
configuration's refusals, and the closed-form quadratic against evaluated losses."""

import dataclasses
import math

import pytest
import torch

from dpnc.privacy import NoiseSource
from dpnc.problems.base import Objective
from dpnc_reproduce.dpzero_synthetic import run as exp
from dpnc_reproduce.dpzero_synthetic.experiment import EXPERIMENT
from tests.reproduce.dpzero_synthetic.tiny import TINY


def test_grid_runs_are_independent_of_batching():
    """A grid point run inside the batch equals the same point run alone (they share the public
    seed).

    The noise draws differ between the two runs, so ε is made huge to make the noise negligible.
    """
    problem = exp.Quadratic.synthetic(15, "sqrt", n=300)
    noiseless = dataclasses.replace(TINY, epsilon=1e12, stepsizes=(0.01, 0.1), clips=(1.0, 10.0))
    batch = exp.run_grid(
        problem, "DPZero", 20, noiseless, NoiseSource.for_testing(0), hessian="sqrt"
    )
    alone = exp.run_grid(
        problem,
        "DPZero",
        20,
        dataclasses.replace(noiseless, stepsizes=(0.1,), clips=(10.0,)),
        NoiseSource.for_testing(1),
        hessian="sqrt",
    )
    match = [r for r in batch if r.stepsize == 0.1 and r.C == 10.0]
    assert len(batch) == 4 and len(match) == 1 and len(alone) == 1
    assert match[0].test_grad_norm == pytest.approx(alone[0].test_grad_norm, rel=1e-9)
    assert match[0].test_grad_norm < problem.gradient_norm(problem.train[0] * 0, "test")
    assert not alone[0].private  # seeded test noise: the report says not private


def test_full_is_the_paper_s_table_4_grid():
    assert exp.FULL == exp.SyntheticConfig() and len(EXPERIMENT.tasks(exp.FULL)) == 3 * 7 * 3 * 10
    assert exp.QUICK.dims == (20, 60, 200) and EXPERIMENT.tasks(exp.QUICK)[0] == exp.SyntheticTask(
        "identity", 20, "DPZero", 40
    )


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("dims", (20, 0), r"dims must be an integer >= 1; got 0"),
        ("steps", (), r"steps must be non-empty; got \(\)"),
        ("stepsizes", (0.1, math.nan), r"stepsizes must be a finite number >= 0; got nan"),
        ("clips", (-1.0,), r"clips must be a finite number > 0; got -1.0"),
        ("clips", (math.inf,), r"clips must be a finite number > 0; got inf"),
        ("epsilon", 0.0, r"epsilon must be a finite number > 0; got 0.0"),
        ("delta", 1.0, r"delta must be in the open interval \(0, 1\); got 1.0"),
        ("direction", "cube", r"direction must be among \('gaussian', 'sphere'\); got 'cube'"),
        ("seed", -1, r"seed must be an integer >= 0; got -1"),
    ],
)
def test_config_rejects_bad_values_at_construction(field, value, message):
    with pytest.raises(ValueError, match=message):
        exp.SyntheticConfig(**{field: value})


def test_config_rejects_unknown_names():
    with pytest.raises(
        ValueError, match=r"hessians must be among \('identity', 'sqrt', 'inverse'\); got 'diag'"
    ):
        exp.SyntheticConfig(hessians=("diag",))
    with pytest.raises(ValueError, match="methods must be among"):
        exp.SyntheticConfig(methods=("SGD",))


def test_closed_form_two_point_equals_the_evaluated_one():
    """The quadratic's closed-form differences (what DPZero and DPGD-0th step on) equal the
    two-point difference of its per-example losses at x ± λu, on the full batch and a subset, and so
    does the mean loss."""

    from dpnc.estimators import two_point
    from dpnc.space import FlatSpace

    problem = exp.Quadratic.synthetic(12, "inverse", n=50)
    x = torch.randn(3, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for index in (torch.arange(50), torch.tensor([3, 7, 7, 40])):
        space = FlatSpace(x, "sphere")
        evaluated = two_point(space, lambda s=space, i=index: problem.losses_at(s.x, i), 5, 1e-3)
        space.restore_()
        closed = problem.two_point(x, space.direction(5), 1e-3, index)
        assert torch.allclose(closed.a, evaluated.a, rtol=1e-7, atol=1e-8)
        assert torch.allclose(closed.loss, evaluated.loss, rtol=1e-12)


class _Evaluated(Objective):
    """The quadratic without its closed form (its optional ``two_point`` left at None): the
    algorithms evaluate its losses at x ± λu."""

    def __init__(self, problem):
        self.problem, self.n = problem, problem.n

    def value(self, points):
        return self.problem.value(points)

    def gradient(self, points):
        return self.problem.gradient(points)

    def losses_at(self, points, index):
        return self.problem.losses_at(points, index)


@pytest.mark.parametrize("method", ["DPZero", "DPGD-0th"])
def test_a_grid_run_on_the_closed_form_equals_one_on_evaluated_losses(method):
    """The same public seeds and test noise: the closed form changes the cost, not the run."""

    from dpnc.algorithms.dpzero import DPGD0th, DPZero
    from dpnc.privacy.accountant import Accountant
    from dpnc.sampling import FullBatch

    problem = exp.Quadratic.synthetic(15, "sqrt", n=200)
    algorithm = {"DPZero": DPZero, "DPGD-0th": DPGD0th}[method](
        eta=torch.tensor([0.01, 0.1]),
        lam=1e-4,
        C=torch.tensor([0.3, 3.0]),
        noise_multiplier=2.0,
        steps=30,
        direction="sphere",
    )
    outputs = [
        algorithm.run(
            p,
            torch.zeros(2, 15, dtype=torch.float64),
            noise=NoiseSource.for_testing(3),
            accountant=Accountant("replace-one"),
            generator=torch.Generator().manual_seed(4),
            sampler=FullBatch(200),
        ).output
        for p in (problem, _Evaluated(problem))
    ]
    assert torch.allclose(outputs[0], outputs[1], rtol=1e-6, atol=1e-9)
