"""What the dpzero-lm reproduction computes: its config, tasks (a group of runs per k-shot folder)
and rows, each run's trainer config, and one group (:func:`run_one`)."""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
import resource
import shutil
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

from dpnc.lm import JOURNAL, METRICS, PRIVATE_STATS, ZO_RECIPES, FinetuneConfig, Trainer, load_task
from dpnc.privacy import METHODS as ACCOUNTANTS
from dpnc.privacy import check_delta, check_epsilon, quiet_dp_accounting
from dpnc_reproduce.common import INTEGER, NATURAL, POSITIVE, check_axis, check_value, one_of

TASKS = ("SST-2", "SST-5", "SNLI", "MNLI", "RTE", "TREC")  # the paper's column order
PAPER_SEEDS = (42, 13, 21)
PRIVATE = ("dpzero", "dp-adamw")
FO_METHODS = ("adamw", "dp-adamw")
METHOD_ORDER = ("zero-shot", "mezo", "dpzero", "adamw", "dp-adamw")
TRAIN_MODES = (
    "all",
    "bias",
    "top-k",
    "head",
    "lora",
)  # = dpnc.lm.trainable.TRAIN_MODES (a test checks they agree)
LOSS_POINTS = (
    200  # per-step training losses kept per run, as means over equal windows (result.json, figure)
)


# Per-task zeroth-order recipes for --train head (``recipes="per-task"``, the default): for each
# task, MeZO's and DPZero's (lr, C, T) chosen by ``python -m dpnc_reproduce.finetune_defaults
# --choose`` on a held-out fifth of the task's k-shot seed-42 train split (never the test split): 3
# step sizes × 2 clipping thresholds × 2 step counts for DPZero at ε = 6 (12 candidates), 3 × 2 for
# MeZO (6; MeZO does not clip); the highest held-out accuracy wins (ties: lower held-out loss, then
# fewer steps). DPZero at ε = 2 uses DPZero's ε = 6 choice. The evidence (NOT PRIVATE: un-noised
# accuracies on training rows) is docs/results/dpzero-lm-tasks/recipe-choice/. The choice is not
# private: the ε of every run excludes it (RECIPE_CHOICE, stated next to ε). B = 64 and λ = 1e-3 are
# the trainer's.
RECIPE_CHOICE = "recipe chosen non-privately on held-out training rows; ε excludes the choice"
RECIPE_SOURCES = ("per-task", "trainer")
TASK_RECIPES: dict[str, dict[str, dict[str, float]]] = {
    # task: {"mezo": {lr, steps}, "dpzero": {lr, clip, steps}}   (recipe-choice/choice-<task>.json)
    "SST-2": {
        "mezo": {"lr": 0.1, "steps": 2000},
        "dpzero": {"lr": 0.3, "clip": 0.5, "steps": 2000},
    },
    "SST-5": {"mezo": {"lr": 0.03, "steps": 5000}, "dpzero": {"lr": 0.1, "clip": 2, "steps": 5000}},
    "SNLI": {"mezo": {"lr": 0.03, "steps": 5000}, "dpzero": {"lr": 0.3, "clip": 2, "steps": 5000}},
    "MNLI": {"mezo": {"lr": 0.1, "steps": 5000}, "dpzero": {"lr": 0.3, "clip": 0.5, "steps": 5000}},
    "RTE": {"mezo": {"lr": 0.1, "steps": 2000}, "dpzero": {"lr": 0.3, "clip": 2, "steps": 2000}},
    "TREC": {"mezo": {"lr": 0.1, "steps": 5000}, "dpzero": {"lr": 0.1, "clip": 2, "steps": 5000}},
}


def _help(text: str, **more) -> dict:
    return {"help": text, **more}


def _recipe(what: str) -> dict:
    return _help(
        f"{what} (default: the trainer's, i.e. `dpnc finetune`'s, for --train: "
        "dpnc.lm.config.ZO_RECIPES for MeZO/DPZero)."
    )


