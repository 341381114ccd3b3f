"""What every audited mechanism provides: its claim, the adversary's scores, and how hard its canary hits.

A mechanism runs dpnc's real code path many times on a dataset D that holds a canary and on its neighbour D′
(the canary replaced by its mirror image under replace-one, removed under add/remove), with the secret
:class:`~dpnc.privacy.noise.NoiseSource`. The adversary knows all public randomness (direction seeds, the
public generator of the single-pass oracles, the batches of a seeded sampler) and every other example; it
sees every released value and scores each run with the log-likelihood ratio of "in" against "out" (or a
monotone function of it).

Canary design: every other example has loss 0, and the canary's loss is linear with a huge slope
(:data:`BIG`), so each of its finite differences is clipped to exactly the bound the sensitivity assumes,
with a sign the adversary computes from the public randomness. The released values are then "canary term
+ noise", the canary moves each release it enters by the recorded sensitivity (:meth:`Mechanism.canary_effect`
measures it), and for the unsampled Gaussian mechanisms its privacy loss is exactly the claimed one.

The claimed ε is what the library's own ledger says for the *correct* configuration (one run of it, the
tightest of its RDP, PLD and zCDP answers). Broken variants the audit must catch: ``"sigma"`` runs with a
tenth of the noise while the claim stays the correct one; ``"public-batches"`` (subsampled mechanisms only)
draws the batches with ``PoissonSampler.for_testing(n, B, seed=s)`` and the adversary, who knows s, replays
the sampler to learn which steps used the canary (and places the canary where the replay includes it most).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np
import torch

from dpnc.privacy.accountant import Accountant, PrivacyReport
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import Gaussian, TreeAggregated, innermost
from dpnc.privacy.tree import leaf_participation
from dpnc.sampling import PoissonSampler

BIG = 1e6  # the canary's slope: its differences exceed every clipping bound used here
BROKEN = ("sigma", "public-batches")
SIGMA_FACTOR = 10  # "sigma": the noise std divided by this, the claim unchanged


class Mechanism(ABC):
    """One auditable mechanism: its claim, and the adversary's score of many runs on D and on D′.

    Subclasses set the class attributes and implement :meth:`claim_accountant`, :meth:`scores` and
    :meth:`canary_effect`.

    Args:
        epsilon: the target ε the mechanism is calibrated for (its claim is then read from its ledger).
        delta: the δ of the claim and of the ε lower bound.
        seed: the public seed (directions, the public generator, a seeded sampler); the noise is secret.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    canary: ClassVar[str]
    statistic: ClassVar[str]
    relation: ClassVar[str]
    subsampled: ClassVar[bool] = False

    def __init__(self, *, epsilon: float = 1.0, delta: float = 1e-5, seed: int = 0) -> None:
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
            raise ValueError(f"epsilon must be a finite number > 0; got {epsilon!r}")
        if not (isinstance(delta, (int, float)) and 0 < delta < 1):
            raise ValueError(f"delta must be in (0, 1); got {delta!r}")
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**62:
            raise ValueError(f"seed must be an integer in [0, 2**62); got {seed!r}")
        self.epsilon, self.delta, self.seed = float(epsilon), float(delta), seed
        self.noise = NoiseSource()  # secret: one stream for all runs of this audit

    def check_broken(self, broken: str | None) -> None:
        """Refuse a variant that does not apply, before any run."""
        if broken is None:
            return
        if broken not in BROKEN:
            raise ValueError(f"broken must be one of {BROKEN} or None; got {broken!r}")
        if broken == "public-batches" and not self.subsampled:
            raise ValueError(f"broken='public-batches' applies to subsampled mechanisms only (dpzero-poisson, "
                             f"dpzero-optimizer); {self.name!r} samples no batches")

    @abstractmethod
    def claim_accountant(self) -> Accountant:
        """The ledger of one run of the correct configuration (what the library claims for it)."""

    def claim(self) -> PrivacyReport:
        """The ledger's report for the correct configuration, at ``delta``."""
        return self.claim_accountant().report(self.delta)

    @abstractmethod
    def scores(self, runs: int, broken: str | None = None, *, progress: bool = False
               ) -> tuple[np.ndarray, np.ndarray]:
        """The adversary's score of ``runs`` runs on D (canary in) and of ``runs`` runs on D′ (out)."""

    @abstractmethod
    def canary_effect(self) -> dict:
        """How far the canary moves the releases, from noiseless replays of D and D′, beside the ledger.

        ``shift``: the largest change of one release (L2 norm); ``sensitivity``: the largest sensitivity the
        ledger recorded. For unsampled Gaussian mechanisms also ``mu`` = ‖all shifts‖/σ, the canary's exact
        Gaussian-DP parameter, and ``claimed_mu``, the ledger's: equal means the canary's privacy loss is
        exactly the claimed one (the gap between the claim and the lower bound is then only statistics).
        """

    def parameters(self) -> dict:
        """The public settings of the audited configuration (for the report)."""
        return {"epsilon_target": self.epsilon, "delta": self.delta, "seed": self.seed}


def ledger_sensitivity(accountant: Accountant) -> float:
    """The largest sensitivity among the ledger's releases."""
    return max(innermost(entry.release).sensitivity for entry in accountant.ledger)


def ledger_mu(accountant: Accountant) -> float | None:
    """μ with the ledger's releases μ-GDP when all are unsampled Gaussians (trees count their node releases)."""
    total = 0.0
    for entry in accountant.ledger:
        release = entry.release
        if isinstance(release, TreeAggregated) and type(release.mechanism) is Gaussian:
            node = release.mechanism
            total += entry.composed_count * leaf_participation(release.leaves) * (node.sensitivity / node.sigma) ** 2
        elif type(release) is Gaussian:
            total += entry.composed_count * (release.sensitivity / release.sigma) ** 2
        else:
            return None
    return math.sqrt(total)


def replay_inclusions(n: int, B: int, T: int, seed: int) -> torch.Tensor:
    """(T, n) 0/1: which examples the seeded sampler's T batches hold, replayed as the adversary would."""
    sampler = PoissonSampler.for_testing(n, B, seed=seed)
    included = torch.zeros(T, n, dtype=torch.float64)
    for t in range(T):
        included[t, sampler.sample()] = 1.0
    return included


def poisson_llr(y, q: float, multiplier: float, known=None):
    """The log-likelihood ratio of runs whose releases, in units of the sensitivity, are y_t (..., T, runs).

    D: y_t ~ N(1, m²) with probability q (the canary sampled), else N(0, m²); D′: y_t ~ N(0, m²). Per step
    log(1 − q + q·exp((y_t − ½)/m²)), summed over t. With ``known`` (T,) 0/1 inclusions (public batches), the
    steps without the canary carry no information and the others are plain Gaussians: Σ_t known_t·(y_t − ½)/m².
    """
    lib = torch if isinstance(y, torch.Tensor) else np
    if known is None:
        per_step = lib.logaddexp(lib.full_like(y, math.log1p(-q)), math.log(q) + (y - 0.5) / multiplier**2)
    else:
        per_step = known.reshape(-1, *([1] * (y.ndim - 1))) * (y - 0.5) / multiplier**2
    return per_step.sum(0)


def chunks(total: int, size: int) -> list[int]:
    """Sizes of consecutive chunks of at most ``size`` that add up to ``total``."""
    return [min(size, total - start) for start in range(0, total, size)]
