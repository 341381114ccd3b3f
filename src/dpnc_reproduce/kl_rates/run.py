"""What the KL-rates reproduction computes: its config, tasks and rows, the objectives, the theory
at a run's constants, and one run (:func:`run_one`)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from dpnc.algorithms import Setting
from dpnc.algorithms import menart as kl
from dpnc.algorithms.menart import proximal_point_rounds, statistical_inner_steps
from dpnc.privacy import ZCDP, Accountant, NoiseSource, rho_to_epsilon
from dpnc.problems import KLQuadratic as Quadratic
from dpnc.problems import PowerGrowth, PseudoHuber, SinePL, lower_bound_cor1, lower_bound_thm8
from dpnc_reproduce.common import INTEGER, NATURAL, POSITIVE, check_axis, check_value, one_of

ALGORITHMS = ("kl-spider", "adaptive-gd", "adaptive-gd+select", "proximal-point")
ADAPTIVE = ("adaptive-gd", "adaptive-gd+select")
LABEL = {
    "kl-spider": "KL-Spider (Alg 1, Thm 1)",
    "adaptive-gd": "adaptive noisy GD (Alg 3, Thm 4)",
    "adaptive-gd+select": "adaptive GD + selection (Alg 3+, Thm 5)",
    "proximal-point": "proximal point (Alg 2 + 4, Thm 2)",
}


# name → (κ, a short description); built by :func:`objective`.
OBJECTIVES = {
    "quadratic": (2.0, "½‖w‖² (PL)"),
    "sine-pl": (2.0, "Σ w_j² + 3 sin² w_j (nonconvex PL)"),
    "power-1.5": (1.5, "‖w‖³ (τ = 3)"),
    "pseudo-huber": (1.0, "√(1 + ‖w‖²) − 1"),
    "power-3": (3.0, "‖w‖^1.5 (τ = 1.5, not smooth)"),
}
TRIVIAL = "trivial"  # the theorem's bound is ≥ F0 there: no promise, not fitted
AT_LEAST_10 = ("a finite number >= 10", lambda v: POSITIVE[1](v) and v >= 10)
WHOLE_AT_LEAST_10 = ("an integer >= 10", lambda v: INTEGER[1](v) and v >= 10)
UNIT = ("in (0, 1)", lambda v: POSITIVE[1](v) and v < 1)


def _help(text: str) -> dict:
    return {"help": text}


@dataclass(frozen=True)
class KLRatesConfig:
    """The grid; defaults are :data:`FULL` (``--full``), :data:`QUICK` the default of the command.

    Spider and adaptive GD run on ``objectives`` (κ ≤ 2) at ``dims`` × ``nsrs``; adaptive GD also at
    ``high_dims`` × ``high_nsrs`` (d ≥ n√ρ, where its 2κ/(4−κ) term rules); the proximal point
    method on ``prox_objectives`` (κ ≥ 2) at d = 1 and n ∈ ``prox_samples``. n and ρ enter these
    algorithms only through n√ρ (the objectives are data-free: n copies of one example), so n√ρ is
    varied through n at ρ = 1, and the ρ sweep checks that the runs depend on n√ρ alone: Spider and
    adaptive GD at n = ``rho_sweep_n``, d = ``rho_sweep_dim`` on ``rho_sweep_objective`` for each ρ
    in ``rhos``. The proximal point method's inner steps grow like (n√ρ)²
    (:func:`~dpnc.algorithms.menart.proximal.statistical_inner_steps`); the check at
    ``inner_check_n`` runs ``inner_check_factor`` times as many: if the excess does not move, the
    inner steps are not what limits the rate. ``reproducible`` draws the privacy noise from seeded
    test sources: the results are then marked not private. Each field's ``help`` says what it is.
    """

    algorithms: tuple[str, ...] = field(
        default=ALGORITHMS, metadata=_help("Among " + ", ".join(ALGORITHMS) + ".")
    )
    objectives: tuple[str, ...] = field(
        default=("quadratic", "power-1.5", "pseudo-huber"),
        metadata=_help(
            "κ ≤ 2 objectives for Spider and adaptive GD, among quadratic, sine-pl, power-1.5, pseudo-huber."
        ),
    )
    dims: tuple[int, ...] = field(
        default=(1, 10, 100, 1000), metadata=_help("Dimensions of Spider and adaptive GD.")
    )
    nsrs: tuple[float, ...] = field(
        default=(1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9),
        metadata=_help("The n√ρ grid (ρ = 1, so n = n√ρ), each >= 10."),
    )
    high_dims: tuple[int, ...] = field(
        default=(10_000, 100_000),
        metadata=_help("Dimensions of adaptive GD's high-d regime (d ≳ n√ρ; '' for none)."),
    )
    high_nsrs: tuple[float, ...] = field(
        default=(1e2, 3e2, 1e3, 3e3, 1e4, 3e4, 1e5, 3e5, 1e6, 1e7),
        metadata=_help("The n√ρ grid of the high-d regime."),
    )
    prox_objectives: tuple[str, ...] = field(
        default=("power-3", "quadratic"),
        metadata=_help(
            "κ ≥ 2 objectives of the proximal point method (d = 1), among quadratic, sine-pl, power-3."
        ),
    )
    prox_samples: tuple[int, ...] = field(
        default=(30, 50, 100, 200, 300, 500, 1000),
        metadata=_help("The proximal point method's n (ρ = 1), each >= 10."),
    )
    inner_scale: float = field(
        default=1.0,
        metadata=_help(
            "The proximal point method's inner noisy GD runs inner_scale times the steps at which its optimisation "
            "error meets Theorem 9's statistical term (statistical_inner_steps: about n²ρ_A/(d·log), growing with n√ρ)."
        ),
    )
    max_inner_iters: int = field(
        default=10**7,
        metadata=_help(
            "A cap (>= 2) on those inner steps per round, for tests: the default never binds in --quick or --full; "
            "the rows record when it does."
        ),
    )
    inner_check_n: int = field(
        default=100,
        metadata=_help(
            "n of the check that the inner steps do not limit the proximal point method (>= 10; 0 for no check)."
        ),
    )
    inner_check_factor: float = field(
        default=16.0,
        metadata=_help(
            "The check runs this many times the inner steps (> 1) beside the rule's own."
        ),
    )
    inner_check_seeds: int = field(
        default=40,
        metadata=_help(
            "Seeds of each arm of the check (its excess spreads over decades between seeds)."
        ),
    )
    rhos: tuple[float, ...] = field(
        default=(0.01, 100.0), metadata=_help("ρ of the ρ sweep at fixed n ('' for no sweep).")
    )
    rho_sweep_n: int = field(default=10**7, metadata=_help("n of the ρ sweep (>= 10)."))
    rho_sweep_dim: int = field(default=10, metadata=_help("d of the ρ sweep."))
    rho_sweep_objective: str = field(
        default="power-1.5", metadata=_help("Objective of the ρ sweep.")
    )
    seeds: int = field(default=10, metadata=_help("Seeds per setting."))
    beta: float = field(
        default=0.05, metadata=_help("Failure probability β of the theorems, in (0, 1).")
    )
    dp_delta: float = field(
        default=1e-6, metadata=_help("δ at which ε is reported (zCDP conversion), in (0, 1).")
    )
    start_fraction: float = field(
        default=0.9, metadata=_help("w0 = w* + fraction·radius·(1, …, 1)/√d, in (0, 1].")
    )
    reproducible: bool = field(
        default=False,
        metadata=_help("Seeded test noise (replayable): the results are marked NOT private."),
    )
    seed: int = field(
        default=0, metadata=_help("Base seed of the test noise (only with --reproducible).")
    )

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Every value in its range (ValueError naming the field), before any run."""
        check_axis("algorithms", self.algorithms, one_of(ALGORITHMS))
        check_axis("objectives", self.objectives, one_of(tuple(OBJECTIVES)))
        for name in self.prox_objectives:
            check_value("prox_objectives", name, one_of(tuple(OBJECTIVES)))
        check_value("rho_sweep_objective", self.rho_sweep_objective, one_of(tuple(OBJECTIVES)))
        if any(OBJECTIVES[o][0] > 2 for o in self.objectives):
            raise ValueError(
                "objectives (for KL-Spider and adaptive GD) need kappa <= 2; put kappa > 2 ones "
                "in prox_objectives"
            )
        if any(OBJECTIVES[o][0] < 2 for o in self.prox_objectives):
            raise ValueError("prox_objectives need kappa >= 2 (Algorithm 2)")
        check_axis("dims", self.dims, INTEGER)
        check_axis("nsrs", self.nsrs, AT_LEAST_10)
        # Optional parts of the grid may be empty (no high-d regime, no proximal point, no ρ sweep).
        for name, rule in (
            ("high_dims", INTEGER),
            ("high_nsrs", AT_LEAST_10),
            ("prox_samples", WHOLE_AT_LEAST_10),
            ("rhos", POSITIVE),
        ):
            for value in getattr(self, name):
                check_value(name, value, rule)
        for name, rule in (
            ("seeds", INTEGER),
            ("rho_sweep_dim", INTEGER),
            ("rho_sweep_n", WHOLE_AT_LEAST_10),
            ("max_inner_iters", ("an integer >= 2", lambda v: INTEGER[1](v) and v >= 2)),
            ("inner_scale", POSITIVE),
            ("inner_check_seeds", INTEGER),
            (
                "inner_check_n",
                ("0 or an integer >= 10", lambda v: v == 0 or WHOLE_AT_LEAST_10[1](v)),
            ),
            ("inner_check_factor", ("a finite number > 1", lambda v: POSITIVE[1](v) and v > 1)),
            ("beta", UNIT),
            ("dp_delta", UNIT),
            ("start_fraction", ("in (0, 1]", lambda v: POSITIVE[1](v) and v <= 1)),
            ("seed", NATURAL),
        ):
            check_value(name, getattr(self, name), rule)


