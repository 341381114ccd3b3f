"""Useful on a user's own problem? Each paper's algorithm against DP-GD / DP-SGD baselines at equal (ε, δ).

``dpnc reproduce utility`` runs, on problems whose constants are **public** (declared from the data domain and
the loss, never read off the private data),

* ``least-squares``: synthetic least squares (:class:`~dpnc.problems.kl.LeastSquares`, d = 7, the balanced design of
  ``LeastSquares.generate``: rows ±q_{i mod d} on the unit sphere, label noise 0.05; domain ‖a‖ ≤ 1, |b| ≤ 1.2, region
  radius 2, μ = ⌊n/d⌋/n from the design: PL with public γ, L0, L1; x̂ its exact minimiser);
* ``logistic-cancer``: binary logistic regression on scikit-learn's breast-cancer data, ``logistic-digits``:
  10-class logistic regression on its 8×8 digits (:class:`~dpnc.problems.logistic.LogisticRegression`: public
  per-example features, a small ridge λ so that the PL constants are public too);
* ``relu-cancer``: a one-hidden-layer ReLU network with hinge loss on the same public breast-cancer features
  (:class:`~dpnc.problems.networks.TwoLayerReLU`: nonsmooth, nonconvex, L0 on a ball);
* ``l1-regression``: synthetic least absolute deviations (nonsmooth, convex, L0 = 1);
* ``max-affine``: synthetic max of affine pieces, f(x) = max_j ⟨A_j, x⟩ + c_j
  (:class:`~dpnc.problems.nonsmooth.MaxOfAffine`, d = 10, 4 pieces, rows on the unit sphere: nonsmooth, convex,
  L0 = 1; start ‖x0‖ = 1, Φ = 2 from a declared ‖x*‖ ≤ 1; x̂ its exact minimiser, a linear program),

every method of :data:`METHODS` (a registry: name → factory(instance, n, d, budget) → algorithm config) for
ε ∈ ``epsilons``, n ∈ ``samples`` (real data: capped at the training pool) and ``seeds`` seeds (the data split or
draw and the noise change with the seed). Rows: the excess empirical risk F(x) − F(x̂) against the non-private
optimum x̂ of the same training set (the ε = ∞ reference row; for the network, the best of a long non-private
run, so the excess may dip below 0), test loss and accuracy, wall time, function evaluations and gradients, and
the ε the accountant says was spent. Claims and tables: :mod:`dpnc_reproduce.utility_report`.

**Parameters.** The baselines use hand-set, documented defaults (:func:`dpgd`, :func:`dpsgd`); ``dp-gd-tuned``
and ``dp-sgd-tuned`` tune the baselines' step size privately (:func:`tuned`: random stopping, the tuning charged
to the same ε); DPZero and the papers' methods use their families' ``practical(...)`` settings, untuned (the
``*-theory`` methods: the theorems' ``from_theory``). Wrapping a factory in a private tuner (:func:`tuned`) is a
one-line change in :func:`methods`.

**What ``--full`` trims to finish in about half an hour on 2 cores** (measured per task, one ε and seed, the 12
methods: least squares ≈ 17 s at n = 10⁴ and ≈ 45–110 s at n = 2·10⁴; digits ≈ 95 s with m = d = 650 directions,
≈ 26 s with m = 128): n ∈ {100, 1000, 10000} (two decades for the synthetic problems; the real ones capped at their
pools), the digits problem at its whole pool only (n = 1438; ``largest_only``), and ZTC's and KLT's zeroth-order
oracles with m = min(d, 128) directions (``zo_directions``; binds on digits, d = 650, and the network, d = 257). No
method's privacy changes: m only sets how many directions average each estimate (the clip radius follows m).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import torch

from dpnc_reproduce import utility_report as report
from dpnc_reproduce.protocol import Claim, Declared, Experiment, Result
from dpnc_reproduce.common import INTEGER, NATURAL, POSITIVE, check_axis, check_value, one_of
from dpnc.privacy.budget import Budget, check_delta

Task = tuple[str, float, int, int]   # (problem, ε, n, seed)


# --- problems ------------------------------------------------------------------------------------------------


class Instance(NamedTuple):
    """One problem at one (n, seed): the training objective (n examples), a test set, the public start x0, a public
    bound Φ ≥ F(x0) − inf F, the non-private reference point x̂ (ε = ∞) and what kind of problem it is."""

    train: object
    test: object
    x0: torch.Tensor
    Phi: float
    reference: torch.Tensor
    smooth: bool
    classification: bool


PROBLEMS = ("least-squares", "logistic-cancer", "logistic-digits", "relu-cancer", "l1-regression", "max-affine")


def pool_size(name: str) -> int | None:
    """How many training examples a real-data problem has (None: synthetic, any n)."""
    return {"logistic-cancer": 455, "logistic-digits": 1438, "relu-cancer": 455}.get(name)


@functools.lru_cache(maxsize=32)
def instance(config: UtilityConfig, name: str, n: int, seed: int) -> Instance:
    """The problem ``name`` on n training examples; data (split or draw) from the public ``seed``."""
    from dpnc.problems import L1Regression, LeastSquares, LogisticRegression, MaxOfAffine, TwoLayerReLU

    gen = torch.Generator().manual_seed(1000 * config.seed + seed)
    if name.startswith("logistic"):
        pool, test = LogisticRegression.load("breast-cancer" if name == "logistic-cancer" else "digits",
                                             l2=config.l2, seed=1000 * config.seed + seed)
        train = pool.subset(torch.arange(min(n, pool.n)))
        x0 = torch.zeros(train.dim, dtype=torch.float64)
        return Instance(train, test, x0, math.log(train.classes), train.solve(), True, True)
    if name == "relu-cancer":
        pool, test = LogisticRegression.load("breast-cancer", seed=1000 * config.seed + seed)
        z, y = pool.data[0][:n], 2.0 * pool.data[1][:n] - 1
        train = TwoLayerReLU(z, y, hidden=config.hidden, radius=config.relu_radius)
        test = TwoLayerReLU(test.data[0], 2.0 * test.data[1] - 1, hidden=config.hidden, radius=config.relu_radius)
        x0 = train.init(gen)
        r = float(torch.linalg.vector_norm(x0))
        # hinge ≤ 1 + |pred| and |pred(x0)| ≤ ‖v‖(‖W‖ + ‖c‖) + |b0| ≤ r² + r for ‖z‖ ≤ 1; inf F ≥ 0
        return Instance(train, test, x0, 1 + r + r * r, _descend(train, x0, config.reference_steps), False, True)
    if name == "l1-regression":
        data = L1Regression.synthetic(n + config.n_test, config.l1_dim, noise=0.1, seed=1000 * config.seed + seed)
        train, test = data.subset(torch.arange(n)), data.subset(torch.arange(n, data.n))
        direction = torch.randn(config.l1_dim, generator=gen, dtype=torch.float64)
        x0 = data.x_star + direction / torch.linalg.vector_norm(direction)      # ‖x0 − x*‖ = 1: Φ = L·1
        return Instance(train, test, x0, 1.0, train.solve().x, False, False)
    if name == "least-squares":
        # the balanced design of LeastSquares.generate (rows ±q_{i mod d} on the unit sphere, label noise 0.05);
        # the first n rows are the training set, so μ = ⌊n/d⌋/n is known from n and d alone (public)
        data = LeastSquares.generate(config.ls_dim, n + config.n_test, seed=1000 * config.seed + seed, noise=0.05)
        public = dict(row_bound=1.0, target_bound=data.target_bound, radius=2.0)
        train = LeastSquares(data.A[:n], data.b[:n], mu=max(n // config.ls_dim, 1) / n, **public)
        test = LeastSquares(data.A[n:], data.b[n:], mu=max(config.n_test // config.ls_dim, 1) / config.n_test,
                            **public)
        x0 = torch.zeros(config.ls_dim, dtype=torch.float64)
        # F(0) − F* ≤ F(0) = mean b²/2 ≤ target_bound²/2 (the domain); x̂ = w*, the exact minimiser
        return Instance(train, test, x0, data.target_bound ** 2 / 2, train.w_star.clone(), True, False)
    if name == "max-affine":
        d = config.maxaff_dim
        data = MaxOfAffine.synthetic(n + config.n_test, d, config.maxaff_pieces, seed=1000 * config.seed + seed)
        train, test = data.subset(torch.arange(n)), data.subset(torch.arange(n, data.n))
        direction = torch.randn(d, generator=gen, dtype=torch.float64)
        x0 = direction / torch.linalg.vector_norm(direction)                     # ‖x0‖ = 1
        # the distribution is symmetric (rows uniform on the sphere), so the population minimiser is 0; declared
        # ‖x*‖ ≤ 1 for the empirical one (public; measured ≤ 0.9 at n = 200, d = 10), so Φ = L·(‖x0‖ + 1) = 2
        return Instance(train, test, x0, 2.0, train.solve().x, False, False)
    raise ValueError(f"problem must be one of {PROBLEMS}; got {name!r}")


def _descend(problem, x0: torch.Tensor, steps: int) -> torch.Tensor:
    """Non-private full-batch Adam (lr 0.01) from x0, projected onto the region; the best iterate by F (ε = ∞)."""
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


# --- methods -------------------------------------------------------------------------------------------------


class Outcome(NamedTuple):
    """What a method returns: the output point, counts, the ε its accountant spent, whether private, a note."""

    x: torch.Tensor
    evaluations: int
    gradients: int
    epsilon_spent: float
    private: bool
    note: str = ""
    radius: float = math.nan   # the smoothing radius whose Goldstein stationarity the method targets (O2NC: 2·δ)


Factory = Callable[[Instance, int, int, Budget], object]


@dataclass(frozen=True)
class Method:
    """A registered method: ``factory(instance, n, d, budget)`` → an algorithm config (None: not applicable to
    this problem), run under an accountant of ``relation``; or a ``runner`` of its own (Opacus)."""

    name: str
    family: str      # "baseline" or "dpnc" (a paper's method)
    label: str
    factory: Factory | None = None
    relation: str = "replace-one"
    runner: Callable | None = None
    timed: bool = True   # False: its wall time is not published (a private tuning's time reveals its secret K)

    def run(self, config: UtilityConfig, inst: Instance, budget: Budget, gen: torch.Generator) -> Outcome | None:
        if self.runner is not None:
            return self.runner(config, inst, budget)
        from dpnc.privacy import Accountant, NoiseSource

        algorithm = self.factory(inst, inst.train.n, inst.train.dim, budget)
        if algorithm is None:
            return None
        accountant = Accountant(self.relation)
        run = algorithm.run(inst.train, inst.x0, noise=NoiseSource(), accountant=accountant, generator=gen)
        spent = run.report(budget.delta)
        smoothing = getattr(algorithm, "smoothing", None)   # O2NC (ZTC's δ, KLT's α): (2·smoothing, β)-stationarity
        radius = 2 * float(smoothing) if smoothing is not None else math.nan
        return Outcome(run.output, run.stats.evaluations, run.stats.gradients, spent.epsilon, spent.private, "",
                       radius)


def _calibrated(budget: Budget, steps: int, rate: float = 1.0) -> float:
    from dpnc.privacy.calibrate import noise_multiplier

    return noise_multiplier(budget.epsilon, budget.delta, rate, steps)


def _eta(inst: Instance, steps: int) -> float:
    """The DPZero family's practical step (:func:`~dpnc.algorithms.dpzero.practical_step`): 1/L1 on a smooth
    problem, else the subgradient step Φ/(L0²√T)."""
    from dpnc.algorithms.dpzero import practical_step

    return practical_step(inst.train.constants, steps=steps, Phi=None if inst.smooth else inst.Phi)


def dpgd(config: UtilityConfig):
    """DP-GD: full batch, C = L0, T = ``gd_steps``, η = :func:`_eta`, σ calibrated by the accountant."""
    def factory(inst, n, d, budget):
        from dpnc.algorithms.dpzero.dpsgd import DPSGD

        T = config.gd_steps
        return DPSGD(eta=_eta(inst, T), C=inst.train.constants.L0, noise_multiplier=_calibrated(budget, T),
                     steps=T, batch_size=n)
    return factory


def dpsgd(config: UtilityConfig):
    """DP-SGD: :meth:`DPSGD.from_theory <dpnc.algorithms.dpzero.dpsgd.DPSGD.from_theory>` (B = √n, ``sgd_epochs``)."""
    def factory(inst, n, d, budget):
        from dpnc.algorithms.dpzero.dpsgd import DPSGD

        base = DPSGD.from_theory(inst.train.constants, n=n, epsilon=budget.epsilon, delta=budget.delta,
                                 epochs=config.sgd_epochs)
        return base if inst.smooth else DPSGD.from_theory(inst.train.constants, n=n, epsilon=budget.epsilon,
                                                          delta=budget.delta, epochs=config.sgd_epochs,
                                                          eta=_eta(inst, base.steps))
    return factory


def dpzero_theory_steps(n: int, d: int, epsilon: float, delta: float) -> int:
    """DPZero's T from its own theorem for this problem's n and d: Theorem 3's T = n(r + 2)ε / (4√(r log(e + ε/δ)))
    (:func:`~dpnc.algorithms.dpzero.theory.dpzero_from_theory`) with the effective rank r = d (no smaller r is
    declared for these problems; T does not depend on L or ℓ, passed as 1)."""
    from dpnc.algorithms.dpzero.theory import dpzero_from_theory

    return dpzero_from_theory(n=n, d=d, r=d, L=1.0, ell=1.0, epsilon=epsilon, delta=delta).T


def dpzero(config: UtilityConfig):
    """DPZero (full batch): T from its own theorem for the problem's n and d (:func:`dpzero_theory_steps`; the
    smooth problems' ℓ and the nonsmooth ones' lack of it leave T unchanged), the other parameters its family's
    practical settings at that T (:meth:`DPZero.practical <dpnc.algorithms.dpzero.DPZero.practical>`: λ = 10⁻³,
    C = L0, η = :func:`_eta` / (d + 2); σ calibrated by the accountant for the T releases)."""
    def factory(inst, n, d, budget):
        from dpnc.algorithms.dpzero import DPZero

        T = dpzero_theory_steps(n, d, budget.epsilon, budget.delta)
        return DPZero.practical(inst.train.constants, d=d, epsilon=budget.epsilon, delta=budget.delta,
                                steps=T, Phi=None if inst.smooth else inst.Phi)
    return factory


def _kl(config: UtilityConfig, kind: str, practical: bool = True):
    """Menart et al.: their ``practical(...)`` settings (default) or Theorems 4, 1, 2's (``from_theory``), from the
    objective's public constants, ρ of the budget and F0 = Φ ≥ F(x0) − F* (public). Needs L1 (and γ, κ for
    KL-Spider and the proximal point method): smooth problems only."""
    def factory(inst, n, d, budget):
        from dpnc.algorithms.menart import AdaptiveGD, KLSpider, ProximalPoint
        from dpnc.problems.kl_objective import default_weak_convexity

        c = inst.train.constants
        if c.L1 is None or (kind != "adaptive" and c.gamma is None):
            return None
        rho = budget.to_zcdp().rho
        if kind == "adaptive":   # practical: norm queries budgeted for DP-GD's number of steps
            return (AdaptiveGD.practical(c, rho=rho, n=n, horizon=config.gd_steps) if practical else
                    AdaptiveGD.from_theory(c, rho=rho))
        if kind == "proximal" and not c.weak_convexity:
            # convex, so any L̃1 > 0 is valid: L1 for the practical settings (a gradient step's curvature; public),
            # the spec's default for a convex objective for the theorem's (tiny here: λ/16, prox steps overshoot)
            c = dataclasses.replace(c, weak_convexity=c.L1 if practical else
                                    default_weak_convexity(c.gamma, c.kappa, c.L0))
        cls = KLSpider if kind == "spider" else ProximalPoint
        if practical:
            return cls.practical(c, rho=rho, n=n, F0=inst.Phi)   # F0 = Φ, not the default (γL0)^κ ≫ Φ
        return dataclasses.replace(cls.from_theory(c, rho=rho), F0=inst.Phi)
    return factory


def _travel(inst: Instance) -> dict:
    """The O2NC practical rules' public length scale where the constants declare no region: 2Φ/L0 (twice the
    distance Φ/L0 that a drop of Φ allows; ℓ1 regression: twice ‖x0 − x*‖)."""
    c = inst.train.constants
    return {} if c.region is not None else {"travel": 2 * inst.Phi / c.L0}


def ztc(config: UtilityConfig, practical: bool = True):
    """Zhang–Tran–Cutkosky, variance-reduced oracle: ``practical`` settings (default; m = min(d, ``zo_directions``)
    directions), or Theorem 4.9's with smoothing δ = ``alpha``."""
    def factory(inst, n, d, budget):
        from dpnc.algorithms.ztc import ZhangTranCutkosky, paper_rho

        if practical:
            return ZhangTranCutkosky.practical(inst.train.constants, n=n, d=d, epsilon=budget.epsilon,
                                               delta=budget.delta, m=min(d, config.zo_directions), **_travel(inst))
        return ZhangTranCutkosky.from_theory(M=n, d=d, L=inst.train.constants.L0, delta=config.alpha,
                                             rho=paper_rho(budget.epsilon, budget.delta), F_star=inst.Phi)
    return factory


