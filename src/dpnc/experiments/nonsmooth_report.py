"""What the two nonsmooth reproductions share: the ℓ1-regression instance, the grid, the measured row, one run
measured, medians over seeds and the panel figures.

:mod:`dpnc.experiments.nonsmooth_zo` (ZTC's two oracles against M) and :mod:`dpnc.experiments.nonsmooth_compare`
(ZTC against KLT's three oracles, against n and d) run private methods on the same data, test set and start
x₀, and measure the same quantities at the output: the held-out certified bound on the Goldstein stationarity
at the guarantees' radius, the test loss, the distance to x*, the cost and the privacy spent.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import torch

from dpnc.experiments.protocol import Experiment
from dpnc.experiments.report import (INTEGER, NATURAL, NONNEGATIVE, POSITIVE, check_grid, check_value,
                                     group_medians)

Task = tuple[int, float, int, str, int]   # (d, ε, sample size, method, seed)


def _help(text: str) -> dict:
    return {"help": text}


@dataclass(frozen=True)
class NonsmoothGrid:
    """The grid and the data of a nonsmooth reproduction; each experiment's config subclasses it (its defaults are
    its ``--full``), setting ``METHODS``, the methods it knows."""

    METHODS: ClassVar[tuple[str, ...]] = ()

    dims: tuple[int, ...] = field(default=(5, 10, 20), metadata=_help("Dimensions d, e.g. 5,10,20."))
    samples: tuple[int, ...] = field(default=(4_000, 16_000), metadata=_help(
        "Sample sizes (each >= 4), e.g. 2000,8000,32000: the run reads each example at most once, but for "
        "multi-pass."))
    epsilons: tuple[float, ...] = field(default=(1.0, 8.0), metadata=_help("Privacy levels ε, e.g. 1,8."))
    methods: tuple[str, ...] = field(default=(), metadata=_help("Methods, comma-separated."))
    seeds: int = field(default=5, metadata=_help("Seeds per setting."))
    dp_delta: float = field(default=1e-6, metadata=_help("δ of (ε, δ)-DP, in (0, 1)."))
    start_distance: float = field(default=1.0, metadata=_help(
        "‖x₀ − x*‖ (x₀ in a public direction); Φ = L·‖x₀ − x*‖ ≥ F(x₀) − inf F calibrates the runs."))
    n_test: int = field(default=4_000, metadata=_help(
        "Fresh test samples (from the same law) the output is measured and certified on."))
    certificate_samples: int = field(default=64, metadata=_help(
        "Uniform points of the ball added to the certificate (besides the output block's points)."))
    label_noise: float = field(default=0.1, metadata=_help("Standard deviation of the ℓ1 regression's Gaussian "
                                                           "label noise."))
    seed: int = field(default=0, metadata=_help("Public seed (data and directions); the noise is always secret."))

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Every value in its range (ValueError naming the field), before any run."""
        check_grid(self, self.METHODS)
        check_value("start_distance", self.start_distance, POSITIVE)
        check_value("n_test", self.n_test, INTEGER)
        check_value("certificate_samples", self.certificate_samples, NATURAL)
        check_value("label_noise", self.label_noise, NONNEGATIVE)
        check_value("seed", self.seed, NATURAL)

    @property
    def runs(self) -> int:
        return len(self.dims) * len(self.epsilons) * len(self.samples) * len(self.methods) * self.seeds

    def objective(self) -> str:
        """The setting's first sentence: the objective, its data and the start."""
        return (f"Objective: ℓ1 regression |⟨a, x⟩ − b|, ‖a‖ ≤ 1 (L = 1), planted x*, Gaussian label noise of "
                f"std {self.label_noise}, x₀ at distance {self.start_distance} from x* (Φ = {self.start_distance}); "
                f"measured and certified on {self.n_test} fresh test samples from the same law.")

    def tasks(self) -> list[Task]:
        """Every (d, ε, sample size, method, seed), in the order of the rows."""
        return [(d, e, n, method, seed) for d in self.dims for e in self.epsilons for n in self.samples
                for method in self.methods for seed in range(self.seeds)]


@dataclass(frozen=True)
class Measured:
    """What every run measures at its output (each experiment's row adds its sample size and parameters).

    ``certified_grad_norm`` is the held-out certified bound on ‖∂F(output)‖ at radius 2δ (ZTC) = 2α (KLT);
    ``excess_loss`` is F(output) − F(x*) on the test set; ``beyond_radius`` the per-example terms beyond the radius
    the oracle's sensitivity assumes (clipped there); ``seconds`` the run's wall time (not the certificate's).
    """

    method: str
    d: int
    epsilon: float
    seed: int
    samples_used: int
    evaluations: int
    clipped: int | None         # None: not recorded (a run written before it was)
    beyond_radius: int | None   # None: not recorded
    certified_grad_norm: float
    grad_norm: float
    excess_loss: float
    distance: float
    epsilon_zcdp: float
    epsilon_rdp: float
    epsilon_pld: float
    seconds: float


