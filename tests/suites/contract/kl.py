"""Contract cases of Menart et al.'s KL family ("menart"): KL-Spider, the proximal point method,
adaptive GD with and without selection, each on a tiny objective with public constants.

Ledgers: KL-Spider charges its full schedule (Σ_k T_k releases; here κ-rounds of T_k = 1, one
checkpoint each, Δ = 2L0/n); the proximal point method T·(T_A − 1) gradient releases of Δ = 2L0/n;
adaptive GD one privacy-filter entry (a zCDP bound, no Δ), plus the selection's exponential
mechanism."""

from __future__ import annotations

import dataclasses

import torch

from dpnc.algorithms.base import Setting
from dpnc.algorithms.menart import (
    AdaptiveGD,
    AnalysisConstants,
    KLSpider,
    ProximalPoint,
    spider_schedule,
)
from dpnc.privacy.budget import ZCDP
from dpnc.problems.kl import PowerGrowth, SinePL
from tests.suites.contract import Constructors, ContractCase


def _run(algorithm, problem, x0, noise, accountant, generator):
    return algorithm.run(problem, x0, noise=noise, accountant=accountant, generator=generator)


def _builder(config):
    return lambda **override: dataclasses.replace(config, **override)


COMMON_INVALID = [
    {"rho": 0.0},
    {"rho": float("inf")},
    {"beta": 1.0},
    {"beta": 0.0},
    {"L0": -1.0},
    {"paper": "yes"},
    {"clip": 1},
]

# KL-Spider on ‖w‖³ (κ = 1.5), n = 3000, ρ = 0.01 (descent constant 4 instead of 64: 30 rounds, not
# 500)
SPIDER_N = 3000
SPIDER_PROBLEM = PowerGrowth(1.5, 2, n=SPIDER_N)
SPIDER = KLSpider.of(Setting.of(SPIDER_PROBLEM), rho=0.01, constants=AnalysisConstants(descent=4.0))
SPIDER_ROUNDS = 30  # K of its schedule, every T_k = 1 (checked in the case below)

# proximal point on ‖w‖^1.5 (κ = 3), d = 1, n = 50: T rounds of T_A − 1 = 3 inner queries
PROX_PROBLEM = PowerGrowth(3.0, 1, n=50)
PROX = ProximalPoint.from_theory(Setting.of(PROX_PROBLEM), ZCDP(0.1), max_inner_iters=4)

# adaptive GD on the sine PL function, n = 100
ADAPTIVE_PROBLEM = SinePL.generate(2, 100, seed=1, radius=2.0)


def _spider_case() -> ContractCase:
    c = SPIDER_PROBLEM.constants
    schedule = spider_schedule(
        n=SPIDER_N,
        d=2,
        rho=SPIDER.rho,
        beta=SPIDER.beta,
        gamma=c.gamma,
        kappa=c.kappa,
        L0=c.L0,
        L1=c.L1,
        F0=(c.gamma * c.L0) ** c.kappa,
        constants=SPIDER.constants,
    )
    assert schedule.K == SPIDER_ROUNDS and all(r.T == 1 for r in schedule.rounds)
    return ContractCase(
        name="kl-spider",
        build=_builder(SPIDER),
        invalid=COMMON_INVALID
        + [{"kappa": 2.5}, {"kappa": 0.5}, {"L1": 0.0}, {"F0": float("nan")}],
        problem=lambda: SPIDER_PROBLEM,
        x0=lambda f: torch.tensor([0.7, 0.7], dtype=torch.float64),
        run=_run,
        releases=SPIDER_ROUNDS,
        sensitivities=[2 * c.L0 / SPIDER_N],
        constructors=Constructors(ZCDP(0.01), gap=0.5),
    )


def _prox_case() -> ContractCase:
    c = PROX_PROBLEM.constants
    T = 17  # proximal_point_rounds at these constants
    return ContractCase(
        name="proximal-point",
        build=_builder(PROX),
        invalid=COMMON_INVALID
        + [{"kappa": 1.5}, {"max_inner_iters": 1}, {"weak_convexity": 0.0}, {"inner": "noisy-gd"}],
        problem=lambda: PROX_PROBLEM,
        x0=lambda f: torch.tensor([0.5], dtype=torch.float64),
        run=_run,
        releases=T * 3,
        sensitivities=[2 * c.L0 / PROX_PROBLEM.n],
        constructors=Constructors(
            ZCDP(0.1), theory={"max_inner_iters": 4}, practical={"max_inner_iters": 4}
        ),
    )


def _adaptive_case(select: bool) -> ContractCase:
    config = AdaptiveGD.from_theory(Setting.of(ADAPTIVE_PROBLEM), ZCDP(1.0), select=select)
    return ContractCase(
        name="adaptive-gd" + ("+select" if select else ""),
        build=_builder(config),
        invalid=COMMON_INVALID + [{"L1": float("inf")}, {"strict": None}, {"select": "yes"}],
        problem=lambda: ADAPTIVE_PROBLEM,
        x0=lambda f: torch.full((2,), 0.5, dtype=torch.float64),
        run=_run,
        releases=2 if select else 1,
        sensitivities=None,
        # with select, the constructors give the filter 8/9 of ρ and the selection the rest
        constructors=Constructors(
            ZCDP(0.5), theory={"select": select}, practical={"select": select}
        ),
    )


CASES = [_spider_case(), _prox_case(), _adaptive_case(False), _adaptive_case(True)]