def klt(config: UtilityConfig, oracle: str, practical: bool = True):
    """Kornowski–Liu–Talwar, zeroth-order single pass (Theorem 3.1), first-order (6.1) or multi-pass (4.1, ERM):
    ``practical`` settings (default; zeroth order and multi-pass with m = min(d, ``zo_directions``) directions,
    multi-pass T = ``klt_mp_steps``), or the theorem's with α = ``alpha`` and m ≤ ``max_directions``."""
    def factory(inst, n, d, budget):
        from dpnc.algorithms.klt import KornowskiLiuTalwar

        if practical:
            zo = {"m": min(d, config.zo_directions)} if oracle != "first-order" else {}
            if oracle == "multi-pass":
                zo["steps"] = config.klt_mp_steps
            return KornowskiLiuTalwar.practical(inst.train.constants, n=n, d=d, epsilon=budget.epsilon,
                                                delta=budget.delta, oracle=oracle, **zo, **_travel(inst))
        common = dict(n=n, d=d, L=inst.train.constants.L0, Phi=inst.Phi, alpha=config.alpha,
                      epsilon=budget.epsilon, dp_delta=budget.delta)
        algorithm = KornowskiLiuTalwar.from_theory(oracle, **common)
        if algorithm.m > config.max_directions:
            algorithm = KornowskiLiuTalwar.from_theory(oracle, **common, m=config.max_directions)
        return algorithm
    return factory


