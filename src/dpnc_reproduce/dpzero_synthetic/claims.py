"""The dpzero-synthetic claims (docs/papers.md, DPZero §4.1), each one object
(:class:`~dpnc_reproduce.judging.ClaimSpec`): declared before the run and judged after it from the
same spec, in the order the tables show them.

The paper's claims are judged on the test gradient norm at the train-chosen point of each seed
(:class:`Grid`): comparisons on per-seed log-ratios (paired by seed), trends on per-seed log-log
slopes against d, each a 95 % t interval over the seeds (one seed: no interval, no signal). A
(Hessian, d) cell not in the grid (``high_rank_max_d``) is left out of every claim."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from functools import cached_property

from dpnc_reproduce import claims as stats
from dpnc_reproduce import facts
from dpnc_reproduce.common import loglog_slope
from dpnc_reproduce.dpzero_synthetic.report import (
    RANK_LABEL,
    TABLE1,
    VERDICT,
    _axes,
    _log,
    edges,
    instance_factor,
    selected,
    t_grid_note,
    trace,
)
from dpnc_reproduce.dpzero_synthetic.run import (
    RATE_REGIME,
    RATE_TOL,
    SyntheticConfig,
    SyntheticRow,
)
from dpnc_reproduce.judging import ClaimSpec, Verdict, on_view, render
from dpnc_reproduce.protocol import Claim

COUNTS = "{parts_hold} hold, {parts_fail} fail, {parts_no_signal} no signal (of {parts})"
ONE_SEED = " (one seed: no interval, so no signal)"
RATIO = "95 % t interval over seeds of the paired log-ratio; one seed: no verdict"
SLOPE = "95 % t interval over the per-seed log-log slopes in d; one seed: no verdict"
# a comparison over cells: the counts, or the point estimates where no cell has an interval
CELLS = (
    "no interval in any of {cells} cells; point log-ratios from {lowest:.2f} to {highest:.2f}, "
    "{positive} of {cells} > 0",
    "{counts} cells, on log-ratio intervals over seeds",
    "; not holding: {not_holding}",
    "{one_seed}",
)


class Grid:
    """What the paper's claims read: per (hessian, d, method, seed) the metrics at the train-chosen
    point (``values``, :func:`~.report.selected`) and, where known, the chosen row and the grid
    edges it sits on (``chosen``, :func:`~.report.edges`)."""

    def __init__(self, values: dict, chosen: dict | None = None):
        self.values, self.chosen = values, chosen
        self.hessians, _, self.methods = _axes(values)
        self.seeds = sorted({k[3] for k in values})
        self.runs = {(h, d, m) for h, d, m, _ in values}
        self.g = {k: [values[(*k, s)]["test_grad_norm"] for s in self.seeds] for k in self.runs}
        self.train = {
            k: [values[(*k, s)]["train_grad_norm"] for s in self.seeds] for k in self.runs
        }

    @classmethod
    def of(cls, rows: Sequence[SyntheticRow]) -> Grid:
        return cls(selected(rows), edges(rows))

    def dims_of(self, h: str) -> list[int]:
        """The dimensions at which every method ran with Hessian h."""
        dims = {k[1] for k in self.runs}
        return sorted(d for d in dims if all((h, d, m) in self.runs for m in self.methods))

    def slope(self, h: str, m: str, train: bool = False) -> stats.Interval:
        by = self.train if train else self.g
        dims = self.dims_of(h)
        return stats.slope_interval(dims, list(zip(*[by[(h, d, m)] for d in dims])))

    def log_ratio(self, top: list[float], bottom: list[float]) -> stats.Interval:
        return stats.paired_interval([_log(a) for a in top], [_log(b) for b in bottom])

    @cached_property
    def cells(self) -> list[tuple[str, int]]:
        return [(h, d) for h in self.hessians for d in self.dims_of(h)]

    def verdict(self, holds: bool | None, numbers: dict, words: dict) -> Verdict:
        """A paper claim's verdict, its evidence marked where one seed gives no interval."""
        return Verdict(
            holds, numbers, words | ({"one_seed": ONE_SEED} if len(self.seeds) < 2 else {})
        )


