"""The sweep behind ``dpnc finetune``'s zeroth-order defaults (:data:`dpnc.lm.config.ZO_RECIPES`).

:func:`sweep` chooses on SST-2's test split (not private, and said so beside ε); :func:`choose` and
:func:`validate` choose on held-out training rows only (NOT PRIVATE files); :func:`feature_ceiling`
bounds what a head can reach. The private route (random stopping, not run here): docs/practical.md,
"Private hyper-parameter tuning". Commands run: docs/results/finetune-defaults/*/summary.md."""

from __future__ import annotations

import argparse
import csv
import itertools
import json
from pathlib import Path

import torch
from sklearn.linear_model import LogisticRegression

from dpnc.lm import FinetuneConfig, Trainer, load_task

GRIDS = {
    "head": {"lr": [0.03, 0.1, 0.3, 1.0], "clip": [0.5, 2.0], "steps": [2000, 5000]},
    "top-k": {"lr": [3e-5, 1e-4, 3e-4], "clip": [1.0, 10.0], "steps": [300]},
    "bias": {"lr": [1e-4, 1e-3], "clip": [10.0], "steps": [100]},
    "lora": {"lr": [1e-4, 1e-3], "clip": [10.0], "steps": [100]},
}


# Stated next to ε wherever a result of this module is written.
SWEEP_SELECTION = (
    "non-private choice on the test split, beside non-private MeZO runs on the same training data; "
    "ε excludes it"
)
PRIVATE_VALIDATION = "private_validation"
NOT_PRIVATE = (
    "NOT PRIVATE: un-noised evaluations on rows of the training split (a held-out fifth), to choose a "
    "recipe; not covered by any ε. Share them only where the training data may be shared."
)