def opacus_runner(config: UtilityConfig, inst: Instance, budget: Budget) -> Outcome | None:
    """Opacus DP-SGD on the torch model of the network (relu-cancer only): the practitioner's baseline.

    nn.Linear(p, h) → ReLU → nn.Linear(h, 1), hinge loss, SGD with Opacus' Poisson sampling, B = √n,
    ``sgd_epochs`` epochs, C = L0, lr = :func:`_eta`, σ by ``make_private_with_epsilon``. Opacus draws its noise
    from torch's default generator (no secure mode here): a utility baseline. Its ε is dpnc's accountant's answer
    for the same (σ, q, T)."""
    from dpnc.problems import TwoLayerReLU

    if not isinstance(inst.train, TwoLayerReLU):
        return None
    try:
        from opacus import PrivacyEngine
    except ImportError:
        return None
    from dpnc.privacy.calibrate import epsilon_for

    problem, n = inst.train, inst.train.n
    h, p = problem.hidden, problem.features
    model = torch.nn.Sequential(torch.nn.Linear(p, h), torch.nn.ReLU(), torch.nn.Linear(h, 1)).double()
    W, c, v, b0 = problem.unpack(inst.x0)
    with torch.no_grad():
        model[0].weight.copy_(W), model[0].bias.copy_(c), model[2].weight.copy_(v[None]), model[2].bias.copy_(b0[None])
    B = max(1, round(math.sqrt(n)))
    steps_per_epoch = max(1, round(n / B))
    epochs = max(1, round(config.sgd_epochs))
    z, y = problem.data
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(z, y), batch_size=B)
    optimizer = torch.optim.SGD(model.parameters(), lr=_eta(inst, epochs * steps_per_epoch))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = PrivacyEngine()
        model, optimizer, loader = engine.make_private_with_epsilon(
            module=model, optimizer=optimizer, data_loader=loader, target_epsilon=budget.epsilon,
            target_delta=budget.delta, epochs=epochs, max_grad_norm=problem.constants.L0, poisson_sampling=True)
        gradients = steps = 0
        for _ in range(epochs):
            for zb, yb in loader:
                optimizer.zero_grad()
                # the batch's mean hinge loss; an empty Poisson batch still runs forward and backward (0 per-sample
                # gradients), so that Opacus releases its noise-only step instead of failing on missing gradients
                torch.relu(1 - yb * model(zb).squeeze(-1)).sum().div(max(len(yb), 1)).backward()
                optimizer.step()
                gradients, steps = gradients + len(yb), steps + 1
    module = model._module
    x = torch.cat([module[0].weight.flatten(), module[0].bias, module[2].weight.flatten(), module[2].bias]).detach()
    spent = epsilon_for(optimizer.noise_multiplier, 1 / len(loader), steps, budget.delta, accountant="pld")
    return Outcome(x, 0, gradients, spent, False, "Opacus noise from torch's default generator (no secure mode)")