def cells_verdict(grid: Grid, intervals: dict[tuple[str, tuple], stats.Interval]) -> Verdict:
    """A claim over cells, each "log-ratio > 0" judged on its interval: the conjunction, with the
    counts and the cells that do not hold. A cell's key: its label in the evidence and the words of
    its facts' names."""
    verdicts = {cell: stats.exceeds(iv, 0.0) for cell, iv in intervals.items()}
    read = facts.parts({words: iv for (_, words), iv in intervals.items()}, 0.0, verdicts)
    holds = stats.all_hold(list(verdicts.values()))
    if not any(math.isfinite(iv.high - iv.low) for iv in intervals.values()):
        points = [iv.estimate for iv in intervals.values()]
        words = {"cells": len(points), "lowest": min(points), "highest": max(points)}
        return grid.verdict(holds, read, words | {"positive": sum(p > 0 for p in points)})
    shown = [f"{cell[0]}: {iv}" for cell, iv in intervals.items() if verdicts[cell] is not True]
    words = {"counts": render(COUNTS, read)}
    if shown:
        words["not_holding"] = "; ".join(shown[:6]) + ("; …" if len(shown) > 6 else "")
    return grid.verdict(holds, read, words)


def _cell_labels(grid: Grid) -> dict:
    return {(h, d): (f"{RANK_LABEL[h]}, d={d}", (h, f"d{d}")) for h, d in grid.cells}


def _cells_ratio(grid: Grid, top, bottom) -> list[Verdict]:
    """One verdict over every cell of log(top / bottom) > 0, ``top`` and ``bottom`` the per-seed
    values of a cell (g, h, d) → list; nothing to judge without the three methods."""
    if not {"DPZero", "DPGD-0th", "DP-GD"} <= set(grid.methods):
        return []
    g, cell = grid.g, _cell_labels(grid)
    ratios = {cell[h, d]: grid.log_ratio(top(g, h, d), bottom(g, h, d)) for h, d in grid.cells}
    return [cells_verdict(grid, ratios)]


def worst(grid: Grid) -> list[Verdict]:
    """DPGD-0th against the larger of DPZero and DP-GD, cell by cell."""
    return _cells_ratio(
        grid,
        lambda g, h, d: g[(h, d, "DPGD-0th")],
        lambda g, h, d: [max(a, b) for a, b in zip(g[(h, d, "DPZero")], g[(h, d, "DP-GD")])],
    )


def best(grid: Grid) -> list[Verdict]:
    """The smaller of DPZero and DPGD-0th against DP-GD, cell by cell."""
    return _cells_ratio(
        grid,
        lambda g, h, d: [min(a, b) for a, b in zip(g[(h, d, "DPZero")], g[(h, d, "DPGD-0th")])],
        lambda g, h, d: g[(h, d, "DP-GD")],
    )


def full_rank(grid: Grid) -> list[Verdict]:
    if "identity" not in grid.hessians or len(grid.dims_of("identity")) < 2:
        return []
    slopes = {m: grid.slope("identity", m) for m in grid.methods}
    verdicts = {m: stats.exceeds(iv, 0.0) for m, iv in slopes.items()}
    words = {
        "dims": grid.dims_of("identity"),
        "slopes": "; ".join(f"{m}: slope {slopes[m]}" for m in grid.methods),
    }
    holds = stats.all_hold(list(verdicts.values()))
    return [grid.verdict(holds, facts.parts(slopes, 0.0, verdicts), words)]


def _means(grid: Grid, by: dict, dims: Sequence[int]) -> str:
    return ", ".join(f"d={d}: {statistics.fmean(by[('inverse', d, 'DPZero')]):.3g}" for d in dims)


def flat(grid: Grid) -> list[Verdict]:
    dims = grid.dims_of("inverse") if "inverse" in grid.hessians else []
    if len(dims) < 2 or "DPZero" not in grid.methods:
        return []
    # Table 1 bounds E‖∇F‖² by O((log d)·√r) (times d-free factors); with r = Tr A = Σ 1/j that is
    # polylogarithmic and still rises over these d. The norm, not its square, is measured: it may
    # rise with half the bound's slope. "Nearly flat" = no faster than that.
    bound = loglog_slope(
        dims, [math.log(d) * math.sqrt(sum(1 / j for j in range(1, d + 1))) for d in dims]
    )
    z, train = grid.slope("inverse", "DPZero"), grid.slope("inverse", "DPZero", train=True)
    others = "; ".join(f"{m} {grid.slope('inverse', m)}" for m in grid.methods if m != "DPZero")
    words = {"dims": dims, "z": z, "train_iv": train, "test_means": _means(grid, grid.g, dims)}
    words |= {"train_means": _means(grid, grid.train, dims)} | (
        {"others": others} if others else {}
    )
    numbers = (
        facts.interval(z, bound / 2)
        | {"bound_slope": bound}
        | facts.interval(train, prefix="train")
    )
    return [grid.verdict(stats.below(z, bound / 2), numbers, words)]


