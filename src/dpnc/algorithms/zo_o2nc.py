"""Private zeroth-order nonsmooth nonconvex optimization (Zhang, Tran & Cutkosky, ICLR 2024).

O2NC (:mod:`dpnc.algorithms.o2nc`) driven by a private oracle on the uniform smoothing F̂_δ:

* :class:`VarianceReducedOracle` (Algorithm 4 + the tree mechanism, Algorithm 5): at the first step of
  each epoch GRAD on a fresh batch of B1 examples; then the running sum g_t = g_{t−1} + DIFF(w_t,
  w_{t−1}) on fresh batches of B2; released as g_t + TREE(t), the tree noise reset each epoch. The
  running sum stays noiseless; noise never feeds back.
* :class:`NaiveOracle` (Algorithm 6, the baseline): GRAD with one direction per example on a fresh batch
  of B, plus independent Gaussian noise, σ = 2dL/(Bρ) (the paper prints dL/(Bρ), off by 2).

Every example is used once (:class:`~dpnc.sampling.SinglePass`), so epochs (and the naive oracle's
steps) are on disjoint data and are accounted by parallel composition: the whole run costs one epoch.

Privacy is stated as in the paper: "(α, αρ²/2)-RDP for all α > 1", i.e. ρ²/2-zCDP. ``rho`` below is
always the paper's ρ; the accountant reports zCDP ρ_zCDP = ρ²/2 and ε(δ) by RDP and PLD.

Corrections taken from spec seed000 §6 (``paper=True`` gives the printed version where it differs):
T uses max, not min (§6.1); σ uses the exact per-leaf node count ⌊log₂T⌋ + 1 and max(s₁, s₂) (§6.2–3);
the guarantee is (2δ, ε)-stationarity of F in expectation (§6.4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from dpnc.algorithms.o2nc import O2NCResult, o2nc
from dpnc.algorithms.oracles import OracleStats, SinglePassOracle, TreeOracle
from dpnc.estimators import diff_estimate, grad_estimate
from dpnc.privacy.accountant import Accountant, PrivacyReport, new_partition
from dpnc.privacy.budget import epsilon_to_rho
from dpnc.privacy.calibrate import ztc_tree_sigma
from dpnc.privacy.mechanisms import gaussian_mechanism
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import Gaussian
from dpnc.privacy.tree import leaf_participation
from dpnc.problems.base import Problem

# --- parameters ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Parameters:
    """One run's settings. ``oracle`` is ``"variance-reduced"`` (B1, B2, T) or ``"naive"`` (B = B1).

    Attributes:
        T: steps per epoch (the tree's leaves; the O2NC block length).
        K: epochs.
        B1, B2: batch of the epoch's first step (GRAD) and of the others (DIFF); naive: B1 = B2 = B.
        D: the learner's ball radius, δ/T so that every w of an epoch lies within δ of its average.
        eta: the projected-OGD step D/(G√T).
        delta: the smoothing radius δ (the output is (2δ, ·)-stationary for F).
        m: sphere directions per example (the paper: d for Algorithm 4, 1 for Algorithm 6).
        sigma: the noise std of every tree node (or of every naive release).
        rho: the paper's ρ: the run is (α, αρ²/2)-RDP.
    """

    oracle: str
    T: int
    K: int
    B1: int
    B2: int
    D: float
    eta: float
    delta: float
    m: int
    sigma: float
    rho: float

    @property
    def samples(self) -> int:
        """Examples used: K(B1 + B2(T − 1)) (each once)."""
        return self.K * (self.B1 + self.B2 * (self.T - 1))

    @property
    def steps(self) -> int:
        return self.K * self.T


def paper_rho(epsilon: float, dp_delta: float) -> float:
    """The paper's ρ whose ρ²/2-zCDP gives exactly (ε, δ)-DP (optimal conversion)."""
    return math.sqrt(2 * epsilon_to_rho(epsilon, dp_delta))


def sensitivities(d: int, L: float, T: int, B1: int, B2: int) -> tuple[float, float]:
    """Replace-one sensitivities of the epoch's terms (Lemmas 3.1–3.2, Cor 4.4).

    s₁ = 2dL/B1 for the GRAD anchor; s₂ = 2dL·(2D)/(B2·δ) = 4dL/(B2·T) for a DIFF, because O2NC keeps
    ‖w_t − w_{t−1}‖ ≤ 2D = 2δ/T (and the oracle checks it at every step).
    """
    return 2 * d * L / B1, 4 * d * L / (B2 * T)


def variance_bound(d: int, L: float, T: int, B1: int, B2: int, m: int | None = None) -> float:
    """V ≥ E‖∇F̂_δ(w_t) − g_t‖² for the noiseless running sum (Lemma 4.8, any t ≤ T).

    m = d (the paper): V = 16dL²/B1 + 64dL²/(B2·T). Other m: GRAD's (2(d+1)²/m + 8)L²/B1 plus T−1
    DIFFs of (4(d²+d)/m + 8d)L²(2D)²/(B2δ²) each (spec §3, generalisation to m directions).
    """
    m = d if m is None else m
    if m == d:
        return 16 * d * L**2 / B1 + 64 * d * L**2 / (B2 * T)
    grad = (2 * (d + 1) ** 2 / m + 8) * L**2 / B1
    diff = (4 * (d**2 + d) / m + 8 * d) * L**2 * 4 / (B2 * T**2)
    return grad + (T - 1) * diff


def guarantee(p: Parameters, *, d: int, L: float, F_star: float) -> float:
    """A bound on E‖∂F(w̄)‖_{2δ} with explicit constants (Lemma 4.6/Cor 4.7 with D = δ/T; spec §3):

        (F* + 2Lδ)/(δK) + G/√T + cross,   G² ≥ sup E‖g̃_t‖².

    Variance-reduced (Theorem 4.9's proof): G² = 3V + 3L² + 3ℓ_T·d·σ² and cross = 2(√V + √(ℓ_T·d)·σ),
    where V is :func:`variance_bound` and ℓ_T = ⌊log₂T⌋ + 1 bounds the tree's nodes per step.
    Naive (App. E): G² = L² + V + dσ² with V GRAD's variance; the errors g̃_t − ∇F̂_δ(w_t) are martingale
    differences (fresh batch, fresh noise), so cross = √((V + dσ²)/T).
    """
    V, G, ell = _moments(p, d, L)
    if p.oracle == "naive":
        cross = math.sqrt((V + d * p.sigma**2) / p.T)
    else:
        cross = 2 * (math.sqrt(V) + math.sqrt(ell * d) * p.sigma)
    return (F_star + 2 * L * p.delta) / (p.delta * p.K) + G / math.sqrt(p.T) + cross


def _moments(p: Parameters, d: int, L: float) -> tuple[float, float, int]:
    if p.oracle == "naive":
        V = (2 * (d + 1) ** 2 / p.m + 8) * L**2 / p.B1
        return V, math.sqrt(L**2 + V + d * p.sigma**2), 1
    V = variance_bound(d, L, p.T, p.B1, p.B2, p.m)
    ell = leaf_participation(p.T)
    return V, math.sqrt(3 * V + 3 * L**2 + 3 * ell * d * p.sigma**2), ell


def variance_reduced_parameters(*, d: int, L: float, delta: float, rho: float, T: int, K: int,
                                B1: int | None = None, B2: int = 1, m: int | None = None,
                                paper: bool = False) -> Parameters:
    """Parameters for Algorithms 3–5 at a given (T, K): B1 = T + 1 unless given, D = δ/T, σ by Cor 4.4,
    η = D/(G√T). Refuses B1 < T·B2/2, the condition Cor 4.4 needs for s₁ ≤ s₂ (spec §6.2)."""
    _check_ints(d=d, T=T, K=K, B2=B2)
    B1 = T + 1 if B1 is None else B1
    _check_ints(B1=B1)
    if B1 < T * B2 / 2:
        raise ValueError(f"B1 must be >= T·B2/2 = {T * B2 / 2:g} (Cor 4.4: the anchor must not be more "
                         f"sensitive than a DIFF step); got B1={B1}")
    _check_positive(L=L, delta=delta, rho=rho)
    sigma = ztc_tree_sigma(d, L, rho, T, B1, B2, paper=paper)
    p = Parameters("variance-reduced", T, K, B1, B2, delta / T, 0.0, delta, d if m is None else m, sigma, rho)
    return _with_eta(p, d, L)


def naive_parameters(*, d: int, L: float, delta: float, rho: float, T: int, K: int, B: int = 1,
                     m: int = 1) -> Parameters:
    """Parameters for Algorithm 3 with the naive oracle (Algorithm 6): σ = 2dL/(Bρ), D = δ/T."""
    _check_ints(d=d, T=T, K=K, B=B, m=m)
    _check_positive(L=L, delta=delta, rho=rho)
    p = Parameters("naive", T, K, B, B, delta / T, 0.0, delta, m, 2 * d * L / (B * rho), rho)
    return _with_eta(p, d, L)


def _with_eta(p: Parameters, d: int, L: float) -> Parameters:
    _, G, _ = _moments(p, d, L)
    return replace(p, eta=p.D / (G * math.sqrt(p.T)))


def from_theory(*, M: int, d: int, L: float, delta: float, rho: float, F_star: float,
                oracle: str = "variance-reduced", paper: bool = False) -> Parameters:
    """Theorem 4.9 (variance-reduced) or Appendix E (naive) for M samples.

    Variance-reduced: T = max{(√d·LδM/(F*+Lδ))^{2/3}, (d^{3/2}LδM/((F*+Lδ)ρ))^{1/2}} (spec §6.1: max,
    not the printed min, and √d in the first term), B1 = T+1, B2 = 1, K = ⌊M/(2T)⌋.
    Naive: B = 1 and T balancing the App. E bound (F*+Lδ)BT/(δM) + (L/√T)(√(d/B) + 1 + d^{3/2}/(Bρ)),
    i.e. T = (b/(2a))^{2/3}; K = ⌊M/T⌋.
    T is rounded and clamped to [2, M/2] so that K ≥ 1.
    """
    _check_ints(M=M, d=d)
    _check_positive(L=L, delta=delta, rho=rho, F_star=F_star)
    scale = (F_star + L * delta) / (delta * M)
    if oracle == "variance-reduced":
        T1 = (math.sqrt(d) * L / scale) ** (2 / 3)
        T2 = (d**1.5 * L / (scale * rho)) ** 0.5
        T = _clamp_steps(max(T1, T2), M // 2)
        return variance_reduced_parameters(d=d, L=L, delta=delta, rho=rho, T=T, K=M // (2 * T), paper=paper)
    if oracle == "naive":
        b = L * (math.sqrt(d) + 1 + d**1.5 / rho)
        T = _clamp_steps((b / (2 * scale)) ** (2 / 3), M // 2)
        return naive_parameters(d=d, L=L, delta=delta, rho=rho, T=T, K=M // T)
    raise ValueError(f"oracle must be 'variance-reduced' or 'naive'; got {oracle!r}")


def _clamp_steps(T: float, most: int) -> int:
    if most < 2:
        raise ValueError("M must be >= 4 so that an epoch has T >= 2 steps")
    return int(min(max(round(T), 2), most))


# --- the oracles -----------------------------------------------------------------------------------


class _Checked:
    """Refuses parameters made for the other oracle."""

    KIND = ""

    def _check_kind(self, p: Parameters) -> None:
        if p.oracle != self.KIND:
            raise ValueError(f"parameters are for the {p.oracle!r} oracle, not {self.KIND!r}")


class VarianceReducedOracle(TreeOracle, _Checked):
    """Algorithm 4 with tree-aggregated noise (Algorithm 5): epochs of T steps, GRAD anchors on B1,
    DIFF increments on B2 (common directions at w_t and w_{t−1}); epochs on disjoint data (Lemma C.1).
    """

    KIND = "variance-reduced"

    def __init__(self, problem: Problem, p: Parameters, *, clip: bool = True, **kwargs) -> None:
        self._check_kind(p)
        self.p, self.clip = p, clip
        d, L = problem.dim, problem.lipschitz
        super().__init__(problem, period=p.T, B1=p.B1, B2=p.B2, sensitivity=max(sensitivities(d, L, p.T, p.B1, p.B2)),
                         sigma=p.sigma, max_move=2 * p.D, label="zo-o2nc-epochs", samples=p.samples, **kwargs)

    def anchor(self, w, index):
        return self.stats.add(grad_estimate(self.problem, w, index, self.p.delta, m=self.p.m,
                                            generator=self.generator, clip=self.clip)).mean

    def increment(self, w, w_prev, index):
        # The DIFF sensitivity 4dL/(B2·T) holds because TreeOracle refuses ‖w_t − w_{t−1}‖ > 2D.
        return self.stats.add(diff_estimate(self.problem, w, w_prev, index, self.p.delta, m=self.p.m,
                                            generator=self.generator, clip=self.clip)).mean


class NaiveOracle(SinglePassOracle, _Checked):
    """Algorithm 6: GRAD on a fresh batch of B with m (paper: 1) directions each, plus N(0, σ²I).

    Each step's release is on its own batch, so all are recorded under one partition.
    """

    KIND = "naive"

    def __init__(self, problem: Problem, p: Parameters, *, clip: bool = True, **kwargs) -> None:
        self._check_kind(p)
        super().__init__(problem, samples=p.samples, **kwargs)
        self.p, self.clip = p, clip
        self.release = Gaussian(2 * problem.dim * problem.lipschitz / p.B1, p.sigma)
        self.partition = new_partition("zo-o2nc-naive-steps")

    def __call__(self, t: int, w: torch.Tensor) -> torch.Tensor:
        estimate = self.stats.add(grad_estimate(self.problem, w, self.data.take(self.p.B1), self.p.delta,
                                                m=self.p.m, generator=self.generator, clip=self.clip))
        noisy, release = gaussian_mechanism(estimate.mean, self.release, self.noise)
        self.accountant.record(release, partition=self.partition)
        return noisy


# --- a whole run -------------------------------------------------------------------------------------


@dataclass
class Result:
    """A run's output, its O2NC trace, what the oracle spent, and the privacy ledger."""

    output: torch.Tensor
    o2nc: O2NCResult
    parameters: Parameters
    stats: OracleStats
    accountant: Accountant
    samples_used: int
    losses: list[float] = field(default_factory=list)

    def report(self, dp_delta: float) -> PrivacyReport:
        rho = self.parameters.rho
        return self.accountant.report(dp_delta, paper_claim=(
            f"(α, αρ²/2)-RDP with ρ = {rho:.4g}, i.e. {rho**2 / 2:.4g}-zCDP (Theorem 4.9 / Cor 4.4)"))


def optimize(problem: Problem, p: Parameters, x0: torch.Tensor, *, generator: torch.Generator,
             noise: NoiseSource | None = None, accountant: Accountant | None = None, clip: bool = True,
             keep_points: bool = False, progress: bool = False) -> Result:
    """Run O2NC (Algorithm 3) with the oracle named by ``p.oracle`` on ``problem``'s data, once through.

    ``generator`` is the public stream (data order is the dataset's, directions, s_t, the output block);
    privacy noise comes from ``noise`` (a secret :class:`NoiseSource` by default).
    """
    noise = NoiseSource() if noise is None else noise
    accountant = Accountant("replace-one") if accountant is None else accountant
    oracle_class = VarianceReducedOracle if p.oracle == "variance-reduced" else NaiveOracle
    oracle = oracle_class(problem, p, noise=noise, accountant=accountant, generator=generator, clip=clip)
    trace = o2nc(oracle, x0.to(torch.float64), D=p.D, eta=p.eta, steps=p.steps, block=p.T,
                 reset_each_block=True, generator=generator, keep_points=keep_points, progress=progress)
    return Result(trace.output, trace, p, oracle.stats, accountant, oracle.data.used)


def _check_ints(**values) -> None:
    for name, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {v!r}")


def _check_positive(**values) -> None:
    for name, v in values.items():
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a finite number > 0; got {v!r}")