@dataclass(frozen=True)
class LMConfig:
    """The runs. Defaults are ``--full``: SST-2, SST-5, SNLI, MNLI, RTE, TREC × seeds 42, 13, 21,
    zero-shot, MeZO, DPZero at ε = 6 and 2 with each task's recipe for ``--train head``
    (:data:`TASK_RECIPES`; Table 2 only; Tables 3 and 5 with ``fo_methods`` and ``sphere_tasks``);
    :data:`QUICK` is SST-2, seed 42, 300 steps (a smoke run). Each field's ``help`` says what it is;
    a field left None takes the trainer's default."""

    data_dir: str | None = field(
        default=None,
        metadata=_help(
            "Folder with the LM-BFF <TASK>/k-shot-1k-test folders (required to run).",
            required=True,
            folder=True,
        ),
    )
    model: str | None = field(
        default=None,
        metadata=_help(
            "Local Hugging Face encoder folder (default: the offline all-MiniLM-L6-v2).",
            folder=True,
        ),
    )
    runs_dir: str | None = field(
        default=None,
        metadata=_help(
            "Folder for each run's metrics.jsonl and summary.json (default: <out>/runs; in the library a temporary "
            "folder, removed)."
        ),
    )
    train: str = field(
        default="head",
        metadata=_help(
            "Which parameters are trained (dpnc finetune --train): " + ", ".join(TRAIN_MODES) + "."
        ),
    )
    top_k: int = field(
        default=1, metadata=_help("Layers trained by --train top-k (dpnc finetune --top-k).")
    )
    tasks: tuple[str, ...] = field(
        default=TASKS,
        metadata=_help(
            "Table 2's tasks (zero-shot, MeZO, DPZero at every ε, Gaussian directions), among "
            + ", ".join(TASKS)
            + "."
        ),
    )
    recipes: str = field(
        default="per-task",
        metadata=_help(
            "per-task: each task's MeZO/DPZero lr, C and T from TASK_RECIPES (chosen non-privately "
            "on held-out training rows; ε excludes the choice); trainer: the trainer's recipe for "
            "--train. --lr, --clip, --steps override "
            "either."
        ),
    )
    shared_data: bool = field(
        default=True,
        metadata=_help(
            "A seed without a k-shot folder for a task (SNLI and MNLI ship seed 42 only) trains with that seed on the "
            "task's first available folder, so its seed spread is training randomness only; --no-shared-data skips "
            "it."
        ),
    )
    sphere_tasks: tuple[str, ...] = field(
        default=(),
        metadata=_help(
            "Table 5's tasks (DPZero with sphere directions at every ε; the Gaussian runs are Table 2's), e.g. "
            "SST-2,SST-5; empty: no Table 5."
        ),
    )
    seeds: tuple[int, ...] = field(
        default=PAPER_SEEDS,
        metadata=_help(
            "k-shot data seeds (also the training seeds); a seed without a folder for a task trains on the task's "
            "first folder (--shared-data) or is skipped, and said so (SNLI and MNLI ship seed 42 only)."
        ),
    )
    epsilons: tuple[float, ...] = field(
        default=(6.0, 2.0), metadata=_help("DPZero's budgets ε (δ = --delta).")
    )
    fo_methods: tuple[str, ...] = field(
        default=(),
        metadata=_help(
            "Table 3's first-order methods (adamw, dp-adamw), run on SST-2 with the first seed beside MeZO and DPZero, "
            "each run in a group (process) of its own for its peak memory; empty: no Table 3."
        ),
    )
    table3_epsilon: float = field(default=2.0, metadata=_help("ε of Table 3's private methods."))
    steps: int | None = field(
        default=None, metadata=_recipe("Zeroth-order steps T (the paper: 10000)")
    )
    fo_steps: int | None = field(
        default=None,
        metadata=_help("AdamW / DP-AdamW steps (default: the trainer's, 1000 as the paper)."),
    )
    batch_size: int | None = field(
        default=None,
        metadata=_recipe(
            "Expected batch size B of the Poisson batches, every method (the paper: 64)"
        ),
    )
    lr: float | None = field(default=None, metadata=_recipe("MeZO / DPZero step size"))
    smoothing: float | None = field(
        default=None, metadata=_recipe("λ of the zeroth-order difference")
    )
    clip: float | None = field(default=None, metadata=_recipe("DPZero's clipping threshold C"))
    fo_lr: float | None = field(
        default=None, metadata=_help("AdamW / DP-AdamW step size (default: the trainer's).")
    )
    fo_clip: float | None = field(
        default=None, metadata=_help("DP-AdamW's clipping threshold C (default: the trainer's).")
    )
    delta: float = field(
        default=1e-5, metadata=_help("Target δ of the private methods, in (0, 1).")
    )
    accountant: str = field(default="rdp", metadata=_help("rdp or pld: calibrates the noise."))
    freeze_embeddings: bool = field(
        default=False,
        metadata=_help(
            "Leave the word embeddings untrained (every method alike; --train head never trains them)."
        ),
    )
    max_length: int = field(default=128, metadata=_help("Tokens per sequence (>= 8)."))
    microbatch: int = field(default=4, metadata=_help("Examples per vmapped chunk (DP-AdamW)."))
    eval_examples: int | None = field(
        default=None,
        metadata=_help(
            "Test examples evaluated (a fixed seeded subset; default: the whole test split: 872 SST-2, 1000 SST-5, "
            "500 TREC)."
        ),
    )
    threads: int = field(default=1, metadata=_help("Torch threads per group's process."))
    device: str = field(
        default="cpu",
        metadata=_help("Where every run computes: cpu or cuda (dpnc finetune --device)."),
    )
    isolate: bool = field(
        default=True,
        metadata=_help(
            "Each k-shot folder's group of runs in a fresh subprocess (its own peak memory); --no-isolate: groups "
            "share processes (with --workers 1, this one: faster for smoke tests; the peak memory is then the "
            "process's running maximum)."
        ),
    )

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Every value in its range (ValueError naming the field), before any run."""
        check_value("train", self.train, one_of(TRAIN_MODES))
        check_value("top_k", self.top_k, INTEGER)
        check_value("recipes", self.recipes, one_of(RECIPE_SOURCES))
        for name in ("tasks", "sphere_tasks"):  # may be empty (no Table 2, no Table 5)
            for t in getattr(self, name):
                check_value(name, t, one_of(TASKS))
        for m in self.fo_methods:  # may be empty (no Table 3)
            check_value("fo_methods", m, one_of(FO_METHODS))
        if not (self.tasks or self.sphere_tasks or self.fo_methods):
            raise ValueError("nothing to run: tasks, sphere_tasks and fo_methods are all empty")
        check_axis("seeds", self.seeds, NATURAL)
        check_axis("epsilons", self.epsilons, POSITIVE)
        check_epsilon(self.table3_epsilon, "table3_epsilon")
        check_delta(self.delta)
        for name in ("lr", "smoothing", "clip", "fo_lr", "fo_clip"):
            if getattr(self, name) is not None:
                check_value(name, getattr(self, name), POSITIVE)
        check_value("accountant", self.accountant, one_of(ACCOUNTANTS))
        check_value("device", self.device, one_of(("cpu", "cuda")))
        for name in ("steps", "fo_steps", "batch_size", "eval_examples"):
            if getattr(self, name) is not None:
                check_value(name, getattr(self, name), INTEGER)
        for name in ("threads", "microbatch"):
            check_value(name, getattr(self, name), INTEGER)
        check_value(
            "max_length", self.max_length, ("an integer >= 8", lambda v: INTEGER[1](v) and v >= 8)
        )


FULL = LMConfig()
QUICK = LMConfig(tasks=("SST-2",), seeds=(42,), steps=300)


@dataclass(frozen=True, order=True)
class LMTask:
    """One trainer run: a method on a task's k-shot seed (ε for the private methods; direction for
    DPZero)."""

    task: str
    seed: int
    method: str
    epsilon: float | None = None
    direction: str = "gaussian"
    data_seed: int | None = (
        None  # the k-shot folder's seed, where it is not ``seed`` (--shared-data)
    )

    @property
    def run(self) -> str:
        eps = "" if self.epsilon is None else f"-eps{self.epsilon:g}"
        data = "" if self.data_seed in (None, self.seed) else f"-data{self.data_seed}"
        return f"{self.task}-{self.seed}{data}-{self.method}{eps}{'-sphere' if self.direction == 'sphere' else ''}"

    @property
    def folder_seed(self) -> int:
        return self.seed if self.data_seed is None else self.data_seed


@dataclass(frozen=True)
class LMGroup:
    """The protocol's task: runs on one k-shot folder (``task``, ``seed``: the folder's) made in one
    process, sharing the frozen-prefix caches; their rows come back in ``runs`` order."""

    task: str
    seed: int
    runs: tuple[LMTask, ...]

    @property
    def name(self) -> str:
        return self.runs[0].run if len(self.runs) == 1 else f"{self.task}-{self.seed}"


@dataclass(frozen=True)
class LMRow:
    """One run's results; statistics marked "not private" are un-noised training-data statistics."""

    run: str
    group: str  # the LMGroup (process) it ran in: peak memory is that process's running maximum
    task: str
    seed: int
    method: str
    epsilon: float | None
    direction: str
    train: str  # which parameters were trained (dpnc.lm.trainable)
    parameters_trained: int
    n: int
    steps: int
    batch_size: int
    lr: float | None  # the values the run used (None where the method has none)
    clip: float | None
    smoothing: float | None
    accuracy: float  # % on the test examples
    zero_shot_accuracy: float  # % of this run's own untrained model on the same examples
    test_loss: float
    test_examples: int
    seconds_per_step: float  # not private, as the two below
    median_seconds_per_step: float
    min_seconds_per_step: float
    peak_rss_mib: float
    wall_seconds: (
        float  # the trainer built (caches filled, when this run filled them), trained, evaluated
    )
    delta: float
    sampling_rate: float
    noise_multiplier: float
    epsilon_rdp: float
    epsilon_pld: float
    releases: int
    private: bool
    nonfinite: int
    final_train_loss: float  # not private
    clipped_fraction: float  # not private
    loss_every: int = 1  # steps per point of train_losses
    train_losses: tuple[float, ...] = field(
        default=(), metadata={"csv": False}
    )  # window means, not private
    # per test example, "1" right / "0" wrong (the trainer's evaluation order): for paired claims;
    # "" in old results
    correct: str = field(default="", metadata={"csv": False})
    data_seed: int | None = None  # the k-shot folder's seed (None in old results: ``seed``)


