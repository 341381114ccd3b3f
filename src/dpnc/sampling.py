"""Data samplers that carry their own privacy event.

A sampler yields the indices of each step's batch and says how a Gaussian release computed on such a
batch is accounted. Batches are public randomness: they come from a seeded ``torch.Generator``.
Means are taken with the fixed denominator ``batch_size`` (the expected size for Poisson sampling),
so a term's contribution is bounded by C/batch_size whatever the realised batch.
"""

from __future__ import annotations

import torch

from dpnc.privacy.releases import FixedSizeSampledGaussian, Gaussian, PoissonSampledGaussian, Release


class FullBatch:
    """Every step uses all n examples (the DPZero theorems). Release: a plain Gaussian."""

    def __init__(self, n: int) -> None:
        _check_int("n", n)
        self.n = self.batch_size = n

    def sample(self, gen: torch.Generator | None = None) -> torch.Tensor:
        return torch.arange(self.n)

    def release(self, sensitivity: float, sigma: float) -> Release:
        return Gaussian(sensitivity, sigma)


class _Minibatch:
    def __init__(self, n: int, batch_size: int) -> None:
        _check_int("n", n)
        _check_int("batch_size", batch_size)
        if batch_size > n:
            raise ValueError(f"batch_size must be <= n={n}; got {batch_size}")
        self.n, self.batch_size = n, batch_size
        self.rate = batch_size / n


class PoissonSampler(_Minibatch):
    """Each example joins each step's batch independently with probability q = batch_size / n."""

    def sample(self, gen: torch.Generator | None = None) -> torch.Tensor:
        return torch.nonzero(torch.rand(self.n, generator=gen) < self.rate).flatten()

    def release(self, sensitivity: float, sigma: float) -> Release:
        return PoissonSampledGaussian(sensitivity, sigma, self.rate)


class ShuffleSampler(_Minibatch):
    """Each step draws a fresh uniformly random batch of exactly batch_size examples (no replacement).

    Accounted by Wang, Balle & Kasiviswanathan (2019) under replace-one (RDP only). Note: shuffled
    *epochs* (each example once per epoch, as Hugging Face's Trainer does) are a different scheme
    that this event does not describe.
    """

    def sample(self, gen: torch.Generator | None = None) -> torch.Tensor:
        return torch.randperm(self.n, generator=gen)[: self.batch_size]

    def release(self, sensitivity: float, sigma: float) -> Release:
        return FixedSizeSampledGaussian(sensitivity, sigma, self.n, self.batch_size)


class SinglePass:
    """Consecutive slices of one fixed order of the n examples: each example is used at most once.

    The single-pass algorithms (Zhang–Tran–Cutkosky Algorithm 4, Kornowski–Liu–Talwar Algorithms
    3 and 5) need batches that are disjoint and chosen independently of the data (spec seed000
    §6.16): the order is 0..n−1, or a permutation drawn once from a public generator. Releases on
    different slices are then accounted by parallel composition (one accountant ``partition``).
    """

    def __init__(self, n: int, generator: torch.Generator | None = None) -> None:
        _check_int("n", n)
        self.n = n
        self.order = torch.arange(n) if generator is None else torch.randperm(n, generator=generator)
        self.used = 0

    @property
    def remaining(self) -> int:
        return self.n - self.used

    def take(self, size: int) -> torch.Tensor:
        """The next ``size`` unused examples."""
        _check_int("size", size)
        if size > self.remaining:
            raise ValueError(f"single pass exhausted: {size} more examples requested but only {self.remaining} "
                             f"of n={self.n} are unused; use fewer steps or a larger dataset")
        batch = self.order[self.used:self.used + size]
        self.used += size
        return batch


Sampler = FullBatch | PoissonSampler | ShuffleSampler


def _check_int(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
