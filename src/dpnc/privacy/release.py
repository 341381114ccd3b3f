"""The one private release step of dpnc: a clipped mean over a batch, with noise, recorded.

Every algorithm that releases an average of per-example quantities (DPZero's scalar differences,
DP-GD's gradients, the KL algorithms' gradients, the trainer's DP-AdamW) goes through
:func:`private_mean`, or :func:`release_sum` when it forms the clipped sum itself."""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple, Protocol

import torch

from dpnc.privacy.accountant import Accountant
from dpnc.privacy.clipping import Number, clipped_sum, per_run
from dpnc.privacy.mechanisms import discrete_gaussian_mechanism, discrete_gaussian_release
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import NonPrivate, Release, mean_sensitivity


class BatchSource(Protocol):
    """What the release step needs of a sampler: its fixed batch size, its sampling rate and its
    privacy event."""

    batch_size: int
    rate: float

    def release(self, sensitivity: float, sigma: float) -> Release: ...


class PrivateMean(NamedTuple):
    """The released mean and two private diagnostics (one entry per run)."""

    value: torch.Tensor
    clipped: torch.Tensor  # fraction of the batch clipped (private: do not log publicly)
    nonfinite: torch.Tensor  # values replaced by 0 before clipping (private: do not log publicly)


def private_mean(
    values: torch.Tensor,
    bound: Number,
    *,
    sampler: BatchSource,
    noise: NoiseSource,
    accountant: Accountant,
    noise_multiplier: float,
    vector: bool = False,
    discrete: bool = False,
    partition: str | None = None,
) -> PrivateMean:
    """(1/B) Σ_i clip_bound(v_i) + N(0, σ²), σ = noise_multiplier·Δ, recorded in ``accountant``.

    The one place that decides the three things copies got wrong:

    1. non-finite values become 0 *before* clipping (so the bound holds on bad input) and are
       counted (:func:`~dpnc.privacy.clipping.clipped_sum`, which callers forming their sum use
       too);
    2. the sum is divided by the sampler's **fixed** batch size B, never by the realised |batch|:
       under Poisson sampling |batch| is random and data-dependent, and dividing by it would let one
       example move the mean by more than the recorded Δ;
    3. the noise comes from the secret :class:`~dpnc.privacy.noise.NoiseSource`, and the release is
       recorded in real units: Δ = (2 or 1)·bound/B by the accountant's neighbouring relation
       (:func:`~dpnc.privacy.releases.mean_sensitivity`), σ = noise_multiplier·Δ, as the sampler's
       event.

    The fraction clipped and the non-finite count are returned for diagnostics: they are statistics
    of the private data, not released, and must not be logged publicly.

    Args:
        values: per-example values of the batch the sampler drew: scalars ``(..., |batch|)`` or,
            with ``vector=True``, vectors ``(..., |batch|, d)``; leading dimensions are runs of a
            grid. An empty batch (``|batch| = 0``) releases noise only.
        bound: the clipping threshold C (|v_i| or ‖v_i‖ after clipping), or one per run.
        sampler: gives the fixed denominator B and the privacy event (full batch, Poisson, shuffle).
        noise_multiplier: σ/Δ ≥ 0; 0 releases the exact mean (recorded as not private, ε = ∞).
        discrete: exact discrete Gaussian noise (one scalar run, full batch only).
        partition: record under this partition of the accountant (releases on disjoint parts of the
            data, e.g. the steps of one single pass, compose in parallel).
    """
    summed = clipped_sum(values, bound, vector=vector)
    value = release_sum(
        summed.total,
        bound,
        sampler=sampler,
        noise=noise,
        accountant=accountant,
        noise_multiplier=noise_multiplier,
        discrete=discrete,
        partition=partition,
    )
    return PrivateMean(value, summed.fraction, summed.nonfinite)


