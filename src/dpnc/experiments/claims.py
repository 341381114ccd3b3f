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
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

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
