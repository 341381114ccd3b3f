"""DPZero, DPGD-0th, DP-GD and MeZO: frozen configs on the algorithm contract (family "dpzero").

Zhang, Li, Thekumparampil, Oh, He. "DPZero: Private fine-tuning of language models without
backpropagation", ICML 2024 (arXiv:2310.09639); Malladi et al. "Fine-tuning language models with just
forward passes" (MeZO), NeurIPS 2023 (arXiv:2305.17333). Spec: ``seed001_dpzero.md``.

Each step is written once against a :class:`~dpnc.space.ParameterSpace` and a closure returning
per-example losses, so the same code serves a flat vector x ∈ R^d (float64, with optional leading
dimensions for a grid of runs sharing their public directions: ``run`` with x0 of shape (K, d) and
``eta``/``C`` of shape (K,)) and a model's parameters (``dpnc.optim``). Every clipped mean is released
through :func:`dpnc.privacy.mean.private_mean` or :func:`~dpnc.privacy.mean.release_sum` (non-finite
values set to 0 before clipping, the sampler's fixed batch size B as denominator, secret noise, one
ledger entry in real units). ``run`` steps on an :class:`~dpnc.problems.base.Objective` through its
per-example ``losses_at`` (DP-GD: ``clipped_gradient_sum`` where the objective has a closed form, else
its per-example ``gradients``).

Output rule: the last iterate by default (the experiments, spec §2.8); ``paper=True`` returns the random
iterate x_τ, τ ~ Unif{0..T−1}, that Algorithms 1 and 2 and §2.2 print (τ drawn from the public generator).

Symbols: eta = α (step size), lam = λ (smoothing), C (clipping threshold), steps = T, noise_multiplier = σ/Δ
where Δ = 2C/B is the replace-one sensitivity of a mean of B clipped terms (C/B under add/remove).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from dpnc.algorithms.base import (Algorithm, Cost, Run, Setting, Stats, approximate, check_choice, check_integer,
                                  check_positive)
from dpnc.algorithms.dpzero.theory import (ACCOUNTING, TheoryParameters, calibrate_noise, dpgd0th_from_theory,
                                           dpzero_from_theory, paper_claim)
from dpnc.distributed import LOCAL, Group, Local
from dpnc.privacy.clipping import clipped_sum, per_run
from dpnc.estimators import ClosedForm, TwoPoint, objective_clipped_sum, two_point_on_batch
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.budget import Budget
from dpnc.privacy.calibrate import noise_multiplier
from dpnc.privacy.mean import release_sum
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import NonPrivate
from dpnc.sampling import BatchClosure, FullBatch, Sampler
from dpnc.space import DIRECTIONS, FlatSpace, ParameterSpace

__all__ = ["ACCOUNTING", "DPGD", "DPGD0th", "DPZero", "MeZO", "StepLog", "TheoryParameters", "ZerothOrderStats",
           "calibrate_noise", "dpgd0th_from_theory", "dpzero_from_theory", "paper_claim", "public_seeds"]

Number = float | torch.Tensor


# --- per-step log and the family's stats -----------------------------------------------------------------


@dataclass
class StepLog:
    """What one step did (tensors have one entry per run in a grid, else are scalars).

    ``released`` is public (the noisy c_t or vector); ``loss``, ``clipped_fraction``, ``nonfinite`` and
    ``examples`` (the realised batch size) are statistics of the private batch: do not log them publicly.
    """

    loss: torch.Tensor
    clipped_fraction: torch.Tensor
    released: torch.Tensor
    nonfinite: torch.Tensor
    examples: int = 0


@dataclass
class ZerothOrderStats(Stats):
    """The family's :class:`~dpnc.algorithms.base.Stats` (counts summed over the runs of a grid).

    ``seeds``: the public direction seeds, one per step (may be logged); ``tau``: the output iterate's index
    when ``paper=True`` (public), else None.
    """

    seeds: list[int] = field(default_factory=list)
    tau: int | None = None

    def add(self, log: StepLog, runs: int, per_example: str) -> None:
        self.steps += 1
        if not log.examples:   # an empty batch: noise only
            return
        count = log.examples * runs
        if per_example == "evaluations":
            self.evaluations += 2 * count
        else:
            self.gradients += count
        self.clipped += int(torch.round(log.clipped_fraction * log.examples).sum())
        self.nonfinite += int(torch.as_tensor(log.nonfinite).sum())


def public_seeds(gen: torch.Generator, T: int) -> list[int]:
    """T direction seeds from a public generator (logged; they reveal nothing about the noise)."""
    return [int(s) for s in torch.randint(0, 2**62, (T,), generator=gen)]


def _check(name: str, value: Number, *, allow_inf: bool = False, allow_zero: bool = False) -> None:
    """check_positive for a value that may be one per run of a grid (a tensor of shape (K,))."""
    v = torch.as_tensor(value, dtype=torch.float64)
    ok = (v > 0) | (v == 0) if allow_zero else v > 0
    ok = ok & (torch.isfinite(v) | (allow_inf & torch.isinf(v)))
    if not bool(torch.all(ok)):
        rule = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {'' if allow_inf else 'finite and '}{rule}; got {value!r}")


# --- the shared run loop ----------------------------------------------------------------------------------


class _ZerothOrderFamily(Algorithm):
    """``run`` for the four configs: T steps on a FlatSpace at x0, public seeds from ``generator``."""

    family: ClassVar[str] = "dpzero"
    per_example: ClassVar[str] = "evaluations"
    closed_form: ClassVar[bool] = True   # the step needs only a_i and the mean loss (MeZO: the losses themselves)
    steps: int
    paper: bool
    direction: str

    def _check_common(self) -> None:
        check_integer(steps=self.steps)
        if not isinstance(self.paper, bool):
            raise ValueError(f"paper must be a bool; got {self.paper!r}")
        check_choice("direction", self.direction, DIRECTIONS)

    def _closure(self, problem, space: FlatSpace):
        """What ``step`` takes besides the space: the per-example losses at the space's point(s), with the
        objective's closed-form two-point differences where it has them (``two_point``, e.g. the quadratic) and
        the config's step uses only the differences and their mean loss (:class:`~dpnc.estimators.ClosedForm`)."""
        losses = lambda batch: problem.losses_at(space.x, batch)  # noqa: E731
        if not self.closed_form:
            return losses
        return ClosedForm(losses, lambda u, lam, batch: problem.two_point(space.x, u, lam, batch))

    def _step(self, space, closure, seed, **kwargs) -> StepLog:
        return self.step(space, closure, seed, **kwargs)

    def claim(self) -> str:
        """The paper's privacy statement for this config (Lemma 2.2: full batch, advanced composition)."""
        m = self.noise_multiplier
        if m == 0:
            return "not private (noise_multiplier = 0: the clipped mean is released exactly)"
        return (f"(ε, δ)-DP for every ε, δ with 2√(2T·log(e + ε/δ))/ε ≤ σ/Δ = {m:.4g}, T = {self.steps} "
                "(Lemma 2.2, advanced composition; full batch, replace-one)")

    def cost(self, setting: Setting) -> Cost:
        """T full-batch steps on n examples: 2n function evaluations a step (zeroth order) or n gradients (DP-GD);
        a subsampled sampler reads fewer."""
        per_step = setting.n * (2 if self.per_example == "evaluations" else 1)
        return Cost(evaluations=per_step * self.steps if self.per_example == "evaluations" else 0,
                    gradients=per_step * self.steps if self.per_example == "gradients" else 0, samples=setting.n)

    def non_private(self) -> _ZerothOrderFamily:
        """The σ = 0, C = ∞ twin (its releases carry no noise: the report says not private)."""
        names = {f.name for f in dataclasses.fields(self)}
        twin = {"noise_multiplier": 0.0, "C": math.inf}
        return dataclasses.replace(self, **{k: v for k, v in twin.items() if k in names})

    def run(self, problem, x0: torch.Tensor, *, noise: NoiseSource, accountant: Accountant,
            generator: torch.Generator, sampler: Sampler | None = None,
            callback: Callable[[int, StepLog], None] | None = None) -> Run:
        """``steps`` steps on ``problem`` (an :class:`~dpnc.problems.base.Objective`) from ``x0``.

        Args:
            problem: per-example losses through ``losses_at(points, index)`` (DP-GD: gradients).
            x0: the start point (d,), or (K, d) for a grid of K runs that share their public directions
                and batches; ``eta`` and ``C`` may then be one per run.
            noise: the secret noise source (seeded only in tests: the report then says not private).
            accountant: records every release.
            generator: public randomness: the direction seeds (and τ when ``paper=True``).
            sampler: the batches (default: the full batch, as in the theorems); a subsampled sampler draws
                them in secret and its release carries the amplification.
            callback: ``callback(t, log)`` after step t (e.g. a progress bar; the log's statistics of the
                batch are private).

        Returns:
            A :class:`~dpnc.algorithms.base.Run` with :class:`ZerothOrderStats`; ``output`` is the last
            iterate, or x_τ with ``paper=True``.
        """
        sampler = sampler if sampler is not None else FullBatch(problem.n)
        sampler.check_relation(accountant.relation)
        space = FlatSpace(x0, self.direction)
        seeds = public_seeds(generator, self.steps)
        tau = int(torch.randint(self.steps, (1,), generator=generator)) if self.paper else None
        stats = ZerothOrderStats(seeds=seeds, tau=tau)
        runs = math.prod(space.runs)
        closure, output = self._closure(problem, space), None
        for t, seed in enumerate(seeds):
            if t == tau:
                output = space.x.clone()
            log = self._step(space, closure, seed, sampler=sampler, noise=noise, accountant=accountant)
            stats.add(log, runs, self.per_example)
            if callback is not None:
                callback(t, log)
        last = space.x
        private = getattr(self, "noise_multiplier", 0.0) > 0
        notes = [] if private else [f"{self.name} releases a data-dependent value without noise: not private"]
        claim = self.claim() if isinstance(sampler, FullBatch) or not private else \
            "none: the paper's theory is full batch (spec §7.1); the ledger accounts the sampler's amplification"
        return Run(self, output if output is not None else last, last, accountant, stats, paper_claim=claim,
                   private=private, notes=notes)


