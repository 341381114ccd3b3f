"""What the dpzero-dimension reproduction computes: its config, its tasks (one per task and trained
mode), its rows, and one task (:func:`run_one`): the mode's recipe chosen on a held-out part of the
training split, then every seed's zero-shot, MeZO and DPZero runs with that recipe. The trainer runs
are dpzero-lm's (:func:`dpnc_reproduce.dpzero_lm.run.run_trainer`), so a row here is an
:class:`~dpnc_reproduce.dpzero_lm.run.LMRow` with the mode, the phase and the per-step signal and
noise added."""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import statistics
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

from dpnc.lm import load_task
from dpnc.privacy import METHODS as ACCOUNTANTS
from dpnc.privacy import check_delta, check_epsilon, quiet_dp_accounting
from dpnc_reproduce.common import INTEGER, POSITIVE, check_axis, check_value, one_of
from dpnc_reproduce.dpzero_lm.run import LMConfig, LMGroup, LMRow, LMTask, run_trainer

TASKS = ("SST-2", "TREC")
SEEDS = (42, 13, 21)
# mode → (the trainer's --train, --top-k), in order of the trained dimension d on MiniLM
MODES = {
    "head": ("head", 1),
    "bias": ("bias", 1),
    "lora": ("lora", 1),
    "top-1": ("top-k", 1),
    "top-2": ("top-k", 2),
    "all": ("all", 1),
}
# Candidate step sizes and clipping thresholds per mode (the recipe grid, chosen on held-out
# training rows). The lr ranges scale roughly like 1/d from the measured head (0.1-0.3, d = 770) and
# top-1 (3e-4, d = 1.8M) recipes of docs/results/finetune-defaults. C spans the per-example
# directional derivatives' scale: the head's 0.5-2, and up to the paper's full-parameter C = 200
# above it, where MeZO's ‖ĝ‖ is 1-12 and C = 2 alone clipped 79-96 % of the scalars
# (docs/results/dpzero-dimension/gpu-all-modes; with {2, 20, 200} the held-out choice was 200 in 7
# of 8).
GRIDS: dict[str, dict[str, tuple[float, ...]]] = {
    "head": {"lr": (0.1, 0.3), "clip": (0.5, 2.0)},
    "bias": {"lr": (1e-3, 1e-2), "clip": (2.0, 20.0, 200.0)},
    "lora": {"lr": (1e-3, 1e-2), "clip": (2.0, 20.0, 200.0)},
    "top-1": {"lr": (1e-4, 3e-4), "clip": (2.0, 20.0, 200.0)},
    "top-2": {"lr": (1e-4, 3e-4), "clip": (2.0, 20.0, 200.0)},
    "all": {"lr": (1e-5, 3e-5), "clip": (2.0, 20.0, 200.0)},
}
GRID_SIZES = ("small", "first")  # first: each mode's first lr and C only (no choice; smoke tests)
SELECTION_SEED = 1  # the fixed permutation that holds out a part of the train split
SELECTION = (
    "recipe chosen non-privately on a held-out part of the training split (the test split is never read "
    "for it); ε excludes the choice"
)


def _help(text: str, **more) -> dict:
    return {"help": text, **more}


