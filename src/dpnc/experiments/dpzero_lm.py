"""DPZero paper, language-model fine-tuning: Tables 2, 3 and 5 (spec seed001 §4.2) on a sentence encoder.

Every task is one :class:`dpnc.lm.train.Trainer` run (zero-shot, MeZO, DPZero, AdamW, DP-AdamW), by default in a
fresh subprocess of its own, so that its peak memory (``ru_maxrss``) is its own; ``workers`` of them run side by
side with ``threads`` torch threads each. From the runs :mod:`dpnc.experiments.dpzero_lm_tables` builds

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

Run it with :func:`dpnc.experiments.protocol.run_experiment` (``EXPERIMENT``, a config) and write it with
:func:`dpnc.experiments.protocol.write`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dpnc.experiments import dpzero_lm_tables as tables
from dpnc.experiments.dpzero_lm_tables import PAPER_SEEDS, PRIVATE, TASKS
from dpnc.experiments.protocol import Claim, Experiment, Result
from dpnc.experiments.report import INTEGER, NATURAL, POSITIVE, check_axis, check_value, one_of

FO_METHODS = ("adamw", "dp-adamw")


def _help(text: str, **more) -> dict:
    return {"help": text, **more}


@dataclass(frozen=True)
class LMConfig:
    """The runs. Defaults are ``--full`` (the committed fuller run: SST-2, SST-5, TREC × 3 seeds, Table 5 on SST-2 and
    SST-5; over an hour on 2 shared cores); :data:`QUICK` is SST-2, one seed, Tables 2 and 3 only (about 10 minutes).
    Each field's ``help`` says what it is.
    """

    data_dir: str | None = field(default=None, metadata=_help(
        "Folder with the LM-BFF <TASK>/k-shot-1k-test folders (required to run).", required=True, folder=True))
    model: str | None = field(default=None, metadata=_help(
        "Local Hugging Face encoder folder (default: the offline all-MiniLM-L6-v2).", folder=True))
    runs_dir: str | None = field(default=None, metadata=_help(
        "Folder for each run's metrics.jsonl and summary.json (default: <out>/runs; in the library a temporary "
        "folder, removed)."))
    tasks: tuple[str, ...] = field(default=("SST-2", "SST-5", "TREC"), metadata=_help(
        "Table 2's tasks (zero-shot, MeZO, DPZero at every ε, Gaussian directions), among " + ", ".join(TASKS)
        + "."))
    sphere_tasks: tuple[str, ...] = field(default=("SST-2", "SST-5"), metadata=_help(
        "Table 5's tasks (DPZero with sphere directions at every ε; the Gaussian runs are Table 2's)."))
    seeds: tuple[int, ...] = field(default=PAPER_SEEDS, metadata=_help(
        "k-shot data seeds (also the training seeds); a seed without a folder for a task is skipped and said so "
        "(SNLI and MNLI ship seed 42 only)."))
    epsilons: tuple[float, ...] = field(default=(6.0, 2.0), metadata=_help("DPZero's budgets ε (δ = --delta)."))
    fo_methods: tuple[str, ...] = field(default=FO_METHODS, metadata=_help(
        "Table 3's first-order methods (adamw, dp-adamw), run on SST-2 with the first seed; empty: no Table 3."))
    table3_epsilon: float = field(default=2.0, metadata=_help("ε of Table 3's private methods."))
    steps: int = field(default=100, metadata=_help("Zeroth-order steps T (the paper: 10000)."))
    fo_steps: int = field(default=10, metadata=_help("AdamW / DP-AdamW steps (the paper: 1000)."))
    batch_size: int = field(default=16, metadata=_help("Expected batch size B of the Poisson batches (the paper: 64)."))
    lr: float = field(default=1e-5, metadata=_help("MeZO / DPZero step size."))
    smoothing: float = field(default=1e-3, metadata=_help("λ of the zeroth-order difference."))
    clip: float = field(default=50.0, metadata=_help("DPZero's clipping threshold C."))
    fo_lr: float = field(default=1e-5, metadata=_help("AdamW / DP-AdamW step size."))
    fo_clip: float = field(default=10.0, metadata=_help("DP-AdamW's clipping threshold C."))
    delta: float = field(default=1e-5, metadata=_help("Target δ of the private methods, in (0, 1)."))
    accountant: str = field(default="rdp", metadata=_help("rdp or pld: calibrates the noise."))
    freeze_embeddings: bool = field(default=True, metadata=_help("Leave the word embeddings untrained (every "
                                                                 "method alike)."))
    max_length: int = field(default=128, metadata=_help("Tokens per sequence (>= 8)."))
    microbatch: int = field(default=4, metadata=_help("Examples per vmapped chunk."))
    eval_examples: int | None = field(default=300, metadata=_help(
        "Test examples evaluated (a fixed seeded subset; the library's None: the whole test split)."))
    threads: int = field(default=1, metadata=_help("Torch threads per run."))
    isolate: bool = field(default=True, metadata=_help(
        "Each run in a fresh subprocess (its own peak memory); --no-isolate: runs share processes (with --workers 1, "
        "this one: faster for smoke tests; the peak memory is then the process's running maximum)."))

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Every value in its range (ValueError naming the field), before any run."""
        from dpnc.privacy.accountant import METHODS as ACCOUNTANTS
        from dpnc.privacy.budget import check_delta, check_epsilon

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
            check_value(name, getattr(self, name), POSITIVE)
        check_value("accountant", self.accountant, one_of(ACCOUNTANTS))
        for name in ("steps", "fo_steps", "batch_size", "threads", "microbatch"):
            check_value(name, getattr(self, name), INTEGER)
        check_value("max_length", self.max_length, ("an integer >= 8", lambda v: INTEGER[1](v) and v >= 8))
        if self.eval_examples is not None:
            check_value("eval_examples", self.eval_examples, INTEGER)


