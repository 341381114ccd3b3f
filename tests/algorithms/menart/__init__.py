"""What the tests of Menart et al.'s algorithms share: noise sources that add nothing or keep
their draws, a run of each algorithm from its objective's constants, start points, the KL-Spider
schedule of an objective, and the median excess and its slope over a grid of n√ρ."""

from __future__ import annotations

import functools
import math
import statistics

import numpy as np
import torch

from dpnc.algorithms import menart as kl
from dpnc.algorithms.base import Setting
from dpnc.privacy import NoiseSource
from dpnc.privacy.accountant import Accountant

D = 10


class ZeroNoise:
    """A noise source that adds nothing (Menart et al. §5.2's "noise disabled" hook); marks results
    not private."""

    secret = False

    def gaussian(self, shape, sigma, *, dtype=torch.float64, device="cpu"):
        return torch.zeros(shape, dtype=dtype, device=device)

    def gaussian_scalar(self, sigma):
        return 0.0


class RecordingNoise:
    """A seeded test source that keeps every vector it draws (for the SPIDER error identity)."""

    def __init__(self, seed: int) -> None:
        self.source = NoiseSource.for_testing(seed)
        self.secret = False
        self.draws: list[torch.Tensor] = []

    def gaussian(self, shape, sigma, **kwargs):
        z = self.source.gaussian(shape, sigma, **kwargs)
        self.draws.append(z.clone())
        return z

    def gaussian_scalar(self, sigma):
        return self.source.gaussian_scalar(sigma)


def run_config(
    config: type, f, *, w0=None, noise=None, accountant=None, relation="replace-one", **fields
):
    """``config.of(Setting.of(f), **fields).run(f, w0, noise=..., accountant=...)``: the objective's
    constants, a secret noise source and the accountant of ``relation`` unless given (``run`` itself
    requires both)."""
    noise = NoiseSource() if noise is None else noise
    accountant = Accountant(relation) if accountant is None else accountant
    return config.of(Setting.of(f), **fields).run(
        f, w0, noise=noise, accountant=accountant, generator=torch.Generator()
    )


spider = functools.partial(run_config, kl.KLSpider)
proximal = functools.partial(run_config, kl.ProximalPoint)
adaptive = functools.partial(run_config, kl.AdaptiveGD)


def start(objective, fraction: float = 0.9) -> torch.Tensor:
    """A start point at ``fraction`` of the region's radius from w*."""
    direction = torch.ones(objective.dim, dtype=torch.float64) / math.sqrt(objective.dim)
    return objective.w_star + fraction * objective.constants.region.radius * direction


def schedule_for(objective, rho=1.0, beta=0.05, paper=False):
    return kl.spider_schedule(
        n=objective.n,
        d=objective.dim,
        rho=rho,
        beta=beta,
        gamma=objective.constants.gamma,
        kappa=objective.constants.kappa,
        L0=objective.constants.L0,
        L1=objective.constants.L1,
        F0=(objective.constants.gamma * objective.constants.L0) ** objective.constants.kappa,
        paper=paper,
    )


def median_excess(algorithm, make, nsrs, seeds=5, **kwargs):
    medians = []
    for nsr in nsrs:
        f = make(int(nsr))
        excess = [
            float(
                f.value(
                    algorithm(
                        f, rho=1.0, w0=start(f), noise=NoiseSource.for_testing(s), **kwargs
                    ).output
                )
            )
            - f.constants.F_star
            for s in range(seeds)
        ]
        medians.append(statistics.median(excess))
    return medians


def rate_slope(nsrs, medians, d=D):
    return float(np.polyfit(np.log(np.asarray(nsrs) / math.sqrt(d)), np.log(medians), 1)[0])
