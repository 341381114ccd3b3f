"""The utility reproduction's methods: each paper's algorithm and the DP-GD / DP-SGD / Opacus
baselines as factories on an instance and a budget (:func:`methods`, the registry), the private
tuning, the compute-matched DP-SGD."""

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
from dpnc.algorithms import ALGORITHMS, O2NCAlgorithm, Setting
from dpnc.algorithms.dpzero import DPSGD, dpzero_from_theory, practical_step
from dpnc.privacy import (
    Accountant,
    Budget,
    NoiseSource,
    epsilon_for,
    mean_release,
    noise_multiplier,
)
from dpnc.problems import TwoLayerReLU, default_weak_convexity
from dpnc_reproduce.method_table import Entry, build, check_table
from dpnc_reproduce.utility.config import Instance, UtilityConfig


class Outcome(NamedTuple):
    """What a method returns: the output point, counts, the ε its accountant spent, whether private,
    a note."""

    x: torch.Tensor
    evaluations: int
    gradients: int
    epsilon_spent: float
    private: bool
    note: str = ""
    radius: float = (
        math.nan
    )  # the smoothing radius whose Goldstein stationarity the method targets (O2NC: 2·δ)


Factory = Callable[[Instance, int, int, Budget], object]


@dataclass(frozen=True)
class Method:
    """A registered method: ``factory(instance, n, d, budget)`` → an algorithm config (None: not
    applicable to this problem), run under an accountant of ``relation``; or a ``runner`` of its own
    (Opacus)."""

    name: str
    family: str  # "baseline" or "dpnc" (a paper's method)
    label: str
    factory: Factory | None = None
    relation: str = "replace-one"
    runner: Callable | None = None
    timed: bool = (
        True  # False: its wall time is not published (a private tuning's time reveals its secret K)
    )

    def run(
        self, config: UtilityConfig, inst: Instance, budget: Budget, gen: torch.Generator
    ) -> Outcome | None:
        if self.runner is not None:
            return self.runner(config, inst, budget)
        algorithm = self.factory(inst, inst.train.n, inst.train.dim, budget)
        if algorithm is None:
            return None
        accountant = Accountant(self.relation)
        run = algorithm.run(
            inst.train, inst.x0, noise=NoiseSource(), accountant=accountant, generator=gen
        )
        spent = run.report(budget.delta)
        radius = algorithm.stationarity_radius  # O2NC: 2·smoothing; None: no Goldstein target
        radius = math.nan if radius is None else float(radius)
        return Outcome(
            run.output,
            run.stats.evaluations,
            run.stats.gradients,
            spent.epsilon,
            spent.private,
            "",
            radius,
        )


def _calibrated(budget: Budget, steps: int, rate: float = 1.0) -> float:
    return noise_multiplier(budget.epsilon, budget.delta, rate, steps)


def _eta(inst: Instance, steps: int) -> float:
    """The DPZero family's practical step (:func:`~dpnc.algorithms.dpzero.practical_step`): 1/L1 on
    a smooth problem, else the subgradient step Φ/(L0²√T)."""
    return practical_step(inst.train.constants, steps=steps, gap=None if inst.smooth else inst.Phi)


def setting(inst: Instance) -> Setting:
    """The public setting of an instance: the training objective's constants, n, d, and the gap
    bound Φ."""
    return Setting.of(inst.train, gap=inst.Phi)


def dpgd(config: UtilityConfig):
    """DP-GD: full batch, C = L0, T = ``gd_steps``, η = :func:`_eta`, σ calibrated by the
    accountant."""

    def factory(inst, n, d, budget):
        T = config.gd_steps
        return DPSGD(
            eta=_eta(inst, T),
            C=inst.train.constants.L0,
            noise_multiplier=_calibrated(budget, T),
            steps=T,
            batch_size=n,
        )

    return factory


def dpsgd(config: UtilityConfig):
    """DP-SGD: :meth:`DPSGD.from_theory <dpnc.algorithms.dpzero.dpsgd.DPSGD.from_theory>` (B = √n,
    ``sgd_epochs``)."""

    def factory(inst, n, d, budget):
        base = DPSGD.from_theory(setting(inst), budget, epochs=config.sgd_epochs)
        return (
            base
            if inst.smooth
            else DPSGD.from_theory(
                setting(inst), budget, epochs=config.sgd_epochs, eta=_eta(inst, base.steps)
            )
        )

    return factory


