"""Data-parallel DPZero and MeZO (dpnc.distributed) on 2 gloo processes against the single-process
optimizers.

One ``torch.multiprocessing.spawn`` of 2 CPU processes runs every case (a few seconds); the parent
runs the same cases in one process with the same public seed, seeded batches and seeded noise, and
compares. Tolerances: the distributed sum of the clipped a_i is formed shard by shard in float64
(the single process sums in one go), so the released c_t may differ in its last bits: float64 models
agree to 1e-12, float32 ones to 1e-5 (rtol). The same holds for rank 0's noise, which the
distributed step adds to rank 0's part of the sum (c_t = Σ_r part_r/B + z, one float64 addition in
another order than (Σ part)/B + z). The cached-direction cases (``cache_directions=True``) draw the
very same directions and must equal the uncached distributed run bit for bit."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch
import torch.distributed as dist

from dpnc import distributed
from dpnc.distributed import LOCAL, Group, shutdown
from dpnc.privacy import Accountant, NoiseSource
from dpnc.sampling import FullBatch, PoissonSampler, ShuffleSampler
from dpnc.tier.zeroth_order import DPZeroOptimizer, MeZOOptimizer
from tests.spawned import run_ranks
from tests.toys import tanh_mlp

N, FEATURES, B, STEPS, WORLD = 96, 4, 24, 6, 2
C, LR, NOISE = 0.5, 0.05, 2.0
CASES = {  # name: (optimizer, sampler, relation, hidden width, dtype, expected batch size)
    "dpzero": ("dpzero", "poisson", "add/remove", 16, torch.float64, B),
    "dpzero_large": (
        "dpzero",
        "poisson",
        "add/remove",
        160,
        torch.float64,
        B,
    ),  # ~10x the parameters
    "dpzero_shuffle": ("dpzero", "shuffle", "replace-one", 16, torch.float64, B),
    "dpzero_shuffle_dropped": (
        "dpzero",
        "shuffle",
        "replace-one",
        16,
        torch.float64,
        B,
    ),  # empty slots
    "dpzero_float32": ("dpzero", "poisson", "add/remove", 16, torch.float32, B),
    "dpzero_tiny_batch": (
        "dpzero",
        "poisson",
        "add/remove",
        16,
        torch.float64,
        1,
    ),  # empty batches and shards
    "mezo": ("mezo", "poisson", "add/remove", 16, torch.float64, B),
    "mezo_tiny_batch": ("mezo", "poisson", "add/remove", 16, torch.float64, 1),
    "dpzero_resume": (
        "dpzero",
        "poisson",
        "add/remove",
        16,
        torch.float64,
        B,
    ),  # checkpoint half-way, resume
    "dpzero_cached": (
        "dpzero",
        "poisson",
        "add/remove",
        16,
        torch.float64,
        B,
    ),  # = "dpzero", direction cache on
    "dpzero_cached_float32": ("dpzero", "poisson", "add/remove", 16, torch.float32, B),
    "mezo_cached": ("mezo", "poisson", "add/remove", 16, torch.float64, B),
    "dpzero_full": (
        "dpzero",
        "full",
        "replace-one",
        16,
        torch.float64,
        N,
    ),  # nothing sampled, nothing sent
    "dpzero_discrete": (
        "dpzero",
        "full",
        "replace-one",
        16,
        torch.float64,
        N,
    ),  # the release rounds: not fused
}
OPTIONS = {
    "dpzero_cached": {"cache_directions": True},
    "dpzero_cached_float32": {"cache_directions": True},
    "mezo_cached": {"cache_directions": True},
    "dpzero_discrete": {"discrete": True},
}
ROWS = {"dpzero_shuffle_dropped": N - 30}  # records a domain rule dropped: slots with no example
UNCACHED = {
    "dpzero_cached": "dpzero",
    "dpzero_cached_float32": "dpzero_float32",
    "mezo_cached": "mezo",
}


def data(dtype):
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(N, FEATURES, generator=gen, dtype=torch.float64)
    y = torch.sin(X @ torch.tensor([1.0, -2.0, 0.5, 1.5], dtype=torch.float64)) + 0.5 * X[:, 0]
    return X.to(dtype), y.to(dtype)


def make_model(width, dtype, seed):
    return tanh_mlp(FEATURES, width, seed=seed, dtype=dtype).eval()


class NoBatches:
    """A rank other than 0 must never draw a batch: its sampler refuses (mixed into the sampler's
    class)."""

    def sample(self):
        raise AssertionError("only rank 0 draws batches")

    def slots(self):
        raise AssertionError("only rank 0 draws batches")


class NoPoisson(NoBatches, PoissonSampler):
    pass


class NoShuffle(NoBatches, ShuffleSampler):
    pass


class NoNoise(NoiseSource):
    """A rank other than 0 must never draw noise."""

    def gaussian(self, *args, **kwargs):
        raise AssertionError("only rank 0 draws noise")


def build(case, model, *, rank=0, group=None, accountant=None):
    kind, sampling, relation, _, _, batch = CASES[case]
    source = rank == 0
    seed = 1 if source else 12345  # rank 1's own seed is overridden by rank 0's
    if sampling == "poisson":
        sampler = PoissonSampler.for_testing(N, batch, seed=3) if source else NoPoisson(N, batch)
    elif sampling == "full":
        sampler = FullBatch(N)  # samples nothing: every rank takes the whole dataset itself
    else:
        rows = ROWS.get(case)
        sampler = (
            ShuffleSampler.for_testing(N, batch, seed=3, rows=rows)
            if source
            else NoShuffle(N, batch, rows=rows)
        )
    accountant = accountant if accountant is not None else Accountant(relation)
    rows = data(CASES[case][4])  # each rank's step fetches its part of the batch from these
    options = OPTIONS.get(case, {})
    if kind == "mezo":
        opt = MeZOOptimizer(
            model.parameters(),
            lr=LR,
            sampler=sampler,
            accountant=accountant,
            seed=seed,
            group=group,
            model=model,
            data=rows,
            **options,
        )
    else:
        noise = NoiseSource.for_testing(7) if source else NoNoise()
        opt = DPZeroOptimizer(
            model.parameters(),
            lr=LR,
            clip=C,
            noise_multiplier=NOISE,
            sampler=sampler,
            accountant=accountant,
            noise=noise,
            seed=seed,
            group=group,
            model=model,
            data=rows,
            **options,
        )
    return opt, accountant


def resume(case, model, opt, accountant, *, rank, group, checkpoint):
    """Rank 0 alone saves model, optimizer and ledger; every rank builds afresh and loads that one
    checkpoint."""
    if rank == 0:
        torch.save(
            {
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "ledger": accountant.to_json(),
            },
            checkpoint,
        )
    if group is not None:
        dist.barrier()
    state = torch.load(checkpoint)
    model = make_model(CASES[case][3], CASES[case][4], seed=7 + rank)  # fresh weights, overwritten
    model.load_state_dict(state["model"])
    ledger = Accountant.from_json(state["ledger"]) if rank == 0 else None
    opt, accountant = build(
        case, model, rank=rank, group=group, accountant=ledger
    )  # fresh sampler and noise
    opt.load_state_dict(state["optimizer"])
    return model, opt, accountant


def run(case, *, rank=0, group=None, checkpoint=None):
    """STEPS steps of ``case``; what the test compares (parameters, released values, ledger, bytes
    per step).

    ``*_resume`` cases save a checkpoint at ``checkpoint`` half-way and continue from it.
    """
    _, _, _, width, dtype, _ = CASES[case]
    model = make_model(
        width, dtype, seed=0 if rank == 0 else 99
    )  # rank 1 starts elsewhere: broadcast fixes it
    opt, accountant = build(case, model, rank=rank, group=group)
    released, sent, sizes = [], [], []
    record = lambda o, info: released.append(float(info.released))
    opt.register_step_hook(record)
    losses = []
    for t in range(STEPS):
        if case.endswith("_resume") and t == STEPS // 2:
            model, opt, accountant = resume(
                case, model, opt, accountant, rank=rank, group=group, checkpoint=checkpoint
            )
            opt.register_step_hook(record)
        before = dict(group.sent) if group is not None else {}
        seen = []

        def squared_error(xb, yb, model=model, seen=seen):
            seen.append(len(xb))
            return (model(xb).squeeze(-1) - yb) ** 2

        losses.append(float(opt.step(squared_error)))
        sizes.append(seen[-1] if seen else 0)  # the examples this process evaluated
        if group is not None:
            sent.append({k: v - before.get(k, 0) for k, v in group.sent.items()})
    mechanisms = [
        getattr(e.release, "mechanism", e.release) for e in accountant.ledger
    ]  # Sampled wraps one
    entries = [
        (
            type(e.release).__name__,
            getattr(m, "sensitivity", None),
            getattr(m, "sigma", None),
            e.count,
        )
        for e, m in zip(accountant.ledger, mechanisms)
    ]
    return {
        "params": [p.detach().clone() for p in model.parameters()],
        "released": released,
        "losses": losses,
        "releases": accountant.releases,
        "entries": entries,
        "sent": sent,
        "sizes": sizes,
        "d": sum(p.numel() for p in model.parameters()),
        "generated": getattr(opt.space, "generated", None),
    }


def interleaved(group, rank):
    """Batches of two samplers taken in an order no optimizer uses: a Poisson batch taken with no
    step after it, a shuffled one in between, a step (sum) carrying the shuffled sampler's next
    batch rather than the Poisson one's. What each rank took, and the collectives it took them
    with."""
    poisson = PoissonSampler.for_testing(N, 4, seed=5) if rank == 0 else NoPoisson(N, 4)
    shuffle = ShuffleSampler.for_testing(N, 4, seed=6) if rank == 0 else NoShuffle(N, 4)
    took, collectives = [], []

    def take(name, sampler):
        before = group.sent["collectives"]
        took.append((name, group.take_batch(sampler).tolist()))
        collectives.append(group.sent["collectives"] - before)

    take("poisson", poisson)  # first: broadcast (its size and the next one's, its indices)
    group.sum(1.0)  # carries the next Poisson batch and the size after it
    take("poisson", poisson)  # from that sum: nothing sent
    take(
        "shuffle", shuffle
    )  # first: broadcast; now the next sum carries the shuffled sampler's batch
    group.sum(1.0)
    take("poisson", poisson)  # not carried: broadcast again, the batch rank 0 had drawn ahead
    take("shuffle", shuffle)  # carried
    held = group._ahead[id(poisson)].following  # rank 0's batch whose size went ahead
    return {"took": took, "collectives": collectives, "drawn ahead": int(held is not None)}


def objects(group, rank):
    """The object collectives: rank 0's value shared (its compute runs there only), a refusal raised
    on every rank, and every rank's value of a different size gathered in rank order."""

    def only_on_rank_0(value):
        def compute():
            assert rank == 0, "only rank 0 computes a shared value"
            if isinstance(value, Exception):
                raise value
            return value

        return compute

    shared = group.share(only_on_rank_0({"step": 3, "lr": 2.5e-3, "name": "ε"}))
    try:
        group.share(only_on_rank_0(ValueError("refused on rank 0")))
        refused = None
    except ValueError as error:
        refused = str(error)
    gathered = group.gather_object(("rank", rank, list(range(100 * rank))))
    return {
        "shared": shared,
        "refused": refused,
        "gathered": gathered,
        "objects": group.sent["objects"],
    }