FULL = LMConfig()
QUICK = LMConfig(tasks=("SST-2",), sphere_tasks=(), seeds=(42,), steps=100, fo_steps=5, eval_examples=300)


@dataclass(frozen=True, order=True)
class LMTask:
    """One trainer run: a method on a task's k-shot seed (ε for the private methods; direction for DPZero)."""

    task: str
    seed: int
    method: str
    epsilon: float | None = None
    direction: str = "gaussian"

    @property
    def run(self) -> str:
        eps = "" if self.epsilon is None else f"-eps{self.epsilon:g}"
        return f"{self.task}-{self.seed}-{self.method}{eps}{'-sphere' if self.direction == 'sphere' else ''}"


@dataclass(frozen=True)
class LMRow:
    """One run's results; statistics marked "not private" are un-noised training-data statistics."""

    run: str
    task: str
    seed: int
    method: str
    epsilon: float | None
    direction: str
    n: int
    steps: int
    batch_size: int
    accuracy: float            # % on the test examples
    test_loss: float
    test_examples: int
    seconds_per_step: float    # not private, as the two below
    median_seconds_per_step: float
    min_seconds_per_step: float
    peak_rss_mib: float
    wall_seconds: float
    delta: float
    sampling_rate: float
    noise_multiplier: float
    epsilon_rdp: float
    epsilon_pld: float
    releases: int
    private: bool
    nonfinite: int
    final_train_loss: float    # not private
    clipped_fraction: float    # not private
    parameters_trained: int
    train_losses: tuple[float, ...] = field(default=(), metadata={"csv": False})   # per step, not private


def seeds_available(config: LMConfig) -> dict[str, list[int]]:
    """Task → the config's seeds with a k-shot folder, for every task the config needs."""
    from dpnc.lm.data import load_task

    if config.data_dir is None:
        raise ValueError("data_dir must be given (the folder with the LM-BFF <TASK>/k-shot-1k-test folders)")
    seeds_of: dict[str, list[int]] = {}
    for task in dict.fromkeys([*config.tasks, *config.sphere_tasks, *(["SST-2"] if config.fo_methods else [])]):
        seeds_of[task] = []
        for seed in config.seeds:
            try:
                load_task(task, config.data_dir, "train", seed=seed)
            except FileNotFoundError:
                continue
            seeds_of[task].append(seed)
        if not seeds_of[task]:
            raise ValueError(f"{task}: none of the seeds {config.seeds} has a k-shot folder in {config.data_dir!r}")
    return seeds_of


