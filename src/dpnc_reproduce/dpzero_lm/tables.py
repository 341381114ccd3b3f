"""The dpzero-lm tables: the paper's Tables 2, 3 and 5 and ours from the rows (mean ± standard error
over seeds), the privacy table, the skipped runs."""

from __future__ import annotations

from collections.abc import Sequence

from dpnc_reproduce.claims import mean_se
from dpnc_reproduce.dpzero_lm.run import PRIVATE, TASKS, LMConfig, LMRow

# The paper's numbers (docs/papers.md, DPZero §4.2), test accuracy in %, (mean, standard error) over
# seeds 42, 13, 21.
PAPER_TABLE2 = {
    "zero-shot": {
        "SST-2": (79.0, None),
        "SST-5": (35.5, None),
        "SNLI": (50.2, None),
        "MNLI": (48.8, None),
        "RTE": (51.4, None),
        "TREC": (32.0, None),
    },
    "mezo": {
        "SST-2": (92.5, 0.3),
        "SST-5": (50.8, 0.8),
        "SNLI": (80.4, 0.6),
        "MNLI": (69.2, 0.3),
        "RTE": (72.8, 1.0),
        "TREC": (88.9, 0.1),
    },
    "dpzero ε=6": {
        "SST-2": (92.2, 0.3),
        "SST-5": (49.3, 0.6),
        "SNLI": (77.8, 1.0),
        "MNLI": (67.4, 0.3),
        "RTE": (71.9, 0.9),
        "TREC": (87.6, 0.9),
    },
    "dpzero ε=2": {
        "SST-2": (91.8, 0.1),
        "SST-5": (47.1, 0.9),
        "SNLI": (73.6, 0.9),
        "MNLI": (62.7, 0.9),
        "RTE": (70.4, 0.7),
        "TREC": (82.0, 1.6),
    },
}


# Table 3: SST-2, (ε, δ) = (2, 1e-5) for the private methods: accuracy %, seconds per iteration, MiB
# (GPU).
PAPER_TABLE3 = {
    "adamw": (94.4, 0.425, 16960),
    "dp-adamw": (92.3, 2.33, 21494),
    "mezo": (92.5, 0.345, 2668),
    "dpzero": (91.8, 0.347, 2668),
}


# Table 5: (direction, ε) → task → (mean, s.e.).
PAPER_TABLE5 = {
    ("gaussian", 6.0): {"SST-2": (92.2, 0.3), "SST-5": (49.3, 0.6)},
    ("gaussian", 2.0): {"SST-2": (91.8, 0.1), "SST-5": (47.1, 0.9)},
    ("sphere", 6.0): {"SST-2": (91.8, 0.1), "SST-5": (49.9, 1.3)},
    ("sphere", 2.0): {"SST-2": (91.5, 0.5), "SST-5": (47.4, 1.3)},
}
METHOD_LABEL = {
    "zero-shot": "Zero-shot",
    "mezo": "MeZO (non-private)",
    "adamw": "AdamW (non-private)",
    "dp-adamw": "DP-AdamW",
    "dpzero": "DPZero",
}


def fmt(value: tuple[float, float | None] | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    mean, se = value
    return f"{mean:.{digits}f}" if se is None else f"{mean:.{digits}f} ± {se:.{digits}f}"


def _select(rows: Sequence[LMRow], **match) -> list[LMRow]:
    return [r for r in rows if all(getattr(r, k) == v for k, v in match.items())]


def table2(rows: Sequence[LMRow], config: LMConfig) -> dict[str, dict[str, tuple]]:
    """Method label → task → (mean, s.e.) of the test accuracy over seeds (Gaussian directions)."""
    table: dict[str, dict[str, tuple]] = {}
    methods = [("zero-shot", "zero-shot", None), ("mezo", "mezo", None)]
    methods += [(f"dpzero ε={e:g}", "dpzero", e) for e in config.epsilons]
    for label, method, eps in methods:
        for task in config.tasks:
            accs = [
                r.accuracy
                for r in _select(rows, task=task, method=method, epsilon=eps, direction="gaussian")
            ]
            if accs:
                table.setdefault(label, {})[task] = mean_se(accs)
    return table


def table3(rows: Sequence[LMRow], config: LMConfig) -> list[LMRow]:
    """Table 3's rows on SST-2, first available seed (AdamW's, if it ran), in the paper's method
    order."""
    if not config.fo_methods:
        return []
    out = []
    for method in ("adamw", "dp-adamw", "mezo", "dpzero"):
        if method in ("adamw", "dp-adamw") and method not in config.fo_methods:
            continue
        match = _select(
            rows,
            task="SST-2",
            method=method,
            direction="gaussian",
            epsilon=config.table3_epsilon if method in PRIVATE else None,
        )
        if not match:
            continue
        seed = min(
            (r.seed for r in _select(rows, task="SST-2", method="adamw") or match),
            key=lambda s: config.seeds.index(s) if s in config.seeds else 99,
        )
        out.append(next((m for m in match if m.seed == seed), match[0]))
    return out


def table5(rows: Sequence[LMRow], config: LMConfig) -> dict[tuple[str, float], dict[str, tuple]]:
    """(direction, ε) → task → (mean, s.e.) of DPZero's test accuracy."""
    table: dict = {}
    for direction in ("gaussian", "sphere"):
        for eps in config.epsilons:
            for task in config.sphere_tasks:
                accs = [
                    r.accuracy
                    for r in _select(
                        rows, task=task, method="dpzero", epsilon=eps, direction=direction
                    )
                ]
                if accs:
                    table.setdefault((direction, eps), {})[task] = mean_se(accs)
    return table


def privacy_rows(rows: Sequence[LMRow]) -> list[dict]:
    """The private runs' accounting: target ε, ε by RDP and PLD from the run's ledger, n, q, T,
    σ/Δ."""
    keys = (
        "run",
        "task",
        "seed",
        "method",
        "direction",
        "epsilon",
        "delta",
        "n",
        "batch_size",
        "sampling_rate",
        "steps",
        "releases",
        "noise_multiplier",
        "epsilon_rdp",
        "epsilon_pld",
        "private",
    )
    return [{k: getattr(r, k) for k in keys} for r in rows if r.method in PRIVATE]


def skipped(rows: Sequence[LMRow], config: LMConfig) -> list[str]:
    """Notes on the seeds of Table 2's and 5's tasks that have no runs (no k-shot folder for
    them)."""
    tasks = [t for t in TASKS if t in (*config.tasks, *config.sphere_tasks)]
    return [
        f"{t}: no k-shot folder for seed {s}; skipped"
        for t in tasks
        for s in config.seeds
        if not _select(rows, task=t, seed=s)
    ]