def seeds_available(config: LMConfig) -> dict[str, list[int]]:
    """Task → the config's seeds with a k-shot folder, for every task the config needs."""
    if config.data_dir is None:
        raise ValueError(
            "data_dir must be given (the folder with the LM-BFF <TASK>/k-shot-1k-test folders)"
        )
    seeds_of: dict[str, list[int]] = {}
    for task in dict.fromkeys(
        [*config.tasks, *config.sphere_tasks, *(["SST-2"] if config.fo_methods else [])]
    ):
        seeds_of[task] = []
        for seed in config.seeds:
            try:
                load_task(task, config.data_dir, "train", seed=seed)
            except FileNotFoundError:
                continue
            seeds_of[task].append(seed)
        if not seeds_of[task]:
            raise ValueError(
                f"{task}: none of the seeds {config.seeds} has a k-shot folder in {config.data_dir!r}"
            )
    return seeds_of


def folders(config: LMConfig) -> dict[str, list[tuple[int, int]]]:
    """Task → (seed, k-shot folder seed) for every seed of the config the task runs: the seed's own
    folder, else (``shared_data``) the task's first available folder, else none (skipped)."""
    of = seeds_available(config)
    return {
        task: [
            (s, s if s in have else have[0])
            for s in config.seeds
            if s in have or config.shared_data
        ]
        for task, have in of.items()
    }