def practical_step(constants, *, steps: int, gap: float | None) -> float:
    """The practical first-order step: 1/L1 on a smooth objective, else Φ/(L0²√T) (the distance Φ/L0 that a drop of
    Φ allows, spread over √T steps); Φ = ``gap`` ≥ F(x0) − inf F is public."""
    return 1 / constants.L1 if constants.L1 is not None else gap / (constants.L0**2 * math.sqrt(steps))


def practical_parameters(setting: Setting, budget: Budget, *, steps: int, zeroth_order: bool) -> dict:
    """The practical settings of the DPZero family (full batch): a documented rule, no theorem attached.

    C = L0 (a per-example gradient, or the scalar uᵀ∇f ~ N(0, ‖∇f‖²), is of size L0 at most where the public
    constants hold; clipping binds only beyond them); T = ``steps``; η = 1/L1 on a smooth objective, else the
    subgradient step Φ/(L0²√T) with Φ ≥ F(x0) − inf F public (the distance Φ/L0 spread over √T steps); divided
    by d + 2 for a zeroth-order estimate (E‖u uᵀ∇f‖² = (d + 2)‖∇f‖² for Gaussian u: the same expected progress
    per step needs a d + 2 times smaller step); σ/Δ the smallest the RDP accountant finds (ε, δ)-DP for T
    full-batch Gaussian releases (tighter than the papers' advanced composition). Read only from public inputs:
    the setting's constants, d and gap (Φ), the budget's (ε, δ) and ``steps``.
    """
    budget = approximate(budget, "the DPZero family")
    d, constants, gap = setting.d, setting.constants, setting.gap
    check_integer(steps=steps)
    L0, L1 = constants.L0, constants.L1
    if L0 is None:
        raise ValueError("practical settings need the public per-example Lipschitz constant constants.L0")
    if L1 is None and gap is None:
        raise ValueError("practical settings need constants.L1 (smooth) or gap ≥ F(x0) − inf F (nonsmooth)")
    eta = practical_step(constants, steps=steps, gap=gap)
    return {"eta": eta / (d + 2 if zeroth_order else 1), "C": float(L0), "steps": steps,
            "noise_multiplier": noise_multiplier(budget.epsilon, budget.delta, 1.0, steps)}


