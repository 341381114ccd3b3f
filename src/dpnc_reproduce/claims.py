"""The statistics behind every claims table: a claim holds only when beyond its 95 % interval.

Student's t intervals with Welch–Satterthwaite degrees of freedom where parts differ, Fieller's
interval for ratios, rate claims one-sided in the direction of the variable's regime, censored
values kept censored, one seed deciding nothing. See docs/reproducing.md ("How a claim is
judged")."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from dpnc_reproduce.loglog import GROWS, SHRINKS, _weights, loglog_fit
from dpnc_reproduce.variance import satterthwaite_df, two_way_mean_variance

# Re-exported, not only used here: docs/results/dpzero-headroom/mde.py (a committed result script,
# kept as it ran) imports t95 from this module.
from dpnc_reproduce.variance import t95 as t95

MAX_CENSORED = 0.2  # above this fraction of censored seeds an interval gives no verdict (declared)
NO_VERDICT_ONE_SEED = "1 seed: no verdict"


def mean_se(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and standard error (sample std / √k; None for one value)."""
    values = list(values)
    if not values:
        raise ValueError("mean_se needs at least one value")
    if len(values) == 1:
        return values[0], None
    return statistics.fmean(values), statistics.stdev(values) / math.sqrt(len(values))


def verdict(low: float, high: float, threshold: float) -> bool | None:
    """The claim "the quantity exceeds ``threshold``" for a 95 % interval [low, high]: True if all
    of the interval does, False if none of it does, None ("no signal") if the interval straddles the
    threshold."""
    if low > high:
        raise ValueError(f"the interval must have low <= high; got [{low}, {high}]")
    return True if low > threshold else False if high <= threshold else None


def all_hold(verdicts: Sequence[bool | None]) -> bool | None:
    """A conjunction of claims: False if any fails, else None if any has no signal, else True."""
    return False if False in verdicts else None if None in verdicts else True


def from_bits(text: str) -> list[int]:
    """Per-example correctness from its public string (one "1" or "0" per test example, in
    order)."""
    if set(text) - {"0", "1"}:
        raise ValueError("a correctness string holds only the characters 0 and 1")
    return [int(c) for c in text]


# --- t intervals ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    """An estimate and its 95 % interval [low, high] (infinite when it has no interval).

    ``seeds``: how many seeds it rests on; ``note``: why it has no interval, or what it counts;
    ``df``: the t degrees of freedom used (None: not a t interval); ``censored``: how many of the
    seeds are censored; ``se``: the standard error the interval was built from (None where it is not
    one: censored ends, none), for :func:`~dpnc_reproduce.variance.minimum_detectable_effect`."""

    estimate: float
    low: float
    high: float
    seeds: int
    note: str = ""
    df: float | None = None
    censored: int = 0
    se: float | None = None

    def __str__(self) -> str:
        if not math.isfinite(self.estimate):
            return f"— ({self.note})" if self.note else "—"
        if not (math.isfinite(self.low) or math.isfinite(self.high)):
            return f"{self.estimate:.2f} [no interval: {self.note or 'infinite'}]"
        text = f"{self.estimate:.2f} [{self.low:.2f}, {self.high:.2f}]"
        return f"{text} ({self.note})" if self.note else text

    def scaled(self, c: float) -> Interval:
        """c times the estimate (c > 0): e.g. half a squared norm's exponent for the norm."""
        if not c > 0:
            raise ValueError(f"c must be > 0; got {c!r}")
        return Interval(
            c * self.estimate,
            c * self.low,
            c * self.high,
            self.seeds,
            self.note,
            self.df,
            self.censored,
            None if self.se is None else c * self.se,
        )


def _no_interval(estimate: float, seeds: int, note: str, censored: int = 0) -> Interval:
    return Interval(estimate, -math.inf, math.inf, seeds, note, None, censored)