def recipe(config: LMConfig, task: str, method: str) -> dict[str, float | None]:
    """lr, clip and steps of a zeroth-order run: the config's value where given, else the task's
    :data:`TASK_RECIPES` entry for the method (``recipes="per-task"``; DPZero's at every ε), else
    None (the trainer's default). MeZO has no clip."""
    table = _recipe_table(config, task, method)
    out = {
        k: getattr(config, k) if getattr(config, k) is not None else table.get(k)
        for k in ("lr", "clip", "steps")
    }
    if out["steps"] is not None:
        out["steps"] = int(out["steps"])
    return out


def per_task_recipe(config: LMConfig, task: str, method: str) -> bool:
    """Whether a run takes any of its settings from :data:`TASK_RECIPES` (so its ε excludes the
    choice)."""
    table = _recipe_table(config, task, method)
    return any(getattr(config, k) is None and k in table for k in ("lr", "clip", "steps"))


def _recipe_table(config: LMConfig, task: str, method: str) -> dict[str, float]:
    """The task's :data:`TASK_RECIPES` entry for the method, if the config takes per-task recipes
    (else empty)."""
    return TASK_RECIPES.get(task, {}).get(method, {}) if config.recipes == "per-task" else {}


def finetune_config(config: LMConfig, task: LMTask, out: str | None):
    """The :class:`~dpnc.lm.train.FinetuneConfig` of one run (None fields: the trainer's
    defaults)."""
    first_order = task.method in FO_METHODS
    kwargs = dict(
        task=task.task,
        data_dir=config.data_dir,
        method=task.method,
        model=config.model,
        seed=task.seed,
        data_seed=task.folder_seed,
        train=config.train,
        top_k=config.top_k,
        max_length=config.max_length,
        freeze_embeddings=config.freeze_embeddings,
        eval_examples=config.eval_examples,
        delta=config.delta,
        accountant=config.accountant,
        out=out,
        progress=False,
        device=config.device,
        # Time per step and the training-loss curve are training-data statistics: NOT private,
        # labelled so in every output. Each run is a new run: an earlier one's leftovers are moved
        # aside.
        log_private_stats=True,
        new_run=True,
    )
    zo = recipe(config, task.task, task.method) if task.method in ("mezo", "dpzero") else {}
    if task.method != "zero-shot":
        kwargs.update(
            steps=config.fo_steps if first_order else zo["steps"],
            batch_size=config.batch_size,
            lr=config.fo_lr if first_order else zo["lr"],
            direction=task.direction,
            microbatch=config.microbatch,
        )
        if not first_order:
            kwargs.update(smoothing=config.smoothing)
        if not first_order and per_task_recipe(config, task.task, task.method):
            kwargs.update(recipe_selection=RECIPE_CHOICE)
    if task.method == "dpzero":
        kwargs.update(clip=zo["clip"], epsilon=task.epsilon)
    if task.method == "dp-adamw":
        kwargs.update(clip=config.fo_clip, epsilon=task.epsilon)
    return FinetuneConfig(**kwargs)