def finetune_config(config: LMConfig, task: LMTask, out: str | None):
    """The :class:`~dpnc.lm.train.FinetuneConfig` of one run."""
    from dpnc.lm.train import FinetuneConfig

    first_order = task.method in FO_METHODS
    kwargs = dict(task=task.task, data_dir=config.data_dir, method=task.method, model=config.model, seed=task.seed,
                  max_length=config.max_length, freeze_embeddings=config.freeze_embeddings,
                  eval_examples=config.eval_examples, delta=config.delta, accountant=config.accountant,
                  out=out, progress=False,
                  # Time per step and the training-loss curve are training-data statistics: NOT private, labelled
                  # so in every output. Each run is a new run: an earlier one's leftovers are moved aside.
                  log_private_stats=True, new_run=True)
    if task.method != "zero-shot":
        kwargs.update(steps=config.fo_steps if first_order else config.steps, batch_size=config.batch_size,
                      lr=config.fo_lr if first_order else config.lr, direction=task.direction,
                      smoothing=config.smoothing, microbatch=config.microbatch)
    if task.method == "dpzero":
        kwargs.update(clip=config.clip, epsilon=task.epsilon)
    if task.method == "dp-adamw":
        kwargs.update(clip=config.fo_clip, epsilon=task.epsilon)
    return FinetuneConfig(**kwargs)