FULL = KLRatesConfig()
QUICK = KLRatesConfig(
    objectives=("quadratic", "power-1.5", "pseudo-huber"),
    dims=(1, 10, 100),
    nsrs=(1e4, 1e5, 1e6, 1e7, 1e8, 1e9),
    high_dims=(100_000,),
    high_nsrs=(1e2, 3e2, 1e3, 3e3, 1e4, 3e4, 1e5, 1e6),
    prox_objectives=("power-3",),
    prox_samples=(30, 100, 300, 1000),
    seeds=10,
)


@dataclass(frozen=True)
class KLTask:
    """One run: an algorithm on an objective at (d, n, ρ), one seed; sweep is "n" (ρ = 1), "rho" or
    "inner" (the proximal point method's inner check, at ``inner_factor`` times the configured inner
    steps: 1 or the check's factor). ``index``: the task's place in the grid (seeds the reproducible
    test noise)."""

    index: int
    algorithm: str
    objective: str
    d: int
    n: int
    rho: float
    sweep: str
    seed: int
    inner_factor: float = 1.0


@dataclass(frozen=True)
class KLRow:
    """One run: the excess and gradient norm of its output, the theory at its constants, its cost
    and privacy."""

    algorithm: str
    objective: str
    kappa: float
    gamma: float
    L0: float
    d: int
    n: int
    rho: float
    nsr: float  # n√ρ
    x: float  # n√ρ/√d
    sweep: str
    seed: int
    excess: float  # F(w_out) − F*
    grad_norm: float  # ‖∇F(w_out)‖
    F0: float
    start_excess: float
    bound: float  # the theorem's bound at the run's constants
    bound_dim_term: float | None  # adaptive GD: Theorem 4's 2κ/(4−κ) term
    bound_noise_term: float | None  # adaptive GD: its κ/2 term
    regime: str
    grad_bound: float | None  # adaptive GD + selection: Theorem 5's bound on ‖∇F‖
    lower_bound: float | None
    steps: int
    queries: int
    rho_spent: float  # the accountant's ρ
    epsilon: float  # at dp_delta (zCDP conversion)
    private: bool
    sensitivity: str
    region_distance: float  # largest distance of an iterate from the region's centre
    radius: float
    seconds: float
    inner_steps: int | None = None  # proximal point: inner noisy GD steps per round (T_A) run
    inner_rule: int | None = (
        None  # … what the rule (times inner_factor) asked for: more only where capped
    )
    inner_factor: float | None = None  # proximal point: 1, or the inner check's factor


