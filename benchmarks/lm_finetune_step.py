"""Cost of one parameter-efficient DPZero step of the real all-MiniLM-L6-v2 classifier on SST-2, on CPU.

Why: a zeroth-order step of full fine-tuning costs two forward passes of the whole model (``lm_step.py``
measures that). Training only a part of the model (``dpnc.lm.trainable``) changes what a step must compute:
with a frozen prefix cached once per example (``dpnc.lm.cache.PrefixCache``) a ``top-k`` or ``head`` step
runs only the layers above it, while ``bias`` and ``lora`` still need full forwards (LoRA adds its adapters'
matmuls). This script measures each train mode's step against the baseline of two full forwards timed in
the same run, the one-off cost of filling the cache, and each step's peak memory against inference.

Model: ``dpnc.lm.classifiers.build_classifier(default_model_path(), get_task("SST-2"), head=...)`` (the offline
all-MiniLM-L6-v2, eager attention, fp32, eval mode), the trainer's defaults: the prompt head for every mode
but ``head``, which gets the linear head (``FinetuneConfig``'s choice); ``select_trainable`` picks the
trained parameters (top-1: ``top_k=1``; LoRA: rank 8, peft's default targets for BERT, ``query``/``value``).
Data: ``--batch`` SST-2 train sentences of the LM-BFF folder (``dpnc.lm.lmbff.load_task``; the same draw,
seed ``--batch-seed``, as ``lm_step.py``'s batch), one fixed batch; the sampler is a ``FullBatch`` over it.
Hyper-parameters: ``dpnc.lm.config.ZO_RECIPES`` of each mode; the noise multiplier does not change the cost.

Modes (one process, round-robin: one step of each per round, so drift of the machine hits every mode alike;
``--warmup`` rounds, then median/min/max over ``--steps`` rounds):
  inference            one no_grad forward of the whole model on the pre-tokenized batch (per-example losses);
  2 full forwards      two of them: the baseline ("x 2 full forwards");
  DPZero all           ``dpnc.tier.DPZeroOptimizer`` over every parameter; the closure tokenizes the drawn batch once
                       per step (both passes share it), as ``dpnc.lm.steps`` does;
  DPZero top-1 cached  train="top-k", top_k=1: the batch is ``PrefixCache(...).batch(index, labels)`` (hidden
                       states after 5 frozen layers), so each pass runs 1 layer, the pooling and the head;
  DPZero head cached   train="head", linear head: the batch is the cached sentence embeddings;
  DPZero LoRA          train="lora" (full forwards through the adapters);
  DPZero bias          train="bias" (BitFit; full forwards);
  fill top-1 cache / fill head cache   a fresh ``PrefixCache`` of the batch's examples filled (tokenizing
                       included): the one-off cost per example of a run.
The cached modes' caches are filled before the rounds begin (a run fills each row once).

Peak memory: each step mode (and inference) runs ``--mem-steps`` steps in its own subprocess, which builds
only that mode's classifier (and cache), ``--mem-repeats`` times in rotation (the median is reported); peak RSS
is ``VmHWM``, reset once the model is built, with its weights copied off the mapped checkpoint (``lm_step.py`` says
why, and why not ``ru_maxrss``), reported in MiB and as the difference to the inference process.

    python benchmarks/lm_finetune_step.py            # full run (a few minutes on 2 quiet cores)
    python benchmarks/lm_finetune_step.py --quick    # batch 8, few steps: a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from lm_step import ZO_SIGMA, cpu_name, reset_peak, resident, rss_mb
from lm_step import measure_memory as lm_step_memory   # the LM step benchmark (same folder)

from dpnc.batches import DataRows
from dpnc.lm.cache import PrefixCache, cacheable_prefix
from dpnc.lm.config import ZO_RECIPES, default_model_path
from dpnc.lm.data import get_task
from dpnc.lm.lmbff import load_task
from dpnc.lm.classifiers import build_classifier
from dpnc.lm.trainable import select_trainable
from dpnc.tier.zeroth_order import DPZeroOptimizer
from dpnc.privacy.accountant import Accountant
from dpnc.sampling import FullBatch

DEFAULT_DATA_DIR = "/work/shared/data"   # LM-BFF folders: SST-2/k-shot-1k-test/512-42/train.tsv
QUICK = dict(batch=8, steps=2, warmup=1, mem_steps=1, mem_repeats=1)
BASE = "2 full forwards"
# mode -> (train mode or None for plain forwards, head, cached)
SPECS = {
    "inference": (None, "prompt", False),
    BASE: (None, "prompt", False),
    "DPZero all": ("all", "prompt", False),
    "DPZero top-1 cached": ("top-k", "prompt", True),
    "DPZero head cached": ("head", "linear", True),
    "DPZero LoRA": ("lora", "prompt", False),
    "DPZero bias": ("bias", "prompt", False),
}
STEP_MODES = tuple(m for m, (train, _, _) in SPECS.items() if train is not None)
FILLS = {"fill top-1 cache": "DPZero top-1 cached", "fill head cache": "DPZero head cached"}
MODES = (*SPECS, *FILLS)
MEMORY_MODES = ("inference", *STEP_MODES)


def load_batch(args) -> tuple[list, torch.Tensor, int]:
    """The fixed batch (texts, labels) drawn as ``lm_step.load_batch`` draws it, and the train set's size."""
    ds = load_task("SST-2", args.data_dir, "train", seed=42, k=512)
    gen = torch.Generator().manual_seed(args.batch_seed)
    idx = torch.randperm(len(ds), generator=gen)[: args.batch].tolist()
    return [ds.texts[i] for i in idx], ds.labels[idx], len(ds)


