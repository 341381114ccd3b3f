"""DP-SGD on the functional tier: Poisson-subsampled clipped gradients, noise, a projected step.

The practitioner's baseline (Abadi et al. 2016; Bassily, Smith, Thakurta 2014) on an
:class:`~dpnc.problems.base.Objective`, built from dpnc's pieces only (secret sampler, one
clipped sum, one release step, the accountant): :class:`DPSGD`."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from dpnc.algorithms.base import Algorithm, Cost, Run, Setting, Stats, approximate
from dpnc.algorithms.dpzero.configs import DPGD
from dpnc.checks import check_integer, check_positive
from dpnc.estimators import objective_clipped_sum
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.budget import Budget
from dpnc.privacy.calibrate import noise_multiplier as calibrate
from dpnc.privacy.noise import NoiseSource
from dpnc.sampling import FullBatch, PoissonSampler
from dpnc.space import FlatSpace

__all__ = ["DPSGD"]


@dataclass(frozen=True)
class DPSGD(Algorithm):
    """DP-SGD: T steps of Poisson-subsampled, clipped, noised gradient descent.

        for t = 0..T−1:
            S_t ~ Poisson(q)                          each example joins independently, q = B/n
            (secret) g_t = (1/B) Σ_{i∈S_t} clip_C(∇f(x_t; z_i)) + N(0, σ²I),  σ =
            noise_multiplier·C/B (add/remove) x_{t+1} = Π_region(x_t − η g_t)           projection
            onto the objective's region, if it has one

    Implements: Abadi et al. 2016, Algorithm 1, with Poisson sampling (the sampling its moments
    accountant analyses) and the fixed denominator B; the last iterate is the output. The batch is
    drawn by a :class:`~dpnc.sampling.PoissonSampler` from **secret** randomness (never a public
    seed: the amplified ε holds only if nobody can replay the batches); the clipped sum is formed by
    :func:`dpnc.estimators.objective_clipped_sum` and released by
    :func:`dpnc.privacy.release.release_sum` (one ``Sampled(Poisson(q), Gaussian)`` release per
    step); the accountant, never this class, answers ε. Each step *is* DP-GD's
    (:meth:`dpnc.algorithms.dpzero.DPGD.step`, on the sampler's batch); this class adds the secret
    sampler, the projection and a stated-practice :meth:`from_theory`. With ``batch_size = n`` (q =
    1) the sampler is :class:`~dpnc.sampling.FullBatch`: DP-GD with the projection, under any
    relation.

    Symbols: eta = η, C, B = batch_size (expected batch size), steps = T, noise_multiplier = σ/Δ
    with Δ = C/B, the add/remove sensitivity of the mean (2C/B under replace-one: the accountant's
    relation decides; :meth:`from_theory` calibrates under add/remove, the relation of Poisson
    amplification in the literature, so run it with an ``Accountant("add/remove")`` to spend exactly
    its target).

    Args:
        eta: step size η > 0.
        C: clipping threshold > 0 (finite when noise_multiplier > 0).
        noise_multiplier: σ/Δ ≥ 0 (0: not private, recorded as such).
        steps: T ≥ 1.
        batch_size: the expected batch size B ≥ 1 (q = B/n); B = n means the full batch.
        project: keep iterates in the objective's region (``constants.region``) where its constants
            hold.

    References:
        Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar, Zhang, "Deep learning with differential
        privacy", CCS 2016 (arXiv:1607.00133). Bassily, Smith, Thakurta, "Private empirical risk
        minimization: efficient algorithms and tight error bounds", FOCS 2014.
    """

    name: ClassVar[str] = "dp-sgd"
    family: ClassVar[str] = "baseline"

    eta: float
    C: float
    noise_multiplier: float
    steps: int
    batch_size: int
    project: bool = True

    def __post_init__(self) -> None:
        check_positive(eta=self.eta)
        check_positive(allow_inf=self.noise_multiplier == 0, C=self.C)
        check_positive(allow_zero=True, noise_multiplier=self.noise_multiplier)
        check_integer(steps=self.steps, batch_size=self.batch_size)
        if not isinstance(self.project, bool):
            raise ValueError(f"project must be a bool; got {self.project!r}")

    @classmethod
    def from_theory(
        cls,
        setting: Setting,
        budget: Budget,
        *,
        batch_size: int | None = None,
        epochs: float = 5.0,
        eta: float | None = None,
        **options,
    ) -> DPSGD:
        """The usual practice, stated: C = L0 (clipping never binds where the constants hold), B =
        √n (or ``batch_size``), T = ⌈epochs·n/B⌉ steps, η = 1/L1 if the objective is smooth else
        1/(L0·√T), and the smallest noise multiplier the accountant (RDP, add/remove) finds (ε,
        δ)-DP for T Poisson steps of rate B/n. DP-SGD has no utility theorem in these papers; this
        is the documented default, a tuner's starting point."""
        budget = approximate(budget, "DP-SGD")
        constants, n, epsilon, delta = setting.constants, setting.n, budget.epsilon, budget.delta
        B = min(n, batch_size if batch_size is not None else max(1, round(math.sqrt(n))))
        T = max(1, math.ceil(epochs * n / B))
        q = B / n
        multiplier = calibrate(epsilon, delta, q, T)
        L0, L1 = constants.L0, constants.L1
        if eta is None:
            eta = 1 / L1 if L1 else 1 / (L0 * math.sqrt(T))
        return cls(
            eta=eta, C=float(L0), noise_multiplier=multiplier, steps=T, batch_size=B, **options
        )

    @classmethod
    def practical(cls, setting: Setting, budget: Budget, **options) -> DPSGD:
        """DP-SGD has no theorem here: its practical settings are :meth:`from_theory`'s stated
        practice."""
        return cls.from_theory(setting, budget, **options)

    def claim(self) -> str:
        return (
            f"(ε, δ) from the accountant for T = {self.steps} Poisson-subsampled Gaussian steps of expected "
            f"batch B = {self.batch_size}, σ/Δ = {self.noise_multiplier:.4g}"
            if self.noise_multiplier > 0
            else "not private (noise_multiplier = 0: exact gradients are released)"
        )

    def cost(self, setting: Setting) -> Cost:
        """T steps of B expected per-example gradients (B = n: the full batch)."""
        return Cost(gradients=self.steps * min(self.batch_size, setting.n), samples=setting.n)

    def non_private(self) -> DPSGD:
        """The σ = 0, C = ∞ twin."""
        return dataclasses.replace(self, noise_multiplier=0.0, C=math.inf)

    def sampler(self, n: int):
        """A fresh secret sampler for n examples: Poisson of rate B/n, or the full batch when B =
        n."""
        if self.batch_size > n:
            raise ValueError(f"batch_size must be <= n = {n}; got {self.batch_size}")
        return FullBatch(n) if self.batch_size == n else PoissonSampler(n, self.batch_size)

    def run(
        self,
        problem,
        x0: torch.Tensor,
        *,
        noise: NoiseSource,
        accountant: Accountant,
        generator: torch.Generator,
        sampler=None,
        callback: Callable[[int, torch.Tensor], None] | None = None,
    ) -> Run:
        """T steps from x0 (d,). ``sampler`` defaults to :meth:`sampler` (secret); a seeded one
        (``PoissonSampler.for_testing``) marks every release not private. No public randomness
        (``generator`` unused). ``callback(t, x_{t+1})`` after each step."""
        self.check_problem(problem)
        sampler = sampler if sampler is not None else self.sampler(problem.n)
        sampler.check_relation(accountant.relation)
        region = problem.constants.region if self.project else None
        x = torch.as_tensor(x0, dtype=torch.float64)
        if x.shape != (problem.dim,):
            raise ValueError(f"x0 must have shape ({problem.dim},); got {tuple(x.shape)}")
        space = FlatSpace(x)
        space.project_(region)
        dpgd = DPGD(
            eta=self.eta, C=self.C, noise_multiplier=self.noise_multiplier
        )  # the step, on S_t
        clipped_sum = functools.partial(
            objective_clipped_sum, problem
        )  # Σ_{i∈S_t} clip_C(∇f(x_t; z_i))
        stats = Stats()
        for t in range(self.steps):
            log = dpgd.step(
                space, clipped_sum, sampler=sampler, noise=noise, accountant=accountant
            )  # S_t secret
            space.project_(region)  # x_{t+1} = Π(x_t − η g_t)
            stats.steps += 1
            stats.gradients += log.examples
            stats.clipped += int(round(float(log.clipped_fraction) * log.examples))
            if callback is not None:
                callback(t, space.x)
        x = space.x
        private = self.noise_multiplier > 0
        notes = (
            []
            if private
            else ["dp-sgd with noise_multiplier = 0 releases exact gradients: not private"]
        )
        return Run(self, x, x, accountant, stats, private=private, notes=notes)
