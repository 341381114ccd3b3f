"""KL-Spider (Menart et al., Algorithm 1, Theorem 1) for smooth (γ, κ)-KL objectives, κ ∈ [1, 2].

Rounds that open with a noisy checkpoint gradient and follow it with variance-reduced noisy
differences (SPIDER), normalised steps of a fixed length r_k, and an adaptive stop once the
estimate is small. The corrected schedule: docs/papers.md, Menart et al. §2.1. Guards, releases
and ``paper``: :class:`~dpnc.algorithms.menart.common.KLConfig`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from dpnc.algorithms.base import Cost, Run, Setting
from dpnc.algorithms.menart.common import (
    AnalysisConstants,
    KLConfig,
    KLStats,
    budget_rho,
    check_config,
    finish,
    guarantee,
    open_queries,
    require,
    setting,
    step,
)
from dpnc.checks import check_choice
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.calibrate import zcdp_gaussian_sigma
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import Relation, mean_sensitivity


@dataclass(frozen=True)
class Round:
    """Round k of KL-Spider: potential Φ̂_k, length T_k, step length r_k, checkpoint and difference
    noise."""

    Phi: float
    T: int
    r: float
    sigma_hat: float
    sigma: float


@dataclass(frozen=True)
class SpiderSchedule:
    """Everything Algorithm 1 fixes before it reads the data (Φ̂_k does not depend on the data)."""

    a: float
    c: float
    bracket: float
    K: int
    beta_prime: float
    Phi_floor: float
    rounds: tuple[Round, ...]

    @property
    def radius(self) -> float:
        """Σ_k T_k·r_k: no iterate leaves this ball around w0 (each step has length exactly r_k)."""
        return sum(r.T * r.r for r in self.rounds)


def spider_schedule(
    *,
    n: int,
    d: int,
    rho: float,
    beta: float,
    gamma: float,
    kappa: float,
    L0: float,
    L1: float,
    F0: float,
    paper: bool = False,
    relation: Relation | str = "replace-one",
    constants: AnalysisConstants = AnalysisConstants(),
) -> SpiderSchedule:
    """Algorithm 1's schedule (Menart et al. §2.1): c, K, β′, Φfloor and (Φ̂_k, T_k, r_k, σ̂_k, σ_k)
    for every round.

    Corrected (default): each round spends ρ/K, ρ/(2K) on its checkpoint (the mean of L0-bounded
    gradients) and ρ/(2K) on its at most T_k − 1 differences (per-example norm ≤ L1·r_k; the round's
    last step issues none), and a round without differences (T_k = 1, always when κ = 2) gives its
    checkpoint all of ρ/K. This tightens §2.1's ρ/(2K·T_k) per difference (which leaves ρ/2 unused
    when κ = 2); every σ is no larger, so Lemma 2 still holds with Cf = 48. ``paper=True``: the
    printed σ̂ = L0√K/(n√ρ) and σ_k = Φ̂_k^{1/κ}√(T_kK)/(γn√ρ). A bracket ≤ 0 means the target
    accuracy is already ≥ F0: K = 0, no round."""
    if not 1 <= kappa <= 2:
        raise ValueError(f"KL-Spider needs kappa in [1, 2]; got {kappa}")
    a = (2 - kappa) / kappa
    c = 1 + F0**a / (constants.descent * gamma**2 * L1)
    nsr = n * math.sqrt(rho)
    bracket = math.log(F0) + kappa * math.log(nsr / (gamma * L0 * math.sqrt(d)))
    if bracket <= 0:
        return SpiderSchedule(a, c, bracket, 0, beta, F0, ())
    K = math.ceil((1 + constants.descent * gamma**2 * L1 / F0**a) * bracket)
    beta_prime = (beta / K) * (gamma * L0 * math.sqrt(K * d) / (nsr * F0 ** (1 / kappa))) ** (
        2 - kappa
    )
    Cf = constants.floor_constant(paper)
    Phi_floor = min(
        (Cf * gamma * L0 * math.sqrt(K * d * math.log(1 / beta_prime)) / nsr) ** kappa, F0
    )
    rounds, Phi = [], F0
    for _ in range(K):
        Phi = max(Phi / c, Phi_floor)
        T = math.ceil((F0 / Phi) ** a - 1e-12)  # guard: (F0/Φ)^0 = 1 must not ceil to 2 by rounding
        r = Phi ** (1 / kappa) / (constants.step * gamma * L1)
        if not paper:
            checkpoint_share = 1 / (2 * K) if T > 1 else 1 / K
            sigma_hat = zcdp_gaussian_sigma(
                mean_sensitivity(L0, n, relation), rho * checkpoint_share
            )
            sigma = (
                zcdp_gaussian_sigma(mean_sensitivity(L1 * r, n, relation), rho / (2 * K * (T - 1)))
                if T > 1
                else math.inf
            )
        else:
            sigma_hat = L0 * math.sqrt(K) / nsr
            sigma = Phi ** (1 / kappa) * math.sqrt(T * K) / (gamma * nsr)
        rounds.append(Round(Phi, T, r, sigma_hat, sigma))
    return SpiderSchedule(a, c, bracket, K, beta_prime, Phi_floor, tuple(rounds))


# The practical schedule's constants (KLSpider.practical): Lemma 9's argument without its slack. A
# step of length r = Φ̂^{1/κ}/(sγL1) along g with ‖g‖ ≥ θ = stop·Φ̂^{1/κ}/γ and ‖g − ∇F‖ ≤
# Φ̂^{1/κ}/(ζγ) lowers F by at least D·Φ̂^{2/κ}/(γ²L1), D = (stop − 1/ζ)/s − 1/(2s²); ζ = 4, stop =
# 1 − 1/ζ, s = 1/(stop − 1/ζ) = 2: D = 1/8.
PRACTICAL = AnalysisConstants(descent=8.0, step=2.0, stop=3 / 4, precision=4.0)


def practical_schedule(
    *,
    n: int,
    d: int,
    rho: float,
    gamma: float,
    kappa: float,
    L0: float,
    L1: float,
    F0: float,
    relation: Relation | str = "replace-one",
    constants: AnalysisConstants = PRACTICAL,
    max_rounds: int = 100_000,
) -> SpiderSchedule:
    """KL-Spider's practical schedule: the theory's rounds, with the number of rounds and every σ
    set by the noise.

    Theorem 1 sets K from its bound, Φfloor = (Cf·γL0√(Kd·log(1/β′))/(n√ρ))^κ, and gives every round
    ρ/K. The bound's constants (descent 64, Cf = 48, the union bound's log(1/β′)) put Φfloor above
    F0 unless n√ρ is huge (Menart et al. §6.11): then every round has Φ̂_k = F0, its stopping
    threshold (7/8γ)·F0^{1/κ} exceeds the gradient, and the run makes no update. Here, with
    ``constants`` (default :data:`PRACTICAL`):

    * Φ̂_k = F0·c^{−k}, c = 1 + F0^a/(descent·γ²L1), T_k = ⌈(F0/Φ̂_k)^a⌉, r_k =
      Φ̂_k^{1/κ}/(step·γL1), as in Theorem 1, and no floor: the last round's Φ̂_K is where the
      budget runs out.
    * Round k's noise makes its gradient error at the expected norm, √(d(σ̂_k² + (T_k − 1)σ_k²)),
      equal to e_k = Φ̂_k^{1/κ}/(ζγ) (Lemma 2's bound, ζ = ``precision``), at the least zCDP cost:
      with Δc the checkpoint's sensitivity (per-example bound L0), Δd_k the differences' (L1·r_k)
      and B = Δc + (T_k−1)Δd_k, σ̂_k² = (e_k²/d)·Δc/B and σ_k² = (e_k²/d)·Δd_k/B, costing ρ_k =
      d·B²/(2e_k²). Early rounds, whose tolerance is large, are cheap; the budget goes where the
      precision is needed.
    * K is the largest number of rounds (≤ ``max_rounds``) with Σ_k ρ_k ≤ ρ, and every σ is then
      scaled by √(Σρ_k/ρ′) ≤ 1, so the schedule spends ρ′ = ρ(1 − 10⁻⁹) (each release's cost
      Δ²/(2σ²), Δ under ``relation``): all of ρ but the margin that keeps the ledger's
      floating-point sum ≤ ρ. K = 0 (no round, the output is w0) when one round alone cannot reach
      its precision within ρ.

    A loose F0 costs only rounds at large Φ̂ that make no update, at little privacy cost. The error
    is met in expectation, not w.p. ≥ 1 − β, so Theorem 1's guarantee does not apply; its
    ``Phi_floor`` field is Φ̂_K (the last round's potential, not a bound) and ``beta_prime`` is NaN.
    """
    if not 1 <= kappa <= 2:
        raise ValueError(f"KL-Spider needs kappa in [1, 2]; got {kappa}")
    a = (2 - kappa) / kappa
    c = 1 + F0**a / (constants.descent * gamma**2 * L1)
    zeta, checkpoint = constants.precision, mean_sensitivity(L0, n, relation)
    plan, total, Phi = [], 0.0, F0
    for _ in range(max_rounds):
        Phi = Phi / c
        T = math.ceil((F0 / Phi) ** a - 1e-12)  # guard: (F0/Φ)^0 = 1 must not ceil to 2 by rounding
        r = Phi ** (1 / kappa) / (constants.step * gamma * L1)
        difference = mean_sensitivity(L1 * r, n, relation)
        e = Phi ** (1 / kappa) / (zeta * gamma)
        B = checkpoint + (T - 1) * difference
        cost = d * B**2 / (2 * e**2)
        if total + cost > rho:
            break
        total += cost
        plan.append((Phi, T, r, difference, e, B))
    if not plan:
        return SpiderSchedule(a, c, 0.0, 0, math.nan, F0, ())
    scale = math.sqrt(
        total / (rho * (1 - 1e-9))
    )  # the ledger's float sum of the costs then stays ≤ ρ
    rounds = tuple(
        Round(
            Phi,
            T,
            r,
            scale * e * math.sqrt(checkpoint / (B * d)),
            scale * e * math.sqrt(difference / (B * d)) if T > 1 else math.inf,
        )
        for Phi, T, r, difference, e, B in plan
    )
    return SpiderSchedule(
        a, c, math.log(F0 / rounds[-1].Phi), len(rounds), math.nan, rounds[-1].Phi, rounds
    )


@dataclass
class SpiderStats(KLStats):
    """KL-Spider's run: its schedule, the updates made in each round, the rounds stopped by the norm
    test, and Theorem 1's bound Φfloor."""

    schedule: SpiderSchedule | None = None
    updates: list[int] = field(default_factory=list)
    rounds_stopped_early: int = 0
    bound: float = math.nan


@dataclass(frozen=True)
class KLSpider(KLConfig):
    """Algorithm 1 (KL-Spider), Theorem 1: w.p. ≥ 1 − β, F(w_out) − F* ≤ Φfloor =
    Õ((γL0√(dK)/(n√ρ))^κ), ρ-zCDP.

    Each round k opens with a checkpoint g = ∇F(w) + N(0, σ̂²I), then while t < T_k and ‖g‖ ≥
    (7/8γ)Φ̂_k^{1/κ} steps w ← w − r_k·g/‖g‖ and updates g by the noisy difference ∇F(w_new) − ∇F(w)
    + N(0, σ_k²I) (skipped after the round's last step). The stop test reads only released values,
    so the output is post-processing of the full schedule's releases, and the ledger charges the
    full schedule (exactly ρ when calibrated) whether or not a round stops early: a realised,
    data-dependent count of releases would not be a guarantee.

    Correction (not in the paper): the iterates may wander up to Σ_k T_k·r_k from w0, beyond the
    region where L0 and L1 are declared; ``project`` puts every step back onto the region
    (projection is non-expansive, so a step stays ≤ r_k and a difference's per-example bound L1·r_k
    still holds) and ``clip`` clips the checkpoint's per-example gradients to L0 and the
    differences' to L1·r_k.

    Args:
        rho: the zCDP budget ρ > 0.  beta: the failure probability β ∈ (0, 1).
        gamma, kappa, L0, L1: the objective's public constants, κ ∈ [1, 2]; F0: a public bound on
            F(w0) − F* (keywords; :meth:`~dpnc.algorithms.menart.common.KLConfig.of` reads them from
            a Setting, F0 from its gap, else (γL0)^κ).
        paper: the printed noise levels and Cf = 32 (:func:`spider_schedule`) instead of the
            calibrated ones.
        clip, project: the guards (:class:`~dpnc.algorithms.menart.common.KLConfig`).
        constants: the analysis' numerical constants.
        variant: "theory" (:func:`spider_schedule`, Theorem 1) or "practical"
            (:func:`practical_schedule`, :meth:`practical`; not with ``paper``).

    Raises:
        ValueError: at construction, for a value out of range.

    References:
        Menart, Ullah, Arora, Bassily, Guzmán, "Differentially private non-convex optimization under
        the KL condition with optimal rates", 2024.
    """

    name = "kl-spider"
    constant_fields = ("L0", "L1", "gamma", "kappa")

    constants: AnalysisConstants = AnalysisConstants()
    variant: str = "theory"
    gamma: float = field(kw_only=True)
    kappa: float = field(kw_only=True)
    L1: float = field(kw_only=True)
    F0: float = field(kw_only=True)

    def __post_init__(self) -> None:
        check_config(self, required=("F0",))
        check_choice("variant", self.variant, ("theory", "practical"))
        if self.variant == "practical" and self.paper:
            raise ValueError(
                "paper must be False for variant='practical' (it has no printed noise levels); got True"
            )
        if not 1 <= self.kappa <= 2:
            raise ValueError(f"kappa must be in [1, 2] for KL-Spider; got {self.kappa!r}")

    @classmethod
    def from_theory(
        cls, setting: Setting, budget, *, beta: float = 0.05, paper: bool = False
    ) -> KLSpider:
        """Theorem 1's setting: the objective's public γ, κ, L0, L1 and F0 = ``setting.gap``, else
        (γL0)^κ (Menart et al. §1.1); ρ the budget's zCDP ρ."""
        return cls.of(setting, rho=budget_rho(budget), beta=beta, paper=paper)

    @classmethod
    def practical(cls, setting: Setting, budget, **options) -> KLSpider:
        """A practical variant: Algorithm 1 with :func:`practical_schedule`
        (``variant="practical"``).

        Theorem 1's setting makes no update at realistic n: for least squares with d = 7, γ² = 3.5,
        L0 = 3.2, L1 = 1, ρ = 0.5 and a start excess of 0.07 it plans K ≈ 3900 rounds of ρ/K each at
        n = 2·10⁴ (descent constant 64), and its floor Φfloor (Cf = 48, √(K·d·log(1/β′))) is
        min(126, F0) = F0 = 35.8 there, 1.6 at n = 2·10⁵, and below 0.07 only from n ≈ 10⁶; the
        stopping threshold (7/8γ)·Φ̂_k^{1/κ} never falls below the gradient (0.14), so no round
        steps. A smaller F0 only moves the problem: with F0 = 0.1, Φ̂_k = Φfloor = F0 in every
        round, the threshold (0.148) is just above the gradient, and a round steps only when the
        noise lifts ‖g‖ over it: ≈ 10 updates at n = 2·10⁴, 1 at 2·10⁵.

        The rules (:data:`PRACTICAL`, each from the analysis with its slack removed):

        * the gradient error allowed is e_k = Φ̂_k^{1/κ}/(ζγ), ζ = 4, at the noise's expected norm
          (not w.p. 1 − β: no union bound, no Cf);
        * the stopping threshold is stop·Φ̂^{1/κ}/γ with stop = 1 − 1/ζ = 3/4, so a round stopped
          with error ≤ e_k still has excess ≤ Φ̂_k (by KL, as in Theorem 1 with 7/8 + 1/8);
        * the step length is Φ̂^{1/κ}/(2γL1): step s = 1/(stop − 1/ζ) = 2 maximises Lemma 9's
          guaranteed descent D·Φ̂^{2/κ}/(γ²L1), D = (stop − 1/ζ)/s − 1/(2s²) = 1/8, hence descent =
          1/D = 8 in c;
        * K and every σ from the budget (:func:`practical_schedule`): the rounds' noise is set for
          constant relative precision, and K is as large as ρ affords.

        Privacy is unchanged in kind: every release goes through the accountant as in :meth:`run`,
        the ledger charges the full schedule (stopped rounds' unissued differences included) and
        spends ρ (less 10⁻⁹ρ of margin for rounding; calibrated, no ``paper`` mode). Theorem 1's
        guarantee does **not** apply: the error bound holds only in expectation, so its w.p. 1 − β
        bound Φfloor is not claimed (``stats.bound`` is Φ̂_K, the schedule's last potential, a
        target). The deterministic facts hold: step lengths r_k, ≤ T_k updates per round, every
        iterate within Σ_k T_k·r_k of w0 (and in the region when projecting).

        Args:
            setting: the objective's public constants (γ, κ ∈ [1, 2], L0, L1; with a region, n is
                checked), n, d and ``gap``, the public bound F0 on F(w0) − F* (default (γL0)^κ,
                Menart et al. §1.1; a loose F0 costs rounds that make no update, at little privacy
                cost). With a region, n is checked to afford at least one round of the schedule
                under add/remove (the cheaper relation); the schedule itself is computed by
                :meth:`run` from the objective's n and the accountant's relation.
            budget: the zCDP ρ (a :class:`~dpnc.privacy.budget.ZCDP`, or an (ε, δ) Budget converted
                once).
            **options: other fields (beta, clip, project, constants to override :data:`PRACTICAL`,
                …).

        Raises:
            ValueError: a field out of range, or n too small for one round of the schedule.
        """
        constants, n, rho = setting.constants, setting.n, budget_rho(budget)
        require(constants, "gamma", "kappa", "L0", "L1")
        config = cls.of(
            setting, **{"rho": rho, "constants": PRACTICAL, "variant": "practical", **options}
        )
        if constants.region is not None:
            sched = practical_schedule(
                n=n,
                d=setting.d,
                rho=rho,
                gamma=config.gamma,
                kappa=config.kappa,
                L0=config.L0,
                L1=config.L1,
                F0=config.F0,
                relation="add/remove",
                constants=config.constants,
            )
            if sched.K == 0:
                raise ValueError(
                    f"n must be large enough for one round of the practical schedule (a gradient "
                    f"error of F0^(1/κ)/(ζγ) within ρ = {rho:g}); got n = {n}"
                )
        return config

    def claim_basis(self) -> str:
        if self.variant == "practical":
            return "(the practical schedule's releases, each recorded)"
        return "(Lemma 8)" + (
            " with the printed noise; the ledger shows its true cost" if self.paper else ""
        )

    def cost(self, setting: Setting) -> Cost:
        """The full schedule's gradients under replace-one (rounds stopped by the norm test compute
        fewer): n per checkpoint and 2n per difference, T_k − 1 differences in round k; every round
        reads all n examples."""
        common = dict(
            n=setting.n,
            d=setting.d,
            rho=self.rho,
            gamma=self.gamma,
            kappa=self.kappa,
            L0=self.L0,
            L1=self.L1,
            F0=self.F0,
            relation="replace-one",
            constants=self.constants,
        )
        sched = (
            practical_schedule(**common)
            if self.variant == "practical"
            else spider_schedule(beta=self.beta, paper=self.paper, **common)
        )
        return Cost(
            gradients=sum(setting.n * (1 + 2 * (r.T - 1)) for r in sched.rounds), samples=setting.n
        )

    def run(
        self,
        problem,
        x0: torch.Tensor,
        *,
        noise: NoiseSource,
        accountant: Accountant,
        generator: torch.Generator,
    ) -> Run:
        """One run from x0 (default 0). No public randomness: ``generator`` is not used."""
        f = problem
        s = setting(self, f, x0)
        gamma, kappa, F0, L1 = self.gamma, self.kappa, self.F0, self.L1
        if self.variant == "practical":
            sched = practical_schedule(
                n=s.n,
                d=s.d,
                rho=self.rho,
                gamma=gamma,
                kappa=kappa,
                L0=s.L0,
                L1=L1,
                F0=F0,
                relation=accountant.relation,
                constants=self.constants,
            )
        else:
            sched = spider_schedule(
                n=s.n,
                d=s.d,
                rho=self.rho,
                beta=self.beta,
                gamma=gamma,
                kappa=kappa,
                L0=s.L0,
                L1=L1,
                F0=F0,
                paper=self.paper,
                relation=accountant.relation,
                constants=self.constants,
            )
        queries = open_queries(
            f, noise=noise, accountant=accountant, clip=self.clip, region=s.region
        )
        sensitivity, note = guarantee(queries, s, self.clip, L0=s.L0, L1=L1)
        w, iterates, updates, stopped_by_norm = s.w0.clone(), [s.w0.clone()], [], 0
        for rnd in sched.rounds:
            g = queries.release(
                queries.gradient_sum(w, s.L0), s.L0, rnd.sigma_hat
            )  # the checkpoint
            threshold = self.constants.stop / gamma * rnd.Phi ** (1 / kappa)
            t = 0
            while t < rnd.T and float(g.norm()) >= threshold:
                w_new = step(w - rnd.r * g / g.norm(), s.region)  # w ← w − r_k·g/‖g‖
                if t + 1 < rnd.T:
                    bound = L1 * rnd.r  # per-example ‖∇f(w_new) − ∇f(w)‖ ≤ L1‖w_new − w‖ ≤ L1·r_k
                    g = g + queries.release(
                        queries.difference_sum(w_new, w, bound), bound, rnd.sigma
                    )
                w, t = w_new, t + 1
                iterates.append(w.clone())
            if t < rnd.T:  # stopped by the norm test after t differences of the scheduled T_k − 1
                stopped_by_norm += 1
                if rnd.T - 1 - t > 0:
                    queries.charge(L1 * rnd.r, rnd.sigma, rnd.T - 1 - t)
            updates.append(t)
        stats = SpiderStats(
            steps=sum(updates),
            rounds=sched.K,
            sensitivity=sensitivity,
            F0=F0,
            schedule=sched,
            updates=updates,
            rounds_stopped_early=stopped_by_norm,
            bound=sched.Phi_floor,
        )
        notes = [note]
        if self.variant == "practical":
            notes.append(
                "practical schedule: Theorem 1's utility bound does not apply (gradient errors are "
                "bounded in expectation only); stats.bound is the last round's potential, a target"
            )
        return finish(
            self,
            output=w,
            iterates=iterates,
            accountant=accountant,
            stats=stats,
            queries=queries,
            notes=notes,
        )