def sweep(
    data_dir: str,
    train: str,
    out: Path,
    *,
    grid: dict | None = None,
    epsilon: float = 6.0,
    seed: int = 42,
    methods: tuple[str, ...] = ("dpzero", "mezo"),
    eval_examples: int | None = None,
) -> list[dict]:
    """DPZero (and MeZO, the non-private ceiling) for one ``train`` mode on SST-2's 512-shot train
    split over ``grid`` (step size, clipping threshold, steps), every cell evaluated on the full
    test split (872 sentences); ``rows.csv`` and ``summary.md``. The cells share the frozen-prefix
    cache, so a cell costs only its steps.

    The test split chooses the defaults here, as in the DPZero paper's own grid search
    (docs/papers.md, DPZero §4.2): a chosen default's accuracy is optimistic by the selection, and
    ``dpnc reproduce dpzero-lm`` re-measures it on other seeds. The choice is not private and not
    covered by the ε of the runs that use the recipe: ``summary.md`` says so next to its ε column,
    and a trainer run with the chosen head recipe on SST-2 says so in its ``summary.json``
    (``recipe_selection``). The private route is random stopping: docs/practical.md ("Private
    hyper-parameter tuning")."""
    grid = grid or GRIDS[train]
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    base = dict(
        task="SST-2",
        data_dir=data_dir,
        train=train,
        seed=seed,
        progress=False,
        out=None,
        eval_examples=eval_examples,
    )
    probe = Trainer(
        FinetuneConfig(method="mezo", steps=1, **base)
    )  # fills the caches, evaluates the start
    caches = None if probe.train_cache is None else (probe.train_cache, probe.test_cache)
    rows.append(
        {"method": "zero-shot", "accuracy": probe.zero_shot.accuracy, "loss": probe.zero_shot.loss}
    )
    keys = list(grid)
    for values in itertools.product(*grid.values()):
        cell = dict(zip(keys, values))
        for method in methods:
            if method == "mezo" and cell.get("clip") != grid.get("clip", [None])[0]:
                continue  # MeZO does not clip: one run per (lr, steps)
            config = FinetuneConfig(
                method=method, epsilon=epsilon, recipe_selection=SWEEP_SELECTION, **base, **cell
            )
            summary = Trainer(config, caches=caches).run()
            # No run time: a private run's duration tracks its secret batches (the committed tables
            # of earlier sweeps still have a "seconds" column).
            row = {
                "method": method,
                **cell,
                "epsilon": epsilon if method == "dpzero" else None,
                "accuracy": summary.test_accuracy,
                "loss": summary.test_loss,
                "noise_multiplier": summary.noise_multiplier,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            _write(
                rows, out, train, epsilon
            )  # after every cell: a stopped sweep keeps what it measured
    return rows


VALIDATION_GRID = {"lr": [0.03, 0.1], "clip": [0.5], "steps": [100_000]}


def validate(
    data_dir: str,
    out: Path,
    *,
    task: str,
    train: str = "head",
    grid: dict | None = None,
    epsilon: float = 6.0,
    seed: int = 42,
    methods: tuple[str, ...] = ("mezo", "dpzero"),
    runs_dir: Path | None = None,
) -> list[dict]:
    """Every cell of ``grid`` trained on four fifths of ``task``'s train split (k-shot seed
    ``seed``) and evaluated ten times along the run on the remaining fifth; ``private_curves.csv``
    has one row per evaluation. Each run's folder (its metrics.jsonl) goes to ``runs_dir`` (default
    ``out/private_validation``), which holds a ``NOT_PRIVATE.txt``: every file there is an un-noised
    statistic of training rows. n is the training part's size, public here: a fixed fifth of the
    public k-shot recipe (and these runs publish nothing private). The curves show where MeZO's
    validation loss stops falling, so T can be read off without the test split."""
    full = load_task(task, data_dir, "train", seed=seed)
    order = torch.randperm(len(full), generator=torch.Generator().manual_seed(1))
    held_out = len(full) // 5
    train_set, validation = full.subset(order[held_out:]), full.subset(order[:held_out])
    grid, runs_dir = grid or VALIDATION_GRID, runs_dir or out / PRIVATE_VALIDATION
    runs_dir.mkdir(parents=True, exist_ok=True)
    (runs_dir / "NOT_PRIVATE.txt").write_text(NOT_PRIVATE + "\n")
    for values in itertools.product(*grid.values()):
        cell = dict(zip(grid, values))
        for method in methods:
            config = FinetuneConfig(
                task=task,
                data_dir=data_dir,
                method=method,
                train=train,
                epsilon=epsilon,
                seed=seed,
                progress=False,
                out=str(runs_dir / _cell_name(method, cell)),
                eval_every=cell["steps"] // 10,
                n=len(train_set),
                recipe_selection=NOT_PRIVATE,
                **cell,
            )
            Trainer(config, train=train_set, test=validation).run()
    return write_curves(runs_dir, out, task)


# Per-task recipe choice (``--choose``): each cell a run of its own on four fifths of the train
# split, scored on the held-out fifth at its end; MeZO does not clip (one run per lr and T). 12
# DPZero + 6 MeZO candidates per task.
CHOICE_GRID = {"lr": [0.03, 0.1, 0.3], "clip": [0.5, 2.0], "steps": [2000, 5000]}
RECIPE_CHOICE = "recipe chosen non-privately on held-out training rows; ε excludes the choice"


def choose(
    data_dir: str,
    out: Path,
    *,
    task: str,
    train: str = "head",
    grid: dict | None = None,
    epsilon: float = 6.0,
    seed: int = 42,
) -> dict:
    """``task``'s MeZO and DPZero recipes chosen on its training split only: every cell of ``grid``
    (DPZero at ``epsilon``; MeZO without clipping) trained on four fifths of the k-shot seed
    ``seed`` train split (the fixed permutation of :func:`validate`) and scored once, at its end, on
    the held-out fifth; per method the cell with the highest held-out accuracy (ties: lower held-out
    loss, then fewer steps) is chosen. The test split is never read. Writes
    ``out/private_choice-<task>.csv`` (every cell) and ``out/choice-<task>.json`` (the choice), both
    labelled NOT PRIVATE (un-noised statistics of training rows): the choice is a non-private one,
    and the ε of the runs that use it excludes it. All cells share the frozen-prefix caches."""
    full = load_task(task, data_dir, "train", seed=seed)
    order = torch.randperm(len(full), generator=torch.Generator().manual_seed(1))
    held_out = len(full) // 5
    train_set, validation = full.subset(order[held_out:]), full.subset(order[:held_out])
    grid = grid or CHOICE_GRID
    out.mkdir(parents=True, exist_ok=True)
    base = dict(
        task=task,
        data_dir=data_dir,
        train=train,
        seed=seed,
        progress=False,
        out=None,
        n=len(train_set),
        recipe_selection=NOT_PRIVATE,
    )
    probe = Trainer(
        FinetuneConfig(method="mezo", steps=1, **base), train=train_set, test=validation
    )
    caches = (probe.train_cache, probe.test_cache)
    rows: list[dict] = [
        {
            "task": task,
            "method": "zero-shot",
            "lr": None,
            "clip": None,
            "steps": 0,
            "epsilon": None,
            "accuracy": probe.zero_shot.accuracy,
            "loss": probe.zero_shot.loss,
        }
    ]
    keys = list(grid)
    for values in itertools.product(*grid.values()):
        cell = dict(zip(keys, values))
        for method in ("mezo", "dpzero"):
            if method == "mezo" and cell.get("clip") != grid["clip"][0]:
                continue  # MeZO does not clip: one run per (lr, steps)
            config = FinetuneConfig(method=method, epsilon=epsilon, **base, **cell)
            summary = Trainer(config, train=train_set, test=validation, caches=caches).run()
            rows.append(
                {
                    "task": task,
                    "method": method,
                    **cell,
                    "clip": cell["clip"] if method == "dpzero" else None,
                    "epsilon": epsilon if method == "dpzero" else None,
                    "accuracy": summary.test_accuracy,
                    "loss": summary.test_loss,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
            _write_choice_rows(rows, out, task)
    chosen = {}
    for method in ("mezo", "dpzero"):
        best = min(
            (r for r in rows if r["method"] == method),
            key=lambda r: (-r["accuracy"], r["loss"], r["steps"]),
        )
        chosen[method] = {k: best[k] for k in ("lr", "clip", "steps") if best[k] is not None}
        chosen[method]["held_out_accuracy"] = best["accuracy"]
    result = {
        "NOT_PRIVATE": NOT_PRIVATE,
        "selection": RECIPE_CHOICE,
        "task": task,
        "data_seed": seed,
        "train_rows": len(train_set),
        "held_out_rows": len(validation),
        "grid": grid,
        "candidates": {m: sum(r["method"] == m for r in rows) for m in ("mezo", "dpzero")},
        "epsilon": epsilon,
        "zero_shot_held_out_accuracy": rows[0]["accuracy"],
        "chosen": chosen,
    }
    (out / f"choice-{task}.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def _write_choice_rows(rows: list[dict], out: Path, task: str) -> None:
    with (out / f"private_choice-{task}.csv").open("w", newline="") as f:
        f.write("# " + NOT_PRIVATE + "\n")
        writer = csv.DictWriter(f, fieldnames=list(rows[-1]))
        writer.writeheader()
        writer.writerows(rows)


def write_curves(runs_dir: Path, out: Path, task: str) -> list[dict]:
    """``out/private_curves.csv`` and ``out/summary.md`` (first line: NOT PRIVATE) from the
    evaluation events of every run folder in ``runs_dir``."""
    rows = []
    for run in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        method, cell = _parse_cell(run.name)
        for line in (run / "metrics.jsonl").read_text().splitlines():
            event = json.loads(line)
            if event.get("event") == "eval":
                rows.append(
                    {
                        "method": method,
                        **cell,
                        "step": event["step"],
                        "accuracy": event["accuracy"],
                        "loss": event["loss"],
                        "epsilon": event["epsilon"],
                    }
                )
    fields = list(rows[0])
    out.mkdir(parents=True, exist_ok=True)
    with (out / "private_curves.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        NOT_PRIVATE,
        "",
        f"# {task}: validation curves (a fifth of the train split held out; the test split is "
        "not read)",
        "",
        "| " + " | ".join(fields) + " |",
        "|---" * len(fields) + "|",
    ]
    lines += ["| " + " | ".join(_fmt(r[k]) for k in fields) + " |" for r in rows]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    return rows


def _cell_name(method: str, cell: dict) -> str:
    return "_".join([method, *(f"{k}={v:g}" for k, v in cell.items())])


def _parse_cell(name: str) -> tuple[str, dict]:
    method, *pairs = name.split("_")
    cell = {k: float(v) for k, v in (p.split("=") for p in pairs)}
    return method, {k: int(v) if k == "steps" else v for k, v in cell.items()}


def feature_ceiling(data_dir: str, out: Path, *, task: str = "SST-2", seed: int = 42) -> dict:
    """The best a head on the frozen features can do: a logistic regression fitted (non-privately,
    scikit-learn, C = 0.1, 1, 10, 100) on ``task``'s cached sentence embeddings, scored on the full
    test split; ``ceiling.json`` (``ceiling-<task>.json`` for a task other than SST-2)."""
    probe = Trainer(
        FinetuneConfig(
            task=task,
            data_dir=data_dir,
            method="mezo",
            steps=1,
            train="head",
            seed=seed,
            progress=False,
            out=None,
        )
    )
    train = probe.train_cache.fill(progress=True)
    features = [torch.stack(train.rows).numpy(), torch.stack(probe.test_cache.rows).numpy()]
    labels = [probe.train_set.labels.numpy(), probe.eval_set().labels.numpy()]
    scores = {
        str(c): LogisticRegression(C=c, max_iter=5000)
        .fit(features[0], labels[0])
        .score(features[1], labels[1])
        for c in (0.1, 1.0, 10.0, 100.0)
    }
    result = {
        "task": task,
        "seed": seed,
        "test_examples": len(labels[1]),
        "accuracy_by_C": scores,
        "zero_shot": probe.zero_shot.accuracy,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / ("ceiling.json" if task == "SST-2" else f"ceiling-{task}.json")).write_text(
        json.dumps(result, indent=2)
    )
    print(json.dumps(result), flush=True)
    return result


def _write(rows: list[dict], out: Path, train: str, epsilon: float) -> None:
    fields = list(
        dict.fromkeys([*rows[-1], *(k for r in rows for k in r)])
    )  # a full cell's order first
    with (out / "rows.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        f"# Zeroth-order defaults for --train {train} (SST-2, DPZero ε = {epsilon:g}, MeZO)",
        "",
        f"Recipe selection: {SWEEP_SELECTION}. Each ε below is that run's own; a recipe chosen here and used on "
        "SST-2 carries this statement in its summary.json (`recipe_selection`). The private route (random "
        "stopping, dpnc.tune) is described in dpnc_reproduce.finetune_defaults; it was not run.",
        "",
        "| method | " + " | ".join(k for k in fields if k not in ("method",)) + " |",
        "|---" * len(fields) + "|",
    ]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(r.get(k)) for k in fields) + " |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")


def _fmt(v) -> str:
    return "" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--train", required=True, choices=sorted(GRIDS))
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--epsilon", type=float, default=6.0)
    parser.add_argument("--eval-examples", type=int, default=None)
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="Instead of the sweep: a logistic regression on the frozen features (the head's ceiling).",
    )
    parser.add_argument(
        "--validate",
        action="store_true",
        help="Instead of the sweep: --task's validation curves on a held-out fifth of its train split.",
    )
    parser.add_argument(
        "--task",
        default="SST-2",
        help="The task of --ceiling and --validate (the sweep is on SST-2).",
    )
    parser.add_argument(
        "--choose",
        default=None,
        help="Instead of the sweep: comma-separated tasks whose MeZO/DPZero recipes are chosen on a "
        "held-out fifth of their train split (CHOICE_GRID; NOT PRIVATE files).",
    )
    args = parser.parse_args()
    if args.choose:
        for task in args.choose.split(","):
            choose(args.data_dir, args.out, task=task, train=args.train, epsilon=args.epsilon)
        return
    if args.validate:
        validate(args.data_dir, args.out, task=args.task, train=args.train, epsilon=args.epsilon)
        return
    if args.ceiling:
        feature_ceiling(args.data_dir, args.out, task=args.task)
        return
    sweep(
        args.data_dir, args.train, args.out, epsilon=args.epsilon, eval_examples=args.eval_examples
    )


if __name__ == "__main__":
    main()