def dpzero_theory_steps(n: int, d: int, epsilon: float, delta: float) -> int:
    """DPZero's T from its own theorem for this problem's n and d: Theorem 3's T = n(r + 2)ε / (4√(r
    log(e + ε/δ))) (:func:`~dpnc.algorithms.dpzero.theory.dpzero_from_theory`) with the effective
    rank r = d (no smaller r is declared for these problems; T does not depend on L or ℓ, passed as
    1)."""
    return dpzero_from_theory(
        n=n, d=d, r=d, L=1.0, ell=1.0, epsilon=epsilon, delta=delta
    ).T  # T alone: L, ℓ moot


class Context(NamedTuple):
    """What a paper method's option rules (:data:`PAPER_METHODS`) read: the config, the instance,
    the budget."""

    config: UtilityConfig
    inst: Instance
    budget: Budget


# --- the option rules of PAPER_METHODS: public (config, the instance's n, d and declared constants, the budget) --


def theorem_steps(p: Context) -> int:
    """DPZero's T from its own theorem for the problem's n and d (:func:`dpzero_theory_steps`; the
    smooth problems' ℓ and the nonsmooth ones' lack of it leave T unchanged)."""
    return dpzero_theory_steps(p.inst.train.n, p.inst.train.dim, p.budget.epsilon, p.budget.delta)


def gd_steps(p: Context) -> int:
    """DP-GD's number of steps (``gd_steps``): adaptive GD's norm queries are budgeted for as
    many."""
    return p.config.gd_steps


def zo_directions(p: Context) -> int:
    """m = min(d, ``zo_directions``): the zeroth-order O2NC oracles' directions, trimmed for run
    time."""
    return min(p.inst.train.dim, p.config.zo_directions)


def multi_pass_steps(p: Context) -> int:
    """KLT multi-pass T (``klt_mp_steps``; each step reads all n examples)."""
    return p.config.klt_mp_steps


def smoothing(p: Context) -> float:
    """The theorems' O2NC smoothing radius (ZTC's δ, KLT's α): ``alpha``."""
    return p.config.alpha


def max_directions(p: Context) -> int:
    """The cap on KLT's theorem directions m (``max_directions``; its variance-matching m can be
    huge)."""
    return p.config.max_directions


def convex_curvature(p: Context) -> float | None:
    """The proximal point method's L̃1 on a convex problem (no weak convexity declared, so any L̃1 >
    0 is valid): L1, a gradient step's curvature (public); None where the constants declare one."""
    c = p.inst.train.constants
    return None if c.weak_convexity else c.L1


def convex_curvature_theory(p: Context) -> float | None:
    """As :func:`convex_curvature`, for Theorem 2's settings: the default for a convex objective,
    :func:`~dpnc.problems.kl_objective.default_weak_convexity` (tiny here: λ/16, prox steps
    overshoot)."""
    c = p.inst.train.constants
    return None if c.weak_convexity else default_weak_convexity(c.gamma, c.kappa, c.L0)


_ZO, _FO, _MP = {"oracle": "zeroth-order"}, {"oracle": "first-order"}, {"oracle": "multi-pass"}
_KL = (
    "L1",
    "gamma",
)  # KL-Spider and the proximal point method need L1 and the KL constant γ; adaptive GD L1
_KLT, _ZTC, _MENART = "Kornowski–Liu–Talwar", "Zhang–Tran–Cutkosky", "Menart et al."