def theory_inputs(setting: Setting, budget: Budget, who: str) -> dict:
    """What the DPZero paper's theorems read: n, d, L = L0 (per-example Lipschitz), ℓ = L1 (smoothness), (ε, δ)."""
    budget = approximate(budget, who)
    c = setting.constants
    if c.L0 is None or c.L1 is None:
        raise ValueError(f"{who}'s theorem needs constants.L0 (Lipschitz, its L) and constants.L1 (smoothness, its "
                         f"ℓ); got L0={c.L0!r}, L1={c.L1!r}")
    return {"n": setting.n, "d": setting.d, "L": c.L0, "ell": c.L1, "epsilon": budget.epsilon,
            "delta": budget.delta}


def finite_pairs(diffs: TwoPoint) -> tuple[TwoPoint, torch.Tensor]:
    """The two-point losses with every example whose a_i is non-finite (a NaN/±inf loss at either point) set to
    0 at *both* points, and their count per run: MeZO's update then ignores that example instead of turning NaN.
    Where every a_i is finite the losses are returned unchanged (bit for bit)."""
    ok = torch.isfinite(diffs.a)
    zero = torch.zeros((), dtype=diffs.plus.dtype, device=diffs.plus.device)
    return TwoPoint(torch.where(ok, diffs.plus, zero), torch.where(ok, diffs.minus, zero), diffs.lam), (~ok).sum(-1)