TUNING_GRID = (0.25, 1.0, 4.0)   # step sizes tried: η × these
TUNING_ETA, TUNING_GAMMA = 1.0, 0.25  # random stopping: geometric K, E[K] = 1/γ = 4 (Papernot & Steinke)


def _tuning_cost(base, n: int, relation: str, multiplier: float, bound: float):
    """The public ledger of one candidate of :func:`tuned_runner`: T releases of ``base`` at ``multiplier``,
    then its private score."""
    from dpnc import tune
    from dpnc.privacy import Accountant, NoiseSource
    from dpnc.privacy.mean import mean_release

    cost = Accountant(relation)
    cost.record(mean_release(base.C, multiplier, sampler=base.sampler(n), accountant=cost, noise=NoiseSource()),
                base.steps)
    cost.record(tune.score_release(n=n, bound=bound, noise_multiplier=multiplier, accountant=cost))
    return cost


@functools.lru_cache(maxsize=256)
def _tuning_multiplier(base, n: int, relation: str, bound: float, epsilon: float, delta: float) -> float:
    """The smallest σ/Δ (to 1 %) at which random stopping over |grid| candidates, each a run of ``base`` plus a
    score, is (ε, δ)-DP by the accountant (RDP; Papernot & Steinke, Theorem 2)."""
    from dpnc.privacy import Accountant
    from dpnc.privacy.releases import RandomStopping

    def spent(m: float) -> float:
        ledger = tuple((e.release, e.composed_count) for e in _tuning_cost(base, n, relation, m, bound).ledger)
        acct = Accountant(relation)
        acct.record(RandomStopping((ledger,) * len(TUNING_GRID), TUNING_ETA, TUNING_GAMMA))
        return acct.epsilon(delta, "rdp")

    lo = hi = base.noise_multiplier
    while spent(hi) > epsilon:
        lo, hi = hi, 2 * hi
    while hi / lo > 1.01:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if spent(mid) <= epsilon else (mid, hi)
    return hi


