"""Kornowski–Liu–Talwar, "Improved sample complexity for private nonsmooth nonconvex optimization" (v2).

Private O2NC (Algorithm 2) is :func:`dpnc.algorithms.o2nc.o2nc` with ``block=M`` and no reset, driven by
one of three private oracles for the uniform-ball smoothing F_α (its (α, β)-stationary points are
(2α, β)-stationary for F, Lemma 2.4):

* :class:`ZerothOrderOracle` (Algorithm 3, Theorem 3.1): one pass over the data; periods of Σ steps, each
  opening with an anchor estimate (eq. (4), m sphere directions per example) on B1 = Σ fresh examples,
  then adding on B2 = 1 fresh example per step the difference of two estimates at z_t and z_{t−1} with
  independent directions; tree noise per period (:class:`~dpnc.algorithms.oracles.TreeOracle`).
* :class:`FirstOrderOracle` (Algorithm 5, Theorem 6.1): the same with gradients at uniform points of the
  α-ball (one per example at the anchor, m at the increments).
* :class:`MultiPassOracle` (Algorithm 4, Theorem 4.1): ERM; every step reads all n examples; a noisy
  anchor (σ₁) every Σ steps and a noisy increment (σ₂) at the others, added to the previous *noisy*
  estimate; the Gaussian releases compose (zCDP split evenly between the two kinds).

Privacy modes (spec seed002_003 §2.6, §7 A18):

* ``"safe"`` (default; not in the paper): every example's anchor term is clipped to s_a·B1/2 and every
  increment to s_v·B2/2, so the replace-one sensitivities s_a, s_v hold deterministically and the run
  is (ε, δ)-DP with no high-probability event. m defaults to the fewest directions whose estimation
  variance does not exceed the privacy noise's; any m is private.
* ``"paper"``: no clipping. The sensitivities hold with probability ≥ 1 − δ/2 over the directions
  *if* m is at least the paper's m (Lemmas 3.4–3.5, 4.3, 6.3–6.4; with the spec's §7 A10 union bound
  for multi-pass), which is astronomically large for the zeroth-order oracles; a smaller m is refused.
  The mechanism gets δ/2, the concentration event the other δ/2.

Sensitivities (replace-one, spec §2.6, constants exposed): s_a = 3L/B (2L/B, plus L/B for the
estimation error) and s_v = (4c_H + 1)·L√d·D/(α·B), because f_α is c_H·L√d/α-smooth and
‖z_t − z_{t−1}‖ ≤ 2D (checked at every step). Noise: single pass, σ = 4·max(s_a, s_v)·√(Lvl·ln(1/δ'))/ε
(Prop 2.5, Lvl = ⌊log₂Σ⌋ + 1, δ' the mechanism's δ); multi-pass, σ₁ = s_a√(A/ρ*), σ₂ = s_v√((T−A)/ρ*)
with A anchors and ρ* the zCDP budget of (ε, δ'). The accountant records every release and answers
with RDP and PLD, which are tighter than Prop 2.5.

Schedules are v2's (seed 003); ``schedule="v1-legacy"`` gives v1's Σ and D, whose guarantee rested on a
miscalculation the authors withdrew: reproduction only, no guarantee attached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from dpnc.algorithms.o2nc import O2NCResult, o2nc
from dpnc.algorithms.oracles import OracleStats, TreeOracle, check_move
from dpnc.certify import Certificate, goldstein_certificate
from dpnc.clipping import clip_vectors
from dpnc.estimators import ball_gradient_estimate, diff_estimate, grad_estimate
from dpnc.privacy.accountant import Accountant, PrivacyReport
from dpnc.privacy.budget import check_delta, check_epsilon, epsilon_to_rho
from dpnc.privacy.calibrate import klt_tree_sigma, zcdp_gaussian_sigma
from dpnc.privacy.mechanisms import gaussian_mechanism
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import Gaussian
from dpnc.privacy.tree import leaf_participation
from dpnc.problems.base import Problem

ORACLES = ("zeroth-order", "first-order", "multi-pass")
MODES = ("safe", "paper")
SCHEDULES = ("v2", "v1-legacy")
CALIBRATIONS = ("zcdp", "prop-2.5")


@dataclass(frozen=True)
class Constants:
    """What the paper leaves inside Θ̃/Õ (spec §7 A5), with the spec's §2.6 defaults.

    Attributes:
        c_H: f_α is c_H·L√d/α-smooth (Fact 2.3(iii)).
        c: the norm-sub-Gaussian Hoeffding constant in the paper's m.
        c_D, c_T: multi-pass D = c_D·αβ²/L² and T = c_T·ΦL²/(αβ³).
    """

    c_H: float = 1.0
    c: float = 1.0
    c_D: float = 1.0
    c_T: float = 1.0


@dataclass(frozen=True)
class Parameters:
    """One run's settings (spec §2.6 notation; ``alpha`` is the paper's smoothing radius α).

    Attributes:
        oracle, mode, schedule: see :data:`ORACLES`, :data:`MODES`, :data:`SCHEDULES`.
        n: the dataset size the schedule was made for.
        T: O2NC steps; M: block length (K = ⌊T/M⌋ blocks); Sigma: period Σ (steps per tree / per anchor).
        B1, B2: examples per anchor and per increment (multi-pass: both n).
        D, eta: the learner's ball radius and step D/(G₁√M).
        m: directions (zeroth-order) or ball points (first-order) per example.
        sigma_anchor, sigma_increment: noise std (single pass: both the tree node's σ).
        s_anchor, s_increment: replace-one sensitivities of an anchor and of an increment.
        epsilon, dp_delta: the (ε, δ) target.
        beta: multi-pass only: the target β the schedule was made for (after any ``max_steps`` cap).
        common_directions: increments use the same directions at z_t and z_{t−1} (DIFF, ZTC
            Algorithm 2) instead of the paper's independent ones (spec §7 A14; unanalysed by the paper).
        constants: the constants used.
    """

    oracle: str
    mode: str
    schedule: str
    n: int
    T: int
    M: int
    Sigma: int
    B1: int
    B2: int
    D: float
    eta: float
    alpha: float
    m: int
    sigma_anchor: float
    sigma_increment: float
    s_anchor: float
    s_increment: float
    epsilon: float
    dp_delta: float
    beta: float | None = None
    common_directions: bool = False
    constants: Constants = Constants()

    @property
    def K(self) -> int:
        return self.T // self.M

    @property
    def anchors(self) -> int:
        """Anchor steps A = ⌈T/Σ⌉."""
        return -(-self.T // self.Sigma)

    @property
    def samples(self) -> int:
        """Examples read once each (single pass: B1·A + B2·(T − A) ≤ 2T + Σ ≤ n); multi-pass: n."""
        if self.oracle == "multi-pass":
            return self.n
        return self.B1 * self.anchors + self.B2 * (self.T - self.anchors)

    @property
    def mechanism_delta(self) -> float:
        """The δ the noise is calibrated for: all of it in safe mode, half in paper mode (§7 A7)."""
        return self.dp_delta / 2 if self.mode == "paper" else self.dp_delta

    @property
    def anchor_radius(self) -> float:
        """Per-example radius r with 2r/B1 = s_a (safe mode clips to it)."""
        return self.s_anchor * self.B1 / 2

    @property
    def increment_radius(self) -> float:
        """Per-example radius r with 2r/B2 = s_v."""
        return self.s_increment * self.B2 / 2


# --- schedules ---------------------------------------------------------------------------------------


def sensitivities(*, d: int, L: float, alpha: float, D: float, B1: int, B2: int, c_H: float = 1.0
                  ) -> tuple[float, float]:
    """(s_a, s_v) = (3L/B1, (4c_H + 1)·L√d·D/(α·B2)), spec §2.6."""
    return 3 * L / B1, (4 * c_H + 1) * L * math.sqrt(d) * D / (alpha * B2)


def paper_directions(oracle: str, *, d: int, alpha: float, D: float, B1: int, B2: int, delta: float,
                     T: int | None = None, c: float = 1.0) -> int:
    """The m for which the paper's high-probability sensitivities hold (spec §2.6 steps 4 and multi-pass).

    Zeroth-order: c²·ln(8d·max(B1, B2)/δ)·max(d²B1², dα²B2²/D²) (Lemma 3.5); first-order:
    c²·ln(8dB2/δ)·α²B2²/(D²d) (Lemma 6.4); multi-pass (B1 = B2 = n): the zeroth-order form with the
    union bound over the T steps a sample is reused in, ln(8dnT/δ) (§7 A10).
    """
    if oracle == "first-order":
        return max(1, math.ceil(c**2 * math.log(8 * d * B2 / delta) * alpha**2 * B2**2 / (D**2 * d)))
    union = 8 * d * max(B1, B2) * (T if oracle == "multi-pass" else 1)
    return math.ceil(c**2 * math.log(union / delta) * max(d**2 * B1**2, d * alpha**2 * B2**2 / D**2))


def variance_directions(oracle: str, *, d: int, L: float, Sigma: int, B1: int, B2: int,
                        sigma_anchor: float, sigma_increment: float) -> int:
    """The fewest m whose estimation variance is at most the privacy noise's (safe mode's default).

    Single pass (Lemma 3.6 / 6.5): L²d²(1/B1 + Σ/B2)/m ≤ σ²·d·Lvl for zeroth order, without the d² for
    first order. Multi-pass (Thm 4.1): m = L²dΣ/(nσ₁²) + L²d/(nσ₂²).
    """
    if oracle == "multi-pass":
        m = L**2 * d * Sigma / (B1 * sigma_anchor**2) + L**2 * d / (B2 * sigma_increment**2)
    else:
        dims = d**2 if oracle == "zeroth-order" else 1
        m = L**2 * dims * (1 / B1 + Sigma / B2) / (sigma_anchor**2 * d * leaf_participation(Sigma))
    return max(1, math.ceil(m))


def second_moment(p: Parameters, *, d: int, L: float) -> float:
    """G₁² ≥ E‖g̃_t‖² (Lemmas 3.6, 4.4, 6.5 with constants 1, spec §2.6 step 5)."""
    if p.oracle == "multi-pass":
        return (L**2 + L**2 * d**2 * p.Sigma / (p.m * p.n) + p.sigma_anchor**2 * d
                + p.sigma_increment**2 * d * p.Sigma)
    dims = d**2 if p.oracle == "zeroth-order" else 1
    return (L**2 + L**2 * dims / (p.B1 * p.m) + L**2 * d * p.D**2 * p.Sigma / (p.alpha**2 * p.B2)
            + p.sigma_anchor**2 * d * leaf_participation(p.Sigma) + L**2 * dims * p.Sigma / (p.m * p.B2))


def single_pass_radius(*, n_steps: int, d: int, L: float, Phi: float, alpha: float, epsilon: float,
                       schedule: str = "v2") -> float:
    """D of Theorem 3.1 with constants 1 (v2: the min of four terms; v1: of the first three)."""
    T = n_steps
    terms = [(Phi**2 * alpha / (L**2 * T**2)) ** (1 / 3),
             (Phi * alpha * epsilon / (d * L * T)) ** 0.5,
             (Phi**3 * alpha**2 * epsilon / (d**1.5 * L**3 * T**3)) ** 0.2]
    if schedule == "v2":
        terms.append((Phi**2 * alpha / (L**2 * T**2 * math.sqrt(d))) ** (1 / 3))
    return min(terms)


def single_pass_parameters(oracle: str, *, n: int, d: int, L: float, Phi: float, alpha: float, epsilon: float,
                           dp_delta: float, mode: str = "safe", m: int | None = None, schedule: str = "v2",
                           calibration: str = "zcdp", common_directions: bool = False,
                           constants: Constants = Constants()) -> Parameters:
    """Theorem 3.1 (zeroth order) or 6.1 (first order) for n examples, spec §2.6 steps 1–5.

    ``calibration="zcdp"`` (default) sets the tree's σ so that its Lvl node releases spend exactly the
    zCDP budget of (ε, δ'): σ = s·√(Lvl/(2ρ*)), about 3× less noise than Prop 2.5's
    ``"prop-2.5"``: σ = 4s·√(Lvl·ln(1/δ'))/ε, which the accountant shows to be loose.
    """
    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}; got {calibration!r}")
    _check(oracle=oracle, mode=mode, schedule=schedule, n=n, d=d, L=L, Phi=Phi, alpha=alpha,
           epsilon=epsilon, dp_delta=dp_delta)
    if oracle == "multi-pass":
        raise ValueError("use multi_pass_parameters for the multi-pass oracle")
    if n < 3:
        raise ValueError(f"a single pass needs n >= 3 examples (2T + Σ <= n); got {n}")
    T = n // 2
    D = single_pass_radius(n_steps=T, d=d, L=L, Phi=Phi, alpha=alpha, epsilon=epsilon, schedule=schedule)
    spread = (alpha / (epsilon * D)) ** (2 / 3) + (alpha / (D * math.sqrt(d)) if schedule == "v2" else 0.0)
    Sigma = min(T, max(1, math.ceil(spread)))
    T = max(1, (n - Sigma) // 2)
    Sigma = min(Sigma, T)
    s_a, s_v = sensitivities(d=d, L=L, alpha=alpha, D=D, B1=Sigma, B2=1, c_H=constants.c_H)
    delta_mech = dp_delta / 2 if mode == "paper" else dp_delta
    if calibration == "prop-2.5":
        sigma = klt_tree_sigma(max(s_a, s_v), Sigma, epsilon, delta_mech)
    else:
        sigma = zcdp_gaussian_sigma(max(s_a, s_v), epsilon_to_rho(epsilon, delta_mech) / leaf_participation(Sigma))
    p = Parameters(oracle, mode, schedule, n, T, _block(alpha, D, T), Sigma, Sigma, 1, D, 0.0, alpha, 1, sigma,
                   sigma, s_a, s_v, epsilon, dp_delta, None, common_directions, constants)
    return _with_directions(p, m, d=d, L=L)


def implied_beta(*, n: int, d: int, L: float, Phi: float, alpha: float, epsilon: float) -> float:
    """β* = (L·d^{3/4}·√Φ/(ε·√α·n))^{2/3}, the β Theorem 4.1 reaches with n examples (constants 1)."""
    return (L * d**0.75 * math.sqrt(Phi) / (epsilon * math.sqrt(alpha) * n)) ** (2 / 3)


def multi_pass_parameters(*, n: int, d: int, L: float, Phi: float, alpha: float, epsilon: float, dp_delta: float,
                          beta: float | None = None, mode: str = "safe", m: int | None = None,
                          max_steps: int | None = None, common_directions: bool = False,
                          constants: Constants = Constants()) -> Parameters:
    """Theorem 4.1 with the spec's dimensionally consistent D = c_D·αβ²/L², T = c_T·ΦL²/(αβ³) (§7 A9).

    β defaults to :func:`implied_beta`, but never below L·√(d/n), the population gap of Prop 5.1 that
    no ERM accuracy can beat. ``max_steps`` caps T (the cost is T·n·2m evaluations) by raising β to
    the accuracy that many steps can reach, (c_T·ΦL²/(α·max_steps))^{1/3}. Noise: σ₁ = s_a·√(A/ρ*) and
    σ₂ = s_v·√((T−A)/ρ*), half the zCDP budget ρ* of (ε, δ') on each kind of step (all of it on the
    anchors when Σ = 1 leaves no increments).
    """
    _check(oracle="multi-pass", mode=mode, schedule="v2", n=n, d=d, L=L, Phi=Phi, alpha=alpha,
           epsilon=epsilon, dp_delta=dp_delta)
    if beta is None:
        beta = max(implied_beta(n=n, d=d, L=L, Phi=Phi, alpha=alpha, epsilon=epsilon), L * math.sqrt(d / n))
    if max_steps is not None:
        _positive(max_steps=max_steps)
        beta = max(beta, (constants.c_T * Phi * L**2 / (alpha * max_steps)) ** (1 / 3))
    _positive(beta=beta)
    D = constants.c_D * alpha * beta**2 / L**2
    T = max(1, math.floor(constants.c_T * Phi * L**2 / (alpha * beta**3) * (1 + 1e-12)))
    Sigma = min(T, max(1, math.ceil(alpha / (D * math.sqrt(d)))))
    s_a, s_v = sensitivities(d=d, L=L, alpha=alpha, D=D, B1=n, B2=n, c_H=constants.c_H)
    anchors = -(-T // Sigma)
    rho = epsilon_to_rho(epsilon, dp_delta / 2 if mode == "paper" else dp_delta)
    share = rho / 2 if T > anchors else rho  # Σ = 1: every step is an anchor and takes the whole budget
    sigma1 = zcdp_gaussian_sigma(s_a, share / anchors)
    sigma2 = zcdp_gaussian_sigma(s_v, share / max(T - anchors, 1))
    p = Parameters("multi-pass", mode, "v2", n, T, _block(alpha, D, T), Sigma, n, n, D, 0.0, alpha, 1, sigma1,
                   sigma2, s_a, s_v, epsilon, dp_delta, beta, common_directions, constants)
    return _with_directions(p, m, d=d, L=L)


def from_theory(oracle: str, *, n: int, d: int, L: float, Phi: float, alpha: float, epsilon: float,
                dp_delta: float, **options) -> Parameters:
    """Theorem 3.1 (``"zeroth-order"``), 6.1 (``"first-order"``) or 4.1 (``"multi-pass"``) for n examples.

    ``Phi`` bounds F(x₀) − inf F, ``alpha`` is the smoothing radius (the output is (2α, β)-stationary);
    ``options`` go to :func:`single_pass_parameters` or :func:`multi_pass_parameters`.
    """
    if oracle == "multi-pass":
        return multi_pass_parameters(n=n, d=d, L=L, Phi=Phi, alpha=alpha, epsilon=epsilon, dp_delta=dp_delta,
                                     **options)
    return single_pass_parameters(oracle, n=n, d=d, L=L, Phi=Phi, alpha=alpha, epsilon=epsilon, dp_delta=dp_delta,
                                  **options)


def rate(oracle: str, *, n: int, d: int, L: float, Phi: float, alpha: float, epsilon: float,
         schedule: str = "v2") -> float:
    """The theorems' bound on E‖∂F(x_out)‖_2α with constants 1 (Õ(·) without logs).

    Single pass (Thm 3.1/6.1, v2): (ΦL²√d/(nα))^{1/3} + (ΦdL/(nαε))^{1/2} + (Φ²L³d^{3/2}/(n²α²ε))^{1/5};
    v1 drops the √d of the first term. Multi-pass (Thm 4.1, empirical F̂): β* of :func:`implied_beta`.
    """
    if oracle == "multi-pass":
        return implied_beta(n=n, d=d, L=L, Phi=Phi, alpha=alpha, epsilon=epsilon)
    root_d = math.sqrt(d) if schedule == "v2" else 1.0
    return ((Phi * L**2 * root_d / (n * alpha)) ** (1 / 3) + (Phi * d * L / (n * alpha * epsilon)) ** 0.5
            + (Phi**2 * L**3 * d**1.5 / (n**2 * alpha**2 * epsilon)) ** 0.2)


def samples_needed(oracle: str, *, beta: float, d: int, L: float, Phi: float, alpha: float, epsilon: float) -> float:
    """n for E‖∂F‖_2α ≤ β up to constants: ΦL²√d/(αβ³) + ΦLd/(εαβ²) (single pass, v2; the abstract's
    rate) or √Φ·L·d^{3/4}/(ε·√α·β^{3/2}) (multi-pass, empirical)."""
    if oracle == "multi-pass":
        return math.sqrt(Phi) * L * d**0.75 / (epsilon * math.sqrt(alpha) * beta**1.5)
    return Phi * L**2 * math.sqrt(d) / (alpha * beta**3) + Phi * L * d / (epsilon * alpha * beta**2)


def population_gap(*, n: int, d: int, L: float, diameter: float, zeta: float = 0.05, C: float = 1.0) -> float:
    """Prop 5.1's ‖∂F‖ − ‖∂F̂‖ ≤ C·L·√(d·ln(R/ζ)/n) with probability 1 − ζ, R the diameter of the outputs'
    set (2DT for O2NC). C is unknown ("up to constants/logs", spec §5): a label, not a certificate."""
    return C * L * math.sqrt(d * math.log(max(math.e, diameter / zeta)) / n)


def _block(alpha: float, D: float, T: int) -> int:
    """M = ⌊α/(4D)⌋ clamped to [1, T], so every block point is within MD ≤ α/4 of its average."""
    return int(min(max(math.floor(alpha / (4 * D)), 1), T))


def _with_directions(p: Parameters, m: int | None, *, d: int, L: float) -> Parameters:
    """Set m (safe: the variance-matching m unless given; paper: the paper's m, refusing less) and η."""
    needed = paper_directions(p.oracle, d=d, alpha=p.alpha, D=p.D, B1=p.B1, B2=p.B2, delta=p.dp_delta,
                              T=p.T, c=p.constants.c)
    if p.mode == "paper":
        if m is not None and m < needed:
            raise ValueError(f"paper mode needs m >= {needed} directions for its high-probability sensitivity "
                             f"(got m={m}); use mode='safe' (per-example clipping) with a smaller m")
        m = needed if m is None else m
    elif m is None:
        m = variance_directions(p.oracle, d=d, L=L, Sigma=p.Sigma, B1=p.B1, B2=p.B2,
                                sigma_anchor=p.sigma_anchor, sigma_increment=p.sigma_increment)
    if not isinstance(m, int) or isinstance(m, bool) or m < 1:
        raise ValueError(f"m must be an integer >= 1; got {m!r}")
    p = replace(p, m=m)
    return replace(p, eta=p.D / math.sqrt(second_moment(p, d=d, L=L) * p.M))


# --- the oracles -------------------------------------------------------------------------------------


class _Terms:
    """Per-example estimates and their (safe-mode) clipped means, shared by the three oracles."""

    p: Parameters
    problem: Problem
    generator: torch.Generator
    stats: OracleStats
    CHUNK = 1 << 21  # values per batched call: bounds memory when all n examples are read

    def _estimate(self, w: torch.Tensor, index: torch.Tensor, m: int) -> torch.Tensor:
        """Per-example estimates of ∇f_α(w; ξ_i), shape (b, d)."""
        if self.p.oracle == "first-order":
            return self.stats.add(ball_gradient_estimate(self.problem, w, index, self.p.alpha, m=m,
                                                         generator=self.generator)).per_example
        return self.stats.add(grad_estimate(self.problem, w, index, self.p.alpha, m=m,
                                            generator=self.generator)).per_example

    def _difference(self, w: torch.Tensor, w_prev: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        if self.p.common_directions and self.p.oracle != "first-order":
            return self.stats.add(diff_estimate(self.problem, w, w_prev, index, self.p.alpha, m=self.p.m,
                                                generator=self.generator)).per_example
        return self._estimate(w, index, self.p.m) - self._estimate(w_prev, index, self.p.m)

    def _mean(self, per_example, index: torch.Tensor, radius: float) -> torch.Tensor:
        """(1/b)·Σ_i of ``per_example(chunk)``, each clipped to ``radius`` in safe mode, in chunks."""
        size = max(1, self.CHUNK // (2 * self.p.m * self.problem.dim))
        total = 0.0
        for chunk in index.split(size):
            terms = per_example(chunk)
            norms = torch.linalg.vector_norm(terms, dim=-1)
            self.stats.beyond_radius += int((norms > radius).sum())
            if self.p.mode == "safe":
                terms, _ = clip_vectors(terms, radius)
            total = total + terms.sum(0)
        return total / len(index)


class ZerothOrderOracle(_Terms, TreeOracle):
    """Algorithm 3: anchors on B1 = Σ examples, increments on B2 = 1, tree noise per period, one pass."""

    KIND = "zeroth-order"

    def __init__(self, problem: Problem, p: Parameters, **kwargs) -> None:
        if p.oracle != self.KIND:
            raise ValueError(f"parameters are for the {p.oracle!r} oracle, not {self.KIND!r}")
        self.p = p
        super().__init__(problem, period=p.Sigma, B1=p.B1, B2=p.B2, sensitivity=max(p.s_anchor, p.s_increment),
                         sigma=p.sigma_anchor, max_move=2 * p.D, label=f"klt-{self.KIND}-periods",
                         samples=p.samples, **kwargs)

    def anchor(self, w, index):
        return self._mean(lambda chunk: self._estimate(w, chunk, self._anchor_points), index, self.p.anchor_radius)

    def increment(self, w, w_prev, index):
        return self._mean(lambda chunk: self._difference(w, w_prev, chunk), index, self.p.increment_radius)

    @property
    def _anchor_points(self) -> int:
        return self.p.m


class FirstOrderOracle(ZerothOrderOracle):
    """Algorithm 5: as Algorithm 3 with gradients at uniform points of the α-ball (one per anchor example)."""

    KIND = "first-order"

    @property
    def _anchor_points(self) -> int:
        return 1


class MultiPassOracle(_Terms):
    """Algorithm 4: all n examples at every step; g̃_t = g̃_{t−1} + increment + N(0, σ₂²I), and every Σ
    steps a fresh anchor + N(0, σ₁²I). Each release is a Gaussian on the whole dataset: they compose."""

    def __init__(self, problem: Problem, p: Parameters, *, noise: NoiseSource, accountant: Accountant,
                 generator: torch.Generator) -> None:
        if p.oracle != "multi-pass":
            raise ValueError(f"parameters are for the {p.oracle!r} oracle, not 'multi-pass'")
        if problem.n != p.n:
            raise ValueError(f"the parameters were made for n={p.n} examples; the problem has {problem.n}")
        self.problem, self.p, self.noise, self.accountant, self.generator = problem, p, noise, accountant, generator
        self.index = torch.arange(problem.n)
        self.releases = (Gaussian(p.s_anchor, p.sigma_anchor), Gaussian(p.s_increment, p.sigma_increment))
        self.stats = OracleStats()
        self.g = self.w_prev = None

    def __call__(self, t: int, w: torch.Tensor) -> torch.Tensor:
        if (t - 1) % self.p.Sigma == 0:
            value = self._mean(lambda chunk: self._estimate(w, chunk, self.p.m), self.index, self.p.anchor_radius)
            release = self.releases[0]
        else:
            check_move(w, self.w_prev, 2 * self.p.D)
            value = self.g + self._mean(lambda chunk: self._difference(w, self.w_prev, chunk), self.index,
                                        self.p.increment_radius)
            release = self.releases[1]
        self.g, release = gaussian_mechanism(value, release, self.noise)
        self.accountant.record(release)
        self.w_prev = w
        return self.g


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
    lipschitz: float

    def report(self) -> PrivacyReport:
        """The accountant's ε at the mechanism's δ, and what the paper's guarantee rests on."""
        p = self.parameters
        if p.mode == "safe":
            claim = (f"(ε, δ) = ({p.epsilon:g}, {p.dp_delta:g}) with the sensitivities enforced by per-example "
                     "clipping (safe mode): no high-probability event")
        else:
            claim = (f"(ε, δ) = ({p.epsilon:g}, {p.dp_delta:g}) *conditional* on the sensitivity bounds holding, "
                     f"an event of probability ≥ 1 − δ/2 over the directions (m = {p.m}); the mechanism "
                     f"below is accounted at δ/2 = {p.mechanism_delta:g}. Per-example terms beyond the "
                     f"radius in this run: {self.stats.beyond_radius}")
        return self.accountant.report(p.mechanism_delta, paper_claim=claim)

    def certificate(self, held_out: Problem, *, samples: int = 64,
                    generator: torch.Generator | None = None) -> Certificate:
        """Certified bound on ‖∂F^H(x_out)‖_2α on held-out data H (spec §5): exact gradients at the output's
        block points (within MD ≤ α/4 of it, if kept) and at uniform points of the 2α-ball. Free of privacy
        cost when H is not the training data."""
        return goldstein_certificate(held_out.gradient, self.output, 2 * self.parameters.alpha,
                                     points=self.o2nc.output_points, samples=samples, generator=generator)

    def population_gap(self, *, zeta: float = 0.05, C: float = 1.0) -> float:
        """Prop 5.1's term for a multi-pass run (outputs lie in B(x₀, DT)), up to the unknown constant C."""
        p = self.parameters
        return population_gap(n=p.n, d=self.output.shape[0], L=self.lipschitz, diameter=2 * p.D * p.T,
                              zeta=zeta, C=C)


def optimize(problem: Problem, p: Parameters, x0: torch.Tensor, *, generator: torch.Generator,
             noise: NoiseSource | None = None, accountant: Accountant | None = None, keep_points: bool = False,
             progress: bool = False) -> Result:
    """Private O2NC (Algorithm 2) with the oracle ``p.oracle`` on ``problem``'s data.

    ``generator`` is the public stream (directions, ball points, s_t, the output block); privacy noise
    comes from ``noise`` (a secret :class:`NoiseSource` by default).
    """
    noise = NoiseSource() if noise is None else noise
    accountant = Accountant("replace-one") if accountant is None else accountant
    if p.oracle == "multi-pass":
        oracle = MultiPassOracle(problem, p, noise=noise, accountant=accountant, generator=generator)
    else:
        oracle_class = ZerothOrderOracle if p.oracle == "zeroth-order" else FirstOrderOracle
        oracle = oracle_class(problem, p, noise=noise, accountant=accountant, generator=generator)
    trace = o2nc(oracle, x0.to(torch.float64), D=p.D, eta=p.eta, steps=p.T, block=p.M, reset_each_block=False,
                 generator=generator, keep_points=keep_points, progress=progress)
    used = p.n if p.oracle == "multi-pass" else oracle.data.used
    return Result(trace.output, trace, p, oracle.stats, accountant, used, problem.lipschitz)


def _check(*, oracle, mode, schedule, **numbers) -> None:
    for name, value, allowed in (("oracle", oracle, ORACLES), ("mode", mode, MODES), ("schedule", schedule, SCHEDULES)):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}; got {value!r}")
    for name in ("n", "d"):
        v = numbers.pop(name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {v!r}")
    check_epsilon(numbers.pop("epsilon"))
    check_delta(numbers.pop("dp_delta"), "dp_delta")
    _positive(**numbers)


def _positive(**values) -> None:
    for name, v in values.items():
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a finite number > 0; got {v!r}")
