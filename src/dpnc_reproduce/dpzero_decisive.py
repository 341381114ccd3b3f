"""DPZero's headline decided: a declared 20-seed run on TREC where MeZO learns (headroom recipe).

``--declare`` writes the design (:func:`declaration`) before any run; ``--run`` (:func:`run`,
resumable, on dpzero-lm's trainer runs) and ``--judge`` follow; ``--design trend`` is the
declared T = 600 follow-up. See docs/dpzero.md ("The decisive run") and
docs/results/dpzero-decisive/README.md."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import statistics
import time
import warnings
from pathlib import Path

import torch
from scipy import stats

from dpnc.lm import load_task
from dpnc.privacy import NoiseSource, quiet_dp_accounting
from dpnc_reproduce.claims import (
    below,
    exceeds,
    paired_accuracy_difference,
    paired_ratio,
    paired_ratio_difference,
)
from dpnc_reproduce.dpzero_lm.report import powered_claim
from dpnc_reproduce.dpzero_lm.run import LMConfig, LMGroup, LMTask, run_trainer
from dpnc_reproduce.variance import two_way_components

TASK = "TREC"
FOLDERS = (13, 21, 42, 87, 100)
TRAINING_SEEDS = 4
RECIPE = {"train": "top-k", "top_k": 2, "lr": 2e-4, "clip": 50.0, "batch_size": 64, "steps": 200}
METHODS = ("zero-shot", "mezo", "dpzero-eps6", "dpzero-eps2", "clip-only")
MAX_DROP = 2.6  # the paper's largest drop MeZO − DPZero at ε = 6 (SNLI)
MIN_SHARE = 0.90  # the paper's smallest share (SST-5)
PAPER_DROP, PAPER_SHARE = 1.3, 0.98  # the paper's TREC values
TEST_M = 500
TREND_STEPS, TREND_SEEDS, TREND_METHODS = 600, 5, ("zero-shot", "mezo", "dpzero-eps6")
HEADROOM = Path("docs/results/dpzero-headroom/table2-trec-top2/result.json")
ROWS = "rows.jsonl"


def seeds(count: int = 20) -> list[tuple[int, int]]:
    """(training seed, k-shot folder) of the first ``count`` of the 20 seeds, in run order: training
    seed j over every folder, then j + 1 (a run stopped early holds balanced seeds)."""
    return [(10 * f + j, f) for j in range(TRAINING_SEEDS) for f in FOLDERS][:count]


def _task(seed: int, folder: int, method: str) -> LMTask:
    base, eps = {
        "zero-shot": ("zero-shot", None),
        "mezo": ("mezo", None),
        "dpzero-eps6": ("dpzero", 6.0),
        "dpzero-eps2": ("dpzero", 2.0),
        "clip-only": (
            "dpzero",
            6.0,
        ),  # DPZero's step, its noise drawn as 0 (the ε is the ledger's, not held)
    }[method]
    return LMTask(TASK, seed, base, eps, data_seed=folder)


class NoNoise(NoiseSource):
    """A non-secret noise source whose Gaussian draws are 0: DPZero's clipped step with σ = 0
    (batches and directions still drawn; the run is marked not private)."""

    def gaussian(self, shape, sigma, *, dtype=torch.float64, device="cpu") -> torch.Tensor:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return torch.zeros(shape, dtype=dtype, device=device)

    def discrete_gaussian(self, sigma: float) -> int:
        return 0


def _done(out: Path) -> set[tuple[int, str]]:
    path = out / ROWS
    if not path.exists():
        return set()
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["seed"], r["label"]) for r in rows}


def run(
    data_dir: str, out: Path, runs_dir: Path, *, limit: int | None = None, trend: bool = False
) -> int:
    """Run every (seed, method) not yet in ``out/rows.jsonl``, appending one line each; ``limit``:
    stop after this many new rows; ``trend``: the T = 600 design's seeds and methods. Returns the
    number of rows written."""
    steps, methods, count = (
        (TREND_STEPS, TREND_METHODS, TREND_SEEDS) if trend else (RECIPE["steps"], METHODS, 20)
    )
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    done, written = _done(out), 0
    config = LMConfig(
        data_dir=data_dir,
        tasks=(TASK,),
        recipes="trainer",
        seeds=FOLDERS,
        epsilons=(6.0, 2.0),
        threads=1,
        runs_dir=str(runs_dir),
        **(RECIPE | {"steps": steps}),
    )
    for seed, folder in seeds(count):
        todo = [m for m in methods if (seed, m) not in done]
        if not todo:
            continue
        dev = load_task(TASK, data_dir, "dev", seed=folder)
        group = LMGroup(TASK, folder, tuple(_task(seed, folder, m) for m in todo))
        caches = None
        for method in sorted(
            todo, key=lambda m: m == "zero-shot"
        ):  # a training run fills the caches
            task = _task(seed, folder, method)
            noise = NoNoise.for_testing(seed) if method == "clip-only" else None
            start = time.perf_counter()
            with warnings.catch_warnings(), quiet_dp_accounting():
                warnings.simplefilter("ignore")
                row, trainer = run_trainer(
                    config, task, group, runs_dir / f"{task.run}-{method}", caches, noise=noise
                )
                secondary = trainer.evaluate(dev)
            if trainer.train_cache is not None and caches is None:
                caches = (trainer.train_cache, trainer.test_cache)
            record = dataclasses.asdict(row) | {
                "label": method,
                "folder": folder,
                "dev_accuracy": 100 * secondary.accuracy,
                "dev_correct": secondary.correct,
                "dev_examples": len(secondary.correct),
                "cell_seconds": time.perf_counter() - start,
            }
            if method == "clip-only":  # σ = 0: nothing private, whatever the ledger computed
                record |= {"noise_multiplier": 0.0, "private": False, "epsilon": None}
                record |= {"epsilon_rdp": math.inf, "epsilon_pld": math.inf}
            with (out / ROWS).open("a") as f:
                f.write(json.dumps(record) + "\n")
            written += 1
            print(
                f"{seed} {method}: {row.accuracy:.1f} % test, {record['dev_accuracy']:.1f} % dev, "
                f"{record['cell_seconds']:.0f} s",
                flush=True,
            )
            del trainer
            gc.collect()
            if limit is not None and written >= limit:
                return written
    return written


# --- the declaration: MDEs by the judging variance model ------------------------------------------


def _expected_table(comp: tuple[float, float, float], k: int, m: int) -> tuple[float, float]:
    """Var(d̄) and its Welch–Satterthwaite df under :func:`two_way_mean_variance` for a k × m design
    whose mean squares take their expectations under the components ``comp``."""
    s2s, s2e, s2r = comp
    terms = [
        (s2r + m * s2s, k - 1, 1.0),
        (s2r + k * s2e, m - 1, 1.0),
        (s2r, (k - 1) * (m - 1), -1.0),
    ]
    total = sum(sign * ms for ms, _, sign in terms)
    df = total**2 / sum(ms * ms / df for ms, df, _ in terms)
    return total / (k * m), df


def _mde(se: float, df: float) -> float:
    return (float(stats.t.ppf(0.95, df)) + float(stats.t.ppf(0.80, df))) * se


def mdes(headroom: Path = HEADROOM, k: int = 20, m: int = TEST_M) -> dict:
    """The MDEs (80 % power, one-sided 5 %) of the design, from the headroom run's variance
    components (TREC, top-2, T = 200, 3 seeds, m = 500): the drop by the two-way model of
    :func:`~dpnc_reproduce.claims.paired_accuracy_difference`; the share by the seed and example
    parts of :func:`~dpnc_reproduce.claims.paired_ratio` at r = 0.90 (delta method at the headroom's
    MeZO gain)."""
    rows = json.loads(Path(headroom).read_text())["rows"]

    def bits(method, eps=None):
        of = {
            r["seed"]: [int(c) for c in r["correct"]]
            for r in rows
            if r["task"] == TASK and r["method"] == method and r["epsilon"] == eps
        }
        return [of[s] for s in sorted(of)]

    zs, mz, d6 = bits("zero-shot"), bits("mezo"), bits("dpzero", 6.0)
    drop = [[100.0 * (a - b) for a, b in zip(u, v)] for u, v in zip(mz, d6)]
    var, df = _expected_table(two_way_components(drop), k, m)
    out = {
        "drop": {
            "se": math.sqrt(var),
            "df": df,
            "mde": _mde(math.sqrt(var), df),
            "headroom_estimate": paired_accuracy_difference(mz, d6).estimate,
        }
    }
    x = [[100.0 * (a - z) for a, z in zip(u, v)] for u, v in zip(d6, zs)]
    y = [[100.0 * (a - z) for a, z in zip(u, v)] for u, v in zip(mz, zs)]
    w = [[a - MIN_SHARE * b for a, b in zip(u, v)] for u, v in zip(x, y)]
    s2s, s2e, s2r = two_way_components(w)
    seed_part, example_part = (s2s + s2r / m) / k, (s2e + s2r / k) / m
    v = seed_part + example_part
    df_r = v**2 / (seed_part**2 / (k - 1) + example_part**2 / (m - 1))
    gain = statistics.fmean(statistics.fmean(r) for r in y)
    se_r = math.sqrt(v) / gain
    out["share"] = {
        "se": se_r,
        "df": df_r,
        "mde": _mde(se_r, df_r),
        "mezo_gain_points": gain,
        "headroom_estimate": paired_ratio(x, y).estimate,
    }
    return out


def declaration(headroom: Path = HEADROOM) -> dict:
    """The declared design, rule, thresholds, statistics and MDEs (``declaration.json``; the judge
    reads it)."""
    power = mdes(headroom)
    return {
        "design": {
            "task": TASK,
            **RECIPE,
            "folders": list(FOLDERS),
            "training_seeds_per_folder": TRAINING_SEEDS,
            "seeds": [s for s, _ in seeds()],
            "methods": list(METHODS),
            "primary_test": f"TREC test split (m = {TEST_M}, the same questions in every folder)",
            "secondary_test": "each folder's k-shot dev questions (drawn from TREC's training set: a "
            "training-distribution set, not the paper's test set)",
        },
        "rule": "interval first: a claim holds when its whole 95 % interval lies on the claimed side of the "
        "threshold, fails when all of it lies on the other side, whatever the power; an interval that "
        "straddles the threshold reads 'underpowered for this design' where the declared MDE below exceeds "
        "the paper's distance to the threshold, else no signal",
        "claims": [
            {
                "name": "drop",
                "statement": "TREC, top-2, T = 200: DPZero at ε = 6 loses at most 2.6 points to MeZO",
                "quantity": "MeZO − DPZero ε=6 (points, primary test set)",
                "direction": "at most",
                "threshold": MAX_DROP,
                "paper": PAPER_DROP,
                "statistic": "paired_accuracy_difference: 95 % t interval, two-way random-effects ANOVA over the 20 "
                "seeds × 500 test questions, Welch–Satterthwaite df",
                "declared_mde": power["drop"]["mde"],
            },
            {
                "name": "share",
                "statement": "TREC, top-2, T = 200: DPZero at ε = 6 keeps at least 0.90 of MeZO's "
                "gain over zero-shot",
                "quantity": "(DPZero ε=6 − zero-shot) / (MeZO − zero-shot), primary test set",
                "direction": "at least",
                "threshold": MIN_SHARE,
                "paper": PAPER_SHARE,
                "statistic": "paired_ratio: Fieller's 95 % interval, seed and test-question parts, Welch–Satterthwaite "
                "df at the estimate, paired over the 20 seeds; no verdict where MeZO's gain interval "
                "includes 0",
                "declared_mde": power["share"]["mde"],
            },
        ],
        "measurements": "not claims: MeZO − zero-shot, DPZero ε = 2 against MeZO, the clip-only step against MeZO "
        "(what clipping costs) and against DPZero ε = 6 (what the noise costs), each a paired 95 % "
        "interval; every quantity also on the dev questions (secondary, training distribution)",
        "variance_model": {"source": str(headroom), **power},
    }


def trend_declaration(headroom: Path = HEADROOM) -> dict:
    """The T = 600 design (``--design trend``), declared before its first run: its claims,
    thresholds and MDEs.

    The MDEs take the headroom run's T = 200 variance components for T = 600 too (no T = 600 run
    existed), at 5 seeds; the difference of the two shares is taken as the sum of two such
    independent shares' variances (seeds and questions shared by both T make them positively
    correlated, so this MDE is conservative)."""
    power = mdes(headroom, k=TREND_SEEDS)
    share, drop = power["share"], power["drop"]
    return {
        "design": {
            "task": TASK,
            **(RECIPE | {"steps": TREND_STEPS}),
            "seeds": [s for s, _ in seeds(TREND_SEEDS)],
            "methods": list(TREND_METHODS),
            "compared_with": "the decisive run's T = 200 rows of the same seeds "
            "(docs/results/dpzero-decisive/rows.jsonl)",
            "primary_test": f"TREC test split (m = {TEST_M})",
        },
        "rule": "interval first, as the decisive run's declaration",
        "claims": [
            {
                "name": "share-600",
                "statement": "TREC, top-2, T = 600: DPZero at ε = 6 keeps at least 0.90 of MeZO's gain",
                "direction": "at least",
                "threshold": MIN_SHARE,
                "paper": PAPER_SHARE,
                "statistic": "paired_ratio (Fieller), 5 seeds × 500 questions",
                "declared_mde": share["mde"],
            },
            {
                "name": "share-grows",
                "statement": "DPZero at ε = 6 keeps more of MeZO's gain at T = 600 than at T = 200",
                "direction": "at least",
                "threshold": 0.0,
                "paper": PAPER_SHARE - share["headroom_estimate"],
                "paper_note": "the paper's TREC share (0.98) minus the headroom run's at T = 200",
                "statistic": "paired_ratio_difference (delta method), the same 5 seeds × 500 questions",
                "declared_mde": math.sqrt(2) * share["mde"],
            },
            {
                "name": "drop-600",
                "statement": "TREC, top-2, T = 600: DPZero at ε = 6 loses at most 2.6 points to MeZO",
                "direction": "at most",
                "threshold": MAX_DROP,
                "paper": PAPER_DROP,
                "statistic": "paired_accuracy_difference, 5 seeds × 500 questions",
                "declared_mde": drop["mde"],
            },
        ],
        "variance_model": {"source": str(headroom), **power},
    }


def _points(iv) -> str:
    return f"{iv.estimate:+.1f} [{iv.low:+.1f}, {iv.high:+.1f}] points (df {iv.df:.1f}, {iv.seeds} seeds)"


def judge(out: Path) -> dict:
    """The declared claims on the rows so far (seeds with every method only), interval first."""
    dec = json.loads((out / "declaration.json").read_text())
    rows = [json.loads(line) for line in (out / ROWS).read_text().splitlines() if line.strip()]
    by = {(r["seed"], r["label"]): r for r in rows}
    full = [s for s in dec["design"]["seeds"] if all((s, m) in by for m in METHODS)]
    result: dict = {"seeds_complete": len(full), "claims": [], "measurements": {}}
    if len(full) < 2:
        return result

    def bits(m, key="correct"):
        return [[int(c) for c in by[s, m][key]] for s in full]

    zs, mz, d6, d2, co = (bits(m) for m in METHODS)
    pairs = {
        "MeZO − zero-shot": ("mezo", "zero-shot"),
        "MeZO − DPZero ε=6": ("mezo", "dpzero-eps6"),
        "MeZO − DPZero ε=2": ("mezo", "dpzero-eps2"),
        "MeZO − clip-only (clipping's cost)": ("mezo", "clip-only"),
        "clip-only − DPZero ε=6 (the noise's cost)": ("clip-only", "dpzero-eps6"),
    }
    result["measurements"]["test"] = {
        k: _points(paired_accuracy_difference(bits(a), bits(b))) for k, (a, b) in pairs.items()
    }
    # dev (secondary): each folder's own questions, so a t interval over the seeds' accuracy
    #     differences
    result["measurements"]["dev"] = {}
    for k, (a, b) in pairs.items():
        d = [by[s, a]["dev_accuracy"] - by[s, b]["dev_accuracy"] for s in full]
        half = float(stats.t.ppf(0.975, len(d) - 1)) * statistics.stdev(d) / math.sqrt(len(d))
        mean = statistics.fmean(d)
        result["measurements"]["dev"][k] = (
            f"{mean:+.1f} [{mean - half:+.1f}, {mean + half:+.1f}] points"
        )
    c_drop, c_share = dec["claims"]
    drop = paired_accuracy_difference(mz, d6)
    share = paired_ratio(*_gains(rows, full))
    result["claims"] = [
        _judged(c_drop, drop, below(drop, MAX_DROP), " points"),
        _judged(c_share, share, exceeds(share, MIN_SHARE), ""),
    ]
    return result


def _judged(claim: dict, iv, holds: bool | None, unit: str) -> dict:
    """A declared claim read from its interval, interval first, with the declaration's MDE (as
    JSON)."""
    return powered_claim(
        claim["statement"],
        iv,
        holds,
        claim["paper"],
        claim["threshold"],
        str(iv),
        unit=unit,
        declared_mde=claim["declared_mde"],
    ).to_json()


def _bits(rows: list[dict], seeds_: list[int], method: str) -> list[list[int]]:
    by = {(r["seed"], r["label"]): r for r in rows}
    return [[int(c) for c in by[s, method]["correct"]] for s in seeds_]


def _gains(rows: list[dict], seeds_: list[int]) -> tuple[list, list]:
    """x = DPZero ε=6 − zero-shot and y = MeZO − zero-shot, per seed and question (points)."""
    zs, mz, d6 = (_bits(rows, seeds_, m) for m in ("zero-shot", "mezo", "dpzero-eps6"))
    x = [[100.0 * (a - z) for a, z in zip(u, v)] for u, v in zip(d6, zs)]
    y = [[100.0 * (a - z) for a, z in zip(u, v)] for u, v in zip(mz, zs)]
    return x, y


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / ROWS).read_text().splitlines() if line.strip()]


def judge_trend(out: Path, decisive: Path = Path("docs/results/dpzero-decisive")) -> dict:
    """The T = 600 design's declared claims on the seeds complete at both T, interval first."""
    dec = json.loads((out / "declaration.json").read_text())
    long, short = _rows(out), _rows(decisive)
    have = {(r["seed"], r["label"]) for r in long} | {
        ("T200", r["seed"], r["label"]) for r in short
    }
    full = [
        s
        for s in dec["design"]["seeds"]
        if all((s, m) in have and ("T200", s, m) in have for m in TREND_METHODS)
    ]
    result: dict = {"seeds_complete": len(full), "claims": [], "measurements": {}}
    if len(full) < 2:
        return result
    x6, y6 = _gains(long, full)
    x2, y2 = _gains(short, full)
    share6, share2 = paired_ratio(x6, y6), paired_ratio(x2, y2)
    grows = paired_ratio_difference(x6, y6, x2, y2)
    drop = paired_accuracy_difference(_bits(long, full, "mezo"), _bits(long, full, "dpzero-eps6"))
    result["measurements"] = {
        "share at T = 200 (same seeds)": str(share2),
        "MeZO − zero-shot at T = 600": _points(
            paired_accuracy_difference(_bits(long, full, "mezo"), _bits(long, full, "zero-shot"))
        ),
        "MeZO − zero-shot at T = 200": _points(
            paired_accuracy_difference(_bits(short, full, "mezo"), _bits(short, full, "zero-shot"))
        ),
    }
    verdicts = (exceeds(share6, MIN_SHARE), exceeds(grows, 0.0), below(drop, MAX_DROP))
    result["claims"] = [
        _judged(c, iv, holds, " points" if c["name"] == "drop-600" else "")
        for c, iv, holds in zip(dec["claims"], (share6, grows, drop), verdicts)
    ]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--declare", action="store_true", help="write declaration.json (before any run)"
    )
    parser.add_argument(
        "--run", action="store_true", help="run (resumable) every (seed, method) not yet done"
    )
    parser.add_argument(
        "--judge", action="store_true", help="judge the declared claims on the rows so far"
    )
    parser.add_argument(
        "--design",
        choices=("decisive", "trend"),
        default="decisive",
        help="trend: T = 600, 5 seeds",
    )
    parser.add_argument("--data-dir", help="the folder of the LM-BFF k-shot splits (with --run)")
    parser.add_argument(
        "--out", type=Path, default=None, help="default docs/results/dpzero-<design>"
    )
    parser.add_argument(
        "--runs-dir", type=Path, default=None, help="default /tmp/dpzero-<design>-runs"
    )
    parser.add_argument("--limit", type=int, default=None, help="stop after this many new rows")
    args = parser.parse_args()
    if args.run and args.data_dir is None:
        parser.error("--run needs --data-dir, the folder of the LM-BFF k-shot splits")
    trend = args.design == "trend"
    out = args.out or Path(f"docs/results/dpzero-{args.design}")
    runs_dir = args.runs_dir or Path(f"/tmp/dpzero-{args.design}-runs")
    if args.declare:
        out.mkdir(parents=True, exist_ok=True)
        declared = trend_declaration() if trend else declaration()
        (out / "declaration.json").write_text(json.dumps(declared, indent=1, ensure_ascii=False))
    if args.run:
        run(args.data_dir, out, runs_dir, limit=args.limit, trend=trend)
    if args.judge:
        result = (judge_trend if trend else judge)(out)
        rows = _rows(out)
        result |= {
            "command": f"python -m dpnc_reproduce.dpzero_decisive --run --design {args.design} "
            f"--data-dir ../shared/data (then --judge)",
            "seconds": sum(r["cell_seconds"] for r in rows),  # the cells' own wall time, summed
        }
        text = json.dumps(result, indent=1, ensure_ascii=False)
        (out / "result.json").write_text(text + "\n")
        print(text)


if __name__ == "__main__":
    main()