class Mode:
    """One mode's classifier, what it trains, and its batch source (a cache for the cached modes)."""

    def __init__(self, name: str, args, texts: list, labels: torch.Tensor) -> None:
        train, head, cached = SPECS[name]
        self.name, self.texts, self.labels = name, texts, labels
        self.clf = resident(build_classifier(args.model, get_task("SST-2"), head=head, max_length=args.max_len))
        self.trainable = None
        if train is not None:
            self.trainable = select_trainable(self.clf, train, top_k=1, lora_rank=8, seed=0)
        self.clf.eval()
        self.cache = None
        if cached:
            self.layers = cacheable_prefix(self.clf)
            self.cache = PrefixCache(self.clf, texts, self.layers, batch_size=len(texts)).fill()

    def batch(self, index: torch.Tensor) -> dict[str, torch.Tensor]:
        """What the trainer's ``_encode`` gives for ``index``: the cached prefix, or the tokenized texts."""
        labels = self.labels[index]
        if self.cache is not None:
            return self.cache.batch(index, labels)
        return self.clf.encode([self.texts[i] for i in index.tolist()], labels)

    def step(self) -> Callable[[], object]:
        """A function doing one step of this mode."""
        B = len(self.texts)
        if self.trainable is None:   # forwards of the whole model on the pre-tokenized batch
            batch, k = self.batch(torch.arange(B)), 1 if self.name == "inference" else 2

            @torch.no_grad()
            def forwards():
                for _ in range(k):
                    self.clf(batch)
            return forwards
        recipe = ZO_RECIPES[SPECS[self.name][0]]
        params = [p for p in self.clf.parameters() if p.requires_grad]
        opt = DPZeroOptimizer(params, lr=recipe["lr"], clip=recipe["clip"], smoothing=recipe["smoothing"],
                     noise_multiplier=ZO_SIGMA, sampler=FullBatch(B), accountant=Accountant("add/remove"),
                     seed=2, model=self.clf, data=DataRows(fetch=self.batch))   # both passes share one fetch
        return lambda: opt.step(self.clf)

    def fill(self) -> Callable[[], object]:
        """A function filling a fresh cache of this (cached) mode's examples."""
        return lambda: PrefixCache(self.clf, self.texts, self.layers, batch_size=len(self.texts)).fill()


