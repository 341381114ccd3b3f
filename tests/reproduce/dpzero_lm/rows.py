"""Constructed dpzero-lm rows, judged by the claims, report and table tests and rendered by the
snapshots."""

from __future__ import annotations

import dataclasses
import math

from dpnc_reproduce.dpzero_lm import run as exp


def lm_row(task, seed, method, acc, epsilon=None, **extra):
    run = f"{task}-{seed}-{method}" + ("" if epsilon is None else f"-eps{epsilon:g}")
    row = dict(
        run=run,
        group=f"{task}-{seed}",
        task=task,
        seed=seed,
        method=method,
        epsilon=epsilon,
        direction="gaussian",
        train="head",
        parameters_trained=770,
        n=1024,
        steps=100,
        batch_size=64,
        lr=0.1,
        clip=1.0 if epsilon else None,
        smoothing=1e-3,
        accuracy=acc,
        zero_shot_accuracy=70.0,
        test_loss=0.5,
        test_examples=10**6,
        seconds_per_step=0.01,
        median_seconds_per_step=0.01,
        min_seconds_per_step=0.009,
        peak_rss_mib=900.0,
        wall_seconds=60.0,
        delta=1e-5,
        sampling_rate=64 / 1024,
        noise_multiplier=0.0,
        epsilon_rdp=math.inf,
        epsilon_pld=math.inf,
        releases=100,
        private=False,
        nonfinite=0,
        final_train_loss=0.5,
        clipped_fraction=0.1,
    )
    if epsilon is not None:
        row.update(
            epsilon_rdp=epsilon * 0.999,
            epsilon_pld=epsilon * 0.9,
            private=True,
            noise_multiplier=1.0,
        )
    return exp.LMRow(**{**row, **extra})


# Accuracies (%) per (task, method) whose every claim clears its threshold: ε = 6 within a point of
# MeZO, ε = 2 further off, MeZO well above zero-shot.
CLEAR = {
    ("SST-2", "zero-shot"): 71.0,
    ("SST-2", "mezo"): 80.0,
    ("SST-2", "dp6"): 79.0,
    ("SST-2", "dp2"): 77.0,
    ("SST-5", "zero-shot"): 30.0,
    ("SST-5", "mezo"): 40.0,
    ("SST-5", "dp6"): 39.0,
    ("SST-5", "dp2"): 35.0,
    ("TREC", "zero-shot"): 40.0,
    ("TREC", "mezo"): 70.0,
    ("TREC", "dp6"): 69.0,
    ("TREC", "dp2"): 60.0,
}


def lm_rows(acc: dict, spread: float = 0.0, **extra) -> list:
    """Three seeds of every task; ``acc``: (task, method label) → accuracy, seed s adding
    spread·(−1, 0, 1)."""
    rows = []
    for task in ("SST-2", "SST-5", "TREC"):
        for k, seed in enumerate((42, 13, 21)):
            for label, (method, eps) in {
                "zero-shot": ("zero-shot", None),
                "mezo": ("mezo", None),
                "dp6": ("dpzero", 6.0),
                "dp2": ("dpzero", 2.0),
            }.items():
                rows.append(
                    lm_row(
                        task,
                        seed,
                        method,
                        acc[task, label] + spread * (k - 1) * (method != "zero-shot"),
                        eps,
                        **extra,
                    )
                )
    return rows


FULL_SET = dataclasses.replace(exp.FULL, data_dir="/nonexistent")


def with_correct(rows: list, agree: float, m: int = 1000) -> list:
    """Give every row per-example results on m examples matching its accuracy: each model gets right
    the first ``agree`` share of the examples the zero-shot model gets right, plus (or minus) the
    difference in a block right after them (so two models disagree on |acc_a − acc_b| of the
    examples, plus 2·(1 − agree) of the rest)."""
    out = []
    for r in rows:
        k = round(m * r.accuracy / 100)
        shift = 0 if r.method == "zero-shot" else round(m * (1 - agree))
        bits = ["0"] * m
        for i in range(k):
            bits[(i + shift) % m] = "1"
        out.append(dataclasses.replace(r, test_examples=m, correct="".join(bits)))
    return out
