"""GRAD and DIFF (Zhang–Tran–Cutkosky Algorithms 1–2): docs/papers.md, ZTC §5 properties 1–5.

Monte Carlo tolerances come from the lemmas' variance bounds: a mean of n i.i.d. estimates with
E‖g − E g‖² ≤ V lies within 4√(V/n) of its expectation (in norm) except with probability ≤ 1/16 by
Chebyshev — and in practice far less; seeds are fixed.
"""

import math

import pytest
import torch

from dpnc.estimators import diff_estimate, grad_estimate, sphere_directions
from dpnc.problems.nonsmooth import AbsLinear, L1Regression
from tests.toys import generator


class Counting(AbsLinear):
    """|⟨a, x⟩| that counts the points it is evaluated at."""

    calls = 0

    def loss(self, x, *batch):
        Counting.calls += x.shape[0] * x.shape[1]
        return super().loss(x, *batch)


def abs_rows(n, d, seed=0):
    """f(x, z_i) = |⟨a_i, x⟩| with ‖a_i‖ = 1: the worst case for the sensitivity bounds."""
    a = sphere_directions(1, n, d, generator(seed))[0]
    return L1Regression(a, torch.zeros(n, dtype=torch.float64))


def test_directions_are_unit_and_counted():
    u = sphere_directions(7, 5, 9, generator())
    assert u.shape == (7, 5, 9)
    assert torch.allclose(
        torch.linalg.vector_norm(u, dim=-1), torch.ones(7, 5, dtype=torch.float64), atol=1e-12
    )
    problem = Counting(torch.ones(6, dtype=torch.float64))
    x = torch.randn(6, dtype=torch.float64, generator=generator(1))
    Counting.calls = 0
    est = grad_estimate(problem, x, torch.zeros(4, dtype=torch.long), 0.1, generator=generator())
    assert est.per_example.shape == (4, 6) and est.evaluations == 2 * 4 * 6 == Counting.calls
    Counting.calls = 0
    est = diff_estimate(
        problem, x, x + 0.01, torch.zeros(3, dtype=torch.long), 0.1, m=2, generator=generator()
    )
    assert est.evaluations == 2 * 3 * 2 == Counting.calls


def test_grad_of_a_linear_function_is_unbiased():
    """f = ⟨a, x⟩ − b restricted to where it is positive behaves linearly: ∇f̂_δ = a exactly."""
    d, b, reps = 8, 50, 200
    a = sphere_directions(1, 1, d, generator(3))[0, 0]
    problem = L1Regression(
        a.expand(b, d).clone(), torch.full((b,), -100.0, dtype=torch.float64)
    )  # ⟨a,x⟩+100 > 0
    x = torch.zeros(d, dtype=torch.float64)
    g = generator(4)
    mean = torch.stack(
        [grad_estimate(problem, x, torch.arange(b), 0.1, generator=g).mean for _ in range(reps)]
    ).mean(0)
    V = 16 * d / (b * reps)  # Lemma 3.1 with L = 1
    assert torch.linalg.vector_norm(mean - a) <= 4 * math.sqrt(V)


@pytest.mark.parametrize("d", [1, 3, 10])
def test_grad_and_diff_are_unbiased_for_the_smoothed_abs(d):
    problem = AbsLinear.random(d, seed=d)
    delta, b, reps = 0.5, 64, 300
    x = 0.3 * problem.a + 0.2 * torch.randn(d, generator=generator(d), dtype=torch.float64)
    y = x + 0.05 * torch.randn(d, generator=generator(d + 1), dtype=torch.float64)
    index, g = torch.zeros(b, dtype=torch.long), generator(7)
    exact_x, exact_y = problem.smoothed_gradient(x, delta), problem.smoothed_gradient(y, delta)
    grads = torch.stack(
        [grad_estimate(problem, x, index, delta, generator=g).mean for _ in range(reps)]
    )
    assert torch.linalg.vector_norm(grads.mean(0) - exact_x) <= 4 * math.sqrt(16 * d / (b * reps))
    diffs = torch.stack(
        [diff_estimate(problem, x, y, index, delta, generator=g).mean for _ in range(reps)]
    )
    dist = float(torch.linalg.vector_norm(x - y))
    assert torch.linalg.vector_norm(diffs.mean(0) - (exact_x - exact_y)) <= 4 * math.sqrt(
        16 * d * dist**2 / (b * reps * delta**2)
    )


def test_empirical_variance_and_per_term_bounds():
    d, delta, b, reps = 6, 0.3, 16, 400
    problem = abs_rows(b, d, seed=2)
    x = torch.randn(d, generator=generator(5), dtype=torch.float64) * 0.2
    y = x + 0.02 * torch.randn(d, generator=generator(6), dtype=torch.float64)
    g = generator(8)
    grads = torch.stack(
        [grad_estimate(problem, x, torch.arange(b), delta, generator=g).mean for _ in range(reps)]
    )
    diffs = torch.stack(
        [
            diff_estimate(problem, x, y, torch.arange(b), delta, generator=g).mean
            for _ in range(reps)
        ]
    )
    dist = float(torch.linalg.vector_norm(x - y))
    var = lambda s: float((s - s.mean(0)).pow(2).sum(1).mean())
    assert var(grads) <= 16 * d / b
    assert var(diffs) <= 16 * d * dist**2 / (b * delta**2)
    # One direction per example: each per-example estimate is a single term g_ij (d_ij).
    single = grad_estimate(problem, x, torch.arange(b), delta, m=1, generator=g).per_example
    assert torch.linalg.vector_norm(single, dim=1).max() <= d * 1.0 * (1 + 1e-12)
    single = diff_estimate(problem, x, y, torch.arange(b), delta, m=1, generator=g).per_example
    assert torch.linalg.vector_norm(single, dim=1).max() <= d * dist / delta * (1 + 1e-12)


