"""What every experiment writes the same way: CSV tables, medians over seeds and log-log slopes."""

from __future__ import annotations

import csv
import json
import math
import multiprocessing
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import torch
from tqdm.auto import tqdm

from dpnc.privacy.budget import check_delta


def write_csv(path: Path, rows: Sequence[dict]) -> Path:
    """Rows of equal keys as a CSV file with a header."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


# Rules for :func:`check_value` and :func:`check_axis`: (what a value must be, a predicate).
INTEGER = ("an integer >= 1", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1)
NATURAL = ("an integer >= 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0)
POSITIVE = ("a finite number > 0", lambda v: _real(v) and math.isfinite(v) and v > 0)
NONNEGATIVE = ("a finite number >= 0", lambda v: _real(v) and math.isfinite(v) and v >= 0)
Rule = tuple[str, Callable[[object], bool]]


def one_of(choices: Sequence) -> Rule:
    """The rule "among ``choices``"."""
    return f"among {tuple(choices)}", lambda v: v in choices


def _real(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_value(name: str, value, rule: Rule) -> None:
    """``value`` obeys ``rule`` (:data:`INTEGER`, :data:`NATURAL`, :data:`POSITIVE`, :data:`NONNEGATIVE`,
    :func:`one_of` or any (description, predicate) pair), else ValueError naming ``name`` and the rule."""
    if not rule[1](value):
        raise ValueError(f"{name} must be {rule[0]}; got {value!r}")


def check_axis(name: str, values: Sequence, rule: Rule) -> None:
    """A grid axis ``name`` is non-empty and each of its values obeys ``rule``, else ValueError naming the axis
    and the first offending value."""
    if not values:
        raise ValueError(f"{name} must be non-empty; got {tuple(values)!r}")
    for v in values:
        check_value(name, v, rule)


def check_grid(config, methods: Sequence[str]) -> None:
    """Validate a nonsmooth experiment's grid: known methods, dims >= 1, sample sizes >= 4, finite ε > 0,
    seeds >= 1, δ in (0, 1)."""
    check_axis("methods", config.methods, one_of(methods))
    check_axis("dims", config.dims, INTEGER)
    check_axis("samples", config.samples, ("an integer >= 4", lambda n: INTEGER[1](n) and n >= 4))
    check_axis("epsilons", config.epsilons, POSITIVE)
    check_value("seeds", config.seeds, INTEGER)
    check_delta(config.dp_delta, "dp_delta")


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log y against log x (inf if some y is not finite and positive)."""
    if not all(math.isfinite(y) and y > 0 for y in ys):
        return math.inf
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def group_medians(rows: Sequence[dict], metric: str, keys: Sequence[str], x: str
                  ) -> dict[tuple, list[tuple[float, float]]]:
    """(row[k] for k in ``keys``) → [(row[x], median over the group's rows of ``metric``)] sorted by x."""
    groups: dict[tuple, dict[float, list[float]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), {}).setdefault(r[x], []).append(r[metric])
    return {key: sorted((v, statistics.median(ys)) for v, ys in by_x.items()) for key, by_x in groups.items()}


def fmt_slope(slope: float, values: Sequence[float]) -> str:
    """A fitted slope, or why there is none (a certificate of ~0: a stationary point within the radius,
    whose rounding-level value would make the log-log fit meaningless)."""
    if min(values) < 1e-9:
        return f"reaches ~0 ({min(values):.1e})"
    return f"{slope:.2f}"


def privacy_claim(rows: Sequence[dict]) -> tuple[str, bool, str]:
    """The claim every private experiment checks on its rows (``epsilon`` the target; ``epsilon_zcdp``,
    ``epsilon_pld``, ``epsilon_rdp`` the accountant's answers): each run spends exactly its ε by zCDP and
    at most its ε by the tight PLD; dp-accounting's RDP (discrete orders, looser) is shown, not judged."""
    over = [r for r in rows
            if abs(r["epsilon_zcdp"] / r["epsilon"] - 1) > 1e-6 or r["epsilon_pld"] > r["epsilon"] * (1 + 1e-6)]
    ratio = {k: max(r[k] / r["epsilon"] for r in rows) for k in ("epsilon_zcdp", "epsilon_pld", "epsilon_rdp")}
    return ("every run is (ε, δ_DP)-DP by the accountant: the zCDP ρ it spends converts back to the target ε "
            "and the tight PLD ε is ≤ the target", not over,
            f"max zCDP ε / target {ratio['epsilon_zcdp']:.6f}; max PLD ε / target {ratio['epsilon_pld']:.4f}; "
            f"dp-accounting's RDP (discrete orders, looser): max {ratio['epsilon_rdp']:.5f}; {len(over)} run(s) off")


def run_tasks(run, tasks: Sequence[tuple], *, cost, desc: str, progress: bool = True, workers: int = 2) -> list:
    """``[run(*task) for task in tasks]``, ``workers`` processes at a time (one torch thread each), the costliest
    (by ``cost(*task)``) submitted first, with a progress bar; results in the order of ``tasks``.

    ``run`` and ``cost`` must be picklable (module-level functions, or ``functools.partial`` of them).
    """
    bar = tqdm(total=len(tasks), desc=desc, disable=not progress)
    if workers <= 1:
        results = []
        for task in tasks:
            results.append(run(*task))
            bar.update()
    else:
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                              else "spawn")
        order = sorted(range(len(tasks)), key=lambda i: -cost(*tasks[i]))
        with ProcessPoolExecutor(workers, mp_context=context, initializer=torch.set_num_threads,
                                 initargs=(1,)) as pool:
            futures = {i: pool.submit(run, *tasks[i]) for i in order}
            for future in as_completed(futures.values()):
                future.result()  # surface a failure at once
                bar.update()
            results = [futures[i].result() for i in range(len(tasks))]
    bar.close()
    return results


def save_result(out: Path, result: dict, summary: str) -> list[Path]:
    """Write ``result.json`` (every row and the configuration, for re-analysis) and ``summary.md``; their paths."""
    (out / "result.json").write_text(json.dumps(result))
    (out / "summary.md").write_text(summary)
    return [out / "result.json", out / "summary.md"]
