"""Private zeroth-order nonsmooth nonconvex optimization (Zhang, Tran & Cutkosky, ICLR 2024).

O2NC (:mod:`dpnc.algorithms.o2nc`) driven by a private variance-reduced or naive oracle on the
uniform smoothing F̂_δ, one config: :class:`ZhangTranCutkosky`, whose docstring states the
oracles, the privacy statement and the corrections. See docs/ztc.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from dpnc.algorithms.base import Cost, Setting, approximate, zcdp
from dpnc.algorithms.o2nc import OUTPUT_RULES, O2NCAlgorithm, practical_period, practical_travel
from dpnc.algorithms.oracles import SinglePassOracle, TreeOracle
from dpnc.algorithms.ztc.theory import clamp_steps, evaluations, moments, sensitivities
from dpnc.algorithms.ztc.theory import samples_needed as theory_samples_needed
from dpnc.checks import check_choice, check_integer, check_positive
from dpnc.estimators import diff_estimate, grad_estimate
from dpnc.privacy.accountant import new_partition
from dpnc.privacy.budget import ZCDP, Budget
from dpnc.privacy.calibrate import fit_rho, ztc_tree_sigma
from dpnc.privacy.clipping import clipped_sum
from dpnc.privacy.release import private_mean
from dpnc.privacy.releases import Gaussian, TreeAggregated, mean_sensitivity
from dpnc.privacy.tree import leaf_participation
from dpnc.sampling import FullBatch

ORACLES = ("variance-reduced", "naive")


# --- the config -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZhangTranCutkosky(O2NCAlgorithm):
    """O2NC (Algorithm 3) with the private variance-reduced (Algorithms 4–5) or naive (Algorithm 6)
    oracle.

    Implements: Zhang–Tran–Cutkosky 2024, Algorithms 3–6; Theorem 4.9 and App. E
        (:meth:`from_theory`).
    Correction: ZTC §6.1–6.4 in docs/papers.md: T uses max, not min (§6.1); σ uses the exact
    per-leaf node count ⌊log₂T⌋ + 1 and max(s₁, s₂) (§6.2–3); the guarantee is (2δ, ε)-stationarity
    of F in expectation (§6.4). ``paper=True`` records that σ and T were set by the printed
    formulas.

    Oracles: ``"variance-reduced"`` (:class:`VarianceReducedOracle`, Algorithm 4 + the tree
    mechanism, Algorithm 5): at the first step of each epoch GRAD on a fresh batch of B1 examples;
    then the running sum g_t = g_{t−1} + DIFF(w_t, w_{t−1}) on fresh batches of B2; released as g_t
    + TREE(t), the tree noise reset each epoch; the running sum stays noiseless, so noise never
    feeds back. ``"naive"`` (:class:`NaiveOracle`, Algorithm 6, the baseline): GRAD with m (paper:
    1) directions per example on a fresh batch of B, released through
    :func:`~dpnc.privacy.release.private_mean` with σ = 2dL/(Bρ) (the paper prints dL/(Bρ), off by
    2). Every example is used once (:class:`~dpnc.sampling.SinglePass`), so epochs (and the naive
    oracle's steps) are on disjoint data and are accounted by parallel composition: the whole run
    costs one epoch.

    Privacy is stated as in the paper: "(α, αρ²/2)-RDP for all α > 1", i.e. ρ²/2-zCDP. ``rho`` is
    always the paper's ρ; the accountant reports zCDP ρ_zCDP = ρ²/2 and ε(δ) by RDP and PLD.
    :meth:`practical` gives documented practical settings (per-example clipping at realistic radii,
    larger D, last-iterate output; no theorem attached).

    Symbols: ``period`` = T (steps per epoch = the tree's leaves = the O2NC block), ``steps`` = K·T,
    ``smoothing`` = δ (the smoothing radius), D = δ/T, eta = η, B1, B2, m, sigma = σ (every tree
    node's std), rho = ρ.

    References:
        X. Zhang, H. Tran, A. Cutkosky, "Private zeroth-order nonsmooth nonconvex optimization",
        ICLR 2024 (arXiv:2406.19579).

    Args:
        smoothing: the smoothing radius δ > 0 (the output is (2δ, ·)-stationary for F).
        D: the learner's ball radius (δ/T so that every w of an epoch lies within δ of its average).
        eta: the projected-OGD step ≥ 0, D/(G√T).
        steps: oracle queries K·T ≥ period.
        period: T ≥ 1, steps per epoch (tree leaves; the learner restarts each epoch; the O2NC
            block).
        B1, B2: examples of the epoch's first step (GRAD) and of the others (DIFF); naive: B1 = B2 =
            B.
        m: sphere directions per example ≥ 1 (the paper: d for Algorithm 4, 1 for Algorithm 6).
        sigma: the noise std ≥ 0 of every tree node (or of every naive release); 0 only in the
            non-private twin.
        rho: the paper's ρ > 0 the noise was set for: the run is (α, αρ²/2)-RDP.
        oracle: ``"variance-reduced"`` or ``"naive"``.
        clip: clip each finite difference to what an L-Lipschitz f allows (ZTC §6.14).
        paper: σ and T from the printed formulas (set by :meth:`from_theory`).
        L0: the per-example Lipschitz constant L the config was built for (keyword; None only for an
            objective that declares none, with per-example radii and ``clip=False``): the
            sensitivities dL and the clip 2Lδ; :meth:`run` refuses an objective that declares a
            larger one.

    Raises:
        ValueError: at construction, naming the argument, for any value outside these ranges, and
            for B1 < T·B2/2 (variance-reduced: Cor 4.4 needs the anchor no more sensitive than a
            DIFF step).
    """

    name = "zo-o2nc"
    family = "zhang-tran-cutkosky"
    reset_each_block = True
    constant_fields = ("L0",)

    smoothing: float
    D: float
    eta: float
    steps: int
    period: int
    B1: int
    B2: int
    m: int
    sigma: float
    rho: float
    oracle: str = "variance-reduced"
    clip: bool = True
    paper: bool = False
    radius_anchor: float | None = None
    radius_increment: float | None = None
    output_rule: str = "random-block"
    L0: float | None = field(kw_only=True)

    def __post_init__(self) -> None:
        check_choice("oracle", self.oracle, ORACLES)
        if self.L0 is not None:
            check_positive(L0=self.L0)
        elif self.radius_anchor is None or self.clip:
            raise ValueError(
                "L0 must be a finite number > 0 (the public Lipschitz constant of the sensitivities dL "
                "and of the clip 2Lδ) unless per-example radii are given and clip=False; got None"
            )
        check_choice("output_rule", self.output_rule, OUTPUT_RULES)
        check_positive(smoothing=self.smoothing, D=self.D, rho=self.rho)
        check_positive(
            allow_zero=True, eta=self.eta, sigma=self.sigma
        )  # σ = 0: the non-private twin
        self._check_counts()
        if (self.radius_anchor is None) != (self.radius_increment is None):
            raise ValueError(
                f"radius_anchor and radius_increment must be given together (per-example clipping) or "
                f"both None; got {self.radius_anchor!r}, {self.radius_increment!r}"
            )
        if self.radius_anchor is not None:
            check_positive(radius_anchor=self.radius_anchor, radius_increment=self.radius_increment)
            if self.oracle != "variance-reduced":
                raise ValueError(
                    f"per-example radii apply to the 'variance-reduced' oracle only; got {self.oracle!r}"
                )
        elif self.oracle == "variance-reduced" and self.B1 < self.period * self.B2 / 2:
            raise ValueError(
                f"B1 must be >= T·B2/2 = {self.period * self.B2 / 2:g} (Cor 4.4: the anchor must "
                f"not be more sensitive than a DIFF step); got B1={self.B1}"
            )
        if self.oracle == "naive" and self.B1 != self.B2:
            raise ValueError(
                f"the naive oracle uses one batch size B = B1 = B2; got B1={self.B1}, B2={self.B2}"
            )

    def non_private(self) -> ZhangTranCutkosky:
        """The σ = 0 twin (its tree releases carry no noise: the report says not private)."""
        return replace(self, sigma=0.0)

    @property
    def block(self) -> int:
        """The O2NC block is the epoch: T."""
        return self.period

    @property
    def epochs(self) -> int:
        """K = ⌊steps/T⌋ completed epochs."""
        return self.steps // self.period

    # --- the theorems ---------------------------------------------------------------------------

    @classmethod
    def variance_reduced(
        cls,
        *,
        d: int,
        L: float,
        smoothing: float,
        rho: float,
        period: int,
        epochs: int,
        B1: int | None = None,
        B2: int = 1,
        m: int | None = None,
        paper: bool = False,
    ) -> ZhangTranCutkosky:
        """Algorithms 3–5 at a given (T, K): B1 = T + 1 unless given, D = δ/T (δ = ``smoothing``), σ
        by Cor 4.4, η = D/(G√T); ``rho`` is the paper's ρ."""
        delta = smoothing
        check_integer(d=d, period=period, epochs=epochs, B2=B2)
        check_positive(L=L, smoothing=delta, rho=rho)
        B1 = period + 1 if B1 is None else B1
        check_integer(B1=B1)
        if B1 < period * B2 / 2:
            raise ValueError(
                f"B1 must be >= T·B2/2 = {period * B2 / 2:g} (Cor 4.4: the anchor must not be more "
                f"sensitive than a DIFF step); got B1={B1}"
            )
        sigma = ztc_tree_sigma(d, L, rho, period, B1, B2, paper=paper)
        config = cls(
            delta,
            delta / period,
            0.0,
            period * epochs,
            period,
            B1,
            B2,
            d if m is None else m,
            sigma,
            rho,
            "variance-reduced",
            paper=paper,
            L0=L,
        )
        return config._with_eta(d, L)

    @classmethod
    def naive(
        cls,
        *,
        d: int,
        L: float,
        smoothing: float,
        rho: float,
        period: int,
        epochs: int,
        B: int = 1,
        m: int = 1,
    ) -> ZhangTranCutkosky:
        """Algorithm 3 with the naive oracle (Algorithm 6): σ = 2dL/(Bρ), D = δ/T (δ =
        ``smoothing``), η = D/(G√T)."""
        delta = smoothing
        check_integer(d=d, period=period, epochs=epochs, B=B, m=m)
        check_positive(L=L, smoothing=delta, rho=rho)
        config = cls(
            delta,
            delta / period,
            0.0,
            period * epochs,
            period,
            B,
            B,
            m,
            2 * d * L / (B * rho),
            rho,
            "naive",
            L0=L,
        )
        return config._with_eta(d, L)

    @classmethod
    def from_theory(
        cls,
        setting: Setting,
        budget: Budget | ZCDP,
        *,
        smoothing: float,
        samples: int | None = None,
        oracle: str = "variance-reduced",
        paper: bool = False,
        m: int | None = None,
    ) -> ZhangTranCutkosky:
        """Theorem 4.9 (variance-reduced) or Appendix E (naive) for M = ``samples`` examples
        (default: the setting's n), smoothing radius δ = ``smoothing``, with m directions per
        example (default: d for the variance-reduced oracle, the paper's 1 for the naive one; T and
        K do not depend on m). Reads d, L = constants.L0 and F* = ``setting.gap`` (a bound on F(x₀)
        − inf F); the budget is converted once to the paper's ρ (``to_zcdp().rdp_rho``: "(α,
        αρ²/2)-RDP", i.e. ρ²/2-zCDP).

        Variance-reduced: T = max{(√d·LδM/(F*+Lδ))^{2/3}, (d^{3/2}LδM/((F*+Lδ)ρ))^{1/2}} (ZTC §6.1:
        max, not the printed min, and √d in the first term), B1 = T+1, B2 = 1, K = ⌊M/(2T)⌋. Naive:
        B = 1 and T balancing the App. E bound (F*+Lδ)BT/(δM) + (L/√T)(√(d/B) + 1 + d^{3/2}/(Bρ)),
        i.e. T = (b/(2a))^{2/3}; K = ⌊M/T⌋. T is rounded and clamped to [2, M/2] so that K ≥ 1."""
        M = setting.n if samples is None else samples
        d, L, F_star, delta = (
            setting.d,
            setting.constants.L0,
            setting.require_gap("ZTC's theorem"),
            smoothing,
        )
        rho = zcdp(budget).rdp_rho
        check_integer(samples=M)
        check_positive(L0=L, smoothing=delta, rho=rho)
        check_choice("oracle", oracle, ORACLES)
        scale = (F_star + L * delta) / (delta * M)
        if oracle == "variance-reduced":
            T1 = (math.sqrt(d) * L / scale) ** (2 / 3)
            T2 = (d**1.5 * L / (scale * rho)) ** 0.5
            T = clamp_steps(max(T1, T2), M // 2)
            return cls.variance_reduced(
                d=d, L=L, smoothing=delta, rho=rho, period=T, epochs=M // (2 * T), m=m, paper=paper
            )
        b = L * (math.sqrt(d) + 1 + d**1.5 / rho)
        T = clamp_steps((b / (2 * scale)) ** (2 / 3), M // 2)
        return cls.naive(
            d=d, L=L, smoothing=delta, rho=rho, period=T, epochs=M // T, m=1 if m is None else m
        )

    @classmethod
    def practical(cls, setting: Setting, budget: Budget, **options) -> ZhangTranCutkosky:
        """Practical settings of the variance-reduced oracle: parameters that make progress at
        realistic n and d (a documented variant, not Theorem 4.9's schedule). Releases are accounted
        exactly as in :meth:`from_theory` (one tree-aggregated Gaussian per epoch, epochs on
        disjoint data).

        Guarantee: privacy is exact (the sensitivities are enforced by per-example clipping, so ρ =
        √(2ρ_z) with ρ_z the zCDP budget of (ε, δ) holds deterministically). Theorem 4.9's
        stationarity bound does **not**
        apply: the clip radii are not the worst case dL, D ≠ δ/T (an epoch's points are not within δ
        of their average), clipped increments are biased, and the default output is the last
        iterate.

        Why the theorem's settings do not move (measured on a 2-layer ReLU net, d = 97, n = 20,000):
        the sensitivities 2dL/B1 and 4dL/(B2·T) use the worst-case estimate norm dL (≈ 1,400 for the
        declared L = 14.2) where a d-direction estimate of a per-example gradient has norm ≈ √2·1.2,
        so σ ≈ 4–12 per coordinate buries a gradient of norm ≈ 0.2; and D = δ/T ≈ 1e-5 with η =
        D/(G√T) ≈ 1e-10 to 1e-9 (G is dominated by that noise), so x moves far less than δ = 0.1 in
        the whole run.

        Rules (public: they read the constants, n, d, ε, δ and the options only):

        * m = ``m`` (default d, the paper's); the clip radius C = ``clip`` (default L0); each GRAD
          term is clipped to r₁ = C·√(1 + (d−1)/m) (the typical norm of an m-direction estimate of a
          gradient of norm C), each DIFF term to r₂ = r₁·B2/B1, so s₁ = 2r₁/B1 = s₂ = 2r₂/B2
          (replace-one); :attr:`~dpnc.algorithms.oracles.OracleStats.clip_rate` reports the fraction
          of DIFF terms clipped and the run warns above 50 %;
        * T = B1 = :func:`~dpnc.algorithms.o2nc.practical_period` (``noise_ratio``, default 0.5), B2
          = 1, K = ⌊n/(2T − 1)⌋ epochs; σ = √(⌊log₂T⌋ + 1)·s/ρ (Cor 4.4's form with the exact node
          count), ρ = √(2ρ_z) with ρ_z fitted by :func:`~dpnc.privacy.calibrate.fit_rho` so that the
          accountant's ε(δ) is ≤ ε;
        * D = ``travel``/(K·T), the iterates moving at most ``travel`` in all (default the radius of
          ``constants.region``, else 2Φ/L0 with Φ = ``setting.gap``:
          :func:`~dpnc.algorithms.o2nc.practical_travel`); δ = ``smoothing`` (default travel/20); η
          = D/(G√M) with G² = C² + (⌊log₂T⌋ + 1)·d·σ² and M = ⌊δ/(4D)⌋ clamped to [1, T] (the window
          of KLT's η; Theorem 4.9's √T makes η too small for Δ to reach D before the epoch's reset);
        * ``output_rule`` = ``"last"`` (default; public post-processing) or ``"random-block"`` (the
          paper's).

        Args:
            setting: the problem's public :class:`~dpnc.algorithms.base.Setting` (constants.L0,
                region; n, d).
            budget: the (ε, δ) target (:class:`~dpnc.privacy.budget.Budget`; the accountant's ε(δ)
                is fitted to it; the smoothing radius, the config's ``smoothing`` field, is the
                ``smoothing`` option).
            **options: ``clip``, ``m``, ``travel``, ``smoothing``, ``noise_ratio``, ``output_rule``.

        Raises:
            ValueError: naming an unknown option or one outside its range.
        """
        allowed = {"clip", "m", "travel", "smoothing", "noise_ratio", "output_rule"}
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise ValueError(f"options must be among {sorted(allowed)}; got {unknown}")
        budget = approximate(budget, "ZTC's practical rules (fitted to the accountant's ε(δ))")
        constants, n, d, epsilon, delta = (
            setting.constants,
            setting.n,
            setting.d,
            budget.epsilon,
            budget.delta,
        )
        C = options.get("clip", constants.L0)
        check_positive(clip=C)
        m = options.get("m", d)
        check_integer(m=m)
        travel = practical_travel(constants, options.get("travel"), setting.gap)
        smoothing = options.get("smoothing", travel / 20)
        rho_z = budget.to_zcdp().rho
        T = practical_period(n=n, d=d, rho=rho_z, noise_ratio=options.get("noise_ratio", 0.5))
        if n < 2 * T - 1 or T < 2:
            raise ValueError(
                f"n must be >= 3 for one epoch of T >= 2 steps (2T − 1 examples); got n={n}"
            )
        K = n // (2 * T - 1)
        r1 = C * math.sqrt(1 + (d - 1) / m)
        r2 = r1 / T
        ell, s = leaf_participation(T), 2 * r1 / T
        rho_z = fit_rho(
            lambda rho: [
                (TreeAggregated(Gaussian(s, math.sqrt(ell / (2 * rho)) * s), leaves=T), 1)
            ],
            epsilon=epsilon,
            delta=delta,
        )
        rho = math.sqrt(2 * rho_z)
        sigma = math.sqrt(ell) * s / rho
        D = travel / (K * T)
        window = min(
            T, max(1, math.floor(smoothing / (4 * D)))
        )  # KLT's M = ⌊α/(4D)⌋, here with α = δ
        eta = D / (math.sqrt(C**2 + ell * d * sigma**2) * math.sqrt(window))
        return cls(
            smoothing,
            D,
            eta,
            K * T,
            T,
            T,
            1,
            m,
            sigma,
            rho,
            "variance-reduced",
            radius_anchor=r1,
            radius_increment=r2,
            output_rule=options.get("output_rule", "last"),
            L0=constants.L0,
        )

    @classmethod
    def samples_needed(
        cls,
        setting: Setting,
        budget: Budget | ZCDP,
        beta: float,
        *,
        smoothing: float,
        oracle: str = "variance-reduced",
    ) -> float:
        """:func:`~dpnc.algorithms.ztc.theory.samples_needed` for ``setting`` (d, L = constants.L0,
        F* = gap) and the budget's paper ρ (``to_zcdp().rdp_rho``): the n at which Theorem 4.9 (App.
        E) reaches β."""
        return theory_samples_needed(
            oracle,
            beta=beta,
            d=setting.d,
            L=setting.constants.L0,
            gap=setting.require_gap("ZTC's sample complexity"),
            smoothing=smoothing,
            rho=zcdp(budget).rdp_rho,
        )

    def _with_eta(self, d: int, L: float) -> ZhangTranCutkosky:
        _, G, _ = moments(self, d, L)
        return replace(self, eta=self.D / (G * math.sqrt(self.period)))

    # --- the run --------------------------------------------------------------------------------

    def make_oracle(self, problem, *, noise, accountant, generator):
        """The oracle ``self.oracle`` names, on ``problem``'s data in one pass."""
        oracle_class = VarianceReducedOracle if self.oracle == "variance-reduced" else NaiveOracle
        return oracle_class(problem, self, noise=noise, accountant=accountant, generator=generator)

    def cost(self, setting: Setting) -> Cost:
        """One pass: ``samples`` examples read, 2m function evaluations each
        (:func:`~dpnc.algorithms.ztc.theory.evaluations`)."""
        return Cost(evaluations=evaluations(self), samples=self.samples)

    def claim(self) -> str:
        source = (
            "Theorem 4.9 / Cor 4.4"
            if self.oracle == "variance-reduced"
            else "App. E, corrected σ = 2dL/(Bρ)"
        )
        return f"(α, αρ²/2)-RDP with ρ = {self.rho:.4g}, i.e. {self.rho**2 / 2:.4g}-zCDP ({source})"

    def privacy_notes(self) -> list[str]:
        return [
            "every example is read once; epochs (naive: steps) are on disjoint data, accounted by parallel "
            "composition; each finite difference is clipped to what an L-Lipschitz f allows"
            if self.clip
            else "every example is read once; finite differences are NOT clipped: the "
            "sensitivity holds only if the declared L does"
        ]

    def summary(self) -> dict[str, float]:
        return {**super().summary(), "sigma_anchor": self.sigma, "sigma_increment": self.sigma}


# --- the oracles ----------------------------------------------------------------------------------


class VarianceReducedOracle(TreeOracle):
    """Algorithm 4 with tree-aggregated noise (Algorithm 5): epochs of T steps, GRAD anchors on B1,
    DIFF increments on B2 (common directions at w_t and w_{t−1}); epochs on disjoint data (Lemma
    C.1)."""

    def __init__(self, problem, config: ZhangTranCutkosky, **kwargs) -> None:
        if config.oracle != "variance-reduced":
            raise ValueError(
                f"the config is for the {config.oracle!r} oracle, not 'variance-reduced'"
            )
        self.config = config
        d, L = (
            problem.dim,
            config.L0,
        )  # the L the config was built for (run checked the problem declares it)
        if config.radius_anchor is None:
            sensitivity = max(sensitivities(d, L, config.period, config.B1, config.B2))
        # per-example clipping: replace-one moves a mean of B terms of norm ≤ r by at most 2r/B
        else:
            sensitivity = max(
                2 * config.radius_anchor / config.B1, 2 * config.radius_increment / config.B2
            )
        super().__init__(
            problem,
            period=config.period,
            B1=config.B1,
            B2=config.B2,
            sensitivity=sensitivity,
            sigma=config.sigma,
            max_move=2 * config.D,
            label="zo-o2nc-epochs",
            samples=config.samples,
            **kwargs,
        )

    def anchor(self, w, index):
        c = self.config
        estimate = self.stats.add(
            grad_estimate(
                self.problem,
                w,
                index,
                c.smoothing,
                m=c.m,
                generator=self.generator,
                clip=c.clip,
                L=c.L0,
            )
        )
        return self._clipped_mean(estimate.per_example, c.radius_anchor)

    def increment(self, w, w_prev, index):
        # The DIFF sensitivity 4dL/(B2·T) holds because TreeOracle refuses ‖w_t − w_{t−1}‖ > 2D (or,
        # with per-example radii, because every term is clipped to radius_increment).
        c = self.config
        estimate = self.stats.add(
            diff_estimate(
                self.problem,
                w,
                w_prev,
                index,
                c.smoothing,
                m=c.m,
                generator=self.generator,
                clip=c.clip,
                L=c.L0,
            )
        )
        return self._clipped_mean(estimate.per_example, c.radius_increment, increment=True)

    def _clipped_mean(
        self, terms: torch.Tensor, radius: float | None, *, increment: bool = False
    ) -> torch.Tensor:
        """The mean of the per-example terms, each clipped to ``radius`` (None: the paper's, no
        clipping), counting those beyond it (and, for increments, the clip rate's counters)."""
        if radius is None:
            return terms.mean(0)
        summed = clipped_sum(terms, radius, vector=True)
        beyond = int(summed.clipped)
        self.stats.beyond_radius += beyond
        if increment:
            self.stats.increments += len(terms)
            self.stats.increments_clipped += beyond
        return summed.total / len(terms)


class NaiveOracle(SinglePassOracle):
    """Algorithm 6: GRAD on a fresh batch of B with m (paper: 1) directions each, released by
    :func:`~dpnc.privacy.release.private_mean`: every per-example estimate has ‖g_i‖ ≤ dL (each
    difference clipped to 2Lδ, and the mean clips to dL again), so Δ = 2dL/B replace-one, and σ is
    the config's.

    Each step's release is on its own batch, so all are recorded under one partition.
    """

    def __init__(self, problem, config: ZhangTranCutkosky, **kwargs) -> None:
        if config.oracle != "naive":
            raise ValueError(f"the config is for the {config.oracle!r} oracle, not 'naive'")
        super().__init__(problem, samples=config.samples, **kwargs)
        self.config = config
        self.bound = problem.dim * config.L0
        self.batches = FullBatch(config.B1)
        self.partition = new_partition(
            "zo-o2nc-naive-steps"
        )  # each step on its own slice of one pass

    def __call__(self, t: int, w: torch.Tensor) -> torch.Tensor:
        c = self.config
        estimate = self.stats.add(
            grad_estimate(
                self.problem,
                w,
                self.data.take(c.B1),
                c.smoothing,
                m=c.m,
                generator=self.generator,
                clip=c.clip,
                L=c.L0,
            )
        )
        sensitivity = mean_sensitivity(self.bound, c.B1, self.accountant.relation)
        return private_mean(
            estimate.per_example,
            self.bound,
            sampler=self.batches,
            noise=self.noise,
            accountant=self.accountant,
            noise_multiplier=c.sigma / sensitivity,
            vector=True,
            partition=self.partition,
        ).value
