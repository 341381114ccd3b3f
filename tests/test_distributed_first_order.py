"""First-order DP across processes: make_private's dp-sgd and dp-adamw on 2 gloo processes against one process.

One ``torch.multiprocessing.spawn`` of 2 CPU processes runs every case; the parent runs the same cases alone with
the same testing seed (so the same Poisson batches and the same noise). Each rank clips its own part of the batch,
one all_reduce sums the parts with rank 0's noise in it, and every rank applies the same released mean: the ranks
end bit for bit equal, equal to the one-process run up to the order of float64 additions (1e-12), and rank 0 alone
keeps the ledger, with the one-process run's entries. The release is the one-process release (same sum, same
noise, same ledger entry), so its privacy is that run's, which the neighbour tests and the audit check.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

import dpnc
from tests.spawned import run_ranks

N, STEPS, WORLD = 40, 5, 2
CASES = {  # name: (optimizer, per_example, expected batch size)
    "dp-sgd-layers": ("dp-sgd", "auto", 12),
    "dp-adamw-vmap": ("dp-adamw", "vmap", 12),
    "dp-sgd-loop": ("dp-sgd", "loop", 12),
    "dp-sgd-tiny-batches": ("dp-sgd", "auto", 1),  # empty batches and empty shards
}


def run(case: str) -> dict:
    optimizer, per_example, batch_size = CASES[case]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)).double()
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(N, 5, generator=g, dtype=torch.float64), torch.arange(N) % 3)
    opt, loader, accountant = dpnc.make_private(
        model,
        data=data,
        n=N,
        optimizer=optimizer,
        noise_multiplier=1.0,
        clip=0.5,
        steps=STEPS,
        batch_size=batch_size,
        lr=0.1,
        per_example=per_example,
        testing_seed=7,
    )
    released = []
    opt.register_step_hook(lambda _, info: released.append(info.released.clone()))
    rows = 0
    for xb, _ in loader:
        rows += len(xb)
        opt.step(lambda x, y: nn.functional.cross_entropy(model(x), y, reduction="none"))
    return {
        "params": [p.detach().clone() for p in model.parameters()],
        "released": released,
        "releases": accountant.releases,
        "entries": [(type(e.release).__name__, e.count) for e in accountant.ledger],
        "epsilon": accountant.epsilon(1e-5) if accountant.releases else None,
        "rows": rows,
    }


def every_case(rank: int, folder: str) -> dict:
    return {case: run(case) for case in CASES}


@pytest.fixture(scope="module")
def ranks():
    return run_ranks(every_case, WORLD)


@pytest.fixture(scope="module")
def single():
    return {case: run(case) for case in CASES}


@pytest.mark.parametrize("case", list(CASES))
def test_two_processes_equal_one_process_and_each_other(ranks, single, case):
    for r in range(WORLD):
        got, want = ranks[r][case], single[case]
        for p, q in zip(got["params"], want["params"]):
            torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)
        for a, b in zip(got["released"], want["released"], strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert all(
        torch.equal(p, q) for p, q in zip(ranks[0][case]["params"], ranks[1][case]["params"])
    )
    torch.manual_seed(0)
    start = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)).double().parameters()
    assert any(not torch.equal(p, p0) for p, p0 in zip(single[case]["params"], start))


@pytest.mark.parametrize("case", list(CASES))
def test_one_ledger_on_rank_0_and_each_rank_evaluates_its_part(ranks, single, case):
    zero, one = ranks[0][case], ranks[1][case]
    assert zero["releases"] == STEPS and one["releases"] == 0
    assert zero["entries"] == single[case]["entries"] and zero["epsilon"] == single[case]["epsilon"]
    assert zero["rows"] + one["rows"] == single[case]["rows"]  # the batches split, none repeated


def test_a_distributed_data_parallel_wrapper_is_refused_with_what_to_do():
    model = nn.Linear(3, 2)
    wrapped = nn.parallel.DistributedDataParallel.__new__(nn.parallel.DistributedDataParallel)
    nn.Module.__init__(wrapped)
    wrapped.module = model
    data = TensorDataset(torch.randn(8, 3), torch.arange(8) % 2)
    with pytest.raises(ValueError, match="model.module"):
        dpnc.make_private(
            wrapped,
            data=data,
            n=8,
            optimizer="dp-sgd",
            noise_multiplier=1.0,
            clip=1.0,
            steps=2,
            batch_size=4,
            lr=0.1,
        )
