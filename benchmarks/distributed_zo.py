"""Data-parallel DPZero (dpnc.distributed): throughput on 1 and 2 processes, and what a step communicates.

A zeroth-order step's only data-dependent quantity is one scalar per direction, so data-parallel ranks
exchange their partial sums, rank 0's noise added to its own (one all_reduce of 5 numbers that yields the released
scalar), whatever the model's size; a sampled batch also sends the indices rank 0 drew, but the FullBatch used here
samples nothing, so every rank takes it itself and the all_reduce is the step's one collective. A first-order DDP
step all-reduces every gradient entry. This script measures both:

* throughput (examples/s) of ``dpnc.tier.DPZeroOptimizer`` at the same global batch B on 1 process without a group
  (the plain optimizer: the baseline of every speed-up), 1 process with ``group=Group()`` (the distributed code
  path's overhead) and 2 processes (each evaluates B/2 examples), each with the directions regenerated three times
  a step (the default) and with ``cache_directions=True`` (generated once), gloo on CPU, 1 torch thread per
  process, launched by ``torch.multiprocessing.spawn``; median and min over ``--steps`` timed steps after 2 warm-up
  steps; the speed-ups over the plain optimizer (and over the one-process optimizer with cached directions)
  beside the forward passes' own, and their ratio;
* where the time goes: CPU seconds per step on each rank (the work split, readable on a shared machine), the
  forward passes alone (under no_grad, as the step runs them) on 1 and 2 processes (the machine's own ceiling
  for any split), the step with no forward pass (the direction work over all d entries, done in full on every
  rank, + the collectives), the collectives alone, and the pieces apart: one generator pass over u, one add of
  u, each collective;
* bytes per step: the elements of every tensor dpnc's :class:`~dpnc.distributed.Group` passed to a collective
  (counted by the group), beside those one ``DistributedDataParallel`` backward all-reduces on the same model
  (counted by a DDP communication hook on its gradient buckets: the number of gradient elements).

Model: a small ``nn.TransformerEncoder`` classifier (token embedding, ``--layers`` layers of width
``--d-model``, mean-pooled 2-class head), fp32, eval mode, a fixed dataset of B random token sequences of
length ``--seq`` (a FullBatch sampler: every step uses the same B examples, so no Poisson size jitter).
On a machine shared with other jobs the 2-process speed-up is bounded by the free cores: read the load average
printed with the table.

    python benchmarks/distributed_zo.py            # ~1.5 minutes on 2 cores (B = 256: ~4)
    python benchmarks/distributed_zo.py --quick    # smoke run
    python benchmarks/distributed_zo.py --out benchmarks/results   # also writes distributed_zo_b64_s32.{md,json}
    python benchmarks/distributed_zo.py --batch 256 --out benchmarks/results   # more compute per direction
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel

from dpnc.tier.direction_cache import CachedModuleSpace
from dpnc.distributed import Group, shutdown
from dpnc.tier.zeroth_order import DPZeroOptimizer
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.noise import NoiseSource
from dpnc.sampling import FullBatch


class Encoder(nn.Module):
    """Token embedding, a TransformerEncoder, mean pooling, a 2-class head."""

    def __init__(self, vocab: int, d_model: int, layers: int, heads: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, 2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens)).mean(1))


def setup(args):
    torch.manual_seed(0)   # benchmark-only: the same model and data on every rank
    model = Encoder(args.vocab, args.d_model, args.layers, args.heads).eval()
    tokens = torch.randint(args.vocab, (args.batch, args.seq))
    labels = torch.randint(2, (args.batch,))
    return model, tokens, labels


def timed(fn, steps: int, barrier=None) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds (this process's) per call of ``fn`` after 2 warm-up calls; ``barrier`` before each.

    The CPU time is what this rank computed, whatever else the machine ran: on a shared machine it shows how the
    work splits across ranks even when the wall time cannot (gloo's waits may add some CPU time of their own)."""
    return timed_together({"fn": fn}, steps, barrier)["fn"]


def timed_together(fns: dict, steps: int, barrier=None) -> dict[str, tuple[list[float], list[float]]]:
    """:func:`timed` of several functions in alternation: every round calls each once (``barrier`` before each
    call), so that a load passing over the machine weighs on each of them alike."""
    out: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in fns}
    for t in range(steps + 2):
        for name, fn in fns.items():
            if barrier is not None:
                barrier()
            start, cpu = time.perf_counter(), time.process_time()
            fn()
            if t >= 2:
                out[name][0].append(time.perf_counter() - start)
                out[name][1].append(time.process_time() - cpu)
    return out


