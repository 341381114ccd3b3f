"""The tiny utility grid and constructed rows (baselines and a method per seed) the tests and the
snapshots share."""

import dataclasses
import math

from dpnc_reproduce.utility import report
from dpnc_reproduce.utility import run as exp
from dpnc_reproduce.utility.config import UtilityConfig

METHODS = ("dp-gd", "dp-sgd", "dp-sgd-tuned", "dpzero", "adaptive-gd", "klt:first-order")
TINY = UtilityConfig(
    problems=("logistic-cancer", "l1-regression"),
    methods=METHODS,
    epsilons=(4.0,),
    samples=(20, 60),
    seeds=2,
    gd_steps=10,
    sgd_epochs=1.0,
    klt_mp_steps=5,
    reference_steps=20,
    n_test=100,
    certificate_samples=8,
    rim=1,
)


# --- claims on constructed rows -------------------------------------------------------------------


def row(
    method, family, seed, excess, problem="p", epsilon=1.0, n=100, spent=1.0, private=True, gap=10.0
):
    return exp.UtilityRow(
        problem,
        method,
        family,
        epsilon,
        n,
        seed,
        "ok",
        excess,
        0.0,
        math.nan,
        0.1,
        0,
        10,
        spent,
        private,
        "",
        excess,
        gap,
    )


CONFIG = UtilityConfig(
    problems=("least-squares",),
    methods=("dp-gd", "dp-sgd", "dpzero"),
    epsilons=(1.0,),
    samples=(100,),
    seeds=10,
)


def cell(rows, yardstick="hand-set"):
    rows = [dataclasses.replace(r, problem="least-squares") for r in rows]
    (c,) = report.cells(rows, CONFIG, "dpzero", yardstick)
    return c


def jitter(seed):
    return 0.01 * (seed % 3 - 1)


def baselines(level=1.0):
    return [
        row(b, "baseline", s, level * (1 + jitter(s)))
        for s in range(10)
        for b in ("dp-gd", "dp-sgd")
    ]
