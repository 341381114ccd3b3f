"""dpnc.tier.wiring: σ calibrated to the budget (or a given σ checked against it), and one wiring of
optimizer and public record for every front door, refusing what it cannot build before building."""

import pytest
import torch
from torch import nn

from dpnc.batches import DataRows
from dpnc.privacy import Accountant
from dpnc.privacy.budget import Budget
from dpnc.privacy.calibrate import epsilon_for
from dpnc.sampling import PoissonSampler
from dpnc.tier.registry import OPTIMIZERS
from dpnc.tier.wiring import calibrate, wire
from dpnc.tier.zeroth_order import DPZeroOptimizer

N, B, STEPS, BUDGET = 100, 10, 5, Budget(1.0, 1e-5)
SHAPE = dict(n=N, batch_size=B, steps=STEPS, accountant="pld", relation="replace-one")


def test_a_calibrated_sigma_spends_the_budget_and_a_given_one_must_afford_it():
    sigma = calibrate(OPTIMIZERS["dpzero"], budget=BUDGET, noise_multiplier_given=None, **SHAPE)
    spent = epsilon_for(sigma, B / N, STEPS, BUDGET.delta, accountant="pld", relation="replace-one")
    assert spent == pytest.approx(BUDGET.epsilon, rel=1e-2) and spent <= BUDGET.epsilon + 1e-9
    given = calibrate(
        OPTIMIZERS["dpzero"], budget=BUDGET, noise_multiplier_given=2 * sigma, **SHAPE
    )
    assert given == 2 * sigma
    with pytest.raises(ValueError, match=r"epsilon=1 cannot afford steps=5 at noise_multiplier="):
        calibrate(OPTIMIZERS["dpzero"], budget=BUDGET, noise_multiplier_given=sigma / 2, **SHAPE)
    assert calibrate(OPTIMIZERS["mezo"], budget=None, noise_multiplier_given=None, **SHAPE) is None


def arguments(**more):
    X = torch.randn(N, 3, generator=torch.Generator().manual_seed(0))
    return dict(
        sampler=PoissonSampler(N, B),
        n=N,
        steps=STEPS,
        accountant=Accountant(),
        data=DataRows((X, X.sum(1))),
        **more,
    )


def test_wire_builds_the_entrys_optimizer_and_its_public_record():
    model = nn.Linear(3, 1).eval()
    optimizer, wiring = wire(
        model, "dpzero", budget=BUDGET, **arguments(options={"lr": 0.1, "clip": 1.0})
    )
    assert isinstance(optimizer, DPZeroOptimizer)
    assert optimizer.param_groups[0]["params"] == list(model.parameters())
    record = wiring.public()
    assert record["method"] == "dpzero" and record["private"] and record["world_size"] == 1
    assert (record["n"], record["batch_size"], record["steps"]) == (N, B, STEPS)
    assert record["sampling_rate"] == B / N and record["noise_multiplier"] > 0


def test_wire_refuses_an_unknown_method_and_options_of_another_kind():
    model = nn.Linear(3, 1).eval()
    with pytest.raises(ValueError, match=r"method must be one of \[.*'dpzero'.*\]; got 'sgd'"):
        wire(model, "sgd", **arguments())
    with pytest.raises(ValueError, match="options must be a MeZOOptions .* got int"):
        wire(model, "mezo", **arguments(options=3))
    with pytest.raises(ValueError, match="lr must be the step size"):
        wire(model, "mezo", **arguments(options={}))