def close(grid: Grid) -> list[Verdict]:
    dims = grid.dims_of("inverse") if "inverse" in grid.hessians else []
    if len(dims) < 2 or not {"DPZero", "DP-GD"} <= set(grid.methods):
        return []
    g = grid.g
    per_d = [
        [a / b for a, b in zip(g[("inverse", d, "DPZero")], g[("inverse", d, "DP-GD")])]
        for d in dims
    ]
    ratios = list(zip(*per_d))
    ratio = stats.slope_interval(dims, ratios)
    log_slope = loglog_slope(dims, [math.log(d) for d in dims])
    shown = ", ".join(f"d={d}: {statistics.fmean(r):.2f}" for d, r in zip(dims, zip(*ratios)))
    numbers = facts.interval(ratio, log_slope / 2) | {"log_slope": log_slope}
    return [
        grid.verdict(stats.below(ratio, log_slope / 2), numbers, {"ratio": ratio, "shown": shown})
    ]


def rates(grid: Grid) -> list[Verdict]:
    """Per Hessian, Table 1's exponents: its bounds are on the training objective's E‖∇F_S‖², so
    judged on the train norm (:func:`rate_verdict`)."""
    return [rate_verdict(grid, h) for h in grid.hessians if len(grid.dims_of(h)) >= 2]


def rate_verdict(grid: Grid, h: str) -> Verdict:
    """Every method's train-norm slope in d with Hessian ``h`` within half its Table 1 bound's; a
    method whose rate does not hold shows the bound with this instance's ℓΔ + L² (which Table 1
    takes as free of d) and, with ``chosen``, the measured reason."""
    dims, methods, tol = grid.dims_of(h), grid.methods, RATE_TOL.value

    def half_slope(m: str, factor=lambda d: 1.0) -> float:
        return loglog_slope(dims, [TABLE1[m](d, trace(h, d)) * factor(d) for d in dims]) / 2

    target = {m: half_slope(m) for m in methods}
    here = {m: half_slope(m, lambda d: instance_factor(h, d)) for m in methods}
    fitted = {m: grid.slope(h, m, train=True) for m in methods}
    verdicts, on_instance = (
        {m: stats.rate_within_bound(fitted[m], b[m], regime=RATE_REGIME, tol=tol) for m in methods}
        for b in (target, here)
    )
    parts = []
    for m in methods:
        text = f"{m}: slope {fitted[m]} vs {target[m]:.2f} + {tol:g} ({VERDICT[verdicts[m]]}"
        if not verdicts[m]:
            text += (
                "; with this instance's ℓΔ + L² (growing with d) the bound's exponent is "
                f"{here[m]:.2f}: {VERDICT[on_instance[m]]}"
            )
            if grid.chosen is not None:
                text += "; " + t_grid_note(grid.chosen, h, m, dims, fitted[m].estimate, here[m])
        parts.append(text + ")")
    numbers = (
        facts.parts(fitted, verdicts=verdicts)
        | {"tolerance": tol}
        | {facts.name(m, "limit"): target[m] + tol for m in methods}
        | {facts.name(m, "instance_limit"): here[m] + tol for m in methods}
    )
    if grid.chosen is not None:  # train-chosen points at the grid's largest T (the reason)
        numbers |= {
            facts.name(m, "largest_t_runs"): sum(
                "largest T" in at
                for (hh, _, mm, _), (_, at) in grid.chosen.items()
                if (hh, mm) == (h, m)
            )
            for m in methods
        }
    words = {"rank": RANK_LABEL[h], "dims": dims, "parts_text": "; ".join(parts)}
    return grid.verdict(stats.all_hold(list(verdicts.values())), numbers, words)


def better(grid: Grid) -> list[Verdict]:
    hs = grid.hessians
    if len(hs) < 2:
        return []
    intervals = {
        (
            f"d={d}, {m}, {RANK_LABEL[hs[i]]} → {RANK_LABEL[hs[i + 1]]}",
            (f"d{d}", m, hs[i]),
        ): grid.log_ratio(grid.g[(hs[i], d, m)], grid.g[(hs[i + 1], d, m)])
        for i in range(len(hs) - 1)
        for d in grid.dims_of(hs[i])
        if d in grid.dims_of(hs[i + 1])
        for m in grid.methods
    }
    return [cells_verdict(grid, intervals)]