@dataclass(frozen=True)
class DimConfig:
    """The sweep. Defaults are ``--full``: SST-2 and TREC × seeds 42, 13, 21 × the six modes,
    zero-shot, MeZO, DPZero at ε = 6 and 2, T = 1000, B = 16; :data:`QUICK` is a smoke run
    (minutes)."""

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
            "Folder for each run's files (default: <out>/runs; in the library a temporary folder)."
        ),
    )
    tasks: tuple[str, ...] = field(
        default=TASKS, metadata=_help("Tasks, among " + ", ".join(TASKS) + ".")
    )
    modes: tuple[str, ...] = field(
        default=tuple(MODES),
        metadata=_help(
            "Trained parameters, among "
            + ", ".join(MODES)
            + " (top-k: the top k layers above a cached prefix; lora: "
            "rank 8 on query/value)."
        ),
    )
    seeds: tuple[int, ...] = field(
        default=SEEDS,
        metadata=_help(
            "k-shot data seeds (also the training seeds); the recipe is chosen on the first seed's train split."
        ),
    )
    epsilons: tuple[float, ...] = field(
        default=(6.0, 2.0), metadata=_help("DPZero's budgets ε (δ = --delta).")
    )
    steps: int = field(
        default=1000, metadata=_help("T of every zeroth-order run, selection runs included.")
    )
    batch_size: int = field(
        default=16, metadata=_help("Expected batch size B (Poisson), every method.")
    )
    smoothing: float = field(default=1e-3, metadata=_help("λ of the zeroth-order difference."))
    grid: str = field(
        default="small",
        metadata=_help(
            "The recipe grid: small (GRIDS: each mode's lr × C candidates) or first (its first candidate only)."
        ),
    )
    clips: tuple[float, ...] = field(
        default=(),
        metadata=_help(
            "DPZero's candidate clipping thresholds C for every mode instead of GRIDS' (empty: GRIDS')."
        ),
    )
    select_tasks: str = field(
        default="each",
        metadata=_help(
            "each: every task chooses its own recipes; first: the first task's recipes serve every task."
        ),
    )
    held_out: float = field(
        default=0.2, metadata=_help("Part of the train split held out to choose the recipe.")
    )
    fo_modes: tuple[str, ...] = field(
        default=(),
        metadata=_help(
            "Modes where DP-AdamW also runs, at the largest ε (the first-order baseline, its recipe fixed: --fo-lr, "
            "--fo-clip), beside DPZero's step time and peak memory; empty: none."
        ),
    )
    fo_steps: int = field(default=100, metadata=_help("DP-AdamW steps."))
    fo_lr: float = field(default=1e-3, metadata=_help("DP-AdamW step size."))
    fo_clip: float = field(default=1.0, metadata=_help("DP-AdamW clipping threshold C."))
    delta: float = field(
        default=1e-5, metadata=_help("Target δ of the private methods, in (0, 1).")
    )
    accountant: str = field(default="rdp", metadata=_help("rdp or pld: calibrates the noise."))
    max_length: int = field(default=64, metadata=_help("Tokens per sequence (>= 8)."))
    eval_examples: int | None = field(
        default=None,
        metadata=_help(
            "Test (and held-out) examples evaluated: a fixed seeded subset (default: all)."
        ),
    )
    threads: int = field(default=1, metadata=_help("Torch threads."))
    device: str = field(
        default="cpu",
        metadata=_help(
            "Where every run computes: cpu or cuda (one GPU; each run's peak GPU memory is recorded)."
        ),
    )

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Every value in its range (ValueError naming the field), before any run."""
        check_axis("tasks", self.tasks, one_of(TASKS))
        check_axis("modes", self.modes, one_of(tuple(MODES)))
        check_axis("seeds", self.seeds, INTEGER)
        if self.fo_modes:
            check_axis("fo_modes", self.fo_modes, one_of(self.modes))
        for eps in self.epsilons:
            check_epsilon(eps)
        for c in self.clips:
            check_value("clips", c, POSITIVE)
        check_delta(self.delta)
        check_value("grid", self.grid, one_of(GRID_SIZES))
        check_value("select_tasks", self.select_tasks, one_of(("each", "first")))
        check_value("accountant", self.accountant, one_of(ACCOUNTANTS))
        check_value("device", self.device, one_of(("cpu", "cuda")))
        for name in ("steps", "batch_size", "fo_steps", "threads"):
            check_value(name, getattr(self, name), INTEGER)
        for name in ("smoothing", "fo_lr", "fo_clip"):
            check_value(name, getattr(self, name), POSITIVE)
        check_value("held_out", self.held_out, ("in (0, 1)", lambda v: 0 < v < 1))
        check_value(
            "max_length", self.max_length, ("an integer >= 8", lambda v: INTEGER[1](v) and v >= 8)
        )
        if self.eval_examples is not None:
            check_value("eval_examples", self.eval_examples, INTEGER)


FULL = DimConfig()
QUICK = DimConfig(
    tasks=("SST-2",),
    modes=("head", "top-1"),
    seeds=(42,),
    epsilons=(6.0,),
    steps=30,
    batch_size=8,
    eval_examples=48,
    max_length=32,
)


@dataclass(frozen=True, order=True)
class DimTask:
    """The protocol's task: one (task, mode) in one process: its recipe choice, then every seed's
    runs."""

    task: str
    mode: str

    @property
    def name(self) -> str:
        return f"{self.task}-{self.mode}"


@dataclass(frozen=True)
class DimRow(LMRow):
    """One trainer run (dpzero-lm's row) and where it sits in the sweep.

    ``phase``: "select" (a recipe candidate trained on the train part and scored on the held-out
    part: its accuracy is on training rows, NOT private) or "test" (trained on the whole train
    split, scored on the test split). ``chosen``: the candidate the selection kept. ``signal_rms``:
    the root mean square of the released scalars c_t (MeZO: the batch's projected gradient, whose
    RMS estimates ‖∇L‖; DPZero: clipped mean + noise); ``noise_std``: DPZero's per-step noise σ·C/B
    (0 for MeZO). ``run_peak_rss_mib``: this run's own peak (the kernel's high-water mark reset
    before it; the process's running maximum where that cannot be reset); ``run_peak_gpu_mib``: on
    CUDA, the run's ``torch.cuda.max_memory_allocated`` (reset before it; NaN on the CPU)."""

    mode: str = ""
    phase: str = "test"
    chosen: bool = False
    signal_rms: float = math.nan
    noise_std: float = 0.0
    run_peak_rss_mib: float = math.nan
    run_peak_gpu_mib: float = math.nan


def folders(config: DimConfig) -> dict[str, list[int]]:
    """Task → the config's seeds with a k-shot folder (ValueError if a task has none)."""
    if config.data_dir is None:
        raise ValueError(
            "data_dir must be given (the folder with the LM-BFF <TASK>/k-shot-1k-test folders)"
        )
    out = {}
    for task in config.tasks:
        have = []
        for seed in config.seeds:
            try:
                load_task(task, config.data_dir, "train", seed=seed)
            except FileNotFoundError:
                continue
            have.append(seed)
        if not have:
            raise ValueError(
                f"{task}: none of the seeds {config.seeds} has a k-shot folder in {config.data_dir!r}"
            )
        out[task] = have
    return out


def tasks(config: DimConfig) -> list[DimTask]:
    """One task per (task, mode), tasks in the config's order, modes in the config's order."""
    folders(config)
    return [DimTask(t, m) for t in config.tasks for m in config.modes]


def cost(config: DimConfig, task: DimTask) -> float:
    per_step = {"head": 0.01, "top-1": 0.2, "top-2": 0.35, "bias": 1.0, "lora": 1.1, "all": 1.4}[
        task.mode
    ]
    runs = len(candidates(config, task.mode)) + len(config.seeds) * (1 + len(config.epsilons))
    return per_step * config.steps * runs


def candidates(config: DimConfig, mode: str) -> list[dict[str, float]]:
    """The recipe candidates of ``mode``: every (lr, C) of its grid (``grid="first"``: the first
    only)."""
    grid = GRIDS[mode]
    cells = [{"lr": lr, "clip": c} for lr in grid["lr"] for c in (config.clips or grid["clip"])]
    return cells[:1] if config.grid == "first" else cells


def lm_config(
    config: DimConfig, mode: str, lr: float, clip: float, runs_dir: str | None = None
) -> LMConfig:
    """dpzero-lm's config of one (mode, recipe): the trainer's settings, every one stated."""
    train, top_k = MODES[mode]
    return LMConfig(
        data_dir=config.data_dir,
        model=config.model,
        runs_dir=runs_dir,
        train=train,
        top_k=top_k,
        tasks=tuple(config.tasks),
        recipes="trainer",
        seeds=tuple(config.seeds),
        epsilons=tuple(config.epsilons),
        steps=config.steps,
        batch_size=config.batch_size,
        lr=lr,
        smoothing=config.smoothing,
        clip=clip,
        fo_steps=config.fo_steps,
        fo_lr=config.fo_lr,
        fo_clip=config.fo_clip,
        delta=config.delta,
        accountant=config.accountant,
        max_length=config.max_length,
        eval_examples=config.eval_examples,
        threads=config.threads,
        device=config.device,
    )


def split_train(config: DimConfig, task: str, seed: int):
    """(train part, held-out part) of ``task``'s k-shot ``seed`` train split: a fixed permutation
    (:data:`SELECTION_SEED`), ``held_out`` of the rows held out. Reads the train split only."""
    full = load_task(task, config.data_dir, "train", seed=seed)
    order = torch.randperm(len(full), generator=torch.Generator().manual_seed(SELECTION_SEED))
    k = max(int(len(full) * config.held_out), 2)
    return full.subset(order[k:]), full.subset(order[:k])


def select(
    config: DimConfig, task: DimTask, seed: int, runs_dir: Path
) -> tuple[list[DimRow], dict]:
    """Every candidate of the mode's grid, MeZO and DPZero at the largest ε, trained on the train
    part of ``seed``'s split and scored on its held-out part; per method the highest held-out
    accuracy wins (ties: lower held-out loss, then the smaller lr). DPZero's choice serves every ε.
    The rows (phase "select", the winners ``chosen``) and {method: {"lr", "clip"}}."""
    data = split_train(config, task.task, seed)
    eps = max(config.epsilons)
    rows: list[DimRow] = []
    caches = None
    for method in ("mezo", "dpzero"):
        cells = candidates(config, task.mode)
        if method == "mezo":  # MeZO does not clip: one run per lr
            cells = [c for i, c in enumerate(cells) if c["lr"] not in [d["lr"] for d in cells[:i]]]
        for cell in cells:
            lm = lm_config(config, task.mode, cell["lr"], cell["clip"])
            run = LMTask(task.task, seed, method, eps if method == "dpzero" else None)
            group = LMGroup(task.task, seed, (run,))
            name = f"select-{task.mode}-{run.run}-lr{cell['lr']:g}-C{cell['clip']:g}"
            row, trainer = _run(
                config, lm, run, group, runs_dir / name, caches, task.mode, "select", data
            )
            caches = caches or _caches(trainer)
            rows.append(row)
    chosen = {}
    for method in ("mezo", "dpzero"):
        best = min(
            (r for r in rows if r.method == method), key=lambda r: (-r.accuracy, r.test_loss, r.lr)
        )
        chosen[method] = {"lr": best.lr, "clip": best.clip if method == "dpzero" else None}
        rows[rows.index(best)] = dataclasses.replace(best, chosen=True)
    return rows, chosen


def run_one(config: DimConfig, task: DimTask, recipes: dict | None = None) -> tuple[DimRow, ...]:
    """The task's recipe choice (unless ``recipes`` is given), then per seed: zero-shot, MeZO,
    DPZero at every ε (and DP-AdamW where asked), under ``config.runs_dir`` or a temporary
    folder."""
    with warnings.catch_warnings(), quiet_dp_accounting():
        warnings.simplefilter("ignore")
        if config.runs_dir is not None:
            return _run_task(config, task, Path(config.runs_dir), recipes)
        with tempfile.TemporaryDirectory(prefix="dpzero-dimension-") as tmp:
            return _run_task(config, task, Path(tmp), recipes)


def _run_task(
    config: DimConfig, task: DimTask, runs_dir: Path, recipes: dict | None
) -> tuple[DimRow, ...]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        seeds = folders(dataclasses.replace(config, tasks=(task.task,)))[task.task]
        rows: list[DimRow] = []
        if recipes is None:
            select_task = (
                task if config.select_tasks == "each" else DimTask(config.tasks[0], task.mode)
            )
            selected, recipes = select(config, select_task, seeds[0], runs_dir)
            rows += selected if select_task == task else []
        for seed in seeds:
            rows += _seed_runs(config, task, seed, recipes, runs_dir)
    finally:
        torch.set_num_threads(threads)
    return tuple(rows)


def _seed_runs(
    config: DimConfig, task: DimTask, seed: int, recipes: dict, runs_dir: Path
) -> list[DimRow]:
    """One seed's runs of the task: MeZO first (it fills the caches the others reuse), then DPZero
    at every ε, DP-AdamW, and zero-shot."""
    runs = [("mezo", None), *(("dpzero", e) for e in config.epsilons)]
    runs += [("dp-adamw", max(config.epsilons))] if task.mode in config.fo_modes else []
    runs += [("zero-shot", None)]
    rows, caches = [], None
    for method, eps in runs:
        r = recipes["mezo" if method in ("mezo", "zero-shot") else "dpzero"]
        lm = lm_config(config, task.mode, r["lr"], r["clip"])
        run = LMTask(task.task, seed, method, eps)
        first_order = (
            method == "dp-adamw"
        )  # its own trainer, uncached: per-example gradients of the whole mode
        if first_order:
            lm = dataclasses.replace(lm, lr=None, clip=None)
        row, trainer = _run(
            config,
            lm,
            run,
            LMGroup(task.task, seed, (run,)),
            runs_dir / f"{task.mode}-{run.run}",
            None if first_order else caches,
            task.mode,
            "test",
        )
        if not first_order:
            caches = caches or _caches(trainer)
        rows.append(row)
        del trainer
        gc.collect()
    return rows


def _caches(trainer):
    return None if trainer.train_cache is None else (trainer.train_cache, trainer.test_cache)


def _run(
    config,
    lm: LMConfig,
    run: LMTask,
    group: LMGroup,
    run_dir: Path,
    caches,
    mode: str,
    phase: str,
    data=None,
) -> tuple[DimRow, object]:
    """One trainer run through dpzero-lm, its row extended (mode, phase, signal and noise, its own
    peak RSS)."""
    reset = _reset_peak()
    cuda = config.device == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    row, trainer = run_trainer(lm, run, group, run_dir, caches, data)
    gpu_peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else math.nan
    released = [
        r.released for r in trainer.history if r.released is not None and math.isfinite(r.released)
    ]
    signal = math.sqrt(statistics.fmean(v * v for v in released)) if released else math.nan
    noise = (
        row.noise_multiplier * row.clip / row.batch_size
        if run.method == "dpzero" and row.batch_size
        else 0.0
    )
    peak = _peak_rss_mib() if reset else row.peak_rss_mib
    fields = {f.name: getattr(row, f.name) for f in dataclasses.fields(LMRow)}
    fields["group"] = f"{run.task}-{mode}"
    fields["run"] = f"{phase}-{mode}-{row.run}" if phase == "select" else f"{mode}-{row.run}"
    return DimRow(
        **fields,
        mode=mode,
        phase=phase,
        signal_rms=signal,
        noise_std=noise,
        run_peak_rss_mib=peak,
        run_peak_gpu_mib=gpu_peak,
    ), trainer


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark of this process (Linux: 5 > /proc/self/clear_refs); whether
    it could."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return _peak_rss_mib() is not None
    except OSError:
        return False


def _peak_rss_mib() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None