def tuned(factory: Factory, relation: str):
    """A runner that tunes the step size of a DP-GD / DP-SGD ``factory``'s config privately: random stopping
    (:func:`dpnc.tune.random_stopping`) over η × :data:`TUNING_GRID`, each candidate scored by its noisy mean
    training loss (clipped to [0, Φ + 1]), every candidate's noise raised so that the whole tuning spends ≤ ε.

    Counts are the winning run's, and the harness publishes no wall time for it (the number of runs K is secret,
    and the time of the whole tuning grows with K)."""
    def runner(config: UtilityConfig, inst: Instance, budget: Budget) -> Outcome:
        from dpnc import tune
        from dpnc.privacy import Accountant, NoiseSource

        n = inst.train.n
        base = factory(inst, n, inst.train.dim, budget)
        bound = inst.Phi + 1.0
        m = _tuning_multiplier(base, n, relation, bound, budget.epsilon, budget.delta)
        index = torch.arange(n)

        def candidate(scale):
            def run(accountant, noise):
                config_ = dataclasses.replace(base, eta=base.eta * scale, noise_multiplier=m)
                r = config_.run(inst.train, inst.x0, noise=noise, accountant=accountant)
                score = tune.private_score(inst.train.losses_at(r.output, index), bound=bound, noise_multiplier=m,
                                           noise=noise, accountant=accountant)
                return r, score
            return run

        cost = _tuning_cost(base, n, relation, m, bound)
        result = tune.random_stopping([candidate(g) for g in TUNING_GRID], costs=cost, eta=TUNING_ETA,
                                      gamma=TUNING_GAMMA, noise=NoiseSource(), accountant=Accountant(relation))
        report = result.report(budget.delta)
        return Outcome(result.result.output, 0, result.result.stats.gradients, report.epsilon, report.private,
                       f"tuned: η × {TUNING_GRID[result.index]:g}")
    return runner


def methods(config: UtilityConfig) -> dict[str, Method]:
    """The registry. To use a ``practical`` constructor or a private tuner, change the method's factory here."""
    return {m.name: m for m in (
        Method("dp-gd", "baseline", "DP-GD (full batch, hand-set)", dpgd(config)),
        Method("dp-sgd", "baseline", "DP-SGD (Poisson, B = √n, hand-set)", dpsgd(config), relation="add/remove"),
        Method("dp-gd-tuned", "baseline", "DP-GD, step size tuned privately (random stopping)",
               runner=tuned(dpgd(config), "replace-one"), timed=False),
        Method("dp-sgd-tuned", "baseline", "DP-SGD, step size tuned privately (random stopping)",
               runner=tuned(dpsgd(config), "add/remove"), timed=False),
        Method("opacus", "baseline", "Opacus DP-SGD (torch model; network only)", runner=opacus_runner),
        Method("dpzero", "dpnc", "DPZero (full batch, practical settings)", dpzero(config)),
        Method("kl-adaptive", "dpnc", "Menart et al. adaptive noisy GD, practical settings", _kl(config, "adaptive")),
        Method("kl-spider", "dpnc", "Menart et al. KL-Spider, practical settings", _kl(config, "spider")),
        Method("kl-proximal", "dpnc", "Menart et al. proximal point, practical settings", _kl(config, "proximal")),
        Method("ztc", "dpnc", "Zhang–Tran–Cutkosky O2NC, practical settings", ztc(config)),
        Method("klt-zo", "dpnc", "Kornowski–Liu–Talwar single-pass ZO, practical settings",
               klt(config, "zeroth-order")),
        Method("klt-fo", "dpnc", "Kornowski–Liu–Talwar single-pass first-order, practical settings",
               klt(config, "first-order")),
        Method("klt-mp", "dpnc", "Kornowski–Liu–Talwar multi-pass ZO (Alg. 4, ERM), practical settings",
               klt(config, "multi-pass")),
        Method("kl-adaptive-theory", "dpnc", "Menart et al. adaptive noisy GD (Thm 4)",
               _kl(config, "adaptive", practical=False)),
        Method("kl-spider-theory", "dpnc", "Menart et al. KL-Spider (Thm 1)", _kl(config, "spider", practical=False)),
        Method("kl-proximal-theory", "dpnc", "Menart et al. proximal point (Thm 2)",
               _kl(config, "proximal", practical=False)),
        Method("ztc-theory", "dpnc", "Zhang–Tran–Cutkosky O2NC (Thm 4.9)", ztc(config, practical=False)),
        Method("klt-zo-theory", "dpnc", "Kornowski–Liu–Talwar single-pass ZO (Thm 3.1)",
               klt(config, "zeroth-order", practical=False)),
        Method("klt-fo-theory", "dpnc", "Kornowski–Liu–Talwar single-pass first-order (Thm 6.1)",
               klt(config, "first-order", practical=False)),
    )}


