"""dpnc.privacy.mechanisms: the Gaussian and discrete Gaussian mechanisms draw at the release's σ
(the innermost one of a sampled release), round to the grid where discrete, and refuse a
release they cannot draw."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from dpnc.privacy import NoiseSource, discrete_gaussian_mechanism, gaussian_mechanism, interpret
from dpnc.privacy.releases import (
    ExponentialMechanism,
    FixedSize,
    Gaussian,
    Sampled,
    TreeAggregated,
)


def test_gaussian_mechanism_adds_noise_of_the_release_sigma():
    value = torch.zeros(50_000, dtype=torch.float32)
    noisy, release = gaussian_mechanism(value, Gaussian(0.5, 1.5), NoiseSource.for_testing(1))
    assert noisy.dtype == torch.float32 and noisy.shape == value.shape
    assert stats.kstest(noisy.double().numpy(), stats.norm(scale=1.5).cdf).pvalue > 1e-4
    with pytest.raises(TypeError, match="release must describe a Gaussian mechanism"):
        gaussian_mechanism(value, object(), NoiseSource())


def test_discrete_gaussian_mechanism_rounds_to_its_grid():
    source = NoiseSource.for_testing(2)
    value, release = discrete_gaussian_mechanism(
        0.123456, sensitivity=0.02, sigma=0.05, noise=source, resolution=100
    )
    grid = 0.02 / 100
    assert abs(value / grid - round(value / grid)) < 1e-6
    assert release.sensitivity == 101 and release.sigma == pytest.approx(0.05 / grid)
    # Rounding costs ((resolution + 1)/resolution)² of the continuous mechanism's ρ.
    assert interpret.rho(release) == pytest.approx(
        interpret.rho(Gaussian(0.02, 0.05)) * (101 / 100) ** 2
    )
    draws = np.array(
        [
            discrete_gaussian_mechanism(0.3, sensitivity=0.02, sigma=0.05, noise=source)[0]
            for _ in range(5000)
        ]
    )
    assert abs(draws.mean() - 0.3) < 6 * 0.05 / math.sqrt(5000)
    assert draws.std() == pytest.approx(0.05, rel=0.05)


def test_gaussian_mechanism_draws_the_innermost_sigma_and_refuses_trees():
    a, b = NoiseSource.for_testing(5), NoiseSource.for_testing(5)
    sampled, _ = gaussian_mechanism(
        torch.zeros(4), Sampled(FixedSize(10, 2), Gaussian(1.0, 2.5)), a
    )
    plain, _ = gaussian_mechanism(torch.zeros(4), Gaussian(1.0, 2.5), b)
    assert torch.equal(sampled, plain)
    with pytest.raises(TypeError, match="TreeMechanism"):
        gaussian_mechanism(0.0, TreeAggregated(Gaussian(1.0, 2.0), leaves=4), NoiseSource())
    with pytest.raises(TypeError, match="release must describe a Gaussian mechanism"):
        gaussian_mechanism(0.0, ExponentialMechanism(1.0), NoiseSource())
