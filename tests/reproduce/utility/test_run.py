"""utility's runs: every applicable method runs on the new problems, the full grid trims, and a
private tuning publishes no wall time."""

import dataclasses
import math

from dpnc_reproduce.utility.config import FULL
from dpnc_reproduce.utility.experiment import EXPERIMENT
from tests.reproduce.utility.rows import TINY


def test_new_problems_run_every_applicable_method():
    config = dataclasses.replace(
        TINY,
        problems=("least-squares", "max-affine"),
        methods=("dp-gd", "dp-gd-tuned", "adaptive-gd", "proximal-point", "zo-o2nc", "klt"),
    )
    for problem in config.problems:
        rows = EXPERIMENT.run_one(config, (problem, 4.0, 60, 0))
        for r in rows[1:]:
            if problem == "max-affine" and r.method in (
                "adaptive-gd",
                "proximal-point",
            ):  # need L1: not applicable
                assert r.status.startswith("n/a"), r
            else:
                assert (
                    r.status == "ok"
                    and r.epsilon_spent <= 4.0 * (1 + 1e-6)
                    and r.excess_risk >= -1e-9
                ), r


def test_full_grid_trims():
    full = FULL
    assert full.seeds >= 5 and set(full.epsilons) == {1.0, 4.0}
    assert full.sizes("least-squares") == [1000] and full.sizes("logistic-cancer") == [455]
    assert full.sizes("logistic-digits") == [1000] and full.largest_only_epsilons == (1.0,)
    tasks = EXPERIMENT.tasks(full)
    assert {e for p, e, n, s in tasks if p == "logistic-digits"} == {1.0} and len(tasks) == (
        5 * 2 + 1
    ) * 5


def test_a_private_tuning_publishes_no_wall_time():
    """The time of a random-stopping tuning grows with its secret number of runs K: the tuned
    baselines' rows carry no time (NaN), every other method's does."""
    config = dataclasses.replace(
        TINY, problems=("l1-regression",), methods=("dp-gd", "dp-gd-tuned")
    )
    rows = {r.method: r for r in EXPERIMENT.run_one(config, ("l1-regression", 4.0, 60, 0))}
    assert rows["dp-gd-tuned"].status == "ok" and math.isnan(rows["dp-gd-tuned"].seconds)
    assert rows["dp-gd"].seconds > 0
