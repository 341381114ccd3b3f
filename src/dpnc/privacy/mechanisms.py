"""The only places where privacy noise is added to data-dependent values.

Each mechanism returns the noisy value *and* the :class:`~dpnc.privacy.releases.Release` that
describes it, marked not secret when the noise came from a seeded test source. Callers pass the
release to :meth:`Accountant.record <dpnc.privacy.accountant.Accountant.record>`.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from dpnc.privacy.interpret import describe
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import (
    DiscreteGaussian,
    ExponentialMechanism,
    Gaussian,
    Release,
    Sampled,
    TreeAggregated,
)


def gaussian_mechanism(
    value: torch.Tensor | float,
    release: Release,
    noise: NoiseSource,
    *,
    scale: torch.Tensor | None = None,
) -> tuple[torch.Tensor | float, Release]:
    """``value + N(0, σ² I)`` with σ of the release's Gaussian; the release describes the query.

    ``release`` is a :class:`~dpnc.privacy.releases.Gaussian`, or one wrapped by sampling
    (``Sampled(Poisson(q), Gaussian(Δ, σ))`` …): the noise is that Gaussian's, the privacy the whole
    release's. It is returned marked not secret when the noise source is seeded. A tree release is
    refused: its noise is drawn per node by :class:`~dpnc.privacy.tree.TreeMechanism`.

    A float in gives a float out; a tensor in gives a new tensor of the same dtype and device.
    ``scale`` (broadcastable to ``value``) serves a batch of independent runs that differ only by a
    factor on both their sensitivity and their noise (e.g. a grid over the clipping threshold C):
    run k gets noise std ``scale[k]·σ`` and its privacy is exactly that of ``release``.
    """
    part = release
    while isinstance(part, Sampled):
        part = part.mechanism
    if not isinstance(part, Gaussian):
        hint = "; use privacy.tree.TreeMechanism" if isinstance(part, TreeAggregated) else ""
        raise TypeError(
            f"release must describe a Gaussian mechanism (possibly sampled); got "
            f"{describe(release)}{hint}"
        )
    sigma = part.sigma
    release = dataclasses.replace(
        release, secret=release.secret and noise.secret
    )  # seeded noise or batches
    if isinstance(value, torch.Tensor):
        z = noise.gaussian(value.shape, sigma, dtype=value.dtype, device=value.device)
        if scale is not None:
            if not bool(torch.all(torch.isfinite(scale) & (scale > 0))):
                raise ValueError("scale must be finite and > 0")
            z = z * scale
        return value + z, release
    return float(value) + noise.gaussian_scalar(sigma), release


def discrete_gaussian_mechanism(
    value: float, *, sensitivity: float, sigma: float, noise: NoiseSource, resolution: int = 1000
) -> tuple[float, DiscreteGaussian]:
    """A real scalar released with exact discrete Gaussian noise on a grid.

    The value is rounded to the grid g = Δ/``resolution``, so its integer sensitivity becomes
    k = ``resolution`` + 1 (rounding can move two neighbours apart by one more grid step), and
    g·(round(value/g) + Y), Y ~ N_ℤ(0, (σ/g)²), is released: k²/(2(σ/g)²)-zCDP, i.e. the
    continuous mechanism's cost times ((resolution + 1)/resolution)².
    """
    release = discrete_gaussian_release(
        sensitivity, sigma, resolution=resolution, secret=noise.secret
    )
    if not math.isfinite(value):
        raise ValueError(f"value must be finite; got {value!r}")
    g = sensitivity / resolution
    return g * (round(value / g) + noise.discrete_gaussian(release.sigma)), release


def discrete_gaussian_release(
    sensitivity: float, sigma: float, *, resolution: int = 1000, secret: bool = True
) -> DiscreteGaussian:
    """The release :func:`discrete_gaussian_mechanism` makes for a real query of sensitivity Δ and
    noise σ: integer sensitivity ``resolution`` + 1 on the grid g = Δ/``resolution``, noise σ/g grid
    steps."""
    if not (isinstance(resolution, int) and resolution >= 1):
        raise ValueError(f"resolution must be an integer >= 1; got {resolution!r}")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be a finite number > 0; got {sensitivity!r}")
    g = sensitivity / resolution
    return DiscreteGaussian(sensitivity=resolution + 1, sigma=sigma / g, secret=secret)


def exponential_mechanism(
    utilities: torch.Tensor, *, sensitivity: float, epsilon: float, noise: NoiseSource
) -> tuple[int, ExponentialMechanism]:
    """Index i with probability ∝ exp(ε·u_i/(2Δ)) for utilities u of sensitivity Δ: ε-DP
    (McSherry–Talwar).

    The release is accounted as ε-bounded-range (ρ = ε²/8 zCDP, see :mod:`dpnc.privacy.interpret`).
    """
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be a finite number > 0; got {sensitivity!r}")
    release = ExponentialMechanism(epsilon=epsilon, secret=noise.secret)
    utilities = torch.as_tensor(utilities, dtype=torch.float64)
    return noise.categorical(epsilon * utilities / (2 * sensitivity)), release