# --- the algorithms ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DPZero(_ZerothOrderFamily):
    """DPZero (Algorithm 2): one clipped scalar per example, one scalar of noise per step.

    for t = 0..T−1:
        u_t ~ Unif(√d·S^{d−1}) (or N(0, I) — ``direction``)
        a_i = (f(x_t + λu_t; ξ_i) − f(x_t − λu_t; ξ_i)) / (2λ)        for i in the batch
        c_t = (1/B) Σ_i clip_C(a_i) + z_t,   z_t ~ N(0, σ²), σ = noise_multiplier·Δ
        x_{t+1} = x_t − α·c_t·u_t

    Implements: Zhang et al. 2024, Algorithm 2 (full batch), and its minibatch form (spec §2.5) with the
    sampler's own privacy event. ``discrete=True`` draws z_t from the exact discrete Gaussian (full batch
    only; the released scalar then lies on a grid of Δ/1000).

    Correction: the noise comes from the secret ``NoiseSource``, never from the direction seed as in the
    published code (spec §7.2); ``paper=True`` only restores the printed output rule x_τ.

    Args:
        eta: step size α ≥ 0 (or one per run, shape (K,)).
        lam: smoothing λ > 0.
        C: clipping threshold > 0, may be inf without noise (or one per run).
        noise_multiplier: σ/Δ ≥ 0 (0 releases c_t without noise: not private).
        steps: T ≥ 1, the number of steps ``run`` takes (the optimizer tier steps one at a time).
        discrete: use the exact discrete Gaussian for z_t.
        paper: output x_τ, τ ~ Unif{0..T−1}, instead of the last iterate.
        direction: ``"gaussian"`` (the experiments) or ``"sphere"`` (the theory's √d·S^{d−1}).
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
        _check("eta", self.eta, allow_zero=True)  # 0: a warm-up schedule's first step
        _check("lam", self.lam)
        _check("C", self.C, allow_inf=True)
        _check("noise_multiplier", self.noise_multiplier, allow_zero=True)
        if self.noise_multiplier > 0 and not bool(torch.all(torch.isfinite(torch.as_tensor(self.C)))):
            raise ValueError("C must be finite when noise_multiplier > 0 (the sensitivity is 2C/B)")
        if not isinstance(self.discrete, bool):
            raise ValueError(f"discrete must be a bool; got {self.discrete!r}")
        self._check_common()

    @classmethod
    def from_theory(cls, setting: Setting, budget: Budget, *, r: float, kappa: float | None = None,
                    **options) -> DPZero:
        """Theorem 3 (A3.5) for the effective rank ``r`` or, with the PL condition number κ = ℓ/μ (``kappa``, not
        the KL exponent of the constants), Corollary F.4; see :func:`~dpnc.algorithms.dpzero.theory.dpzero_from_theory`
        (L = constants.L0, ℓ = constants.L1, (ε, δ) = the budget). ``options``: other fields (direction …)."""
        p = dpzero_from_theory(**theory_inputs(setting, budget, "DPZero"), r=r, kappa=kappa)
        return cls(eta=p.eta, lam=p.lam, C=p.C, noise_multiplier=p.noise_multiplier, steps=p.T, **options)

    @classmethod
    def practical(cls, setting: Setting, budget: Budget, *, steps: int = 1000, lam: float = 1e-3,
                  **options) -> DPZero:
        """Practical settings (:func:`practical_parameters`, zeroth order; λ = ``lam``): privacy exact (σ by the
        accountant for the T releases), no theorem's utility guarantee (Theorem 3's η, C, T are not used)."""
        return cls(lam=lam, **practical_parameters(setting, budget, steps=steps, zeroth_order=True), **options)

    def step(self, space: ParameterSpace, closure: BatchClosure, seed: int, *, sampler: Sampler,
             noise: NoiseSource, accountant: Accountant, group: Group | Local = LOCAL) -> StepLog:
        """One step along the public ``seed``; ``group``: the processes whose parts of the batch are summed
        (:data:`~dpnc.distributed.LOCAL`: this one; a :class:`~dpnc.distributed.Group`: rank 0 draws the batch
        and the noise and records, one all_reduce of 5 numbers, c_t broadcast). The log is the whole batch's."""
        diffs = two_point_on_batch(space, closure, seed, self.lam, sampler, group=group)   # ℓ_i(x_t ± λu_t)
        try:
            part = clipped_sum(diffs.a, self.C)                             # Σ_i clip_C(a_i) over this part
            losses = diffs.loss * diffs.examples if diffs.examples else torch.zeros_like(diffs.loss)   # Σ of the mean
            total, clipped, nonfinite, examples, loss = group.sum(          # … over the whole batch (one all_reduce)
                part.total, part.clipped, part.nonfinite, part.examples, losses)
            c = group.on_source(lambda: release_sum(                        # (1/B) Σ_i clip_C(a_i) + z_t, recorded
                total, self.C, sampler=sampler, noise=noise, accountant=accountant,
                noise_multiplier=self.noise_multiplier, discrete=self.discrete), like=total)
        except BaseException:
            space.restore_()   # never leave the parameters perturbed
            raise
        space.update_(seed, -per_run(self.eta, c) * c)                     # x_{t+1} = x_t − α c_t u_t
        fraction = clipped.to(total.dtype) / examples
        return StepLog(loss / examples, fraction, c, nonfinite, examples)


