"""Contract cases of the nonsmooth O2NC families: Zhang–Tran–Cutkosky (variance-reduced, naive) and
Kornowski–Liu–Talwar (zeroth-order, first-order, multi-pass), each on a tiny ℓ1 regression."""

from __future__ import annotations

from dpnc.algorithms.base import Setting
from dpnc.algorithms.klt import KornowskiLiuTalwar
from dpnc.algorithms.ztc import ZhangTranCutkosky, sensitivities
from dpnc.privacy.budget import ZCDP, Budget
from dpnc.problems.base import Constants
from dpnc.problems.nonsmooth import L1Regression
from tests.suites.contract import Constructors, ContractCase, keyword_builder, ones_start

D = 3


def _problem(n: int):
    return lambda: L1Regression.synthetic(n, D, seed=0)


def _run(algorithm, problem, x0, noise, accountant, generator):
    return algorithm.run(problem, x0, noise=noise, accountant=accountant, generator=generator)


COMMON_INVALID = [
    {"steps": 0},
    {"D": -1.0},
    {"eta": float("nan")},
    {"m": 0},
    {"B1": 1.5},
    {"oracle": "other"},
    {"period": 10**6},
]

# --- Zhang–Tran–Cutkosky --------------------------------------------------------------------------

ZTC_SETTING, ZTC_BUDGET = Setting(Constants(L0=1.0), 120, D, gap=1.0), ZCDP.from_rdp_rho(1.0)
ZTC_VR = ZhangTranCutkosky.from_theory(ZTC_SETTING, ZTC_BUDGET, smoothing=0.2)
ZTC_NAIVE = ZhangTranCutkosky.from_theory(ZTC_SETTING, ZTC_BUDGET, smoothing=0.2, oracle="naive")

# --- Kornowski–Liu–Talwar -------------------------------------------------------------------------

KLT = {
    oracle: KornowskiLiuTalwar.from_theory(
        Setting(Constants(L0=1.0), n, D, gap=1.0),
        Budget(2.0, 1e-6),
        smoothing=0.1,
        oracle=oracle,
        m=2,
        **options,
    )
    for oracle, n, options in (
        ("zeroth-order", 200, {}),
        ("first-order", 200, {}),
        ("multi-pass", 40, {"max_steps": 6}),
    )
}
KLT_INVALID = COMMON_INVALID + [
    {"smoothing": 0.0},
    {"sigma_anchor": -1.0},
    {"sigma_increment": float("nan")},
    {"schedule": "v3"},
    {"block": 10**6},
]


def _ztc_case(name, config):
    period, epochs = config.period, config.epochs
    if config.oracle == "variance-reduced":
        releases, delta = epochs, max(sensitivities(D, 1.0, period, config.B1, config.B2))
    else:
        releases, delta = config.steps, 2 * D * 1.0 / config.B1
    invalid = COMMON_INVALID + [{"smoothing": 0.0}, {"rho": float("inf")}, {"sigma": -1.0}]
    invalid += (
        [{"B1": 1, "B2": 4}] if config.oracle == "variance-reduced" else [{"B2": config.B1 + 1}]
    )
    made = (
        Constructors(
            Budget(2.0, 1e-6),
            gap=1.0,
            theory={"smoothing": 0.2, "oracle": config.oracle},
            practical={"travel": 1.0, "m": 2},
        )
        if config.oracle == "variance-reduced"
        else None
    )
    return ContractCase(
        name=name,
        build=keyword_builder(config),
        invalid=invalid,
        problem=_problem(config.samples),
        x0=ones_start,
        run=_run,
        releases=releases,
        sensitivities=[delta],
        constructors=made,
    )


def _klt_case(oracle, config):
    n = config.samples
    if oracle == "multi-pass":
        releases = config.steps
        entries = [
            config.s_anchor if (t - 1) % config.period == 0 else config.s_increment
            for t in range(1, config.steps + 1)
        ]
        ledger = [
            s for i, s in enumerate(entries) if i == 0 or s != entries[i - 1]
        ]  # equal neighbours merge
        invalid = KLT_INVALID + [{"B2": config.B1 + 1}]
    else:
        releases, ledger = config.anchors, [max(config.s_anchor, config.s_increment)]
        invalid = KLT_INVALID
    made = (
        Constructors(
            Budget(2.0, 1e-6),
            gap=1.0,
            theory={"smoothing": 0.1, "m": 2},
            practical={"travel": 1.0, "m": 2},
        )
        if oracle == "zeroth-order"
        else None
    )
    return ContractCase(
        name=f"klt-{oracle}",
        build=keyword_builder(config),
        invalid=invalid,
        problem=_problem(n),
        x0=ones_start,
        run=_run,
        releases=releases,
        sensitivities=ledger,
        constructors=made,
    )


CASES = [_ztc_case("zo-o2nc-variance-reduced", ZTC_VR), _ztc_case("zo-o2nc-naive", ZTC_NAIVE)]
CASES += [_klt_case(oracle, config) for oracle, config in KLT.items()]