# Each paper method: registry name, constructor and options (:mod:`dpnc_reproduce.method_table`).
# ``practical``: the family's practical settings, untuned; ``:theory``: the theorem's
# (``from_theory``). Every one reads the public setting of the instance (:func:`setting`: gap = Φ,
# so Menart's F0 = Φ, not the default (γL0)^κ ≫ Φ; the O2NC practical rules' travel where no region
# is declared: 2Φ/L0).
PAPER_METHODS: dict[str, Entry] = {
    "dpzero": Entry(
        "dpzero", "practical", {"steps": theorem_steps}, "DPZero (full batch, practical settings)"
    ),
    "adaptive-gd": Entry(
        "adaptive-gd",
        "practical",
        {"horizon": gd_steps},
        f"{_MENART} adaptive noisy GD, practical settings",
        ("L1",),
    ),
    "kl-spider": Entry(
        "kl-spider", "practical", {}, f"{_MENART} KL-Spider, practical settings", _KL
    ),
    "proximal-point": Entry(
        "proximal-point",
        "practical",
        {"weak_convexity": convex_curvature},
        f"{_MENART} proximal point, practical settings",
        _KL,
    ),
    "zo-o2nc": Entry(
        "zo-o2nc", "practical", {"m": zo_directions}, f"{_ZTC} O2NC, practical settings"
    ),
    "klt": Entry(
        "klt",
        "practical",
        {**_ZO, "m": zo_directions},
        f"{_KLT} single-pass ZO, practical settings",
    ),
    "klt:first-order": Entry(
        "klt", "practical", _FO, f"{_KLT} single-pass first-order, practical settings"
    ),
    "klt:multi-pass": Entry(
        "klt",
        "practical",
        {**_MP, "m": zo_directions, "steps": multi_pass_steps},
        f"{_KLT} multi-pass ZO (Alg. 4, ERM), practical settings",
    ),
    "adaptive-gd:theory": Entry(
        "adaptive-gd", "from_theory", {}, f"{_MENART} adaptive noisy GD (Thm 4)", ("L1",)
    ),
    "kl-spider:theory": Entry("kl-spider", "from_theory", {}, f"{_MENART} KL-Spider (Thm 1)", _KL),
    "proximal-point:theory": Entry(
        "proximal-point",
        "from_theory",
        {"weak_convexity": convex_curvature_theory},
        f"{_MENART} proximal point (Thm 2)",
        _KL,
    ),
    "zo-o2nc:theory": Entry(
        "zo-o2nc", "from_theory", {"smoothing": smoothing}, f"{_ZTC} O2NC (Thm 4.9)"
    ),
    "klt:theory": Entry(
        "klt",
        "from_theory",
        {**_ZO, "smoothing": smoothing, "max_directions": max_directions},
        f"{_KLT} single-pass ZO (Thm 3.1)",
    ),
    "klt:first-order:theory": Entry(
        "klt",
        "from_theory",
        {**_FO, "smoothing": smoothing, "max_directions": max_directions},
        f"{_KLT} single-pass first-order (Thm 6.1)",
    ),
}
check_table(PAPER_METHODS)


def paper_factory(config: UtilityConfig, entry: Entry) -> Factory:
    """The factory of a paper method: its entry built on the instance's public setting (None where
    the problem's constants lack what the method needs)."""

    def factory(inst, n, d, budget):
        if not entry.applies(inst.train.constants):
            return None
        return build(entry, setting(inst), budget, Context(config, inst, budget))

    return factory


def opacus_runner(config: UtilityConfig, inst: Instance, budget: Budget) -> Outcome | None:
    """Opacus DP-SGD on the torch model of the network (relu-cancer only): the practitioner's
    baseline.

    nn.Linear(p, h) → ReLU → nn.Linear(h, 1), hinge loss, SGD with Opacus' Poisson sampling, B = √n,
    ``sgd_epochs`` epochs, C = L0, lr = :func:`_eta`, σ by ``make_private_with_epsilon``. Opacus
    draws its noise from torch's default generator (no secure mode here): a utility baseline. Its ε
    is dpnc's accountant's answer for the same (σ, q, T)."""
    if not isinstance(inst.train, TwoLayerReLU):
        return None
    try:
        from opacus import PrivacyEngine
    except ImportError:
        return None
    problem, n = inst.train, inst.train.n
    h, p = problem.hidden, problem.features
    model = torch.nn.Sequential(
        torch.nn.Linear(p, h), torch.nn.ReLU(), torch.nn.Linear(h, 1)
    ).double()
    W, c, v, b0 = problem.unpack(inst.x0)
    with torch.no_grad():
        (
            model[0].weight.copy_(W),
            model[0].bias.copy_(c),
            model[2].weight.copy_(v[None]),
            model[2].bias.copy_(b0[None]),
        )
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
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            target_epsilon=budget.epsilon,
            target_delta=budget.delta,
            epochs=epochs,
            max_grad_norm=problem.constants.L0,
            poisson_sampling=True,
        )
        gradients = steps = 0
        for _ in range(epochs):
            for zb, yb in loader:
                optimizer.zero_grad()
                # the batch's mean hinge loss; an empty Poisson batch still runs forward and
                # backward (0 per-sample gradients), so that Opacus releases its noise-only step
                # instead of failing on missing gradients
                torch.relu(1 - yb * model(zb).squeeze(-1)).sum().div(max(len(yb), 1)).backward()
                optimizer.step()
                gradients, steps = gradients + len(yb), steps + 1
    module = model._module
    x = torch.cat(
        [module[0].weight.flatten(), module[0].bias, module[2].weight.flatten(), module[2].bias]
    ).detach()
    spent = epsilon_for(
        optimizer.noise_multiplier, 1 / len(loader), steps, budget.delta, accountant="pld"
    )
    return Outcome(
        x,
        0,
        gradients,
        spent,
        False,
        "Opacus noise from torch's default generator (no secure mode)",
    )