def round_robin(steps: dict[str, Callable], warmup: int, rounds: int) -> tuple[dict, list[float]]:
    """Per mode, over ``rounds`` rounds after ``warmup``: wall ms (median/min/max/all) and the process's CPU ms
    (all threads; less inflated than wall time when other processes compete for the cores); the load per round."""
    wall: dict[str, list[float]] = {name: [] for name in steps}
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    load = []
    for r in range(warmup + rounds):
        for name, step in steps.items():
            t0, c0 = time.perf_counter(), time.process_time()
            step()
            dt, dc = (time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3
            if r >= warmup:
                wall[name].append(dt)
                cpu[name].append(dc)
        load.append(os.getloadavg()[0])
        print(f"round {r + 1}/{warmup + rounds} (load {load[-1]:.1f}): " + ", ".join(
            f"{n} {t[-1]:.0f}" for n, t in wall.items() if t), file=sys.stderr, flush=True)
    return {n: dict(median=statistics.median(w), min=min(w), max=max(w), all=w, cpu_median=statistics.median(cpu[n]),
                    cpu_all=cpu[n]) for n, w in wall.items()}, load


def memory_child(args) -> None:
    """Run one mode ``--mem-steps`` steps in this (fresh) process; print its peak RSS (MiB) as JSON."""
    texts, labels, _ = load_batch(args)
    mode = Mode(args.memory, args, texts, labels)
    step = mode.step()
    reset = reset_peak()
    after_load = rss_mb()
    for _ in range(args.mem_steps):
        step()
    print(json.dumps({"peak_mb": rss_mb("VmHWM"), "after_load_mb": after_load, "peak_reset": reset}))


def measure_memory(args, forwarded: list[str]) -> dict:
    return lm_step_memory(args, forwarded, script=__file__)


ESTIMATORS = ("medians", "mins", "per-round", "CPU medians")


def ratios(t: dict, B: int) -> dict:
    """x (2 full forwards), LoRA / all, and the cache fills (per example; steps of the cached mode whose saving
    over ``DPZero all`` pays for the fill), by four estimators: from the wall medians, from the wall mins, the
    median over rounds of each round's value (modes of one round ran back to back, under the same load), and
    from the CPU-time medians."""
    exprs: dict[str, Callable] = {f"{m} / {BASE}": (lambda v, m=m: v(m) / v(BASE)) for m in t if m != BASE}
    if "DPZero LoRA" in t and "DPZero all" in t:
        exprs["DPZero LoRA / DPZero all"] = lambda v: v("DPZero LoRA") / v("DPZero all")
    for fill, mode in FILLS.items():
        if fill in t:
            exprs[f"{fill}: ms per example"] = lambda v, fill=fill: v(fill) / B
            if mode in t and "DPZero all" in t:
                exprs[f"{fill}: steps to recover ({mode} vs DPZero all)"] = (
                    lambda v, fill=fill, mode=mode: v(fill) / (v("DPZero all") - v(mode)))
    rounds = len(t[BASE]["all"])
    getters = {"medians": lambda m: t[m]["median"], "mins": lambda m: t[m]["min"],
               "CPU medians": lambda m: t[m]["cpu_median"]}
    out = {est: {k: e(get) for k, e in exprs.items()} for est, get in getters.items()}
    out["per-round"] = {k: statistics.median(e(lambda m, r=r: t[m]["all"][r]) for r in range(rounds))
                        for k, e in exprs.items()}
    return {est: out[est] for est in ESTIMATORS}


def table(args, t: dict, mem: dict | None, rat: dict, meta: dict) -> str:
    inf = (mem or {}).get("inference")
    lines = [
        "Model: all-MiniLM-L6-v2 classifier (`dpnc.lm.classifiers.build_classifier`, 6 layers x 384, eager "
        f"attention), {meta['total_params'] / 1e6:.2f}M params, fp32, CPU, {meta['threads']} threads, eval mode; "
        "prompt head except `head` (linear), the trainer's defaults; hyper-parameters `ZO_RECIPES` of each mode.",
        f"Data: one fixed batch of {args.batch} SST-2 train sentences (of {meta['n']}; `{args.data_dir}`, "
        f"512-42, seed {args.batch_seed}: `lm_step.py`'s batch), padded to its longest: seq len {meta['seq_len']}; "
        f"`FullBatch` sampler.",
        f"Time: {args.steps} rounds (round-robin, one step of each mode per round) after {args.warmup} warm-up. "
        f"Memory: one process per mode, {args.mem_steps} steps, peak = VmHWM (reset once the model is built, its "
        f"weights copied off the mapped checkpoint), median of {getattr(args, 'mem_repeats', 1)} processes.",
        f"torch {meta['torch']}, transformers {meta['transformers']}, peft {meta['peft']}; CPU: {meta['cpu']} "
        f"({meta['cpus']} CPUs); 1-min load average {meta['loadavg'][0]:.2f} before, {meta['loadavg'][1]:.2f} "
        f"after timing, {meta['loadavg'][2]:.2f} at the end (per round: {min(meta['round_load']):.1f}-"
        f"{max(meta['round_load']):.1f}); wall time {meta['wall_s'] / 60:.1f} min.",
        "",
        f"| mode | trained params | ms median | min | max | CPU ms median | x {BASE}: medians | mins | per-round | "
        "CPU medians | peak RSS MiB | - inference MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in t.items():
        m = (mem or {}).get(name)
        mcols = f"{m['peak_mb']:.0f} | {m['peak_mb'] - inf['peak_mb']:+.0f}" if m and inf else "- | -"
        trained = meta["trained"].get(name)
        x = [1.0 if name == BASE else rat[est][f"{name} / {BASE}"] for est in ESTIMATORS]
        lines.append(f"| {name} | {f'{trained:,}' if trained else '-'} | {r['median']:.0f} | {r['min']:.0f} | "
                     f"{r['max']:.0f} | {r['cpu_median']:.0f} | " + " | ".join(f"{v:.3f}" for v in x) + f" | {mcols} |")
    if mem:
        after = [m["after_load_mb"] for m in mem.values()]
        lines.append(f"\nRSS right after building the classifier (and its cache; imports included): "
                     f"{min(after):.0f}-{max(after):.0f} MiB.")
    lines += ["", "| ratio | " + " | ".join(ESTIMATORS) + " |", "|---|---|---|---|---|"]
    for k in rat["medians"]:
        if not k.startswith(("inference", "fill top-1 cache / ", "fill head cache / ")):
            lines.append(f"| {k} | " + " | ".join(f"{rat[est][k]:.3g}" for est in ESTIMATORS) + " |")
    cache = meta["cache_bytes_per_example"]
    lines += ["", "Cache held per example (this batch's mean): " + ", ".join(
        f"{mode}: {b / 1024:.1f} KiB" for mode, b in cache.items()) + ".",
              "", "Ratios are taken within one run, where every mode saw the same conditions round by round. "
              "Estimators: ratio of the wall medians; of the wall mins (each mode's least-disturbed sample, "
              "possibly from different rounds); per-round (the median over rounds of that round's ratio: the modes "
              "of a round ran back to back); of the CPU-time medians (all threads of this process: competing "
              "processes inflate it less than wall time, but not by nothing)."]
    if max(meta["loadavg"] + meta["round_load"]) > meta["cpus"]:
        lines += ["", f"**This run was disturbed**: the load average reached "
                  f"{max(meta['loadavg'] + meta['round_load']):.1f} on {meta['cpus']} CPUs (other processes), so "
                  "the wall times are inflated and the per-round ratios are the best estimate: the medians mix quiet "
                  "and loaded rounds, a mode's min may come from a quieter round than its baseline's, and CPU time "
                  "grows too (threads spin while they wait for a core). A mode of a few ms is best read from its min. "
                  "Peak memory is not affected."]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="folder of the LM-BFF task folders")
    p.add_argument("--model", help="model folder (default: dpnc.lm.config.default_model_path())")
    p.add_argument("--batch", type=int, default=64, help="batch size (the paper's: 64)")
    p.add_argument("--max-len", type=int, default=128, help="tokens per sequence (the trainer's: 128)")
    p.add_argument("--batch-seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=10, help="timed rounds after the warm-up rounds")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--mem-steps", type=int, default=3, help="steps in each memory process")
    p.add_argument("--mem-repeats", type=int, default=3, help="memory processes per mode (the median is reported)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--skip", nargs="*", default=[], choices=[m for m in MODES if m != BASE], metavar="MODE",
                   help=f"modes to skip: {MODES[2:]}")
    p.add_argument("--quick", action="store_true", help="batch 8, few steps (smoke run)")
    p.add_argument("--no-memory", action="store_true", help="skip the memory subprocesses")
    p.add_argument("--out", type=Path, help="markdown output (default results/lm_finetune_step[_quick].md)")
    p.add_argument("--memory-modes", nargs="*", default=list(MEMORY_MODES), choices=MEMORY_MODES, metavar="MODE",
                   help=f"modes whose peak memory is measured (default all: {MEMORY_MODES})")
    p.add_argument("--render", type=Path, metavar="JSON",
                   help="only rewrite the markdown of a saved result (e.g. after changing the table's text)")
    p.add_argument("--memory", choices=MEMORY_MODES, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.render:
        result = json.loads(args.render.read_text())
        md = table(argparse.Namespace(**result["config"]), result["time_ms"], result["memory_mib"],
                   result["ratios"], result)
        args.render.with_suffix(".md").write_text(md)
        return print(md, end="")
    if args.quick:
        vars(args).update(QUICK)
    args.model = args.model or default_model_path()
    if args.out is None:
        args.out = Path(__file__).parent / "results" / f"lm_finetune_step{'_quick' if args.quick else ''}.md"
    torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    if args.memory:
        return memory_child(args)

    import peft
    import transformers

    forwarded = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in
                 ("data_dir", "model", "batch", "max_len", "batch_seed", "mem_steps", "threads")]
    start, load = time.perf_counter(), [os.getloadavg()[0]]
    texts, labels, n = load_batch(args)
    wanted = [m for m in SPECS if m not in args.skip]
    modes = {name: Mode(name, args, texts, labels) for name in wanted}
    steps = {name: mode.step() for name, mode in modes.items()}
    for fill, name in FILLS.items():
        if fill not in args.skip and name in modes:
            steps[fill] = modes[name].fill()
    t, round_load = round_robin(steps, args.warmup, args.steps)
    load.append(os.getloadavg()[0])
    cache_bytes = {name: statistics.mean(r.numel() * r.element_size() for r in m.cache.rows)
                   for name, m in modes.items() if m.cache is not None}
    seq_len = modes[BASE].batch(torch.arange(len(texts)))["input_ids"].shape[1]
    meta = {"n": n, "seq_len": seq_len, "threads": torch.get_num_threads(),
            "total_params": sum(q.numel() for q in modes[BASE].clf.parameters()),
            "trained": {k: m.trainable.trained for k, m in modes.items() if m.trainable is not None},
            "trainable": {k: m.trainable.describe() for k, m in modes.items() if m.trainable is not None},
            "torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
            "cpu": cpu_name(), "cpus": os.cpu_count(), "cache_bytes_per_example": cache_bytes}
    del modes, steps
    mem = None if args.no_memory else measure_memory(args, forwarded)
    load.append(os.getloadavg()[0])
    meta.update(loadavg=load, round_load=round_load, wall_s=time.perf_counter() - start)
    rat = ratios(t, len(texts))
    md = table(args, t, mem, rat, meta)
    print(md, end="")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(md)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
              if k not in ("memory", "out", "render")}
    config.update(noise_multiplier=ZO_SIGMA, recipes={k: ZO_RECIPES[SPECS[k][0]] for k in STEP_MODES})
    result = {"config": config, **meta, "time_ms": t, "memory_mib": mem, "ratios": rat}
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
