"""Contract cases of the DPZero family (Zhang et al. 2024): DPZero, DPGD-0th, DP-GD, the MeZO and
DP-SGD baselines, each on a tiny synthetic quadratic, full batch (the theorems' setting) and one
Poisson case (add/remove)."""

from __future__ import annotations

import dataclasses

import torch

from dpnc.algorithms.dpzero import DPGD, DPSGD, DPGD0th, DPZero, MeZO
from dpnc.privacy.budget import Budget
from dpnc.problems import LogisticRegression, unit_features
from dpnc.problems.quadratic import Quadratic
from dpnc.sampling import PoissonSampler
from tests.suites.contract import Constructors, ContractCase, keyword_builder, ones_start

N, D, T, C = 20, 4, 5, 1.0
BUDGET = Budget(1.0, 1e-5)


def _logistic():
    """A tiny problem with public L0 and L1 (the constructors read them; the quadratic declares no
    L0)."""
    gen = torch.Generator().manual_seed(0)
    a = unit_features(torch.randn(N, D, generator=gen, dtype=torch.float64))
    return LogisticRegression(a, (a[:, 0] > 0).long(), classes=2, l2=0.01)


def _made(**fields) -> Constructors:
    return Constructors(BUDGET, problem=_logistic, **fields)


def _problem():
    return Quadratic.synthetic(D, "sqrt", n=N, seed=0)


def _run(algorithm, problem, x0, noise, accountant, generator):
    return algorithm.run(problem, x0, noise=noise, accountant=accountant, generator=generator)


def _run_poisson(algorithm, problem, x0, noise, accountant, generator):
    return algorithm.run(
        problem,
        x0,
        noise=noise,
        accountant=accountant,
        generator=generator,
        sampler=PoissonSampler.for_testing(problem.n, 5, seed=3),
    )


COMMON_INVALID = [
    {"steps": 0},
    {"steps": 1.5},
    {"eta": -0.1},
    {"eta": float("nan")},
    {"paper": "yes"},
    {"direction": "uniform"},
]
NOISY_INVALID = COMMON_INVALID + [
    {"C": 0.0},
    {"C": float("inf")},
    {"noise_multiplier": -1.0},
    {"noise_multiplier": float("inf")},
]

DPZERO = DPZero(eta=0.1, lam=1e-3, C=C, noise_multiplier=1.0, steps=T)
DPGD0TH = DPGD0th(eta=0.1, lam=1e-3, C=C, noise_multiplier=1.0, steps=T, direction="sphere")
DPGD_ = DPGD(eta=0.1, C=C, noise_multiplier=1.0, steps=T)
MEZO = MeZO(eta=0.1, lam=1e-3, steps=T)

CASES = [
    ContractCase(
        name="dpzero",
        build=keyword_builder(DPZERO),
        invalid=NOISY_INVALID + [{"lam": 0.0}, {"discrete": 1}],
        problem=_problem,
        x0=ones_start,
        run=_run,
        releases=T,
        sensitivities=[2 * C / N],
        constructors=_made(theory={"r": 2.0}, practical={"steps": T}),
    ),
    ContractCase(
        name="dpzero-poisson",
        build=keyword_builder(dataclasses.replace(DPZERO, paper=True)),
        invalid=NOISY_INVALID,
        problem=_problem,
        x0=ones_start,
        run=_run_poisson,
        releases=T,
        sensitivities=[C / 5],
        relation="add/remove",
    ),
    ContractCase(
        name="dpgd-0th",
        build=keyword_builder(DPGD0TH),
        invalid=NOISY_INVALID + [{"lam": -1.0}],
        problem=_problem,
        x0=ones_start,
        run=_run,
        releases=T,
        sensitivities=[2 * C / N],
        constructors=_made(theory={"r": 2.0}, practical={"steps": T}),
    ),
    ContractCase(
        name="dp-gd",
        build=keyword_builder(DPGD_),
        invalid=NOISY_INVALID,
        problem=_problem,
        x0=ones_start,
        run=_run,
        releases=T,
        sensitivities=[2 * C / N],
        constructors=_made(theory={"steps": T}, practical={"steps": T}),
    ),
    ContractCase(
        name="mezo",
        build=keyword_builder(MEZO),
        invalid=COMMON_INVALID + [{"lam": 0.0}],
        problem=_problem,
        x0=ones_start,
        run=_run,
        releases=T,
        sensitivities=None,
        constructors=_made(theory={"steps": T}, practical={"steps": T}),
    ),
]

DPSGD_ = DPSGD(eta=0.1, C=C, noise_multiplier=1.0, steps=T, batch_size=5)


def _run_dpsgd(algorithm, problem, x0, noise, accountant, generator):
    return algorithm.run(
        problem,
        x0,
        noise=noise,
        accountant=accountant,
        generator=generator,
        sampler=PoissonSampler.for_testing(problem.n, 5, seed=3),
    )


CASES.append(
    ContractCase(
        name="dp-sgd",
        build=keyword_builder(DPSGD_),
        invalid=[
            {"steps": 0},
            {"eta": -0.1},
            {"C": 0.0},
            {"noise_multiplier": -1.0},
            {"batch_size": 0},
            {"project": "yes"},
        ],
        problem=_problem,
        x0=ones_start,
        run=_run_dpsgd,
        releases=T,
        sensitivities=[C / 5],
        relation="add/remove",
        constructors=_made(
            theory={"epochs": 1.0}, practical={"epochs": 1.0}, relation="add/remove"
        ),
    )
)
