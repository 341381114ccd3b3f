"""What the nonsmooth-rates reproduction computes: its config and rows, the data and the methods'
parameters at n, and one run (:func:`run_one`: n doubling until β is reached)."""

from __future__ import annotations

import dataclasses
import time
import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from dpnc.algorithms import Setting
from dpnc.algorithms.klt import KornowskiLiuTalwar
from dpnc.algorithms.ztc import ZhangTranCutkosky
from dpnc.certify import goldstein_certificate
from dpnc.privacy import Accountant, Budget, NoiseSource
from dpnc.problems import Constants, RadialDistance
from dpnc_reproduce.common import INTEGER, NATURAL, POSITIVE, check_axis, check_value, one_of
from dpnc_reproduce.method_table import Entry, build, check_table, refuse_old_names


class At(NamedTuple):
    """What the option rules of :data:`METHODS` read: the config and one run's public setting (n, d,
    L = 1, Φ = the start distance), budget and smoothing radius α."""

    config: RatesConfig
    setting: Setting
    budget: Budget
    alpha: float


def smoothing(at: At) -> float:
    """α of the run (ZTC's δ): the output is certified at 2α."""
    return at.alpha


def dimension(at: At) -> int:
    """d: ZTC's m (2d function evaluations per example, either oracle; the naive oracle's paper m =
    1 would make it d times cheaper and far noisier), and the cap on KLT's first-order and
    multi-pass variance-matching m (at most ZTC's directions per example read)."""
    return at.setting.d


def multipass_cap(at: At) -> int:
    """The cap on KLT multi-pass's steps T (``multipass_max_steps``)."""
    return at.config.multipass_max_steps


def equal_evaluations(at: At) -> int:
    """KLT single-pass ZO's m: the largest that keeps its evaluations ≤ ZTC's (Theorem 4.9, m = d)
    at this n."""
    ztc = ZhangTranCutkosky.from_theory(at.setting, at.budget, smoothing=at.alpha)
    klt = KornowskiLiuTalwar.from_theory(
        at.setting, at.budget, smoothing=at.alpha, oracle="zeroth-order", m=1
    )
    return equal_directions(ztc, klt, at.setting.d)


# Every method with its theorem's parameters for n (``from_theory``), the directions m set for
# comparable cost (:mod:`dpnc_reproduce.method_table`; the order is part of each run's public seed).
METHODS: dict[str, Entry] = {
    "zo-o2nc": Entry(
        "zo-o2nc",
        "from_theory",
        {"oracle": "variance-reduced", "smoothing": smoothing, "m": dimension},
        "ZTC variance-reduced (Thm 4.9)",
    ),
    "klt": Entry(
        "klt",
        "from_theory",
        {"oracle": "zeroth-order", "smoothing": smoothing, "m": equal_evaluations},
        "KLT single-pass ZO (Thm 3.1, v2)",
    ),
    "zo-o2nc:naive": Entry(
        "zo-o2nc",
        "from_theory",
        {"oracle": "naive", "smoothing": smoothing, "m": dimension},
        "ZTC naive (Alg. 6, App. E)",
    ),
    "klt:first-order": Entry(
        "klt",
        "from_theory",
        {"oracle": "first-order", "smoothing": smoothing, "max_directions": dimension},
        "KLT single-pass first-order (Thm 6.1)",
    ),
    "klt:multi-pass": Entry(
        "klt",
        "from_theory",
        {
            "oracle": "multi-pass",
            "smoothing": smoothing,
            "max_steps": multipass_cap,
            "max_directions": dimension,
        },
        "KLT multi-pass ZO (Thm 4.1)",
    ),
}
check_table(METHODS)
NAMES = tuple(METHODS)
# The names of results written before 28 Nov 2026 (:meth:`NonsmoothRates.upgrade
# <dpnc_reproduce.nonsmooth_rates.NonsmoothRates.upgrade>`)
RENAMED = {
    "ztc": "zo-o2nc",
    "klt-zo": "klt",
    "ztc-naive": "zo-o2nc:naive",
    "klt-fo": "klt:first-order",
    "klt-multipass": "klt:multi-pass",
}
OBJECTIVES = ("radial", "radial-nonconvex")


def _help(text: str) -> dict:
    return {"help": text}


