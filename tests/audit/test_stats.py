"""The audit's statistics against hand-computed values and scipy's own Clopper–Pearson routine."""

import math

import numpy as np
import pytest
from scipy import stats

from dpnc.audit.stats import (
    clopper_pearson_interval,
    clopper_pearson_upper,
    epsilon_lower_bound,
    evaluate_threshold,
    select_threshold,
    split_threshold_test,
)


def test_clopper_pearson_upper_hand_values():
    # k = 0: (1 − p)^n = 1 − confidence, so p̄ = 1 − (1 − confidence)^(1/n)
    assert clopper_pearson_upper(0, 100, 0.975) == pytest.approx(1 - 0.025 ** (1 / 100), rel=1e-12)
    # k = 1, n = 10: P(X ≤ 1 | p̄) = (1 − p̄)^10 + 10p̄(1 − p̄)^9 = 0.05 at p̄ = 0.394163…
    p = float(clopper_pearson_upper(1, 10, 0.95))
    assert p == pytest.approx(0.39416330243697, rel=1e-9)
    assert (1 - p) ** 10 + 10 * p * (1 - p) ** 9 == pytest.approx(0.05, rel=1e-9)
    assert clopper_pearson_upper(10, 10, 0.95) == 1.0


def test_clopper_pearson_upper_agrees_with_scipy_binomtest():
    for k, n in [(0, 7), (3, 100), (50, 100), (99, 100), (12, 5000)]:
        exact = stats.binomtest(k, n, alternative="less").proportion_ci(
            confidence_level=0.975, method="exact"
        )
        assert clopper_pearson_upper(k, n, 0.975) == pytest.approx(exact.high, rel=1e-10)
    vector = clopper_pearson_upper(np.array([0, 3]), np.array([7, 100]), 0.975)
    assert vector.shape == (2,) and vector[1] == pytest.approx(clopper_pearson_upper(3, 100, 0.975))


def test_two_sided_interval_is_clopper_pearson():
    low, high = clopper_pearson_interval(3, 100, 0.95)
    assert high == pytest.approx(0.08517605297428, rel=1e-9)  # P(X ≤ 3 | high) = 0.025
    assert stats.binom.sf(2, 100, low) == pytest.approx(0.025, rel=1e-7)  # P(X ≥ 3 | low) = 0.025


def test_epsilon_lower_bound_hand_values():
    # ᾱ = 0.01, β̄ = 0.5: max(log(0.5/0.01), log(0.99/0.5)) = log 50
    assert epsilon_lower_bound(0.01, 0.5, 0.0) == pytest.approx(math.log(50))
    assert epsilon_lower_bound(0.01, 0.5, 1e-3) == pytest.approx(math.log((1 - 1e-3 - 0.5) / 0.01))
    # the other side: a small FNR bound
    assert epsilon_lower_bound(0.5, 0.02, 0.0) == pytest.approx(math.log(0.5 / 0.02))
    # nothing learned: both terms negative
    assert epsilon_lower_bound(0.6, 0.6, 1e-5) == 0.0
    assert epsilon_lower_bound(1.0, 1.0, 1e-5) == 0.0
    both = epsilon_lower_bound(np.array([0.01, 0.6]), np.array([0.5, 0.6]), 0.0)
    assert both == pytest.approx([math.log(50), 0.0])


def test_threshold_test_counts_on_a_hand_example():
    # held-out scores: in = [3, 4, 5, 0], out = [0, 1, 2, 3]; rule "in if score > 2.5"
    t = evaluate_threshold([3, 4, 5, 0], [0, 1, 2, 3], 2.5, 1, 0.0, 0.95)
    assert (t.false_positives, t.negatives, t.false_negatives, t.positives) == (1, 4, 1, 4)
    fpr = clopper_pearson_upper(1, 4, 0.975)
    assert t.fpr_upper == pytest.approx(fpr) and t.fnr_upper == pytest.approx(fpr)
    assert t.epsilon_lower_bound == epsilon_lower_bound(fpr, fpr, 0.0)
    assert t.epsilon_estimate == pytest.approx(math.log(0.75 / 0.25))


def test_threshold_is_chosen_on_the_first_half_and_bounded_on_the_second():
    rng = np.random.default_rng(0)
    first_in, first_out = rng.normal(3, 1, 500), rng.normal(0, 1, 500)
    second_in, second_out = rng.normal(3, 1, 500), rng.normal(0, 1, 500)
    result = split_threshold_test(np.r_[first_in, second_in], np.r_[first_out, second_out], 1e-5)
    threshold, orientation = select_threshold(first_in, first_out, 1e-5, 0.95)
    assert (result.threshold, result.orientation) == (threshold, orientation)
    assert result == evaluate_threshold(second_in, second_out, threshold, orientation, 1e-5, 0.95)
    assert result.positives == result.negatives == 500


def test_low_scores_meaning_in_are_found_by_the_other_orientation():
    rng = np.random.default_rng(1)
    s_in, s_out = rng.normal(3, 1, 2000), rng.normal(0, 1, 2000)
    up = split_threshold_test(s_in, s_out, 1e-5)
    down = split_threshold_test(-s_in, -s_out, 1e-5)
    assert up.orientation == 1 and down.orientation == -1
    assert down.epsilon_lower_bound == pytest.approx(up.epsilon_lower_bound)


def test_lower_bound_covers_the_true_epsilon_of_randomized_response():
    """Randomized response with ε = 2: the ideal test's point estimate *is* ε, so the bound is as
    close to the truth as an audit gets. It may exceed ε only when a Clopper–Pearson bound fails: at
    most 5% of repeats."""
    eps, runs, repeats = 2.0, 2000, 400
    p = 1 / (1 + math.exp(eps))
    rng = np.random.default_rng(2)
    bounds = np.array(
        [
            split_threshold_test(
                (rng.random(runs) >= p).astype(float), (rng.random(runs) < p).astype(float), 0.0
            ).epsilon_lower_bound
            for _ in range(repeats)
        ]
    )
    assert np.mean(bounds > eps) <= 0.05
    assert np.median(bounds) > 0.7 * eps  # and it has power: the bound is near the truth


def test_a_perfectly_separating_test_is_limited_by_the_number_of_runs():
    # no errors on 1000 held-out runs each: ᾱ = β̄ = 1 − 0.025^(1/1000), ε ≥ log((1 − δ − β̄)/ᾱ) ≈
    # 5.6
    t = split_threshold_test(
        np.full(2000, 1.0) + np.arange(2000) * 1e-9, np.zeros(2000) - np.arange(2000) * 1e-9, 1e-5
    )
    bound = 1 - 0.025 ** (1 / 1000)
    assert t.epsilon_lower_bound == pytest.approx(math.log((1 - 1e-5 - bound) / bound))
    assert t.epsilon_estimate is None  # no errors: the point estimate is infinite


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: clopper_pearson_upper(1, 10, 1.0), "confidence must be in"),
        (lambda: clopper_pearson_upper(11, 10, 0.9), "0 <= k <= n"),
        (lambda: epsilon_lower_bound(0.1, 0.1, 1.0), "delta must be in"),
        (lambda: split_threshold_test([1.0], [0.0, 1.0], 1e-5), "at least 2 runs"),
        (lambda: split_threshold_test([1.0, float("nan")], [0.0, 1.0], 1e-5), "finite"),
        (lambda: split_threshold_test([], [0.0, 1.0], 1e-5), "non-empty"),
    ],
)
def test_bad_input_is_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
