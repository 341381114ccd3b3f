"""Kornowski–Liu–Talwar (v2): improved private nonsmooth nonconvex optimization, one config.

Private O2NC (Algorithm 2) driven by one of three private oracles (zeroth-order single pass,
first-order single pass, multi-pass ERM): :class:`KornowskiLiuTalwar`, whose docstring states the
oracles and the ``paper`` switch. Schedules: :mod:`dpnc.algorithms.klt.theory`. See docs/klt.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from dpnc.algorithms.base import Cost, Setting, approximate
from dpnc.algorithms.klt import theory
from dpnc.algorithms.o2nc import OUTPUT_RULES, O2NCAlgorithm, practical_period, practical_travel
from dpnc.algorithms.oracles import OracleStats, TreeOracle, check_move
from dpnc.checks import check_choice, check_integer, check_positive
from dpnc.estimators import ball_gradient_estimate, diff_estimate, grad_estimate, uniform_ball
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.budget import Budget
from dpnc.privacy.calibrate import fit_rho, zcdp_gaussian_sigma
from dpnc.privacy.clipping import clip_each, clipped_sum
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.release import release_sum
from dpnc.privacy.releases import Gaussian, TreeAggregated, mean_sensitivity
from dpnc.privacy.tree import leaf_participation
from dpnc.sampling import FullBatch

ORACLES = theory.ORACLES


@dataclass(frozen=True)
class KornowskiLiuTalwar(O2NCAlgorithm):
    """Private O2NC (Algorithm 2) with the zeroth-order (Alg. 3), first-order (Alg. 5) or multi-pass
    (Alg. 4) oracle.

    Implements: Kornowski–Liu–Talwar 2024 (v2), Algorithms 2–5; Theorems 3.1, 4.1, 6.1
        (:meth:`from_theory`).
    Correction: per-example clipping to the sensitivities' radii (KLT §7 A18); ``paper=True``
    restores the paper's unclipped oracles with the high-probability sensitivity (the mechanism then
    gets δ/2).

    Private O2NC is :class:`~dpnc.algorithms.o2nc.O2NCAlgorithm`'s run with ``block=M`` and no
    reset, driven by a private oracle for the uniform-ball smoothing F_α (its (α, β)-stationary
    points are (2α, β)-stationary for F, Lemma 2.4): :class:`ZerothOrderOracle` (one pass; periods
    of Σ steps, each opening with an anchor estimate (eq. (4), m sphere directions per example) on
    B1 = Σ fresh examples, then adding on B2 = 1 fresh example per step the difference of two
    estimates at z_t and z_{t−1} with independent directions; tree noise per period),
    :class:`FirstOrderOracle` (the same with gradients at uniform points of the α-ball) or
    :class:`MultiPassOracle` (ERM: every step reads all n examples; a noisy anchor σ₁ every Σ steps
    and a noisy increment σ₂ at the others, added to the previous *noisy* estimate; the Gaussian
    releases compose, zCDP split evenly between the two kinds).

    Privacy (docs/papers.md, KLT §2.6 and §7 A18). ``paper=False`` (default; KLT §2.6's safe mode,
    not in the paper): every example's anchor term is clipped to s_a·B1/2 and every increment to
    s_v·B2/2, so the replace-one sensitivities hold deterministically and the run is (ε, δ)-DP with
    no high-probability event; m defaults to the fewest directions whose estimation variance does
    not exceed the privacy noise's, and any m is private. Safe mode reports the fraction of clipped
    increments (``Run.stats.clip_rate``, a private statistic) and warns above 50 %. ``paper=True``:
    no clipping; the sensitivities hold with probability ≥ 1 − δ/2 over the directions *if* m is at
    least the paper's m (Lemmas 3.4–3.5, 4.3, 6.3–6.4; with KLT §7 A10's union bound for
    multi-pass), which is astronomically large for the zeroth-order oracles; a smaller m is refused.
    The mechanism gets δ/2 (:attr:`mechanism_delta`), the concentration event the other δ/2.

    Schedules are v2's (seed 003) and come from :mod:`dpnc.algorithms.klt.theory`;
    ``schedule="v1-legacy"`` gives v1's Σ and D, whose guarantee rested on a miscalculation the
    authors withdrew: reproduction only, no guarantee attached. :meth:`practical` gives documented
    practical settings (no theorem attached).

    Symbols: ``steps`` = T, ``block`` = M, ``period`` = Σ, ``smoothing`` = α, D, eta = η, B1, B2, m,
    sigma_anchor = σ₁, sigma_increment = σ₂ (single pass: both the tree node's σ), s_anchor = s_a,
    s_increment = s_v.

    Args:
        smoothing: the smoothing radius α > 0 (the output targets (2α, β)-stationarity).
        D: the learner's ball radius > 0; eta: its step ≥ 0, D/(G₁√M).
        steps: T ≥ 1 oracle queries; block: M ∈ [1, T], steps averaged into an output candidate;
        period: Σ ∈ [1, T], steps per tree (single pass) or between anchors (multi-pass).
        B1, B2: examples per anchor and per increment (multi-pass: both n, the dataset size).
        m: directions (zeroth order) or ball points (first order) per example ≥ 1.
        sigma_anchor, sigma_increment: noise std ≥ 0 (single pass: both the tree node's σ; 0: the
            non-private twin).
        s_anchor, s_increment: replace-one sensitivities > 0 of an anchor and of an increment.
        budget: the (ε, δ) target the noise was set for (the privacy δ lives only here).
        oracle: one of :data:`ORACLES`.
        beta: multi-pass only: the β the schedule targets (None: not set by a theorem).
        common_directions: increments use the same directions at z_t and z_{t−1} (DIFF, ZTC
            Algorithm 2) instead of the paper's independent ones (KLT §7 A14; unanalysed by the
            paper).
        schedule: ``"v2"`` or ``"v1-legacy"`` (which version's theorem set the schedule).
        paper: the paper's unclipped oracles (Privacy, above).
        L0: the per-example Lipschitz constant L the config was built for (keyword): the estimators
            clip each difference (gradient) to what it allows; :meth:`run` refuses an objective that
            declares a larger one.

    Raises:
        ValueError: at construction, naming the argument, for any value outside these ranges.
    """

    name = "klt"
    family = "kornowski-liu-talwar"
    reset_each_block = False
    constant_fields = ("L0",)

    smoothing: float
    D: float
    eta: float
    steps: int
    block: int
    period: int
    B1: int
    B2: int
    m: int
    sigma_anchor: float
    sigma_increment: float
    s_anchor: float
    s_increment: float
    budget: Budget
    oracle: str = "zeroth-order"
    beta: float | None = None
    common_directions: bool = False
    schedule: str = "v2"
    paper: bool = False
    output_rule: str = "random-block"
    L0: float = field(kw_only=True)

    def __post_init__(self) -> None:
        check_positive(L0=self.L0)
        check_choice("oracle", self.oracle, ORACLES)
        check_choice("schedule", self.schedule, theory.SCHEDULES)
        check_choice("output_rule", self.output_rule, OUTPUT_RULES)
        check_positive(
            smoothing=self.smoothing, D=self.D, s_anchor=self.s_anchor, s_increment=self.s_increment
        )
        check_positive(
            allow_zero=True,
            eta=self.eta,
            sigma_anchor=self.sigma_anchor,  # σ = 0: the non-private twin
            sigma_increment=self.sigma_increment,
        )
        if not isinstance(self.budget, Budget):
            raise TypeError(f"budget must be an (ε, δ) Budget; got {self.budget!r}")
        self._check_counts()
        if self.oracle == "multi-pass" and self.B1 != self.B2:
            raise ValueError(
                f"the multi-pass oracle reads all n examples at every step: B1 = B2 = n; "
                f"got B1={self.B1}, B2={self.B2}"
            )

    def non_private(self) -> KornowskiLiuTalwar:
        """The σ = 0 twin (its releases carry no noise: the report says not private)."""
        return replace(self, sigma_anchor=0.0, sigma_increment=0.0)

    @property
    def samples(self) -> int:
        """Examples read (single pass: each once, B1·A + B2·(T − A) ≤ 2T + Σ ≤ n; multi-pass: n)."""
        return self.B1 if self.oracle == "multi-pass" else super().samples

    @property
    def mechanism_delta(self) -> float:
        """The δ the noise is calibrated for: all of the budget's δ, or half with ``paper=True``
        (KLT §7 A7)."""
        return self.budget.delta / 2 if self.paper else self.budget.delta

    @property
    def anchor_radius(self) -> float:
        """Per-example radius r with 2r/B1 = s_a (clipped to unless ``paper``)."""
        return self.s_anchor * self.B1 / 2

    @property
    def increment_radius(self) -> float:
        """Per-example radius r with 2r/B2 = s_v."""
        return self.s_increment * self.B2 / 2

    @classmethod
    def from_theory(
        cls,
        setting: Setting,
        budget: Budget,
        *,
        smoothing: float,
        oracle: str = "zeroth-order",
        paper: bool = False,
        m: int | None = None,
        max_directions: int | None = None,
        schedule: str = "v2",
        calibration: str = "zcdp",
        beta: float | None = None,
        max_steps: int | None = None,
        common_directions: bool = False,
        theory_constants: theory.TheoryConstants = theory.TheoryConstants(),
    ) -> KornowskiLiuTalwar:
        """Theorem 3.1 (``"zeroth-order"``), 6.1 (``"first-order"``) or 4.1 (``"multi-pass"``) for
        the setting's n.

        Reads d, L = constants.L0 and Φ = ``setting.gap`` (a bound on F(x₀) − inf F); ``smoothing``
        is the radius α (the output is (2α, β)-stationary); the budget is the paper's (ε, δ). Single
        pass: :func:`~dpnc.algorithms.klt.theory.single_pass_schedule` (``schedule``,
        ``calibration``); multi-pass: :func:`~dpnc.algorithms.klt.theory.multi_pass_schedule`
        (``beta``, ``max_steps``). m: with ``paper=True`` the paper's m (a smaller one is refused);
        otherwise the variance-matching m unless given, at most ``max_directions`` (a cap on the
        work). η = D/√(G₁²·M), for that m."""
        budget = approximate(budget, "KLT")
        n, d, L, alpha = setting.n, setting.d, setting.constants.L0, smoothing
        Phi, epsilon, dp_delta = setting.require_gap("KLT's theorems"), budget.epsilon, budget.delta
        theory.check_theory_inputs(
            oracle=oracle,
            schedule=schedule,
            n=n,
            d=d,
            epsilon=epsilon,
            dp_delta=dp_delta,
            L=L,
            Phi=Phi,
            smoothing=alpha,
        )
        mechanism_delta = dp_delta / 2 if paper else dp_delta
        common = dict(
            n=n,
            d=d,
            L=L,
            Phi=Phi,
            alpha=alpha,
            epsilon=epsilon,
            mechanism_delta=mechanism_delta,
            constants=theory_constants,
        )
        if oracle == "multi-pass":
            if schedule != "v2":
                raise ValueError(
                    f"the multi-pass schedule exists in v2 only; got schedule={schedule!r}"
                )
            fields = theory.multi_pass_schedule(beta=beta, max_steps=max_steps, **common)
        else:
            fields = theory.single_pass_schedule(
                oracle, schedule=schedule, calibration=calibration, **common
            )
        config = cls(
            smoothing=alpha,
            eta=0.0,
            m=1,
            budget=budget,
            oracle=oracle,
            L0=L,
            common_directions=common_directions,
            schedule=schedule,
            paper=paper,
            **fields,
        )
        needed = theory.paper_directions(
            oracle,
            d=d,
            alpha=alpha,
            D=config.D,
            B1=config.B1,
            B2=config.B2,
            delta=dp_delta,
            T=config.steps,
            c=theory_constants.c,
        )
        if paper:
            if m is not None and m < needed:
                raise ValueError(
                    f"paper=True needs m >= {needed} directions for its high-probability sensitivity "
                    f"(got m={m}); use paper=False (per-example clipping) with a smaller m"
                )
            m = needed if m is None else m
        elif m is None:
            m = theory.variance_directions(
                oracle,
                d=d,
                L=L,
                Sigma=config.period,
                B1=config.B1,
                B2=config.B2,
                sigma_anchor=config.sigma_anchor,
                sigma_increment=config.sigma_increment,
            )
            m = m if max_directions is None else min(m, max_directions)
        check_integer(m=m)
        config = replace(config, m=m)
        return replace(
            config, eta=config.D / math.sqrt(theory.second_moment(config, d=d, L=L) * config.block)
        )

    @classmethod
    def practical(cls, setting: Setting, budget: Budget, **options) -> KornowskiLiuTalwar:
        """Practical settings: parameters that make progress at realistic n and d (a documented
        variant, not a theorem's schedule). Every release is accounted exactly as in
        :meth:`from_theory`; only the choices differ.

        Guarantee: privacy is exact ((ε, δ) by the accountant, every term clipped, no
        high-probability event). The stationarity guarantee of Theorems 3.1/4.1/6.1 does **not**
        apply: the clip radius, the increments' radius and D are not the theorems', so the
        sensitivity-to-variance balance of the proofs is broken (the increments are biased when
        clipped), and the default output is the last iterate, which no theorem bounds.

        Why the theorems' settings do not move (measured on a 2-layer ReLU net, d = 97, n = 20,000):
        the sensitivities use the worst case L (14.2 for the declared ball, while per-example
        gradients there are ≈ 1.2), so σ swamps a gradient of norm ≈ 0.2; D is 1e-5 to 1e-4 and η =
        D/(G₁√M) with G₁ dominated by that noise is 1e-10 to 1e-7, so x moves ≈ 1e-4 in T ≈ 10⁴
        steps; the zeroth-order increments (independent directions at z_t and z_{t−1}) are of the
        size of a whole gradient estimate, not of ‖z_t − z_{t−1}‖, so safe mode clips 98–100 % of
        them unless m is the paper's (≈ 10⁹).

        Rules (public: they read the constants, n, d, ε, δ and the options only):

        * clip radius C = ``clip`` (default L0, the declared per-example gradient bound); a
          zeroth-order anchor term is clipped to r_a = C·√(1 + (d−1)/m) (the typical norm of an
          m-direction estimate of a gradient of norm C), a first-order one to r_a = C;
        * increments use **common** directions (zeroth order: DIFF) or common ball points (first
          order) at z_t and z_{t−1} (``common_directions``, default True; KLT §7 A14), and are
          clipped to r_v = r_a·B2/B1, which makes the anchor's and the increments' sensitivities
          equal (s = 2r_a/B1 = 2r_v/B2; the tree's σ is set by the larger, so a larger r_v would
          only add noise). :attr:`~dpnc.algorithms.oracles.OracleStats.clip_rate` reports the
          fraction of increments clipped, and the run warns above 50 %;
        * single pass: Σ = B1 = :func:`~dpnc.algorithms.o2nc.practical_period` (the smallest power
          of two whose released noise is at most ``noise_ratio``·r_a, default 0.5, with at least
          four periods), B2 = 1, T = ⌊(n − Σ)/2⌋ (so 2T + Σ ≤ n), σ = s·√(Lvl/(2ρ)) (the whole zCDP
          budget ρ on the tree; ρ is fitted by :func:`~dpnc.privacy.calibrate.fit_rho` so that the
          accountant's own ε(δ) is ≤ ε);
        * multi-pass: T = ``steps`` (default 100; the cost is T·n·2m evaluations), Σ = ⌈√T⌉, half
          the zCDP budget on the ⌈T/Σ⌉ anchors (σ₁ = s_a√(A/ρ)), half on the increments (σ₂ =
          s_v√((T−A)/ρ)), B1 = B2 = n;
        * m = ``m`` (default d for zeroth order, as ZTC; 1 for first order);
        * D = ``travel``/T, the total distance T·D the iterates may move being ``travel`` (default
          the region's radius, else 2Φ/L0 with Φ = ``setting.gap``:
          :func:`~dpnc.algorithms.o2nc.practical_travel`);
        * α = ``smoothing`` (default travel/20), block M = ⌊α/(4D)⌋ (the paper's relation, so each
          block average is within α/4 of its points), η = D/(G₁√M) with G₁² = C² + d·σ²·Lvl (single
          pass) or C² + d(σ₁² + Σσ₂²) (multi-pass), the released g̃'s second moment with constants
          1;
        * ``output_rule`` = ``"last"`` (default; public post-processing, no privacy cost) or
          ``"random-block"``.

        Args:
            setting: the problem's public :class:`~dpnc.algorithms.base.Setting` (constants.L0,
                region; n, d).
            budget: the (ε, δ) target (:class:`~dpnc.privacy.budget.Budget`).
            **options: ``oracle`` (default ``"zeroth-order"``), ``clip``, ``m``, ``travel``,
                ``smoothing``, ``noise_ratio``, ``steps`` (multi-pass), ``common_directions``,
                ``output_rule``.

        Raises:
            ValueError: naming an unknown option or one outside its range.
        """
        allowed = {
            "oracle",
            "clip",
            "m",
            "travel",
            "smoothing",
            "noise_ratio",
            "steps",
            "common_directions",
            "output_rule",
        }
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise ValueError(f"options must be among {sorted(allowed)}; got {unknown}")
        oracle = options.get("oracle", "zeroth-order")
        check_choice("oracle", oracle, ORACLES)
        budget = approximate(budget, "KLT")
        constants, n, d, epsilon, delta = (
            setting.constants,
            setting.n,
            setting.d,
            budget.epsilon,
            budget.delta,
        )
        C = options.get("clip", constants.L0)
        check_positive(clip=C)
        m = options.get("m", d if oracle != "first-order" else 1)
        check_integer(m=m)
        travel = practical_travel(constants, options.get("travel"), setting.gap)
        alpha = options.get("smoothing", travel / 20)
        check_positive(smoothing=alpha)
        r_a = C * math.sqrt(1 + (d - 1) / m) if oracle != "first-order" else C
        if oracle == "multi-pass":
            T = options.get("steps", 100)
            check_integer(steps=T)
            Sigma = min(T, math.ceil(math.sqrt(T)))
            B1 = B2 = n
            anchors = -(-T // Sigma)
            s_a, s_v = 2 * r_a / n, 2 * r_a / (Sigma * n)

            def noise(rho: float) -> tuple[float, float]:
                share = rho / 2 if T > anchors else rho
                return (
                    zcdp_gaussian_sigma(s_a, share / anchors),
                    zcdp_gaussian_sigma(s_v, share / max(T - anchors, 1)),
                )

            def releases(rho: float) -> list:
                sa, sv = noise(rho)
                return [(Gaussian(s_a, sa), anchors), (Gaussian(s_v, sv), T - anchors)]

            sigma_anchor, sigma_increment = noise(fit_rho(releases, epsilon=epsilon, delta=delta))
            noise2 = d * (sigma_anchor**2 + Sigma * sigma_increment**2)
        else:
            Sigma = practical_period(
                n=n, d=d, rho=budget.to_zcdp().rho, noise_ratio=options.get("noise_ratio", 0.5)
            )
            T = max(1, (n - Sigma) // 2)
            Sigma = min(Sigma, T)
            B1, B2 = Sigma, 1
            s_a = s_v = 2 * r_a / B1
            lvl = leaf_participation(Sigma)
            rho = fit_rho(
                lambda rho: [
                    (
                        TreeAggregated(
                            Gaussian(s_a, zcdp_gaussian_sigma(s_a, rho / lvl)), leaves=Sigma
                        ),
                        1,
                    )
                ],
                epsilon=epsilon,
                delta=delta,
            )
            sigma_anchor = sigma_increment = zcdp_gaussian_sigma(s_a, rho / lvl)
            noise2 = d * sigma_anchor**2 * lvl
        D = travel / T
        block = theory.block_length(alpha, D, T)
        eta = D / math.sqrt((C**2 + noise2) * block)
        return cls(
            smoothing=alpha,
            D=D,
            eta=eta,
            steps=T,
            block=block,
            period=Sigma,
            B1=B1,
            B2=B2,
            m=m,
            sigma_anchor=sigma_anchor,
            sigma_increment=sigma_increment,
            s_anchor=s_a,
            s_increment=s_v,
            budget=budget,
            oracle=oracle,
            L0=constants.L0,
            common_directions=options.get("common_directions", True),
            output_rule=options.get("output_rule", "last"),
        )

    @classmethod
    def samples_needed(
        cls,
        setting: Setting,
        budget: Budget,
        beta: float,
        *,
        smoothing: float,
        oracle: str = "zeroth-order",
    ) -> float:
        """:func:`~dpnc.algorithms.klt.theory.samples_needed` for ``setting`` (d, L = constants.L0,
        Φ = gap) and the budget's ε: the n at which Theorem 3.1 (6.1; multi-pass: 4.1, empirical
        norm) reaches β."""
        return theory.samples_needed(
            oracle,
            beta=beta,
            d=setting.d,
            L=setting.constants.L0,
            Phi=setting.require_gap("KLT's sample complexity"),
            alpha=smoothing,
            epsilon=approximate(budget, "KLT").epsilon,
        )

    def cost(self, setting: Setting) -> Cost:
        """Examples read (:attr:`samples`) and the estimates' work: zeroth order (and multi-pass) 2m
        function evaluations per anchor example and per increment example with common directions, 4m
        with independent ones; first order one gradient per anchor example and 2m per increment
        example."""
        anchors = self.anchors * self.B1
        increments = (self.steps - self.anchors) * self.B2
        per_increment = 2 * self.m if self.common_directions else 4 * self.m
        if self.oracle == "first-order":
            return Cost(gradients=anchors + 2 * self.m * increments, samples=self.samples)
        return Cost(
            evaluations=2 * self.m * anchors + per_increment * increments, samples=self.samples
        )

    # --- the run --------------------------------------------------------------------------------

    def make_oracle(
        self, problem, *, noise: NoiseSource, accountant: Accountant, generator: torch.Generator
    ):
        """The oracle ``self.oracle`` names, on ``problem``'s data."""
        oracle_class = {
            "zeroth-order": ZerothOrderOracle,
            "first-order": FirstOrderOracle,
            "multi-pass": MultiPassOracle,
        }[self.oracle]
        return oracle_class(problem, self, noise=noise, accountant=accountant, generator=generator)

    def claim(self) -> str:
        target = f"(ε, δ) = ({self.budget.epsilon:g}, {self.budget.delta:g})"
        if not self.paper:
            return (
                f"{target} with the sensitivities enforced by per-example clipping (the corrected form): no "
                "high-probability event"
            )
        return (
            f"{target} *conditional* on the sensitivity bounds holding, an event of probability ≥ 1 − δ/2 over "
            f"the directions (m = {self.m}); the mechanism was calibrated for δ/2 = {self.mechanism_delta:g}"
        )

    def privacy_notes(self) -> list[str]:
        notes = []
        if self.paper:
            notes.append(
                f"paper=True: the ledger's ε(δ) is the mechanism's alone; the paper's (ε, δ) adds the "
                f"failure probability δ/2 = {self.mechanism_delta:g} of the unenforced sensitivities, so "
                f"report({self.mechanism_delta:g}) is the paper's accounting; the run's stats count the "
                "per-example terms beyond the assumed radius (beyond_radius)"
            )
        if self.schedule == "v1-legacy":
            notes.append(
                "schedule v1-legacy: v1's Σ and D, whose guarantee the authors withdrew (reproduction only)"
            )
        return notes

    def summary(self) -> dict[str, float]:
        return {
            **super().summary(),
            "sigma_anchor": self.sigma_anchor,
            "sigma_increment": self.sigma_increment,
        }


# --- the oracles ----------------------------------------------------------------------------------


class _Terms:
    """Per-example estimates and their clipped sums (clipped unless ``paper``), shared by the three
    oracles."""

    config: KornowskiLiuTalwar
    generator: torch.Generator
    stats: OracleStats
    CHUNK = 1 << 21  # values per batched call: bounds memory when all n examples are read

    def _estimate(self, w: torch.Tensor, index: torch.Tensor, m: int) -> torch.Tensor:
        """Per-example estimates of ∇f_α(w; ξ_i), shape (b, d): eq. (4) (zeroth order) or eq.
        (10)."""
        c = self.config
        estimator = ball_gradient_estimate if c.oracle == "first-order" else grad_estimate
        return self.stats.add(
            estimator(self.problem, w, index, c.smoothing, m=m, generator=self.generator, L=c.L0)
        ).per_example

    def _difference(
        self, w: torch.Tensor, w_prev: torch.Tensor, index: torch.Tensor
    ) -> torch.Tensor:
        c = self.config
        if c.common_directions and c.oracle == "first-order":
            return self._common_ball_difference(w, w_prev, index)
        if c.common_directions:
            return self.stats.add(
                diff_estimate(
                    self.problem,
                    w,
                    w_prev,
                    index,
                    c.smoothing,
                    m=c.m,
                    generator=self.generator,
                    L=c.L0,
                )
            ).per_example
        return self._estimate(w, index, c.m) - self._estimate(w_prev, index, c.m)

    def _common_ball_difference(
        self, w: torch.Tensor, w_prev: torch.Tensor, index: torch.Tensor
    ) -> torch.Tensor:
        """(1/m) Σ_j [∇f(w + y_j; ξ) − ∇f(w_prev + y_j; ξ)], the same y_j ~ Unif(B_α) at both points
        (common random numbers, the first-order analogue of DIFF; KLT §7 A14, unanalysed by the
        paper). Unbiased for ∇f_α(w; ξ) − ∇f_α(w_prev; ξ); for a piecewise-linear f most terms
        vanish or are small, so far fewer increments reach their radius than with independent
        points. Each gradient is clipped to L (a no-op for a correct L)."""
        c, b, d = self.config, len(index), self.problem.dim
        y = c.smoothing * uniform_ball(b * c.m, d, self.generator, dtype=w.dtype).reshape(b, c.m, d)
        grads = self.problem.gradients(torch.cat([w + y, w_prev + y], dim=1), index)
        each = clip_each(grads, c.L0, vector=True)
        grads = each.values
        self.stats.gradients += 2 * b * c.m
        self.stats.clipped += int(each.clipped.sum())
        self.stats.nonfinite += int(each.nonfinite.sum())
        return grads[:, : c.m].mean(1) - grads[:, c.m :].mean(1)

    def _sum(
        self, per_example, index: torch.Tensor, radius: float, *, increment: bool = False
    ) -> torch.Tensor:
        """Σ_i of ``per_example(chunk)``, each clipped to ``radius`` unless ``paper``, in chunks;
        terms beyond the radius are counted either way (and, for ``increment`` terms, in the clip
        rate's counters)."""
        size = max(1, self.CHUNK // (2 * self.config.m * self.problem.dim))
        total = 0.0
        for chunk in index.split(size):
            terms = per_example(chunk)
            beyond = int((torch.linalg.vector_norm(terms, dim=-1) > radius).sum())
            self.stats.beyond_radius += beyond
            if increment:
                self.stats.increments += len(chunk)
                self.stats.increments_clipped += beyond
            total = total + (
                terms.sum(0) if self.config.paper else clipped_sum(terms, radius, vector=True).total
            )
        return total


class ZerothOrderOracle(_Terms, TreeOracle):
    """Algorithm 3: anchors on B1 = Σ examples, increments on B2 = 1, tree noise per period, one
    pass."""

    KIND = "zeroth-order"

    def __init__(self, problem, config: KornowskiLiuTalwar, **kwargs) -> None:
        if config.oracle != self.KIND:
            raise ValueError(f"the config is for the {config.oracle!r} oracle, not {self.KIND!r}")
        self.config = config
        super().__init__(
            problem,
            period=config.period,
            B1=config.B1,
            B2=config.B2,
            sensitivity=max(config.s_anchor, config.s_increment),
            sigma=config.sigma_anchor,
            max_move=2 * config.D,
            label=f"klt-{self.KIND}-periods",
            samples=config.samples,
            **kwargs,
        )

    def anchor(self, w, index):
        return self._sum(
            lambda chunk: self._estimate(w, chunk, self._anchor_points),
            index,
            self.config.anchor_radius,
        ) / len(index)

    def increment(self, w, w_prev, index):
        return self._sum(
            lambda chunk: self._difference(w, w_prev, chunk),
            index,
            self.config.increment_radius,
            increment=True,
        ) / len(index)

    @property
    def _anchor_points(self) -> int:
        return self.config.m


class FirstOrderOracle(ZerothOrderOracle):
    """Algorithm 5: as Algorithm 3 with gradients at uniform points of the α-ball (one per anchor
    example)."""

    KIND = "first-order"

    @property
    def _anchor_points(self) -> int:
        return 1


class MultiPassOracle(_Terms):
    """Algorithm 4: all n examples at every step; g̃_t = g̃_{t−1} + increment + N(0, σ₂²I), and
    every Σ steps a fresh anchor + N(0, σ₁²I). Each release is a clipped (``paper``: unclipped) mean
    of per-example terms over the whole dataset, released by
    :func:`~dpnc.privacy.release.release_sum` with Δ = s_a or s_v (replace-one); the releases
    compose."""

    def __init__(
        self,
        problem,
        config: KornowskiLiuTalwar,
        *,
        noise: NoiseSource,
        accountant: Accountant,
        generator: torch.Generator,
    ) -> None:
        if config.oracle != "multi-pass":
            raise ValueError(f"the config is for the {config.oracle!r} oracle, not 'multi-pass'")
        if problem.n != config.B1:
            raise ValueError(
                f"the config was made for n={config.B1} examples; the problem has {problem.n}"
            )
        self.problem, self.config, self.noise, self.accountant, self.generator = (
            problem,
            config,
            noise,
            accountant,
            generator,
        )
        self.index, self.data = torch.arange(problem.n), FullBatch(problem.n)
        self.stats = OracleStats()
        self.g = self.w_prev = None

    @property
    def samples_used(self) -> int:
        return self.problem.n

    def __call__(self, t: int, w: torch.Tensor) -> torch.Tensor:
        c = self.config
        if (t - 1) % c.period == 0:
            total = self._sum(
                lambda chunk: self._estimate(w, chunk, c.m), self.index, c.anchor_radius
            )
            self.g = self._release(total, c.anchor_radius, c.sigma_anchor)
        else:
            check_move(w, self.w_prev, 2 * c.D)
            total = self._sum(
                lambda chunk: self._difference(w, self.w_prev, chunk),
                self.index,
                c.increment_radius,
                increment=True,
            )
            self.g = self.g + self._release(total, c.increment_radius, c.sigma_increment)
        self.w_prev = w
        return self.g

    def _release(self, total: torch.Tensor, radius: float, sigma: float) -> torch.Tensor:
        """Σ/n + N(0, σ²I), recorded with Δ = mean_sensitivity(radius, n) (= s_a or s_v
        replace-one)."""
        sensitivity = mean_sensitivity(radius, self.data.batch_size, self.accountant.relation)
        return release_sum(
            total,
            radius,
            sampler=self.data,
            noise=self.noise,
            accountant=self.accountant,
            noise_multiplier=sigma / sensitivity,
        )
