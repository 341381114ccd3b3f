"""The one-run statistic (Steinke–Nasr–Jagielski 2023) against independent computations: exact
rational arithmetic, closed forms, and an exact enumeration of randomized response with m
canaries."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dpnc.privacy.one_run import default_grid, epsilon_lower_bound, guesses, one_run_audit, p_value


def _binom_tail(r: int, v: int, p: Fraction) -> Fraction:
    """P[Binomial(r, p) ≥ v], exactly."""
    return sum((math.comb(r, j) * p**j * (1 - p) ** (r - j) for j in range(v, r + 1)), Fraction(0))


def _p_value_exact(m: int, r: int, v: int, epsilon: float, delta: Fraction) -> Fraction:
    """The paper's p-value from its definition, in rational arithmetic (p rounded once to a
    Fraction)."""
    p = Fraction(math.exp(epsilon) / (1 + math.exp(epsilon)))
    beta = _binom_tail(r, v, p)
    alpha = (
        max((_binom_tail(r, v - i, p) - beta) / i for i in range(1, v + 1)) if v else Fraction(0)
    )
    return min(beta + alpha * delta * 2 * m, Fraction(1))


@pytest.mark.parametrize(
    "m,r,v,eps,delta",
    [
        (8, 8, 7, 1.0, 0.0),
        (8, 6, 5, 0.5, 1e-3),
        (12, 10, 9, 2.0, 1e-2),
        (5, 5, 5, 3.0, 0.05),
        (10, 4, 0, 1.0, 1e-3),
        (20, 20, 15, 1.5, 1e-4),
    ],
)
def test_p_value_matches_exact_rational_arithmetic(m, r, v, eps, delta):
    exact = _p_value_exact(m, r, v, eps, Fraction(delta))
    assert p_value(m, r, v, eps, delta) == pytest.approx(float(exact), rel=1e-10, abs=1e-15)


def test_pure_dp_all_correct_has_the_closed_form():
    # δ = 0, v = r: p-value p^r, so the bound is logit(significance^(1/r)) (Theorem 3.1)
    for r, significance in [(10, 0.05), (100, 0.05), (1000, 0.01)]:
        x = significance ** (1 / r)
        assert epsilon_lower_bound(r, r, r, 0.0, significance) == pytest.approx(
            math.log(x / (1 - x)), abs=1e-8
        )


def test_bound_is_where_the_p_value_crosses_the_significance():
    m, r, v, delta, s = 1000, 600, 600, 1e-5, 0.05  # the call that closes the paper's listing
    eps = epsilon_lower_bound(m, r, v, delta, s)
    assert p_value(m, r, v, eps - 1e-6, delta) < s <= p_value(m, r, v, eps + 1e-6, delta)
    assert 5 < eps < epsilon_lower_bound(m, r, v, 0.0, s)  # δ > 0 only weakens the bound


def _randomized_response_tail(m: int, eps: float, leak: float, v: int) -> float:
    """P[W ≥ v] for m independent canaries released by (ε, δ)-DP randomized response (each bit
    revealed with probability ``leak`` = δ, else ε-randomized response), all m guessed by the
    released bit: exact enumeration over every inclusion vector and every outcome."""
    keep = math.exp(eps) / (1 + math.exp(eps))
    correct_one = (
        leak + (1 - leak) * keep
    )  # each guess is correct with this probability, independently
    total = 0.0
    for _inclusions in itertools.product(
        (-1, 1), repeat=m
    ):  # each inclusion vector, probability ½^m each
        for right in itertools.product((0, 1), repeat=m):  # which guesses come out right
            w = sum(right)
            if w >= v:
                total += 0.5**m * math.prod(correct_one if x else 1 - correct_one for x in right)
    return total


@pytest.mark.parametrize("m,eps,delta", [(6, 1.0, 0.0), (6, 0.5, 0.01), (8, 2.0, 0.02)])
def test_tail_bound_holds_for_randomized_response_by_brute_force(m, eps, delta):
    # Randomized response that leaks each bit with probability δ is (ε, δ)-DP per canary; its exact
    # tail P[W ≥ v] must lie below the theorem's bound at every v, and equal it at δ = 0 (the bound
    # is tight there).
    for v in range(m + 1):
        tail = _randomized_response_tail(m, eps, delta, v)
        bound = p_value(m, m, v, eps, delta)
        assert tail <= bound + 1e-12
        if delta == 0:
            assert tail == pytest.approx(bound, rel=1e-9, abs=1e-15)


def test_guesses_abstain_between_top_and_bottom():
    t = guesses(np.array([3.0, 1.0, 2.0, 5.0, 4.0]), 2, 1)
    assert t.tolist() == [0, -1, 0, 1, 1]
    assert guesses(np.zeros(4), 0, 0).tolist() == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="k_in"):
        guesses(np.zeros(4), 3, 2)


def test_one_run_audit_perfect_and_random_guesses():
    m = 200
    included = np.arange(m) % 2 == 0
    perfect = one_run_audit(included.astype(float), included, delta=1e-5)
    assert perfect.correct == perfect.guesses and perfect.epsilon_lower_bound == pytest.approx(
        perfect.best_possible
    )
    assert perfect.tries == 2 * len(default_grid(m))
    flipped = one_run_audit(
        -included.astype(float), included, delta=1e-5
    )  # the other orientation finds it
    assert flipped.statistic == "reversed" and flipped.epsilon_lower_bound == pytest.approx(
        perfect.epsilon_lower_bound
    )
    rng = np.random.default_rng(0)
    noise = one_run_audit(rng.normal(size=m), included, delta=1e-5)
    assert noise.epsilon_lower_bound < 0.5 * perfect.best_possible