def from_parts(
    estimate: float, parts: Sequence[tuple[float, float]], seeds: int, note: str = ""
) -> Interval:
    """``estimate`` ± t95(Satterthwaite df of ``parts``)·√(Σ vᵢ): an interval whose variance is
    summed from parts (vᵢ, dfᵢ) (:func:`satterthwaite_df`)."""
    df = satterthwaite_df(parts)
    se = math.sqrt(sum(v for v, _ in parts))
    half = t95(df) * se
    return Interval(estimate, estimate - half, estimate + half, seeds, note, df, 0, se)


def mean_interval(values: Sequence[float]) -> Interval:
    """The mean of per-seed values and its t interval (k − 1 degrees of freedom; none for one seed,
    none with a value that is not finite)."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean_interval needs at least one value")
    if not all(math.isfinite(v) for v in values):
        return _no_interval(math.nan, len(values), "a value is not finite")
    mean, se = mean_se(values)
    if se is None:
        return _no_interval(mean, 1, NO_VERDICT_ONE_SEED)
    return from_parts(mean, [(se * se, len(values) - 1)], len(values))


def paired_interval(a: Sequence[float], b: Sequence[float]) -> Interval:
    """a − b over seeds paired by position (the same seed of two measurements):
    :func:`mean_interval` of the per-seed differences."""
    if len(a) != len(b) or not a:
        raise ValueError(
            f"a and b must hold the same positive number of seeds; got {len(a)} and {len(b)}"
        )
    return mean_interval([x - y for x, y in zip(a, b)])


def difference_interval(a: Sequence[float], b: Sequence[float]) -> Interval:
    """mean(a) − mean(b) of two independent sets of seeds and Welch's 95 % interval: variance
    s_a²/k_a + s_b²/k_b, Welch–Satterthwaite degrees of freedom. No interval when either side has
    one seed."""
    a, b = [float(v) for v in a], [float(v) for v in b]
    if not a or not b:
        raise ValueError(f"a and b must each hold at least one value; got {len(a)} and {len(b)}")
    k = min(len(a), len(b))
    if not all(math.isfinite(v) for v in (*a, *b)):
        return _no_interval(math.nan, k, "a value is not finite")
    diff = statistics.fmean(a) - statistics.fmean(b)
    if k < 2:
        return _no_interval(diff, k, NO_VERDICT_ONE_SEED)
    parts = [(statistics.variance(v) / len(v), len(v) - 1) for v in (a, b)]
    return from_parts(diff, parts, k)


# --- accuracy differences: a seed part and a test-set part ----------------------------------------


def accuracy_difference(a: Sequence[float], b: Sequence[float], test_examples: int) -> Interval:
    """mean(a) − mean(b) (percentage points) of two methods' per-seed test accuracies (%), and its
    95 % interval.

    Four variance parts, each with its degrees of freedom: per side the seed part s²/k (k − 1) and
    the binomial test-set part p(1 − p)/m (m − 1; as if the two were scored on independent test
    sets: conservative when they share one); Welch–Satterthwaite degrees of freedom of the sum. One
    seed on either side: no verdict."""
    if test_examples < 2:
        raise ValueError(f"test_examples must be >= 2; got {test_examples}")
    a, b = [float(v) for v in a], [float(v) for v in b]
    if not a or not b:
        raise ValueError(f"a and b must each hold at least one seed; got {len(a)} and {len(b)}")
    diff = statistics.fmean(a) - statistics.fmean(b)
    if min(len(a), len(b)) < 2:
        return _no_interval(diff, min(len(a), len(b)), NO_VERDICT_ONE_SEED)
    parts = []
    for v in (a, b):
        p = statistics.fmean(v) / 100
        parts += [
            (statistics.variance(v) / len(v), len(v) - 1),
            (1e4 * p * (1 - p) / test_examples, test_examples - 1),
        ]
    return from_parts(diff, parts, min(len(a), len(b)), "unpaired")


def paired_accuracy_difference(a: Sequence[Sequence[int]], b: Sequence[Sequence[int]]) -> Interval:
    """a − b (percentage points) of two methods scored on the same test examples, and its 95 %
    interval.

    Args:
        a, b: per seed (paired by position), the per-example correctness (0/1, in the same example
            order) of each method. Every vector has the same length m.

    With d_si = a_si − b_si: the difference is the grand mean of d over seeds and examples. Its
    variance is that of a two-way random-effects model d_si = μ + seed_s + example_i + e_si
    (:func:`two_way_mean_variance`): the seed part (k − 1 df), the test-example part (m − 1 df: the
    examples are a sample from the task's distribution, shared by every seed, so their part does not
    shrink with more seeds), the interaction counted once; the t quantile at the Welch–Satterthwaite
    degrees of freedom of that combination. (Until 27 Nov 2026 the seed part var(D_s)/k and the
    example part var_i(mean_s d_si)/m were summed, which counts the seed × example interaction
    twice: 10–60 % wider on the committed LM results, no verdict changed by it.) One seed: no
    verdict."""
    m = _paired_length(a, b, ("a", "b"), "correctness vector")
    per_seed = [[100.0 * (x - y) for x, y in zip(u, v)] for u, v in zip(a, b)]
    diff = statistics.fmean(statistics.fmean(d) for d in per_seed)
    if len(a) < 2:
        return _no_interval(diff, 1, NO_VERDICT_ONE_SEED)
    variance, df = two_way_mean_variance(per_seed)
    se = math.sqrt(variance)
    half = t95(df) * se
    return Interval(
        diff,
        diff - half,
        diff + half,
        len(a),
        f"paired by test example and seed, two-way ANOVA, m = {m}",
        df,
        0,
        se,
    )


def _paired_length(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], names: tuple[str, str], what: str
) -> int:
    """The common number m >= 2 of examples of two paired per-seed lists (ValueError naming the
    arguments)."""
    if len(a) != len(b) or not a:
        raise ValueError(
            f"{names[0]} and {names[1]} must hold the same positive number of seeds; got {len(a)} and "
            f"{len(b)}"
        )
    m = len(a[0])
    if m < 2 or any(len(v) != m for v in (*a, *b)):
        raise ValueError(
            f"every {what} must have the same length m >= 2; got lengths "
            f"{sorted({len(v) for v in (*a, *b)})}"
        )
    return m


def paired_ratio(x: Sequence[Sequence[float]], y: Sequence[Sequence[float]]) -> Interval:
    """mean(x) / mean(y) of two paired per-example quantities and Fieller's 95 % interval for it.

    Args:
        x, y: per seed (paired by position), per test example (the same examples in the same order,
            m >= 2 of them), the numerator's and denominator's values: e.g. x = DPZero's correctness
            − zero-shot's and y = MeZO's − zero-shot's (in points), whose ratio is the share of
            MeZO's gain over zero-shot that DPZero keeps.

    For a candidate ratio r the difference w = x − r·y is a paired quantity whose mean's variance
    has the two parts of :func:`paired_accuracy_difference`: the per-seed means' (k − 1 df) and the
    per-example means over seeds' (m − 1 df); both are quadratic in r, V(r) = a₀ − 2r·a₁ + r²·a₂.
    Fieller's interval is the set of r with (X̄ − r·Ȳ)² ≤ t²·V(r), t the 95 % t quantile at the
    Welch–Satterthwaite df of the two parts at r̂ = X̄/Ȳ. It is a bounded interval only when Ȳ² >
    t²·a₂, i.e. the denominator's own interval (same t) excludes 0; otherwise (the set is unbounded)
    there is no interval and no verdict. One seed: no verdict."""
    m = _paired_length(x, y, ("x", "y"), "per-example vector")
    k = len(x)
    xs, ys = [statistics.fmean(v) for v in x], [statistics.fmean(v) for v in y]
    xbar, ybar = statistics.fmean(xs), statistics.fmean(ys)
    estimate = xbar / ybar if ybar != 0 else math.nan
    if k < 2:
        return _no_interval(estimate, 1, NO_VERDICT_ONE_SEED)
    xe = [statistics.fmean(col) for col in zip(*x)]  # per example, the mean over seeds
    ye = [statistics.fmean(col) for col in zip(*y)]
    cov = statistics.covariance
    # seed part and test part of V(r): (s_xx − 2r s_xy + r² s_yy)/k and (t_xx − 2r t_xy + r² t_yy)/m
    seed = (cov(xs, xs) / k, cov(xs, ys) / k, cov(ys, ys) / k)
    test = (cov(xe, xe) / m, cov(xe, ye) / m, cov(ye, ye) / m)
    a0, a1, a2 = (s + t for s, t in zip(seed, test))
    if math.isfinite(estimate):
        at = [
            (max(p[0] - 2 * estimate * p[1] + estimate**2 * p[2], 0.0), df)
            for p, df in ((seed, k - 1), (test, m - 1))
        ]
        df = satterthwaite_df(at)
    else:
        df = float(k - 1)
    t2 = t95(df) ** 2
    qa, qb, qc = (
        ybar**2 - t2 * a2,
        xbar * ybar - t2 * a1,
        xbar**2 - t2 * a0,
    )  # qa r² − 2 qb r + qc <= 0
    note = f"Fieller, {k} seeds, paired by test example and seed"
    if not qa > 0:
        return Interval(
            estimate,
            -math.inf,
            math.inf,
            k,
            note + "; the denominator's interval includes 0: no interval, no verdict",
            df,
        )
    disc = qb * qb - qa * qc
    root = math.sqrt(max(disc, 0.0))
    se = math.sqrt(max(a0 - 2 * estimate * a1 + estimate**2 * a2, 0.0)) / abs(
        ybar
    )  # delta method, for the MDE
    return Interval(estimate, (qb - root) / qa, (qb + root) / qa, k, note, df, 0, se)


def paired_ratio_difference(
    x1: Sequence[Sequence[float]],
    y1: Sequence[Sequence[float]],
    x2: Sequence[Sequence[float]],
    y2: Sequence[Sequence[float]],
) -> Interval:
    """mean(x1)/mean(y1) − mean(x2)/mean(y2): two :func:`paired_ratio` shares on the same seeds and
    test examples (e.g. DPZero's share of MeZO's gain at T = 600 minus at T = 200), and its 95 %
    interval by the delta method.

    Each ratio r = X̄/Ȳ is linearised per seed and example as (x − r·y)/Ȳ; the difference's
    linearised values have the two parts of :func:`paired_ratio`'s V(r), the per-seed means' (k − 1
    df) and the per-example means over seeds' (m − 1 df), and the t quantile at their
    Welch–Satterthwaite df. No interval where either denominator's interval includes 0 (that ratio
    has none) or with one seed."""
    m = _paired_length(x1, x2, ("x1", "x2"), "per-example vector")
    ratios = (paired_ratio(x1, y1), paired_ratio(x2, y2))
    estimate = ratios[0].estimate - ratios[1].estimate
    if len(x1) < 2:
        return _no_interval(estimate, 1, NO_VERDICT_ONE_SEED)
    if not all(math.isfinite(r.low) for r in ratios):
        return _no_interval(estimate, len(x1), "a denominator's interval includes 0: no interval")
    linear = []
    for seed in range(len(x1)):
        row = [0.0] * m
        for (x, y), r, sign in zip(((x1, y1), (x2, y2)), ratios, (1.0, -1.0)):
            ybar = statistics.fmean(statistics.fmean(v) for v in y)
            for i, (a, b) in enumerate(zip(x[seed], y[seed])):
                row[i] += sign * (a - r.estimate * b) / ybar
        linear.append(row)
    k = len(linear)
    seed_part = statistics.variance([statistics.fmean(v) for v in linear]) / k
    test_part = statistics.variance([statistics.fmean(c) for c in zip(*linear)]) / m
    df = satterthwaite_df([(seed_part, k - 1), (test_part, m - 1)])
    se = math.sqrt(seed_part + test_part)
    note = f"delta method, {k} seeds, paired by test example and seed"
    return Interval(estimate, estimate - t95(df) * se, estimate + t95(df) * se, k, note, df, 0, se)


# --- censored values ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Censored:
    """A value known only to lie in [lower, upper] (one end may be infinite: a seed that never
    reached its target by n_max is ``Censored(n_max, math.inf)``). It is counted in an estimate at
    ``value`` if given, else at its finite end (:attr:`at`; nan if it has none)."""

    lower: float
    upper: float
    value: float | None = None

    def __post_init__(self) -> None:
        if not self.lower <= self.upper:
            raise ValueError(
                f"a censored value needs lower <= upper; got [{self.lower}, {self.upper}]"
            )

    @property
    def at(self) -> float:
        if self.value is not None:
            return self.value
        return (
            self.upper
            if math.isfinite(self.upper)
            else self.lower
            if math.isfinite(self.lower)
            else math.nan
        )


Value = float | Censored


def _range(v: Value) -> tuple[float, float]:
    return (v.lower, v.upper) if isinstance(v, Censored) else (v, v)


def _end(values: Sequence[float], side: int) -> float:
    """The low (side −1) or high (+1) end of the t interval of ``values`` (infinite values pass
    through)."""
    if any(math.isinf(v) and v * side > 0 for v in values):
        return side * math.inf
    if any(
        math.isinf(v) for v in values
    ):  # an infinite value on the other side leaves this end finite: bound it
        values = [v for v in values if math.isfinite(v)]
        if len(values) < 2:
            return side * math.inf
    iv = mean_interval(values)
    return iv.high if side > 0 else iv.low


def censored_mean_interval(
    values: Sequence[Value], *, max_censored: float = MAX_CENSORED, what: str = "censored"
) -> Interval:
    """The mean over seeds of values some of which are :class:`Censored`, and a conservative 95 %
    interval.

    The estimate counts each censored value at its finite end (:attr:`Censored.at`); the interval's
    low end is the t interval's (k − 1 df) over every value at its lower end, the high end over
    every value at its upper end (an infinite end stays infinite). The note counts the censored
    seeds; with more than ``max_censored`` of them (a fraction) or one seed, no verdict."""
    values = list(values)
    if not values:
        raise ValueError("censored_mean_interval needs at least one value")
    k, censored = len(values), sum(isinstance(v, Censored) for v in values)
    ats = [v.at if isinstance(v, Censored) else v for v in values]
    estimate = statistics.fmean(ats) if all(math.isfinite(a) for a in ats) else math.nan
    note = f"{censored} of {k} seeds {what}" if censored else ""
    if k == 1:
        return _no_interval(
            estimate, 1, "; ".join(n for n in (note, NO_VERDICT_ONE_SEED) if n), censored
        )
    if censored > max_censored * k:
        return _no_interval(estimate, k, f"{note}: over {max_censored:.0%}, no verdict", censored)
    if not censored:
        return mean_interval(values)
    lows, highs = zip(*(_range(v) for v in values))
    return Interval(estimate, _end(lows, -1), _end(highs, +1), k, note, k - 1, censored)


# --- rates: log-log slopes ------------------------------------------------------------------------


def _log(v: float) -> float:
    return math.log(v) if v > 0 else -math.inf


def slope_range(xs: Sequence[float], ys: Sequence[Value]) -> Value:
    """One seed's log-log slope; where some y is :class:`Censored` (or a plain y is not finite and >
    0: censored in (0, ∞)), the slope's range over the box of its values, as a :class:`Censored`
    slope counted at the slope with every censored y at its finite end. The least-squares slope is
    linear in log y, so its extremes lie at the box's corners."""
    ys = [
        y if isinstance(y, Censored) or (math.isfinite(y) and y > 0) else Censored(0.0, math.inf)
        for y in ys
    ]
    if not any(isinstance(y, Censored) for y in ys):
        return loglog_fit(xs, ys)
    terms = [
        (w, *_range(y), y.at if isinstance(y, Censored) else y)
        for w, y in zip(_weights(xs), ys)
        if w != 0
    ]
    low = sum(w * _log(lo if w > 0 else hi) for w, lo, hi, _ in terms)
    high = sum(w * _log(hi if w > 0 else lo) for w, lo, hi, _ in terms)
    at = sum(w * math.log(a) for w, _, _, a in terms) if all(a > 0 for *_, a in terms) else math.nan
    return Censored(low, high, at)


