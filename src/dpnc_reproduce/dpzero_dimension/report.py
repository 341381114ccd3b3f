"""The dpzero-dimension claims, declared before the run and judged on its rows, and their numbers.

The project's own claim (the paper never varies d), that DPZero keeps MeZO's gain whatever the
trained dimension d: a one-sided slope of DPZero − MeZO against log10 d (:func:`slope`) over the
modes where MeZO learns (:func:`learns`), above −:data:`SLOPE_MARGIN` points per decade. See
docs/dpzero.md."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from dpnc_reproduce.claims import (
    NO_VERDICT_ONE_SEED,
    Interval,
    from_bits,
    from_parts,
    paired_accuracy_difference,
    paired_ratio,
)

SLOPE_MARGIN = (
    1.0  # points of DPZero − MeZO per decade of d: a fall steeper than this fails the claim
)
MIN_SHARE = 0.90  # the paper's smallest Table 2 share at ε = 6 (dpzero-lm's threshold)


# --- selecting rows -------------------------------------------------------------------------------


def label(method: str, epsilon: float | None) -> str:
    return method if epsilon is None else f"{method} ε={epsilon:g}"


def test_rows(rows: Sequence) -> list:
    return [r for r in rows if r.phase == "test"]


def by_seed(
    rows: Sequence, task: str, mode: str, method: str, epsilon: float | None = None
) -> dict[int, object]:
    return {
        r.seed: r
        for r in test_rows(rows)
        if (r.task, r.mode, r.method) == (task, mode, method)
        and (epsilon is None or r.epsilon == epsilon)
    }


def modes_of(rows: Sequence, task: str) -> list[str]:
    """The task's modes in order of d."""
    d = {
        r.mode: r.parameters_trained
        for r in test_rows(rows)
        if r.task == task and r.method != "zero-shot"
    }
    return sorted(d, key=d.get)


def dimension(rows: Sequence, task: str, mode: str) -> int:
    return next(
        r.parameters_trained
        for r in test_rows(rows)
        if (r.task, r.mode) == (task, mode) and r.method != "zero-shot"
    )


def _bits(
    rows: Sequence, task: str, mode: str, method: str, epsilon: float | None, seeds: Sequence[int]
):
    of = by_seed(rows, task, mode, method, epsilon)
    return [from_bits(of[s].correct) for s in seeds]


def common_seeds(
    rows: Sequence, task: str, modes: Sequence[str], methods: Sequence[tuple[str, float | None]]
):
    sets = [set(by_seed(rows, task, m, a, e)) for m in modes for a, e in methods]
    return sorted(set.intersection(*sets)) if sets else []


# --- the quantities -------------------------------------------------------------------------------


def difference(rows: Sequence, task: str, mode: str, a: tuple, b: tuple) -> Interval | None:
    """a − b (points), paired by seed and test example; None where either did not run."""
    seeds = common_seeds(rows, task, [mode], [a, b])
    if not seeds:
        return None
    return paired_accuracy_difference(
        _bits(rows, task, mode, *a, seeds), _bits(rows, task, mode, *b, seeds)
    )


def share(rows: Sequence, task: str, mode: str, epsilon: float) -> Interval | None:
    """(DPZero ε − zero-shot) / (MeZO − zero-shot) and Fieller's interval, paired by seed and test
    example."""
    zs, mezo, dp = ("zero-shot", None), ("mezo", None), ("dpzero", epsilon)
    seeds = common_seeds(rows, task, [mode], [zs, mezo, dp])
    if not seeds:
        return None
    z, m, p = (_bits(rows, task, mode, *x, seeds) for x in (zs, mezo, dp))
    x = [[100 * (a - c) for a, c in zip(pa, za)] for pa, za in zip(p, z)]
    y = [[100 * (a - c) for a, c in zip(ma, za)] for ma, za in zip(m, z)]
    return paired_ratio(x, y)


def slope(rows: Sequence, task: str, modes: Sequence[str], epsilon: float) -> Interval | None:
    """The least-squares slope of DPZero ε − MeZO (points) against log10 d over ``modes``, and its
    paired 95 % interval: with weights wᵢ = (log10 dᵢ − mean)/Sxx, per seed s and test example e the
    value z_se = Σᵢ wᵢ·100·(DPZero_sie − MeZO_sie); the slope is the mean of z; its variance has the
    per-seed means' part (k − 1 df) and the per-example means over seeds' part (m − 1 df),
    Welch–Satterthwaite df. None where fewer than two distinct d. A slope in points rather than a
    slope of the share itself: the share is a ratio whose per-seed values explode where a seed's
    MeZO gain is near 0 (the per-mode shares are reported with Fieller's intervals instead,
    :func:`share`)."""
    xs = [math.log10(dimension(rows, task, m)) for m in modes]
    if len(set(xs)) < 2:
        return None
    mx = statistics.fmean(xs)
    sxx = sum((x - mx) ** 2 for x in xs)
    w = [(x - mx) / sxx for x in xs]
    seeds = common_seeds(rows, task, modes, [("mezo", None), ("dpzero", epsilon)])
    if not seeds:
        return None
    z = None
    for wi, mode in zip(w, modes):
        dp, mezo = (
            _bits(rows, task, mode, *x, seeds) for x in (("dpzero", epsilon), ("mezo", None))
        )
        part = [[100 * wi * (a - b) for a, b in zip(u, v)] for u, v in zip(dp, mezo)]
        z = part if z is None else [[p + q for p, q in zip(u, v)] for u, v in zip(z, part)]
    return seed_example_interval(z, "points per decade of d")


