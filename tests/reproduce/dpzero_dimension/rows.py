"""Constructed dpzero-dimension rows (three modes, three seeds, per-example results), judged by the
claims and report tests and rendered by the snapshots."""

from __future__ import annotations

import math

from dpnc_reproduce.dpzero_dimension import run as exp
from tests.shared_data import DATA

D = {"head": 770, "bias": 25_729, "top-1": 1_774_465}


def dim_row(seed, mode, method, bits, epsilon=None, phase="test"):
    acc = 100 * bits.count("1") / len(bits)
    private = epsilon is not None
    return exp.DimRow(
        run=f"{mode}-{seed}-{method}",
        group=mode,
        task="SST-2",
        seed=seed,
        method=method,
        epsilon=epsilon,
        direction="gaussian",
        train=mode,
        parameters_trained=D[mode],
        n=1024,
        steps=10,
        batch_size=16,
        lr=0.1,
        clip=1.0 if private else None,
        smoothing=1e-3,
        accuracy=acc,
        zero_shot_accuracy=50.0,
        test_loss=0.5,
        test_examples=len(bits),
        seconds_per_step=0.1,
        median_seconds_per_step=0.1,
        min_seconds_per_step=0.1,
        peak_rss_mib=900.0,
        wall_seconds=1.0,
        delta=1e-5,
        sampling_rate=1 / 64,
        noise_multiplier=1.0 if private else 0.0,
        epsilon_rdp=epsilon * 0.99 if private else math.inf,
        epsilon_pld=epsilon * 0.9 if private else math.inf,
        releases=10,
        private=private,
        nonfinite=0,
        final_train_loss=0.4,
        clipped_fraction=0.0,
        train_losses=(0.7, 0.6),
        correct=bits,
        mode=mode,
        phase=phase,
        signal_rms=0.5,
        noise_std=1 / 16 if private else 0.0,
    )


# per (mode, seed): zero-shot, MeZO, DPZero ε = 6 correctness on 8 test examples
BITS = {
    ("head", 42): ("00001111", "01111111", "00111111"),
    ("head", 13): ("00001111", "11011111", "01011111"),
    ("bias", 42): ("00001111", "11101111", "10101111"),
    ("bias", 13): ("00001111", "11111111", "11001111"),
}
CONFIG = exp.DimConfig(
    data_dir=str(DATA), tasks=("SST-2",), modes=("head", "bias"), seeds=(42, 13), epsilons=(6.0,)
)


def dim_rows():
    rows = []
    for (mode, seed), (z, m, p) in BITS.items():
        rows += [
            dim_row(seed, mode, "zero-shot", z),
            dim_row(seed, mode, "mezo", m),
            dim_row(seed, mode, "dpzero", p, 6.0),
        ]
    return rows
