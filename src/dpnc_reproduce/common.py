"""What experiments check and compute the same way: value rules for configs (:mod:`dpnc.checks`,
re-exported), medians over seeds, log-log slopes, the privacy claim. (The runner and the writer are
in :mod:`dpnc_reproduce.protocol`.)"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from dpnc.checks import (
    INTEGER,
    NATURAL,
    NONNEGATIVE,
    POSITIVE,
    Rule,
    check_axis,
    check_value,
    one_of,
)
from dpnc.privacy import check_delta
from dpnc_reproduce.judging import ClaimSpec, Verdict
from dpnc_reproduce.protocol import Claim

__all__ = [
    "ACCOUNTED",
    "INTEGER",
    "NATURAL",
    "NONNEGATIVE",
    "POSITIVE",
    "Rule",
    "check_axis",
    "check_grid",
    "check_value",
    "by_seed",
    "fmt_slope",
    "group_medians",
    "loglog_slope",
    "one_of",
    "privacy_claim",
]


def check_grid(config, methods: Sequence[str]) -> None:
    """Validate a nonsmooth experiment's grid: known methods, dims >= 1, sample sizes >= 4, finite ε
    > 0, seeds >= 1, δ in (0, 1)."""
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


def group_medians(
    rows: Sequence[dict], metric: str, keys: Sequence[str], x: str
) -> dict[tuple, list[tuple[float, float]]]:
    """(row[k] for k in ``keys``) → [(row[x], median over the group's rows of ``metric``)] sorted by
    x."""
    groups: dict[tuple, dict[float, list[float]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), {}).setdefault(r[x], []).append(r[metric])
    return {
        key: sorted((v, statistics.median(ys)) for v, ys in by_x.items())
        for key, by_x in groups.items()
    }


def by_seed(
    rows: Sequence, metric: str, keys: Sequence[str], x: str
) -> dict[tuple, tuple[list[float], list[list[float]]]]:
    """(row.k for k in ``keys``) → (the x values sorted, per seed the values of ``metric`` at them):
    the series of each seed, for slopes fitted per seed
    (:func:`dpnc_reproduce.claims.slope_interval`). A seed missing some x is left out."""
    groups: dict[tuple, dict[int, dict[float, float]]] = {}
    for r in rows:
        groups.setdefault(tuple(getattr(r, k) for k in keys), {}).setdefault(r.seed, {})[
            getattr(r, x)
        ] = getattr(r, metric)
    out = {}
    for key, seeds in groups.items():
        xs = sorted({v for series in seeds.values() for v in series})
        out[key] = (
            xs,
            [
                [series[v] for v in xs]
                for _, series in sorted(seeds.items())
                if len(series) == len(xs)
            ],
        )
    return out


def fmt_slope(slope: float, values: Sequence[float]) -> str:
    """A fitted slope, or why there is none (a certificate of ~0: a stationary point within the
    radius, whose rounding-level value would make the log-log fit meaningless)."""
    if min(values) < 1e-9:
        return f"reaches ~0 ({min(values):.1e})"
    return f"{slope:.2f}"


def _accounted(rows: Sequence) -> list[Verdict]:
    """Each run spends exactly its ε by zCDP and at most its ε by the tight PLD (:data:`ACCOUNTED`);
    a run without every accountant's answer can only leave the claim without a signal, never make
    it hold."""
    rows = [r if isinstance(r, dict) else vars(r) for r in rows]
    keys = ("epsilon_zcdp", "epsilon_pld", "epsilon_rdp")
    answered = [
        r for r in rows if all(r[k] is not None for k in keys)
    ]  # PLD gives no ε at a huge ε (1e9)
    missing = len(rows) - len(answered)
    numbers = {"runs": len(rows), "runs_unanswered": missing}
    if not answered:
        return [Verdict(None, numbers, {"none_answered": len(rows)})]
    over = [
        r
        for r in answered
        if abs(r["epsilon_zcdp"] / r["epsilon"] - 1) > 1e-6
        or r["epsilon_pld"] > r["epsilon"] * (1 + 1e-6)
    ]
    ratio = {k: max(r[k] / r["epsilon"] for r in answered) for k in keys}
    numbers |= {
        "max_zcdp_ratio": ratio["epsilon_zcdp"],
        "max_pld_ratio": ratio["epsilon_pld"],
        "max_rdp_ratio": ratio["epsilon_rdp"],
        "runs_off": len(over),
    }
    if missing:
        return [Verdict(False if over else None, numbers, {"missing": missing})]
    return [Verdict(not over, numbers)]


# The claim every private experiment checks on its rows (dicts or typed rows; ``epsilon`` the target;
# ``epsilon_zcdp``, ``epsilon_pld``, ``epsilon_rdp`` the accountant's answers): each run spends
# exactly its ε by zCDP and at most its ε by the tight PLD; dp-accounting's RDP (discrete orders,
# looser) is shown, not judged.
ACCOUNTED = ClaimSpec(
    "every run is (ε, δ_DP)-DP by the accountant: the zCDP ρ it spends converts back to the target "
    "ε and the tight PLD ε is ≤ the target",
    (
        "none of the {none_answered} run(s) has an ε from every accountant",
        "max zCDP ε / target {max_zcdp_ratio:.6f}; max PLD ε / target {max_pld_ratio:.4f}; "
        "dp-accounting's RDP (discrete orders, looser): max {max_rdp_ratio:.5f}; {runs_off} run(s) "
        "off",
        "; {missing} run(s) without an ε from every accountant",
    ),
    "at most",
    "the target ε",
    "every run",
    _accounted,
)


def privacy_claim(rows: Sequence) -> Claim:
    """:data:`ACCOUNTED` judged on ``rows``."""
    return ACCOUNTED.claims(rows)[0]
