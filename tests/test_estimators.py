"""dpnc.estimators: the two-point estimator (docs/papers.md, DPZero §5.9), per-example clipped
gradients by torch.func, and GRAD and DIFF (Zhang–Tran–Cutkosky Algorithms 1–2; ZTC §5 properties
1–5).

The Monte Carlo tolerances of GRAD and DIFF come from the lemmas' variance bounds: a mean of n
i.i.d. estimates with E‖g − E g‖² ≤ V lies within 4√(V/n) of its expectation (in norm) except with
probability ≤ 1/16 by Chebyshev — and in practice far less; seeds are fixed."""

import math

import pytest
import torch

from dpnc.estimators import (
    diff_estimate,
    functional_clipped_sum,
    grad_estimate,
    sphere_directions,
    two_point,
)
from dpnc.problems import Quadratic
from dpnc.problems.nonsmooth import AbsLinear, L1Regression
from dpnc.space import DIRECTIONS, FlatSpace
from tests.toys import generator

EPS64 = torch.finfo(torch.float64).eps


@pytest.fixture(scope="module")
def problem():
    return Quadratic.synthetic(8, "sqrt", n=16, seed=3)


def start(problem, seed=0):
    return torch.randn(
        problem.d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("lam", [1e-2, 1.0, 10.0])
def test_central_difference_is_exact_on_a_quadratic(problem, direction, lam):
    x0 = start(problem)
    space = FlatSpace(x0, direction)
    seed = 42
    u = space.direction(seed)
    diff = two_point(space, lambda: problem.losses_at(space.x), seed, lam)
    grads = problem.a * (x0 - problem.train)  # ∇ℓ_i(x₀) = A(x₀ − ξ_i), shape (n, d)
    exact = grads @ u  # uᵀ∇ℓ_i(x₀)
    # Rounding only: each loss has error ≤ (d+3)·ε·S with S the sum of its terms' magnitudes at x ±
    # λu, and a divides the difference of two losses by 2λ.
    x_far = x0.abs() + lam * u.abs()
    S = (
        0.5 * (x_far**2 * problem.a).sum()
        + x_far @ (problem.train * problem.a).abs().T
        + 0.5 * (problem.train**2 * problem.a).sum(-1)
    )
    tol = 2 * (problem.d + 3) * EPS64 * S / (2 * lam)
    assert torch.all((diff.a - exact).abs() <= tol)
    # The two-point "loss" is the mean loss at x₀ plus exactly λ²/2·uᵀAu on a quadratic.
    expected_loss = problem.losses_at(x0).mean() + 0.5 * lam**2 * (u**2 * problem.a).sum()
    assert float(diff.loss) == pytest.approx(float(expected_loss), rel=1e-12)
    # The space is left at x₀ − λu; update_(seed, 0) restores x₀ exactly.
    assert torch.equal(space.x, x0 - lam * u)
    space.update_(seed, 0.0)
    assert torch.equal(space.x, x0)


def test_two_point_rejects_bad_lam(problem):
    space = FlatSpace(start(problem))
    for lam in (0.0, -1e-3, math.nan):
        with pytest.raises(ValueError, match="lam must be > 0"):
            two_point(space, lambda: problem.losses_at(space.x), 1, lam)


def test_finite_difference_tends_to_the_directional_derivative():
    """DPZero §5.12: λ → 0 on a smooth non-quadratic f gives uᵀ∇f(x), with error O(λ²)."""
    x0 = torch.linspace(-1.5, 2.0, 6, dtype=torch.float64)
    space = FlatSpace(x0)
    u = space.direction(7)
    f = lambda: torch.log(torch.cosh(space.x)).sum(-1, keepdim=True)
    exact = float(torch.tanh(x0) @ u)
    errors = []
    for lam in (1e-1, 1e-2, 1e-3):
        errors.append(abs(float(two_point(space, f, 7, lam).a[0]) - exact))
        space.restore_()
    # Central differences: the error falls ~100× per 10× smaller λ (third derivative bounded).
    assert errors[1] < errors[0] / 50 and errors[2] < errors[1] / 50
    assert errors[2] < 1e-6 * abs(exact)


def monte_carlo_g(space, closure, lam, n):
    """g_λ = a·u for n direction seeds, and a, one row each."""
    rows = []
    for seed in range(n):
        a = two_point(space, closure, seed, lam).a.mean()
        rows.append(a * space.direction(seed))
        space.restore_()
    return torch.stack(rows)


N_MC = 8_000


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_estimator_is_unbiased_on_a_quadratic(problem, direction):
    x0 = start(problem, seed=1)
    space = FlatSpace(x0, direction)
    G = monte_carlo_g(space, lambda: problem.losses_at(space.x), 0.1, N_MC)
    grad = problem.gradient(x0)
    d, g2 = problem.d, float(grad @ grad)
    # Var(g_j) = E[(uᵀ∇f)² u_j²] − ∇f_j²: Gaussian ‖∇f‖² + ∇f_j², sphere d/(d+2)(2∇f_j² + ‖∇f‖²) −
    # ∇f_j².
    var = g2 + grad**2 if direction == "gaussian" else d / (d + 2) * (2 * grad**2 + g2) - grad**2
    se = (var / N_MC).sqrt()
    assert torch.all((G.mean(0) - grad).abs() <= 6 * se)
    # The empirical variance agrees with the formula (so the tolerance above is the right one); the
    # sample variance's own standard error comes from the empirical fourth central moment.
    m4 = ((G - G.mean(0)) ** 4).mean(0)
    assert torch.all((G.var(0) - var).abs() <= 6 * ((m4 - var**2) / N_MC).sqrt())


def test_estimator_second_moment_bound_on_a_smooth_non_quadratic():
    """E‖g_λ‖² ≤ 2d‖∇f‖² + ℓ²λ²d³/2 (sphere), f(x) = Σ_j log cosh(x_j), which is ℓ = 1 smooth."""
    d, ell = 6, 1.0
    x0 = torch.linspace(-1.0, 1.5, d, dtype=torch.float64)
    grad2 = float((torch.tanh(x0) ** 2).sum())
    for lam in (1e-3, 0.3, 1.0):
        space = FlatSpace(x0, "sphere")
        f = lambda s=space: torch.log(torch.cosh(s.x)).sum(-1, keepdim=True)
        G = monte_carlo_g(space, f, lam, 4_000)
        sq = (G**2).sum(-1)
        mean, se = float(sq.mean()), float(sq.std()) / math.sqrt(len(sq))
        # Even 6 standard errors above the estimate stay under the bound.
        assert mean + 6 * se <= 2 * d * grad2 + ell**2 * lam**2 * d**3 / 2
        if lam == 1e-3:
            # At small λ, E‖g‖² = d·E(uᵀ∇f)² = d‖∇f‖² (‖u‖² = d): the bound's factor 2 is slack, not
            # error.
            assert abs(mean - d * grad2) <= 6 * se


# --- per-example clipped gradients -------------------------------------------------------------


def naive_clipped_sum(problem, x, C):
    g = problem.a * (x - problem.train)
    norms = torch.linalg.vector_norm(g, dim=-1, keepdim=True)
    return (g * torch.clamp(C / norms, max=1.0)).sum(0)


@pytest.fixture(scope="module")
def big_problem():
    return Quadratic.synthetic(12, "inverse", n=100, seed=5)


def test_functional_clipped_sum_matches_the_closed_form(big_problem):
    p = big_problem
    x = start(p, seed=2)
    norms = torch.linalg.vector_norm(p.a * (x - p.train), dim=-1)
    Cs = [float(norms.quantile(q)) for q in (0.1, 0.5, 0.9)] + [float(norms.min()) / 2, math.inf]
    for C in Cs:
        g, frac, loss = functional_clipped_sum(p.loss_one(p.a), x, p.train, C, chunk=7)
        g_ref, frac_ref, loss_ref = p.clipped_gradient_sum(x, C)
        assert torch.allclose(g, g_ref, rtol=1e-11, atol=1e-13)
        assert torch.allclose(g, naive_clipped_sum(p, x, C), rtol=1e-11, atol=1e-13)
        assert float(frac) == pytest.approx(float(frac_ref), abs=1e-15)
        assert float(frac) == pytest.approx(float((norms > C).double().mean()), abs=1e-15)
        assert float(loss) == pytest.approx(float(loss_ref), rel=1e-12)
    # The thresholds cover all regimes: everything clipped, some, none (C = ∞ is the plain
    # gradient).
    g_inf, frac_inf, _ = functional_clipped_sum(p.loss_one(p.a), x, p.train, math.inf)
    assert float(frac_inf) == 0.0 and torch.allclose(
        g_inf / p.n, p.gradient(x), rtol=1e-12, atol=1e-14
    )


def test_functional_clipped_sum_per_run_threshold(big_problem):
    p = big_problem
    X = torch.stack([start(p, seed=s) for s in range(3)])
    C = torch.tensor([0.3, 1.0, 3.0], dtype=torch.float64)
    g, frac, loss = functional_clipped_sum(p.loss_one(p.a), X, p.train, C, chunk=32)
    g_ref, frac_ref, loss_ref = p.clipped_gradient_sum(X, C)
    assert g.shape == (3, p.d) and frac.shape == (3,) and loss.shape == (3,)
    assert torch.allclose(g, g_ref, rtol=1e-11, atol=1e-13)
    assert torch.allclose(frac, frac_ref, rtol=0, atol=1e-15)
    assert torch.allclose(loss, loss_ref, rtol=1e-12)
    for k in range(3):
        assert torch.allclose(g[k], naive_clipped_sum(p, X[k], float(C[k])), rtol=1e-11, atol=1e-13)
    assert len(set(frac.tolist())) > 1  # the per-run thresholds really differ in effect
    # With a batch of examples the closed form agrees as well.
    batch = torch.arange(0, 100, 3)
    g_b, _, _ = p.clipped_gradient_sum(X, C, batch)
    g_f, _, _ = functional_clipped_sum(p.loss_one(p.a), X, p.train[batch], C)
    assert torch.allclose(g_b, g_f, rtol=1e-11, atol=1e-13)


def test_functional_clipped_sum_zeroes_a_nonfinite_gradient():
    """DESIGN.md: a non-finite per-example value is replaced by 0 before clipping, so it cannot
    break the sensitivity bound: the sum stays finite with norm ≤ n·C."""
    data = torch.tensor([[1.0, 2.0], [-1.0, 0.5], [-3.0, 1.0]], dtype=torch.float64)
    # sqrt(x₀ − ξ₀) is NaN (value and gradient) where x₀ < ξ₀: example 0 only, at x = (0, 0).
    loss_one = lambda x, xi: ((x - xi) ** 2).sum() + torch.sqrt(x[0] - xi[0])
    x = torch.zeros(2, dtype=torch.float64)
    g, frac, _ = functional_clipped_sum(loss_one, x, data, 1.0)
    assert torch.all(torch.isfinite(g))
    assert float(torch.linalg.vector_norm(g)) <= 3 * 1.0  # three terms, each of norm ≤ C


def test_a_failing_closure_leaves_the_space_unperturbed(problem):
    x0 = start(problem)
    space = FlatSpace(x0)
    calls = []

    def closure():
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("out of memory in the minus pass")
        return problem.losses_at(space.x)

    with pytest.raises(RuntimeError, match="minus pass"):
        two_point(space, closure, 5, 0.1)
    assert torch.equal(space.x, x0)
    space.perturb_(6, 0.1)  # a new seed is accepted: nothing is left pending


# --- GRAD and DIFF (Zhang–Tran–Cutkosky Algorithms 1–2) -------------------------------------------


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