def tasks(config: LMConfig) -> list[LMGroup]:
    """One group per k-shot folder (task, seed) with every run on it (Tables 2 and 5 share runs), in
    the paper's task order and the config's seed order; Table 3's runs, when asked for, a group
    each."""
    seeds_of = folders(config)
    table3: set[LMTask] = set()
    if config.fo_methods:
        (seed, data), eps = seeds_of["SST-2"][0], config.table3_epsilon
        table3 = {
            LMTask("SST-2", seed, m, eps if m in PRIVATE else None, data_seed=_data(seed, data))
            for m in ("mezo", "dpzero", *config.fo_methods)
        }
    groups_of: dict[tuple[str, int], set[LMTask]] = {}
    for task in config.tasks:
        for seed, data in seeds_of[task]:
            runs = groups_of.setdefault((task, data), set())
            d = _data(seed, data)
            runs.update(
                {
                    LMTask(task, seed, "zero-shot", data_seed=d),
                    LMTask(task, seed, "mezo", data_seed=d),
                }
            )
            runs.update(LMTask(task, seed, "dpzero", eps, data_seed=d) for eps in config.epsilons)
    for task in config.sphere_tasks:
        for seed, data in seeds_of[task]:
            for eps in config.epsilons:
                d = _data(seed, data)
                groups_of.setdefault((task, data), set()).update(
                    {
                        LMTask(task, seed, "dpzero", eps, data_seed=d),
                        LMTask(task, seed, "dpzero", eps, "sphere", data_seed=d),
                    }
                )
    order = sorted(groups_of, key=lambda f: (TASKS.index(f[0]), config.seeds.index(f[1])))

    def within_group(t: LMTask) -> tuple:
        return (config.seeds.index(t.seed), *_run_order(t))

    groups = [
        LMGroup(t, s, tuple(sorted(groups_of[t, s] - table3, key=within_group)))
        for t, s in order
        if groups_of[t, s] - table3
    ]
    return groups + [LMGroup(t.task, t.folder_seed, (t,)) for t in sorted(table3, key=_run_order)]


