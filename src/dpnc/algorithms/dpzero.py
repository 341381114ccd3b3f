"""DPZero, DPGD-0th, DP-GD and MeZO.

Zhang, Li, Thekumparampil, Oh, He. "DPZero: Private fine-tuning of language models without
backpropagation", ICML 2024 (arXiv:2310.09639); Malladi et al. "Fine-tuning language models with just
forward passes" (MeZO), NeurIPS 2023 (arXiv:2305.17333). Spec: ``seed001_dpzero.md``.

Each step is written once against a :class:`~dpnc.space.ParameterSpace` and a closure returning
per-example losses, so the same code serves a flat vector x ∈ R^d (float64, with optional leading
dimensions for a grid of runs sharing their public directions) and a model's parameters (the
``dpnc.optim.DPZero`` optimizer). Privacy noise comes only from the secret ``NoiseSource``; every
release is recorded in the ``Accountant``. Non-finite per-example values become 0 before clipping
(so the sensitivity bound holds) and are counted.

Symbols: eta = α (step size), lam = λ (smoothing), C (clipping threshold), noise_multiplier = σ/Δ
where Δ = 2C/B is the replace-one sensitivity of a mean of B clipped terms (C/B under add/remove).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from dpnc.clipping import per_run, clip_scalars, zero_nonfinite
from dpnc.estimators import two_point_on_batch
from dpnc.privacy.accountant import Accountant, PrivacyReport
from dpnc.privacy.calibrate import (advanced_composition_epsilon, noise_multiplier, opacus_noise_multiplier)
from dpnc.privacy.mechanisms import discrete_gaussian_mechanism, gaussian_mechanism
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import Gaussian, mean_sensitivity
from dpnc.sampling import BatchClosure, FullBatch, Sampler
from dpnc.space import FlatSpace, ParameterSpace

ACCOUNTING = ("paper", "rdp", "pld")
Number = float | torch.Tensor


# --- per-step log and result ---------------------------------------------------------------------


@dataclass
class StepLog:
    """What one step did (tensors have one entry per run in a grid, else are scalars)."""

    loss: torch.Tensor
    clipped_fraction: torch.Tensor
    released: torch.Tensor
    nonfinite: torch.Tensor


@dataclass
class Result:
    """A run's output: the iterates, what each step logged, and the privacy spent."""

    x: torch.Tensor
    logs: list[StepLog]
    accountant: Accountant
    seeds: list[int] = field(default_factory=list)

    def report(self, delta: float, paper_claim: str | None = None) -> PrivacyReport:
        return self.accountant.report(delta, paper_claim=paper_claim)


# --- the algorithms ------------------------------------------------------------------------------


def _check(name: str, value: Number, *, allow_inf: bool = False, allow_zero: bool = False) -> None:
    v = torch.as_tensor(value, dtype=torch.float64)
    ok = (v > 0) | (v == 0) if allow_zero else v > 0
    ok = ok & (torch.isfinite(v) | (allow_inf & torch.isinf(v)))
    if not bool(torch.all(ok)):
        rule = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {'' if allow_inf else 'finite and '}{rule}; got {value!r}")