@dataclass(frozen=True)
class RatesConfig:
    """One-at-a-time sweeps around a base cell: d over ``dims``, ε over ``epsilons``, α over
    ``alphas``; every β of ``betas`` read from the same runs. Defaults are ``--full``
    (:data:`FULL`); :data:`QUICK` is CI-sized."""

    dims: tuple[int, ...] = field(
        default=(4, 8, 16, 32, 64), metadata=_help("Dimensions d (at base ε, α).")
    )
    epsilons: tuple[float, ...] = field(
        default=(0.5, 2.0, 8.0), metadata=_help("Privacy levels ε (at base d, α).")
    )
    alphas: tuple[float, ...] = field(
        default=(0.05, 0.1, 0.2),
        metadata=_help("Smoothing radii α (ZTC's δ; certified at 2α), at base d, ε."),
    )
    base_d: int = field(default=4, metadata=_help("d of the ε and α sweeps."))
    base_epsilon: float = field(default=2.0, metadata=_help("ε of the d and α sweeps."))
    base_alpha: float = field(default=0.1, metadata=_help("α of the d and ε sweeps."))
    betas: tuple[float, ...] = field(
        default=(0.45, 0.55, 0.65, 0.75),
        metadata=_help(
            "Targets β of the expected population ‖∂F‖_2α, in units of the far-field slope 1 − 2q (each in (0, 1))."
        ),
    )
    main_beta: float = field(
        default=0.55, metadata=_help("The β whose exponents in d, ε, α are judged.")
    )
    methods: tuple[str, ...] = field(
        default=NAMES[:2], metadata=_help(f"Among {', '.join(NAMES)}.")
    )
    objectives: tuple[str, ...] = field(
        default=OBJECTIVES, metadata=_help("Among radial, radial-nonconvex.")
    )
    nonconvex_dims: tuple[int, ...] = field(
        default=(4, 8),
        metadata=_help(
            "The d sweep of radial-nonconvex (a subset of dims; its ε and α stay at base)."
        ),
    )
    seeds: int = field(default=10, metadata=_help("Seeds (data and algorithm) per cell."))
    n_start: int = field(default=250, metadata=_help("First sample size of each seed's doubling."))
    n_max: int = field(default=16_000, metadata=_help("Largest sample size tried."))
    dp_delta: float = field(default=1e-6, metadata=_help("δ of (ε, δ)-DP."))
    start_distance: float = field(default=1.0, metadata=_help("‖x₀ − x*‖ (Φ = L·‖x₀ − x*‖)."))
    spread: float = field(default=0.5, metadata=_help("s: attracting points at ‖p − x*‖ ≈ s."))
    repel: float = field(
        default=0.15, metadata=_help("q of radial-nonconvex: the fraction of repelling examples.")
    )
    repel_spread: float = field(
        default=0.05, metadata=_help("s_r of radial-nonconvex's repelling points.")
    )
    n_test: int = field(default=20_000, metadata=_help("Held-out examples of the certificate."))
    n_axis: int = field(
        default=1_000, metadata=_help("Other held-out examples giving the rim points' axis.")
    )
    rim: int = field(
        default=4, metadata=_help("Antipodal rim pairs of the certificate (8 tilts each).")
    )
    certificate_samples: int = field(
        default=64, metadata=_help("Uniform ball points of the certificate.")
    )
    multipass_max_steps: int = field(
        default=100,
        metadata=_help(
            "Cap on klt:multi-pass's steps T (each reads all n examples; the cap raises its β to (Φ/(α·T))^{1/3})."
        ),
    )
    seed: int = field(default=0, metadata=_help("Public seed; the noise is always secret."))

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        refuse_old_names(self.methods, RENAMED)
        check_axis("methods", self.methods, one_of(NAMES))
        check_axis("objectives", self.objectives, one_of(OBJECTIVES))
        check_axis("dims", self.dims, INTEGER)
        check_axis("epsilons", self.epsilons, POSITIVE)
        check_axis("alphas", self.alphas, POSITIVE)
        check_axis("betas", self.betas, ("in (0, 1)", lambda b: POSITIVE[1](b) and b < 1))
        for name in (
            "base_d",
            "seeds",
            "n_start",
            "n_max",
            "n_test",
            "n_axis",
            "rim",
            "multipass_max_steps",
        ):
            check_value(name, getattr(self, name), INTEGER)
        check_value("certificate_samples", self.certificate_samples, NATURAL)
        check_value("seed", self.seed, NATURAL)
        for name in ("base_epsilon", "base_alpha", "start_distance", "spread", "repel_spread"):
            check_value(name, getattr(self, name), POSITIVE)
        check_value("main_beta", self.main_beta, one_of(self.betas))
        check_value("repel", self.repel, ("in [0, 0.5)", lambda q: 0 <= q < 0.5))
        check_value(
            "n_max",
            self.n_max,
            (f"an integer >= n_start = {self.n_start}", lambda n: n >= self.n_start),
        )
        if not set(self.nonconvex_dims) <= set(self.dims):
            raise ValueError(
                f"nonconvex_dims must be a subset of dims {self.dims}; got {self.nonconvex_dims}"
            )

    def cells(self, objective: str) -> list[tuple[int, float, float]]:
        """The (d, ε, α) of ``objective``'s sweeps, base cell once, in a fixed order."""
        dims = self.dims if objective == "radial" else self.nonconvex_dims
        out = [(d, self.base_epsilon, self.base_alpha) for d in dims]
        if objective == "radial":
            out += [(self.base_d, e, self.base_alpha) for e in self.epsilons]
            out += [(self.base_d, self.base_epsilon, a) for a in self.alphas]
        return list(dict.fromkeys(out))

    def tasks(self) -> list[tuple]:
        return [
            (o, d, e, a, method, s)
            for o in self.objectives
            for d, e, a in self.cells(o)
            for method in self.methods
            for s in range(self.seeds)
        ]