METHODS = ("dp-gd", "dp-sgd", "dp-gd-tuned", "dp-sgd-tuned", "opacus", "dpzero", "kl-adaptive", "kl-spider",
           "kl-proximal", "ztc", "klt-zo", "klt-fo", "klt-mp", "kl-adaptive-theory", "kl-spider-theory",
           "kl-proximal-theory", "ztc-theory", "klt-zo-theory", "klt-fo-theory")
DEFAULT_METHODS = METHODS[:13]   # --full: the theorem-settings variants only on request (--methods)
REFERENCE = "non-private"
MATCHED = "matched:"             # a compute-matched baseline's row: "matched:<paper method>"
GRADIENT_COST = 2                # the compute conversion: one per-example gradient = 2 function evaluations
O2NC = ("ztc", "klt-zo", "klt-fo", "klt-mp", "ztc-theory", "klt-zo-theory", "klt-fo-theory")   # Goldstein targets


def compute(evaluations: int, gradients: int) -> float:
    """A run's compute in per-example gradient evaluations: gradients + evaluations / :data:`GRADIENT_COST` (one
    gradient = one forward and one backward pass ≈ the two forward passes of a two-point difference)."""
    return gradients + evaluations / GRADIENT_COST


def matched_dpsgd(config: UtilityConfig, inst: Instance, budget: Budget, cost: float):
    """The compute-matched baseline of a paper method that spent ``cost`` (:func:`compute`): hand-set DP-SGD
    (:meth:`DPSGD.from_theory <dpnc.algorithms.dpzero.dpsgd.DPSGD.from_theory>`, Poisson, C = L0) whose expected
    gradient evaluations T·B equal ``cost``: B = √n, raised (up to the full batch n) so that T ≤
    ``matched_max_steps`` where the cost allows; epochs = cost/n; η = 1/L1 (smooth) or :func:`_eta`
    at its T (nonsmooth)."""
    from dpnc.algorithms.dpzero.dpsgd import DPSGD

    n = inst.train.n
    B = min(n, max(round(math.sqrt(n)), math.ceil(cost / config.matched_max_steps)))
    epochs = max(cost, 1.0) / n
    base = DPSGD.from_theory(inst.train.constants, n=n, epsilon=budget.epsilon, delta=budget.delta, batch_size=B,
                             epochs=epochs)
    return base if inst.smooth else dataclasses.replace(base, eta=_eta(inst, base.steps))


# --- config, rows, experiment --------------------------------------------------------------------------------


def _help(text: str) -> dict:
    return {"help": text}


@dataclass(frozen=True)
class UtilityConfig:
    """The grid and the methods' hand-set parameters; the defaults are ``--full``."""

    problems: tuple[str, ...] = field(default=PROBLEMS, metadata=_help(f"Among {', '.join(PROBLEMS)}."))
    methods: tuple[str, ...] = field(default=DEFAULT_METHODS, metadata=_help(f"Among {', '.join(METHODS)}."))
    epsilons: tuple[float, ...] = field(default=(1.0, 4.0), metadata=_help("Privacy levels ε."))
    samples: tuple[int, ...] = field(default=(1000,), metadata=_help(
        "Training sizes n (real data: capped at the training pool, 455 or 1438)."))
    largest_only: tuple[str, ...] = field(default=("logistic-digits",), metadata=_help(
        "Problems run at their largest size only (the costliest per example)."))
    largest_only_epsilons: tuple[float, ...] = field(default=(1.0,), metadata=_help(
        "The ε the largest_only problems run at (empty: every ε). DPZero's theorem sets T ∝ nε(d + 2)/√d, and its "
        "compute-matched DP-SGD pays T·n gradients: ≈ 2·10⁴ full-batch steps on digits at ε = 8."))
    seeds: int = field(default=5, metadata=_help("Seeds per setting (data split or draw, and noise)."))
    dp_delta: float = field(default=1e-6, metadata=_help("δ of (ε, δ)-DP, in (0, 1)."))
    gd_steps: int = field(default=100, metadata=_help("DP-GD steps T (full batch)."))
    sgd_epochs: float = field(default=5.0, metadata=_help("DP-SGD and Opacus epochs (B = √n)."))
    klt_mp_steps: int = field(default=100, metadata=_help("KLT multi-pass steps T (each reads all n examples)."))
    matched: bool = field(default=True, metadata=_help(
        "Run a compute-matched DP-SGD beside each paper method (same gradient evaluations, 1 gradient = 2 function "
        "evaluations)."))
    matched_max_steps: int = field(default=1000, metadata=_help(
        "The compute-matched DP-SGD's batch grows from √n (up to n) to keep its steps at most this."))
    certificate_samples: int = field(default=64, metadata=_help(
        "Uniform ball points of the Goldstein certificate (held-out data; nonsmooth problems, O2NC methods)."))
    rim: int = field(default=4, metadata=_help("Antipodal rim-direction pairs of the Goldstein certificate."))
    alpha: float = field(default=0.05, metadata=_help("O2NC smoothing radius (ZTC's δ, KLT's α)."))
    max_directions: int = field(default=8, metadata=_help("Cap on KLT's directions m."))
    zo_directions: int = field(default=128, metadata=_help(
        "Cap on the directions m of ZTC's and KLT's zeroth-order practical settings (theirs: m = d)."))
    l2: float = field(default=1e-4, metadata=_help("Ridge λ of the logistic problems (public)."))
    hidden: int = field(default=8, metadata=_help("Hidden units of the network."))
    relu_radius: float = field(default=20.0, metadata=_help("Radius R of the network's region (L0 = √(1 + 2R²))."))
    l1_dim: int = field(default=10, metadata=_help("Dimension of the ℓ1 regression."))
    ls_dim: int = field(default=7, metadata=_help("Dimension of the least-squares problem."))
    maxaff_dim: int = field(default=10, metadata=_help("Dimension of the max-of-affine problem."))
    maxaff_pieces: int = field(default=4, metadata=_help("Affine pieces per example of the max-of-affine problem."))
    n_test: int = field(default=2000, metadata=_help("Test samples of the ℓ1 regression."))
    reference_steps: int = field(default=2000, metadata=_help("Non-private Adam steps for the network's reference."))
    seed: int = field(default=0, metadata=_help("Public seed (data); the noise is always secret."))

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        check_axis("problems", self.problems, one_of(PROBLEMS))
        check_axis("methods", self.methods, one_of(METHODS))
        if self.largest_only:
            check_axis("largest_only", self.largest_only, one_of(PROBLEMS))
        check_axis("epsilons", self.epsilons, POSITIVE)
        if self.largest_only_epsilons:
            check_axis("largest_only_epsilons", self.largest_only_epsilons, POSITIVE)
        check_axis("samples", self.samples, ("an integer >= 8", lambda n: INTEGER[1](n) and n >= 8))
        for name in ("seeds", "gd_steps", "klt_mp_steps", "matched_max_steps", "certificate_samples", "max_directions",
                     "hidden", "l1_dim", "ls_dim", "maxaff_dim", "zo_directions", "n_test", "reference_steps"):
            check_value(name, getattr(self, name), INTEGER)
        for name in ("sgd_epochs", "alpha", "relu_radius"):
            check_value(name, getattr(self, name), POSITIVE)
        check_value("l2", self.l2, POSITIVE)
        check_value("maxaff_pieces", self.maxaff_pieces, ("an integer >= 2", lambda k: INTEGER[1](k) and k >= 2))
        check_value("seed", self.seed, NATURAL)
        check_value("rim", self.rim, NATURAL)
        check_delta(self.dp_delta, "dp_delta")

    def sizes(self, problem: str) -> list[int]:
        """The distinct training sizes of ``problem`` (real data capped at its pool; the largest only for the
        problems of ``largest_only``)."""
        pool = pool_size(problem)
        sizes = sorted({n if pool is None else min(n, pool) for n in self.samples})
        return sizes[-1:] if problem in self.largest_only else sizes