def slope_interval(
    xs: Sequence[float],
    ys_by_seed: Sequence[Sequence[Value]],
    *,
    max_censored: float = MAX_CENSORED,
) -> Interval:
    """The log-log slope of y against x: fitted per seed (least squares), their mean and its t
    interval.

    Args:
        xs: the points (finite, > 0, at least two distinct).
        ys_by_seed: per seed, the values at ``xs`` (in the same order): numbers, or
            :class:`Censored` values.
        max_censored: above this fraction of seeds with a censored value, no verdict.

    A seed with a censored value (or a value not finite and > 0) is kept: its slope ranges over its
    values' box (:func:`slope_range`) and enters :func:`censored_mean_interval`; one seed has no
    interval."""
    if not all(math.isfinite(x) and x > 0 for x in xs):
        raise ValueError(f"every x must be finite and > 0; got {list(xs)}")
    if not ys_by_seed:
        raise ValueError("slope_interval needs at least one seed")
    if any(len(ys) != len(xs) for ys in ys_by_seed):
        raise ValueError("every seed needs one value per x")
    return censored_mean_interval(
        [slope_range(xs, ys) for ys in ys_by_seed],
        max_censored=max_censored,
        what="with a censored value",
    )


# --- claims on an interval ------------------------------------------------------------------------