TUNING_GRID = (0.25, 1.0, 4.0)  # step sizes tried: η × these
TUNING_ETA, TUNING_GAMMA = (
    1.0,
    0.25,
)  # random stopping: geometric K, E[K] = 1/γ = 4 (Papernot & Steinke)


def _tuning_cost(base, n: int, relation: str, multiplier: float, bound: float):
    """The public ledger of one candidate of :func:`tuned_runner`: T releases of ``base`` at
    ``multiplier``, then its private score."""
    cost = Accountant(relation)
    cost.record(
        mean_release(
            base.C, multiplier, sampler=base.sampler(n), accountant=cost, noise=NoiseSource()
        ),
        base.steps,
    )
    cost.record(tune.score_release(n=n, bound=bound, noise_multiplier=multiplier, accountant=cost))
    return cost


@functools.lru_cache(maxsize=256)
def _tuning_multiplier(
    base, n: int, relation: str, bound: float, epsilon: float, delta: float
) -> float:
    """The smallest σ/Δ (to 1 %) at which random stopping over |grid| candidates, each a run of
    ``base`` plus a score, is (ε, δ)-DP by the accountant (RDP; Papernot & Steinke, Theorem 2): the
    library's calibration (:func:`dpnc.tune.noise_multiplier`), searched from ``base``'s own
    multiplier (one run's, so the tuning's is larger)."""
    return tune.noise_multiplier(
        lambda m: _tuning_cost(base, n, relation, m, bound),
        candidates=len(TUNING_GRID),
        eta=TUNING_ETA,
        gamma=TUNING_GAMMA,
        epsilon=epsilon,
        delta=delta,
        start=base.noise_multiplier,
    )


def tuned(factory: Factory, relation: str):
    """A runner that tunes the step size of a DP-GD / DP-SGD ``factory``'s config privately: random
    stopping (:func:`dpnc.tune.random_stopping`) over η × :data:`TUNING_GRID`, each candidate scored
    by its noisy mean training loss (clipped to [0, Φ + 1]), every candidate's noise raised so that
    the whole tuning spends ≤ ε.

    Counts are the winning run's, and the harness publishes no wall time for it (the number of runs
    K is secret, and the time of the whole tuning grows with K)."""

    def runner(config: UtilityConfig, inst: Instance, budget: Budget) -> Outcome:
        n = inst.train.n
        base = factory(inst, n, inst.train.dim, budget)
        bound = inst.Phi + 1.0
        m = _tuning_multiplier(base, n, relation, bound, budget.epsilon, budget.delta)
        index = torch.arange(n)

        def candidate(scale):
            def run(accountant, noise):
                config_ = dataclasses.replace(base, eta=base.eta * scale, noise_multiplier=m)
                r = config_.run(
                    inst.train,
                    inst.x0,
                    noise=noise,
                    accountant=accountant,
                    generator=torch.Generator(),
                )
                score = tune.private_score(
                    inst.train.losses_at(r.output, index),
                    bound=bound,
                    noise_multiplier=m,
                    noise=noise,
                    accountant=accountant,
                )
                return r, score

            return run

        cost = _tuning_cost(base, n, relation, m, bound)
        result = tune.random_stopping(
            [candidate(g) for g in TUNING_GRID],
            costs=cost,
            eta=TUNING_ETA,
            gamma=TUNING_GAMMA,
            noise=NoiseSource(),
            accountant=Accountant(relation),
        )
        report = result.report(budget.delta)
        return Outcome(
            result.result.output,
            0,
            result.result.stats.gradients,
            report.epsilon,
            report.private,
            f"tuned: η × {TUNING_GRID[result.index]:g}",
        )

    return runner


