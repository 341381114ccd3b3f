"""First-order DP across processes: make_private's dp-sgd and dp-adamw on 2 gloo processes against
one process.

One ``torch.multiprocessing.spawn`` of 2 CPU processes runs every case; the parent runs the same
cases alone with the same testing seed (so the same Poisson batches and the same noise). Each rank
clips its own part of the batch, one all_reduce sums the parts with rank 0's noise in it, and every
rank applies the same released mean: the ranks end bit for bit equal, equal to the one-process run
up to the order of float64 additions (1e-12), and rank 0 alone keeps the ledger, with the
one-process run's entries. The release is the one-process release (same sum, same noise, same ledger
entry), so its privacy is that run's, which the neighbour tests and the audit check. The neighbour
tests are below; the audit, on 2 ranks with the group path's broken variants, is
tests/audit/test_distributed_first_order.py.

Neighbours on 2 ranks: tests/suites/test_make_private_neighbours.py's user loop (a padding collate, a
skip-on-error ``try``) on a training set and on each of its neighbours, with the same testing
seeds. On each rank every public output is the same on both: the ledger, the optimizer's
``state_dict`` (its tensors aside), every step hook's public fields, every INFO log line, the form
of each loss ``step`` returns, the run's wiring record, the loader's length, the steps taken and
torch's global generator. Rank 1's ledger is empty; the parameters and the optimizer's tensors, bit
for bit the same on both ranks, are what the wrapped optimizer makes of the released values alone
(replayed from them in the parent). The value ``step`` returns, the mean loss of the rank's own
examples, is not a released value: one process returns it too, documented as a statistic of the
training data.
"""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

import dpnc
import tests.suites.test_make_private_neighbours as nb
from dpnc.privacy.accountant import Accountant
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


METHODS = ("dp-sgd", "dp-adamw")
NEIGHBOURS = (
    "long",
    "added",
    "outlier",
    "raises",
)  # tests/suites/test_make_private_neighbours.py's


def user_loop(method: str, neighbour: str | None) -> dict:
    """tests/suites/test_make_private_neighbours.py's user loop on this rank: its public outputs, and the
    released values with what follows from them (the parameters, the optimizer's tensors)."""
    model = nb.Bag(dropout=0.5).train()
    info, root = nb.InfoLines(), logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(info)
    try:
        # the user's own seeding: the run must not move the generator by the data
        torch.manual_seed(123)
        optimizer, loader, accountant = dpnc.make_private(
            model,
            data=nb.rows(neighbour),
            n=nb.N + 1,
            optimizer=method,
            target_epsilon=2.0,
            delta=nb.DELTA,
            steps=nb.STEPS,
            batch_size=nb.B,
            lr=0.05,
            clip=1.0,
            collate_fn=nb.pad,
            accountant="rdp",
            testing_seed=1,
        )
        hooks, released, returned = [], [], []
        optimizer.register_step_hook(
            lambda _, s: (
                hooks.append((s.step, s.seed, s.release.to_dict(), tuple(s.released.shape))),
                released.append(s.released.clone()),
            )
        )
        taken = 0
        for _ in loader:
            try:
                loss = optimizer.step(lambda batch: model(batch["x"], batch["ids"]))
                form = f"{type(loss).__name__} {tuple(loss.shape)} {loss.dtype}"
                returned += [form] if form not in returned else []
            except IndexError:  # the user's skip-on-error loop
                pass
            taken += 1
    finally:
        root.removeHandler(info)
        root.setLevel(level)
    state = optimizer.state_dict()
    public = {
        "ledger": accountant.to_json(),
        "state": repr(nb._untensored(state)),
        "hooks": hooks,
        "info": info.lines,
        "returned": returned,
        "wiring": optimizer.wiring.public(),
        "loader": len(loader),
        "taken": taken,
        "global generator": torch.random.get_rng_state(),
    }
    values = {
        "params": [p.detach().clone() for p in model.parameters()],
        "released": released,
        "state": state["state"],
    }
    return {"public": public, "values": values}


def every_case(rank: int, folder: str) -> dict:
    cases = {case: run(case) for case in CASES}
    cases["neighbours"] = {
        (method, neighbour): user_loop(method, neighbour)
        for method in METHODS
        for neighbour in (None, *NEIGHBOURS)
    }
    return cases


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


def replayed(method: str, released: list[torch.Tensor]) -> tuple[list[torch.Tensor], dict]:
    """The wrapped optimizer stepped on the released values alone, from the model's public
    initialisation: its parameters and its state."""
    with torch.random.fork_rng():
        model = nb.Bag(dropout=0.5)  # seeds torch's generator itself
    params = list(model.parameters())
    inner = (torch.optim.SGD if method == "dp-sgd" else torch.optim.AdamW)(params, lr=0.05)
    for g in released:  # as DPOptimizer applies a release: split over the parameters in their order
        offset = 0
        for p in params:
            p.grad = g[offset : offset + p.numel()].view_as(p).to(p.dtype).clone()
            offset += p.numel()
        inner.step()
        inner.zero_grad(set_to_none=True)
    return [p.detach() for p in params], inner.state_dict()["state"]


def same_tensors(a, b) -> bool:
    """Nested dicts/lists of tensors (and numbers) equal, bit for bit."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_tensors(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_tensors(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    return a == b


@pytest.mark.parametrize("neighbour", NEIGHBOURS)
@pytest.mark.parametrize("method", METHODS)
def test_neighbours_give_each_rank_equal_public_outputs_and_values_from_releases_alone(
    ranks, method, neighbour
):
    for r in range(WORLD):
        base = ranks[r]["neighbours"][method, None]["public"]
        other = ranks[r]["neighbours"][method, neighbour]["public"]
        assert nb.differences(base, other) == [], r
        assert base["taken"] == nb.STEPS and len(base["hooks"]) == nb.STEPS
    for world in (None, neighbour):
        zero, one = (ranks[r]["neighbours"][method, world] for r in range(WORLD))
        assert Accountant.from_json(zero["public"]["ledger"]).releases == nb.STEPS
        assert Accountant.from_json(one["public"]["ledger"]).releases == 0
        assert same_tensors(zero["values"], one["values"])  # releases, parameters, state
        params, state = replayed(method, zero["values"]["released"])
        assert same_tensors(zero["values"]["params"], params)
        assert same_tensors(zero["values"]["state"], state)
    # the data reach the released values (else the equalities above would hold trivially)
    assert not same_tensors(
        ranks[0]["neighbours"][method, None]["values"]["released"],
        ranks[0]["neighbours"][method, neighbour]["values"]["released"],
    )