def exceeds(interval: Interval, threshold: float) -> bool | None:
    """The claim "the quantity is above ``threshold``", judged by :func:`verdict` on its
    interval."""
    return verdict(interval.low, interval.high, threshold)


def below(interval: Interval, threshold: float) -> bool | None:
    """The claim "the quantity is below ``threshold``": holds if all of the interval lies below it,
    fails if none of it does, no signal otherwise."""
    return verdict(-interval.high, -interval.low, -threshold)


def within(interval: Interval, target: float, tol: float) -> bool | None:
    """The claim "the quantity is within ±``tol`` of ``target``": holds if all of the interval lies
    strictly inside (target − tol, target + tol), fails if all of it lies beyond one end, no signal
    otherwise."""
    if not tol > 0:
        raise ValueError(f"tol must be > 0; got {tol!r}")
    return all_hold([exceeds(interval, target - tol), below(interval, target + tol)])


def rate_within_bound(
    slope: Interval, bound_slope: float, *, regime: str, tol: float
) -> bool | None:
    """The one-sided claim of an upper bound C·g(x) in the regime ``regime``, on the fitted log-log
    slope.

    :data:`GROWS` (x → ∞): holds when all of the interval lies below ``bound_slope + tol`` (the cost
    grows no faster, or falls no slower, than the bound), fails when all of it lies at or above.
    :data:`SHRINKS` (x → 0): holds when all of the interval lies above ``bound_slope − tol`` (as x
    shrinks the cost grows no faster than the bound), fails when all of it lies at or below: a
    steeper, more negative slope than the bound's is the violating direction. No signal otherwise.
    ``tol`` comes from :func:`~dpnc_reproduce.loglog.dropped_log_tolerance`."""
    if not tol >= 0:
        raise ValueError(f"tol must be >= 0; got {tol!r}")
    if regime == GROWS:
        return below(slope, bound_slope + tol)
    if regime == SHRINKS:
        return exceeds(slope, bound_slope - tol)
    raise ValueError(f"regime must be GROWS ({GROWS!r}) or SHRINKS ({SHRINKS!r}); got {regime!r}")