def methods(config: UtilityConfig) -> dict[str, Method]:
    """Every method by name: the baselines (hand-set, privately tuned, Opacus), then the paper
    methods of :data:`PAPER_METHODS`, one comprehension over the table. The baselines use hand-set,
    documented defaults (:func:`dpgd`, :func:`dpsgd`), the paper methods their families'
    ``practical(...)`` settings, untuned (the ``:theory`` variants the theorems' ``from_theory``);
    wrapping a factory in :func:`tuned` is a one-line change here."""
    baselines = (
        Method("dp-gd", "baseline", "DP-GD (full batch, hand-set)", dpgd(config)),
        Method(
            "dp-sgd",
            "baseline",
            "DP-SGD (Poisson, B = √n, hand-set)",
            dpsgd(config),
            relation="add/remove",
        ),
        Method(
            "dp-gd-tuned",
            "baseline",
            "DP-GD, step size tuned privately (random stopping)",
            runner=tuned(dpgd(config), "replace-one"),
            timed=False,
        ),
        Method(
            "dp-sgd-tuned",
            "baseline",
            "DP-SGD, step size tuned privately (random stopping)",
            runner=tuned(dpsgd(config), "add/remove"),
            timed=False,
        ),
        Method(
            "opacus", "baseline", "Opacus DP-SGD (torch model; network only)", runner=opacus_runner
        ),
    )
    return {
        **{m.name: m for m in baselines},
        **{
            name: Method(name, "dpnc", entry.label, paper_factory(config, entry))
            for name, entry in PAPER_METHODS.items()
        },
    }


def targets_goldstein(name: str) -> bool:
    """Whether the paper method ``name`` targets Goldstein stationarity (an O2NC method: ZTC, KLT),
    read off its registry class."""
    return name in PAPER_METHODS and issubclass(
        ALGORITHMS[PAPER_METHODS[name].algorithm], O2NCAlgorithm
    )


REFERENCE = "non-private"
MATCHED = "matched:"  # a compute-matched baseline's row: "matched:<paper method>"
GRADIENT_COST = 2  # the compute conversion: one per-example gradient = 2 function evaluations


def compute(evaluations: int, gradients: int) -> float:
    """A run's compute in per-example gradient evaluations: gradients + evaluations /
    :data:`GRADIENT_COST` (one gradient = one forward and one backward pass ≈ the two forward passes
    of a two-point difference)."""
    return gradients + evaluations / GRADIENT_COST


def matched_dpsgd(config: UtilityConfig, inst: Instance, budget: Budget, cost: float):
    """The compute-matched baseline of a paper method that spent ``cost`` (:func:`compute`):
    hand-set DP-SGD (:meth:`DPSGD.from_theory <dpnc.algorithms.dpzero.dpsgd.DPSGD.from_theory>`,
    Poisson, C = L0) whose expected gradient evaluations T·B equal ``cost``: B = √n, raised (up to
    the full batch n) so that T ≤ ``matched_max_steps`` where the cost allows; epochs = cost/n; η =
    1/L1 (smooth) or :func:`_eta` at its T (nonsmooth)."""
    n = inst.train.n
    B = min(n, max(round(math.sqrt(n)), math.ceil(cost / config.matched_max_steps)))
    epochs = max(cost, 1.0) / n
    base = DPSGD.from_theory(setting(inst), budget, batch_size=B, epochs=epochs)
    return base if inst.smooth else dataclasses.replace(base, eta=_eta(inst, base.steps))
