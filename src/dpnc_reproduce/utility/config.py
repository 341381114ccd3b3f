"""The utility reproduction's config and its problems: the grid, the methods' hand-set parameters,
and each problem's instance at (n, seed) (training objective, test set, public start and bound,
non-private reference)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from dpnc.privacy import check_delta
from dpnc.problems import L1Regression, LeastSquares, LogisticRegression, MaxOfAffine, TwoLayerReLU
from dpnc_reproduce.common import INTEGER, NATURAL, POSITIVE, check_axis, check_value, one_of
from dpnc_reproduce.method_table import refuse_old_names

Task = tuple[str, float, int, int]  # (problem, ε, n, seed)
PROBLEMS = (
    "least-squares",
    "logistic-cancer",
    "logistic-digits",
    "relu-cancer",
    "l1-regression",
    "max-affine",
)


def pool_size(name: str) -> int | None:
    """How many training examples a real-data problem has (None: synthetic, any n)."""
    return {"logistic-cancer": 455, "logistic-digits": 1438, "relu-cancer": 455}.get(name)


class Instance(NamedTuple):
    """One problem at one (n, seed): the training objective (n examples), a test set, the public
    start x0, a public bound Φ ≥ F(x0) − inf F, the non-private reference point x̂ (ε = ∞) and what
    kind of problem it is."""

    train: object
    test: object
    x0: torch.Tensor
    Phi: float
    reference: torch.Tensor
    smooth: bool
    classification: bool


@functools.lru_cache(maxsize=32)
def instance(config: UtilityConfig, name: str, n: int, seed: int) -> Instance:
    """The problem ``name`` on n training examples; data (split or draw) from the public ``seed``.

    Every problem's constants are **public** (declared from the data domain and the loss, never read
    off the private data):

    * ``least-squares``: synthetic least squares (:class:`~dpnc.problems.kl.LeastSquares`, d = 7,
      the balanced design of ``LeastSquares.generate``: rows ±q_{i mod d} on the unit sphere, label
      noise 0.05; domain ‖a‖ ≤ 1, |b| ≤ 1.2, region radius 2, μ = ⌊n/d⌋/n from the design: PL with
      public γ, L0, L1; x̂ its exact minimiser);
    * ``logistic-cancer``: binary logistic regression on scikit-learn's breast-cancer data,
      ``logistic-digits``: 10-class logistic regression on its 8×8 digits
      (:class:`~dpnc.problems.logistic.LogisticRegression`: public per-example features, a small
      ridge λ so that the PL constants are public too);
    * ``relu-cancer``: a one-hidden-layer ReLU network with hinge loss on the same public
      breast-cancer features (:class:`~dpnc.problems.networks.TwoLayerReLU`: nonsmooth, nonconvex,
      L0 on a ball);
    * ``l1-regression``: synthetic least absolute deviations (nonsmooth, convex, L0 = 1);
    * ``max-affine``: synthetic max of affine pieces, f(x) = max_j ⟨A_j, x⟩ + c_j
      (:class:`~dpnc.problems.nonsmooth.MaxOfAffine`, d = 10, 4 pieces, rows on the unit sphere:
      nonsmooth, convex, L0 = 1; start ‖x0‖ = 1, Φ = 2 from a declared ‖x*‖ ≤ 1; x̂ its exact
      minimiser, a linear program).

    x̂ is the non-private optimum of the same training set (the ε = ∞ reference row); for the
    network, the best of a long non-private run, so the excess may dip below 0."""
    gen = torch.Generator().manual_seed(1000 * config.seed + seed)
    if name.startswith("logistic"):
        pool, test = LogisticRegression.load(
            "breast-cancer" if name == "logistic-cancer" else "digits",
            l2=config.l2,
            seed=1000 * config.seed + seed,
        )
        train = pool.subset(torch.arange(min(n, pool.n)))
        x0 = torch.zeros(train.dim, dtype=torch.float64)
        return Instance(train, test, x0, math.log(train.classes), train.solve(), True, True)
    if name == "relu-cancer":
        pool, test = LogisticRegression.load("breast-cancer", seed=1000 * config.seed + seed)
        z, y = pool.data[0][:n], 2.0 * pool.data[1][:n] - 1
        train = TwoLayerReLU(z, y, hidden=config.hidden, radius=config.relu_radius)
        test = TwoLayerReLU(
            test.data[0], 2.0 * test.data[1] - 1, hidden=config.hidden, radius=config.relu_radius
        )
        x0 = train.init(gen)
        r = float(torch.linalg.vector_norm(x0))
        # hinge ≤ 1 + |pred| and |pred(x0)| ≤ ‖v‖(‖W‖ + ‖c‖) + |b0| ≤ r² + r for ‖z‖ ≤ 1; inf F ≥ 0
        return Instance(
            train, test, x0, 1 + r + r * r, _descend(train, x0, config.reference_steps), False, True
        )
    if name == "l1-regression":
        data = L1Regression.synthetic(
            n + config.n_test, config.l1_dim, noise=0.1, seed=1000 * config.seed + seed
        )
        train, test = data.subset(torch.arange(n)), data.subset(torch.arange(n, data.n))
        direction = torch.randn(config.l1_dim, generator=gen, dtype=torch.float64)
        x0 = data.x_star + direction / torch.linalg.vector_norm(direction)  # ‖x0 − x*‖ = 1: Φ = L·1
        return Instance(train, test, x0, 1.0, train.solve().x, False, False)
    if name == "least-squares":
        # the balanced design of LeastSquares.generate (rows ±q_{i mod d} on the unit sphere, label
        # noise 0.05); the first n rows are the training set, so μ = ⌊n/d⌋/n is known from n and d
        # alone (public)
        data = LeastSquares.generate(
            config.ls_dim, n + config.n_test, seed=1000 * config.seed + seed, noise=0.05
        )
        public = dict(row_bound=1.0, target_bound=data.target_bound, radius=2.0)
        train = LeastSquares(data.A[:n], data.b[:n], mu=max(n // config.ls_dim, 1) / n, **public)
        test = LeastSquares(
            data.A[n:],
            data.b[n:],
            mu=max(config.n_test // config.ls_dim, 1) / config.n_test,
            **public,
        )
        x0 = torch.zeros(config.ls_dim, dtype=torch.float64)
        # F(0) − F* ≤ F(0) = mean b²/2 ≤ target_bound²/2 (the domain); x̂ = w*, the exact minimiser
        return Instance(
            train, test, x0, data.target_bound**2 / 2, train.w_star.clone(), True, False
        )
    if name == "max-affine":
        d = config.maxaff_dim
        data = MaxOfAffine.synthetic(
            n + config.n_test, d, config.maxaff_pieces, seed=1000 * config.seed + seed
        )
        train, test = data.subset(torch.arange(n)), data.subset(torch.arange(n, data.n))
        direction = torch.randn(d, generator=gen, dtype=torch.float64)
        x0 = direction / torch.linalg.vector_norm(direction)  # ‖x0‖ = 1
        # the distribution is symmetric (rows uniform on the sphere), so the population minimiser is
        # 0; declared ‖x*‖ ≤ 1 for the empirical one (public; measured ≤ 0.9 at n = 200, d = 10), so
        # Φ = L·(‖x0‖ + 1) = 2
        return Instance(train, test, x0, 2.0, train.solve().x, False, False)
    raise ValueError(f"problem must be one of {PROBLEMS}; got {name!r}")


def _descend(problem, x0: torch.Tensor, steps: int) -> torch.Tensor:
    """Non-private full-batch Adam (lr 0.01) from x0, projected onto the region; the best iterate by
    F (ε = ∞)."""
    x = x0.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([x], lr=0.01)
    region, best, best_value = problem.constants.region, x0.clone(), float(problem.value(x0))
    for _ in range(steps):
        optimizer.zero_grad()
        x.grad = problem.gradient(x.detach())
        optimizer.step()
        with torch.no_grad():
            x.copy_(region.project(x))
        value = float(problem.value(x.detach()))
        if value < best_value:
            best, best_value = x.detach().clone(), value
    return best


METHODS = (
    "dp-gd",
    "dp-sgd",
    "dp-gd-tuned",
    "dp-sgd-tuned",
    "opacus",
    "dpzero",
    "adaptive-gd",
    "kl-spider",
    "proximal-point",
    "zo-o2nc",
    "klt",
    "klt:first-order",
    "klt:multi-pass",
    "adaptive-gd:theory",
    "kl-spider:theory",
    "proximal-point:theory",
    "zo-o2nc:theory",
    "klt:theory",
    "klt:first-order:theory",
)
DEFAULT_METHODS = METHODS[:13]  # --full: the theorem-settings variants only on request (--methods)
# The names of results written before 28 Nov 2026 (:meth:`Utility.upgrade
# <dpnc_reproduce.utility.Utility.upgrade>`)
RENAMED = {
    "kl-adaptive": "adaptive-gd",
    "kl-proximal": "proximal-point",
    "ztc": "zo-o2nc",
    "klt-zo": "klt",
    "klt-fo": "klt:first-order",
    "klt-mp": "klt:multi-pass",
    "kl-adaptive-theory": "adaptive-gd:theory",
    "kl-spider-theory": "kl-spider:theory",
    "kl-proximal-theory": "proximal-point:theory",
    "ztc-theory": "zo-o2nc:theory",
    "klt-zo-theory": "klt:theory",
    "klt-fo-theory": "klt:first-order:theory",
}


def _help(text: str) -> dict:
    return {"help": text}


@dataclass(frozen=True)
class UtilityConfig:
    """The grid and the methods' hand-set parameters; the defaults are ``--full``.

    What ``--full`` trims to finish in about half an hour on 2 cores (measured per task, one ε and
    seed, the 12 methods: least squares ≈ 17 s at n = 10⁴ and ≈ 45–110 s at n = 2·10⁴; digits ≈ 95 s
    with m = d = 650 directions, ≈ 26 s with m = 128): n ∈ {100, 1000, 10000} (two decades for the
    synthetic problems; the real ones capped at their pools), the digits problem at its whole pool
    only (n = 1438; ``largest_only``), and ZTC's and KLT's zeroth-order oracles with m = min(d, 128)
    directions (``zo_directions``; binds on digits, d = 650, and the network, d = 257). No method's
    privacy changes: m only sets how many directions average each estimate (the clip radius follows
    m)."""

    problems: tuple[str, ...] = field(
        default=PROBLEMS, metadata=_help(f"Among {', '.join(PROBLEMS)}.")
    )
    methods: tuple[str, ...] = field(
        default=DEFAULT_METHODS, metadata=_help(f"Among {', '.join(METHODS)}.")
    )
    epsilons: tuple[float, ...] = field(default=(1.0, 4.0), metadata=_help("Privacy levels ε."))
    samples: tuple[int, ...] = field(
        default=(1000,),
        metadata=_help("Training sizes n (real data: capped at the training pool, 455 or 1438)."),
    )
    largest_only: tuple[str, ...] = field(
        default=("logistic-digits",),
        metadata=_help("Problems run at their largest size only (the costliest per example)."),
    )
    largest_only_epsilons: tuple[float, ...] = field(
        default=(1.0,),
        metadata=_help(
            "The ε the largest_only problems run at (empty: every ε). DPZero's theorem sets T ∝ nε(d + 2)/√d, and its "
            "compute-matched DP-SGD pays T·n gradients: ≈ 2·10⁴ full-batch steps on digits at ε = 8."
        ),
    )
    seeds: int = field(
        default=5, metadata=_help("Seeds per setting (data split or draw, and noise).")
    )
    dp_delta: float = field(default=1e-6, metadata=_help("δ of (ε, δ)-DP, in (0, 1)."))
    gd_steps: int = field(default=100, metadata=_help("DP-GD steps T (full batch)."))
    sgd_epochs: float = field(default=5.0, metadata=_help("DP-SGD and Opacus epochs (B = √n)."))
    klt_mp_steps: int = field(
        default=100, metadata=_help("KLT multi-pass steps T (each reads all n examples).")
    )
    matched: bool = field(
        default=True,
        metadata=_help(
            "Run a compute-matched DP-SGD beside each paper method (same gradient evaluations, 1 gradient = 2 function "
            "evaluations)."
        ),
    )
    matched_max_steps: int = field(
        default=1000,
        metadata=_help(
            "The compute-matched DP-SGD's batch grows from √n (up to n) to keep its steps at most this."
        ),
    )
    certificate_samples: int = field(
        default=64,
        metadata=_help(
            "Uniform ball points of the Goldstein certificate (held-out data; nonsmooth problems, O2NC methods)."
        ),
    )
    rim: int = field(
        default=4, metadata=_help("Antipodal rim-direction pairs of the Goldstein certificate.")
    )
    alpha: float = field(default=0.05, metadata=_help("O2NC smoothing radius (ZTC's δ, KLT's α)."))
    max_directions: int = field(default=8, metadata=_help("Cap on KLT's directions m."))
    zo_directions: int = field(
        default=128,
        metadata=_help(
            "Cap on the directions m of ZTC's and KLT's zeroth-order practical settings (theirs: m = d)."
        ),
    )
    l2: float = field(default=1e-4, metadata=_help("Ridge λ of the logistic problems (public)."))
    hidden: int = field(default=8, metadata=_help("Hidden units of the network."))
    relu_radius: float = field(
        default=20.0, metadata=_help("Radius R of the network's region (L0 = √(1 + 2R²)).")
    )
    l1_dim: int = field(default=10, metadata=_help("Dimension of the ℓ1 regression."))
    ls_dim: int = field(default=7, metadata=_help("Dimension of the least-squares problem."))
    maxaff_dim: int = field(default=10, metadata=_help("Dimension of the max-of-affine problem."))
    maxaff_pieces: int = field(
        default=4, metadata=_help("Affine pieces per example of the max-of-affine problem.")
    )
    n_test: int = field(default=2000, metadata=_help("Test samples of the ℓ1 regression."))
    reference_steps: int = field(
        default=2000, metadata=_help("Non-private Adam steps for the network's reference.")
    )
    seed: int = field(default=0, metadata=_help("Public seed (data); the noise is always secret."))

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        check_axis("problems", self.problems, one_of(PROBLEMS))
        refuse_old_names(self.methods, RENAMED)
        check_axis("methods", self.methods, one_of(METHODS))
        if self.largest_only:
            check_axis("largest_only", self.largest_only, one_of(PROBLEMS))
        check_axis("epsilons", self.epsilons, POSITIVE)
        if self.largest_only_epsilons:
            check_axis("largest_only_epsilons", self.largest_only_epsilons, POSITIVE)
        check_axis("samples", self.samples, ("an integer >= 8", lambda n: INTEGER[1](n) and n >= 8))
        for name in (
            "seeds",
            "gd_steps",
            "klt_mp_steps",
            "matched_max_steps",
            "certificate_samples",
            "max_directions",
            "hidden",
            "l1_dim",
            "ls_dim",
            "maxaff_dim",
            "zo_directions",
            "n_test",
            "reference_steps",
        ):
            check_value(name, getattr(self, name), INTEGER)
        for name in ("sgd_epochs", "alpha", "relu_radius"):
            check_value(name, getattr(self, name), POSITIVE)
        check_value("l2", self.l2, POSITIVE)
        check_value(
            "maxaff_pieces",
            self.maxaff_pieces,
            ("an integer >= 2", lambda k: INTEGER[1](k) and k >= 2),
        )
        check_value("seed", self.seed, NATURAL)
        check_value("rim", self.rim, NATURAL)
        check_delta(self.dp_delta, "dp_delta")

    def sizes(self, problem: str) -> list[int]:
        """The distinct training sizes of ``problem`` (real data capped at its pool; the largest
        only for the problems of ``largest_only``)."""
        pool = pool_size(problem)
        sizes = sorted({n if pool is None else min(n, pool) for n in self.samples})
        return sizes[-1:] if problem in self.largest_only else sizes


FULL = UtilityConfig()
QUICK = UtilityConfig(
    problems=("logistic-cancer", "l1-regression"),
    methods=("dp-gd", "dp-sgd", "dp-sgd-tuned", "dpzero", "adaptive-gd", "klt:first-order"),
    epsilons=(4.0,),
    samples=(40, 200),
    seeds=3,
    gd_steps=30,
    sgd_epochs=2.0,
    klt_mp_steps=20,
    reference_steps=200,
    n_test=500,
    certificate_samples=16,
)