def collectives(group: Group) -> None:
    """One DPZero step's collectives with nothing computed, as the step makes them for this FullBatch sampler: one
    all_reduce of the 5 sums, rank 0's noise already added to its part (no indices: every rank takes the full
    batch itself; no broadcast of the released c_t)."""
    group.all_reduce_(torch.zeros(5, dtype=torch.float64))


def make_optimizer(model, data, args, group=None, cache=False):
    # Seeded noise: a benchmark, not a private run (the ledger says "not private").
    return DPZeroOptimizer(model.parameters(), lr=1e-6, clip=1.0, noise_multiplier=1.0, sampler=FullBatch(args.batch),
                  accountant=Accountant(), noise=NoiseSource.for_testing(0), seed=1, group=group, model=model,
                  data=data, cache_directions=cache)


def parts(model, group: Group, batch: int, steps: int) -> dict:
    """The pieces of a step timed apart (this rank, s): one generator pass over all d entries (what the uncached
    step does three times and the cached one once), one add of u to the parameters (three a step), and each
    collective a step can make: the batch's size (Poisson only) and its indices (broadcast at a sampler's first
    step; later steps carry them in the all_reduce), the all_reduce of the 5 sums and the broadcast of one released
    scalar (the discrete Gaussian's)."""
    space = CachedModuleSpace([p.detach().clone().requires_grad_() for p in model.parameters()])
    seeds = iter(range(1, 10**6))
    u = list(space.directions(0))

    @torch.no_grad()
    def add():
        for p, v in zip(space.params, u):
            p.add_(v, alpha=1e-3)

    out = {"generate": timed(lambda: space.directions(next(seeds)), steps)[0], "add": timed(add, steps)[0]}
    barrier = dist.barrier
    out["size"] = timed(lambda: group.broadcast_(torch.tensor([batch], dtype=torch.int64)), steps, barrier)[0]
    out["indices"] = timed(lambda: group.broadcast_(torch.arange(batch)), steps, barrier)[0]
    out["all_reduce"] = timed(lambda: group.all_reduce_(torch.zeros(5, dtype=torch.float64)), steps, barrier)[0]
    out["scalar"] = timed(lambda: group.broadcast_(torch.zeros((), dtype=torch.float64)), steps, barrier)[0]
    return out


def worker(rank: int, world: int, init_file: str, out: str, args) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        model, tokens, labels = setup(args)
        d = sum(p.numel() for p in model.parameters())

        def closure(tokens, labels):
            return F.cross_entropy(model(tokens), labels, reduction="none")

        result = {"world": world, "d": d}
        group = Group()
        # One first-order DDP step of the same model: count what its gradient buckets all-reduce. First, so that the
        # run's last collectives are the group's, which dpnc.distributed.shutdown() waits for gloo to let go of.
        counted = {"elements": 0, "bytes": 0, "calls": 0}

        def counting_hook(state, bucket):
            buffer = bucket.buffer()
            state["elements"] += buffer.numel()
            state["bytes"] += buffer.numel() * buffer.element_size()
            state["calls"] += 1
            return default_hooks.allreduce_hook(None, bucket)

        ddp = DistributedDataParallel(model)
        ddp.register_comm_hook(counted, counting_hook)
        shard = torch.tensor_split(torch.arange(args.batch), world)[rank]
        F.cross_entropy(ddp(tokens[shard]), labels[shard]).backward()
        result["ddp"] = counted
        del ddp
        model.zero_grad(set_to_none=True)
        steps = args.steps + 2
        shard = group.shard(torch.arange(args.batch))
        mine = (tokens[shard], labels[shard])
        # Timed in alternation, one call of each a round: the data-parallel step with the directions regenerated
        # three times a step (the default) and cached, the two forward passes on this rank's shard alone and (on
        # 1 process) the plain optimizer without a group, the baseline, uncached and cached. What disturbs the
        # machine during a launch then weighs on every side of a ratio alike.
        # The forwards under no_grad, as the step runs them: with autograd on, nn.TransformerEncoder leaves its
        # fused inference path and records a graph, ~25 % slower and splitting 2.2x rather than 2.0x on 2 cores
        # (measured apart on one process; the launches in results/dz_27e9c83 and dz_c1cb1d5 timed that other work).
        together = {"forward": torch.no_grad()(lambda: (closure(*mine), closure(*mine)))}
        if world == 1:
            for name, cache in (("plain", False), ("plain_cached", True)):
                together[name] = lambda o=make_optimizer(model, (tokens, labels), args, cache=cache): o.step(closure)
        optimizers = {name: make_optimizer(model, (tokens, labels), args, group, cache)
                      for name, cache in (("group", False), ("cached", True))}
        for name, opt in optimizers.items():
            together[name] = lambda o=opt: o.step(closure)
        before = dict(group.sent)
        for name, (walls, cpus) in timed_together(together, args.steps, barrier=dist.barrier).items():
            result[name], result[f"{name}_cpu"] = walls, cpus
        for name in optimizers:   # what each optimizer's steps sent (both counted by the one group)
            result[f"{name}_cpu_by_rank"] = group.gather_object(statistics.median(result[f"{name}_cpu"]))
            result[f"{name}_sent"] = {k: (v - before.get(k, 0)) / (2 * steps) for k, v in group.sent.items()
                                      if k != "objects"}
        result["cpu_by_rank"], result["sent"] = result["group_cpu_by_rank"], result["group_sent"]
        # Where a step's time goes (Amdahl): the same step with a closure that runs no forward pass (the
        # direction work — u over all d entries for x + λu, x − λu and the update, on every rank — plus the
        # collectives), the two forward passes on this rank's shard alone, and the collectives alone.
        free = lambda tokens, labels: torch.zeros(len(tokens))   # noqa: E731
        for name, cache in (("no_forward", False), ("no_forward_cached", True)):
            bare = make_optimizer(model, (tokens, labels), args, group, cache)
            result[name] = timed(lambda o=bare: o.step(free), args.steps, barrier=dist.barrier)[0]
        result["collectives"] = timed(lambda: collectives(group), args.steps, barrier=dist.barrier)[0]
        result["parts"] = parts(model, group, args.batch, args.steps)
        if rank == 0:
            Path(out).write_text(json.dumps(result))
    finally:
        shutdown()   # waits for every rank and for gloo to let go of the group's tensors (else SIGABRT at exit)


