"""Radial distance objectives: L = 1 exactly, the population slope against Monte Carlo, the
Goldstein norm's closed form pinned from both sides (weak duality below, a certificate above)."""

import math

import numpy as np
import pytest
import torch

from dpnc.certify import goldstein_certificate
from dpnc.problems.radial import RadialDistance, radial_slope

F64 = torch.float64


def unit(d: int, i: int = 0) -> torch.Tensor:
    e = torch.zeros(d, dtype=F64)
    e[i] = 1.0
    return e


@pytest.mark.parametrize("repel", [0.0, 0.25])
def test_every_example_is_exactly_1_lipschitz(repel):
    p = RadialDistance.synthetic(50, 9, repel=repel, seed=3)
    assert p.constants.L0 == 1.0 and p.lipschitz == 1.0
    x = torch.randn(50, 7, 9, generator=torch.Generator().manual_seed(0), dtype=F64)
    g = p.gradients(x, torch.arange(50))
    assert torch.allclose(
        torch.linalg.vector_norm(g, dim=-1), torch.ones(50, 7, dtype=F64), atol=1e-12
    )
    y = x + 0.3 * torch.randn(x.shape, generator=torch.Generator().manual_seed(1), dtype=F64)
    gap = (p.losses(x, torch.arange(50)) - p.losses(y, torch.arange(50))).abs()
    assert (gap <= torch.linalg.vector_norm(x - y, dim=-1) * (1 + 1e-12)).all()
    # tight: along the ray from p the loss changes by exactly the distance moved
    ray = p.data[0][:, None, :] + torch.tensor([2.0, 3.0], dtype=F64)[None, :, None] * unit(9)
    values = p.losses(ray, torch.arange(50))
    assert torch.allclose((values[:, 1] - values[:, 0]).abs(), torch.ones(50, dtype=F64), atol=1e-9)


def test_closed_form_gradient_and_batched_values_match_the_generic_paths():
    p = RadialDistance.synthetic(300, 6, repel=0.25, seed=4)
    X = torch.randn(5, 6, generator=torch.Generator().manual_seed(2), dtype=F64)
    generic = torch.stack(
        [torch.autograd.functional.jacobian(lambda x: p.value(x[None])[0], x) for x in X]
    )
    assert torch.allclose(p.gradient(X, chunk=64), generic, atol=1e-12)
    per = p.losses(X.expand(300, 5, 6), torch.arange(300)).mean(0)
    assert torch.allclose(p.value(X, chunk=64), per, atol=1e-12)


@pytest.mark.parametrize("d", [3, 16, 64])
def test_population_slope_matches_monte_carlo(d):
    g = torch.randn(200_000, d, generator=torch.Generator().manual_seed(d), dtype=F64).numpy()
    for r in (0.05, 0.3, 0.9):
        v = -0.5 * g / math.sqrt(d)
        v[:, 0] += r
        samples = v[:, 0] / np.linalg.norm(v, axis=1)  # ⟨e, ∇‖y − p‖⟩ at y = x* + r·e
        se = samples.std() / math.sqrt(len(samples))
        assert abs(radial_slope(r, d, 0.5) - samples.mean()) < 4 * se


def test_population_slope_limits():
    assert np.allclose(radial_slope([40.0, 400.0], 16, 0.5), 1.0, atol=1e-3)  # far: a cone, slope 1
    assert radial_slope(0.0, 16, 0.5) == 0.0  # smooth at x*
    nonconvex = RadialDistance.synthetic(10, 8, spread=0.5, repel=0.25, repel_spread=0.1)
    assert (
        nonconvex.slope(0.05) < 0 < nonconvex.slope(0.5)
    )  # x* a local maximum, a sphere of minima around
    assert abs(float(nonconvex.slope(1e3)) - 0.5) < 1e-3  # (1 − q) − q far away


def test_population_gradient_matches_a_large_sample():
    law = RadialDistance.synthetic(200_000, 8, repel=0.25, seed=5)
    x = 0.4 * unit(8, 2)
    se = 1 / math.sqrt(law.n)
    assert (
        float(torch.linalg.vector_norm(law.gradient(x) - law.population_gradient(x)))
        < 4 * math.sqrt(8) * se
    )


@pytest.mark.parametrize("rho", [0.5, 0.2, 0.15, 0.1, 0.03])
def test_goldstein_norm_of_a_cone_is_the_cap_formula(rho):
    cone = RadialDistance.synthetic(2, 8, spread=1e-9)  # F ≈ ‖x − x*‖
    expected = math.sqrt(1 - (0.1 / rho) ** 2) if rho > 0.1 else 0.0
    assert float(cone.goldstein_norm(rho * unit(8), 0.1)) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("repel", [0.0, 0.25])
@pytest.mark.parametrize("rho", [0.05, 0.21, 0.3, 0.6, 1.5])
def test_goldstein_norm_is_pinned_by_duality_below_and_a_certificate_above(repel, rho):
    """Weak duality: every gradient g in the ball has ⟨e, g⟩ ≥ the value (so the value ≤ the true
    norm when it is the infimum; a value 0 needs some ⟨e, g⟩ ≤ 0); the min-norm combination of
    actual gradients in the ball (an upper bound) comes within 1e-3."""
    d, delta = 12, 0.2
    p = RadialDistance.synthetic(2, d, spread=0.5, repel=repel, repel_spread=0.1)
    x = rho * unit(d)
    value = float(p.goldstein_norm(x, delta))
    # points of the ball in the plane of e and e₂ (a polar grid), where the infimum is attained by
    # symmetry
    r, psi = np.meshgrid(np.linspace(0, delta, 200), np.linspace(0, 2 * math.pi, 400))
    Y = (
        x
        + torch.as_tensor((r * np.cos(psi)).ravel())[:, None] * unit(d)
        + torch.as_tensor((r * np.sin(psi)).ravel())[:, None] * unit(d, 1)
    )
    along = p.population_gradient(Y) @ unit(d)
    if value > 0:
        assert float(along.min()) >= value - 1e-6
    else:  # the value 0 claims the infimum is <= 0 (then the symmetric hull holds 0)
        assert float(along.min()) <= 1e-6
    certificate = goldstein_certificate(p.population_gradient, x, delta, samples=256, rim=4)
    assert value - 1e-9 <= certificate.bound <= value + 1e-3


def test_synthetic_validates_and_subset_keeps_the_law():
    with pytest.raises(ValueError, match="repel"):
        RadialDistance.synthetic(10, 3, repel=0.5)
    with pytest.raises(ValueError, match="spread"):
        RadialDistance.synthetic(10, 3, spread=0.0)
    with pytest.raises(ValueError, match="sign"):
        RadialDistance(torch.zeros(2, 3), torch.tensor([1.0, 0.5]))
    p = RadialDistance.synthetic(40, 5, repel=0.25, seed=1)
    assert 0 < int((p.data[1] < 0).sum()) < 40
    half = p.subset(torch.arange(20))
    assert half.n == 20 and float(half.goldstein_norm(unit(5), 0.1)) == float(
        p.goldstein_norm(unit(5), 0.1)
    )
    with pytest.raises(ValueError, match="law"):
        RadialDistance(p.data[0], p.data[1]).goldstein_norm(unit(5), 0.1)
    # seeds vary the data
    first, second = (RadialDistance.synthetic(5, 3, seed=s).data[0] for s in (1, 2))
    assert not torch.equal(first, second)