@dataclass(frozen=True)
class DPZero:
    """DPZero (Algorithm 2): one clipped scalar per example, one scalar of noise per step.

    for t = 0..T−1:
        u_t ~ Unif(√d·S^{d−1}) (or N(0, I) — the direction of the space)
        a_i = (f(x_t + λu_t; ξ_i) − f(x_t − λu_t; ξ_i)) / (2λ)        for i in the batch
        c_t = (1/B) Σ_i clip_C(a_i) + z_t,   z_t ~ N(0, σ²), σ = noise_multiplier·Δ
        x_{t+1} = x_t − α·c_t·u_t

    Implements: Zhang et al. 2024, Algorithm 2 (full batch), and its minibatch form (§2.5 of the
    spec) with the sampler's own privacy event. ``discrete=True`` draws z_t from the exact discrete
    Gaussian (full batch only; the released scalar then lies on a grid of C/1000·2/B).

    Args:
        eta: step size α ≥ 0 (or one per run, shape (K,)).
        lam: smoothing λ > 0.
        C: clipping threshold > 0, may be inf (or one per run).
        noise_multiplier: σ/Δ ≥ 0 (0 releases c_t without noise: not private).
        discrete: use the exact discrete Gaussian for z_t.
    """

    eta: Number
    lam: float
    C: Number
    noise_multiplier: float
    discrete: bool = False

    def __post_init__(self) -> None:
        _check("eta", self.eta, allow_zero=True)  # 0: a warm-up schedule's first step
        _check("lam", self.lam)
        _check("C", self.C, allow_inf=True)
        _check("noise_multiplier", self.noise_multiplier, allow_zero=True)
        if self.noise_multiplier > 0 and not bool(torch.all(torch.isfinite(torch.as_tensor(self.C)))):
            raise ValueError("C must be finite when noise_multiplier > 0 (the sensitivity is 2C/B)")

    def step(self, space: ParameterSpace, closure: BatchClosure, seed: int, *, sampler: Sampler,
             noise: NoiseSource, accountant: Accountant) -> StepLog:
        diffs = two_point_on_batch(space, closure, seed, self.lam, sampler)  # ℓ_i(x_t ± λu_t), i in the batch
        a, nonfinite = zero_nonfinite(diffs.a)                          # a_i
        clipped, frac = clip_scalars(a, self.C)                         # clip_C(a_i)
        mean = clipped.sum(-1) / sampler.batch_size                     # (1/B) Σ_i clip_C(a_i)
        c = _privatize(mean, self.C, self.noise_multiplier, self.discrete, sampler, noise, accountant)
        space.update_(seed, -per_run(self.eta, c) * c)                 # x_{t+1} = x_t − α c_t u_t
        return StepLog(diffs.loss, frac, c, nonfinite)


@dataclass(frozen=True)
class MeZO:
    """MeZO / ZO-SGD (Malladi et al. 2023): c_t = (L(x + λu) − L(x − λu))/(2λ) of the batch-mean loss.

    Not private: each step's c_t is recorded as a release without noise, so the report says ε = ∞.
    """

    eta: Number
    lam: float

    def __post_init__(self) -> None:
        _check("eta", self.eta, allow_zero=True)
        _check("lam", self.lam)

    def step(self, space: ParameterSpace, closure: BatchClosure, seed: int, *, sampler: Sampler,
             noise: NoiseSource, accountant: Accountant) -> StepLog:
        diffs = two_point_on_batch(space, closure, seed, self.lam, sampler)
        # The realised batch's mean (not private, so no fixed denominator); an empty batch moves nothing.
        c = (diffs.plus.mean(-1) - diffs.minus.mean(-1)) / (2 * self.lam) if diffs.plus.shape[-1] else \
            diffs.plus.sum(-1)
        accountant.record(Gaussian(1.0, 0.0))  # a data-dependent release with no noise
        space.update_(seed, -per_run(self.eta, c) * c)
        nonfinite = (~torch.isfinite(diffs.a)).sum(-1)
        return StepLog(diffs.loss, torch.zeros_like(c), c, nonfinite)


@dataclass(frozen=True)
class DPGD0th:
    """DPGD-0th (Algorithm 1): the naive combination, vector clipping and d-dimensional noise.

    g_i = a_i·u_t (a d-vector), x_{t+1} = x_t − α((1/B) Σ_i clip_C(g_i) + z_t), z_t ~ N(0, σ² I_d).
    Since ‖g_i‖ = |a_i|·‖u_t‖, clip_C(g_i) = clip_{C/‖u_t‖}(a_i)·u_t. Flat tier only (it
    materialises u_t and the noise).
    """

    eta: Number
    lam: float
    C: Number
    noise_multiplier: float

    def __post_init__(self) -> None:
        DPZero(self.eta, self.lam, self.C, self.noise_multiplier)  # same hyper-parameter rules

    def step(self, space: FlatSpace, closure: BatchClosure, seed: int, *, sampler: Sampler,
             noise: NoiseSource, accountant: Accountant) -> StepLog:
        diffs = two_point_on_batch(space, closure, seed, self.lam, sampler)
        u = space.direction(seed)
        a, nonfinite = zero_nonfinite(diffs.a)
        clipped, frac = clip_scalars(a, per_run(self.C, a) / torch.linalg.vector_norm(u))
        g = (clipped.sum(-1) / sampler.batch_size).unsqueeze(-1) * u   # (1/B) Σ_i clip_C(g_i)
        noisy = _privatize(g, self.C, self.noise_multiplier, False, sampler, noise, accountant)
        space.restore_()
        space.add_(-per_run(self.eta, noisy) * noisy)
        return StepLog(diffs.loss, frac, noisy, nonfinite)