def every_case(rank: int, folder: str) -> dict:
    group = Group()
    checkpoint = os.path.join(folder, "checkpoint.pt")  # rank 0's, read by every rank
    results = {case: run(case, rank=rank, group=group, checkpoint=checkpoint) for case in CASES}
    results["objects"] = objects(group, rank)
    results["interleaved"] = interleaved(group, rank)
    return results


@pytest.fixture(scope="module")
def ranks():
    return run_ranks(every_case, WORLD)


@pytest.fixture(scope="module")
def single():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return {
                case: run(case, checkpoint=os.path.join(tmp, "checkpoint.pt")) for case in CASES
            }
    finally:
        torch.set_num_threads(threads)


def tolerance(case):
    return (
        dict(rtol=1e-5, atol=1e-6)
        if CASES[case][4] == torch.float32
        else dict(rtol=1e-10, atol=1e-12)
    )


@pytest.mark.parametrize("case", list(CASES))
def test_two_processes_equal_one_process(ranks, single, case):
    ref = single[case]
    for r in range(WORLD):
        got = ranks[r][case]
        for p, q in zip(got["params"], ref["params"]):
            torch.testing.assert_close(p, q, **tolerance(case))
        torch.testing.assert_close(
            torch.tensor(got["released"]), torch.tensor(ref["released"]), **tolerance(case)
        )
        torch.testing.assert_close(
            torch.tensor(got["losses"]),
            torch.tensor(ref["losses"]),
            **tolerance(case),
            equal_nan=True,
        )
    # The ranks apply the same broadcast scalar: bit for bit equal.
    assert all(
        torch.equal(p, q) for p, q in zip(ranks[0][case]["params"], ranks[1][case]["params"])
    )
    # and they moved (the comparison is not of two untouched models)
    start = make_model(CASES[case][3], CASES[case][4], seed=0).parameters()
    assert any(not torch.equal(p, p0) for p, p0 in zip(ranks[0][case]["params"], start))