PAPER = (
    ClaimSpec(
        "DPGD-0th is always worst (test gradient norm at the train-chosen point): "
        "log(DPGD-0th / the larger other) > 0 in every (Hessian, d) cell",
        CELLS,
        "above",
        "0 (log DPGD-0th / larger other)",
        RATIO + "; every cell",
        worst,
    ),
    ClaimSpec(
        "DP-GD is always best: log(the smaller other / DP-GD) > 0 in every cell",
        CELLS,
        "above",
        "0 (log smaller other / DP-GD)",
        RATIO + "; every cell",
        best,
    ),
    ClaimSpec(
        (
            "with r = d, every method gets worse as d grows: log-log slope against d > 0",
            " (d ∈ {dims})",
        ),
        ("{slopes}", "{one_seed}"),
        "above",
        "slope 0",
        SLOPE,
        full_rank,
    ),
    ClaimSpec(
        (
            "with r = log d, DPZero is nearly flat in d: the log-log slope of ‖∇F‖ is below",
            " {threshold:.2f},",
            " half the slope",
            " {bound_slope:.2f}",
            " of Table 1's bound (log d)·√r on ‖∇F‖²",
            " over d ∈ {dims}",
        ),
        (
            "DPZero: slope {z}; {test_means}; train ‖∇F‖ slope {train_iv}: {train_means}",
            "; test slopes of the others: {others}",
            "{one_seed}",
        ),
        "below",
        "half the slope of Table 1's (log d)·√r bound on ‖∇F‖²",
        SLOPE,
        flat,
    ),
    ClaimSpec(
        (
            "with r = log d, DPZero stays close to DP-GD: the slope of the ratio of their ‖∇F‖ is "
            "below",
            " {threshold:.2f},",
            " half the slope",
            " {log_slope:.2f}",
            " of the log d factor by which Table 1's bounds on ‖∇F‖² differ",
        ),
        ("ratio slope {ratio}; DPZero / DP-GD: {shown}", "{one_seed}"),
        "below",
        "half the slope of log d (the bounds' ratio)",
        SLOPE + " of the ratio",
        close,
    ),
    ClaimSpec(
        (
            "with {rank}, ",
            "the train ‖∇F_S‖ grows with d no faster than Table 1's bounds allow: slope ≤ half the "
            "slope of its bound on ‖∇F_S‖²",
            " over d ∈ {dims}",
            f" + {RATE_TOL.value:g} (upper bounds as d → ∞, one-sided; tolerance: "
            f"{RATE_TOL.formula})",
        ),
        ("{parts_text}", "{one_seed}"),
        "at most (one-sided: upper bounds)",
        f"half the bound's slope on ‖∇F_S‖² over the same d + {RATE_TOL.value:g} "
        f"({RATE_TOL.formula})",
        SLOPE,
        rates,
    ),
    ClaimSpec(
        "every method improves as r gets smaller (d, √d, log d): log(norm at the larger r / norm at "
        "the next smaller) > 0 for every (d, method)",
        CELLS,
        "above",
        "0 (log-ratio, larger r / smaller r)",
        RATIO + "; every (d, method)",
        better,
    ),
)


def paper_claims(values: dict, chosen: dict | None = None) -> list[Claim]:
    """The paper's qualitative claims judged on ``values`` (:func:`~.report.selected`); ``chosen``
    (:func:`~.report.edges`) adds to a rate that does not hold the measured reason."""
    grid = Grid(values, chosen)
    return [claim for spec in PAPER for claim in spec.claims(grid)]


def privacy(config: SyntheticConfig) -> ClaimSpec:
    """Every run is (ε, δ)-DP as the paper states: its σ certifies the target ε by advanced
    composition, and dpnc's accountant finds at most that on the run's own ledger (RDP, and the
    tight PLD below it)."""
    eps = config.epsilon

    def judge(rows: Sequence[SyntheticRow]) -> list[Verdict]:
        off = [
            r
            for r in rows
            if not (
                r.private
                and abs(r.epsilon_paper / eps - 1) <= 1e-6
                and r.epsilon_rdp <= eps * (1 + 1e-6)
                and r.epsilon_pld <= r.epsilon_rdp * (1 + 1e-6)
            )
        ]
        worst = {
            f"max_{k}": max(getattr(r, k) for r in rows)
            for k in ("epsilon_paper", "epsilon_rdp", "epsilon_pld")
        }
        numbers = {"epsilon": eps, "runs": len(rows), "runs_off": len(off)} | worst
        return [Verdict(not off, numbers)]

    return ClaimSpec(
        f"every run is (ε, δ) = ({eps:g}, {config.delta:g})-DP: the paper's σ certifies ε by "
        "advanced composition, and the accountant's ε of the run's releases (RDP, PLD ≤ RDP) is ≤ ε",
        "max ε: paper {max_epsilon_paper:.6g}, RDP {max_epsilon_rdp:.4g}, PLD "
        "{max_epsilon_pld:.4g}; {runs_off} run(s) off",
        "at most",
        "the target ε",
        "every run",
        judge,
    )


def specs(config: SyntheticConfig) -> list[ClaimSpec]:
    """Every claim of a run of ``config``, in the tables' order."""
    return [*on_view(PAPER, Grid.of), privacy(config)]
