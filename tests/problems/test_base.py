"""dpnc.problems.base: the region's projection, the constants' checks, and the defaults an Objective
gets (per-example losses at shared points, no closed forms, a refusal where it keeps no data)."""

import math

import pytest
import torch

from dpnc.problems.base import Constants, Directional, Objective, Region

F64 = torch.float64


def test_projection_onto_the_region_is_the_nearest_point_of_the_ball():
    region = Region(torch.tensor([1.0, 0.0], dtype=F64), 2.0)
    inside = torch.tensor([2.0, 1.0], dtype=F64)
    assert region.contains(inside) and region.project(inside) is inside
    far = torch.tensor([1.0, 10.0], dtype=F64)
    assert not region.contains(far)
    assert torch.allclose(region.project(far), torch.tensor([1.0, 2.0], dtype=F64))
    assert region.distance(far) == pytest.approx(10.0)
    on_sphere = region.center + torch.tensor([0.0, 2.0 * (1 + 1e-12)], dtype=F64)
    assert region.contains(on_sphere)  # rounding on the boundary is inside


@pytest.mark.parametrize("name", ["L0", "L1", "gamma", "kappa"])
@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, math.nan, True])
def test_a_constant_must_be_a_finite_positive_number(name, value):
    with pytest.raises(ValueError, match=rf"{name} must be a finite number > 0"):
        Constants(**{"L0": 1.0, name: value})


def test_weak_convexity_may_be_zero_and_any_constant_none():
    assert Constants(L0=None).region is None
    assert Constants(L0=1.0, weak_convexity=0.0).weak_convexity == 0.0
    with pytest.raises(ValueError, match="weak_convexity"):
        Constants(L0=1.0, weak_convexity=-0.5)


class Squares(Objective):
    """f(x, z_i) = ½‖x − z_i‖² on three points, through the per-example losses only."""

    name = "squares"

    def __init__(self) -> None:
        self.z = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 3.0]], dtype=F64)
        self.n, self.dim, self.constants = 3, 2, Constants(L0=None, L1=1.0)

    def losses(self, x, index):
        return 0.5 * ((x - self.z[index][:, None, :]) ** 2).sum(-1)

    def value(self, points):
        points, single = self._as_points(points)
        values = self.losses_at(points, torch.arange(self.n)).mean(-1)
        return values[0] if single else values

    def gradient(self, points):
        return points - self.z.mean(0)


def test_losses_at_shared_points_equal_the_batched_losses():
    f, index = Squares(), torch.tensor([2, 0])
    points = torch.tensor([[1.0, 1.0], [0.0, -1.0], [2.0, 2.0]], dtype=F64)
    got = f.losses_at(points, index)  # (k, b)
    expected = torch.stack([f.losses(points[None].expand(2, 3, 2), index)[:, j] for j in range(3)])
    assert got.shape == (3, 2) and torch.equal(got, expected)
    assert got[0, 0] == 0.5 * (1 + 4) and got[1, 1] == 0.5 * (0 + 1)
    grid = points.reshape(3, 1, 2)
    assert f.losses_at(grid, index).shape == (3, 1, 2)  # leading shape kept
    assert f.value(points[0]).ndim == 0


def test_an_objective_has_no_closed_forms_unless_it_says_so():
    f, x = Squares(), torch.zeros(2, dtype=F64)
    assert f.two_point(x, x, 0.1) is None and f.clipped_gradient_sum(x, 1.0) is None
    assert f.example_gradients(x) is None
    with pytest.raises(NotImplementedError, match="squares has no per-example gradients"):
        f.gradients(x[None, None], torch.tensor([0]))
    with pytest.raises(ValueError, match=r"points must have shape \(k, 2\) or \(2,\)"):
        f.value(torch.zeros(3, dtype=F64))
    assert Directional(torch.zeros(4, 5), torch.zeros(4)).examples == 5