ClippedSum = Callable[[torch.Tensor, Number, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class DPGD:
    """DP-GD (spec §2.2): x_{t+1} = x_t − α((1/B) Σ_i clip_C(∇f(x_t; ξ_i)) + z_t), z_t ~ N(0, σ² I_d).

    The step draws the batch from the sampler and takes ``clipped_sum(x, C, batch) -> (Σ_i clip_C(∇f_i),
    clipped fraction, mean loss)`` over that batch: :func:`dpnc.estimators.per_example_clipped_sum`
    (torch.func) in general, or a problem's exact closed form. The sum is divided by the sampler's fixed B,
    never by the realised batch size (under Poisson sampling that would let one example move the mean
    by more than the recorded C/B).
    """

    eta: Number
    C: Number
    noise_multiplier: float

    def __post_init__(self) -> None:
        DPZero(self.eta, 1.0, self.C, self.noise_multiplier)

    def step(self, space: FlatSpace, clipped_sum: ClippedSum, *, sampler: Sampler, noise: NoiseSource,
             accountant: Accountant) -> StepLog:
        total, frac, loss = clipped_sum(space.x, self.C, sampler.sample())  # secret batch when subsampled
        g = total / sampler.batch_size                                       # fixed denominator B
        noisy = _privatize(g, self.C, self.noise_multiplier, False, sampler, noise, accountant)
        space.add_(-per_run(self.eta, noisy) * noisy)
        return StepLog(loss, frac, noisy, torch.zeros_like(frac))


def _privatize(value: torch.Tensor, C: Number, multiplier: float, discrete: bool, sampler: Sampler,
               noise: NoiseSource, accountant: Accountant) -> torch.Tensor:
    """value + N(0, (multiplier·Δ)²) with Δ the sensitivity of a mean of clip-C terms; recorded."""
    unit = mean_sensitivity(1.0, sampler.batch_size, accountant.relation)  # Δ per unit of C
    if multiplier == 0:
        accountant.record(Gaussian(1.0, 0.0))
        return value
    if discrete:
        if not isinstance(sampler, FullBatch) or value.numel() != 1:
            raise ValueError("discrete=True supports one full-batch run (no subsampled accounting)")
        C = float(C)
        released, release = discrete_gaussian_mechanism(float(value), sensitivity=unit * C,
                                                        sigma=multiplier * unit * C, noise=noise)
        accountant.record(release)
        return torch.tensor(released, dtype=value.dtype, device=value.device).reshape(value.shape)
    noisy, release = gaussian_mechanism(value, sampler.release(unit, multiplier * unit), noise,
                                        scale=per_run(C, value))
    accountant.record(release)
    return noisy


# --- running and accounting -------------------------------------------------------------------


def public_seeds(gen: torch.Generator, T: int) -> list[int]:
    """T direction seeds from a public generator (logged; they reveal nothing about the noise)."""
    return [int(s) for s in torch.randint(0, 2**62, (T,), generator=gen)]


def run(algorithm: DPZero | MeZO | DPGD0th | DPGD, space: FlatSpace, losses, T: int, *, seed: int,
        sampler: Sampler, noise: NoiseSource, accountant: Accountant, clipped_sum: ClippedSum | None = None,
        callback: Callable[[int, StepLog], None] | None = None) -> Result:
    """Run T steps on a flat space. ``losses(x, batch)`` gives per-example losses (..., |batch|).

    The public generator seeded by ``seed`` draws the direction seeds only; the sampler draws the
    batches (secretly when subsampled) and the noise comes from ``noise``. DP-GD takes
    ``clipped_sum(x, C, batch)`` instead of ``losses``. Returns the last iterate (the experiments'
    output; the theorems' random iterate can be drawn from ``callback``'s record).
    """
    if not isinstance(T, int) or T < 1:
        raise ValueError(f"T must be an integer >= 1; got {T!r}")
    if isinstance(algorithm, DPGD) and clipped_sum is None:
        raise ValueError("DP-GD needs clipped_sum(x, C, batch), the sum of clipped per-example gradients")
    sampler.check_relation(accountant.relation)
    seeds = public_seeds(torch.Generator().manual_seed(seed), T)
    logs = []
    for t, s in enumerate(seeds):
        if isinstance(algorithm, DPGD):
            log = algorithm.step(space, clipped_sum, sampler=sampler, noise=noise, accountant=accountant)
        else:
            log = algorithm.step(space, lambda b: losses(space.x, b), s, sampler=sampler,
                                 noise=noise, accountant=accountant)
        logs.append(log)
        if callback is not None:
            callback(t, log)
    return Result(space.x, logs, accountant, seeds)


def calibrate_noise(accounting: str, epsilon: float, delta: float, T: int, n: int,
                    batch_size: int | None = None) -> float:
    """The noise multiplier σ/Δ for a target (ε, δ) after T steps, by accounting mode.

    * ``"paper"``: advanced composition, σ/Δ = 2√(2T log(e + ε/δ))/ε (Lemma 2.2; full batch only);
    * ``"rdp"``: full batch, RDP of T Gaussians; minibatch, the published code's opacus 1.4 recipe
      (Poisson-subsampled RDP at q = B/n, bisection tolerance 0.01);
    * ``"pld"``: tight PLD accounting of the same releases.
    """
    if accounting not in ACCOUNTING:
        raise ValueError(f"accounting must be one of {ACCOUNTING}; got {accounting!r}")
    q = 1.0 if batch_size is None or batch_size == n else batch_size / n
    if accounting == "paper":
        if q != 1.0:
            raise ValueError("accounting='paper' (advanced composition) is for full batch only")
        return 2 * math.sqrt(2 * T * math.log(math.e + epsilon / delta)) / epsilon
    if accounting == "rdp":
        return noise_multiplier(epsilon, delta, 1.0, T) if q == 1.0 else \
            opacus_noise_multiplier(epsilon, delta, q, T)
    return noise_multiplier(epsilon, delta, q, T, accountant="pld")


def paper_claim(multiplier: float, T: int, delta: float) -> str:
    """The ε that advanced composition (the paper's Lemma 2.2) certifies for these releases."""
    if multiplier <= 0:
        return "ε = ∞ (no noise)"
    return f"ε = {advanced_composition_epsilon(multiplier, T, delta):.4g} by advanced composition (Lemma 2.2)"


# --- parameters from the theorems ---------------------------------------------------------------


@dataclass(frozen=True)
class TheoryParameters:
    """Step size α, steps T, clipping C, smoothing λ and noise multiplier set by a theorem."""

    theorem: str
    eta: float
    T: int
    C: float
    lam: float
    noise_multiplier: float


def _log_term(epsilon: float, delta: float) -> float:
    return math.log(math.e + epsilon / delta)


def _positive_log(x: float, theorem: str) -> float:
    """log(x), which the theorem needs positive (it is, once n is large enough)."""
    if x <= 1:
        raise ValueError(f"{theorem} does not apply: a logarithm in it is ≤ 0 (log of {x:.3g}); "
                         "n·ε is too small for these constants")
    return math.log(x)


def _theory(theorem, eta, T, C, lam, epsilon, delta) -> TheoryParameters:
    T = max(int(T), 1)  # Remark F.6
    return TheoryParameters(theorem, eta, T, C, lam, calibrate_noise("paper", epsilon, delta, T, 1))


def dpgd0th_from_theory(*, n: int, d: int, L: float, ell: float, epsilon: float, delta: float,
                        r: float | None = None, kappa: float | None = None) -> TheoryParameters:
    """Theorem 1 (A3.1), Theorem 2 (A3.5: effective rank r), Corollary F.2/F.3 (with PL, κ = ℓ/μ).

    C = Ld (then clipping never happens, since ‖g‖ ≤ L‖u‖² = Ld).
    """
    lg = _log_term(epsilon, delta)
    if kappa is None and r is None:   # Theorem 1
        return _theory("Theorem 1", 1 / (4 * ell * d), n * epsilon / math.sqrt(d * lg), L * d,
                       (4 * L / (ell * d)) * math.sqrt(math.sqrt(d * lg) / (n * epsilon)), epsilon, delta)
    if kappa is None:                 # Theorem 2
        return _theory("Theorem 2", 1 / (4 * ell * (r + 2)), n * (r + 2) * epsilon / (d * math.sqrt(r * lg)),
                       L * d, (4 * L / (ell * d)) * math.sqrt(math.sqrt(r * lg) / (n * epsilon)), epsilon, delta)
    if r is None:                     # Corollary F.2
        T = 8 * kappa * d * _positive_log(n**2 * epsilon**2 / (kappa * d**3 * lg), "Corollary F.2")
        return _theory("Corollary F.2", 1 / (4 * ell * d), T, L * d,
                       (2 * L / ell) * math.sqrt(lg) / (n * epsilon), epsilon, delta)
    T = 8 * kappa * (r + 2) * _positive_log(n**2 * epsilon**2 / (kappa * r * d**2 * lg), "Corollary F.3")
    return _theory("Corollary F.3", 1 / (4 * ell * (r + 2)), T, L * d,
                   (2 * L / (ell * math.sqrt(d))) * math.sqrt(r * lg) / (n * epsilon), epsilon, delta)


def dpzero_from_theory(*, n: int, d: int, r: float, L: float, ell: float, epsilon: float, delta: float,
                       kappa: float | None = None) -> TheoryParameters:
    """Theorem 3 (A3.5) or, with κ, Corollary F.4 (PL), for DPZero.

    Theorem 3: L̃² = L²·log(2√(2π)·d(r+2)n³ε²/(r log(e+ε/δ))), α = 1/(4ℓ(r+2)),
    T = max(n(r+2)ε/(4√(r log(e+ε/δ))), 1), C = 4L̃,
    λ = (1/(ℓd))·min{4(2−√2)L̃, (L/√d)(√(r log(e+ε/δ))/(nε))^{1/2}} — so that C ≥ C₀ + ℓλd/2 with
    C₀ = 2√2·L̃ the no-clip threshold (Appendix E).
    """
    lg = _log_term(epsilon, delta)
    if kappa is None:
        L_tilde = L * math.sqrt(_positive_log(
            2 * math.sqrt(2 * math.pi) * d * (r + 2) * n**3 * epsilon**2 / (r * lg), "Theorem 3"))
        lam = min(4 * (2 - math.sqrt(2)) * L_tilde,
                  (L / math.sqrt(d)) * math.sqrt(math.sqrt(r * lg) / (n * epsilon))) / (ell * d)
        return _theory("Theorem 3", 1 / (4 * ell * (r + 2)), n * (r + 2) * epsilon / (4 * math.sqrt(r * lg)),
                       4 * L_tilde, lam, epsilon, delta)
    L_tilde = 8 * L * math.sqrt(_positive_log(
        32 * math.sqrt(2 * math.pi) * kappa * n**3 * d * (r + 2) * epsilon**2 / (r * lg), "Corollary F.4"))
    lam = min((2 - math.sqrt(2)) * L_tilde, (4 * L / math.sqrt(d)) * math.sqrt(r * lg) / (n * epsilon)) / (2 * ell * d)
    T = 8 * kappa * (r + 2) * _positive_log(n**2 * epsilon**2 / (kappa * r * lg), "Corollary F.4")
    return _theory("Corollary F.4", 1 / (4 * ell * (r + 2)), T, L_tilde / 2, lam, epsilon, delta)
