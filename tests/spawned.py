"""Tests on several gloo processes: each rank runs ``work(rank, folder)`` in one process group
(``folder`` shared by the ranks), and the parent gets every rank's results back (a rank that fails
fails the test, not hangs it: the group times out)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from dpnc.distributed import shutdown


def _rank(rank: int, work: Callable[[int, str], dict], world: int, folder: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{os.path.join(folder, 'init')}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=120),
    )
    try:
        torch.save(work(rank, folder), os.path.join(folder, f"rank{rank}.pt"))
    finally:
        shutdown()


def run_ranks(work: Callable[[int, str], dict], world: int = 2) -> list[dict]:
    """``work(rank, folder)`` (a module-level function: it is pickled by name) on ``world`` spawned
    processes."""
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(_rank, args=(work, world, folder), nprocs=world, join=True)
        return [torch.load(os.path.join(folder, f"rank{r}.pt")) for r in range(world)]