FULL = RatesConfig()
QUICK = RatesConfig(
    dims=(4, 8),
    epsilons=(2.0, 8.0),
    alphas=(0.1, 0.2),
    objectives=("radial",),
    nonconvex_dims=(4,),
    seeds=3,
    n_start=250,
    n_max=8_000,
    betas=(0.55, 0.75),
    main_beta=0.55,
    n_test=4_000,
)


@dataclass(frozen=True)
class RateRow:
    """One run at one n. ``expected_norm``: (1/K)Σ_k ‖∂F(w̄^k)‖_2α of the population (closed form),
    the expectation over the output draw; ``output_norm`` the drawn output's; ``certified`` its
    held-out certificate (uniform + rim points), ``certified_uniform`` with uniform points only,
    ``population_bound`` = certified + the concentration term (probability 0.95)."""

    objective: str
    method: str
    d: int
    epsilon: float
    alpha: float
    seed: int
    n: int
    samples_used: int
    evaluations: int
    m: int
    steps: int
    blocks: int
    expected_norm: float
    output_norm: float
    distance: float
    certified: float
    certified_uniform: float
    population_bound: float
    epsilon_zcdp: float
    epsilon_rdp: float
    epsilon_pld: float
    seconds: float


def cost(config: RatesConfig, task: tuple) -> float:
    """d × the method's relative cost (KLT's two estimates per increment, multi-pass's T passes over
    n)."""
    return task[1] * {"klt": 2.0, "klt:first-order": 2.0, "klt:multi-pass": 10.0}.get(task[4], 1.0)


def far_field(config: RatesConfig, objective: str) -> float:
    """The population's slope far from x*, 1 − 2q: the unit of β (1 for radial)."""
    return 1 - 2 * config.repel if objective == "radial-nonconvex" else 1.0


def run_one(config: RatesConfig, task: tuple) -> tuple[RateRow, ...]:
    """One seed of one cell and method: n doubling from n_start until Ē ≤ min β (in the objective's
    unit, :func:`far_field`, as the report's thresholds read it) or n > n_max."""
    rows, n = [], config.n_start
    while n <= config.n_max:
        rows.append(run_at(config, task, n))
        if rows[-1].expected_norm <= min(config.betas) * far_field(config, task[0]):
            break
        n *= 2
    return tuple(rows)


def law(config: RatesConfig, objective: str, d: int, seed: int, n: int, stream: int):
    """Data of (objective, d, seed): the training pool (stream 0), the held-out set (1), the axis
    set (2)."""
    repel = config.repel if objective == "radial-nonconvex" else 0.0
    return RadialDistance.synthetic(
        n,
        d,
        spread=config.spread,
        repel=repel,
        repel_spread=config.repel_spread,
        seed=1_000_003 * config.seed
        + 1009 * seed
        + 17 * d
        + 5 * stream
        + (7 if objective == "radial-nonconvex" else 0),
    )


def start(config: RatesConfig, d: int, seed: int) -> torch.Tensor:
    u = torch.randn(
        d,
        generator=torch.Generator().manual_seed(31 * config.seed + 7919 * seed + d),
        dtype=torch.float64,
    )
    return config.start_distance * u / torch.linalg.vector_norm(u)


