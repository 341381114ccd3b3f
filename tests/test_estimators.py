"""docs/papers.md, DPZero §5.9: the two-point estimator; per-example clipped gradients by
torch.func."""

import math

import pytest
import torch

from dpnc.estimators import functional_clipped_sum, two_point
from dpnc.problems import Quadratic
from dpnc.space import DIRECTIONS, FlatSpace

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