FULL = UtilityConfig()
QUICK = UtilityConfig(problems=("logistic-cancer", "l1-regression"), methods=("dp-gd", "dp-sgd", "dp-sgd-tuned",
                      "dpzero", "kl-adaptive", "klt-fo"), epsilons=(4.0,), samples=(40, 200), seeds=3, gd_steps=30,
                      sgd_epochs=2.0, klt_mp_steps=20, reference_steps=200, n_test=500, certificate_samples=16)


@dataclass(frozen=True)
class UtilityRow:
    """One run of one method (or the non-private reference, ε = ∞) on one problem, n and seed.

    ``status``: "ok", or "n/a: why" (the method does not apply, or its theorem admits no run at this n).
    ``excess_risk``: F_train(x) − F_train(x̂); ``test_accuracy``: NaN for regression; ``epsilon_spent``: the
    tightest ε(δ) of the run's accountant (∞ for the reference). ``train_loss``: F_train(x); ``start_gap``:
    F_train(x0) − F_train(x̂), the start's excess (the progress margin's yardstick). ``certificate``: the Goldstein
    certificate (:func:`dpnc.certify.goldstein_certificate`, an upper bound on ‖∂F_test(x)‖_radius on the held-out
    set) at the output, ``start_certificate`` the same at x0, ``radius`` twice the O2NC method's smoothing (NaN where
    not computed: smooth problems, methods other than O2NC and their compute-matched baselines). A compute-matched
    baseline's row is named ``matched:<method>`` (family "matched").
    """

    problem: str
    method: str
    family: str
    epsilon: float
    n: int
    seed: int
    status: str
    excess_risk: float
    test_loss: float
    test_accuracy: float
    seconds: float
    evaluations: int
    gradients: int
    epsilon_spent: float
    private: bool
    note: str
    train_loss: float = math.nan
    start_gap: float = math.nan
    certificate: float = math.nan
    start_certificate: float = math.nan
    radius: float = math.nan


def certificate(config: UtilityConfig, inst: Instance, x: torch.Tensor, radius: float, seed: int) -> float:
    """The Goldstein certificate at x of radius ``radius`` on the held-out set (public points: the ball's uniform
    samples and rim pairs from a public generator; no privacy cost)."""
    from dpnc.certify import goldstein_certificate

    gen = torch.Generator().manual_seed(1000 * config.seed + seed)
    try:
        return float(goldstein_certificate(inst.test.gradient, x.detach(), radius, samples=config.certificate_samples,
                                           rim=config.rim, generator=gen).bound)
    except ValueError:   # e.g. a non-finite gradient in the ball: no certificate (NaN), never a crash of the task
        return math.nan


def _measure(problem: str, method: str, family: str, epsilon: float, seed: int, inst: Instance, out: Outcome,
             seconds: float, config: UtilityConfig | None = None) -> UtilityRow:
    ref = float(inst.train.value(inst.reference))
    acc = float(inst.test.accuracy(out.x)) if inst.classification else math.nan
    loss = float(inst.train.value(out.x))
    cert = start = math.nan
    if config is not None and not inst.smooth and math.isfinite(out.radius):
        cert = certificate(config, inst, out.x, out.radius, seed)
        start = certificate(config, inst, inst.x0, out.radius, seed)
    return UtilityRow(problem, method, family, epsilon, inst.train.n, seed, "ok", loss - ref,
                      float(inst.test.value(out.x)), acc, seconds, out.evaluations, out.gradients, out.epsilon_spent,
                      out.private, out.note, loss, float(inst.train.value(inst.x0)) - ref, cert, start, out.radius)