def seed_example_interval(z: Sequence[Sequence[float]], unit: str) -> Interval:
    """The declared variance model of this experiment's paired quantities: the mean of z_se (seed s,
    test example e) and its 95 % t interval from the per-seed means' part (k − 1 df) and the
    per-example means over seeds' part (m − 1 df), Welch–Satterthwaite df; one seed: no verdict. The
    slope and the selection of the modes it is fitted over are judged by this one model."""
    per_seed = [statistics.fmean(v) for v in z]
    estimate = statistics.fmean(per_seed)
    k, m = len(per_seed), len(z[0])
    if k < 2:
        return Interval(estimate, -math.inf, math.inf, k, NO_VERDICT_ONE_SEED)
    per_example = [statistics.fmean(col) for col in zip(*z)]
    parts = [
        (statistics.variance(per_seed) / k, k - 1),
        (statistics.variance(per_example) / m, m - 1),
    ]
    return from_parts(estimate, parts, k, f"{unit}, {k} seeds, paired by test example and seed")


def learns(rows: Sequence, task: str) -> dict[str, Interval]:
    """Mode → MeZO − zero-shot (points), paired, by the declared model that judges the slope
    (:func:`seed_example_interval`; the two-way ANOVA of :func:`difference` selected the modes by
    another model)."""
    out = {}
    for m in modes_of(rows, task):
        seeds = common_seeds(rows, task, [m], [("mezo", None), ("zero-shot", None)])
        if seeds:
            mezo, zero = (
                _bits(rows, task, m, *x, seeds) for x in (("mezo", None), ("zero-shot", None))
            )
            z = [[100 * (a - b) for a, b in zip(u, v)] for u, v in zip(mezo, zero)]
            out[m] = seed_example_interval(z, "points")
    return out


# --- tables ---------------------------------------------------------------------------------------


def methods(config) -> list[tuple[str, float | None]]:
    return [
        ("zero-shot", None),
        ("mezo", None),
        *(("dpzero", e) for e in config.epsilons),
        *([("dp-adamw", max(config.epsilons))] if config.fo_modes else []),
    ]


def accuracy_table(rows: Sequence, config) -> list[dict]:
    """Per (task, mode, method): d, seeds, mean accuracy and its standard error over seeds, per-seed
    values."""
    out = []
    for task in dict.fromkeys(r.task for r in test_rows(rows)):
        for mode in modes_of(rows, task):
            for method, e in methods(config):
                of = by_seed(rows, task, mode, method, e)
                if not of:
                    continue
                acc = [of[s].accuracy for s in sorted(of)]
                out.append(
                    {
                        "task": task,
                        "mode": mode,
                        "d": dimension(rows, task, mode),
                        "method": label(method, e),
                        "seeds": len(acc),
                        "accuracy": statistics.fmean(acc),
                        "se": statistics.stdev(acc) / math.sqrt(len(acc))
                        if len(acc) > 1
                        else math.nan,
                        "per_seed": " ".join(f"{a:.1f}" for a in acc),
                    }
                )
    return out


def share_table(rows: Sequence, config) -> list[dict]:
    """Per (task, mode, ε): the share with its interval, DPZero − MeZO and MeZO − zero-shot (points,
    paired)."""
    out = []
    for task in dict.fromkeys(r.task for r in test_rows(rows)):
        for mode in modes_of(rows, task):
            gain = difference(rows, task, mode, ("mezo", None), ("zero-shot", None))
            for e in config.epsilons:
                sh = share(rows, task, mode, e)
                gap = difference(rows, task, mode, ("dpzero", e), ("mezo", None))
                if sh is None or gap is None:
                    continue
                out.append(
                    {
                        "task": task,
                        "mode": mode,
                        "d": dimension(rows, task, mode),
                        "epsilon": e,
                        "mezo_gain": gain.estimate,
                        "mezo_gain_low": gain.low,
                        "mezo_gain_high": gain.high,
                        "dpzero_minus_mezo": gap.estimate,
                        "gap_low": gap.low,
                        "gap_high": gap.high,
                        "share": sh.estimate,
                        "share_low": sh.low,
                        "share_high": sh.high,
                        "seeds": sh.seeds,
                    }
                )
    return out


