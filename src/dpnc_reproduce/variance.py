"""The variance arithmetic under the claims engine (:mod:`dpnc_reproduce.claims`): t quantiles,
Welch–Satterthwaite degrees of freedom, the two-way random-effects variance of a seeds × examples
mean, and the minimum detectable effect of a design (its power, computed before a claim is
declared). Import these names from here."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from scipy import stats


def t95(df: float) -> float:
    """The two-sided 95 % quantile of Student's t with ``df`` degrees of freedom (a real number; inf
    for df <= 0, the normal 1.96 for df = inf)."""
    if not df > 0:
        return math.inf
    return float(stats.norm.ppf(0.975)) if math.isinf(df) else float(stats.t.ppf(0.975, df))


def satterthwaite_df(parts: Sequence[tuple[float, float]]) -> float:
    """The Welch–Satterthwaite degrees of freedom of a sum of variance estimates: ``parts`` are (vᵢ,
    dfᵢ), the result (Σ vᵢ)² / Σ (vᵢ² / dfᵢ). A part with vᵢ = 0 or dfᵢ = inf adds nothing to the
    denominator; inf when the denominator is 0 (every part known exactly, or the sum is 0)."""
    for v, df in parts:
        if v < 0 or not df > 0:
            raise ValueError(f"each part needs a variance >= 0 and df > 0; got ({v!r}, {df!r})")
    total = sum(v for v, _ in parts)
    denominator = sum(v * v / df for v, df in parts if v > 0 and math.isfinite(df))
    return math.inf if denominator == 0 or total == 0 else total * total / denominator


def two_way_mean_squares(d: Sequence[Sequence[float]]) -> tuple[float, float, float]:
    """(MS_S, MS_E, MS_R) of a k × m table d (seeds × test examples, k, m ≥ 2): the seeds', the
    examples' and the residual mean squares of the two-way model (:func:`two_way_mean_variance` says
    what they estimate)."""
    k, m = len(d), len(d[0])
    if k < 2 or m < 2 or any(len(row) != m for row in d):
        raise ValueError(f"a two-way table needs k >= 2 rows of one length m >= 2; got {k} rows")
    seed_means = [statistics.fmean(row) for row in d]
    example_means = [statistics.fmean(col) for col in zip(*d)]
    grand = statistics.fmean(seed_means)
    ms_s = m * sum((x - grand) ** 2 for x in seed_means) / (k - 1)
    ms_e = k * sum((x - grand) ** 2 for x in example_means) / (m - 1)
    ms_r = sum(
        (v - sm - em + grand) ** 2
        for row, sm in zip(d, seed_means)
        for v, em in zip(row, example_means)
    ) / ((k - 1) * (m - 1))
    return ms_s, ms_e, ms_r


def two_way_components(d: Sequence[Sequence[float]]) -> tuple[float, float, float]:
    """(σ²_S, σ²_E, σ²_e) of a k × m table by its mean squares, a negative component taken as 0."""
    k, m = len(d), len(d[0])
    ms_s, ms_e, ms_r = two_way_mean_squares(d)
    return max((ms_s - ms_r) / m, 0.0), max((ms_e - ms_r) / k, 0.0), ms_r


def two_way_mean_variance(d: Sequence[Sequence[float]]) -> tuple[float, float]:
    """The variance of the grand mean of a k × m table d (seeds × test examples, k, m ≥ 2) under the
    two-way random-effects model d_si = μ + seed_s + example_i + e_si, and its Welch–Satterthwaite
    degrees of freedom.

    With the mean squares MS_S = m·Σ_s(d̄_s − d̄)²/(k − 1), MS_E = k·Σ_i(d̄_i − d̄)²/(m − 1) and the
    residual MS_R = Σ(d_si − d̄_s − d̄_i + d̄)²/((k − 1)(m − 1)), whose expectations are σ²_e +
    mσ²_S, σ²_e + kσ²_E and σ²_e, Var(d̄) = σ²_S/k + σ²_E/m + σ²_e/(km) is estimated without bias by
    (MS_S + MS_E − MS_R)/(km). A component whose estimate is negative (MS_S or MS_E below MS_R) is
    taken as 0 and its mean square dropped from the sum (then MS_R stands for it). The df: (Σ c_j
    MS_j)² / Σ (c_j MS_j)²/df_j over the mean squares used (c_j = ±1/(km))."""
    k, m = len(d), len(d[0])
    ms_s, ms_e, ms_r = two_way_mean_squares(d)
    terms = [(ms_r, (k - 1) * (m - 1), -1.0)]  # (mean square, df, sign)
    seed_kept, example_kept = ms_s >= ms_r, ms_e >= ms_r
    if seed_kept:
        terms.append((ms_s, k - 1, 1.0))
    if example_kept:
        terms.append((ms_e, m - 1, 1.0))
    kept = seed_kept + example_kept
    if kept == 0:
        terms = [(ms_r, (k - 1) * (m - 1), 1.0)]
    elif kept == 1:  # one component at 0: the other's mean square alone (MS_R cancels)
        terms = [t for t in terms if t[2] > 0]
    total = sum(sign * ms for ms, _, sign in terms)
    variance = total / (k * m)
    denominator = sum(ms * ms / df for ms, df, _ in terms if ms > 0)
    df = math.inf if denominator == 0 or total == 0 else total * total / denominator
    return variance, df


# --- power: the effect a design can detect --------------------------------------------------------


def minimum_detectable_effect(interval, *, power: float = 0.8, one_sided: bool = False) -> float:
    """The smallest true distance from a threshold that this design (an
    :class:`~dpnc_reproduce.claims.Interval`: its ``se`` and ``df``) detects with probability
    ``power``: (t_{0.975} (t_{0.95} one-sided) + t_{power}) at the interval's degrees of freedom,
    times its standard error. inf where the interval has no standard error (one seed, censored ends,
    none).

    A design (seeds, test size, variance components) whose MDE exceeds the distance between the
    value a claim expects (the paper's) and its threshold is unlikely to decide the claim
    (:func:`powered`). The interval decides first: one that lies beyond the threshold holds or fails
    whatever the power; "underpowered for this design" is only for an interval that straddles the
    threshold, of a design declared so (its MDE computed by the variance model that judges) before
    the data."""
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1); got {power!r}")
    if (
        interval.se is None
        or interval.df is None
        or not interval.df > 0
        or not math.isfinite(interval.se)
    ):
        return math.inf
    q = 0.95 if one_sided else 0.975
    if math.isinf(interval.df):
        return (float(stats.norm.ppf(q)) + float(stats.norm.ppf(power))) * interval.se
    return (
        float(stats.t.ppf(q, interval.df)) + float(stats.t.ppf(power, interval.df))
    ) * interval.se


def powered(
    interval, expected: float, threshold: float, *, power: float = 0.8, one_sided: bool = False
) -> tuple[bool, float]:
    """Whether the distance |expected − threshold| reaches this design's
    :func:`minimum_detectable_effect`; and the MDE."""
    mde = minimum_detectable_effect(interval, power=power, one_sided=one_sided)
    return abs(expected - threshold) >= mde, mde


UNDERPOWERED = "underpowered for this design"
