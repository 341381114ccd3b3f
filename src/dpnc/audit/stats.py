"""The statistics of a privacy audit: a threshold test on the adversary's scores, turned into an ε
lower bound (:func:`epsilon_lower_bound`) with Clopper–Pearson intervals, the threshold chosen on
one half of the runs and the bound computed on the other (:func:`split_threshold_test`), several
statistics at once by Bonferroni (:func:`multi_statistic_test`). See docs/audit.md."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from dpnc.checks import check_probability


def clopper_pearson_upper(k, n, confidence: float):
    """One-sided Clopper–Pearson upper bound p̄ with P(p ≤ p̄) ≥ ``confidence`` after k successes in
    n trials.

    p̄ = Beta⁻¹(confidence; k + 1, n − k) (scipy's beta quantile), and 1 when k = n. Vectorised over
    k, n."""
    check_probability(confidence=confidence)
    k, n = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValueError(f"need 0 <= k <= n and n >= 1; got k={k!r}, n={n!r}")
    upper = stats.beta.ppf(confidence, k + 1, np.maximum(n - k, 1))
    return np.where(k >= n, 1.0, upper)


def clopper_pearson_interval(k: int, n: int, confidence: float) -> tuple[float, float]:
    """The two-sided Clopper–Pearson interval at ``confidence`` (for reports)."""
    check_probability(confidence=confidence)
    result = stats.binomtest(int(k), int(n)).proportion_ci(
        confidence_level=confidence, method="exact"
    )
    return float(result.low), float(result.high)


def epsilon_lower_bound(fpr_upper, fnr_upper, delta: float):
    """max(log((1 − δ − β̄)/ᾱ), log((1 − δ − ᾱ)/β̄), 0) for upper bounds ᾱ on the FPR and β̄ on the
    FNR.

    An (ε, δ)-DP mechanism and any test that says "the canary was in" (a run on D) or "out" (a run
    on the neighbour D′) satisfy, with FPR α = P(in | D′) and FNR β = P(out | D), α + e^ε·β ≥ 1 − δ
    and β + e^ε·α ≥ 1 − δ (Kairouz, Oh & Viswanath 2015, Thm 2.1). With one-sided Clopper–Pearson
    upper bounds ᾱ, β̄ (:func:`clopper_pearson_upper`), each at 1 − (1 − confidence)/2, the bound
    holds with the joint confidence of the two (a union bound, so the two populations' runs may even
    share randomness).

    References:
        Kairouz, Oh, Viswanath. The composition theorem for differential privacy. ICML 2015
        (arXiv:1311.0776).
        Clopper, Pearson. The use of confidence or fiducial limits illustrated in the case of the
        binomial. Biometrika 1934.
    """
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1); got {delta!r}")
    a, b = np.asarray(fpr_upper, dtype=np.float64), np.asarray(fnr_upper, dtype=np.float64)
    with np.errstate(
        divide="ignore", invalid="ignore"
    ):  # a zero bound gives inf, 0/0 gives NaN (ignored)
        one = np.log(np.maximum(1 - delta - b, 0.0) / a)
        two = np.log(np.maximum(1 - delta - a, 0.0) / b)
    bound = np.fmax(np.fmax(one, two), 0.0)  # fmax ignores the NaN of 0/0
    return float(bound) if bound.ndim == 0 else bound


@dataclass(frozen=True)
class ThresholdTest:
    """The test "in if orientation·score > orientation·threshold" and what it achieved on the
    held-out half.

    Attributes:
        threshold, orientation: the rule (orientation +1: high scores mean "in"; −1: low scores).
        false_positives, negatives: out-runs the rule called "in", out of how many held-out
            out-runs.
        false_negatives, positives: in-runs the rule called "out", out of how many held-out in-runs.
        fpr_upper, fnr_upper: one-sided Clopper–Pearson upper bounds (each at 1 − (1 −
            confidence)/2).
        fpr_interval, fnr_interval: two-sided Clopper–Pearson intervals at ``confidence`` (for
            reading).
        epsilon_lower_bound: the ε lower bound, holding with probability ≥ ``confidence``.
        epsilon_estimate: the same formula on the empirical rates (a point estimate, not a bound;
            None when an error count is 0, which makes it infinite).
        confidence: the joint confidence of the bound.
    """

    threshold: float
    orientation: int
    false_positives: int
    negatives: int
    false_negatives: int
    positives: int
    fpr_upper: float
    fnr_upper: float
    fpr_interval: tuple[float, float]
    fnr_interval: tuple[float, float]
    epsilon_lower_bound: float
    epsilon_estimate: float | None
    confidence: float

    def to_dict(self) -> dict:
        return asdict(self)


def _errors(
    scores_in: np.ndarray, scores_out: np.ndarray, thresholds: np.ndarray, orientation: int
):
    """(false positives, false negatives) of "in if orientation·score > orientation·t" for every
    t."""
    s_in, s_out, t = orientation * scores_in, orientation * scores_out, orientation * thresholds
    s_in.sort()
    s_out.sort()
    false_pos = len(s_out) - np.searchsorted(s_out, t, side="right")  # out-runs with score > t
    false_neg = np.searchsorted(s_in, t, side="right")  # in-runs with score <= t
    return false_pos, false_neg


def _bounds(false_pos, negatives, false_neg, positives, delta, confidence):
    each = 1 - (1 - confidence) / 2
    fpr_upper = clopper_pearson_upper(false_pos, negatives, each)
    fnr_upper = clopper_pearson_upper(false_neg, positives, each)
    return fpr_upper, fnr_upper, epsilon_lower_bound(fpr_upper, fnr_upper, delta)


def select_threshold(scores_in, scores_out, delta: float, confidence: float) -> tuple[float, int]:
    """The threshold and orientation whose ε bound at ``delta`` is largest on these (selection)
    scores.

    Candidates are every distinct score, in both orientations. They are ranked by the bound computed
    with each error count one higher than observed and at the stricter level 1 − (1 −
    confidence)/50: both guard against a threshold so deep in a tail that the held-out half will not
    reproduce its few errors (with 10⁴ runs of an ε ≈ 1 mechanism this removes most held-out bounds
    of 0 and costs little elsewhere). The final bound stays valid whatever the selection does, since
    it is computed on other runs. The one-δ case of :func:`select_profile_threshold` (a claim of ε =
    0 at ``delta``)."""
    threshold, orientation, _ = select_profile_threshold(
        scores_in, scores_out, {delta: 0.0}, confidence
    )
    return threshold, orientation


def evaluate_threshold(
    scores_in, scores_out, threshold: float, orientation: int, delta: float, confidence: float
) -> ThresholdTest:
    """The rule's errors on held-out scores and the ε lower bound they give."""
    scores_in, scores_out = _scores(scores_in, "scores_in"), _scores(scores_out, "scores_out")
    t = np.array([threshold])
    false_pos, false_neg = (int(v[0]) for v in _errors(scores_in, scores_out, t, orientation))
    neg, pos = len(scores_out), len(scores_in)
    fpr_upper, fnr_upper, bound = _bounds(false_pos, neg, false_neg, pos, delta, confidence)
    estimate = epsilon_lower_bound(
        false_pos / neg, false_neg / pos, delta
    )  # inf when an error count is 0
    return ThresholdTest(
        threshold=float(threshold),
        orientation=orientation,
        false_positives=false_pos,
        negatives=neg,
        false_negatives=false_neg,
        positives=pos,
        fpr_upper=float(fpr_upper),
        fnr_upper=float(fnr_upper),
        fpr_interval=clopper_pearson_interval(false_pos, neg, confidence),
        fnr_interval=clopper_pearson_interval(false_neg, pos, confidence),
        epsilon_lower_bound=float(bound),
        epsilon_estimate=float(estimate) if math.isfinite(estimate) else None,
        confidence=confidence,
    )


def split_threshold_test(
    scores_in, scores_out, delta: float, confidence: float = 0.95
) -> ThresholdTest:
    """Choose the threshold on the first half of each population's runs, bound ε at ``delta`` on the
    second half.

    The runs of a population are i.i.d., so their order carries no information and "first half" is a
    fair split. Each population needs at least 2 runs. The one-δ case of :func:`profile_test`.
    Choosing the threshold on other runs than those that bound ε keeps the choice from biasing the
    bound (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021).

    References:
        Jagielski, Ullman, Oprea. Auditing differentially private machine learning: how private is
        private SGD? NeurIPS 2020 (arXiv:2006.07709).
        Nasr, Song, Thakurta, Papernot, Carlini. Adversary instantiation: lower bounds for
        differentially private machine learning. IEEE S&P 2021 (arXiv:2101.04535).
    """
    return profile_test("score", scores_in, scores_out, {delta: 0.0}, confidence).test


def _scores(values, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64).reshape(-1).copy()
    if array.size == 0 or not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be a non-empty array of finite numbers")
    return array


# --- several statistics, the claim's whole privacy profile ----------------------------------------

#: δ values at which an audit compares its bound with the claim (besides the claim's own δ). The
#: ledger claims (ε(δ), δ)-DP for *every* δ (its RDP/PLD/zCDP answers are upper bounds at each δ); a
#: test at a larger δ estimates error rates around 10⁻³–0.3, which a few thousand runs measure well,
#: where δ = 10⁻⁵ needs rates near 10⁻⁵ that no affordable run count can bound (docs/audit.md,
#: "Power").
SELECTION_STRICTNESS, SELECTION_PAD = (
    50,
    1,
)  # see select_threshold; measured in docs/audit.md ("Power")
PROFILE_DELTAS = (1e-4, 1e-3, 1e-2, 0.03, 0.1, 0.2, 0.3)


@dataclass(frozen=True)
class StatisticTest:
    """One statistic's split test against the claim's privacy profile.

    Attributes:
        statistic: the statistic's name.
        delta: the δ chosen on the selection half (with the threshold) at which the bound is
            compared.
        claimed_epsilon: the ledger's ε at that δ.
        test: the threshold test on the held-out half; its ``epsilon_lower_bound`` is the bound at
            ``delta`` and its ``confidence`` the per-statistic level (Bonferroni: 1 − (1 −
            confidence)/K for K statistics).
    """

    statistic: str
    delta: float
    claimed_epsilon: float
    test: ThresholdTest

    @property
    def epsilon_lower_bound(self) -> float:
        return self.test.epsilon_lower_bound

    @property
    def margin(self) -> float:
        """Lower bound minus claim at ``delta``: > 0 proves the claim false (at the family-wise
        confidence)."""
        return self.test.epsilon_lower_bound - self.claimed_epsilon

    @property
    def violation(self) -> bool:
        return self.margin > 0

    def to_dict(self) -> dict:
        return {
            "statistic": self.statistic,
            "delta": self.delta,
            "claimed_epsilon": self.claimed_epsilon,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "margin": self.margin,
            "violation": self.violation,
            "test": self.test.to_dict(),
        }


def _check_claims(claims) -> dict[float, float]:
    claims = {float(d): float(e) for d, e in dict(claims).items()}
    if not claims or any(not 0 <= d < 1 or not e >= 0 for d, e in claims.items()):
        raise ValueError(f"claims must map δ in [0, 1) to ε >= 0; got {claims!r}")
    return claims


def select_profile_threshold(
    scores_in, scores_out, claims, confidence: float
) -> tuple[float, int, float]:
    """The (threshold, orientation, δ) whose bound exceeds the claim ε(δ) by the most on these
    (selection) scores.

    ``claims`` maps each candidate δ to the ledger's ε(δ). Ranked as :func:`select_threshold` ranks
    (each error count one higher, the stricter level 1 − (1 − confidence)/50), by bound − claim.
    Only power depends on this."""
    scores_in, scores_out = _scores(scores_in, "scores_in"), _scores(scores_out, "scores_out")
    check_probability(confidence=confidence)
    claims = _check_claims(claims)
    candidates = np.unique(np.concatenate([scores_in, scores_out]))
    neg, pos = len(scores_out), len(scores_in)
    strict = 1 - (1 - confidence) / SELECTION_STRICTNESS
    each = 1 - (1 - strict) / 2
    best = (-math.inf, float(candidates[0]), 1, min(claims))
    for orientation in (1, -1):
        false_pos, false_neg = _errors(scores_in, scores_out, candidates, orientation)
        a = clopper_pearson_upper(np.minimum(false_pos + SELECTION_PAD, neg), neg, each)
        b = clopper_pearson_upper(np.minimum(false_neg + SELECTION_PAD, pos), pos, each)
        for delta, claim in claims.items():
            margin = epsilon_lower_bound(a, b, delta) - claim
            i = int(np.argmax(margin))
            if margin[i] > best[0]:
                best = (float(margin[i]), float(candidates[i]), orientation, delta)
    return best[1], best[2], best[3]


def profile_test(
    name: str, scores_in, scores_out, claims, confidence: float = 0.95
) -> StatisticTest:
    """Choose threshold, side and δ on the first half of each population's runs; bound ε(δ) on the
    second half."""
    scores_in, scores_out = _scores(scores_in, "scores_in"), _scores(scores_out, "scores_out")
    if len(scores_in) < 2 or len(scores_out) < 2:
        raise ValueError(
            f"need at least 2 runs per population; got {len(scores_in)} and {len(scores_out)}"
        )
    claims = _check_claims(claims)
    half_in, half_out = len(scores_in) // 2, len(scores_out) // 2
    threshold, orientation, delta = select_profile_threshold(
        scores_in[:half_in], scores_out[:half_out], claims, confidence
    )
    test = evaluate_threshold(
        scores_in[half_in:], scores_out[half_out:], threshold, orientation, delta, confidence
    )
    return StatisticTest(statistic=name, delta=delta, claimed_epsilon=claims[delta], test=test)


def multi_statistic_test(statistics, claims, confidence: float = 0.95) -> list[StatisticTest]:
    """Every statistic's :func:`profile_test`, each at 1 − (1 − confidence)/K for K statistics
    (Bonferroni).

    ``statistics`` maps a name to (scores on D, scores on D′) of the same runs. With probability ≥
    ``confidence`` *every* returned lower bound holds at once (each test's two Clopper–Pearson
    bounds share its level by a union bound; the K tests share ``confidence`` by Bonferroni), so the
    largest margin may be reported as the audit's. Thresholds, sides and δ are chosen on the first
    halves, which the held-out bounds do not reuse."""
    check_probability(confidence=confidence)
    statistics = dict(statistics)
    if not statistics:
        raise ValueError("statistics must name at least one statistic")
    each = 1 - (1 - confidence) / len(statistics)
    return [
        profile_test(name, s_in, s_out, claims, each) for name, (s_in, s_out) in statistics.items()
    ]
