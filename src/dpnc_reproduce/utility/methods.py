"""The utility reproduction's methods: each paper's algorithm and the DP-GD / DP-SGD / Opacus baselines as
factories on an instance and a budget (:func:`methods`, the registry), the private tuning, the compute-matched
DP-SGD.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch

from dpnc import tune
from dpnc.algorithms.base import Setting
from dpnc.algorithms.dpzero import practical_step
from dpnc.algorithms.dpzero.dpsgd import DPSGD
from dpnc.algorithms.dpzero.theory import dpzero_from_theory
from dpnc.algorithms.registry import ALGORITHMS
from dpnc.privacy import Accountant, NoiseSource
from dpnc.privacy.budget import Budget
from dpnc.privacy.calibrate import epsilon_for, noise_multiplier
from dpnc.privacy.release import mean_release
from dpnc.problems import TwoLayerReLU
from dpnc.problems.kl_objective import default_weak_convexity
from dpnc_reproduce.utility.config import Instance, UtilityConfig


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
        algorithm = self.factory(inst, inst.train.n, inst.train.dim, budget)
        if algorithm is None:
            return None
        accountant = Accountant(self.relation)
        run = algorithm.run(inst.train, inst.x0, noise=NoiseSource(), accountant=accountant, generator=gen)
        spent = run.report(budget.delta)
        radius = algorithm.stationarity_radius   # O2NC: 2·smoothing; None: no Goldstein target
        radius = math.nan if radius is None else float(radius)
        return Outcome(run.output, run.stats.evaluations, run.stats.gradients, spent.epsilon, spent.private, "",
                       radius)


def _calibrated(budget: Budget, steps: int, rate: float = 1.0) -> float:
    return noise_multiplier(budget.epsilon, budget.delta, rate, steps)


def _eta(inst: Instance, steps: int) -> float:
    """The DPZero family's practical step (:func:`~dpnc.algorithms.dpzero.practical_step`): 1/L1 on a smooth
    problem, else the subgradient step Φ/(L0²√T)."""
    return practical_step(inst.train.constants, steps=steps, gap=None if inst.smooth else inst.Phi)


def setting(inst: Instance) -> Setting:
    """The public setting of an instance: the training objective's constants, n, d, and the gap bound Φ."""
    return Setting.of(inst.train, gap=inst.Phi)


def dpgd(config: UtilityConfig):
    """DP-GD: full batch, C = L0, T = ``gd_steps``, η = :func:`_eta`, σ calibrated by the accountant."""
    def factory(inst, n, d, budget):
        T = config.gd_steps
        return DPSGD(eta=_eta(inst, T), C=inst.train.constants.L0, noise_multiplier=_calibrated(budget, T),
                     steps=T, batch_size=n)
    return factory


def dpsgd(config: UtilityConfig):
    """DP-SGD: :meth:`DPSGD.from_theory <dpnc.algorithms.dpzero.dpsgd.DPSGD.from_theory>` (B = √n, ``sgd_epochs``)."""
    def factory(inst, n, d, budget):
        base = DPSGD.from_theory(setting(inst), budget, epochs=config.sgd_epochs)
        return base if inst.smooth else DPSGD.from_theory(setting(inst), budget, epochs=config.sgd_epochs,
                                                          eta=_eta(inst, base.steps))
    return factory


def dpzero_theory_steps(n: int, d: int, epsilon: float, delta: float) -> int:
    """DPZero's T from its own theorem for this problem's n and d: Theorem 3's T = n(r + 2)ε / (4√(r log(e + ε/δ)))
    (:func:`~dpnc.algorithms.dpzero.theory.dpzero_from_theory`) with the effective rank r = d (no smaller r is
    declared for these problems; T does not depend on L or ℓ, passed as 1)."""
    return dpzero_from_theory(n=n, d=d, r=d, L=1.0, ell=1.0, epsilon=epsilon, delta=delta).T   # T alone: L, ℓ moot


def dpzero(config: UtilityConfig):
    """DPZero (full batch): T from its own theorem for the problem's n and d (:func:`dpzero_theory_steps`; the
    smooth problems' ℓ and the nonsmooth ones' lack of it leave T unchanged), the other parameters its family's
    practical settings at that T (:meth:`DPZero.practical <dpnc.algorithms.dpzero.DPZero.practical>`: λ = 10⁻³,
    C = L0, η = :func:`_eta` / (d + 2); σ calibrated by the accountant for the T releases)."""
    def factory(inst, n, d, budget):
        T = dpzero_theory_steps(n, d, budget.epsilon, budget.delta)
        public = Setting.of(inst.train, gap=None if inst.smooth else inst.Phi)
        return ALGORITHMS["dpzero"].practical(public, budget, steps=T)
    return factory


