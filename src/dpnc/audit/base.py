"""What every audited mechanism provides: its claim, the adversary's scores, its canary's effect.

:class:`Mechanism` is the contract; the statistics of released values that mechanisms share
(:func:`poisson_llr`, :func:`release_statistics`) live here too.
See docs/audit.md ("What is run", "The statistics")."""

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
BROKEN = ("sigma", "public-batches", "realised-batch", "other-batch", "train-batchnorm")
SIGMA_FACTOR = 1.5  # "sigma" (default): the noise std divided by this, the claim unchanged


class Mechanism(ABC):
    """One auditable mechanism: its claim, and the adversary's score of many runs on D and on D′.

    A mechanism runs dpnc's real code path on a dataset D that holds a canary and on its neighbour
    D′ (the canary replaced by its mirror image under replace-one, removed under add/remove), with
    the secret :class:`~dpnc.privacy.noise.NoiseSource`. The adversary knows all public randomness
    and every other example, sees every release, and scores each run by ``statistics`` (name → what
    it computes, each aimed at a known hole). The claim is the ledger's privacy profile ε(δ) for one
    run of the *correct* configuration; ``variants`` lists the broken variants (:data:`BROKEN`) that
    apply. Canary design, statistics and variants: docs/audit.md.

    Subclasses set the class attributes and implement :meth:`claim_accountant`, :meth:`scores` and
    :meth:`canary_effect`.

    Args:
        epsilon: the target ε the mechanism is calibrated for (its claim is then read from its
            ledger).
        delta: the δ of the claim and of the ε lower bound.
        seed: the public seed (directions, the public generator, a seeded sampler); the noise is
            secret.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    canary: ClassVar[str]
    statistics: ClassVar[dict[str, str]]
    relation: ClassVar[str]
    subsampled: ClassVar[bool] = False
    variants: ClassVar[tuple[str, ...]] = ("sigma",)
    default_epsilon: ClassVar[float] = 1.0

    def __init__(
        self,
        *,
        epsilon: float | None = None,
        delta: float = 1e-5,
        seed: int = 0,
        sigma_factor: float = SIGMA_FACTOR,
    ) -> None:
        epsilon = self.default_epsilon if epsilon is None else epsilon
        if not (
            isinstance(sigma_factor, (int, float))
            and math.isfinite(sigma_factor)
            and sigma_factor > 0
        ):
            raise ValueError(f"sigma_factor must be a finite number > 0; got {sigma_factor!r}")
        self.sigma_factor = float(sigma_factor)
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
        if broken not in self.variants:
            raise ValueError(
                f"broken={broken!r} does not apply to {self.name!r}; its variants are "
                f"{', '.join(self.variants)}"
            )

    def for_variant(self, broken: str | None) -> Mechanism:
        """The configuration audited for ``broken`` (self by default; a mechanism may pick, for a
        variant, the public configuration where that hole shows most, e.g. a small q where
        amplification is lost). The claim is always that configuration's correct mechanism's."""
        return self

    def noise_factor(self, broken: str | None) -> float:
        """What the noise std is divided by: ``sigma_factor`` for ``broken='sigma'``, else 1."""
        return self.sigma_factor if broken == "sigma" else 1.0

    @abstractmethod
    def claim_accountant(self) -> Accountant:
        """The ledger of one run of the correct configuration (what the library claims for it)."""

    def claim(self) -> PrivacyReport:
        """The ledger's report for the correct configuration, at ``delta``."""
        return self.claim_accountant().report(self.delta)

    def claim_profile(self, deltas) -> dict[float, float]:
        """The ledger's tightest ε at each δ of ``deltas`` and at ``delta`` (the correct
        configuration)."""
        if "_claim_accountant" not in self.__dict__:
            self._claim_accountant = self.claim_accountant()
        return {
            float(d): self._claim_accountant.report(float(d)).epsilon
            for d in sorted({self.delta, *deltas})
        }

    @abstractmethod
    def scores(
        self, runs: int, broken: str | None = None, *, progress: bool = False
    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Each statistic's scores (name → (``runs`` runs on D, canary in; ``runs`` runs on D′,
        out))."""

    @abstractmethod
    def canary_effect(self) -> dict:
        """How far the canary moves the releases, from noiseless replays of D and D′, beside the
        ledger.

        ``shift``: the largest change of one release (L2 norm); ``sensitivity``: the largest
        sensitivity the ledger recorded. For unsampled Gaussian mechanisms also ``mu`` = ‖all
        shifts‖/σ, the canary's exact Gaussian-DP parameter, and ``claimed_mu``, the ledger's: equal
        means the canary's privacy loss is exactly the claimed one (the gap between the claim and
        the lower bound is then only statistics)."""

    def parameters(self) -> dict:
        """The public settings of the audited configuration (for the report)."""
        return {
            "epsilon_target": self.epsilon,
            "delta": self.delta,
            "seed": self.seed,
            "sigma_factor": self.sigma_factor,
        }


def ledger_sensitivity(accountant: Accountant) -> float:
    """The largest sensitivity among the ledger's releases."""
    return max(innermost(entry.release).sensitivity for entry in accountant.ledger)


