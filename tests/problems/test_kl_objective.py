"""dpnc.problems.kl_objective: the weak-convexity default of a convex objective, points drawn in its
region, and the KL checker's ratio (Menart et al. §1.1, §5.6)."""

import dataclasses
import math

import pytest
import torch

from dpnc.problems.kl import PowerGrowth, Quadratic
from dpnc.problems.kl_objective import check_kl, default_weak_convexity, sample_ball


@pytest.mark.parametrize("gamma, kappa, L0", [(1 / math.sqrt(2), 2.0, 3.0), (0.5, 1.5, 2.0)])
def test_the_default_weak_convexity_doubles_the_round_count_at_the_default_F0(gamma, kappa, L0):
    weak, F0 = default_weak_convexity(gamma, kappa, L0), (gamma * L0) ** kappa
    assert 32 * gamma**2 * weak * F0 ** ((kappa - 2) / kappa) == pytest.approx(1.0, rel=1e-12)
    assert Quadratic(2, radius=2.0).constants.weak_convexity == pytest.approx(1 / 16)


@pytest.mark.parametrize("radial", ["volume", "uniform"])
def test_sample_ball_draws_seeded_points_inside_the_region(radial):
    objective = PowerGrowth(2.0, 4, w_star=[1.0, 0.0, 0.0, -1.0], radius=1.5)
    region = objective.constants.region
    points = sample_ball(objective, 4000, seed=7, radial=radial)
    assert points.shape == (4000, 4) and points.dtype == torch.float64
    distance = torch.linalg.vector_norm(points - region.center, dim=-1)
    assert float(distance.max()) <= region.radius
    assert torch.equal(points, sample_ball(objective, 4000, seed=7, radial=radial))
    # the median distance: R·(1/2)^(1/d) uniform in volume, R/2 uniform in distance
    median = region.radius * (0.5 ** (1 / 4) if radial == "volume" else 0.5)
    assert float(distance.median()) == pytest.approx(median, rel=0.05)


def test_sample_ball_refuses_what_it_cannot_draw():
    objective = Quadratic(2, radius=1.0)
    with pytest.raises(ValueError, match="radial must be 'volume' or 'uniform'; got 'shell'"):
        sample_ball(objective, 10, radial="shell")
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        sample_ball(objective, 0)


def test_the_kl_ratio_is_one_where_the_inequality_is_tight_and_infinite_at_a_false_minimum():
    objective = Quadratic(3, c=[1.0, -2.0, 0.5], radius=2.0)  # F − F* = γ²‖∇F‖² everywhere
    assert check_kl(objective, sample_ball(objective, 50, seed=1)) == pytest.approx(1.0)
    minimum = objective.w_star[None]
    assert check_kl(objective, minimum) == 0.0
    raised = dataclasses.replace(objective.constants, F_star=-1.0)
    objective.constants = raised  # a stationary point above the declared minimum violates KL
    assert check_kl(objective, minimum) == math.inf