@pytest.mark.parametrize("case", list(CASES))
def test_one_ledger_entry_per_step_on_rank_0_only(ranks, single, case):
    zero, one = ranks[0][case], ranks[1][case]
    assert zero["releases"] == STEPS and one["releases"] == 0
    assert zero["entries"] == single[case]["entries"]
    ((name, sensitivity, sigma, count),) = zero[
        "entries"
    ]  # equal releases merge into one entry of count STEPS
    assert count == STEPS
    if CASES[case][0] == "mezo":
        assert name == "NonPrivate"
        return
    if case == "dpzero_discrete":
        assert name == "DiscreteGaussian"
        return
    expected = (
        {"add/remove": 1, "replace-one": 2}[CASES[case][2]] * C / CASES[case][5]
    )  # Δ = (1 or 2)·C/B
    assert name == ("Gaussian" if CASES[case][1] == "full" else "Sampled")
    assert sensitivity == pytest.approx(expected) and sigma == pytest.approx(NOISE * expected)


def test_communication_per_step_is_independent_of_model_size(ranks, single):
    small, large = ranks[0]["dpzero"], ranks[0]["dpzero_large"]
    assert large["d"] >= 9 * small["d"]
    assert (
        small["sent"] == large["sent"]
    )  # same batches, same numbers: the model's size plays no part
    first, *rest = small["sent"]
    # The first step: the sizes of its batch and the next (2), the batch's indices, then the
    # all_reduce.
    assert first["collectives"] == 3 and 2 < first["broadcast"] <= 2 + 2 * B
    for step in small["sent"]:
        # ONE all_reduce of Σ clip(a)/B + z (rank 0's noise added to its part: the released c_t
        # itself), count, loss, clipped, non-finite, and the next batch's indices and the size of
        # the one after (Poisson)
        assert 6 <= step["all_reduce"] <= 6 + 2 * B
        assert step["bytes"] == 8 * (step["all_reduce"] + step["broadcast"])
    assert all(
        step["collectives"] == 1 and step["broadcast"] == 0 for step in rest
    )  # no broadcast of c_t either
    # what each all_reduce carried beyond the 5 sums and one size is the next step's batch (one
    # process's sizes)
    assert [step["all_reduce"] - 6 for step in small["sent"][:-1]] == single["dpzero"]["sizes"][1:]
    shards = zip(ranks[0]["dpzero"]["sizes"], ranks[1]["dpzero"]["sizes"])
    assert [a + b for a, b in shards] == single["dpzero"]["sizes"]
    for step in ranks[0]["mezo"]["sent"][
        1:
    ]:  # every rank forms c_t from the 4 sums and the next batch
        assert step["collectives"] == 1 and 5 <= step["all_reduce"] <= 5 + 2 * B
    assert (
        ranks[1]["dpzero"]["sent"] == small["sent"]
    )  # every rank takes part in the same collectives
    # The tiny-batch cases met an empty batch (its 0 indices carried, the next size): noise only.
    assert any(step["all_reduce"] == 6 for step in ranks[0]["dpzero_tiny_batch"]["sent"])


