"""The statistics behind every claims table: a claim holds only when its effect is beyond its 95 % interval.

A claim "the quantity exceeds θ" is judged on an interval [low, high] (:func:`verdict`): it holds when all of the
interval lies above θ, fails when all of it lies at or below θ, and has **no signal** (None) otherwise.

Accuracy differences get their interval from two sources of chance, the seeds (k-shot splits, noise, batches)
and the test examples:

* :func:`accuracy_difference`: two accuracies known only as (mean, s.e. over seeds); each side's binomial
  variance p(1 − p)/m is added as if the two were scored on independent test sets. Conservative when they share
  one.
* :func:`paired_accuracy_difference`: both methods scored on the *same* test examples, with per-example
  correctness kept for each seed. The test-set term is then the variance of the per-example differences (as in
  McNemar's test): two models that agree on most examples differ by far less chance than two independent
  binomials would. The seed term is the s.e. of the per-seed differences.

Both add the two variances and use the normal 95 % quantile (1.96), the convention of every claims table here.

Quantities estimated from a few seeds only (rates, comparisons of noisy medians) get a Student-t interval over the
seeds (:class:`Interval`): with k seeds the 95 % quantile of t with k − 1 degrees of freedom (12.7 for 2 seeds,
2.78 for 5), infinite for one seed, so that one seed never makes a claim hold or fail.

* :func:`mean_interval`, :func:`difference_interval` (two independent sets of seeds), :func:`paired_interval`;
* :func:`slope_interval`: a least-squares log-log slope fitted per seed, their mean and its interval;
* :func:`exceeds`, :func:`below`, :func:`within`: the claims "above θ", "below θ", "within ±tol of θ" judged by
  :func:`verdict` on an interval;
* :func:`consistent`: "equals θ" (a theorem's exponent): the interval contains θ and is informative, or lies within
  ±tol of it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

Z95 = 1.96   # two-sided 95 % normal quantile


def mean_se(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and standard error (sample std / √k; None for one value)."""
    values = list(values)
    if not values:
        raise ValueError("mean_se needs at least one value")
    if len(values) == 1:
        return values[0], None
    return statistics.fmean(values), statistics.stdev(values) / math.sqrt(len(values))


def verdict(low: float, high: float, threshold: float) -> bool | None:
    """The claim "the quantity exceeds ``threshold``" for a 95 % interval [low, high]: True if all of the
    interval does, False if none of it does, None ("no signal") if the interval straddles the threshold."""
    if low > high:
        raise ValueError(f"the interval must have low <= high; got [{low}, {high}]")
    return True if low > threshold else False if high <= threshold else None


def all_hold(verdicts: Sequence[bool | None]) -> bool | None:
    """A conjunction of claims: False if any fails, else None if any has no signal, else True."""
    return False if False in verdicts else None if None in verdicts else True


def accuracy_difference(a: tuple[float, float | None], b: tuple[float, float | None],
                        test_examples: int) -> tuple[float, float]:
    """a − b (percentage points) of two (mean %, s.e. over seeds) accuracies, and its 95 % half-width.

    The variance adds each mean's seed variance (s.e.², 0 for one seed) and the binomial variance of an
    accuracy on ``test_examples`` examples, p(1 − p)/m, for each side, as if the test sets were independent.
    """
    if test_examples < 1:
        raise ValueError(f"test_examples must be >= 1; got {test_examples}")
    var = sum((se or 0.0) ** 2 + 1e4 * (m / 100) * (1 - m / 100) / test_examples for m, se in (a, b))
    return a[0] - b[0], Z95 * math.sqrt(var)


