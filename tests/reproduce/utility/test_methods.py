"""utility's methods: the registry builds every method, DPZero takes its steps from its theorem,
the compute-matched DP-SGD spends the method's compute, Opacus runs on the network."""

import dataclasses
import math

import pytest
import torch

from dpnc.privacy import Budget
from dpnc_reproduce.utility import config as utility
from dpnc_reproduce.utility.config import QUICK, instance
from dpnc_reproduce.utility.experiment import EXPERIMENT
from dpnc_reproduce.utility.methods import (
    MATCHED,
    compute,
    matched_dpsgd,
    methods,
    opacus_runner,
)
from tests.reproduce.utility.rows import TINY


def test_compute_matched_baseline_spends_the_methods_compute():
    """matched:<m> is DP-SGD whose expected gradient evaluations T·B equal the method's compute
    (gradients + evaluations / 2), B from √n up to n so that T <= matched_max_steps."""
    config = dataclasses.replace(
        TINY, problems=("l1-regression",), methods=("dpzero", "klt:multi-pass")
    )
    rows = {r.method: r for r in EXPERIMENT.run_one(config, ("l1-regression", 4.0, 60, 0))}
    for m in ("dpzero", "klt:multi-pass"):
        cost = compute(rows[m].evaluations, rows[m].gradients)
        algorithm = matched_dpsgd(
            config, instance(config, "l1-regression", 60, 0), Budget(4.0, 1e-6), cost
        )
        assert (
            algorithm.steps * algorithm.batch_size == pytest.approx(cost, rel=0.02)
            or algorithm.steps == 1
        )
        assert algorithm.steps <= config.matched_max_steps or algorithm.batch_size == 60
        assert rows[MATCHED + m].status == "ok" and rows[MATCHED + m].epsilon_spent <= 4.0 * (
            1 + 1e-6
        )
    assert (
        rows["klt:multi-pass"].evaluations == 2 * config.klt_mp_steps * 60 * 10
    )  # multi-pass: T·n·2m, m = d = 10


def test_dpzero_takes_its_steps_from_its_theorem():
    inst = instance(QUICK, "logistic-cancer", 200, 0)
    d, budget = inst.train.dim, Budget(4.0, 1e-6)
    algorithm = methods(QUICK)["dpzero"].factory(inst, 200, d, budget)
    lg = math.log(math.e + 4.0 / 1e-6)
    assert algorithm.steps == max(int(200 * (d + 2) * 4.0 / (4 * math.sqrt(d * lg))), 1)


def test_registry_builds_every_method_on_logistic():
    config = QUICK
    inst = instance(config, "logistic-cancer", 30, 0)
    budget = Budget(2.0, 1e-6)
    registry = methods(config)
    assert set(registry) == set(utility.METHODS)
    for name, method in registry.items():
        if method.factory is not None:
            try:
                algorithm = method.factory(inst, 30, inst.train.dim, budget)
            except (
                ValueError
            ) as error:  # a schedule with no admissible run at n = 30: a row says "n/a"
                assert name == "kl-spider" and "n must be large enough" in str(error)
                continue
            assert algorithm is not None and hasattr(algorithm, "run"), name
    assert (
        registry["opacus"].run(config, inst, budget, torch.Generator()) is None
    )  # the network only


def test_opacus_on_the_network():
    pytest.importorskip("opacus")
    config = dataclasses.replace(QUICK, reference_steps=10, sgd_epochs=1.0, hidden=2)
    inst = instance(config, "relu-cancer", 40, 0)
    out = opacus_runner(config, inst, Budget(4.0, 1e-5))
    assert out.x.shape == (inst.train.dim,) and out.gradients > 0 and not out.private
    assert 0 < out.epsilon_spent < 8  # dpnc's PLD for Opacus's (σ, q, T), calibrated by Opacus to 4