def train(config: LMConfig, task: LMTask, run_dir: Path) -> LMRow:
    """One run in this process: train, evaluate, and what it cost (its files under ``run_dir``)."""
    import resource

    import torch

    from dpnc.lm.train import JOURNAL, METRICS, PRIVATE_STATS, Trainer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    for name in (METRICS, PRIVATE_STATS, "summary.json"):   # fresh output files (the trainer appends)
        (run_dir / name).unlink(missing_ok=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        trainer = Trainer(finetune_config(config, task, str(run_dir)))
        summary = trainer.run()
    finally:
        torch.set_num_threads(threads)
        # The fine-tuned weights and the journal (its ledger is in the row) are not results.
        shutil.rmtree(run_dir / "model", ignore_errors=True)
        (run_dir / JOURNAL).unlink(missing_ok=True)
    step_seconds = [r.seconds for r in trainer.history]
    trained = summary.steps > 0
    return LMRow(
        run=task.run, task=task.task, seed=task.seed, method=task.method, epsilon=task.epsilon,
        direction=task.direction, n=summary.n, steps=summary.steps, batch_size=summary.batch_size if trained else 0,
        accuracy=100 * summary.test_accuracy, test_loss=summary.test_loss, test_examples=summary.test_examples,
        seconds_per_step=summary.seconds_per_step or 0.0,
        median_seconds_per_step=statistics.median(step_seconds) if step_seconds else 0.0,
        min_seconds_per_step=min(step_seconds) if step_seconds else 0.0,
        peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, wall_seconds=summary.wall_seconds,
        delta=summary.delta, sampling_rate=summary.batch_size / summary.n if trained else 0.0,
        noise_multiplier=summary.noise_multiplier if summary.noise_multiplier is not None else 0.0,
        epsilon_rdp=_finite(summary.epsilon_rdp), epsilon_pld=_finite(summary.epsilon_pld),
        releases=summary.releases, private=summary.private, nonfinite=summary.nonfinite,
        final_train_loss=_tail_mean([r.loss for r in trainer.history]),
        clipped_fraction=_tail_mean([r.clipped_fraction for r in trainer.history if r.clipped_fraction is not None]),
        parameters_trained=sum(p.numel() for p in trainer.classifier.parameters() if p.requires_grad),
        train_losses=tuple(_losses(run_dir / PRIVATE_STATS)))


class DPZeroLM(Experiment[LMConfig, LMTask, LMRow]):
    """DPZero paper, Tables 2, 3 and 5: zero-shot, MeZO, DPZero (ε = 6, 2), AdamW and DP-AdamW fine-tuning of a
    sentence encoder on the LM-BFF tasks, with Gaussian and sphere directions, beside the paper's numbers."""

    name = "dpzero-lm"
    title = "DPZero paper, language-model fine-tuning (Tables 2, 3 and 5)"
    sizes = ("--quick (default): SST-2, seed 42, Tables 2 and 3, 100 zeroth-order steps (about 10 minutes on 2 "
             "cores); --full: SST-2, SST-5, TREC × seeds 42, 13, 21, Tables 2, 3 and 5 (over an hour).")
    Config, QUICK, FULL, Row = LMConfig, QUICK, FULL, LMRow

    def tasks(self, config: LMConfig) -> list[LMTask]:
        """Every run the config asks for, each once (Tables 2, 3 and 5 share runs), sorted by task, seed, method."""
        seeds_of = seeds_available(config)
        runs: set[LMTask] = set()
        for task in config.tasks:
            runs.add(LMTask(task, seeds_of[task][0], "zero-shot"))   # seed-free: the test set is shared
            for seed in seeds_of[task]:
                runs.add(LMTask(task, seed, "mezo"))
                runs.update(LMTask(task, seed, "dpzero", eps) for eps in config.epsilons)
        for task in config.sphere_tasks:
            for seed in seeds_of[task]:
                for eps in config.epsilons:
                    runs.update({LMTask(task, seed, "dpzero", eps), LMTask(task, seed, "dpzero", eps, "sphere")})
        if config.fo_methods:
            seed = seeds_of["SST-2"][0]
            runs.update({LMTask("SST-2", seed, "mezo"), LMTask("SST-2", seed, "dpzero", config.table3_epsilon)})
            runs.update(LMTask("SST-2", seed, m, config.table3_epsilon if m == "dp-adamw" else None)
                        for m in config.fo_methods)
        return sorted(runs, key=lambda t: (t.task, t.seed, t.method, -1 if t.epsilon is None else t.epsilon,
                                           t.direction))

    def cost(self, config: LMConfig, task: LMTask) -> float:
        """Steps, DP-AdamW's three times (per-example gradients): the longest runs start first."""
        if task.method == "zero-shot":
            return 1.0
        if task.method in FO_METHODS:
            return config.fo_steps * (3 if task.method == "dp-adamw" else 1)
        return config.steps

    def isolated(self, config: LMConfig) -> bool:
        return config.isolate

    def bind_output(self, config: LMConfig, out: Path) -> LMConfig:
        return config if config.runs_dir is not None else dataclasses.replace(config, runs_dir=str(out / "runs"))

    def run_one(self, config: LMConfig, task: LMTask) -> LMRow:
        """One run, quietly; under ``config.runs_dir``, or a temporary folder (read back, then removed)."""
        import tempfile
        import warnings

        from dpnc.privacy.accountant import quiet_dp_accounting

        with warnings.catch_warnings(), quiet_dp_accounting():
            warnings.simplefilter("ignore")
            if config.runs_dir is not None:
                return train(config, task, Path(config.runs_dir) / task.run)
            with tempfile.TemporaryDirectory(prefix="dpzero-lm-") as tmp:
                return train(config, task, Path(tmp) / task.run)

    def claims(self, rows: Sequence[LMRow], config: LMConfig) -> list[Claim]:
        return check_claims(rows, config)

    def describe(self, result: Result) -> str:
        return tables.describe(result)

    def render(self, result: Result) -> str:
        return tables.render(result)

    def tables(self, result: Result) -> dict[str, list[dict]]:
        return {"privacy.csv": tables.privacy_rows(result.rows)}

    def plot(self, result: Result, out: Path) -> list[Path]:
        return tables.plot(result, out)


EXPERIMENT = DPZeroLM()


def check_claims(rows: Sequence[LMRow], cfg: LMConfig) -> list[Claim]:
    """The paper's claims (§4.2), each with our numbers.

    Accuracy claims hold only when the effect exceeds its 95 % interval (seeds and test-set size, see
    :func:`~dpnc.experiments.dpzero_lm_tables.accuracy_difference`); None means no signal either way.
    """
    test_of = {r.task: r.test_examples for r in rows}
    claims = []
    private = [r for r in rows if r.method in PRIVATE]
    if private:
        over = [p for p in private if not (p.epsilon_rdp <= p.epsilon * (1 + 1e-9)
                                           and p.epsilon_pld <= p.epsilon * (1 + 1e-9))]
        claims.append(Claim("every private run is (ε, δ)-DP: ε by RDP and by PLD, from the run's own ledger with "
                            "n = the true train size, ≤ the target", not over,
                            f"{len(private) - len(over)} of {len(private)} runs; max RDP ε / target "
                            f"{max(p.epsilon_rdp / p.epsilon for p in private):.4f}, max PLD ε / target "
                            f"{max(p.epsilon_pld / p.epsilon for p in private):.4f}"))
    t2 = tables.table2(rows, cfg)
    tasks = [t for t in cfg.tasks if t in t2.get("mezo", {})]

    def compare(a: str, b: str, threshold: float, *, within: bool = False):
        """Per task the difference a − b ± its 95 % half-width, and the claim's verdict over all tasks:
        "a − b > threshold" (or, ``within``, "a − b ≤ threshold")."""
        diffs = {t: tables.accuracy_difference(t2[a][t], t2[b][t], test_of[t]) for t in tasks if t in t2[a]}
        verdicts = [tables.verdict(d - h, d + h, threshold) for d, h in diffs.values()]
        if within:
            verdicts = [None if v is None else not v for v in verdicts]
        return _all(verdicts), ", ".join(f"{t}: {d:+.1f} ± {h:.1f}" for t, (d, h) in diffs.items())

    if tasks and "zero-shot" in t2:
        holds, evidence = compare("mezo", "zero-shot", 0.0)
        claims.append(Claim("fine-tuning (MeZO) beats zero-shot on every task", holds,
                            evidence + " (MeZO − zero-shot, points, 95 % interval)"))
    if tasks and "dpzero ε=6" in t2:
        holds, evidence = compare("mezo", "dpzero ε=6", 2.6, within=True)
        claims.append(Claim("DPZero at ε = 6 stays within 2.6 points of MeZO (the paper's largest drop, SNLI)",
                            holds, evidence + " (MeZO − DPZero)"))
    if tasks and "dpzero ε=2" in t2 and "zero-shot" in t2:
        holds, evidence = compare("dpzero ε=2", "zero-shot", 0.0)
        claims.append(Claim("DPZero at ε = 2 improves on zero-shot", holds, evidence + " (DPZero − zero-shot)"))
    t3 = {r.method: r for r in tables.table3(rows, cfg)}
    if "mezo" in t3 and "dpzero" in t3:
        zo, mezo = t3["dpzero"], t3["mezo"]
        ratio = zo.median_seconds_per_step / mezo.median_seconds_per_step
        fastest = zo.min_seconds_per_step / mezo.min_seconds_per_step if mezo.min_seconds_per_step else math.nan
        mem = zo.peak_rss_mib - mezo.peak_rss_mib
        claims.append(Claim("a DPZero step costs what a MeZO step costs (fastest-step time within 10 %, memory within "
                            "50 MiB; the runs ran at different times on a shared machine, so the least-disturbed "
                            "step is compared)", abs(fastest - 1) <= 0.10 and abs(mem) <= 50,
                            f"time ratio DPZero / MeZO: fastest steps {fastest:.2f}, medians {ratio:.2f}; peak memory "
                            f"difference {mem:+.0f} MiB"))
        if "dp-adamw" in t3:
            fo = t3["dp-adamw"]
            time_ratio = fo.median_seconds_per_step / zo.median_seconds_per_step
            claims.append(Claim("DP-AdamW costs more time per step and more memory than DPZero",
                                time_ratio > 1 and fo.peak_rss_mib > zo.peak_rss_mib,
                                f"DP-AdamW / DPZero: time ×{time_ratio:.1f}, "
                                f"memory ×{fo.peak_rss_mib / zo.peak_rss_mib:.2f}"))
    t5 = tables.table5(rows, cfg)
    pairs = [(task, eps) for eps in cfg.epsilons for task in cfg.sphere_tasks
             if task in t5.get(("sphere", eps), {}) and task in t5.get(("gaussian", eps), {})]
    if pairs:
        diffs = {p: tables.accuracy_difference(t5[("sphere", p[1])][p[0]], t5[("gaussian", p[1])][p[0]],
                                               test_of[p[0]]) for p in pairs}
        # |sphere − Gaussian| ≤ 1.5 holds if the whole interval is inside ±1.5, fails if it is wholly outside.
        verdicts = [True if abs(d) + h <= 1.5 else False if abs(d) - h > 1.5 else None for d, h in diffs.values()]
        claims.append(Claim("sphere and Gaussian directions do about as well (within 1.5 points; the paper's "
                            "largest difference is 0.6)", _all(verdicts),
                            ", ".join(f"{t} ε={e:g}: {d:+.1f} ± {h:.1f}" for (t, e), (d, h) in diffs.items())
                            + " (sphere − Gaussian)"))
    return claims


def _all(verdicts: list[bool | None]) -> bool | None:
    """False if any fails, else None if any has no signal, else True."""
    return False if False in verdicts else None if None in verdicts else True


def _losses(path: Path) -> list[float]:
    """Per-step training losses from a run's ``private_train_stats.jsonl`` (NOT private statistics)."""
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [float(r["loss"]) for r in rows if r.get("event") == "step"]


def _finite(v) -> float:
    return math.inf if v is None else float(v)


def _tail_mean(values: list) -> float:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return math.nan
    k = max(len(vals) // 10, 1)
    return statistics.fmean(vals[-k:])