def replace_one(problem, i, a_new, b_new):
    a, b = (t.clone() for t in problem.data)
    a[i], b[i] = a_new, b_new
    return L1Regression(a, b)


@pytest.mark.parametrize("m", [1, None])
def test_sensitivity_under_adversarial_replacement(m):
    """Same directions (same seed), one example replaced by the one that flips every difference."""
    d, delta, b = 5, 0.2, 10
    problem = abs_rows(b, d, seed=3)
    x = torch.randn(d, generator=generator(1), dtype=torch.float64)
    y = x + 0.03 * torch.randn(d, generator=generator(2), dtype=torch.float64)
    dist = float(torch.linalg.vector_norm(x - y))
    worst_grad = worst_diff = 0.0
    for trial in range(20):
        z = sphere_directions(1, 1, d, generator(100 + trial))[0, 0]
        other = replace_one(problem, 0, z, 0.0)
        for est, bound, acc in (
            (grad_estimate, 2 * d / b, "g"),
            (diff_estimate, 2 * d * dist / (b * delta), "d"),
        ):
            args = (x,) if est is grad_estimate else (x, y)
            one = est(problem, *args, torch.arange(b), delta, m=m, generator=generator(9)).mean
            two = est(other, *args, torch.arange(b), delta, m=m, generator=generator(9)).mean
            change = float(torch.linalg.vector_norm(one - two))
            assert change <= bound * (1 + 1e-12)
            if acc == "g":
                worst_grad = max(worst_grad, change / bound)
            else:
                worst_diff = max(worst_diff, change / bound)
    assert worst_grad > 0.05 and worst_diff > 0.05  # the test exercises the bound, not a no-op


def test_clipping_keeps_the_sensitivity_when_the_declared_lipschitz_is_wrong():
    d, delta, b = 4, 0.2, 8
    problem = abs_rows(b, d)
    steep = problem.subset(torch.arange(b))
    a = problem.data[0].clone()
    a[0] = 50 * torch.ones(d, dtype=torch.float64) / math.sqrt(d)
    steep.data = (
        a,
        problem.data[1],
    )  # example 0 is 50-Lipschitz: the declared L = 1 is wrong for it
    x = torch.randn(d, generator=generator(1), dtype=torch.float64)
    clipped = [
        grad_estimate(p, x, torch.arange(b), delta, generator=generator(2))
        for p in (problem, steep)
    ]
    assert float(torch.linalg.vector_norm(clipped[0].mean - clipped[1].mean)) <= 2 * d / b * (
        1 + 1e-12
    )
    assert clipped[1].clipped > 0 and clipped[0].clipped == 0
    raw = [
        grad_estimate(p, x, torch.arange(b), delta, generator=generator(2), clip=False).mean
        for p in (problem, steep)
    ]
    assert float(torch.linalg.vector_norm(raw[0] - raw[1])) > 2 * d / b


def test_one_point_identity_matches_the_two_point_mean():
    """Lemma 2.2(iv): E[(d/δ) h(x+δu) u] = E[(d/2δ)(h(x+δu) − h(x−δu)) u] = ∇ĥ_δ(x)."""
    d, delta, n = 3, 0.4, 200_000
    problem = AbsLinear.random(d, seed=11)
    x = 0.1 * problem.a
    u = sphere_directions(1, n, d, generator(12))[0]
    h = lambda p: problem.loss(p.unsqueeze(0), *problem.data)[0]
    one_point = (d / delta * h(x + delta * u)[:, None] * u).mean(0)
    exact = problem.smoothed_gradient(x, delta)
    # Per-term second moments: one-point ≤ (d/δ)²·max h² ; a loose but valid bound for the
    # tolerance.
    hmax = float(problem.lipschitz * (torch.linalg.vector_norm(x) + delta))
    assert torch.linalg.vector_norm(one_point - exact) <= 4 * (d / delta) * hmax / math.sqrt(n)
    two = grad_estimate(
        problem, x, torch.zeros(1, dtype=torch.long), delta, m=20_000, generator=generator(13)
    ).mean
    assert torch.linalg.vector_norm(two - exact) <= 4 * math.sqrt(16 * d / 20_000 + 1e-30) * 3


def test_estimators_validate():
    problem = AbsLinear.random(3)
    x = torch.zeros(3, dtype=torch.float64)
    idx = torch.zeros(2, dtype=torch.long)
    with pytest.raises(ValueError, match="delta must be > 0"):
        grad_estimate(problem, x, idx, 0.0, generator=generator())
    with pytest.raises(ValueError, match="x must have shape"):
        grad_estimate(problem, torch.zeros(4, dtype=torch.float64), idx, 0.1, generator=generator())
    with pytest.raises(ValueError, match="m .directions per data point. must be"):
        grad_estimate(problem, x, idx, 0.1, m=0, generator=generator())
    with pytest.raises(ValueError, match="same shape"):
        diff_estimate(
            problem, x, torch.zeros(2, dtype=torch.float64), idx, 0.1, generator=generator()
        )