def ledger_mu(accountant: Accountant) -> float | None:
    """μ with the ledger's releases μ-GDP when all are unsampled Gaussians (trees count their node
    releases)."""
    total = 0.0
    for entry in accountant.ledger:
        release = entry.release
        if isinstance(release, TreeAggregated) and type(release.mechanism) is Gaussian:
            node = release.mechanism
            total += (
                entry.composed_count
                * leaf_participation(release.leaves)
                * (node.sensitivity / node.sigma) ** 2
            )
        elif type(release) is Gaussian:
            total += entry.composed_count * (release.sensitivity / release.sigma) ** 2
        else:
            return None
    return math.sqrt(total)


def replay_inclusions(n: int, B: int, T: int, seed: int) -> torch.Tensor:
    """(T, n) 0/1: which examples the seeded sampler's T batches hold, replayed as the adversary
    would."""
    sampler = PoissonSampler.for_testing(n, B, seed=seed)
    included = torch.zeros(T, n, dtype=torch.float64)
    for t in range(T):
        included[t, sampler.sample()] = 1.0
    return included


def poisson_llr(y, q: float, multiplier: float, known=None):
    """The log-likelihood ratio of runs whose releases, in units of the sensitivity, are y_t (...,
    T, runs).

    D: y_t ~ N(1, m²) with probability q (the canary sampled), else N(0, m²); D′: y_t ~ N(0, m²).
    Per step log(1 − q + q·exp((y_t − ½)/m²)), summed over t. With ``known`` (T,) 0/1 inclusions
    (public batches), the steps without the canary carry no information and the others are plain
    Gaussians: Σ_t known_t·(y_t − ½)/m²."""
    lib = torch if isinstance(y, torch.Tensor) else np
    if known is None:
        per_step = lib.logaddexp(
            lib.full_like(y, math.log1p(-q)), math.log(q) + (y - 0.5) / multiplier**2
        )
    else:
        per_step = known.reshape(-1, *([1] * (y.ndim - 1))) * (y - 0.5) / multiplier**2
    return per_step.sum(0)


def chunks(total: int, size: int) -> list[int]:
    """Sizes of consecutive chunks of at most ``size`` that add up to ``total``."""
    return [min(size, total - start) for start in range(0, total, size)]


def release_statistics(
    y: torch.Tensor, multiplier: float, *, q: float | None = None, known: torch.Tensor | None = None
) -> dict[str, np.ndarray]:
    """The statistics of runs whose releases, projected on the canary's sign in units of Δ, are y
    (T, runs).

    Full batch (``q`` None; a release is N(±½, m²) under replace-one, or N(1, m²) vs N(0, m²)):
    ``llr`` Σ_t y_t, the log-likelihood ratio up to scale and the Neyman–Pearson test for *every* σ
    (so a too-small σ needs no other statistic); ``max`` max_t |y_t|, the largest release (a release
    scaled up in some steps, e.g. divided by a small realised batch). Poisson (``q``): ``llr`` the
    exact LLR at the claimed m, ``llr-small-sigma`` the LLR at m/2 (what a too-small σ makes the
    best test: its per-step term switches on at a sharper threshold), ``sum`` Σ_t y_t (the LLR if
    the canary entered *every* step: lost amplification, e.g. a closure that evaluates a fixed
    batch), ``max`` as above, and with ``known`` (T,) 0/1 the inclusions replayed from the public
    seed, ``replayed`` Σ_t known_t·(y_t − ½) (public batches; uninformative when they are secret).
    """
    y = y.double()
    stats = {"llr": poisson_llr(y, q, multiplier) if q is not None else y.sum(0)}
    if q is not None:
        stats["llr-small-sigma"] = poisson_llr(y, q, multiplier / 2)
        stats["sum"] = y.sum(0)
    stats["max"] = y.abs().amax(0)
    if known is not None:
        stats["replayed"] = poisson_llr(y, q, multiplier, known.double())
    return {
        k: v.numpy() if isinstance(v, torch.Tensor) else np.asarray(v) for k, v in stats.items()
    }


STATISTICS_FULL_BATCH = {
    "llr": "Σ_t y_t, y_t the release along the canary's sign in units of Δ: the log-likelihood ratio (up to "
    "scale), the most powerful test at every σ",
    "max": "max_t |y_t|: the largest release (a release scaled up in some steps)",
}
STATISTICS_POISSON = {
    "llr": "Σ_t log(1 − q + q·exp((y_t − ½)/m²)): the exact log-likelihood ratio at the claimed m = σ/Δ",
    "llr-small-sigma": "the same at m/2: the best test when σ is too small",
    "sum": "Σ_t y_t: the log-likelihood ratio if the canary entered every step (lost amplification: a fixed "
    "batch, batch statistics)",
    "max": "max_t |y_t|: the largest release (a mean divided by a small realised batch, batch statistics)",
    "replayed": "Σ_(t: replay of the public seed's sampler includes the canary) (y_t − ½)/m²: public batches",
}


def merge_scores(parts: list[dict[str, tuple]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Concatenate chunks of {statistic: (in, out)} scores."""
    return {
        k: tuple(np.concatenate([np.asarray(p[k][i]) for p in parts]) for i in (0, 1))
        for k in parts[0]
    }