def _kl(config: UtilityConfig, kind: str, practical: bool = True):
    """Menart et al.: their ``practical(...)`` settings (default) or Theorems 4, 1, 2's (``from_theory``), from the
    objective's public constants, ρ of the budget and F0 = Φ ≥ F(x0) − F* (public). Needs L1 (and γ, κ for
    KL-Spider and the proximal point method): smooth problems only."""
    name = {"adaptive": "adaptive-gd", "spider": "kl-spider", "proximal": "proximal-point"}[kind]

    def factory(inst, n, d, budget):
        public = setting(inst)   # gap = Φ: F0 = Φ, not the default (γL0)^κ ≫ Φ
        c = public.constants
        if c.L1 is None or (kind != "adaptive" and c.gamma is None):
            return None
        if kind == "adaptive":   # practical: norm queries budgeted for DP-GD's number of steps
            return (ALGORITHMS[name].practical(public, budget, horizon=config.gd_steps) if practical else
                    ALGORITHMS[name].from_theory(public, budget))
        if kind == "proximal" and not c.weak_convexity:
            # convex, so any L̃1 > 0 is valid: L1 for the practical settings (a gradient step's curvature; public),
            # the spec's default for a convex objective for the theorem's (tiny here: λ/16, prox steps overshoot)
            public = dataclasses.replace(public, constants=dataclasses.replace(
                c, weak_convexity=c.L1 if practical else default_weak_convexity(c.gamma, c.kappa, c.L0)))
        return (ALGORITHMS[name].practical if practical else ALGORITHMS[name].from_theory)(public, budget)
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
        if practical:
            return ALGORITHMS["zo-o2nc"].practical(setting(inst), budget, m=min(d, config.zo_directions),
                                                   **_travel(inst))
        return ALGORITHMS["zo-o2nc"].from_theory(setting(inst), budget, smoothing=config.alpha)
    return factory


def klt(config: UtilityConfig, oracle: str, practical: bool = True):
    """Kornowski–Liu–Talwar, zeroth-order single pass (Theorem 3.1), first-order (6.1) or multi-pass (4.1, ERM):
    ``practical`` settings (default; zeroth order and multi-pass with m = min(d, ``zo_directions``) directions,
    multi-pass T = ``klt_mp_steps``), or the theorem's with α = ``alpha`` and m ≤ ``max_directions``."""
    def factory(inst, n, d, budget):
        if practical:
            zo = {"m": min(d, config.zo_directions)} if oracle != "first-order" else {}
            if oracle == "multi-pass":
                zo["steps"] = config.klt_mp_steps
            return ALGORITHMS["klt"].practical(setting(inst), budget, oracle=oracle, **zo, **_travel(inst))
        common = dict(smoothing=config.alpha, oracle=oracle)
        algorithm = ALGORITHMS["klt"].from_theory(setting(inst), budget, **common)
        if algorithm.m > config.max_directions:
            algorithm = ALGORITHMS["klt"].from_theory(setting(inst), budget, **common, m=config.max_directions)
        return algorithm
    return factory


def opacus_runner(config: UtilityConfig, inst: Instance, budget: Budget) -> Outcome | None:
    """Opacus DP-SGD on the torch model of the network (relu-cancer only): the practitioner's baseline.

    nn.Linear(p, h) → ReLU → nn.Linear(h, 1), hinge loss, SGD with Opacus' Poisson sampling, B = √n,
    ``sgd_epochs`` epochs, C = L0, lr = :func:`_eta`, σ by ``make_private_with_epsilon``. Opacus draws its noise
    from torch's default generator (no secure mode here): a utility baseline. Its ε is dpnc's accountant's answer
    for the same (σ, q, T)."""
    if not isinstance(inst.train, TwoLayerReLU):
        return None
    try:
        from opacus import PrivacyEngine
    except ImportError:
        return None
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
    cost = Accountant(relation)
    cost.record(mean_release(base.C, multiplier, sampler=base.sampler(n), accountant=cost, noise=NoiseSource()),
                base.steps)
    cost.record(tune.score_release(n=n, bound=bound, noise_multiplier=multiplier, accountant=cost))
    return cost


@functools.lru_cache(maxsize=256)
def _tuning_multiplier(base, n: int, relation: str, bound: float, epsilon: float, delta: float) -> float:
    """The smallest σ/Δ (to 1 %) at which random stopping over |grid| candidates, each a run of ``base`` plus a
    score, is (ε, δ)-DP by the accountant (RDP; Papernot & Steinke, Theorem 2): the library's calibration
    (:func:`dpnc.tune.noise_multiplier`), searched from ``base``'s own multiplier (one run's, so the tuning's is
    larger)."""
    return tune.noise_multiplier(lambda m: _tuning_cost(base, n, relation, m, bound), candidates=len(TUNING_GRID),
                                 eta=TUNING_ETA, gamma=TUNING_GAMMA, epsilon=epsilon, delta=delta,
                                 start=base.noise_multiplier)


def tuned(factory: Factory, relation: str):
    """A runner that tunes the step size of a DP-GD / DP-SGD ``factory``'s config privately: random stopping
    (:func:`dpnc.tune.random_stopping`) over η × :data:`TUNING_GRID`, each candidate scored by its noisy mean
    training loss (clipped to [0, Φ + 1]), every candidate's noise raised so that the whole tuning spends ≤ ε.

    Counts are the winning run's, and the harness publishes no wall time for it (the number of runs K is secret,
    and the time of the whole tuning grows with K)."""
    def runner(config: UtilityConfig, inst: Instance, budget: Budget) -> Outcome:
        n = inst.train.n
        base = factory(inst, n, inst.train.dim, budget)
        bound = inst.Phi + 1.0
        m = _tuning_multiplier(base, n, relation, bound, budget.epsilon, budget.delta)
        index = torch.arange(n)

        def candidate(scale):
            def run(accountant, noise):
                config_ = dataclasses.replace(base, eta=base.eta * scale, noise_multiplier=m)
                r = config_.run(inst.train, inst.x0, noise=noise, accountant=accountant,
                                generator=torch.Generator())
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
    n = inst.train.n
    B = min(n, max(round(math.sqrt(n)), math.ceil(cost / config.matched_max_steps)))
    epochs = max(cost, 1.0) / n
    base = DPSGD.from_theory(setting(inst), budget, batch_size=B, epochs=epochs)
    return base if inst.smooth else dataclasses.replace(base, eta=_eta(inst, base.steps))