def test_empty_slots_of_fixed_size_batches_change_nothing_that_is_sent(ranks, single):
    # Records a domain rule dropped are empty slots (replace-one): the batches are smaller, but the
    # group sends the batch_size slots as for a full file (before: it switched to the variable-size
    # protocol, so its collectives told whether any record had been dropped).
    dropped, full = ranks[0]["dpzero_shuffle_dropped"], ranks[0]["dpzero_shuffle"]
    assert (
        dropped["sent"] == full["sent"]
        and ranks[1]["dpzero_shuffle_dropped"]["sent"] == full["sent"]
    )
    assert (
        min(single["dpzero_shuffle_dropped"]["sizes"]) < B == max(single["dpzero_shuffle"]["sizes"])
    )


def test_a_fixed_size_batch_sends_its_indices_in_the_all_reduce_and_a_full_batch_none(ranks):
    """A shuffled batch has a public size: after the first (broadcast), each step's one all_reduce
    carries the next batch's B indices beside its sums. A full batch is every example: no indices,
    the all_reduce alone."""
    first, *rest = ranks[0]["dpzero_shuffle"]["sent"]
    assert first == {
        "collectives": 2,
        "broadcast": B,
        "all_reduce": 5 + B,
        "bytes": 8 * (2 * B + 5),
    }
    for step in rest:
        assert step == {"collectives": 1, "broadcast": 0, "all_reduce": 5 + B, "bytes": 8 * (B + 5)}
    for step in ranks[0]["dpzero_full"]["sent"]:
        assert step == {"collectives": 1, "broadcast": 0, "all_reduce": 5, "bytes": 8 * 5}
    # The discrete Gaussian rounds the sum before its noise, so it is not added to a part: sums,
    # release, broadcast.
    for step in ranks[0]["dpzero_discrete"]["sent"]:
        assert step == {"collectives": 2, "broadcast": 1, "all_reduce": 5, "bytes": 8 * 6}
    # (It is full-batch only: release_sum refuses subsampled accounting, so it never carries a
    # batch.)