def paired_accuracy_difference(a: Sequence[Sequence[int]], b: Sequence[Sequence[int]]) -> tuple[float, float]:
    """a − b (percentage points) of two methods scored on the same test examples, and its 95 % half-width.

    Args:
        a, b: per seed (paired by position), the per-example correctness (0/1, in the same example order) of
            each method. Every vector has the same length m.

    With d_si = a_si − b_si: the difference is the mean of the per-seed means D_s = mean_i d_si; its variance is
    the seed part s.e.(D_s)² (0 for one seed) plus the test part var_i(mean_s d_si)/m (the examples are a sample
    from the task's distribution, shared by every seed, so their part does not shrink with more seeds).
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"a and b must hold the same positive number of seeds; got {len(a)} and {len(b)}")
    m = len(a[0])
    if m < 2 or any(len(v) != m for v in (*a, *b)):
        raise ValueError("every correctness vector must have the same length m >= 2; got lengths "
                         f"{sorted({len(v) for v in (*a, *b)})}")
    per_seed = [[x - y for x, y in zip(u, v)] for u, v in zip(a, b)]
    means = [statistics.fmean(d) for d in per_seed]
    diff, seed_se = mean_se(means)
    per_example = [statistics.fmean(col) for col in zip(*per_seed)]
    var = (seed_se or 0.0) ** 2 + statistics.variance(per_example) / m
    return 100 * diff, 100 * Z95 * math.sqrt(var)


def from_bits(text: str) -> list[int]:
    """Per-example correctness from its public string (one "1" or "0" per test example, in order)."""
    if set(text) - {"0", "1"}:
        raise ValueError("a correctness string holds only the characters 0 and 1")
    return [int(c) for c in text]


# --- intervals over seeds -------------------------------------------------------------------------------------


def t95(df: int) -> float:
    """The two-sided 95 % quantile of Student's t with ``df`` degrees of freedom (inf for df < 1)."""
    return float(stats.t.ppf(0.975, df)) if df >= 1 else math.inf


@dataclass(frozen=True)
class Interval:
    """An estimate over seeds and its 95 % interval [low, high] (infinite when it has no interval).

    ``seeds``: how many seeds it rests on; ``note``: why it has no interval, or what was left out.
    """

    estimate: float
    low: float
    high: float
    seeds: int
    note: str = ""

    def __str__(self) -> str:
        if not math.isfinite(self.estimate):
            return f"— ({self.note})" if self.note else "—"
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return f"{self.estimate:.2f} [no interval: {self.note or 'infinite'}]"
        text = f"{self.estimate:.2f} [{self.low:.2f}, {self.high:.2f}]"
        return f"{text} ({self.note})" if self.note else text

    def scaled(self, c: float) -> Interval:
        """c times the estimate (c > 0): e.g. half a squared norm's exponent for the norm."""
        if not c > 0:
            raise ValueError(f"c must be > 0; got {c!r}")
        return Interval(c * self.estimate, c * self.low, c * self.high, self.seeds, self.note)


def _no_interval(estimate: float, seeds: int, note: str) -> Interval:
    return Interval(estimate, -math.inf, math.inf, seeds, note)


