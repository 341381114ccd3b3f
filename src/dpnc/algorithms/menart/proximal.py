"""Private proximal point: Menart et al., Algorithm 2 (Theorem 2), with noisy projected GD
(Algorithm 4) inside, for (γ, κ)-KL objectives with κ ≥ 2 that are L̃1-weakly convex but need not
be smooth. Guards, releases and ``paper``: :class:`~dpnc.algorithms.menart.common.KLConfig`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from dpnc.algorithms.base import Cost, Run, Setting
from dpnc.algorithms.menart.common import (
    AnalysisConstants,
    KLConfig,
    KLStats,
    PrivateGradients,
    budget_rho,
    check_config,
    finish,
    guarantee,
    open_queries,
    project_ball,
    project_two_balls,
    require,
    setting,
)
from dpnc.checks import check_integer
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.calibrate import zcdp_gaussian_sigma
from dpnc.privacy.noise import NoiseSource


@dataclass
class InnerResult:
    """What an inner solver returns: its output, its number of gradient queries, its largest ‖u − c‖
    and (if it reports it) its largest distance from the centre of the region ``queries.region``
    (None: not reported)."""

    w: torch.Tensor
    steps: int
    max_distance: float
    max_region_distance: float | None = None


InnerSolver = Callable[..., InnerResult]


class _RowsOfOneDraw:
    """The noise of ``count`` equal releases of shape ``shape``, drawn from ``noise`` in one call
    and handed out one row per release (each release still draws, and records, its own row through
    the mechanism).

    One draw saves Algorithm 4's per-step overhead, and torch's bulk Gaussian path gives other
    numbers than per-row draws would, so this keeps the outputs of earlier versions (which drew in
    bulk) reproducible."""

    def __init__(self, noise: NoiseSource, count: int, shape: tuple[int, ...]) -> None:
        self.secret = noise.secret
        self._z, self._next = noise.gaussian((count, *shape), 1.0), 0

    def gaussian(self, shape, sigma: float, *, dtype=torch.float64, device="cpu") -> torch.Tensor:
        if self._next >= len(self._z) or tuple(shape) != tuple(self._z.shape[1:]):
            raise RuntimeError(
                f"rows of one draw: asked for row {self._next} of shape {tuple(shape)}; "
                f"drawn {len(self._z)} rows of shape {tuple(self._z.shape[1:])}"
            )
        z = self._z[self._next].to(dtype=dtype, device=device) * sigma
        self._next += 1
        return z


def noisy_projected_gd(
    queries: PrivateGradients,
    center: torch.Tensor,
    *,
    rho: float,
    beta: float,
    L0: float,
    weak_convexity: float,
    paper: bool = False,
    max_iters: int | None = None,
) -> InnerResult:
    """Algorithm 4 (Theorem 9): noisy projected GD with averaging on F̃(u) = F(u) + L̃1‖u − c‖²,
    ρ-zCDP.

    T_A = max(2, ⌈n²ρ log²(2/β)/d⌉) (capped by ``max_iters``, which costs utility, never privacy: σ
    is set for the T_A actually run); steps 1/(L̃1·s) on ∇F(u_s) + 2L̃1(u_s − c) + N(0, σ²I),
    projection onto the ball of radius R = L0/(2L̃1) around c (which holds the minimiser of F̃),
    output Σ_s s·u_s / Σ_s s. Calibrated σ spends ρ over the T_A − 1 queries exactly; the paper's σ²
    = 4L0²T_A/(n²ρ) spends ≤ ρ/2.

    Correction (not in the paper): R is typically far larger than the region where L0 is declared
    (10.7 against 1 for ‖w‖^1.5 at the default L̃1), so with ``queries.region`` set the projection
    is onto the region ∩ B_R(c) (:func:`~dpnc.algorithms.menart.common.project_two_balls`; c lies in
    the region). Algorithm 4's analysis holds on any convex feasible set containing c; the minimiser
    of F̃ over it replaces the unconstrained one."""
    n, d = queries.n, center.shape[0]
    T_A = max(2, math.ceil(n**2 * rho * math.log(2 / beta) ** 2 / d))
    if max_iters is not None:
        T_A = min(T_A, max(2, int(max_iters)))
    if not paper:
        sigma = zcdp_gaussian_sigma(queries.sensitivity(L0), rho / (T_A - 1))
    else:
        sigma = math.sqrt(4 * L0**2 * T_A / (n**2 * rho))
    R = L0 / (2 * weak_convexity)
    region = queries.region

    def project(
        v: torch.Tensor,
    ) -> torch.Tensor:  # onto B_R(c), intersected with the region if there is one
        if region is None:
            return project_ball(v, center, R)
        return project_two_balls(v, region.center, region.radius, center, R)

    u = center.clone()
    weighted, max_distance = u.clone(), 0.0  # Σ_s s·u_s, starting with s = 1
    max_region_distance = None if region is None else region.distance(u)
    rows = _RowsOfOneDraw(queries.noise, T_A - 1, (d,))
    for s in range(1, T_A):
        g = queries.release(
            queries.gradient_sum(u, L0), L0, sigma, noise=rows
        )  # ∇F(u_s) + N(0, σ²I)
        g = g + 2 * weak_convexity * (u - center)  # + ∇ of the prox term
        u = project(u - g / (weak_convexity * s))
        max_distance = max(max_distance, float((u - center).norm()))
        if region is not None:
            max_region_distance = max(max_region_distance, region.distance(u))
        weighted += (s + 1) * u
    return InnerResult(weighted * 2 / (T_A * (T_A + 1)), T_A - 1, max_distance, max_region_distance)


def statistical_inner_steps(*, n: int, d: int, rho: float, beta: float, scale: float = 1.0) -> int:
    """Inner steps at which Algorithm 4's optimisation error is at most its statistical error
    (Theorem 9).

    ρ, β: the inner solve's ρ_A, β_A (the proximal point method gives each of its T rounds ρ/T and
    β/T). Noisy GD with steps 1/(L̃1·s) and weighted averaging on the L̃1-strongly convex F̃ has
    error O((G² + σ²d)/(L̃1·T_A)) with G ≈ L0. With σ² ∝ L0²T_A/(n²ρ_A) (calibrated or printed) the
    σ²d part is the privacy error L0²d/(L̃1n²ρ_A), whatever T_A; Theorem 9 bounds the whole by the
    statistical term O(L0²d·ℓ/(L̃1n²ρ_A)), ℓ = log(n²log²(2/β_A)/(dβ_A)). The optimisation part
    L0²/(L̃1T_A) is at most that term once T_A ≥ n²ρ_A/(d·ℓ), so this returns max(2,
    ⌈scale·n²ρ_A/(d·ℓ)⌉): it grows like (n√ρ)² as the statistical term falls. Theorem 9's own T_A =
    n²ρ_A·log²(2/β_A)/d is larger by ℓ·log²(2/β_A) (about 10³ at β = 0.05) for its high-probability
    constants, which puts it out of reach beyond n√ρ ≈ 100. A public rule (n, d, ρ, β), so passing
    it as ``max_inner_iters`` changes no privacy accounting."""
    ell = math.log(n**2 * math.log(2 / beta) ** 2 / (d * beta))
    return max(2, math.ceil(scale * n**2 * rho / (d * ell)))


def proximal_point_rounds(
    *,
    n: int,
    d: int,
    rho: float,
    gamma: float,
    kappa: float,
    L0: float,
    weak_convexity: float,
    F0: float,
    constants: AnalysisConstants = AnalysisConstants(),
) -> int:
    """Algorithm 2's T = max(1, ⌈(1 + 32γ²L̃1F0^{(κ−2)/κ})·(log F0 + κ log(n√ρ/(γL0√d)))⌉)."""
    bracket = math.log(F0) + kappa * math.log(n * math.sqrt(rho) / (gamma * L0 * math.sqrt(d)))
    factor = 1 + constants.prox * gamma**2 * weak_convexity * F0 ** ((kappa - 2) / kappa)
    return max(1, math.ceil(factor * bracket))


