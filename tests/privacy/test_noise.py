import math
import pickle
import random

import numpy as np
import pytest
import torch
from scipy import stats

from dpnc.privacy import NoiseSource, discrete_gaussian_mechanism, gaussian_mechanism
from dpnc.privacy.releases import Gaussian


def discrete_gaussian_pmf(sigma: float, support: np.ndarray) -> np.ndarray:
    wide = np.arange(-int(20 * sigma) - 20, int(20 * sigma) + 21)
    norm = np.exp(-(wide.astype(float) ** 2) / (2 * sigma**2)).sum()
    return np.exp(-(support.astype(float) ** 2) / (2 * sigma**2)) / norm


@pytest.mark.parametrize("source", [NoiseSource.for_testing(7), NoiseSource()])
def test_gaussian_sampler_passes_ks(source):
    z = source.gaussian(20_000, 2.5).numpy()
    # Fixed-seed source: deterministic. Secret source: a false alarm has probability 1e-6.
    assert stats.kstest(z, stats.norm(scale=2.5).cdf).pvalue > 1e-6


@pytest.mark.parametrize("sigma", [0.7, 3.0, 12.5])
def test_discrete_gaussian_matches_its_pmf(sigma):
    source = NoiseSource.for_testing(11)
    draws = np.array([source.discrete_gaussian(sigma) for _ in range(20_000)])
    # Chi-square goodness of fit on the central support, tails pooled into one bin each side.
    edge = max(1, int(2.5 * sigma))
    inner = np.arange(-edge, edge + 1)
    p_inner = discrete_gaussian_pmf(sigma, inner)
    p_tail = (1 - p_inner.sum()) / 2
    observed = (
        [np.sum(draws < -edge)] + [np.sum(draws == k) for k in inner] + [np.sum(draws > edge)]
    )
    expected = np.concatenate([[p_tail], p_inner, [p_tail]]) * len(draws)
    assert stats.chisquare(observed, expected).pvalue > 1e-4
    # KS on the randomized probability integral transform U = F(Y − 1) + V·p(Y), V ~ U(0, 1),
    # which is exactly uniform when Y follows the pmf (the KS test for a discrete law).
    lo = -int(20 * sigma) - 20
    support = np.arange(lo, -lo + 1)
    pmf = discrete_gaussian_pmf(sigma, support)
    cdf_below = np.concatenate([[0.0], np.cumsum(pmf)[:-1]])
    idx = draws - lo
    u = cdf_below[idx] + np.random.default_rng(0).uniform(size=len(draws)) * pmf[idx]
    assert stats.kstest(u, "uniform").pvalue > 1e-4
    assert np.all(draws == np.round(draws))


def test_discrete_gaussian_secret_source_moments():
    source, sigma = NoiseSource(), 4.0
    draws = np.array([source.discrete_gaussian(sigma) for _ in range(20_000)], dtype=float)
    support = np.arange(-200, 201)
    var = (discrete_gaussian_pmf(sigma, support) * support**2).sum()
    # 6 standard errors: a false alarm has probability < 1e-8.
    assert abs(draws.mean()) < 6 * math.sqrt(var / len(draws))
    assert abs(draws.var() - var) < 6 * var * math.sqrt(2 / len(draws))


def test_discrete_gaussian_of_zero_sigma_is_zero():
    assert NoiseSource.for_testing(0).discrete_gaussian(0.0) == 0


def test_noise_cannot_be_reproduced_from_public_seeds():
    """No public seed (torch's, numpy's, Python's, or a direction generator's) determines the
    noise."""

    def draw_after_public_seeding(seed: int):
        torch.manual_seed(seed)
        np.random.seed(seed)
        random.seed(seed)
        public = torch.Generator().manual_seed(seed)
        direction = torch.randn(5, generator=public)
        source = NoiseSource()
        return direction, source.gaussian(5, 1.0), source.discrete_gaussian(10.0)

    d1, z1, k1 = draw_after_public_seeding(123)
    d2, z2, k2 = draw_after_public_seeding(123)
    assert torch.equal(d1, d2)  # public randomness replays ...
    assert not torch.equal(z1, z2)  # ... privacy noise does not
    # The published DPZero code's bug: noise = first randn after seeding the direction generator.
    leaked = torch.randn(5, generator=torch.Generator().manual_seed(123))
    assert not torch.equal(z1, leaked)
    draws = {draw_after_public_seeding(5)[2] for _ in range(8)}
    assert len(draws) > 1


def test_noise_source_leaves_global_generators_untouched():
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    states = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    source = NoiseSource()
    source.gaussian(100, 1.0)
    source.discrete_gaussian(3.0)
    assert torch.equal(torch.get_rng_state(), states[0])
    assert np.array_equal(np.random.get_state()[1], states[1]) and random.getstate() == states[2]


def test_secret_state_cannot_be_pickled():
    with pytest.raises(TypeError, match="cannot be pickled or checkpointed"):
        pickle.dumps(NoiseSource())


def test_seeded_source_is_reproducible_and_marked_not_private():
    a, b = NoiseSource.for_testing(3), NoiseSource.for_testing(3)
    assert torch.equal(a.gaussian(4, 1.0), b.gaussian(4, 1.0))
    assert a.discrete_gaussian(5.0) == b.discrete_gaussian(5.0)
    assert not a.secret and NoiseSource().secret
    _, release = gaussian_mechanism(1.0, Gaussian(1.0, 2.0), a)
    assert release.secret is False
    _, release = gaussian_mechanism(1.0, Gaussian(1.0, 2.0), NoiseSource())
    assert release.secret is True


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: NoiseSource().gaussian(3, -1.0), r"sigma must be a finite number >= 0; got -1.0"),
        (
            lambda: NoiseSource().discrete_gaussian(float("nan")),
            r"sigma must be a finite number >= 0; got nan",
        ),
        (lambda: NoiseSource.for_testing("seed"), r"seed must be an int; got 'seed'"),
        (
            lambda: discrete_gaussian_mechanism(
                float("inf"), sensitivity=1.0, sigma=1.0, noise=NoiseSource()
            ),
            r"value must be finite",
        ),
    ],
)
def test_noise_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
