"""The one-run audit's statistic: an ε lower bound from m canaries, each in the training data with
probability ½ (Steinke, Nasr & Jagielski 2023): :func:`p_value` states the test,
:func:`one_run_audit` spends the confidence over the tries. See docs/audit.md."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import optimize, stats
from scipy.special import expit

from dpnc.checks import check_probability


def p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """P-value of v correct guesses out of r (m canaries) under the null "the mechanism is (ε,
    δ)-DP".

    Each of m canaries is included independently with probability ½ (S ∈ {−1, +1}^m); after training
    the adversary guesses T ∈ {−1, 0, +1}^m ("in", "out" or abstain: r = k₊ + k₋ guesses,
    :func:`guesses`) and W counts the correct guesses. For an (ε, δ)-DP mechanism (Steinke, Nasr &
    Jagielski 2023, Theorem 3 and Proposition 5.2, with the p-value of their Algorithm 2 listing):

        P[W ≥ v] ≤ β + α·2m·δ,   β = P[Binomial(r, p) ≥ v],   p = e^ε / (1 + e^ε),
                                 α = max_{1 ≤ i ≤ v} P[v − i ≤ Binomial(r, p) < v] / i,

    capped at 1. So if the observed v has p-value below 1 − confidence at ε, the mechanism is not
    (ε, δ)-DP, with that confidence. At δ = 0 it is the binomial tail alone (their Theorem 3.1: W is
    dominated by Binomial(r, p)). Raises ValueError unless 0 ≤ v ≤ r ≤ m, ε ≥ 0, δ ∈ [0, 1].

    References:
        Steinke, Nasr, Jagielski. Privacy auditing with one (1) training run. NeurIPS 2023
        (arXiv:2305.08846): Theorem 3.1 (pure DP), Proposition 5.2 / Theorem 3 ((ε, δ)), the
        appendix's p-value listing (Algorithm 2).
    """
    _check_counts(m, r, v)
    if not (epsilon >= 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be a finite number >= 0; got {epsilon!r}")
    if not 0 <= delta <= 1:
        raise ValueError(f"delta must be in [0, 1]; got {delta!r}")
    p = float(expit(epsilon))  # accuracy of ε-DP randomized response
    beta = float(stats.binom.sf(v - 1, r, p))  # P[Binomial(r, p) ≥ v]
    if delta == 0 or v == 0:
        return min(beta, 1.0)
    # P[v − i ≤ Binomial(r, p) < v] for i = 1..v: cumulative pmf below v
    window = np.cumsum(stats.binom.pmf(v - np.arange(1, v + 1), r, p))
    alpha = float(np.max(window / np.arange(1, v + 1)))
    return min(beta + alpha * delta * 2 * m, 1.0)


def epsilon_lower_bound(m: int, r: int, v: int, delta: float, significance: float) -> float:
    """The largest ε whose p-value (:func:`p_value`) is below ``significance``; 0 when even ε = 0 is
    not rejected.

    The p-value is non-decreasing in ε (β and α are tails of Binomial(r, p) with p increasing in ε),
    so the bound is where it crosses ``significance``: bracketed by doubling, then found by Brent's
    method to 1e-9 absolute."""
    check_probability(significance=significance)
    if p_value(m, r, v, 0.0, delta) >= significance:
        return 0.0
    hi = 1.0
    while p_value(m, r, v, hi, delta) < significance:
        hi *= 2
        if hi > 1e4:  # p → 1 as ε grows, so the p-value reaches any significance < 1 long before
            raise RuntimeError("the p-value never reached the significance; check the inputs")
    return float(
        optimize.brentq(
            lambda eps: p_value(m, r, v, eps, delta) - significance,
            hi / 2 if hi > 1 else 0.0,
            hi,
            xtol=1e-9,
        )
    )


def guesses(scores: np.ndarray, k_in: int, k_out: int) -> np.ndarray:
    """The abstaining guess: +1 ("in") for the k_in highest scores, −1 ("out") for the k_out lowest,
    0 elsewhere.

    Ties are broken by position (a stable sort), which depends on nothing the run released.
    """
    scores = np.asarray(scores, dtype=np.float64)
    m = len(scores)
    if not (0 <= k_in and 0 <= k_out and k_in + k_out <= m):
        raise ValueError(
            f"k_in and k_out must be >= 0 with k_in + k_out <= m = {m}; got {k_in}, {k_out}"
        )
    order = np.argsort(scores, kind="stable")
    t = np.zeros(m, dtype=np.int64)
    if k_in:
        t[order[m - k_in :]] = 1
    t[order[:k_out]] = -1
    return t


def default_grid(m: int) -> tuple[tuple[int, int], ...]:
    """The (k_in, k_out) pairs tried by default: k = k_in = k_out ∈ {m/20, m/10, m/5, m/2·…}
    (distinct, ≥ 1)."""
    ks = sorted({max(1, int(m * f)) for f in (0.05, 0.1, 0.2, 0.35, 0.5)})
    return tuple((k, k) for k in ks if 2 * k <= m)


@dataclass(frozen=True)
class OneRunResult:
    """A one-run audit's verdict. ``epsilon_lower_bound`` holds at ``confidence`` (over every try).

    Fields are the bound's statistics only (counts of guesses), never which canaries were in.
    """

    epsilon_lower_bound: float
    best_possible: float  # the bound these tries would show with every guess correct
    m: int
    guesses: int  # r of the best try
    correct: int  # v of the best try
    k_in: int
    k_out: int
    statistic: str  # the score of the best try (high means "in")
    delta: float
    confidence: float
    tries: int  # tests the confidence was shared over (Bonferroni)

    def to_dict(self) -> dict:
        return asdict(self)


def one_run_audit(
    scores,
    included,
    *,
    delta: float,
    confidence: float = 0.95,
    grid: tuple[tuple[int, int], ...] | None = None,
) -> OneRunResult:
    """The one-run lower bound from canary scores and the true inclusions (known only to the data
    owner).

    ``scores``: one vector (high means "in"; its reverse is tried too, as a defect may push an
    included canary's score *down*) or a dict of named vectors chosen before the run (each tried as
    given). Every (k_in, k_out) of ``grid`` (default :func:`default_grid`) is tried with every
    score, each at significance (1 − confidence)/(number of tries); the largest bound is returned
    with its counts. ``best_possible`` is the largest bound over the same tries with v = r.

    Choosing k after seeing the scores would spend the confidence more than once: hence a fixed grid
    and a fixed set of scores declared before the run, with the significance spent equally over all
    of them (Bonferroni), so that the maximum over the tries holds at the stated confidence."""
    if not isinstance(scores, dict):
        vector = np.asarray(scores, dtype=np.float64)
        scores = {"score": vector, "reversed": -vector}
    scores = {name: np.asarray(v, dtype=np.float64) for name, v in scores.items()}
    included = np.asarray(included, dtype=bool)
    if (
        not scores
        or any(v.shape != included.shape for v in scores.values())
        or included.ndim != 1
        or len(included) < 2
    ):
        raise ValueError(
            f"scores and included must be 1-d of one length m >= 2; got "
            f"{[v.shape for v in scores.values()]}, {included.shape}"
        )
    check_probability(confidence=confidence)
    m = len(included)
    grid = default_grid(m) if grid is None else tuple(grid)
    tries = len(grid) * len(scores)
    significance = (1 - confidence) / tries
    truth = np.where(included, 1, -1)
    best = None
    for k_in, k_out in grid:
        for name, vector in scores.items():
            t = guesses(vector, k_in, k_out)
            r, v = int(np.count_nonzero(t)), int(np.sum(t == truth))
            bound = epsilon_lower_bound(m, r, v, delta, significance)
            if best is None or bound > best[0]:
                best = (bound, r, v, k_in, k_out, name)
    possible = max(
        epsilon_lower_bound(m, k_in + k_out, k_in + k_out, delta, significance)
        for k_in, k_out in grid
    )
    bound, r, v, k_in, k_out, name = best
    return OneRunResult(bound, possible, m, r, v, k_in, k_out, name, delta, confidence, tries)


def _check_counts(m: int, r: int, v: int) -> None:
    for key, value in (("m", m), ("r", r), ("v", v)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise ValueError(f"{key} must be an integer; got {value!r}")
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= v <= r <= m; got v={v}, r={r}, m={m}")
