"""The power of make_private's one-run self-audit: variant × M → flagged in k of K runs, with the accuracy cost.

    nice python benchmarks/self_audit_power.py --runs 5 --M 100 400 --out docs/results/self_audit
    nice python benchmarks/self_audit_power.py --runs 5 --M 200 --optimizers dp-sgd --variants correct sigma/4 \
        --out docs/results/self_audit/m200

Task: logistic regression on a public synthetic problem (d₀ = 10 Gaussian features, labels from a fixed w* with
10 % label noise), n = 1000 training rows, 2000 test rows. The model is a task head ``Linear(10, 1)`` and a canary
head ``Linear(M, 1, bias=False)`` on M input slots reserved for canaries (0 in every training row): the user's loss
is softplus(−y·task(x)) + BIG·canary(x_c), so canary j (input BIG-free one-hot slot k_j, sign s_j) has the
per-example gradient ±BIG along its own weight and clips to ±C there (``SelfAudit(row=..., coordinates=...)``).
Every run: ``make_private`` with ε = 1 (claimed), δ = 1e-5, B = 50, T = 200, C = 1, RDP calibration; K runs per
cell, the noise, batches and canaries secret (no test seed).

Variants (each BROKEN ON PURPOSE except ``correct``; the claim stays ε = 1):
``sigma/4`` the noise multiplier divided by 4 in the real step; ``reads-dataset`` each example's loss adds the
mean loss of every row of the training set (canaries included); ``centres-batch`` each loss minus the batch's
mean loss; ``state-write`` the loss adds every batch's inputs in place into a tensor outside the model and adds
the loss of their running mean (each example keeps acting in later steps).

Accuracy cost: test accuracy of the plain run (no canaries, same settings) minus that of the correct
self-audited run, mean over K runs each, with a 95 % Welch interval. Writes power.json and summary.md.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
from scipy import stats
from torch import nn
from torch.utils.data import TensorDataset

import dpnc
from dpnc.self_audit import SelfAudit
from dpnc.privacy.calibrate import noise_multiplier

BIG, D0, N, N_TEST, B, T, EPSILON, DELTA, CLIP = 1e4, 10, 1000, 2000, 50, 200, 1.0, 1e-5, 1.0
LR = {"dp-sgd": 0.5, "dpzero": 0.05}
VARIANTS = ("correct", "sigma/4", "reads-dataset", "centres-batch", "state-write")


def task(seed: int = 0):
    """The public synthetic task: (X, y) train and test, y in {−1, +1}."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(D0, generator=g)
    X = torch.randn(N + N_TEST, D0, generator=g)
    y = torch.sign(X @ w)
    flip = torch.rand(N + N_TEST, generator=g) < 0.1
    y = torch.where(flip, -y, y)
    return (X[:N], y[:N]), (X[N:], y[N:])