@dataclass(frozen=True)
class MeZO(_ZerothOrderFamily):
    """MeZO / ZO-SGD (Malladi et al. 2023; spec §2.6): c_t = (L(x + λu) − L(x − λu))/(2λ) of the batch mean.

    Not private: each step's c_t is recorded as a :class:`~dpnc.privacy.releases.NonPrivate` release, so
    the report says ε = ∞ and "not private". The mean is over the realised batch (nothing to protect);
    an empty batch moves nothing.

    Args:
        eta: step size α ≥ 0 (or one per run); lam: smoothing λ > 0; steps: T ≥ 1 (``run`` only);
        paper: output x_τ instead of the last iterate (MeZO itself prints no other rule);
        direction: ``"gaussian"`` or ``"sphere"``.
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
        _check("eta", self.eta, allow_zero=True)
        _check("lam", self.lam)
        self._check_common()

    private: ClassVar[bool] = False

    @classmethod
    def from_theory(cls, setting: Setting | None = None, budget=None, *, steps: int = 10_000, **options) -> MeZO:
        """MeZO has no theorem in these papers; this is the DPZero paper's MeZO baseline (spec §2.6):
        λ = 10⁻³, α = 10⁻⁶ (its best learning rate), T = 10 000 steps (B = 64 is the sampler's). Not private:
        ``setting`` and ``budget`` are not read (None allowed)."""
        return cls(**{"eta": 1e-6, "lam": 1e-3, "steps": steps, **options})

    @classmethod
    def practical(cls, setting: Setting, budget=None, *, steps: int = 1000, lam: float = 1e-3, **options) -> MeZO:
        """DPZero's practical step and λ without noise (:func:`practical_parameters`' η, zeroth order); the budget
        is not read (None allowed): MeZO spends no budget and its report says not private."""
        c = setting.constants
        if c.L0 is None and c.L1 is None:
            raise ValueError("practical settings need constants.L1 (smooth) or L0 and gap (nonsmooth)")
        if c.L1 is None and setting.gap is None:
            raise ValueError("practical settings need constants.L1 (smooth) or gap ≥ F(x0) − inf F (nonsmooth)")
        check_integer(steps=steps)
        eta = practical_step(c, steps=steps, gap=setting.gap) / (setting.d + 2)
        return cls(**{"eta": eta, "lam": lam, "steps": steps, **options})

    def claim(self) -> str:
        return "not private (MeZO releases its two-point difference without noise)"

    def step(self, space: ParameterSpace, closure: BatchClosure, seed: int, *, sampler: Sampler,
             noise: NoiseSource, accountant: Accountant, group: Group | Local = LOCAL) -> StepLog:
        """One step along the public ``seed``; ``group`` as in :meth:`DPZero.step` (one all_reduce of 4 numbers)."""
        diffs = two_point_on_batch(space, closure, seed, self.lam, sampler, group=group)
        # The realised batch's mean (not private, so no fixed denominator); an example whose loss is non-finite at
        # either point counts as a_i = 0 (one bad example must not turn the update into NaN); an empty batch
        # moves nothing.
        try:
            diffs, bad = finite_pairs(diffs)
            plus, minus, examples, nonfinite = group.sum(diffs.plus.sum(-1), diffs.minus.sum(-1), diffs.examples,
                                                         bad)

            def release() -> torch.Tensor:
                accountant.record(NonPrivate(secret=bool(getattr(sampler, "secret", True))))  # no noise: ε = ∞
                return (plus / examples - minus / examples) / (2 * self.lam) if examples else plus

            c = group.on_source(release, like=plus)
        except BaseException:
            space.restore_()
            raise
        space.update_(seed, -per_run(self.eta, c) * c)
        return StepLog((plus / examples + minus / examples) / 2, torch.zeros_like(c), c, nonfinite, examples)


@dataclass(frozen=True)
class DPGD0th(_ZerothOrderFamily):
    """DPGD-0th (Algorithm 1): the naive combination, vector clipping and d-dimensional noise.

    g_i = a_i·u_t (a d-vector), x_{t+1} = x_t − α((1/B) Σ_i clip_C(g_i) + z_t), z_t ~ N(0, σ² I_d).
    Since ‖g_i‖ = |a_i|·‖u_t‖, clip_C(g_i) = clip_{C/‖u_t‖}(a_i)·u_t: the sum is formed from the scalars
    and released by :func:`~dpnc.privacy.mean.release_sum` with bound C. Flat tier only (it materialises
    u_t and the noise). Args as :class:`DPZero` (no ``discrete``).
    """

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
    def from_theory(cls, setting: Setting, budget: Budget, *, r: float | None = None, kappa: float | None = None,
                    **options) -> DPGD0th:
        """Theorem 1 (A3.1), Theorem 2 (effective rank r), Corollaries F.2/F.3 (PL condition number κ); see
        :func:`~dpnc.algorithms.dpzero.theory.dpgd0th_from_theory` (C = Ld: clipping never happens)."""
        p = dpgd0th_from_theory(**theory_inputs(setting, budget, "DPGD-0th"), r=r, kappa=kappa)
        return cls(eta=p.eta, lam=p.lam, C=p.C, noise_multiplier=p.noise_multiplier, steps=p.T, **options)

    @classmethod
    def practical(cls, setting: Setting, budget: Budget, *, steps: int = 1000, lam: float = 1e-3,
                  **options) -> DPGD0th:
        """Practical settings as :meth:`DPZero.practical`, but C = L0·√(d + 2): the clipped vector is g_i = a_i·u,
        whose typical norm is √(E‖a_i u‖²) = √(d + 2)·‖∇f_i‖ for Gaussian u (Theorem 1 takes the worst case, L·d)."""
        p = practical_parameters(setting, budget, steps=steps, zeroth_order=True)
        return cls(lam=lam, **{**p, "C": p["C"] * math.sqrt(setting.d + 2)}, **options)

    def step(self, space: FlatSpace, closure: BatchClosure, seed: int, *, sampler: Sampler,
             noise: NoiseSource, accountant: Accountant) -> StepLog:
        diffs = two_point_on_batch(space, closure, seed, self.lam, sampler)
        u = space.direction(seed)
        s = clipped_sum(diffs.a, per_run(self.C, diffs.a) / torch.linalg.vector_norm(u))   # Σ_i clip_{C/‖u‖}(a_i)
        total = s.total.unsqueeze(-1) * u                                 # Σ_i clip_C(g_i)
        g = release_sum(total, self.C, sampler=sampler, noise=noise, accountant=accountant,
                        noise_multiplier=self.noise_multiplier)            # (1/B) Σ_i clip_C(g_i) + z_t
        space.restore_()
        space.add_(-per_run(self.eta, g) * g)
        return StepLog(diffs.loss, s.fraction, g, s.nonfinite, diffs.examples)


ClippedSum = Callable[[torch.Tensor, Number, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class DPGD(_ZerothOrderFamily):
    """DP-GD (spec §2.2): x_{t+1} = x_t − α((1/B) Σ_i clip_C(∇f(x_t; ξ_i)) + z_t), z_t ~ N(0, σ² I_d).

    ``step`` takes ``clipped_sum(x, C, batch) -> (Σ_i clip_C(∇f_i), clipped fraction, mean loss)`` over the
    batch the sampler drew; ``run`` builds it from the objective
    (:func:`dpnc.estimators.objective_clipped_sum`: its closed form ``clipped_gradient_sum`` where it has
    one, else its per-example ``gradients``). The sum is released by
    :func:`~dpnc.privacy.mean.release_sum`: divided by the sampler's fixed B, never by the realised batch
    size (under Poisson sampling that would let one example move the mean by more than the recorded C/B).

    Args: eta, C, noise_multiplier, steps, paper as :class:`DPZero` (``direction`` is unused: no directions).
    """

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
        """The spec gives DP-GD no theorem of its own (§2.2): C = L = constants.L0 (then clipping never happens,
        since ‖∇f‖ ≤ L) and the paper's noise for (ε, δ) after ``steps`` full-batch steps (Lemma 2.2); the step
        size is the user's (``eta`` in ``options``, default 1/√steps)."""
        budget = approximate(budget, "DP-GD")
        check_integer(steps=steps)
        L = setting.constants.L0
        check_positive(L0=L)
        multiplier = calibrate_noise("paper", budget.epsilon, budget.delta, steps, setting.n)
        return cls(**{"eta": 1 / steps**0.5, "C": float(L), "noise_multiplier": multiplier, "steps": steps,
                      **options})

    @classmethod
    def practical(cls, setting: Setting, budget: Budget, *, steps: int = 100, **options) -> DPGD:
        """Practical settings (:func:`practical_parameters`, first order: η = 1/L1, or Φ/(L0²√T) if nonsmooth with
        Φ = ``setting.gap``; C = L0; σ by the accountant): privacy exact, no theorem attached."""
        return cls(**practical_parameters(setting, budget, steps=steps, zeroth_order=False), **options)

    def _closure(self, problem, space):
        return lambda x, C, batch: objective_clipped_sum(problem, x, C, batch)

    def _step(self, space, closure, seed, **kwargs) -> StepLog:
        return self.step(space, closure, **kwargs)

    def step(self, space: FlatSpace, clipped_sum: ClippedSum, *, sampler: Sampler, noise: NoiseSource,
             accountant: Accountant) -> StepLog:
        batch = sampler.sample()                                             # secret batch when subsampled
        total, frac, loss = clipped_sum(space.x, self.C, batch)              # Σ_i clip_C(∇f(x_t; ξ_i))
        g = release_sum(total, self.C, sampler=sampler, noise=noise, accountant=accountant,
                        noise_multiplier=self.noise_multiplier)              # (1/B)·Σ + z_t
        space.add_(-per_run(self.eta, g) * g)
        return StepLog(loss, frac, g, torch.zeros_like(frac), len(batch))
