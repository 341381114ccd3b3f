"""Cost of one zeroth-order step (DPZero, MeZO) relative to inference, on CPU.

A zeroth-order step replaces backpropagation by two forward passes at x ± λu plus a few passes over
the parameters that regenerate the direction u from its seed (MeZO's seed trick). The claim to
check is that a DPZero step costs about two forward passes plus those parameter passes, that its
per-example clipping and one scalar of noise add nothing measurable, and that its peak memory is
that of inference. Everything is reported as a ratio to a baseline measured in the same run, so the
numbers transfer between machines better than the absolute milliseconds do.

Time (one process, ``torch.set_num_threads``): the modes below run round-robin, one step of each
per round, so drift of the machine hits every mode alike; 2 warm-up rounds, then median/min/max
over ``--steps`` rounds. Ratios are given of medians and of mins (on a shared machine the min is the
least-disturbed sample; another busy process slows the 2-thread matmuls far more than the z passes).
  (a) inference: one no_grad forward producing per-example losses (the unit, "x inference");
  (b) two such forwards (the floor of any two-point ZO step);
  (c) reference MeZO written out as the MeZO paper's code does it: 4 passes regenerating z per
      tensor from a seeded generator (+λ, eval, −2λ, eval, +λ, then −lr·g);
  (d) ``dpnc.tier.MeZOOptimizer`` and (e) ``dpnc.tier.DPZeroOptimizer`` (PoissonSampler + add/remove Accountant);
  (f) one z pass alone: randn for every parameter tensor + add_ (the unit of (c)−(b));
  (g) (e) with the model-state check off (its guard a no-op): (e)/(g) is the check's cost (target ≤ 1.05).
dpnc's ModuleSpace restores and updates in one pass, so (d)/(e) make 3 z passes, (c) makes 4.

Peak memory: each of inference, DPZero, MeZO and AdamW (fwd + bwd + step) runs in its own
subprocess (same imports, same model) and reports its peak RSS (``VmHWM``); ratio to inference. RSS right
after building the model is reported too. Differences under ~50 MB are allocator noise.

Model: ``nn.TransformerEncoder`` the size of all-MiniLM-L6-v2 (6 layers, d 384, 12 heads, ff 1536,
30522x384 token embedding, ~22.7M params), a 2-class head on the mean-pooled output, fp32, eval mode,
batch 64 x seq 64 random token ids, cross-entropy with reduction="none". The same fixed batch is used
every step (a FullBatch sampler over it; no Poisson size jitter in the timing). Note: in
eval mode under no_grad, PyTorch uses its fused encoder "fast path" for (a)-(e) alike; AdamW does not.

    python benchmarks/zo_step.py            # full run, a few minutes on 2 cores
    python benchmarks/zo_step.py --quick    # small model, smoke run in seconds
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from dpnc.batches import DataRows
from dpnc.tier.zeroth_order import DPZeroOptimizer, MeZOOptimizer
from dpnc.privacy.accountant import Accountant
from dpnc.sampling import FullBatch

LAM, LR, CLIP, SIGMA = 1e-3, 1e-6, 1.0, 1.0
QUICK = dict(layers=2, d_model=64, heads=4, ff=128, vocab=1000, batch=8, seq=16, steps=3)


class Classifier(nn.Module):
    def __init__(self, vocab, d_model, heads, ff, layers):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, 2)

    def forward(self, ids):
        return self.head(self.encoder(self.embed(ids)).mean(1))


def setup(args):
    torch.manual_seed(0)
    model = Classifier(args.vocab, args.d_model, args.heads, args.ff, args.layers).eval()
    ids = torch.randint(0, args.vocab, (args.batch, args.seq))
    y = torch.randint(0, 2, (args.batch,))
    return model, lambda: F.cross_entropy(model(ids), y, reduction="none")


class NoStateCheck:
    """The state guard of dpnc.tier.model_state as a no-op: what a DPZero step costs without the check."""

    poisoned = None

    def mark(self): pass
    def check(self): pass
    def hold(self, inputs): pass
    def refuse_if_poisoned(self, what): pass
    def watching(self): return contextlib.nullcontext()


def make_steps(model, losses, batch):
    """name -> a function doing one step of that mode."""
    params = [p for p in model.parameters() if p.requires_grad]

    def perturb(scale, seed):  # MeZO's seed trick: z regenerated tensor by tensor
        gen = torch.Generator().manual_seed(seed)
        for p in params:
            p.data.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype), alpha=scale)

    seeds = iter(range(10**9))

    @torch.no_grad()
    def reference_mezo():
        s = next(seeds)
        perturb(+LAM, s)
        l1 = losses()
        perturb(-2 * LAM, s)
        l2 = losses()
        perturb(+LAM, s)
        g = ((l1.mean() - l2.mean()) / (2 * LAM)).item()
        perturb(-LR * g, s)

    @torch.no_grad()
    def forwards(k):
        for _ in range(k):
            losses()

    sampler = FullBatch(batch)  # the fixed batch is the whole (benchmark) dataset, which losses() evaluates
    rows = DataRows(fetch=lambda index: ())   # so the optimizer hands losses() nothing: no copy in the timing
    mezo = MeZOOptimizer(model.parameters(), lr=LR, smoothing=LAM, sampler=sampler, seed=1, model=model, data=rows)
    dpzero = DPZeroOptimizer(model.parameters(), lr=LR, clip=CLIP, smoothing=LAM, noise_multiplier=SIGMA,
                    sampler=sampler, accountant=Accountant("add/remove"), seed=2, model=model, data=rows)
    unchecked = DPZeroOptimizer(model.parameters(), lr=LR, clip=CLIP, smoothing=LAM, noise_multiplier=SIGMA,
                       sampler=sampler, accountant=Accountant("add/remove"), seed=3, model=model, data=rows)
    unchecked.guard = NoStateCheck()
    return {
        "inference": lambda: forwards(1),
        "2 forwards": lambda: forwards(2),
        "reference MeZO": reference_mezo,
        "dpnc MeZO": lambda: mezo.step(lambda *whole_dataset: losses()),
        "dpnc DPZero": lambda: dpzero.step(lambda *whole_dataset: losses()),
        "dpnc DPZero (no state check)": lambda: unchecked.step(lambda *whole_dataset: losses()),
        "1 z pass": torch.no_grad()(lambda: perturb(0.0, next(seeds))),
    }


def time_all(args):
    model, losses = setup(args)
    steps = make_steps(model, losses, args.batch)
    times = {name: [] for name in steps}
    for r in range(2 + args.steps):
        for name, step in steps.items():
            t0 = time.perf_counter()
            step()
            dt = (time.perf_counter() - t0) * 1e3
            if r >= 2:
                times[name].append(dt)
    return {n: dict(median=statistics.median(t), min=min(t), max=max(t)) for n, t in times.items()}


def rss_mb(field="VmRSS"):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def memory_child(args):
    """Run one mode a few steps in this (fresh) process; print its peak RSS as JSON."""
    model, losses = setup(args)
    after_build = rss_mb()
    if args.memory == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

        def step():
            opt.zero_grad(set_to_none=True)
            losses().mean().backward()
            opt.step()
    else:
        step = make_steps(model, losses, args.batch)[{"inference": "inference", "mezo": "dpnc MeZO",
                                          "dpzero": "dpnc DPZero"}[args.memory]]
    for _ in range(2 + args.mem_steps):
        step()
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the parent, so a child of a big parent
    # reported at least the parent's peak (results before 2026-11-23 were affected; see results/zo_step.md).
    peak = rss_mb("VmHWM")
    print(json.dumps({"peak_mb": peak, "after_build_mb": after_build}))


def measure_memory(args, forwarded):
    out = {}
    for mode in ("inference", "dpzero", "mezo", "adamw"):
        proc = subprocess.run([sys.executable, __file__, "--memory", mode, *forwarded],
                              capture_output=True, text=True, check=True)
        out[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def table(args, t, mem, n_params, load):
    base, two, ref, mezo = (t[k]["median"] for k in ("inference", "2 forwards", "reference MeZO",
                                                     "dpnc MeZO"))
    lines = [f"Model: TransformerEncoder {args.layers}x(d={args.d_model}, heads={args.heads}, ff={args.ff}), "
             f"vocab {args.vocab}, {n_params / 1e6:.1f}M params, fp32; batch {args.batch} x seq {args.seq}; "
             f"{torch.get_num_threads()} threads; {args.steps} timed rounds after 2 warm-up; "
             f"torch {torch.__version__}; 1-min load average {load[0]:.2f} before, {load[1]:.2f} after "
             f"({os.cpu_count()} CPUs).",
             "", "| step | ms median | min | max | x inference (medians) | x inference (mins) |",
             "|---|---|---|---|---|---|"]
    for name, r in t.items():
        lines.append(f"| {name} | {r['median']:.1f} | {r['min']:.1f} | {r['max']:.1f} | {r['median'] / base:.2f} "
                     f"| {r['min'] / t['inference']['min']:.2f} |")
    dp, unchecked = t["dpnc DPZero"]["median"], t["dpnc DPZero (no state check)"]["median"]
    lines += ["", "| ratio (medians) | value |", "|---|---|",
              f"| DPZero / 2 forwards | {dp / two:.2f} |", f"| DPZero / dpnc MeZO | {dp / mezo:.2f} |",
              f"| DPZero / reference MeZO | {dp / ref:.2f} |",
              f"| DPZero / DPZero without the state check | {dp / unchecked:.3f} |", f"| dpnc MeZO / reference MeZO | {mezo / ref:.2f} |",
              f"| (reference MeZO - 2 forwards) / 1 z pass | {(ref - two) / t['1 z pass']['median']:.2f} |"]
    if mem:
        inf = mem["inference"]["peak_mb"]
        lines += ["", "| process (one per row) | peak RSS MB | x inference | RSS after model build MB |",
                  "|---|---|---|---|"]
        for mode, m in mem.items():
            lines.append(f"| {mode} | {m['peak_mb']:.0f} | {m['peak_mb'] / inf:.2f} | {m['after_build_mb']:.0f} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=384)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--ff", type=int, default=1536)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--steps", type=int, default=10, help="timed rounds after 2 warm-up rounds")
    p.add_argument("--mem-steps", type=int, default=3, help="steps after 2 warm-up in each memory process")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="small model and few steps (smoke run)")
    p.add_argument("--no-memory", action="store_true", help="skip the memory subprocesses")
    p.add_argument("--out", type=Path, help="markdown output (default benchmarks/results/zo_step[_quick].md)")
    p.add_argument("--memory", choices=("inference", "dpzero", "mezo", "adamw"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    if args.out is None:
        args.out = Path(__file__).parent / "results" / ("zo_step_quick.md" if args.quick else "zo_step.md")
    torch.set_num_threads(args.threads)
    if args.memory:
        return memory_child(args)

    forwarded = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in
                 ("layers", "d_model", "heads", "ff", "vocab", "batch", "seq", "mem_steps", "threads")]
    load = [os.getloadavg()[0]]
    t = time_all(args)
    mem = None if args.no_memory else measure_memory(args, forwarded)
    load.append(os.getloadavg()[0])
    n_params = sum(p.numel() for p in setup(args)[0].parameters())
    md = table(args, t, mem, n_params, load)
    print(md, end="")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(md)
    config = {k: getattr(args, k) for k in ("layers", "d_model", "heads", "ff", "vocab", "batch", "seq",
                                            "steps", "mem_steps", "threads")}
    result = {"config": config, "params": n_params, "torch": torch.__version__, "loadavg": load,
              "time_ms": t, "memory": mem}
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
