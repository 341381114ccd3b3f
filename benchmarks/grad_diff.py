"""Batched GRAD/DIFF estimators vs a per-direction Python loop computing the same estimate, on CPU.

GRAD and DIFF (Zhang–Tran–Cutkosky, Algorithms 1–2; ``dpnc.estimators.grad_estimate`` and
``diff_estimate``) use m directions u_ij on the unit sphere per example i (m = d in the paper), so one
estimate needs 2·b·m evaluations of f. dpnc evaluates all of them in ONE call of
``problem.losses(points (b, 2m, d), index)`` (DESIGN.md, "Batched evaluation"). The claim to check is that
this beats evaluating them one direction at a time, and by how much. Baselines, measured in the same run:

  (a) batched: ``grad_estimate`` / ``diff_estimate`` as they are (directions drawn inside);
  (b) per-direction loop: the same directions, drawn once with ``sphere_directions`` (same generator
      state, so the very same u_ij), then for j = 1..m one call ``problem.losses(points (b, 2, d), index)``
      on the b examples at x ± δu_ij (GRAD) or x + δu_ij, y + δu_ij (DIFF), the difference made finite,
      clipped and accumulated as in the batched code;
  (c) scalar loop: the same, one call per (i, j) on points (1, 2, d); run only where b·m is at most
      ``--scalar-cap`` calls (it is ~b times slower than (b));
  (d) directions alone: ``sphere_directions(b, m, d)``, the b·m·d normals that (a), (b) and (c) all draw,
      so the share of the time that batching cannot remove is visible.
Before timing, (b) and (c) are asserted to agree with (a) to 1e-10 (max abs difference per coordinate).

Time (one process, ``torch.set_num_threads``): for each configuration the modes run round-robin, one
sample of each per round, so drift of the machine hits every mode alike; 2 warm-up rounds, then the
median (and min) over ``--rounds`` rounds. A sample repeats the call until it lasts about ``--target-ms``
(the repetition count is fixed per mode in the first warm-up round) and is reported per call.

Problems: ``L1Regression.synthetic(n=1000, d)`` (|⟨a, x⟩ − b|, L = 1) at a random x ∼ N(0, I/4), and
``TwoLayerReLU.breast_cancer(hidden=h)`` (hinge loss, d = 32h + 1, real data, 569 examples) at its
standard random init; y = x + 0.1·(a random unit vector) for DIFF; δ = ``--delta``; float64; the b
examples are a fixed random subset.

    python benchmarks/grad_diff.py            # full run, 2-3 minutes on 2 cores
    python benchmarks/grad_diff.py --quick    # small sizes, smoke run in seconds
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import torch

from dpnc.privacy.clipping import clip_scalars, zero_nonfinite
from dpnc.estimators import diff_estimate, grad_estimate, sphere_directions
from dpnc.problems.nonsmooth import L1Regression, TwoLayerReLU

SEED, TOL = 1234, 1e-10
QUICK = dict(dims=[10, 50], hidden=[1], batches=[1, 16], rounds=3, target_ms=5.0)


# --- the loop baselines: the same estimate, one direction (or one example and direction) at a time -------


def _pair(estimator, problem, x, y, delta):
    """(the two points of direction u (..., d), the factor, the clipping bound) of GRAD or DIFF."""
    d = problem.dim
    if estimator == "GRAD":
        return (lambda u: (x + delta * u, x - delta * u)), d / (2 * delta), 2 * problem.lipschitz * delta
    bound = problem.lipschitz * float(torch.linalg.vector_norm(x - y))
    return (lambda u: (x + delta * u, y + delta * u)), d / delta, bound


def loop_directions(estimator, problem, x, y, index, delta, generator, m):
    """One ``problem.losses`` call on points (b, 2, d) per direction j; returns (b, d) per-example estimates."""
    points, factor, bound = _pair(estimator, problem, x, y, delta)
    u = sphere_directions(len(index), m, problem.dim, generator, dtype=x.dtype)
    total = torch.zeros(len(index), problem.dim, dtype=x.dtype)
    for j in range(m):
        uj = u[:, j]
        values = problem.losses(torch.stack(points(uj), dim=1), index)
        diff, _ = clip_scalars(zero_nonfinite(values[:, 0] - values[:, 1])[0], bound)
        total += diff[:, None] * uj
    return total * (factor / m)


def loop_scalar(estimator, problem, x, y, index, delta, generator, m):
    """One ``problem.losses`` call on points (1, 2, d) per example i and direction j."""
    points, factor, bound = _pair(estimator, problem, x, y, delta)
    u = sphere_directions(len(index), m, problem.dim, generator, dtype=x.dtype)
    total = torch.zeros(len(index), problem.dim, dtype=x.dtype)
    for i in range(len(index)):
        one = index[i:i + 1]
        for j in range(m):
            uij = u[i, j]
            values = problem.losses(torch.stack(points(uij))[None], one)
            diff, _ = clip_scalars(zero_nonfinite(values[:, 0] - values[:, 1])[0], bound)
            total[i] += diff[0] * uij
    return total * (factor / m)


def batched(estimator, problem, x, y, index, delta, generator, m):
    if estimator == "GRAD":
        return grad_estimate(problem, x, index, delta, generator=generator, m=m).per_example
    return diff_estimate(problem, x, y, index, delta, generator=generator, m=m).per_example


# --- setup and timing -------------------------------------------------------------------------------------


def problems(args):
    """(label, problem, x, y) for every problem size."""
    out = []
    for d in args.dims:
        problem = L1Regression.synthetic(1000, d, seed=0)
        gen = torch.Generator().manual_seed(SEED)
        x = 0.5 * torch.randn(d, generator=gen, dtype=torch.float64)
        out.append(("L1Regression", problem, x, gen))
    for h in args.hidden:
        problem = TwoLayerReLU.breast_cancer(hidden=h)
        gen = torch.Generator().manual_seed(SEED)
        out.append((f"TwoLayerReLU(h={h})", problem, problem.init(gen), gen))
    result = []
    for label, problem, x, gen in out:
        step = torch.randn(problem.dim, generator=gen, dtype=torch.float64)
        result.append((label, problem, x, x + 0.1 * step / torch.linalg.vector_norm(step)))
    return result


def check(estimator, problem, x, y, index, delta, m, scalar):
    """Max abs difference of each loop from the batched estimate (same seed, so the same directions)."""
    ref = batched(estimator, problem, x, y, index, delta, torch.Generator().manual_seed(SEED), m)
    errors = {}
    for name, loop in (("loop", loop_directions), ("scalar", loop_scalar)):
        if name == "scalar" and not scalar:
            continue
        est = loop(estimator, problem, x, y, index, delta, torch.Generator().manual_seed(SEED), m)
        errors[name] = float((est - ref).abs().max())
        assert errors[name] <= TOL, f"{estimator} {problem!r} b={len(index)}: {name} differs by {errors[name]:.3g}"
    return errors


def make_modes(estimator, problem, x, y, index, delta, m, scalar):
    """name -> a call of that mode; all share one generator (its state only picks the directions)."""
    gen = torch.Generator().manual_seed(SEED + 1)
    args = (estimator, problem, x, y, index, delta, gen, m)
    modes = {"batched": partial(batched, *args), "loop": partial(loop_directions, *args),
             "directions": partial(sphere_directions, len(index), m, problem.dim, gen, dtype=x.dtype)}
    if scalar:
        modes["scalar"] = partial(loop_scalar, *args)
    return modes


def time_config(modes, rounds, target_ms):
    """name -> {median, min, max} ms per call, the modes run round-robin; warm-up round 1 fixes the repetitions."""
    reps = {}
    times = {name: [] for name in modes}
    for r in range(2 + rounds):
        for name, call in modes.items():
            n = reps.get(name, 1)
            t0 = time.perf_counter()
            for _ in range(n):
                call()
            dt = (time.perf_counter() - t0) * 1e3 / n
            if r == 0:
                reps[name] = max(1, math.ceil(target_ms / max(dt, 1e-3)))
            elif r >= 2:
                times[name].append(dt)
    return {name: dict(median=statistics.median(t), min=min(t), max=max(t)) for name, t in times.items()}, reps


def run(args):
    rows = []
    for label, problem, x, y in problems(args):
        d = problem.dim
        m = d if args.m is None else args.m
        for b in args.batches:
            index = torch.randperm(problem.n, generator=torch.Generator().manual_seed(b))[:b]
            scalar = b * m <= args.scalar_cap
            for estimator in ("GRAD", "DIFF"):
                errors = check(estimator, problem, x, y, index, args.delta, m, scalar)
                modes = make_modes(estimator, problem, x, y, index, args.delta, m, scalar)
                ms, reps = time_config(modes, args.rounds, args.target_ms)
                row = dict(problem=label, estimator=estimator, d=d, b=b, m=m, evaluations=2 * b * m,
                           ms=ms, reps=reps, max_abs_error=errors)
                rows.append(row)
                print(f"{label} {estimator} d={d} b={b} m={m}: "
                      + ", ".join(f"{k} {v['median']:.2f} ms" for k, v in ms.items()),
                      file=sys.stderr, flush=True)
    return rows


def table(args, rows, load, seconds):
    lines = [f"GRAD/DIFF of dpnc.estimators, all 2·b·m evaluations in one `problem.losses` call (batched), vs a "
             f"Python loop over the m directions (loop: one call on (b, 2, d) per direction) and over (i, j) "
             f"(scalar: one call per example and direction, run where b·m <= {args.scalar_cap}). Same directions, "
             f"asserted equal to {TOL:g}. m = {'d' if args.m is None else args.m}, δ = {args.delta}, float64; "
             f"{torch.get_num_threads()} threads; median of {args.rounds} rounds after 2 warm-up; "
             f"torch {torch.__version__}; 1-min load average {load[0]:.2f} before, {load[1]:.2f} after "
             f"({os.cpu_count()} CPUs); {seconds:.0f} s in all.",
             "",
             "| problem | est. | d | b | m | batched ms | loop ms | loop / batched | (mins) | scalar ms "
             "| scalar / batched | evals/s batched | directions ms | loop / batched excl. directions |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = {k: v["median"] for k, v in r["ms"].items()}
        mins = f"{r['ms']['loop']['min'] / r['ms']['batched']['min']:.1f}"
        rest = t["batched"] - t["directions"]
        excl = f"{(t['loop'] - t['directions']) / rest:.1f}" if rest > 0.1 * t["batched"] else "—"
        scalar = (f"{t['scalar']:.2f} | {t['scalar'] / t['batched']:.1f}" if "scalar" in t else "— | —")
        lines.append(f"| {r['problem']} | {r['estimator']} | {r['d']} | {r['b']} | {r['m']} | {t['batched']:.2f} "
                     f"| {t['loop']:.2f} | {t['loop'] / t['batched']:.1f} | {mins} | {scalar} "
                     f"| {r['evaluations'] / t['batched'] * 1e3:.3g} | {t['directions']:.2f} | {excl} |")
    lines += ["", "ms are medians; (mins): loop / batched of the least-disturbed samples, a check on a shared machine. "
              "evals/s batched: 2·b·m / batched time. directions ms: `sphere_directions(b, m, d)` alone (b·m·d "
              "normals), which batched, loop and scalar all include; with m = d it grows as b·d², like the evaluations "
              "of these linear-cost objectives. The last column subtracts it from both medians (a derived figure; "
              "— where it is over 90% of the batched time)."]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dims", type=int, nargs="+", default=[10, 50, 200], help="dimensions of L1Regression")
    p.add_argument("--hidden", type=int, nargs="+", default=[1, 6],
                   help="hidden widths of TwoLayerReLU on breast cancer (d = 32h + 1)")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 16, 128], help="examples per estimate (b)")
    p.add_argument("--m", type=int, help="directions per example (default d, the paper's setting)")
    p.add_argument("--delta", type=float, default=0.01)
    p.add_argument("--rounds", type=int, default=5, help="timed rounds after 2 warm-up rounds")
    p.add_argument("--target-ms", type=float, default=20.0, help="repeat a call within a sample up to this long")
    p.add_argument("--scalar-cap", type=int, default=4096, help="run the scalar loop only where b·m <= this")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="small sizes and few rounds (smoke run)")
    p.add_argument("--out", type=Path, help="markdown output (default benchmarks/results/grad_diff[_quick].md)")
    args = p.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    if args.out is None:
        args.out = Path(__file__).parent / "results" / ("grad_diff_quick.md" if args.quick else "grad_diff.md")
    torch.set_num_threads(args.threads)

    load = [os.getloadavg()[0]]
    start = time.perf_counter()
    rows = run(args)
    seconds = time.perf_counter() - start
    load.append(os.getloadavg()[0])
    md = table(args, rows, load, seconds)
    print(md, end="")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(md)
    config = {k: getattr(args, k) for k in ("dims", "hidden", "batches", "m", "delta", "rounds", "target_ms",
                                            "scalar_cap", "threads")}
    result = {"config": config, "torch": torch.__version__, "loadavg": load, "seconds": seconds, "rows": rows}
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
