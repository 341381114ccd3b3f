"""DPZero, DPGD-0th, DP-GD and MeZO: frozen configs on the algorithm contract (family "dpzero").

Each step is written once against a :class:`~dpnc.space.ParameterSpace` and a closure returning
per-example losses, so the same code serves a flat vector (float64, optionally a grid of runs
sharing their public directions: x0 (K, d), ``eta``/``C`` (K,)) and a model's parameters
(``dpnc.tier.zeroth_order``). Spec: docs/papers.md, DPZero; see docs/dpzero.md."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from dpnc.algorithms.base import Setting, approximate
from dpnc.algorithms.dpzero.family import (
    Number,
    StepLog,
    ZerothOrderFamily,
    finite_pairs,
    practical_parameters,
    practical_step,
    theory_inputs,
)
from dpnc.algorithms.dpzero.theory import calibrate_noise, dpgd0th_from_theory, dpzero_from_theory
from dpnc.checks import check_integer, check_per_run, check_positive
from dpnc.distributed import LOCAL, Group, Local
from dpnc.estimators import objective_clipped_sum, two_point_on_batch
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.budget import Budget
from dpnc.privacy.clipping import clipped_sum, per_run
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.release import mean_release, release_sum
from dpnc.privacy.releases import NonPrivate
from dpnc.sampling import BatchClosure, Sampler
from dpnc.space import FlatSpace, ParameterSpace

__all__ = ["DPGD", "DPGD0th", "DPZero", "MeZO"]


@dataclass(frozen=True)
class DPZero(ZerothOrderFamily):
    """DPZero (Algorithm 2): one clipped scalar per example, one scalar of noise per step.

    for t = 0..T−1:
        u_t ~ Unif(√d·S^{d−1}) (or N(0, I) — ``direction``)
        a_i = (f(x_t + λu_t; ξ_i) − f(x_t − λu_t; ξ_i)) / (2λ)        for i in the batch
        c_t = (1/B) Σ_i clip_C(a_i) + z_t,   z_t ~ N(0, σ²), σ = noise_multiplier·Δ
        x_{t+1} = x_t − α·c_t·u_t

    Implements: Zhang et al. 2024, Algorithm 2 (full batch), and its minibatch form (DPZero §2.5)
    with the sampler's own privacy event. ``discrete=True`` draws z_t from the exact discrete
    Gaussian (full batch only; the released scalar then lies on a grid of Δ/1000).

    Correction: the noise comes from the secret ``NoiseSource``, never from the direction seed as in
    the published code (DPZero §7.2); ``paper=True`` only restores the printed output rule x_τ.

    Args:
        eta: step size α ≥ 0 (or one per run, shape (K,)).
        lam: smoothing λ > 0.
        C: clipping threshold > 0, may be inf without noise (or one per run).
        noise_multiplier: σ/Δ ≥ 0 (0 releases c_t without noise: not private).
        steps: T ≥ 1, the number of steps ``run`` takes (the optimizer tier steps one at a time).
        discrete: use the exact discrete Gaussian for z_t.
        paper: output x_τ, τ ~ Unif{0..T−1}, instead of the last iterate.
        direction: ``"gaussian"`` (the experiments) or ``"sphere"`` (the theory's √d·S^{d−1}).

    Symbols: eta = α (step size), lam = λ (smoothing), C (clipping threshold), steps = T,
    noise_multiplier = σ/Δ where Δ = 2C/B is the replace-one sensitivity of a mean of B clipped
    terms (C/B under add/remove). The output is the last iterate by default (the experiments, DPZero
    §2.8).

    References:
        Zhang, Li, Thekumparampil, Oh, He. "DPZero: Private fine-tuning of language models without
        backpropagation", ICML 2024 (arXiv:2310.09639).
    """

    name: ClassVar[str] = "dpzero"

    eta: Number
    lam: float
    C: Number
    noise_multiplier: float
    steps: int = 1
    discrete: bool = False
    paper: bool = False
    direction: str = "gaussian"

    def __post_init__(self) -> None:
        check_per_run("eta", self.eta, allow_zero=True)  # 0: a warm-up schedule's first step
        check_per_run("lam", self.lam)
        check_per_run("C", self.C, allow_inf=True)
        check_per_run("noise_multiplier", self.noise_multiplier, allow_zero=True)
        if self.noise_multiplier > 0 and not bool(
            torch.all(torch.isfinite(torch.as_tensor(self.C)))
        ):
            raise ValueError("C must be finite when noise_multiplier > 0 (the sensitivity is 2C/B)")
        if not isinstance(self.discrete, bool):
            raise ValueError(f"discrete must be a bool; got {self.discrete!r}")
        self._check_common()

    @classmethod
    def from_theory(
        cls, setting: Setting, budget: Budget, *, r: float, kappa: float | None = None, **options
    ) -> DPZero:
        """Theorem 3 (A3.5) for the effective rank ``r`` or, with the PL condition number κ = ℓ/μ
        (``kappa``, not the KL exponent of the constants), Corollary F.4; see
        :func:`~dpnc.algorithms.dpzero.theory.dpzero_from_theory` (L = constants.L0, ℓ =
        constants.L1, (ε, δ) = the budget). ``options``: other fields (direction …)."""
        p = dpzero_from_theory(**theory_inputs(setting, budget, "DPZero"), r=r, kappa=kappa)
        return cls(
            eta=p.eta, lam=p.lam, C=p.C, noise_multiplier=p.noise_multiplier, steps=p.T, **options
        )

    @classmethod
    def practical(
        cls, setting: Setting, budget: Budget, *, steps: int = 1000, lam: float = 1e-3, **options
    ) -> DPZero:
        """Practical settings (:func:`practical_parameters`, zeroth order; λ = ``lam``): privacy
        exact (σ by the accountant for the T releases), no theorem's utility guarantee (Theorem 3's
        η, C, T are not used)."""
        return cls(
            lam=lam,
            **practical_parameters(setting, budget, steps=steps, zeroth_order=True),
            **options,
        )

    def step(
        self,
        space: ParameterSpace,
        closure: BatchClosure,
        seed: int,
        *,
        sampler: Sampler,
        noise: NoiseSource,
        accountant: Accountant,
        group: Group | Local = LOCAL,
    ) -> StepLog:
        """One step along the public ``seed``; ``group``: the processes whose parts of the batch are
        summed (:data:`~dpnc.distributed.LOCAL`: this one; a :class:`~dpnc.distributed.Group`: rank
        0 draws the batch and the noise and records, and one all_reduce of 5 numbers, rank 0's noise
        added to its part, gives every rank c_t, carrying the next step's batch too). The log is the
        whole batch's."""
        diffs = two_point_on_batch(
            space, closure, seed, self.lam, sampler, group=group
        )  # ℓ_i(x_t ± λu_t)
        try:
            part = clipped_sum(diffs.a, self.C)  # Σ_i clip_C(a_i) over this part
            losses = (
                diffs.loss * diffs.examples if diffs.examples else torch.zeros_like(diffs.loss)
            )  # Σ of the mean
            entry = mean_release(
                float(torch.as_tensor(self.C, dtype=torch.float64).max()),
                self.noise_multiplier,
                sampler=sampler,
                accountant=accountant,
                noise=noise,
                discrete=self.discrete,
            )
            c, clipped, nonfinite, examples, loss = (
                group.release_sum(  # (1/B) Σ_i clip_C(a_i) + z_t, recorded;
                    part.total,
                    part.clipped,
                    part.nonfinite,
                    part.examples,
                    losses,  # the sums over the whole batch
                    release=lambda total: release_sum(
                        total,
                        self.C,
                        sampler=sampler,
                        noise=noise,
                        accountant=accountant,
                        noise_multiplier=self.noise_multiplier,
                        discrete=self.discrete,
                        release=entry,
                    ),
                    denominator=sampler.batch_size,
                    entry=entry,
                )
            )  # the group reads its additivity (discrete: rounds)
        except BaseException:
            space.restore_()  # never leave the parameters perturbed
            raise
        space.update_(seed, -per_run(self.eta, c) * c)  # x_{t+1} = x_t − α c_t u_t
        fraction = clipped.to(c.dtype) / examples
        return StepLog(loss / examples, fraction, c, nonfinite, examples)


@dataclass(frozen=True)
class MeZO(ZerothOrderFamily):
    """MeZO / ZO-SGD (Malladi et al. 2023; DPZero §2.6): c_t = (L(x + λu) − L(x − λu))/(2λ) of the
    batch mean.

    Not private: each step's c_t is recorded as a :class:`~dpnc.privacy.releases.NonPrivate`
    release, so the report says ε = ∞ and "not private". The mean is over the realised batch
    (nothing to protect); an empty batch moves nothing.

    Args:
        eta: step size α ≥ 0 (or one per run); lam: smoothing λ > 0; steps: T ≥ 1 (``run`` only);
        paper: output x_τ instead of the last iterate (MeZO itself prints no other rule);
        direction: ``"gaussian"`` or ``"sphere"``.

    References:
        Malladi et al. "Fine-tuning language models with just forward passes", NeurIPS 2023
        (arXiv:2305.17333).
    """

    name: ClassVar[str] = "mezo"
    closed_form: ClassVar[bool] = False
    noise_multiplier: ClassVar[float] = 0.0

    eta: Number
    lam: float
    steps: int = 1
    paper: bool = False
    direction: str = "gaussian"

    def __post_init__(self) -> None:
        check_per_run("eta", self.eta, allow_zero=True)
        check_per_run("lam", self.lam)
        self._check_common()

    private: ClassVar[bool] = False

    @classmethod
    def from_theory(
        cls, setting: Setting | None = None, budget=None, *, steps: int = 10_000, **options
    ) -> MeZO:
        """MeZO has no theorem in these papers; this is the DPZero paper's MeZO baseline (DPZero
        §2.6): λ = 10⁻³, α = 10⁻⁶ (its best learning rate), T = 10 000 steps (B = 64 is the
        sampler's). Not private: ``setting`` and ``budget`` are not read (None allowed)."""
        return cls(**{"eta": 1e-6, "lam": 1e-3, "steps": steps, **options})

    @classmethod
    def practical(
        cls, setting: Setting, budget=None, *, steps: int = 1000, lam: float = 1e-3, **options
    ) -> MeZO:
        """DPZero's practical step and λ without noise (:func:`practical_parameters`' η, zeroth
        order); the budget is not read (None allowed): MeZO spends no budget and its report says not
        private."""
        c = setting.constants
        if c.L0 is None and c.L1 is None:
            raise ValueError(
                "practical settings need constants.L1 (smooth) or L0 and gap (nonsmooth)"
            )
        if c.L1 is None and setting.gap is None:
            raise ValueError(
                "practical settings need constants.L1 (smooth) or gap ≥ F(x0) − inf F (nonsmooth)"
            )
        check_integer(steps=steps)
        eta = practical_step(c, steps=steps, gap=setting.gap) / (setting.d + 2)
        return cls(**{"eta": eta, "lam": lam, "steps": steps, **options})

    def claim(self) -> str:
        return "not private (MeZO releases its two-point difference without noise)"

    def step(
        self,
        space: ParameterSpace,
        closure: BatchClosure,
        seed: int,
        *,
        sampler: Sampler,
        noise: NoiseSource,
        accountant: Accountant,
        group: Group | Local = LOCAL,
    ) -> StepLog:
        """One step along the public ``seed``; ``group`` as in :meth:`DPZero.step` (one all_reduce
        of 4 numbers, from which every rank forms c_t, and the next step's batch)."""
        diffs = two_point_on_batch(space, closure, seed, self.lam, sampler, group=group)
        # The realised batch's mean (not private, so no fixed denominator); an example whose loss is
        # non-finite at either point counts as a_i = 0 (one bad example must not turn the update
        # into NaN); an empty batch moves nothing.
        try:
            diffs, bad = finite_pairs(diffs)
            plus, minus, examples, nonfinite = group.sum(
                diffs.plus.sum(-1), diffs.minus.sum(-1), diffs.examples, bad
            )

            # c_t is a function of the sums every rank now holds: each forms it (no broadcast); rank
            # 0 records it.
            if group.is_source:
                accountant.record(NonPrivate(secret=bool(sampler.secret)))  # no noise: ε = ∞
            c = (plus / examples - minus / examples) / (2 * self.lam) if examples else plus
        except BaseException:
            space.restore_()
            raise
        space.update_(seed, -per_run(self.eta, c) * c)
        return StepLog(
            (plus / examples + minus / examples) / 2, torch.zeros_like(c), c, nonfinite, examples
        )


@dataclass(frozen=True)
class DPGD0th(ZerothOrderFamily):
    """DPGD-0th (Algorithm 1): the naive combination, vector clipping and d-dimensional noise.

    g_i = a_i·u_t (a d-vector), x_{t+1} = x_t − α((1/B) Σ_i clip_C(g_i) + z_t), z_t ~ N(0, σ² I_d).
    Since ‖g_i‖ = |a_i|·‖u_t‖, clip_C(g_i) = clip_{C/‖u_t‖}(a_i)·u_t: the sum is formed from the
    scalars and released by :func:`~dpnc.privacy.release.release_sum` with bound C. Flat tier only
    (it materialises u_t and the noise). Args as :class:`DPZero` (no ``discrete``)."""

    name: ClassVar[str] = "dpgd-0th"

    eta: Number
    lam: float
    C: Number
    noise_multiplier: float
    steps: int = 1
    paper: bool = False
    direction: str = "gaussian"

    def __post_init__(self) -> None:
        DPZero(self.eta, self.lam, self.C, self.noise_multiplier)  # same hyper-parameter rules
        self._check_common()

    @classmethod
    def from_theory(
        cls,
        setting: Setting,
        budget: Budget,
        *,
        r: float | None = None,
        kappa: float | None = None,
        **options,
    ) -> DPGD0th:
        """Theorem 1 (A3.1), Theorem 2 (effective rank r), Corollaries F.2/F.3 (PL condition number
        κ); see :func:`~dpnc.algorithms.dpzero.theory.dpgd0th_from_theory` (C = Ld: clipping never
        happens)."""
        p = dpgd0th_from_theory(**theory_inputs(setting, budget, "DPGD-0th"), r=r, kappa=kappa)
        return cls(
            eta=p.eta, lam=p.lam, C=p.C, noise_multiplier=p.noise_multiplier, steps=p.T, **options
        )

    @classmethod
    def practical(
        cls, setting: Setting, budget: Budget, *, steps: int = 1000, lam: float = 1e-3, **options
    ) -> DPGD0th:
        """Practical settings as :meth:`DPZero.practical`, but C = L0·√(d + 2): the clipped vector
        is g_i = a_i·u, whose typical norm is √(E‖a_i u‖²) = √(d + 2)·‖∇f_i‖ for Gaussian u (Theorem
        1 takes the worst case, L·d)."""
        p = practical_parameters(setting, budget, steps=steps, zeroth_order=True)
        return cls(lam=lam, **{**p, "C": p["C"] * math.sqrt(setting.d + 2)}, **options)

    def step(
        self,
        space: FlatSpace,
        closure: BatchClosure,
        seed: int,
        *,
        sampler: Sampler,
        noise: NoiseSource,
        accountant: Accountant,
    ) -> StepLog:
        diffs = two_point_on_batch(space, closure, seed, self.lam, sampler)
        u = space.direction(seed)
        s = clipped_sum(
            diffs.a, per_run(self.C, diffs.a) / torch.linalg.vector_norm(u)
        )  # Σ_i clip_{C/‖u‖}(a_i)
        total = s.total.unsqueeze(-1) * u  # Σ_i clip_C(g_i)
        g = release_sum(
            total,
            self.C,
            sampler=sampler,
            noise=noise,
            accountant=accountant,
            noise_multiplier=self.noise_multiplier,
        )  # (1/B) Σ_i clip_C(g_i) + z_t
        space.restore_()
        space.add_(-per_run(self.eta, g) * g)
        return StepLog(diffs.loss, s.fraction, g, s.nonfinite, diffs.examples)


ClippedSum = Callable[
    [torch.Tensor, Number, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]
]


@dataclass(frozen=True)
class DPGD(ZerothOrderFamily):
    """DP-GD (DPZero §2.2): x_{t+1} = x_t − α((1/B) Σ_i clip_C(∇f(x_t; ξ_i)) + z_t), z_t ~ N(0, σ²
    I_d).

    ``step`` takes ``clipped_sum(x, C, batch) -> (Σ_i clip_C(∇f_i), clipped fraction, mean loss)``
    over the batch the sampler drew; ``run`` builds it from the objective
    (:func:`dpnc.estimators.objective_clipped_sum`: its closed form ``clipped_gradient_sum`` where
    it has one, else its per-example ``gradients``). The sum is released by
    :func:`~dpnc.privacy.release.release_sum`: divided by the sampler's fixed B, never by the
    realised batch size (under Poisson sampling that would let one example move the mean by more
    than the recorded C/B).

    Args: eta, C, noise_multiplier, steps, paper as :class:`DPZero` (``direction`` is unused: no
    directions)."""

    name: ClassVar[str] = "dp-gd"
    per_example: ClassVar[str] = "gradients"

    eta: Number
    C: Number
    noise_multiplier: float
    steps: int = 1
    paper: bool = False
    direction: str = "gaussian"

    def __post_init__(self) -> None:
        DPZero(self.eta, 1.0, self.C, self.noise_multiplier)
        self._check_common()

    @classmethod
    def from_theory(cls, setting: Setting, budget: Budget, *, steps: int, **options) -> DPGD:
        """DPZero §2.2 gives DP-GD no theorem of its own: C = L = constants.L0 (then clipping never
        happens, since ‖∇f‖ ≤ L) and the paper's noise for (ε, δ) after ``steps`` full-batch steps
        (Lemma 2.2); the step size is the user's (``eta`` in ``options``, default 1/√steps)."""
        budget = approximate(budget, "DP-GD")
        check_integer(steps=steps)
        L = setting.constants.L0
        check_positive(L0=L)
        multiplier = calibrate_noise("paper", budget.epsilon, budget.delta, steps, setting.n)
        return cls(
            **{
                "eta": 1 / steps**0.5,
                "C": float(L),
                "noise_multiplier": multiplier,
                "steps": steps,
                **options,
            }
        )

    @classmethod
    def practical(cls, setting: Setting, budget: Budget, *, steps: int = 100, **options) -> DPGD:
        """Practical settings (:func:`practical_parameters`, first order: η = 1/L1, or Φ/(L0²√T) if
        nonsmooth with Φ = ``setting.gap``; C = L0; σ by the accountant): privacy exact, no theorem
        attached."""
        return cls(
            **practical_parameters(setting, budget, steps=steps, zeroth_order=False), **options
        )

    def _closure(self, problem, space):
        return lambda x, C, batch: objective_clipped_sum(problem, x, C, batch)

    def _step(self, space, closure, seed, **kwargs) -> StepLog:
        return self.step(space, closure, **kwargs)

    def step(
        self,
        space: FlatSpace,
        clipped_sum: ClippedSum,
        *,
        sampler: Sampler,
        noise: NoiseSource,
        accountant: Accountant,
    ) -> StepLog:
        batch = sampler.sample()  # secret batch when subsampled
        total, frac, loss = clipped_sum(space.x, self.C, batch)  # Σ_i clip_C(∇f(x_t; ξ_i))
        g = release_sum(
            total,
            self.C,
            sampler=sampler,
            noise=noise,
            accountant=accountant,
            noise_multiplier=self.noise_multiplier,
        )  # (1/B)·Σ + z_t
        space.add_(-per_run(self.eta, g) * g)
        return StepLog(loss, frac, g, torch.zeros_like(frac), len(batch))