def diagnostics(rows: Sequence, config) -> list[dict]:
    """Per (task, mode), why a mode learns or not (seed means; statistics of training data, NOT
    private): the recipe; MeZO's RMS released scalar ‖ĝ‖ (E(uᵀg_B)² = ‖g_B‖² for Gaussian u: the
    batch gradient's norm, batch noise included); DPZero's per-step noise σC/B at the largest ε and
    its ratio to ‖ĝ‖; the fraction of DPZero's per-example scalars clipped at C; MeZO's
    training-loss drop over the run (mean of the first tenth of the steps − mean of the last tenth)
    beside the first-order prediction lr·‖ĝ‖²·T (an upper bound on the descent term: ‖ĝ‖ includes
    batch noise). Where the measured drop is far below the prediction, the second-order term of a
    zeroth-order step, (lr·c)²·uᵀHu/2 ≈ lr²‖ĝ‖²·tr(H)/2, which grows with d, ate the descent: the lr
    that would move the loss in T steps is above the one that stays stable (the held-out choice of
    the smaller lr says the same)."""
    out = []
    eps = max(config.epsilons)
    for task in dict.fromkeys(r.task for r in test_rows(rows)):
        for mode in modes_of(rows, task):
            mezo, dp = by_seed(rows, task, mode, "mezo"), by_seed(rows, task, mode, "dpzero", eps)
            if not mezo:
                continue
            signal = statistics.fmean(r.signal_rms for r in mezo.values())
            noise = statistics.fmean(r.noise_std for r in dp.values()) if dp else math.nan
            lr = next(iter(mezo.values())).lr
            drop = statistics.fmean(_drop(r.train_losses) for r in mezo.values() if r.train_losses)
            out.append(
                {
                    "task": task,
                    "mode": mode,
                    "d": dimension(rows, task, mode),
                    "mezo_lr": lr,
                    "dpzero_lr": next(iter(dp.values())).lr if dp else math.nan,
                    "dpzero_clip": next(iter(dp.values())).clip if dp else math.nan,
                    "steps": config.steps,
                    "mezo_signal_rms": signal,
                    "dpzero_noise_std": noise,
                    "noise_over_signal": noise / signal if signal > 0 else math.inf,
                    "dpzero_clipped_fraction": (
                        statistics.fmean(r.clipped_fraction for r in dp.values())
                        if dp
                        else math.nan
                    ),
                    "mezo_train_loss_drop": drop,
                    "first_order_drop": lr * signal**2 * config.steps,
                    "mezo_seconds_per_step": statistics.fmean(
                        r.median_seconds_per_step for r in mezo.values()
                    ),
                }
            )
    return out


def _drop(losses: Sequence[float]) -> float:
    """Mean of the first tenth of a loss curve − mean of its last tenth (at least one point
    each)."""
    k = max(len(losses) // 10, 1)
    return statistics.fmean(losses[:k]) - statistics.fmean(losses[-k:])


def recipe_table(rows: Sequence) -> list[dict]:
    """Every selection candidate: its held-out accuracy (NOT private: training rows) and whether it
    was kept."""
    return [
        {
            "task": r.task,
            "mode": r.mode,
            "method": label(r.method, r.epsilon),
            "lr": r.lr,
            "clip": r.clip,
            "steps": r.steps,
            "held_out_accuracy": r.accuracy,
            "held_out_loss": r.test_loss,
            "held_out_examples": r.test_examples,
            "train_rows": r.n,
            "chosen": r.chosen,
        }
        for r in rows
        if r.phase == "select"
    ]


def cost_table(rows: Sequence) -> list[dict]:
    """Per (task, mode, private method): median time per step and the run's own peak memory (seed
    means; step times are NOT private), with ratios to DPZero at the same ε: of the peak GPU memory
    on CUDA, else of the peak RSS."""
    out = []
    for r in test_rows(rows):
        if r.method not in ("dpzero", "dp-adamw"):
            continue
        out.append(
            {
                "task": r.task,
                "mode": r.mode,
                "seed": r.seed,
                "method": label(r.method, r.epsilon),
                "d": r.parameters_trained,
                "median_seconds_per_step": r.median_seconds_per_step,
                "run_peak_rss_mib": r.run_peak_rss_mib,
                "run_peak_gpu_mib": r.run_peak_gpu_mib,
                "accuracy": r.accuracy,
            }
        )
    dp = {
        (c["task"], c["mode"], c["seed"], c["method"].split(" ")[-1]): c
        for c in out
        if c["method"].startswith("dpzero")
    }
    for c in out:
        base = dp.get((c["task"], c["mode"], c["seed"], c["method"].split(" ")[-1]))
        c["time_vs_dpzero"] = (
            c["median_seconds_per_step"] / base["median_seconds_per_step"] if base else math.nan
        )
        memory = "run_peak_gpu_mib" if math.isfinite(c["run_peak_gpu_mib"]) else "run_peak_rss_mib"
        c["memory_vs_dpzero"] = c[memory] / base[memory] if base else math.nan
    return out
