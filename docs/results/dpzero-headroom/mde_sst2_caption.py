"""Can a CPU design decide the Table 3 caption's claim on SST-2 ("DPZero at ε = 2 is within 1 point of MeZO")?

Declared on 28 Nov 2026 before any SST-2 run (summary.md's claim 6). The claim holds only if the whole 95 % interval of
MeZO − DPZero ε = 2 lies inside (−1, +1) points: even at a true difference of 0 the interval's half-width must be
below 1, and with 80 % power (both ends, TOST) (t₀.₉₇₅ + t₀.₉₀)·s.e. < 1.

Variance model: the committed SST-2 runs of the same comparison (MiniLM, prompt head, 3 seeds 42/13/21, the 872
GLUE dev sentences), split into the two-way components of dpnc_reproduce.variance (seed σ²_S, test-example σ²_E,
residual σ²_e). The design's s.e. is then predicted for k seeds on the 872 test sentences, and the seeds k that
would bring the TOST MDE under 1 point are given. No larger evaluation set is used: SST-2's only other labelled rows
are the GLUE train *phrases* (parse-tree fragments, another distribution than the test sentences), and with
σ²_S estimated at 0 from 3 seeds (2 df) an m → ∞ design would rest on that zero alone.
Run from the repository root:
    .venv/bin/python docs/results/dpzero-headroom/mde_sst2_caption.py \
        > docs/results/dpzero-headroom/mde_sst2_caption.json
"""
import json
import math
import statistics

from scipy import stats

from dpnc_reproduce.variance import two_way_components

MODELS = {   # name: (result, mode, DPZero ε = 2 clip)
    "top-2, T = 120 (GPU, gpu-clip-grid-T120)": ("docs/results/dpzero-dimension/gpu-clip-grid-T120", "top-2", 200.0),
    "all, T = 120 (GPU, gpu-clip-grid-T120)": ("docs/results/dpzero-dimension/gpu-clip-grid-T120", "all", 200.0),
    "head, T = 1000 (CPU, dpzero-lm-tasks)": ("docs/results/dpzero-lm-tasks", "head", 0.5),
}


def design(s2, e2, r2, k, m):
    """s.e. and Welch–Satterthwaite df of the grand mean for k seeds and m examples (m = inf: the seed part)."""
    seed_v = (s2 + (r2 / m if math.isfinite(m) else 0.0)) / k
    example_v = 0.0 if math.isinf(m) else e2 / m
    total = seed_v + example_v
    den = seed_v ** 2 / (k - 1) + (example_v ** 2 / (m - 1) if example_v else 0.0)
    df = total ** 2 / den if den else math.inf
    return math.sqrt(total), df


out = {}
for name, (folder, mode, clip) in MODELS.items():
    rows = [x for x in json.load(open(f"{folder}/result.json"))["rows"] if x["task"] == "SST-2"
            and x.get("direction", "gaussian") == "gaussian" and (x.get("mode") or x.get("train")) == mode
            and x.get("phase", "test") in (None, "test")]

    def bits(method, eps=None, c=None, rows=rows):
        found = {x["seed"]: [int(v) for v in x["correct"]] for x in rows if x["method"] == method
                 and (eps is None or x["epsilon"] == eps) and (c is None or x["clip"] == c)}
        return [found[s] for s in (42, 13, 21)]

    mz, d2 = bits("mezo"), bits("dpzero", 2.0, clip)
    d = [[100.0 * (u - v) for u, v in zip(a, b)] for a, b in zip(mz, d2)]
    s2, e2, r2 = two_way_components(d)
    entry = {"estimate": statistics.fmean(statistics.fmean(r) for r in d), "sigma2_seed": s2,
             "sigma2_example": e2, "sigma2_residual": r2, "designs": {}}
    for k, m in ((3, 872), (10, 872)):
        se, df = design(s2, e2, r2, k, m)
        t = float(stats.t.ppf(0.975, df)) if math.isfinite(df) else 1.96
        tost = t + (float(stats.t.ppf(0.90, df)) if math.isfinite(df) else 1.2816)
        entry["designs"][f"k={k}, m={m}"] = {"se": se, "df": df, "half_width": t * se, "mde_tost_80": tost * se,
                                            "decidable": tost * se < 1.0}
    need = next((k for k in range(3, 1001) if (lambda se_df: (float(stats.t.ppf(0.975, se_df[1])) + float(
        stats.t.ppf(0.90, se_df[1]))) * se_df[0] < 1.0)(design(s2, e2, r2, k, 872))), None)
    entry["seeds_needed_m872"] = need
    out[name] = entry
print(json.dumps(out, indent=1, default=str))