class NonsmoothExperiment(Experiment):
    """What the two reproductions do alike: their tasks are the grid's (d, ε, sample size, method, seed), the
    costliest (largest sample size × d) started first; the claims heading."""

    claims_heading = "Claims"

    def tasks(self, config: NonsmoothGrid) -> list[Task]:
        return config.tasks()

    def cost(self, config: NonsmoothGrid, task: Task) -> float:
        d, _, n, _, _ = task
        return n * d

    def upgrade(self, data: dict) -> dict:
        """Rows written before ``clipped`` or ``beyond_radius`` was recorded: None (not recorded) there."""
        return {**data, "rows": [{"clipped": None, "beyond_radius": None, **r} for r in data["rows"]]}


@functools.lru_cache(maxsize=8)
def instance(config: NonsmoothGrid, d: int):
    """The data (train pool, fresh test set) and the start x₀ at ``start_distance`` from x* for dimension d.

    Everything here is public: the law's planted x* and a public direction for x₀. The guarantees are
    about the population F (a single pass over fresh samples), which x* minimises because the label
    noise is symmetric; so Φ = L·‖x₀ − x*‖ ≥ F(x₀) − inf F is public and may calibrate the private run.
    (On the finite test set x* is only nearly optimal: the reported F(w̄) − F(x*) can dip below 0.)
    """
    from dpnc.problems.nonsmooth import L1Regression

    data = L1Regression.synthetic(max(config.samples) + config.n_test, d, noise=config.label_noise,
                                  seed=config.seed + d)
    test = data.subset(torch.arange(max(config.samples), data.n))
    direction = torch.randn(d, generator=torch.Generator().manual_seed(config.seed + 1000 + d), dtype=torch.float64)
    x0 = data.x_star + config.start_distance * direction / torch.linalg.vector_norm(direction)
    return data, test, x0, float(test.value(data.x_star))


def constants(config: NonsmoothGrid, d: int) -> tuple[float, float]:
    """(L, Φ): the per-example Lipschitz constant and the public bound on F(x₀) − inf F."""
    L = instance(config, d)[0].constants.L0
    return L, L * config.start_distance


def measure(config: NonsmoothGrid, algorithm, task: Task, **more) -> dict:
    """Run ``algorithm`` (any O2NC config: ``run(...)`` returns a :class:`~dpnc.algorithms.base.Run`) on the first
    n examples of the task's instance and measure its output on the test set; the row's common fields as a dict
    (with ``more`` added).

    Public randomness (directions, certificate points) comes from a generator seeded by (config.seed, seed), so
    that a run is the same in any process; the noise is secret.
    """
    from dpnc.certify import certify_run
    from dpnc.privacy.accountant import Accountant
    from dpnc.privacy.noise import NoiseSource

    d, epsilon, n, method, seed = task
    data, test, x0, optimum = instance(config, d)
    gen = torch.Generator().manual_seed(10_000 * config.seed + seed)
    tic = time.perf_counter()
    run = algorithm.run(data.subset(torch.arange(n)), x0, noise=NoiseSource(), accountant=Accountant("replace-one"),
                        generator=gen, keep_points=True)
    seconds = time.perf_counter() - tic
    certificate = certify_run(run, test, samples=config.certificate_samples, generator=gen)
    report = run.report(config.dp_delta)
    return dict(method=method, d=d, epsilon=epsilon, seed=seed, samples_used=run.stats.samples_used,
                evaluations=run.stats.evaluations, clipped=run.stats.clipped, beyond_radius=run.stats.beyond_radius,
                certified_grad_norm=certificate.bound,
                grad_norm=float(torch.linalg.vector_norm(test.gradient(run.output))),
                excess_loss=float(test.value(run.output)) - optimum,
                distance=float(torch.linalg.vector_norm(run.output - data.x_star)),
                epsilon_zcdp=report.epsilon_zcdp, epsilon_rdp=report.epsilon_rdp, epsilon_pld=report.epsilon_pld,
                seconds=seconds, **more)


def medians(rows: Sequence, metric: str, keys: Sequence[str], x: str) -> dict[tuple, list[tuple[float, float]]]:
    """(row.k for k in ``keys``) → [(row.x, median over seeds of row.metric)] sorted by x (typed rows)."""
    return group_medians([dataclasses.asdict(r) for r in rows], metric, keys, x)


def at(rows: Sequence, metric: str, **match) -> list[float]:
    """The values of ``metric`` over the seeds of the rows matching ``match`` (field → value), in seed order."""
    chosen = [r for r in rows if all(getattr(r, k) == v for k, v in match.items())]
    return [getattr(r, metric) for r in sorted(chosen, key=lambda r: r.seed)]


def figure(path: Path, panels: Sequence, draw: Callable, title: str) -> Path:
    """One 4.6 × 3.8-inch log-log panel per value of ``panels`` (``draw(ax, value)`` plots it and labels the axes),
    a legend in the first, ``title`` above, 120 dpi at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8), squeeze=False)
    for ax, value in zip(axes[0], panels):
        draw(ax, value)
        ax.set(xscale="log", yscale="log")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