def mean_interval(values: Sequence[float]) -> Interval:
    """The mean of per-seed values and its t interval (k − 1 degrees of freedom; none for one seed)."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean_interval needs at least one value")
    if not all(math.isfinite(v) for v in values):
        return _no_interval(math.nan, len(values), "a value is not finite")
    mean, se = mean_se(values)
    if se is None:
        return _no_interval(mean, 1, "1 seed")
    half = t95(len(values) - 1) * se
    return Interval(mean, mean - half, mean + half, len(values))


def paired_interval(a: Sequence[float], b: Sequence[float]) -> Interval:
    """a − b over seeds paired by position (the same seed of two measurements): :func:`mean_interval` of the
    per-seed differences."""
    if len(a) != len(b) or not a:
        raise ValueError(f"a and b must hold the same positive number of seeds; got {len(a)} and {len(b)}")
    return mean_interval([x - y for x, y in zip(a, b)])


def difference_interval(a: Sequence[float], b: Sequence[float]) -> Interval:
    """mean(a) − mean(b) of two independent sets of seeds and its 95 % interval.

    The variance is s_a²/k_a + s_b²/k_b; the quantile is t's with min(k_a, k_b) − 1 degrees of freedom (the lower
    bound of Welch's, so never narrower than Welch's interval). No interval when either side has one seed.
    """
    a, b = [float(v) for v in a], [float(v) for v in b]
    if not a or not b:
        raise ValueError(f"a and b must each hold at least one value; got {len(a)} and {len(b)}")
    k = min(len(a), len(b))
    if not all(math.isfinite(v) for v in (*a, *b)):
        return _no_interval(math.nan, k, "a value is not finite")
    diff = statistics.fmean(a) - statistics.fmean(b)
    if k < 2:
        return _no_interval(diff, k, "1 seed")
    half = t95(k - 1) * math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
    return Interval(diff, diff - half, diff + half, k)


def loglog_fit(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log y against log x; every x and y must be finite and > 0, and the x not all
    equal."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(f"a slope needs at least 2 points of equal count; got {len(xs)} x and {len(ys)} y")
    lx, ly = [math.log(v) for v in xs], [math.log(v) for v in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    sxx = sum((u - mx) ** 2 for u in lx)
    if sxx == 0:
        raise ValueError("a slope needs at least two distinct x")
    return sum((u - mx) * (v - my) for u, v in zip(lx, ly)) / sxx


def slope_interval(xs: Sequence[float], ys_by_seed: Sequence[Sequence[float]]) -> Interval:
    """The log-log slope of y against x: fitted per seed (least squares), their mean and its t interval.

    Args:
        xs: the points (finite, > 0, at least two distinct).
        ys_by_seed: per seed, the values at ``xs`` (in the same order).

    A seed with a value that is not finite and > 0 has no slope and is left out (the note says so); with one
    fitted seed the slope has no interval.
    """
    if not all(math.isfinite(x) and x > 0 for x in xs):
        raise ValueError(f"every x must be finite and > 0; got {list(xs)}")
    if any(len(ys) != len(xs) for ys in ys_by_seed):
        raise ValueError("every seed needs one value per x")
    fitted = [loglog_fit(xs, ys) for ys in ys_by_seed if all(math.isfinite(y) and y > 0 for y in ys)]
    left_out = len(ys_by_seed) - len(fitted)
    if not fitted:
        return _no_interval(math.nan, 0, f"no seed with every value > 0 of {len(ys_by_seed)}")
    interval = mean_interval(fitted)
    notes = [n for n in (interval.note, f"{left_out} of {len(ys_by_seed)} seeds without a slope" if left_out else "")
             if n]
    return Interval(interval.estimate, interval.low, interval.high, len(fitted), "; ".join(notes))


def exceeds(interval: Interval, threshold: float) -> bool | None:
    """The claim "the quantity is above ``threshold``", judged by :func:`verdict` on its interval."""
    return verdict(interval.low, interval.high, threshold)


def below(interval: Interval, threshold: float) -> bool | None:
    """The claim "the quantity is below ``threshold``": holds if all of the interval lies below it, fails if none
    of it does, no signal otherwise."""
    return verdict(-interval.high, -interval.low, -threshold)


def within(interval: Interval, target: float, tol: float) -> bool | None:
    """The claim "the quantity is within ±``tol`` of ``target``": holds if all of the interval lies strictly
    inside (target − tol, target + tol), fails if all of it lies beyond one end, no signal otherwise."""
    if not tol > 0:
        raise ValueError(f"tol must be > 0; got {tol!r}")
    return all_hold([exceeds(interval, target - tol), below(interval, target + tol)])


def consistent(interval: Interval, target: float, tol: float, informative: float) -> bool | None:
    """The claim "the quantity is ``target``" (e.g. a theorem's exponent), judged on its interval: holds if the
    interval contains ``target`` and its half-width is at most ``informative``, or if it lies within ±``tol`` of
    ``target`` (:func:`within`); fails if it excludes ``target`` and does not lie within ±``tol``; no signal otherwise
    (an interval too wide to say anything, or one seed)."""
    if not (tol > 0 and informative > 0):
        raise ValueError(f"tol and informative must be > 0; got {tol!r}, {informative!r}")
    if not (math.isfinite(interval.low) and math.isfinite(interval.high)):
        return None
    if within(interval, target, tol):
        return True
    contains = interval.low <= target <= interval.high
    if contains:
        return True if (interval.high - interval.low) / 2 <= informative else None
    return False


def judged(verdicts: dict[str, bool | None]) -> str:
    """Counts of a conjunction's parts: "k hold, j fail, i no signal (of n)"."""
    values = list(verdicts.values())
    return (f"{values.count(True)} hold, {values.count(False)} fail, {values.count(None)} no signal "
            f"(of {len(values)})")