def objective(name: str, d: int, n: int):
    """The named objective in dimension d with n (identical) examples, on the ball of radius 1
    around w*."""
    if name == "quadratic":
        return Quadratic(d, n=n)
    if name == "sine-pl":
        return SinePL.from_mean(1.0, d, n)
    if name == "power-1.5":
        return PowerGrowth(1.5, d, n=n)
    if name == "power-3":
        return PowerGrowth(3.0, d, n=n)
    if name == "pseudo-huber":
        return PseudoHuber(d, n=n)
    raise ValueError(f"objective must be among {tuple(OBJECTIVES)}; got {name!r}")


def start_point(f, fraction: float) -> torch.Tensor:
    """w0 = w* + fraction·radius·(1, …, 1)/√d: inside the region where the constants hold."""
    radius = f.constants.region.radius
    return f.w_star + fraction * radius * torch.ones(f.dim, dtype=torch.float64) / math.sqrt(f.dim)


def adaptive_gd_bound(
    *, nsr: float, d: int, gamma: float, kappa: float, L0: float, L1: float
) -> tuple[float, float, float]:
    """Theorem 4's three terms with the O-constant 1 and the log factors (ℓ, p_max) dropped:
    (γL0√d/(n√ρ))^{2κ/(4−κ)}, (max{γ², 1}L0²/(min{L1, 1}·n√ρ))^{κ/2} and (1/(n√ρ))^{κ/(2−κ)} (0 for
    κ = 2)."""
    t1 = (gamma * L0 * math.sqrt(d) / nsr) ** (2 * kappa / (4 - kappa))
    t2 = (max(gamma**2, 1.0) * L0**2 / (min(L1, 1.0) * nsr)) ** (kappa / 2)
    t3 = 0.0 if kappa >= 2 else (1 / nsr) ** (kappa / (2 - kappa))
    return t1, t2, t3


