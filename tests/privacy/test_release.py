"""dpnc.privacy.release: the one release path of a clipped mean (private_mean, mean_release,
release_sum): the ledger holds the entry it was given, and the value agrees with it."""

import math

import pytest
import torch

from dpnc.privacy import (
    Accountant,
    DiscreteGaussian,
    Gaussian,
    NoiseSource,
    NonPrivate,
)
from dpnc.privacy.release import mean_release, private_mean, release_sum
from dpnc.sampling import FullBatch

DELTA = 1e-5


def test_private_mean_without_noise_records_one_non_private_release():
    acct = Accountant()

    class Full:
        batch_size = 4

        def release(self, sensitivity, sigma):
            return Gaussian(sensitivity, sigma)

    out = private_mean(
        torch.tensor([1.0, 2.0, 3.0, 10.0]),
        2.0,
        sampler=Full(),
        noise=NoiseSource(),
        accountant=acct,
        noise_multiplier=0.0,
    )
    assert float(out.value) == pytest.approx((1 + 2 + 2 + 2) / 4)
    assert [(e.release, e.count) for e in acct.ledger] == [(NonPrivate(), 1)]
    assert acct.epsilon(DELTA) == math.inf


@pytest.mark.parametrize("discrete", [False, True])
def test_release_sum_records_the_one_release_it_was_given(discrete):
    """The entry built once (mean_release) is the object the ledger holds, and the value drawn
    agrees with it: for one run the seeded draw equals the mean plus that entry's σ times the same
    standard normal."""
    sampler, acct = FullBatch(8), Accountant()
    entry = mean_release(
        2.0,
        1.5,
        sampler=sampler,
        accountant=acct,
        noise=NoiseSource.for_testing(0),
        discrete=discrete,
    )
    value = release_sum(
        torch.tensor(4.0, dtype=torch.float64),
        2.0,
        sampler=sampler,
        noise=NoiseSource.for_testing(0),
        accountant=acct,
        noise_multiplier=1.5,
        discrete=discrete,
        release=entry,
    )
    assert [(e.release, e.count) for e in acct.ledger] == [(entry, 1)] and acct.ledger[
        0
    ].release is entry
    if not discrete:
        z = NoiseSource.for_testing(0).gaussian((), 1.0)
        assert float(value) == pytest.approx(4.0 / 8 + entry.sigma * float(z), rel=1e-12)
        assert entry.sigma == pytest.approx(
            1.5 * 2 * 2.0 / 8, rel=1e-15
        )  # σ = multiplier·Δ, Δ = 2C/B
    else:
        assert isinstance(entry, DiscreteGaussian) and not entry.secret
