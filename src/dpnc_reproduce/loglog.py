"""Log-log slopes and the tolerance of a rate claim, under the claims engine
(:mod:`dpnc_reproduce.claims`): the least-squares slope, a claim's regime (x → ∞ or x → 0), and the
tolerance derived from the log factors a bound drops over the claim's own grid. Import these names
from here."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

GROWS = "x → ∞"  # a rate claim's regime: the bound is about large x (d, n, n√ρ/√d)
SHRINKS = "x → 0"  # ... about small x (ε, α, β, ρ in a sample complexity)


def loglog_fit(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log y against log x; every x and y must be finite and > 0, and the x
    not all equal."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(
            f"a slope needs at least 2 points of equal count; got {len(xs)} x and {len(ys)} y"
        )
    return sum(w * math.log(y) for w, y in zip(_weights(xs), ys))


def _weights(xs: Sequence[float]) -> list[float]:
    """The least-squares slope's weights on log y: (log x − mean) / Sxx."""
    lx = [math.log(v) for v in xs]
    mx = statistics.fmean(lx)
    sxx = sum((u - mx) ** 2 for u in lx)
    if sxx == 0:
        raise ValueError("a slope needs at least two distinct x")
    return [(u - mx) / sxx for u in lx]


@dataclass(frozen=True)
class Tolerance:
    """A rate claim's tolerance: ``value`` and the ``formula`` it was computed with (declared before
    the data)."""

    value: float
    formula: str

    def __str__(self) -> str:
        return f"{self.value:.3f} ({self.formula})"


def dropped_log_tolerance(
    xs: Sequence[float],
    factors: Sequence[tuple[Sequence[float], float]],
    *,
    regime: str,
    formula: str,
) -> Tolerance:
    """What the polylog factors a bound drops add to its least-squares log-log slope over the grid
    ``xs``, in the violating direction of ``regime``.

    Args:
        xs: the claim's grid (the points its slope is fitted over).
        factors: the dropped factors (ln a(x))^p, each as (a at every point of ``xs``, p); every a >
            1.
        regime: :data:`GROWS` or :data:`SHRINKS`.
        formula: the dropped factor in words, recorded beside the value.

    The least-squares slope is linear in log y, so multiplying the bound by Π (ln a_k)^{p_k} adds
    exactly s = Σ p_k·slope(ln ln a_k against ln x) to it. That shift is the tolerance when it
    points the violating way (s > 0 for x → ∞, s < 0 for x → 0), and 0 when it points the other way
    (then the dropped factor only makes the bound easier to meet). E.g. ln n over n ∈ {10³, …, 10⁹}
    adds 0.078; ln d over d ∈ {20, 200, 2000}, 0.20; over d ∈ {4, …, 64}, 0.39."""
    if regime not in (GROWS, SHRINKS):
        raise ValueError(
            f"regime must be GROWS ({GROWS!r}) or SHRINKS ({SHRINKS!r}); got {regime!r}"
        )
    shift = 0.0
    for args, power in factors:
        if len(args) != len(xs) or not all(a > 1 for a in args):
            raise ValueError(
                f"each dropped log needs an argument > 1 at every point of the grid; got {list(args)}"
            )
        shift += power * loglog_fit(xs, [math.log(a) for a in args])
    return Tolerance(
        max(0.0, shift if regime == GROWS else -shift),
        f"{formula} over {min(xs):.3g}…{max(xs):.3g}: slope shift {shift:+.3f}",
    )


def term_slopes(xs: Sequence[float], terms: Sequence[Sequence[float]]) -> tuple[float, float]:
    """The range of a sum-of-terms bound's least-squares log-log slope over the grid ``xs`` when the
    terms' O-constants are unknown: (the smallest, the largest) of the terms' own slopes.

    A bound Σ c_k·t_k(x) with unknown c_k > 0 has, at every point, a local log-log slope that is a
    weighted mean of the terms' local slopes (weights their shares c_k·t_k / Σ); the least-squares
    slope of such a curve lies in the range of the terms' own least-squares slopes for power-law
    terms, and reaches either end as one term's constant dominates (c_j/c_k → ∞). Setting every
    constant to 1 picks one point inside that range, which the theorem does not fix. ``terms``: each
    term's value at every point of ``xs`` (every value > 0)."""
    slopes = [loglog_fit(xs, t) for t in terms if all(v > 0 for v in t)]
    if not slopes:
        raise ValueError("term_slopes needs at least one term positive at every point of the grid")
    return min(slopes), max(slopes)