class Utility(Experiment):
    """Each paper's method against DP-GD / DP-SGD (and Opacus on the network) on problems with public constants:
    excess risk, test accuracy, cost and ε spent, per problem, ε, n and seed."""

    name = "utility"
    title = "Utility on problems with public constants: each paper's method against DP-GD / DP-SGD"
    sizes = ("--quick (default): breast-cancer logistic and ℓ1 regression, ε = 4, n ∈ {40, 200}, 3 seeds, 6 "
             "methods and their compute-matched DP-SGD (about 1 min); --full: 6 problems × ε ∈ {1, 4} × n = 1000 "
             "(real data capped at its pool: cancer 455; digits at ε = 1 only) × 5 seeds × 13 methods "
             "and 8 compute-matched DP-SGD, ZTC/KLT zeroth order with m ≤ 128 directions (about an hour with 1 "
             "worker on a 2-core machine shared with other runs).")
    claims_heading = "Claims (95 % intervals over seeds; 'no signal' where an interval straddles)"
    Config, QUICK, FULL, Row = UtilityConfig, QUICK, FULL, UtilityRow

    def tasks(self, config: UtilityConfig) -> list[Task]:
        def runs(p, e):
            return p not in config.largest_only or not config.largest_only_epsilons or e in config.largest_only_epsilons
        return [(p, e, n, s) for p in config.problems for e in config.epsilons if runs(p, e)
                for n in config.sizes(p) for s in range(config.seeds)]

    def cost(self, config: UtilityConfig, task: Task) -> float:
        # seconds per example of the 12 methods, measured on this machine (relative only: the scheduling order)
        return task[2] * {"logistic-digits": 5, "relu-cancer": 8, "logistic-cancer": 2, "l1-regression": 0.5}.get(
            task[0], 1)

    def run_one(self, config: UtilityConfig, task: Task) -> tuple[UtilityRow, ...]:
        """The reference row and one row per method, on the same data (paired by seed)."""
        problem, epsilon, n, seed = task
        inst = instance(config, problem, n, seed)
        budget = Budget(epsilon, config.dp_delta)
        registry = methods(config)
        ref = Outcome(inst.reference, 0, 0, math.inf, False, "non-private optimum (ε = ∞)")
        rows = [_measure(problem, REFERENCE, "reference", epsilon, seed, inst, ref, 0.0)]
        for name in config.methods:
            method = registry[name]
            gen = torch.Generator().manual_seed(zlib.crc32(f"{config.seed}/{problem}/{n}/{seed}/{name}".encode()))
            tic = time.perf_counter()
            try:
                out = method.run(config, inst, budget, gen)
            except ValueError as error:   # a theorem with no admissible run at this n, d, ε
                out, why = None, f"n/a: {error}"
            else:
                why = "n/a: not applicable to this problem"
            seconds = time.perf_counter() - tic if method.timed else math.nan
            if out is None:
                nan = math.nan
                rows.append(UtilityRow(problem, name, method.family, epsilon, inst.train.n, seed, why[:200], nan,
                                       nan, nan, seconds, 0, 0, nan, False, ""))
                continue
            rows.append(_measure(problem, name, method.family, epsilon, seed, inst, out, seconds, config))
            if config.matched and method.family == "dpnc":
                try:
                    rows.append(self._matched(config, inst, budget, problem, epsilon, seed, name, out))
                except ValueError as error:
                    nan = math.nan
                    rows.append(UtilityRow(problem, MATCHED + name, "matched", epsilon, inst.train.n, seed,
                                           f"n/a: {error}"[:200], nan, nan, nan, nan, 0, 0, nan, False, ""))
        return tuple(rows)

    def _matched(self, config, inst, budget, problem, epsilon, seed, name, out: Outcome) -> UtilityRow:
        """The compute-matched DP-SGD of the paper method ``name`` (:func:`matched_dpsgd`), on the same data and
        seed; certified at the method's radius where the method is certified."""
        from dpnc.privacy import Accountant, NoiseSource

        cost = compute(out.evaluations, out.gradients)
        algorithm = matched_dpsgd(config, inst, budget, cost)
        public = f"{config.seed}/{problem}/{inst.train.n}/{seed}/m/{name}"   # the matched run's public seed
        gen = torch.Generator().manual_seed(zlib.crc32(public.encode()))
        tic = time.perf_counter()
        run = algorithm.run(inst.train, inst.x0, noise=NoiseSource(), accountant=Accountant("add/remove"),
                            generator=gen)
        seconds = time.perf_counter() - tic
        spent = run.report(budget.delta)
        matched = Outcome(run.output, run.stats.evaluations, run.stats.gradients, spent.epsilon, spent.private,
                          f"B = {algorithm.batch_size}, T = {algorithm.steps} for {cost:.3g} gradients",
                          out.radius)
        return _measure(problem, MATCHED + name, "matched", epsilon, seed, inst, matched, seconds, config)

    def claims(self, rows, config: UtilityConfig) -> list[Claim]:
        return report.claims(rows, config)

    def declare(self, config: UtilityConfig) -> list[Declared]:
        return report.declare(config)

    def describe(self, result: Result) -> str:
        return report.describe(result.config)

    def render(self, result: Result) -> str:
        return report.render(result.rows, result.config, methods(result.config))

    def plot(self, result: Result, out: Path) -> list[Path]:
        return report.plot(result.rows, result.config, out)


EXPERIMENT = Utility()