def proximal_point_bound(
    *,
    n: int,
    d: int,
    rho: float,
    beta: float,
    gamma: float,
    kappa: float,
    L0: float,
    weak_convexity: float,
    F0: float,
    constants: AnalysisConstants = AnalysisConstants(),
) -> float:
    """Theorem 2's bound (γL0√(T·d·log(n²log²(1/β′)/(dβ′)))/(n√ρ))^κ, β′ = β/T, with its O-constant
    set to 1."""
    T = proximal_point_rounds(
        n=n,
        d=d,
        rho=rho,
        gamma=gamma,
        kappa=kappa,
        L0=L0,
        weak_convexity=weak_convexity,
        F0=F0,
        constants=constants,
    )
    beta_p = beta / T
    log_term = math.log(n**2 * math.log(1 / beta_p) ** 2 / (d * beta_p))
    return (gamma * L0 * math.sqrt(T * d * log_term) / (n * math.sqrt(rho))) ** kappa


@dataclass
class ProximalStats(KLStats):
    """The proximal point method's run: queries of each inner solve, the prox ball's radius
    L0/(2L̃1), the largest distance of an inner iterate from its prox centre and (when projecting)
    from the region's centre."""

    inner_steps: list[int] = field(default_factory=list)
    inner_radius: float = math.nan
    inner_max_distance: float = 0.0
    inner_max_region_distance: float | None = None