def parameters(config: RatesConfig, method: str, *, n: int, d: int, epsilon: float, alpha: float):
    """The method's theorem parameters for n (:data:`METHODS`), with the directions m set for
    comparable cost:

    * ``zo-o2nc``: Theorem 4.9 (m = d directions, 2d function evaluations per example);
    * ``zo-o2nc:naive``: Appendix E's T and K, with m = d directions (the paper's m = 1 would make
      it d times cheaper and far noisier): 2d evaluations per example, as ``zo-o2nc``;
    * ``klt``: Theorem 3.1 with the largest m that keeps its evaluations ≤ ZTC's at this n (equal
      evaluations);
    * ``klt:first-order`` (gradients) and ``klt:multi-pass`` (T passes over n): their theorem's
      variance-matching m, capped at d (at most ZTC's directions per example read); multi-pass's T
      capped at ``multipass_max_steps``.
    """
    setting = Setting(
        Constants(L0=1.0), n, d, gap=config.start_distance
    )  # L = 1, Φ = the start distance
    budget = Budget(epsilon, config.dp_delta)
    return build(METHODS[method], setting, budget, At(config, setting, budget, alpha))


def evaluations(config, d: int) -> int:
    """Function evaluations of a single-pass zeroth-order run of ``config``: its ``cost`` (ZTC,
    either oracle: 2m per example, GRAD and DIFF alike, :func:`dpnc.algorithms.ztc.evaluations`; KLT
    ZO: 2m per anchor example, 4m per increment example, its two estimates having independent
    directions)."""
    return config.cost(Setting(Constants(L0=1.0), max(config.samples, 1), d)).evaluations


def equal_directions(ztc, klt, d: int) -> int:
    """The largest m (≥ 1) with KLT's evaluations ≤ ZTC's."""
    per_direction = evaluations(dataclasses.replace(klt, m=1), d)
    return max(1, evaluations(ztc, d) // per_direction)


def run_at(config: RatesConfig, task: tuple, n: int) -> RateRow:
    objective, d, epsilon, alpha, method, seed = task
    pool = law(config, objective, d, seed, config.n_max, 0)
    test, axis = (
        law(config, objective, d, seed, config.n_test, 1),
        law(config, objective, d, seed, config.n_axis, 2),
    )
    algorithm = parameters(config, method, n=n, d=d, epsilon=epsilon, alpha=alpha)
    gen = torch.Generator().manual_seed(
        104_729 * config.seed + 1_000 * seed + n % 997 + NAMES.index(method)
    )
    tic = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", RuntimeWarning
        )  # KLT safe mode's clip-rate warning: its rate is expected
        run = algorithm.run(
            pool.subset(torch.arange(n)),
            start(config, d, seed),
            noise=NoiseSource(),
            accountant=Accountant("replace-one"),
            generator=gen,
            keep_points=False,
        )
    seconds = time.perf_counter() - tic
    radius = 2 * alpha
    norms = pool.goldstein_norm(run.trace.block_averages, radius)
    x = run.output
    certificate = goldstein_certificate(
        test.gradient,
        x,
        radius,
        samples=config.certificate_samples,
        rim=config.rim,
        axis=axis.gradient(x),
        generator=gen,
    )
    uniform = goldstein_certificate(
        test.gradient, x, radius, samples=config.certificate_samples, generator=gen
    )
    report = privacy(algorithm, run, config.dp_delta)
    return RateRow(
        objective=objective,
        method=method,
        d=d,
        epsilon=epsilon,
        alpha=alpha,
        seed=seed,
        n=n,
        samples_used=run.stats.samples_used,
        evaluations=run.stats.evaluations,
        m=algorithm.m,
        steps=algorithm.steps,
        blocks=len(norms),
        expected_norm=float(norms.mean()),
        output_norm=float(pool.goldstein_norm(x, radius)),
        distance=float(torch.linalg.vector_norm(x - pool.center)),
        certified=certificate.bound,
        certified_uniform=uniform.bound,
        population_bound=certificate.population_bound(L=1.0, m=config.n_test),
        epsilon_zcdp=report.epsilon_zcdp,
        epsilon_rdp=report.epsilon_rdp,
        epsilon_pld=report.epsilon_pld,
        seconds=seconds,
    )


_REPORTS: dict = {}


def privacy(algorithm, run, dp_delta: float):
    """The run's privacy report, computed once per (public) configuration in a process: the ledger
    holds the same releases for every seed of it, and the PLD accountant takes about a second."""
    key = (algorithm, dp_delta)
    if key not in _REPORTS:
        _REPORTS[key] = run.report(dp_delta)
    return _REPORTS[key]