class Model(nn.Module):
    """A task head on the D0 features and a canary head on M reserved input slots."""

    def __init__(self, M: int) -> None:
        super().__init__()
        self.task, self.canary = nn.Linear(D0, 1), nn.Linear(M, 1, bias=False)
        nn.init.zeros_(self.task.weight), nn.init.zeros_(self.task.bias), nn.init.zeros_(self.canary.weight)

    def losses(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logit = self.task(x[:, :D0]).squeeze(-1)
        return nn.functional.softplus(-y * logit) + BIG * self.canary(x[:, D0:]).squeeze(-1)


def one_run(optimizer: str, M: int, variant: str, audited: bool, train, test) -> dict:
    (X, y), (Xt, yt) = train, test
    model = Model(M)
    rows = torch.cat([X, torch.zeros(N, M)], 1)
    n_ledger = N + (M if audited else 0)
    options = dict(data=TensorDataset(rows, y), n=N, optimizer=optimizer, steps=T, batch_size=B, lr=LR[optimizer],
                   clip=CLIP, accountant="rdp")
    if variant == "sigma/4":
        options["noise_multiplier"] = noise_multiplier(EPSILON, DELTA, B / n_ledger, T) / 4
    else:
        options.update(target_epsilon=EPSILON, delta=DELTA)
    audit = None
    if audited:
        def canary_row(k: int, sign: int):
            x = torch.zeros(D0 + M)
            x[D0 + k - (D0 + 1)] = sign       # flat coordinate k = D0 + 1 + slot (after task.weight, task.bias)
            return x, torch.tensor(1.0)
        audit = SelfAudit(M, row=canary_row, coordinates=range(D0 + 1, D0 + 1 + M))
        options["audit"] = audit
    opt, loader, _ = dpnc.make_private(model, **options)
    everything = torch.stack([r[0] for r in loader.dataset]), torch.stack([r[1] for r in loader.dataset])
    memory = torch.zeros(D0 + M)
    seen = [0]

    def loss_fn(xb, yb):
        losses = model.losses(xb, yb)
        if variant == "reads-dataset":
            losses = losses + model.losses(*everything).mean()
        elif variant == "centres-batch":
            losses = losses - losses.mean()
        elif variant == "state-write":
            memory.add_(xb.sum(0).detach())
            seen[0] += len(xb)
            losses = losses + model.losses((memory / max(seen[0], 1)).unsqueeze(0), torch.ones(1))
        return losses

    error = None
    try:
        for _ in loader:
            opt.step(loss_fn)
    except Exception as e:   # a variant the library refuses: recorded, not hidden
        error = f"{type(e).__name__}: {str(e)[:160]}"
    with torch.no_grad():
        accuracy = float((torch.sign(model.task(Xt).squeeze(-1)) == yt).float().mean())
    out = {"optimizer": optimizer, "M": M, "variant": variant, "audited": audited, "accuracy": accuracy,
           "error": error}
    if audited and error is None:
        result = audit.result(delta=DELTA, claimed_epsilon=EPSILON)
        out.update(bound=result.epsilon_lower_bound, flagged=result.flagged, guesses=result.guesses,
                   correct=result.correct, best_possible=result.best_possible)
    return out


def welch(a: list[float], b: list[float]) -> tuple[float, float]:
    """Mean of a − b and the half-width of its 95 % Welch–Satterthwaite t interval."""
    a, b = np.asarray(a), np.asarray(b)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if va + vb > 0 else 1
    return float(a.mean() - b.mean()), float(stats.t.ppf(0.975, df) * math.sqrt(va + vb))


def summary(rows: list[dict], runs: int, Ms: list[int], variants=VARIANTS, optimizers=tuple(LR)) -> str:
    lines = [f"# make_private self-audit: power (K = {runs} runs per cell, claimed ε = {EPSILON}, δ = {DELTA})", "",
             "| optimizer | variant | " + " | ".join(f"M = {M}: flagged" for M in Ms) + " | median bound (largest M) |",
             "|---|---|" + "---|" * len(Ms) + "---|"]
    for opt in optimizers:
        for variant in variants:
            cells = []
            for M in Ms:
                cell = [r for r in rows if r["optimizer"] == opt and r["variant"] == variant and r["M"] == M
                        and r["audited"]]
                refused = [r for r in cell if r["error"]]
                cells.append(f"refused ({refused[0]['error'][:60]}…)" if refused else
                             f"{sum(r['flagged'] for r in cell)} of {len(cell)}")
            big = [r["bound"] for r in rows if r["optimizer"] == opt and r["variant"] == variant
                   and r["M"] == Ms[-1] and r["audited"] and not r["error"]]
            lines.append(f"| {opt} | {variant} | " + " | ".join(cells) + f" | {np.median(big):.2f} |" if big else
                         f"| {opt} | {variant} | " + " | ".join(cells) + " | – |")
    lines += ["", "Accuracy cost of carrying the canaries (plain − self-audited, correct variant; test accuracy, "
              "mean ± 95 % Welch half-width):", ""]
    for opt in optimizers:
        plain = [r["accuracy"] for r in rows if r["optimizer"] == opt and not r["audited"]]
        for M in Ms:
            audited = [r["accuracy"] for r in rows if r["optimizer"] == opt and r["audited"] and r["M"] == M
                       and r["variant"] == "correct"]
            d, h = welch(plain, audited)
            lines.append(f"* {opt}, M = {M}: {100 * d:+.2f} ± {100 * h:.2f} points "
                         f"(plain {100 * np.mean(plain):.1f} %)")
    best = {M: max(r["best_possible"] for r in rows if r["M"] == M and r.get("best_possible")) for M in Ms}
    lines += ["", "The best bound each M could show (every guess right): "
              + ", ".join(f"M = {M}: {b:.2f}" for M, b in best.items()) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--M", type=int, nargs="+", default=[100, 400])
    parser.add_argument("--optimizers", nargs="+", default=list(LR), choices=list(LR))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--out", type=Path, default=Path("docs/results/self_audit"))
    args = parser.parse_args(argv)
    train, test = task()
    rows, start = [], time.time()
    for opt in args.optimizers:
        for _ in range(args.runs):
            rows.append(one_run(opt, args.M[0], "correct", False, train, test))
        for M in args.M:
            for variant in args.variants:
                for _ in range(args.runs):
                    rows.append(one_run(opt, M, variant, True, train, test))
                    print(json.dumps(rows[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "power.json").write_text(json.dumps({"command": "python benchmarks/self_audit_power.py "
                                                     f"--runs {args.runs} --M {' '.join(map(str, args.M))} "
                                                     f"--optimizers {' '.join(args.optimizers)} "
                                                     f"--variants {' '.join(args.variants)}",
                                                     "rows": rows}, indent=1))
    text = summary(rows, args.runs, args.M, args.variants, args.optimizers)
    (args.out / "summary.md").write_text(text)
    print(text)
    print(f"total {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
