"""Adaptive noisy GD (Menart et al., Algorithm 3, Theorem 4) and Algorithm 3+'s private selection.

Gradient descent whose noise is proportional to a noisy gradient norm, for γ and κ unknown to it,
halted by a privacy filter (fully adaptive composition); with ``select=True`` the output is an
iterate chosen by the exponential mechanism on −‖∇F(w_t)‖ (:func:`select_stationary`, Theorem 5)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import torch

from dpnc.algorithms.base import Cost, Run, Setting
from dpnc.algorithms.menart.common import (
    KLConfig,
    KLStats,
    budget_rho,
    check_config,
    finish,
    guarantee,
    open_queries,
    region_of,
    require,
    setting,
    step,
)
from dpnc.checks import check_integer, check_positive
from dpnc.privacy import interpret
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.budget import check_rho
from dpnc.privacy.mechanisms import exponential_mechanism
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import ExponentialMechanism, Relation, ZCDPMechanism, mean_sensitivity


@dataclass
class AdaptiveStats(KLStats):
    """Algorithm 3's run: η = 1/(2L1), ℓ, σ̂, σmin, every step's σ_t and charge ρ_t, their sum,
    whether the last step was floored, the filter's bound recorded in the ledger, and the selected
    index (Algorithm 3+)."""

    eta: float = math.nan
    ell: float = math.nan
    sigma_hat: float = math.nan
    sigma_min: float = math.nan
    sigmas: list[float] = field(default_factory=list)
    charges: list[float] = field(default_factory=list)
    charged: float = 0.0
    last_floored: bool = False
    filter: float = math.nan
    selected: int | None = None


SELECT_SHARE = (
    8 / 9
)  # with select, the filter gets ρ' = 8ρ/9: the √ρ'-DP selection (bounded range) costs ρ'/8


def filter_rho(budget, select: bool) -> float:
    """The privacy filter's ρ' for a total ``budget``: all of it, or with Theorem 5's selection 8/9
    of it, so that filter and selection together spend exactly the budget's ρ."""
    rho = budget_rho(budget)
    return rho * SELECT_SHARE if select else rho