def cost(config: LMConfig, group: LMGroup) -> float:
    """The group's total steps (+1 a run): the longest groups start first."""
    return float(sum(_steps(config, t) + 1 for t in group.runs))


def run_one(config: LMConfig, group: LMGroup) -> tuple[LMRow, ...]:
    """The group's runs, quietly; under ``config.runs_dir``, or a temporary folder (read back, then
    removed)."""
    with warnings.catch_warnings(), quiet_dp_accounting():
        warnings.simplefilter("ignore")
        if config.runs_dir is not None:
            return run_group(config, group, Path(config.runs_dir))
        with tempfile.TemporaryDirectory(prefix="dpzero-lm-") as tmp:
            return run_group(config, group, Path(tmp))


def run_group(config: LMConfig, group: LMGroup, runs_dir: Path) -> tuple[LMRow, ...]:
    """Every run of ``group`` in this process (files under ``runs_dir/<run>``), the frozen-prefix
    caches computed by the first training run and handed to the others; the rows in ``group.runs``
    order."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    rows: dict[LMTask, LMRow] = {}
    caches = None
    try:  # a training run first: a zero-shot trainer computes no train cache
        for task in sorted(group.runs, key=lambda t: t.method == "zero-shot"):
            rows[task], made = train(config, task, group, runs_dir / task.run, caches)
            caches = caches or made
            # the finished trainer (its model: a reference cycle) before the next one is built
            gc.collect()
    finally:
        torch.set_num_threads(threads)
    return tuple(rows[t] for t in group.runs)


def train(
    config: LMConfig, task: LMTask, group: LMGroup, run_dir: Path, caches=None, data=None
) -> tuple[LMRow, tuple | None]:
    """One run in this process: build the trainer (on ``caches``, if given), train, evaluate, and
    what it cost; also the trainer's (train, test) caches, for the group's next runs (None if it has
    none). ``data``: a (train, test) pair of datasets to use instead of the task's k-shot folder
    (e.g. a held-out part of the train split, to choose a recipe; n is then the train part's
    size)."""
    row, trainer = run_trainer(config, task, group, run_dir, caches, data)
    return row, None if trainer.train_cache is None else (trainer.train_cache, trainer.test_cache)


def run_trainer(
    config: LMConfig,
    task: LMTask,
    group: LMGroup,
    run_dir: Path,
    caches=None,
    data=None,
    noise=None,
) -> tuple[LMRow, Trainer]:
    """:func:`train`, returning the finished trainer itself (its step history) instead of its
    caches. ``noise``: the trainer's noise source (default: a secret one); a non-secret source marks
    the run not private."""
    for name in (
        METRICS,
        PRIVATE_STATS,
        "summary.json",
    ):  # fresh output files (the trainer appends)
        (run_dir / name).unlink(missing_ok=True)
    start = time.perf_counter()
    try:
        fc = finetune_config(config, task, str(run_dir))
        if data is not None:
            fc = dataclasses.replace(fc, n=len(data[0]))
        trainer = Trainer(
            fc,
            caches=caches,
            noise=noise,
            **({} if data is None else {"train": data[0], "test": data[1]}),
        )
        summary = trainer.run()
    finally:
        # The fine-tuned weights and the journal (its ledger is in the row) are not results.
        shutil.rmtree(run_dir / "model", ignore_errors=True)
        (run_dir / JOURNAL).unlink(missing_ok=True)
    wall = time.perf_counter() - start
    c = trainer.config
    # Step times are private statistics (they reveal the secret batches): the trainer keeps them
    # only because the reproduction logs private statistics to measure its runs, and they are
    # published here labelled not private.
    step_seconds = [r.seconds for r in trainer.history if r.seconds is not None]
    trained = summary.steps > 0
    every, losses = _windows(_losses(run_dir / PRIVATE_STATS))
    row = LMRow(
        run=task.run,
        group=group.name,
        task=task.task,
        seed=task.seed,
        method=task.method,
        epsilon=task.epsilon,
        direction=task.direction,
        train=summary.train,
        parameters_trained=summary.trained_parameters,
        n=summary.n,
        steps=summary.steps,
        batch_size=summary.batch_size if trained else 0,
        lr=c.lr if trained else None,
        clip=c.clip if task.method in PRIVATE else None,
        smoothing=c.smoothing if task.method in ("mezo", "dpzero") else None,
        accuracy=100 * summary.test_accuracy,
        zero_shot_accuracy=100 * summary.zero_shot_accuracy,
        test_loss=summary.test_loss,
        test_examples=summary.test_examples,
        seconds_per_step=statistics.mean(step_seconds) if step_seconds else 0.0,
        median_seconds_per_step=statistics.median(step_seconds) if step_seconds else 0.0,
        min_seconds_per_step=min(step_seconds) if step_seconds else 0.0,
        peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        wall_seconds=wall,
        delta=summary.delta,
        sampling_rate=summary.batch_size / summary.n if trained else 0.0,
        noise_multiplier=summary.noise_multiplier if summary.noise_multiplier is not None else 0.0,
        epsilon_rdp=_finite(summary.epsilon_rdp),
        epsilon_pld=_finite(summary.epsilon_pld),
        releases=summary.releases,
        private=summary.private,
        nonfinite=trainer.nonfinite or 0,
        final_train_loss=_tail_mean([r.loss for r in trainer.history]),
        clipped_fraction=_tail_mean(
            [r.clipped_fraction for r in trainer.history if r.clipped_fraction is not None]
        ),
        loss_every=every,
        train_losses=losses,
        correct=summary.test_correct,
        data_seed=task.folder_seed,
    )
    return row, trainer


def _run_order(t: LMTask) -> tuple:
    """Zero-shot, MeZO, DPZero (largest ε first, Gaussian before sphere), AdamW, DP-AdamW."""
    return METHOD_ORDER.index(t.method), -(t.epsilon or 0.0), t.direction != "gaussian"


def _data(seed: int, data: int) -> int | None:
    return None if data == seed else data


def _steps(config: LMConfig, task: LMTask) -> int:
    """The steps the run will take (its config resolved by the task's recipe, then the trainer's
    defaults)."""
    if task.method == "zero-shot":
        return 0
    if task.method in FO_METHODS:
        return (
            config.fo_steps if config.fo_steps is not None else 1000
        )  # FinetuneConfig's first-order default
    steps = recipe(config, task.task, task.method)["steps"]
    return steps if steps is not None else ZO_RECIPES[config.train]["steps"]


def _losses(path: Path) -> list[float]:
    """Per-step training losses from a run's ``private_train_stats.jsonl`` (NOT private
    statistics)."""
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [float(r["loss"]) for r in rows if r.get("event") == "step"]


def _windows(values: list[float], points: int = LOSS_POINTS) -> tuple[int, tuple[float, ...]]:
    """(k, means of ``values`` over consecutive windows of k) with k the smallest giving at most
    ``points`` means (the last window may be shorter): a 5000-step curve kept in result.json at 200
    points."""
    k = max(math.ceil(len(values) / points), 1)
    return k, tuple(statistics.fmean(values[i : i + k]) for i in range(0, len(values), k))


def _finite(v) -> float:
    return math.inf if v is None else float(v)


def _tail_mean(values: list) -> float:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return math.nan
    k = max(len(vals) // 10, 1)
    return statistics.fmean(vals[-k:])