def rate_limit(bound_slope: float, *, regime: str, tol: float) -> float:
    """The slope at which :func:`rate_within_bound` changes verdict: bound + tol (x → ∞) or bound −
    tol (x → 0)."""
    return bound_slope + tol if regime == GROWS else bound_slope - tol


# a rate verdict that differs between the two ends of the bound's slope
DEPENDS = "depends on the constants"
WORDS = {True: "holds", False: "fails", None: "no signal"}


def rate_at_ends(
    slope: Interval, ends: tuple[float, float], *, regime: str, tol: float
) -> tuple[bool | None, str, tuple[bool | None, bool | None]]:
    """:func:`rate_within_bound` at both ends of the range the bound's slope can take over the grid
    when its terms' O-constants are unknown (``ends``: :func:`dpnc_reproduce.loglog.term_slopes`).
    Returns (verdict, status, (verdict at the low end, at the high end)): the common verdict where
    both ends agree, else None with the status :data:`DEPENDS` (neither end is the theorem's: it
    fixes no ratio of its constants)."""
    at = tuple(rate_within_bound(slope, e, regime=regime, tol=tol) for e in ends)
    return (at[0], "", at) if at[0] == at[1] else (None, DEPENDS, at)


def ends_text(
    ends: tuple[float, float], at: tuple[bool | None, bool | None], *, regime: str, tol: float
) -> str:
    """Both ends of :func:`rate_at_ends` in words: each end's bound slope, its limit and its
    verdict."""
    return (
        "the bound's slope over this grid lies in [{:+.2f}, {:+.2f}] by its terms' unknown constants: ".format(
            *ends
        )
        + ", ".join(
            f"at {e:+.2f} (limit {rate_limit(e, regime=regime, tol=tol):+.2f}) {WORDS[v]}"
            for e, v in zip(ends, at)
        )
    )