@pytest.mark.parametrize("case", list(UNCACHED))
def test_cached_directions_change_nothing_but_the_generator_passes(ranks, single, case):
    for r in range(WORLD):
        cached, plain = ranks[r][case], ranks[r][UNCACHED[case]]
        assert all(
            torch.equal(p, q) for p, q in zip(cached["params"], plain["params"])
        )  # bit for bit
        assert cached["released"] == plain["released"] and cached["sent"] == plain["sent"]
        assert (
            cached["generated"] == STEPS and plain["generated"] is None
        )  # one generator pass per step
    assert single[case]["generated"] == STEPS


def test_group_needs_an_initialised_process_group():
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="init_process_group"):
        Group()
    with pytest.raises(ValueError, match="group must be"):
        model = make_model(4, torch.float64, 0)
        DPZeroOptimizer(
            model.parameters(),
            lr=LR,
            clip=C,
            noise_multiplier=NOISE,
            model=model,
            data=data(torch.float64),
            sampler=PoissonSampler.for_testing(N, B, seed=3),
            accountant=Accountant(),
            group="world",
        )


def test_the_local_group_is_a_no_op():
    t = torch.tensor([1.5, 2.5])
    summed, count = LOCAL.sum(t, 3)
    assert summed is t and count == 3
    assert LOCAL.on_source(lambda: t, like=t) is t
    drawn = LOCAL.draw(ShuffleSampler.for_testing(N, B, seed=3))
    assert torch.equal(drawn, ShuffleSampler.for_testing(N, B, seed=3).sample())


def test_collective_buffers_are_kept_until_the_backend_lets_go_and_shutdown_waits_for_it(tmp_path):
    """A gloo worker thread that is the last to hold a collective's tensor frees its Python object,
    taking the GIL, which aborts a process whose interpreter is shutting down
    (dpnc.distributed._HANDED says how this was found). Group hands collectives copies of its own,
    kept from Python until gloo lets go; shutdown() waits for that."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'init'}", rank=0, world_size=1)
    try:
        group = Group()
        mine = torch.arange(5, dtype=torch.float64)
        assert group.all_reduce_(mine) is mine and torch.equal(
            mine, torch.arange(5, dtype=torch.float64)
        )
        group.broadcast_(torch.tensor([7]))
        handed = list(distributed._HANDED)
        assert handed and all(
            t is not mine for t in handed
        )  # gloo got a copy, not the caller's tensor
    finally:
        shutdown()
    assert distributed._HANDED == [] and not dist.is_initialized()


def test_object_collectives_share_rank_0s_value_and_gather_every_ranks(ranks):
    for r in range(WORLD):
        got = ranks[r]["objects"]
        assert got["shared"] == {"step": 3, "lr": 2.5e-3, "name": "ε"}
        assert got["refused"] == "refused on rank 0"  # raised alike on every rank
        assert got["gathered"] == [
            ("rank", q, list(range(100 * q))) for q in range(WORLD)
        ]  # in rank order
        assert got["objects"] == 3  # counted as calls, apart from a step's collectives


def test_each_rank_takes_rank_0s_batches_in_order_however_steps_and_samplers_interleave(ranks):
    """The next batch rides in a step's all_reduce, and a batch drawn ahead whose step never came is
    the next one taken all the same: each sampler's batches are its own stream's, in order, on every
    rank."""
    poisson, shuffle = (
        PoissonSampler.for_testing(N, 4, seed=5),
        ShuffleSampler.for_testing(N, 4, seed=6),
    )
    expected = [
        ("poisson", poisson.sample().tolist()),
        ("poisson", poisson.sample().tolist()),
        ("shuffle", shuffle.sample().tolist()),
    ]
    expected += [("poisson", poisson.sample().tolist()), ("shuffle", shuffle.sample().tolist())]
    for r in range(WORLD):
        assert ranks[r]["interleaved"]["took"] == expected
        assert ranks[r]["interleaved"]["drawn ahead"] == (
            1 if r == 0 else 0
        )  # the batch whose size was sent
        assert ranks[r]["interleaved"]["collectives"] == [
            1 + bool(expected[0][1]),
            0,
            1,
            1 + bool(expected[3][1]),
            0,
        ]