def selection_grad_bound(
    *, n: int, rho: float, d: int, L0: float, L1: float, F0: float, T: int, beta: float
) -> float:
    """Theorem 5's bound on ‖∇F(w_t*)‖ with the O-constant 1:
    min{√(F0L1/T), (L0√(F0L1d)/(n√ρ))^{1/2}} + L0√ℓ/(√n·ρ^{1/4}), ℓ = log(n√ρ/β)."""
    nsr = n * math.sqrt(rho)
    ell = math.log(nsr / beta)
    return min(math.sqrt(F0 * L1 / T), (L0 * math.sqrt(F0 * L1 * d) / nsr) ** 0.5) + L0 * math.sqrt(
        ell
    ) / (math.sqrt(n) * rho**0.25)


def lower_bound(
    *, kappa: float, n: int, d: int, rho: float, gamma: float, L0: float
) -> float | None:
    """The class lower bound, constants and log factors dropped: Corollary 1's (γL0√d/(n√ρ))^κ for κ
    ∈ (1, 2]; for κ > 2 at d = 1, Theorem 8's ¼(1/(nε))^κ at ε = √ρ (the zCDP ↔ (ε, δ) conversion up
    to log factors), scaled by (γL0)^κ to the objective's class (Theorem 8's instance has γ = L0 =
    1); None otherwise (Corollary 1 needs κ = 1 + Ω(1))."""
    if 1 < kappa <= 2:
        return lower_bound_cor1(n, d, rho, gamma, L0, kappa)
    if kappa > 2 and d == 1:
        return (gamma * L0) ** kappa * lower_bound_thm8(n, math.sqrt(rho), kappa)
    return None


def tasks(config: KLRatesConfig) -> list[KLTask]:
    """Every run of ``config``, in grid order."""
    out = []
    for a in config.algorithms:
        if a == "proximal-point":
            grid = [(o, 1, n) for o in config.prox_objectives for n in config.prox_samples]
        else:
            grid = [
                (o, d, round(x))
                for o in config.objectives
                for d in config.dims
                for x in config.nsrs
            ]
            if a in ADAPTIVE:
                grid += [
                    (o, d, round(x))
                    for o in config.objectives
                    for d in config.high_dims
                    for x in config.high_nsrs
                ]
        out += [(a, o, d, n, 1.0, "n", s) for o, d, n in grid for s in range(config.seeds)]
        if a in ("kl-spider", "adaptive-gd"):
            out += [
                (
                    a,
                    config.rho_sweep_objective,
                    config.rho_sweep_dim,
                    config.rho_sweep_n,
                    r,
                    "rho",
                    s,
                )
                for r in config.rhos
                for s in range(config.seeds)
            ]
        if a == "proximal-point" and config.inner_check_n:
            out += [
                (a, o, 1, config.inner_check_n, 1.0, "inner", s, factor)
                for o in config.prox_objectives
                for factor in (1.0, config.inner_check_factor)
                for s in range(config.inner_check_seeds)
            ]
    return [KLTask(i, *t) for i, t in enumerate(out)]


def cost(config: KLRatesConfig, task: KLTask) -> float:
    """A rough run time in seconds, to schedule the longest runs first."""
    kappa = OBJECTIVES[task.objective][0]
    if task.algorithm == "proximal-point":  # about T·T_A ≈ (n√ρ)²/ℓ inner steps (ℓ ≈ 20) of ~0.2 ms
        return 2e-4 * min(
            40 * config.max_inner_iters, task.inner_factor * config.inner_scale * task.n**2 / 20
        )
    if task.algorithm == "kl-spider":
        return (8.0 if task.objective == "sine-pl" else 0.3) * (
            1 + 3 * (2 - kappa) * max(0.0, math.log10(task.n * task.rho**0.5) - 5)
        )
    return 0.02 + task.d * 1e-5 * (10 if kappa < 2 else 1)