def launch(world: int, args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        mp.spawn(worker, args=(world, os.path.join(tmp, "init"), out, args), nprocs=world, join=True)
        return json.loads(Path(out).read_text())


def merge(rounds: list[dict]) -> dict:
    """One result from several launches of the same world size: every timing list concatenated (a median over the
    whole run, so a transient load on the machine weighs on both sides of a ratio alike), each rank's CPU median the
    median of its rounds' medians, the counts (sent, DDP) those of the last round (they are the same every round)."""
    out = dict(rounds[-1])
    for key, value in rounds[-1].items():
        if isinstance(value, list) and key.endswith("cpu_by_rank"):
            out[key] = [statistics.median(r[key][i] for r in rounds) for i in range(len(value))]
        elif isinstance(value, list):
            out[key] = [t for r in rounds for t in r[key]]
        elif key == "parts":
            out[key] = {k: [t for r in rounds for t in r[key][k]] for k in value}
    return out


def speedups(runs: list[dict]) -> dict[str, float]:
    """The 2-process speed-ups over the plain 1-process optimizer (``uncached``, ``cached`` directions), that of the
    forward passes alone (``forwards``: the ceiling of any split) and the issue's target ratio (``ratio``: cached /
    forwards, >= 0.9 wanted), from the merged (1-process, 2-process) results, by medians."""
    med = statistics.median
    one, two = runs[0], runs[-1]
    base = med(one["plain"])
    out = {"uncached": base / med(two["group"]), "cached": base / med(two["cached"]),
           "forwards": med(one["forward"]) / med(two["forward"])}
    return out | {"ratio": out["cached"] / out["forwards"]}


def table(runs: list[dict], args) -> str:
    d = runs[0]["d"]
    med = statistics.median
    lines = [f"DPZero, global batch B = {args.batch}, seq {args.seq}, d = {d:,} parameters, gloo on CPU, "
             f"1 thread per process, {args.rounds} rounds of (1 process, 2 processes) launched in turn, {args.steps} "
             f"timed steps of each kind a round (medians over all rounds); load average {os.getloadavg()[0]:.2f} on "
             f"{os.cpu_count()} cores", "",
             "| run | processes | median s/step | min s/step | examples/s (median) | examples/s (min) | "
             "collectives/step | elements/step | bytes/step |", "|---|---|---|---|---|---|---|---|---|"]

    def row(name, world, times, sent):
        m, low = med(times), min(times)
        elements = sent.get("all_reduce", 0) + sent.get("broadcast", 0) if sent else 0
        lines.append(f"| {name} | {world} | {m:.4f} | {low:.4f} | {args.batch / m:.1f} | {args.batch / low:.1f} | "
                     f"{sent.get('collectives', 0):.0f} | {elements:.0f} | {sent.get('bytes', 0):.0f} |")

    row("dpnc.tier.DPZeroOptimizer (no group): the baseline", 1, runs[0]["plain"], {})
    row("DPZero(cache_directions=True) (no group)", 1, runs[0]["plain_cached"], {})
    for run in runs:
        row("DPZero(group=Group())", run["world"], run["group"], run["group_sent"])
        row("DPZero(group=Group(), cache_directions=True)", run["world"], run["cached"], run["cached_sent"])
    one, two = runs[0], runs[-1]
    base_cached = med(one["plain_cached"])
    gained = speedups(runs)
    speedup, speedup_cached, compute = gained["uncached"], gained["cached"], gained["forwards"]
    lines += ["", "CPU time per step (median, s): "
              f"1 process {med(one['plain_cpu']):.4f} (cached directions {med(one['plain_cached_cpu']):.4f}); "
              "2 processes, by rank: " + ", ".join(f"{c:.4f}" for c in two["group_cpu_by_rank"])
              + " (cached directions: " + ", ".join(f"{c:.4f}" for c in two["cached_cpu_by_rank"]) + ")."]
    lines += ["", "Where a step's time goes (medians, s; rank 0):", "",
              "| processes | step | cached step | 2 forward passes on the rank's shard | step without forward passes "
              "(direction work over all d + collectives) | the same, cached | collectives alone |",
              "|---|---|---|---|---|---|---|"]
    for run in runs:
        lines.append(f"| {run['world']} | {med(run['group']):.4f} | {med(run['cached']):.4f} | "
                     f"{med(run['forward']):.4f} | {med(run['no_forward']):.4f} | "
                     f"{med(run['no_forward_cached']):.4f} | {med(run['collectives']):.5f} |")
    p = {k: 1e3 * med(v) for k, v in two["parts"].items()}
    lines += ["", f"The pieces on 2 processes (rank 0, medians, ms): one generator pass over all d entries "
              f"{p['generate']:.2f} (uncached: 3 a step, cached: 1); one add of u to the parameters {p['add']:.2f} "
              f"(3 a step); collectives: batch size {p['size']:.3f} (Poisson only), batch indices "
              f"{p['indices']:.3f} (sampled batches: not this FullBatch), the all_reduce of the 5 sums "
              f"{p['all_reduce']:.3f}, a broadcast of the released scalar {p['scalar']:.3f} (the discrete "
              "Gaussian's only: rank 0's noise rides in the all_reduce)."]
    lines += ["", f"The forward passes alone, no direction work and no collectives (the batch's on 1 process against "
              f"each rank's half on 2 at once): {compute:.2f}x, the most any data-parallel split of them gains on "
              "this machine now (below 2x when the cores are shared or contend for memory)."]
    lines += ["", "| 2 processes against | speed-up, uncached directions | speed-up, cached directions | "
              "forward passes alone | ratio (cached / forwards alone; target >= 0.9) |", "|---|---|---|---|---|",
              f"| the plain 1-process optimizer | {speedup:.2f}x | {speedup_cached:.2f}x | {compute:.2f}x | "
              f"{speedup_cached / compute:.2f} (uncached: {speedup / compute:.2f}) |",
              f"| the 1-process optimizer with cached directions | — | {base_cached / med(two['cached']):.2f}x | "
              f"{compute:.2f}x | {base_cached / med(two['cached']) / compute:.2f} |"]
    ddp = two["ddp"]
    sent = two["cached_sent"]
    indices = sent.get("broadcast", 0)
    zo = sent["all_reduce"] + indices
    lines += ["", "| per step, 2 processes | elements | bytes |", "|---|---|---|",
              f"| DPZero ({sent['collectives']:.0f} collective(s): all_reduce {sent['all_reduce']:.0f}"
              + (f"; broadcast {indices:.0f}, the batch indices" if indices else "") + f") | {zo:.0f} | "
              f"{sent['bytes']:.0f} |",
              f"| DDP first-order backward (gradient buckets, {ddp['calls']} all_reduce) | {ddp['elements']:,} | "
              f"{ddp['bytes']:,} |",
              f"| ratio DDP / DPZero | {ddp['elements'] / zo:,.0f} | {ddp['bytes'] / sent['bytes']:,.0f} |"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10, help="timed steps of each kind per round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="launches of 1 and 2 processes in turn; the medians are over all of them")
    parser.add_argument("--quick", action="store_true", help="tiny model, 3 steps")
    parser.add_argument("--out", type=Path, default=None, help="also write distributed_zo.{md,json} here")
    args = parser.parse_args()
    if args.quick:
        args.batch, args.seq, args.vocab, args.d_model, args.layers, args.steps, args.rounds = 8, 8, 100, 16, 1, 3, 1
    launched: dict[int, list[dict]] = {1: [], 2: []}
    for _ in range(args.rounds):   # in turn, so that a passing load on the machine hits both sides of a ratio
        for world in (1, 2):
            launched[world].append(launch(world, args))
    runs = [merge(launched[world]) for world in (1, 2)]
    text = table(runs, args)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        stem = "distributed_zo_quick" if args.quick else f"distributed_zo_b{args.batch}_s{args.seq}"
        (args.out / f"{stem}.md").write_text(text + "\n")
        (args.out / f"{stem}.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                           "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