@dataclass(frozen=True)
class AdaptiveGD(KLConfig):
    """Algorithm 3 (adaptive noisy GD), Theorem 4; with ``select``, Algorithm 3+ (Theorem 5).

    Each step releases N_t = ‖∇F(w)‖ + N(0, σ̂²) (a scalar), then g = ∇F(w) + N(0, σ_t²I) with σ_t =
    max(N_t/√(dℓ), σmin), and steps w ← w − g/(2L1); ℓ = log(n√ρ/β), σ̂ = L0/(√n·ρ^{1/4}), σmin =
    2L0/(n√ρ). The step is charged ρ_t = √ρ/n + (L0²dℓ/(n²N_t²) if σ_t > σmin else ρ/2)
    (docs/papers.md, Menart et al. §2.3's safe form) and the loop runs while the charges so far are
    ≤ ρ/2 (``strict``: ≤ ρ/2 − √ρ/n), so a floored step is the last one. These charges are the
    paper's convention (Δ = √2·L0/n); the corrected form scales every σ by the relation's Δ·n/(√2L0)
    (√2 under replace-one) so that the charges are the true costs.

    The σ's depend on earlier outputs, so the run is accounted by a privacy filter (fully adaptive
    composition, Whitehouse–Ramdas–Rogers–Wu 2022): the ledger holds one zCDP entry of the filter's
    bound (ρ when strict, ρ + √ρ/n otherwise; twice that with ``paper=True`` under replace-one), not
    the realised charges (the per-step releases are kept in ``Run.stats`` only through their σ's and
    charges). Selection adds the exponential mechanism with ε = √ρ on the utility −‖∇F(w_t)‖
    (sensitivity L0/n in the paper's convention), accounted as bounded range (ε²/8, the paper
    charges ε²/2).

    Args:
        rho: the zCDP budget ρ > 0.  beta: β ∈ (0, 1) in ℓ.  L0, L1: the objective's public
            constants (keywords; :meth:`~dpnc.algorithms.menart.common.KLConfig.of` reads them from
            a Setting).
        paper: the printed σ's (and the selection's sensitivity L0/n); the ledger records their true
            cost.
        strict: stop while the charges stay ≤ ρ/2 − √ρ/n (the filter's bound is then ρ).
        select: Algorithm 3+: output a privately selected iterate instead of the last.
        clip, project: the guards (:class:`~dpnc.algorithms.menart.common.KLConfig`).
        eta: the step size (None: the paper's 1/(2L1)).
        ell: ℓ in σ_t = N_t/√(dℓ) and its charge L0²dℓ/(n²N_t²) (None: the paper's log(n√ρ/β)).
        rho_norm: each norm query's charge, in (0, ρ/2] (None: the paper's √ρ/n); σ̂ =
            L0/(n·√rho_norm) in the paper's convention, and the filter allows at most
            ⌊(ρ/2)/rho_norm⌋ steps. Any eta, ell and rho_norm keep the filter's bound (the charges
            are the releases' costs); Theorem 4 needs the paper's values.

    References:
        Menart, Ullah, Arora, Bassily, Guzmán, "Differentially private non-convex optimization under
        the KL condition with optimal rates", 2024. Whitehouse, Ramdas, Rogers, Wu, "Fully adaptive
        composition in differential privacy", 2022 (the filter).
    """

    name = "adaptive-gd"
    constant_fields = ("L0", "L1")

    L1: float = field(kw_only=True)
    strict: bool = True
    select: bool = False
    eta: float | None = None
    ell: float | None = None
    rho_norm: float | None = None

    def __post_init__(self) -> None:
        check_config(self, "eta", "ell", "rho_norm")
        if self.rho_norm is not None and self.rho_norm > self.rho / 2:
            raise ValueError(
                f"rho_norm must be <= rho/2 = {self.rho / 2:g} (one step's norm query within the "
                f"filter's half of the budget); got {self.rho_norm!r}"
            )

    @classmethod
    def from_theory(
        cls,
        setting: Setting,
        budget,
        *,
        beta: float = 0.05,
        select: bool = False,
        paper: bool = False,
    ) -> AdaptiveGD:
        """Theorem 4's (Theorem 5's with ``select``) setting: the objective's public L0 and L1 (γ, κ
        unknown); ρ the budget's zCDP ρ, of which the selection takes 1/9 (:func:`filter_rho`)."""
        return cls.of(
            setting, rho=filter_rho(budget, select), beta=beta, select=select, paper=paper
        )

    @classmethod
    def practical(
        cls, setting: Setting, budget, *, horizon: int | None = None, **options
    ) -> AdaptiveGD:
        """A practical variant of Algorithm 3 (Algorithm 3+ with ``select=True``): a longer step,
        less relative noise, and norm queries budgeted for the steps the run needs rather than for
        n√ρ/2 of them.

        Theorem 4's setting spends √ρ/n on each step's norm query, so σ̂ = L0/(√n·ρ^{1/4}) (0.027
        for least squares with L0 = 3.2, n = 2·10⁴, ρ = 0.5): once ‖∇F‖ falls near σ̂ the noisy norm
        N_t is noise, a step is floored and the run stops (at an excess of about γ²σ̂² under PL),
        after a few tens of steps of the ≈ n√ρ/2 it budgeted for. The rules:

        * η = 1/L1: the descent lemma gives F(w − ηg) ≤ F(w) − (‖∇F‖² − ‖g − ∇F‖²)/(2L1), the most
          descent for an L1-smooth F (the paper's 1/(2L1) halves it);
        * ℓ = 4: the gradient noise's expected norm is N_t/√ℓ = N_t/2, half the norm estimate (the
          paper's ℓ = log(n√ρ/β) makes it a high-probability bound), so an unfloored step keeps ≥
          3/4 of that descent;
        * rho_norm = ρ/(2H): the norm queries are budgeted for H steps (the filter then allows at
          most H), H = ``horizon``, by default ⌈(1 + 2γ²L1)·log(n²ρ)⌉ when γ is given (gradient
          descent with η = 1/L1 contracts a (γ, 2)-KL function's excess by 1 − 1/(2γ²L1) per step;
          log(n²ρ) stands for the log of the excess ratio F0/(d/(n²ρ)) to the κ = 2 rate), else 100.

        Privacy is exactly as in :meth:`run`: the same privacy filter (strict: the ledger's one
        entry is ρ), the same charges, each the paper-convention cost of its release, calibrated
        under the accountant's relation. Theorem 4's guarantee does **not** apply (its Lemmas 10 and
        12 use ℓ = log(n√ρ/β), η = 1/(2L1) and σ̂ = L0/(√n·ρ^{1/4})); with ``select=True`` the
        selection is Theorem 5's mechanism, whose privacy holds as before.

        Args:
            setting: the objective's public constants (L0, L1; γ for the horizon's default) and n.
            budget: the zCDP ρ (a :class:`~dpnc.privacy.budget.ZCDP`, or an (ε, δ) Budget converted
                once).
            horizon: H ≥ 1, the steps the norm queries are budgeted for.
            **options: other fields (beta, select, strict, clip, project, eta, ell, rho_norm to
                override).

        Raises:
            ValueError: a field out of range.
        """
        constants, n, rho = (
            setting.constants,
            setting.n,
            filter_rho(budget, options.get("select", False)),
        )
        require(constants, "L0", "L1")
        if horizon is None:
            horizon = (
                100
                if constants.gamma is None
                else max(
                    1,
                    math.ceil(
                        (1 + 2 * constants.gamma**2 * constants.L1) * math.log(max(n**2 * rho, 2))
                    ),
                )
            )
        check_integer(1, horizon=horizon)
        return cls.of(
            setting,
            **{
                "rho": rho,
                "eta": 1 / constants.L1,
                "ell": 4.0,
                "rho_norm": rho / (2 * horizon),
                **options,
            },
        )

    def claim_basis(self) -> str:
        return "by the privacy filter (Theorem 4)" + (
            ", plus the selection's √ρ-DP exponential mechanism (Theorem 5)" if self.select else ""
        )

    def cost(self, setting: Setting) -> Cost:
        """At most: the filter's most steps, ⌊(ρ/2)/ρ_norm⌋ (ρ_norm = √ρ/n unless set), each n
        gradients, and with ``select`` n more per iterate scored (the run stops earlier when a step
        is floored)."""
        n = setting.n
        rho_norm = math.sqrt(self.rho) / n if self.rho_norm is None else self.rho_norm
        steps = max(1, math.floor(self.rho / 2 / rho_norm))
        return Cost(
            gradients=n * steps * (2 if self.select else 1) + (n if self.select else 0), samples=n
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
        """One run from x0 (default 0). Every argument, the selection's included, is checked before
        the first query. No public randomness: ``generator`` is not used."""
        f = problem
        s = setting(self, f, x0)
        # every step's releases go to a ledger of their own: the filter's bound is recorded once,
        # after the loop
        steps_ledger = Accountant(accountant.relation)
        queries = open_queries(
            f, noise=noise, accountant=steps_ledger, clip=self.clip, region=s.region
        )
        if self.select:
            check_selection(accountant.relation, "select=True")
            if s.region is None and not queries.clips:
                raise ValueError(
                    "project must be True for select=True without clipping: the selection's scores "
                    "are bounded only on the region, so it would refuse the iterates after the run; "
                    "got False"
                )
        L1 = self.L1
        n, d, rho = s.n, s.d, self.rho
        ell = math.log(n * math.sqrt(rho) / self.beta) if self.ell is None else self.ell
        if ell <= 0:
            raise ValueError(f"adaptive GD needs n·√ρ > β (ℓ = log(n√ρ/β) > 0); got ℓ = {ell:.3g}")
        eta = 1 / (2 * L1) if self.eta is None else self.eta
        rho_norm = (
            math.sqrt(rho) / n if self.rho_norm is None else self.rho_norm
        )  # each norm query's charge
        paper_delta = math.sqrt(2) * s.L0 / n  # the sensitivity the paper's charges assume
        true_delta = mean_sensitivity(s.L0, n, accountant.relation)
        scale = 1.0 if self.paper else true_delta / paper_delta
        cost_ratio = (true_delta / (paper_delta * scale)) ** 2  # true cost / charge, per release
        sigma_hat = (
            scale
            * s.L0
            / (math.sqrt(n) * rho**0.25 if self.rho_norm is None else n * math.sqrt(rho_norm))
        )
        sigma_min = 2 * s.L0 / (n * math.sqrt(rho))
        limit = rho / 2 - (rho_norm if self.strict else 0.0)
        if limit < 0:
            raise ValueError(
                f"strict mode needs ρ/2 ≥ √ρ/n, i.e. n·√ρ ≥ 2; got n·√ρ = {n * math.sqrt(rho):.3g}"
            )
        sensitivity, note = guarantee(queries, s, self.clip, L0=s.L0)
        stats = AdaptiveStats(
            sensitivity=sensitivity,
            eta=eta,
            ell=ell,
            sigma_hat=sigma_hat,
            sigma_min=scale * sigma_min,
        )
        w, iterates, floored = s.w0.clone(), [s.w0.clone()], False
        while sum(stats.charges) <= limit:
            total = queries.gradient_sum(w, s.L0)  # n·∇F(w), clipped
            N = float(
                queries.release(torch.linalg.vector_norm(total), s.L0, sigma_hat)
            )  # ‖∇F(w)‖ + N(0, σ̂²)
            sigma_paper = max(N / math.sqrt(d * ell), sigma_min) if N > 0 else sigma_min
            floored = sigma_paper <= sigma_min
            g = queries.release(total, s.L0, scale * sigma_paper)  # ∇F(w) + N(0, σ_t²I)
            w = step(w - eta * g, s.region)  # w ← w − g/(2L1)
            iterates.append(w.clone())
            stats.sigmas.append(scale * sigma_paper)
            stats.charges.append(
                rho_norm + (rho / 2 if floored else s.L0**2 * d * ell / (n**2 * N**2))
            )
        stats.filter = cost_ratio * (rho if self.strict else rho + rho_norm)
        accountant.record(ZCDPMechanism(stats.filter, secret=noise.secret))
        stats.steps, stats.charged, stats.last_floored = (
            len(stats.charges),
            sum(stats.charges),
            floored,
        )
        notes = [
            f"adaptive noise: accounted by a zCDP privacy filter of {stats.filter:.6g} "
            f"(fully adaptive composition; {stats.steps} steps; PLD does not apply)",
            note,
        ]
        output = w
        if self.select:
            iterates_t = torch.stack(iterates)
            stats.selected = select_stationary(
                f,
                iterates_t,
                rho=rho,
                L0=s.L0,
                paper=self.paper,
                clip=self.clip,
                noise=noise,
                accountant=accountant,
            )
            output = iterates_t[stats.selected].clone()
        return finish(
            self,
            output=output,
            iterates=iterates,
            accountant=accountant,
            stats=stats,
            queries=queries,
            notes=notes,
        )


def select_stationary(
    objective,
    iterates: torch.Tensor,
    *,
    rho: float,
    L0: float,
    paper: bool = False,
    clip: bool = True,
    noise: NoiseSource | None = None,
    accountant: Accountant,
) -> int:
    """Theorem 5's private selection: t* with P(t) ∝ exp(−ε‖∇F(w_t)‖/(2Δ)), ε = √ρ; recorded in
    ``accountant``.

    Δ is the utility's sensitivity: in the corrected form, the relation's (2L0/n replace-one, L0/n
    add/remove), so the selection is √ρ-DP (L0: the objective's public constant); ``paper=True``
    uses L0/n, and the ledger records the ε that this really gives (2√ρ under replace-one). The
    scores are ‖·‖ of per-example gradients clipped to L0 (``clip``); without per-example gradients
    to clip, every iterate must lie in the objective's region, where L0 is declared.

    Raises:
        ValueError: before any score is computed, for an accountant whose relation the exponential
            mechanism's release does not support, or iterates outside the region when nothing can be
            clipped.
    """
    check_selection(accountant.relation, "the selection")
    check_positive(L0=L0)
    noise = NoiseSource() if noise is None else noise
    queries = open_queries(objective, noise=noise, accountant=accountant, clip=clip)
    if not queries.clips:
        region = region_of(objective)
        outside = [t for t, w in enumerate(iterates) if not region.contains(w)]
        if outside:
            raise ValueError(
                f"iterates must lie in the region (radius {region.radius:.6g}) when their gradients "
                f"cannot be clipped; got {len(outside)} outside, the first at index {outside[0]}"
            )
        queries.region = region
    norms = torch.stack([queries.gradient(w, L0).norm() for w in iterates])
    true_delta = queries.sensitivity(L0)
    used_delta = L0 / queries.n if paper else true_delta
    epsilon = math.sqrt(check_rho(rho))
    index, release = exponential_mechanism(
        -norms, sensitivity=used_delta, epsilon=epsilon, noise=noise
    )
    accountant.record(dataclasses.replace(release, epsilon=epsilon * true_delta / used_delta))
    return index


def check_selection(relation: Relation, what: str) -> None:
    """The exponential mechanism's release must be accountable under ``relation``: checked before
    any run.

    Mathematically the selection is ε-DP and ε-bounded-range (ε²/8-zCDP) under add/remove as well,
    with score sensitivity L0/n; the refusal follows the accountant's interpretation of the
    exponential mechanism (:func:`dpnc.privacy.interpret.relations`), and lifts when that does."""
    supported = interpret.relations(ExponentialMechanism(epsilon=1.0))
    if relation not in supported:
        raise ValueError(
            f"relation must be one of {sorted(r.value for r in supported)} for {what}: the accountant "
            f"interprets the exponential mechanism only there; got {relation.value!r}"
        )