def run_one(config: KLRatesConfig, task: KLTask) -> KLRow:
    """One run: the algorithm's config from its theorem, run on the objective, and the theory at its
    constants."""
    algorithm, n, d, rho = task.algorithm, task.n, task.d, task.rho
    f = objective(task.objective, d, n)
    c = f.constants
    gamma, kappa, L0 = c.gamma, c.kappa, c.L0
    # the algorithms' default F0 (KL at w0 plus Lipschitz: docs/papers.md, Menart et al. §1.1)
    F0 = (gamma * L0) ** kappa
    noise = (
        NoiseSource.for_testing(1_000_003 * config.seed + task.index)
        if config.reproducible
        else NoiseSource()
    )
    w0 = start_point(f, config.start_fraction)
    nsr = n * math.sqrt(rho)
    t1 = t2 = grad_bound = inner_steps = inner_rule = None
    tic = time.perf_counter()
    select = algorithm == "adaptive-gd+select"
    if algorithm == "kl-spider":
        method = kl.KLSpider.from_theory(Setting.of(f), ZCDP(rho), beta=config.beta)
    elif algorithm == "proximal-point":
        # the rule's T_A for this run's rounds (each gets ρ/T and β/T), times the check's factor,
        # capped
        T = proximal_point_rounds(
            n=n,
            d=d,
            rho=rho,
            gamma=gamma,
            kappa=kappa,
            L0=L0,
            weak_convexity=c.weak_convexity,
            F0=F0,
        )
        inner_rule = statistical_inner_steps(
            n=n,
            d=d,
            rho=rho / T,
            beta=config.beta / T,
            scale=config.inner_scale * task.inner_factor,
        )
        inner_steps = min(inner_rule, config.max_inner_iters)
        method = kl.ProximalPoint.from_theory(
            Setting.of(f), ZCDP(rho), beta=config.beta, max_inner_iters=inner_steps
        )
    else:
        method = kl.AdaptiveGD.from_theory(
            Setting.of(f), ZCDP(rho), beta=config.beta, select=select
        )
    result = method.run(f, w0, noise=noise, accountant=Accountant(), generator=torch.Generator())
    seconds = time.perf_counter() - tic
    steps, regime = result.stats.steps, "κ"
    if algorithm == "kl-spider":
        bound = result.stats.bound
    elif algorithm == "proximal-point":
        bound = kl.proximal_point_bound(
            n=n,
            d=d,
            rho=rho,
            beta=config.beta,
            gamma=gamma,
            kappa=kappa,
            L0=L0,
            weak_convexity=c.weak_convexity,
            F0=F0,
        )
    else:
        t1, t2, t3 = adaptive_gd_bound(
            nsr=n * math.sqrt(method.rho), d=d, gamma=gamma, kappa=kappa, L0=L0, L1=c.L1
        )
        bound = t1 + t2 + t3
        regime = "2κ/(4−κ)" if t1 >= t2 else "κ/2"
        if select:
            grad_bound = selection_grad_bound(
                n=n, rho=method.rho, d=d, L0=L0, L1=c.L1, F0=F0, T=steps, beta=config.beta
            )
    if bound >= F0 * (1 - 1e-12):
        regime = TRIVIAL
    rho_spent = result.accountant.rho()
    region_distance = (
        result.stats.inner_max_region_distance
        if algorithm == "proximal-point"
        else float(torch.linalg.vector_norm(result.stats.iterates - c.region.center, dim=1).max())
    )
    return KLRow(
        algorithm=algorithm,
        objective=task.objective,
        kappa=kappa,
        gamma=gamma,
        L0=L0,
        d=d,
        n=n,
        rho=rho,
        nsr=nsr,
        x=nsr / math.sqrt(d),
        sweep=task.sweep,
        seed=task.seed,
        excess=float(f.excess(result.output)),
        grad_norm=float(torch.linalg.vector_norm(f.gradient(result.output))),
        F0=F0,
        start_excess=float(f.excess(w0)),
        bound=bound,
        bound_dim_term=t1,
        bound_noise_term=t2,
        regime=regime,
        grad_bound=grad_bound,
        lower_bound=lower_bound(kappa=kappa, n=n, d=d, rho=rho, gamma=gamma, L0=L0),
        steps=steps,
        queries=result.stats.queries,
        rho_spent=rho_spent,
        epsilon=rho_to_epsilon(rho_spent, config.dp_delta),
        private=result.private and result.accountant.secret,
        sensitivity=result.stats.sensitivity,
        region_distance=float(region_distance),
        radius=c.region.radius,
        seconds=seconds,
        inner_steps=inner_steps,
        inner_rule=inner_rule,
        inner_factor=task.inner_factor if algorithm == "proximal-point" else None,
    )