@dataclass(frozen=True)
class ProximalPoint(KLConfig):
    """Algorithm 2 (private proximal point), Theorem 2: F(w_T) − F* = Õ((γL0√(dT)/(n√ρ))^κ) for κ ≥
    2, ρ-zCDP.

    w_t = inner(F + L̃1‖· − w_{t−1}‖², ρ/T, β/T), t = 1..T; the proximal term is data-free, so
    privacy is T·(ρ/T) = ρ by composition. ``inner`` is any solver with :func:`noisy_projected_gd`'s
    signature that releases only through the given
    :class:`~dpnc.algorithms.menart.common.PrivateGradients`, and keeps its query points in
    ``queries.region`` when that is set (the queries refuse points outside it unless they clip); its
    cost is about n²ρ·log²/d gradient queries per call, hence ``max_inner_iters``. With ``project``
    the inner iterates stay in the region, hence so do their averages w_t.

    Args:
        rho: the zCDP budget ρ > 0.  beta: the failure probability β ∈ (0, 1).
        gamma, kappa, L0, weak_convexity: the objective's public constants, κ ≥ 2; F0: a public
            bound on F(w0) − F* (keywords; :meth:`~dpnc.algorithms.menart.common.KLConfig.of` reads
            them from a Setting, F0 from its gap, else (γL0)^κ).
        paper: Algorithm 4's printed σ² = 4L0²T_A/(n²ρ) instead of the calibrated σ.
        clip, project: the guards (:class:`~dpnc.algorithms.menart.common.KLConfig`).
        inner: the inner solver.  max_inner_iters: a cap (≥ 2) on its steps T_A, or None.
        constants: the analysis' numerical constants.

    References:
        Menart, Ullah, Arora, Bassily, Guzmán, "Differentially private non-convex optimization under
        the KL condition with optimal rates", 2024.
    """

    name = "proximal-point"
    constant_fields = ("L0", "gamma", "kappa", "weak_convexity")

    max_inner_iters: int | None = None
    inner: InnerSolver = noisy_projected_gd
    constants: AnalysisConstants = AnalysisConstants()
    gamma: float = field(kw_only=True)
    kappa: float = field(kw_only=True)
    weak_convexity: float = field(kw_only=True)
    F0: float = field(kw_only=True)

    def __post_init__(self) -> None:
        check_config(self, required=("F0",))
        if self.kappa < 2:
            raise ValueError(
                f"the proximal point method is analysed for kappa >= 2; got {self.kappa}"
            )
        if self.max_inner_iters is not None:
            check_integer(2, max_inner_iters=self.max_inner_iters)
        if not callable(self.inner):
            raise ValueError(f"inner must be an inner solver (callable); got {self.inner!r}")

    @classmethod
    def from_theory(
        cls,
        setting: Setting,
        budget,
        *,
        beta: float = 0.05,
        paper: bool = False,
        max_inner_iters: int | None = None,
        weak_convexity: float | None = None,
    ) -> ProximalPoint:
        """Theorem 2's setting: the objective's public γ, κ, L0, L̃1 and F0 = ``setting.gap``, else
        (γL0)^κ (docs/papers.md, Menart et al. §1.1); ρ the budget's zCDP ρ. ``weak_convexity``: L̃1
        instead of the constants' (a convex objective declares none, and any L̃1 > 0 is valid for
        it, e.g. :func:`~dpnc.problems.kl_objective.default_weak_convexity`)."""
        chosen = {} if weak_convexity is None else {"weak_convexity": weak_convexity}
        return cls.of(
            setting,
            rho=budget_rho(budget),
            beta=beta,
            paper=paper,
            max_inner_iters=max_inner_iters,
            **chosen,
        )

    @classmethod
    def practical(
        cls, setting: Setting, budget, *, max_inner_iters: int = 200, **options
    ) -> ProximalPoint:
        """A practical variant of Algorithm 2: fewer proximal rounds, and inner solves of bounded
        length.

        Theorem 2's setting asks T_A = ⌈n²ρ_A·log²(2/β_A)/d⌉ inner steps in each of its rounds (for
        least squares with d = 7, ρ = 0.5 and the default L̃1: T = 35 rounds of 4·10⁷ steps at n =
        2·10⁴, 44 of 4·10⁹ at n = 2·10⁵: not runnable), and T = ⌈(1 + 32γ²L̃1F0^{(κ−2)/κ})·bracket⌉
        rounds of ρ/T each, whose constant 32 leaves room for the inner solves' error. The rules:

        * rounds with the constant 4 instead of 32 (``AnalysisConstants(prox=4)``): an exact
          proximal step w_t has F(w_{t−1}) − F(w_t) ≥ L̃1‖w_t − w_{t−1}‖² = ‖∇F(w_t)‖²/(4L̃1) ≥
          (F(w_t) − F*)^{2/κ}/(4γ²L̃1), so the potential contracts by c′ = 1 + F0^{(2−κ)/κ}/(4γ²L̃1)
          per round: fewer rounds, more of ρ each;
        * inner steps T_A = min(``max_inner_iters``, ⌈n²ρ_A/d⌉, Theorem 9's T_A), ρ_A = ρ/T:
          ⌈n²ρ_A/d⌉ balances Algorithm 4's optimisation error O(L0²/(L̃1T_A)) against its privacy
          error O(L0²d/(L̃1n²ρ_A)) without the log² factor, and ``max_inner_iters`` (default 200)
          bounds the work (T·T_A gradient queries).

        Privacy is exactly as in :meth:`run`: T inner solves of ρ/T each, each calibrated for the
        T_A steps it runs (σ grows with √T_A), every release recorded. Theorem 2's guarantee does
        **not** apply: capped inner solves need not reach Theorem 9's accuracy, which its proof (and
        its constant 32) assumes.

        Args:
            setting: the objective's public constants (γ, κ ≥ 2, L0, L̃1; with a region, the inner
                cap is set from n and d), n, d, and ``gap`` = F0 ≥ F(w0) − F* (default (γL0)^κ).
            budget: the zCDP ρ (a :class:`~dpnc.privacy.budget.ZCDP`, or an (ε, δ) Budget converted
                once).
            max_inner_iters: the inner solves' largest T_A (≥ 2).
            **options: other fields (beta, clip, project, inner, constants to override).

        Raises:
            ValueError: a field out of range.
        """
        constants, n, d, rho = setting.constants, setting.n, setting.d, budget_rho(budget)
        check_integer(2, max_inner_iters=max_inner_iters)
        require(constants, "gamma", "kappa", "L0")
        config = cls.of(
            setting,
            **{
                "rho": rho,
                "constants": AnalysisConstants(prox=4.0),
                "max_inner_iters": max_inner_iters,
                **options,
            },
        )
        if constants.region is not None:
            T = proximal_point_rounds(
                n=n,
                d=d,
                rho=rho,
                gamma=config.gamma,
                kappa=config.kappa,
                L0=config.L0,
                weak_convexity=config.weak_convexity,
                F0=config.F0,
                constants=config.constants,
            )
            config = replace(
                config,
                max_inner_iters=min(max_inner_iters, max(2, math.ceil(n**2 * (rho / T) / d))),
            )
        return config

    def claim_basis(self) -> str:
        return "(Theorem 2: T inner solves of ρ/T each)"

    def cost(self, setting: Setting) -> Cost:
        """T proximal rounds of T_A − 1 full-batch gradient queries each (n gradients a query;
        Algorithm 4's T_A at ρ/T, β/T, capped by ``max_inner_iters``)."""
        n, d = setting.n, setting.d
        T = proximal_point_rounds(
            n=n,
            d=d,
            rho=self.rho,
            gamma=self.gamma,
            kappa=self.kappa,
            L0=self.L0,
            weak_convexity=self.weak_convexity,
            F0=self.F0,
            constants=self.constants,
        )
        rho_A, beta_A = self.rho / T, self.beta / T
        T_A = max(2, math.ceil(n**2 * rho_A * math.log(2 / beta_A) ** 2 / d))
        if self.max_inner_iters is not None:
            T_A = min(T_A, max(2, int(self.max_inner_iters)))
        return Cost(gradients=T * (T_A - 1) * n, samples=n)

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
        gamma, kappa, F0, weak_convexity = self.gamma, self.kappa, self.F0, self.weak_convexity
        T = proximal_point_rounds(
            n=s.n,
            d=s.d,
            rho=self.rho,
            gamma=gamma,
            kappa=kappa,
            L0=s.L0,
            weak_convexity=weak_convexity,
            F0=F0,
            constants=self.constants,
        )
        queries = open_queries(
            f, noise=noise, accountant=accountant, clip=self.clip, region=s.region
        )
        sensitivity, note = guarantee(queries, s, self.clip, L0=s.L0)
        stats = ProximalStats(
            rounds=T, sensitivity=sensitivity, F0=F0, inner_radius=s.L0 / (2 * weak_convexity)
        )
        w, iterates, region_distances = s.w0.clone(), [s.w0.clone()], []
        for _ in range(T):
            out = self.inner(
                queries,
                w,
                rho=self.rho / T,
                beta=self.beta / T,
                L0=s.L0,
                weak_convexity=weak_convexity,
                paper=self.paper,
                max_iters=self.max_inner_iters,
            )
            w = out.w
            iterates.append(w.clone())
            stats.inner_steps.append(out.steps)
            stats.inner_max_distance = max(stats.inner_max_distance, out.max_distance)
            if out.max_region_distance is not None:
                region_distances.append(out.max_region_distance)
        stats.steps = sum(stats.inner_steps)
        stats.inner_max_region_distance = max(region_distances) if region_distances else None
        return finish(
            self,
            output=w,
            iterates=iterates,
            accountant=accountant,
            stats=stats,
            queries=queries,
            notes=[note],
        )