def tight(slope: Interval, bound_slope: float, tol: float) -> bool | None:
    """The separate claim that a bound is tight: the slope equals the bound's own within ±``tol``
    (:func:`within`). Judged only where a paper claims tightness."""
    return within(slope, bound_slope, tol)


def judged(verdicts: dict[str, bool | None]) -> str:
    """Counts of a conjunction's parts: "k hold, j fail, i no signal (of n)"."""
    values = list(verdicts.values())
    return (
        f"{values.count(True)} hold, {values.count(False)} fail, {values.count(None)} no signal "
        f"(of {len(values)})"
    )


# --- ratios of heavy-tailed outcomes: geometric means, paired by seed -----------------------------


def geometric_ratio_interval(
    a: Sequence[float], b: Sequence[float], *, max_censored: float = MAX_CENSORED
) -> Interval:
    """The geometric mean over seeds of the paired ratio a_s / b_s, and its 95 % interval, on the
    ratio scale.

    For outcomes that spread over orders of magnitude (an excess risk, a stationarity certificate) a
    ratio of means is ruled by one seed; the mean of log(a_s / b_s) is not. The interval is
    :func:`mean_interval` of the per-seed log ratios (Student's t, k − 1 df: both values of a seed
    come from the same data and seed) mapped back with exp; the estimate is exp(mean log ratio). A
    pair whose ratio has no finite logarithm (a value ≤ 0 or not finite) is kept as censored in (0,
    ∞) (:func:`censored_mean_interval`: counted in the note; above ``max_censored`` of the seeds, or
    with one seed, no verdict)."""
    if len(a) != len(b) or not a:
        raise ValueError(
            f"a and b must hold the same positive number of seeds; got {len(a)} and {len(b)}"
        )
    logs: list[Value] = []
    for x, y in zip(a, b):
        x, y = float(x), float(y)
        ok = math.isfinite(x) and math.isfinite(y) and x > 0 and y > 0
        logs.append(math.log(x / y) if ok else Censored(-math.inf, math.inf))
    iv = censored_mean_interval(
        logs, max_censored=max_censored, what="with a ratio ≤ 0 or not finite"
    )

    def exp(v: float) -> float:
        return math.exp(v) if v < 700 else math.inf

    return Interval(
        exp(iv.estimate) if math.isfinite(iv.estimate) else math.nan,
        exp(iv.low),
        exp(iv.high),
        iv.seeds,
        iv.note,
        iv.df,
        iv.censored,
    )