def release_sum(
    total: torch.Tensor,
    bound: Number,
    *,
    sampler: BatchSource,
    noise: NoiseSource,
    accountant: Accountant,
    noise_multiplier: float,
    discrete: bool = False,
    partition: str | None = None,
    release: Release | None = None,
) -> torch.Tensor:
    """Σ_i clip_bound(v_i) / B + noise, for a sum the caller clipped itself; recorded in
    ``accountant``.

    ``total`` has shape ``(..., *value_shape)`` with one leading entry per run when ``bound`` is one
    per run. Runs of a grid share one noise multiplier, so they have the same privacy: the ledger
    holds one release, in the units of the largest bound, and run k gets noise of std
    noise_multiplier·Δ_k.

    ``release`` is the entry :func:`mean_release` builds for these arguments (with the largest
    bound), given by a caller that built it first to read it (the data-parallel group reads its
    :attr:`~Release.additive`); built here otherwise. It is the one record of the step: the ledger
    holds it, and the noise is its Gaussian's (σ = noise_multiplier·Δ at the largest bound), drawn
    per unit of bound and scaled by each run's bound."""
    if not (isinstance(noise_multiplier, (int, float)) and noise_multiplier >= 0):
        raise ValueError(f"noise_multiplier must be a number >= 0; got {noise_multiplier!r}")
    if isinstance(
        bound, (int, float)
    ):  # one bound (the common case, every step of a trainer): no tensor built
        largest, positive, one = float(bound), bound > 0, True
    else:
        bounds = torch.as_tensor(bound, dtype=torch.float64)
        largest, positive, one = (
            float(bounds.max()),
            bool(torch.all(bounds > 0)),
            bounds.numel() == 1,
        )
    if not positive:
        raise ValueError(f"bound must be > 0; got {bound!r}")
    built = mean_release(
        largest,
        noise_multiplier,
        sampler=sampler,
        accountant=accountant,
        noise=noise,
        discrete=discrete,
    )
    if release is None:
        release = built
    elif (
        release != built
    ):  # the ledger must hold the release the noise below is drawn for, never another
        raise ValueError(f"release {release!r} is not the one these arguments make: {built!r}")
    mean = total / sampler.batch_size  # the fixed denominator B
    if noise_multiplier == 0:  # a data-dependent value without noise (NonPrivate): ε = ∞
        accountant.record(release, partition=partition)
        return mean
    unit = mean_sensitivity(1.0, sampler.batch_size, accountant.relation)  # Δ per unit of bound
    if discrete:
        if not one or mean.numel() != 1 or sampler.rate != 1.0:
            raise ValueError(
                "discrete=True supports one full-batch scalar run (no subsampled accounting)"
            )
        released, _ = discrete_gaussian_mechanism(
            float(mean),
            sensitivity=unit * largest,  # draws on the grid of
            sigma=noise_multiplier * unit * largest,
            noise=noise,
        )  # ``release``
        accountant.record(release, partition=partition)
        return torch.tensor(released, dtype=mean.dtype, device=mean.device).reshape(mean.shape)
    # The Gaussian of ``release`` (σ = noise_multiplier·unit·largest), drawn per unit of bound and
    # scaled by each run's bound: run k's std is noise_multiplier·Δ_k (the arithmetic of every
    # earlier release, bit for bit).
    z = noise.gaussian(mean.shape, noise_multiplier * unit, dtype=mean.dtype, device=mean.device)
    accountant.record(release, partition=partition)
    return mean + z * per_run(bound, mean)


def mean_release(
    bound: float,
    noise_multiplier: float,
    *,
    sampler: BatchSource,
    accountant: Accountant,
    noise: NoiseSource,
    discrete: bool = False,
) -> Release:
    """The ledger entry :func:`release_sum` records for a mean of ``bound``-clipped terms: the one
    builder.

    Δ = (2 or 1)·bound/B by the accountant's relation, σ = noise_multiplier·Δ, as the sampler's
    event (with ``discrete``, :func:`~dpnc.privacy.mechanisms.discrete_gaussian_release` of them);
    not secret when the noise is seeded. Public: what a trainer writes down before a step, to count
    it should the process die in it; what Menart et al.'s charge records for the releases a stopped
    round skipped; what the process group reads."""
    if noise_multiplier == 0:
        return NonPrivate()
    if not math.isfinite(bound):
        raise ValueError(
            "bound must be finite when noise_multiplier > 0 (the sensitivity is bound/B)"
        )
    unit = mean_sensitivity(1.0, sampler.batch_size, accountant.relation)
    if discrete:
        return discrete_gaussian_release(
            unit * bound, noise_multiplier * unit * bound, secret=noise.secret
        )
    release = sampler.release(unit * bound, noise_multiplier * unit * bound)
    return release if noise.secret else dataclasses.replace(release, secret=False)
