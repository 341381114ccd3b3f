"""The dpzero-dimension summary's text and figure: the setting, accuracy by mode, the share of
MeZO's gain that DPZero keeps, why a mode does or does not learn, the chosen recipes, DP-AdamW's
cost beside DPZero's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from dpnc_reproduce.dpzero_dimension.report import (
    SLOPE_MARGIN,
    accuracy_table,
    cost_table,
    diagnostics,
    recipe_table,
    share_table,
    test_rows,
)
from dpnc_reproduce.dpzero_dimension.run import MODES, SELECTION
from dpnc_reproduce.protocol import Result


def describe(result: Result) -> str:
    cfg, rows = result.config, result.rows
    tests = test_rows(rows)
    d = {(r.task, r.mode): r.parameters_trained for r in tests if r.method != "zero-shot"}
    modes = "; ".join(
        f"{t}: "
        + ", ".join(
            f"{m} (d = {v:,})" for (u, m), v in sorted(d.items(), key=lambda i: i[1]) if u == t
        )
        for t in dict.fromkeys(t for t, _ in d)
    )
    n_of = {r.task: r.n for r in tests}
    m_of = {r.task: r.test_examples for r in tests}
    return "\n".join(
        [
            "Model: all-MiniLM-L6-v2 (22.7M parameters), fp32, "
            + (
                f"one process per (task, mode), {cfg.threads} torch thread(s), on one CUDA GPU.  "
                if cfg.device == "cuda"
                else f"one process, {cfg.threads} torch thread(s), CPU only (other work shared the machine's 2 "
                "cores).  "
            ),
            f"Trained modes (`dpnc finetune --train`; top-k above a cached frozen prefix, LoRA rank 8 on query/value): "
            f"{modes}.  ",
            f"Tasks: {', '.join(f'{t} (n = {n_of[t]}, {m_of[t]} test examples)' for t in n_of)}; seeds "
            f"{sorted({r.seed for r in tests})}.  ",
            f"Every zeroth-order run: T = {cfg.steps} steps, Poisson batches of expected size B = {cfg.batch_size}, "
            f"λ = {cfg.smoothing:g}, Gaussian directions, max {cfg.max_length} tokens; DPZero at ε = "
            f"{', '.join(f'{e:g}' for e in cfg.epsilons)}, δ = {cfg.delta:g} ({cfg.accountant.upper()} calibration; "
            "add/remove).  ",
            f"Recipes (lr, C per mode, from {len({r.lr for r in rows if r.phase == 'select'})} "
            "step sizes of the grid): "
            f"{SELECTION}; chosen on the first seed's train split with {cfg.held_out:.0%} held out "
            f"({'each task its own' if cfg.select_tasks == 'each' else 'the first task for every task'}), MeZO and "
            f"DPZero ε = {max(cfg.epsilons):g} separately; DPZero's recipe serves every ε.  ",
            "Not private (labelled so): step times, training losses, RMS of MeZO's released scalars, held-out "
            "accuracies of the recipe candidates.",
        ]
    )


def render(result: Result) -> str:
    cfg, rows = result.config, result.rows
    out = [
        "## Accuracy by trained dimension",
        "",
        "Test accuracy (%), mean ± s.e. over seeds (each seed's value listed).",
        "",
        "| task | mode | d | method | seeds | accuracy | per seed |",
        "|---|---|---|---|---|---|---|",
    ]
    out += [
        f"| {r['task']} | {r['mode']} | {r['d']:,} | {r['method']} | {r['seeds']} | {_pm(r['accuracy'], r['se'])} "
        f"| {r['per_seed']} |"
        for r in accuracy_table(rows, cfg)
    ]
    out += [
        "",
        "## The share of MeZO's gain that DPZero keeps",
        "",
        "(DPZero − zero-shot) / (MeZO − zero-shot) with Fieller's 95 % interval; DPZero − MeZO and MeZO − "
        "zero-shot in points with paired 95 % t intervals (seeds and test examples). Where MeZO's gain interval "
        "includes 0 the share has no interval.",
        "",
        "| task | mode | d | ε | MeZO − zero-shot | DPZero − MeZO | share kept |",
        "|---|---|---|---|---|---|---|",
    ]
    out += [
        f"| {r['task']} | {r['mode']} | {r['d']:,} | {r['epsilon']:g} | "
        f"{_iv(r['mezo_gain'], r['mezo_gain_low'], r['mezo_gain_high'])} | "
        f"{_iv(r['dpzero_minus_mezo'], r['gap_low'], r['gap_high'])} | "
        f"{_iv(r['share'], r['share_low'], r['share_high'])} |"
        for r in share_table(rows, cfg)
    ]
    out += [
        "",
        "The project's own claim (the paper never varies d) is judged on the slope of DPZero − MeZO against "
        "log10 d over the modes where MeZO "
        f"learns (claims table; margin {SLOPE_MARGIN:g} point per decade).",
        "",
        "## Why a mode learns or not (NOT private diagnostics)",
        "",
        "‖ĝ‖: RMS of MeZO's released scalars (the batch gradient's norm, batch noise included: E(uᵀg)² = "
        "‖g‖²); σC/B: DPZero's per-step noise at the largest ε; clipped: DPZero's per-example scalars clipped at "
        "C; loss drop: MeZO's training loss, mean of the first tenth of the steps − the last tenth; first-order: "
        "lr·‖ĝ‖²·T, the descent a first-order step of the same expected direction would give (an upper bound). "
        "A measured drop far below it means the second-order term of a zeroth-order step, ≈ lr²‖ĝ‖²·tr(H)/2 per "
        "step, growing with d, ate the descent: the lr that would move the loss in T steps is above the stable "
        "one.",
        "",
        "| task | mode | d | MeZO lr | DPZero lr, C | ‖ĝ‖ | σC/B | σC/B ÷ ‖ĝ‖ | clipped | loss drop | "
        "first-order | s/step |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    out += [
        f"| {r['task']} | {r['mode']} | {r['d']:,} | {r['mezo_lr']:g} | {r['dpzero_lr']:g}, {r['dpzero_clip']:g} | "
        f"{r['mezo_signal_rms']:.3g} | {r['dpzero_noise_std']:.3g} | {r['noise_over_signal']:.3g} | "
        f"{r['dpzero_clipped_fraction']:.2f} | {r['mezo_train_loss_drop']:.3g} | {r['first_order_drop']:.3g} | "
        f"{r['mezo_seconds_per_step']:.3g} |"
        for r in diagnostics(rows, cfg)
    ]
    out += [
        "",
        "## Recipe selection (NOT private: held-out training rows)",
        "",
        "| task | mode | method | lr | C | T | held-out accuracy | chosen |",
        "|---|---|---|---|---|---|---|---|",
    ]
    out += [
        f"| {r['task']} | {r['mode']} | {r['method']} | {r['lr']:g} | {_g(r['clip'])} | {r['steps']} | "
        f"{r['held_out_accuracy']:.1f} | "
        f"{'**yes**' if r['chosen'] else ''} |"
        for r in recipe_table(rows)
    ]
    costs = cost_table(rows)
    if any(c["method"].startswith("dp-adamw") for c in costs):
        out += [
            "",
            "## DP-AdamW beside DPZero (same process, same ε; step times NOT private)",
            "",
            "| task | mode | seed | method | s/step | run peak RSS MiB | run peak GPU MiB | × DPZero time | "
            "× DPZero memory (GPU on CUDA) | accuracy |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        out += [
            f"| {c['task']} | {c['mode']} | {c['seed']} | {c['method']} | {c['median_seconds_per_step']:.3g} | "
            f"{c['run_peak_rss_mib']:.0f} | {_mib(c['run_peak_gpu_mib'])} | {c['time_vs_dpzero']:.2f} | "
            f"{c['memory_vs_dpzero']:.2f} | {c['accuracy']:.1f} |"
            for c in costs
        ]
    return "\n".join(out)


def tables(result: Result) -> dict[str, list[dict]]:
    rows, cfg = result.rows, result.config
    return {
        "accuracy.csv": accuracy_table(rows, cfg),
        "share.csv": share_table(rows, cfg),
        "diagnostics.csv": diagnostics(rows, cfg),
        "recipes.csv": recipe_table(rows),
        "cost.csv": cost_table(rows),
    }


def plot(result: Result, out: Path) -> list[Path]:
    """``fig_dimension.png``: per task, accuracy against d and the share of MeZO's gain kept against
    d (log x)."""
    rows, cfg = result.rows, result.config
    acc, shares = accuracy_table(rows, cfg), share_table(rows, cfg)
    tasks = list(dict.fromkeys(r["task"] for r in acc))
    if not tasks:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(tasks), 3, figsize=(14, 3.8 * len(tasks)), squeeze=False)
    for ax_row, task in zip(axes, tasks):
        a_acc, a_share, a_gap = ax_row
        for method in dict.fromkeys(r["method"] for r in acc):
            pts = [r for r in acc if r["task"] == task and r["method"] == method]
            a_acc.errorbar(
                [r["d"] for r in pts],
                [r["accuracy"] for r in pts],
                yerr=[0 if math.isnan(r["se"]) else r["se"] for r in pts],
                marker="o",
                capsize=3,
                label=method,
            )
        for e in cfg.epsilons:
            pts = [r for r in shares if r["task"] == task and r["epsilon"] == e]
            _interval_plot(
                a_share,
                pts,
                "share",
                "share_low",
                "share_high",
                f"DPZero ε={e:g}",
                clip=(-1.0, 2.0),
            )
            _interval_plot(
                a_gap, pts, "dpzero_minus_mezo", "gap_low", "gap_high", f"DPZero ε={e:g}"
            )
        for ax in (a_acc, a_share, a_gap):
            ax.set_xscale("log")
            ax.grid(alpha=0.3)
            ax.set_xlabel("trained parameters d")
            for r in [p for p in acc if p["task"] == task and p["method"] == "mezo"]:
                ax.annotate(
                    r["mode"],
                    (r["d"], 0),
                    xycoords=("data", "axes fraction"),
                    fontsize=7,
                    ha="center",
                    va="bottom",
                )
        a_share.axhline(1.0, color="grey", lw=0.8)
        a_share.axhline(0.0, color="grey", lw=0.8, ls=":")
        a_gap.axhline(0.0, color="grey", lw=0.8)
        a_acc.set(ylabel="test accuracy (%)", title=f"{task}: accuracy by mode (mean ± s.e.)")
        a_share.set(
            ylabel="share of MeZO's gain kept",
            title=f"{task}: (DPZero − zs)/(MeZO − zs), Fieller 95 %",
        )
        a_gap.set(ylabel="DPZero − MeZO (points)", title=f"{task}: DPZero − MeZO, paired 95 %")
        a_acc.legend(fontsize=7)
        a_share.legend(fontsize=7)
    fig.tight_layout()
    path = out / "fig_dimension.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def _interval_plot(
    ax,
    pts: Sequence[dict],
    key: str,
    low: str,
    high: str,
    label: str,
    clip: tuple[float, float] = (-math.inf, math.inf),
) -> None:
    if not pts:
        return
    xs = [p["d"] for p in pts]
    ys = [min(max(p[key], clip[0]), clip[1]) if math.isfinite(p[key]) else math.nan for p in pts]
    lo = [
        y - max(min(max(p[low], clip[0]), clip[1]), clip[0]) if math.isfinite(y) else 0
        for y, p in zip(ys, pts)
    ]
    hi = [
        min(max(p[high], clip[0]), clip[1]) - y if math.isfinite(y) else 0 for y, p in zip(ys, pts)
    ]
    ax.errorbar(
        xs,
        ys,
        yerr=[[max(v, 0) for v in lo], [max(v, 0) for v in hi]],
        marker="s",
        capsize=3,
        label=label,
    )


def _pm(mean: float, se: float) -> str:
    return f"{mean:.1f}" if math.isnan(se) else f"{mean:.1f} ± {se:.1f}"


def _iv(est: float, low: float, high: float) -> str:
    if not math.isfinite(est):
        return "—"
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{est:.2f} [no interval]"
    return f"{est:.2f} [{low:.2f}, {high:.2f}]"


def _mib(v: float) -> str:
    return "" if math.isnan(v) else f"{v:.0f}"


def _g(v) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:g}"


__all__ = ["MODES", "describe", "plot", "render", "tables"]
