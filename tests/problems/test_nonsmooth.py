"""The nonsmooth objectives: batching, gradients, chunking, Lipschitz declarations, closed forms
(docs/papers.md, ZTC §5)."""

import math

import pytest
import torch

from dpnc.problems import (
    AbsLinear,
    L1Regression,
    MaxOfAffine,
    Problem,
    RobustRegression,
    TwoLayerReLU,
)
from tests.problems import F64, NAMES, make, points
from tests.toys import generator


def uniform_ball(N: int, d: int, g: torch.Generator) -> torch.Tensor:
    u = torch.randn(N, d, generator=g, dtype=F64)
    u /= torch.linalg.vector_norm(u, dim=-1, keepdim=True)
    return u * torch.rand(N, 1, generator=g, dtype=F64) ** (1 / d)


# --- the Problem contract, for every problem ------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_batched_losses_equal_a_loop_over_points(name):
    problem = make(name)
    index = torch.tensor([min(2, problem.n - 1), 0, problem.n - 1, 0])  # unordered, repeated
    x = points(problem, len(index), 3, seed=1)
    batched = problem.losses(x, index)
    assert batched.shape == (4, 3) and batched.dtype == F64
    for i in range(len(index)):
        for j in range(3):
            one = problem.loss(
                x[i : i + 1, j : j + 1], *(t[index[i : i + 1]] for t in problem.data)
            )
            assert one.shape == (1, 1)
            torch.testing.assert_close(batched[i, j], one[0, 0], rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", NAMES)
def test_gradients_match_central_differences_and_autograd(name):
    problem = make(name)
    index = torch.tensor([0, problem.n - 1])
    x = points(problem, 2, 2, seed=2)
    g = problem.gradients(x, index)
    assert g.shape == x.shape
    # Central differences along every coordinate, all in one batched call: (b, k·d·2, d).
    h, d = 1e-6, problem.dim
    steps = h * torch.eye(d, dtype=F64)
    shifted = torch.cat(
        [x[:, :, None, :] + steps, x[:, :, None, :] - steps], dim=2
    )  # (b, k, 2d, d)
    values = problem.losses(shifted.reshape(2, -1, d), index).reshape(2, 2, 2 * d)
    fd = (values[..., :d] - values[..., d:]) / (2 * h)
    torch.testing.assert_close(g, fd, rtol=1e-6, atol=1e-6)
    # Closed forms (where a subclass has one) agree with the generic autograd route.
    torch.testing.assert_close(g, Problem.gradients(problem, x, index), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", NAMES)
def test_value_and_gradient_are_means_and_do_not_depend_on_chunk(name):
    problem = make(name)
    P = points(problem, 5, seed=3)
    all_examples = torch.arange(problem.n)
    expanded = P.expand(problem.n, *P.shape)
    mean_loss = problem.losses(expanded, all_examples).mean(0)
    mean_grad = problem.gradients(expanded, all_examples).mean(0)
    for chunk in (1, 7, problem.n + 10):
        torch.testing.assert_close(problem.value(P, chunk=chunk), mean_loss, rtol=1e-12, atol=1e-13)
        torch.testing.assert_close(
            problem.gradient(P, chunk=chunk), mean_grad, rtol=1e-12, atol=1e-13
        )
    assert problem.value(P[0]).shape == () and problem.gradient(P[0]).shape == (problem.dim,)
    torch.testing.assert_close(problem.value(P[0]), mean_loss[0], rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", NAMES)
def test_declared_lipschitz_bounds_differences_and_gradients(name):
    """|f(x, z) − f(y, z)| ≤ L‖x − y‖ for random pairs, near and far, and ‖∇f‖ ≤ L, on every
    example."""
    problem = make(name)
    L, k = problem.lipschitz, 40
    index = torch.arange(problem.n)
    x = points(problem, problem.n, k, seed=4)
    far = points(problem, problem.n, k, seed=5)
    near = x + 1e-3 * torch.randn(x.shape, generator=generator(6), dtype=F64)
    if isinstance(problem, TwoLayerReLU):  # the pair must stay in the ball where L is declared
        near *= (problem.radius / torch.linalg.vector_norm(near, dim=-1, keepdim=True)).clamp_max(
            1.0
        )
    fx = problem.losses(x, index)
    for y in (far, near):
        gap = (fx - problem.losses(y, index)).abs()
        assert torch.all(gap <= L * torch.linalg.vector_norm(x - y, dim=-1) * (1 + 1e-9) + 1e-12)
    norms = torch.linalg.vector_norm(problem.gradients(x, index), dim=-1)
    assert norms.max() <= L * (1 + 1e-12)
    assert torch.linalg.vector_norm(problem.gradient(x[0]), dim=-1).max() <= L * (1 + 1e-12)


@pytest.mark.parametrize("name", ["l1", "robust", "max-affine", "relu-hinge"])
def test_subset_keeps_the_objective_on_the_selected_data(name):
    problem = make(name)
    P = points(problem, 3, seed=7)
    index = torch.tensor([3, 1, 4, 1])
    sub = problem.subset(index)
    assert type(sub) is type(problem) and sub.n == 4 and sub.lipschitz == problem.lipschitz
    torch.testing.assert_close(sub.value(P), problem.losses(P.expand(4, 3, -1), index).mean(0))
    mask = torch.zeros(problem.n, dtype=torch.bool)
    mask[[1, 3, 4]] = True
    torch.testing.assert_close(problem.subset(mask).value(P), problem.subset([1, 3, 4]).value(P))
    torch.testing.assert_close(
        problem.subset(slice(1, 5, 2)).value(P), problem.subset([1, 3]).value(P)
    )
    assert problem.n == make(name).n  # the original is untouched


def test_gradients_work_under_no_grad():
    problem = make("relu-hinge")
    x = points(problem, 2, 3, seed=8)
    with torch.no_grad():
        g = problem.gradients(x, torch.tensor([0, 1]))
        G = problem.gradient(x[0, 0])
    torch.testing.assert_close(g, problem.gradients(x, torch.tensor([0, 1])))
    assert G.shape == (problem.dim,) and not G.requires_grad


def test_data_are_float64_and_names_print():
    for name in NAMES:
        problem = make(name)
        assert all(t.dtype == F64 for t in problem.data)
        assert type(problem).__name__ in repr(problem) and problem.name


# --- AbsLinear: the closed-form smoothing (ZTC §5, property 2) ----------------------------------


def _at(a: torch.Tensor, c: torch.Tensor, delta: float) -> torch.Tensor:
    """Points x with ⟨a, x⟩/(δ‖a‖) = c (a component orthogonal to a added, which must not
    matter)."""
    d = a.shape[0]
    e = a / torch.linalg.vector_norm(a)
    w = torch.randn(d, generator=generator(11), dtype=F64)
    w -= (w @ e) * e
    return c[:, None] * delta * e + w


C_GRID = torch.tensor([-2.0, -1.0, -0.7, -0.2, 0.0, 0.3, 0.9, 1.0, 1.5], dtype=F64)


@pytest.mark.parametrize("d", [1, 3])
def test_abs_linear_special_cases(d):
    problem = AbsLinear(torch.linspace(0.5, 2.0, d, dtype=F64))
    a, delta = problem.a, 0.3
    x = _at(a, C_GRID, delta)
    c = C_GRID.clamp(-1, 1)
    slope = c if d == 1 else (3 * c - c**3) / 2
    torch.testing.assert_close(
        problem.smoothed_gradient(x, delta), slope[:, None] * a, rtol=1e-12, atol=1e-14
    )
    if d == 1:  # E|c + s| for s ∼ U[−1, 1] is (1 + c²)/2 inside, |c| outside
        value = torch.where(C_GRID.abs() < 1, (1 + C_GRID**2) / 2, C_GRID.abs()) * a.abs() * delta
        torch.testing.assert_close(problem.smoothed_value(x, delta), value, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("d", [2, 5, 20])
def test_abs_linear_smoothing_matches_monte_carlo(d):
    """∇ĥ_δ(x) = E_v ∇h(x + δv), ĥ_δ(x) = E_v h(x + δv), v ∼ U_B: within 5 standard errors.

    The average gradient is a·s̄ with s̄ the mean of N signs, whose variance is (1 − slope²)/N.
    """
    problem, delta, N = AbsLinear.random(d, seed=d), 0.5, 20_000
    a = problem.a
    x = _at(a, C_GRID, delta)
    v = uniform_ball(N, d, generator(100 + d))
    y = x[:, None, :] + delta * v  # (9, N, d): each x at the same N ball points
    grads = problem.gradients(y.reshape(1, -1, d), torch.tensor([0])).reshape(len(x), N, d).mean(1)
    slope = problem.smoothed_gradient(x, delta) @ a / (a @ a)
    torch.testing.assert_close(
        problem.smoothed_gradient(x, delta), slope[:, None] * a, rtol=0, atol=1e-14
    )
    mc_slope = grads @ a / (a @ a)
    tol = 5 * torch.sqrt((1 - slope**2).clamp_min(0) / N) + 1e-12
    assert torch.all((mc_slope - slope).abs() <= tol), (mc_slope, slope)
    values = problem.losses(y.reshape(1, -1, d), torch.tensor([0])).reshape(len(x), N)
    tol = 5 * values.std(1) / math.sqrt(N) + 1e-12
    assert torch.all((values.mean(1) - problem.smoothed_value(x, delta)).abs() <= tol)


def test_abs_linear_smoothing_is_consistent_and_obeys_lemma_2_2():
    """∇ of the closed-form ĥ_δ is the closed-form ∇ĥ_δ; ‖∇ĥ_δ‖ ≤ L and |ĥ_δ − h| ≤ Lδ (Lemma
    2.2)."""
    problem, delta, h = AbsLinear.random(6, seed=9), 0.2, 1e-6
    x = _at(problem.a, torch.linspace(-1.4, 1.4, 15, dtype=F64), delta)
    steps = h * torch.eye(6, dtype=F64)
    fd = (
        problem.smoothed_value((x[:, None] + steps).reshape(-1, 6), delta)
        - problem.smoothed_value((x[:, None] - steps).reshape(-1, 6), delta)
    ).reshape(15, 6) / (2 * h)
    g = problem.smoothed_gradient(x, delta)
    torch.testing.assert_close(g, fd, rtol=1e-6, atol=1e-7)
    assert torch.linalg.vector_norm(g, dim=-1).max() <= problem.lipschitz * (1 + 1e-12)
    assert torch.all(
        (problem.smoothed_value(x, delta) - problem.value(x)).abs() <= problem.lipschitz * delta
    )
    assert torch.all(
        problem.smoothed_value(x, delta) >= problem.value(x) - 1e-15
    )  # Jensen: h is convex


# --- L1Regression --------------------------------------------------------------------------------


def test_l1_smoothing_is_the_mean_of_shifted_abs_linear_smoothings():
    """|⟨a, x⟩ − b| = |⟨a, x − b·a/‖a‖²⟩|, so each example is an AbsLinear at a shifted point."""
    problem, delta = L1Regression.synthetic(5, 4, noise=0.3, seed=12), 0.7
    a, b = problem.data
    x = points(problem, 6, seed=13) * 0.3
    expected_g, expected_v = torch.zeros(6, 4, dtype=F64), torch.zeros(6, dtype=F64)
    for i in range(5):
        one = AbsLinear(a[i])
        shifted = x - b[i] * a[i] / (a[i] @ a[i])
        expected_g += one.smoothed_gradient(shifted, delta) / 5
        expected_v += one.smoothed_value(shifted, delta) / 5
    for chunk in (1, 2, 10):
        torch.testing.assert_close(
            problem.smoothed_gradient(x, delta, chunk=chunk), expected_g, rtol=1e-12, atol=1e-14
        )
        torch.testing.assert_close(
            problem.smoothed_value(x, delta, chunk=chunk), expected_v, rtol=1e-12, atol=1e-14
        )


def test_l1_planted_solution_without_noise_is_the_exact_minimum():
    problem = L1Regression.synthetic(40, 5, noise=0.0, seed=14)
    assert float(problem.value(problem.x_star)) < 1e-14
    solution = problem.solve()
    assert abs(solution.value) < 1e-7
    torch.testing.assert_close(solution.x, problem.x_star, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["l1", "max-affine"])
def test_linear_programming_minimum_is_not_beaten_nearby(name):
    problem = make(name)
    solution = problem.solve()
    torch.testing.assert_close(problem.value(solution.x), torch.tensor(solution.value, dtype=F64))
    scales = torch.logspace(-4, 0, 200, dtype=F64)[:, None]
    nearby = solution.x + scales * torch.randn(200, problem.dim, generator=generator(15), dtype=F64)
    assert problem.value(nearby).min() >= solution.value - 1e-7
    if isinstance(
        problem, L1Regression
    ):  # the planted x* is feasible, so no better than the minimum
        assert problem.value(problem.x_star) >= solution.value - 1e-7


# --- RobustRegression and MaxOfAffine ------------------------------------------------------------


def test_robust_regression_outliers_and_planted_fit():
    problem = RobustRegression.synthetic(
        50, 6, outliers=0.2, noise=0.0, outlier_scale=10.0, seed=16
    )
    a, b = problem.data
    assert int(problem.outlier_mask.sum()) == 10
    residual = a @ problem.x_star - b
    assert residual[~problem.outlier_mask].abs().max() < 1e-12  # inliers fit exactly without noise
    assert residual[problem.outlier_mask].abs().min() > 0
    sub = problem.subset(torch.arange(0, 50, 2))
    torch.testing.assert_close(sub.outlier_mask, problem.outlier_mask[::2])
    # Nonconvexity: along the ray x* + t·a_i from an inlier's kink, f = log(1 + t) is strictly
    #     concave.
    i = int(torch.nonzero(~problem.outlier_mask)[0])
    t = torch.linspace(0.5, 3.0, 3, dtype=F64)
    f = problem.losses((problem.x_star + t[:, None] * a[i])[None], torch.tensor([i]))[0]
    torch.testing.assert_close(f, torch.log1p(t))
    assert f[1] > (f[0] + f[2]) / 2


def test_max_of_affine_gradient_is_the_active_row():
    problem = make("max-affine")
    x = points(problem, 3, 5, seed=17)
    index = torch.tensor([0, 5, 9])
    g = problem.gradients(x, index)
    A, c = problem.data[0][index], problem.data[1][index]
    active = (torch.einsum("bkd,bpd->bkp", x, A) + c[:, None]).argmax(-1)
    for i in range(3):
        for j in range(5):
            assert torch.equal(g[i, j], A[i, active[i, j]])


# --- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: AbsLinear(torch.zeros(3)), "nonzero"),
        (lambda: AbsLinear(torch.ones(2, 2)), "shape"),
        (lambda: AbsLinear.random(0), "d must be an integer >= 1"),
        (lambda: L1Regression.synthetic(0, 3), "n must be an integer >= 1"),
        (lambda: L1Regression.synthetic(5, 3, noise=-0.1), "noise must be"),
        (lambda: L1Regression.synthetic(5, 3, seed=1.5), "seed must be an integer"),
        (lambda: L1Regression(2 * torch.ones(3, 2), torch.zeros(3)), "norm <= 1"),
        (lambda: L1Regression(torch.zeros(3, 2), torch.zeros(4)), r"a must be \(n, d\)"),
        (lambda: RobustRegression.synthetic(5, 3, outliers=1.0), r"outliers .* \[0, 1\)"),
        (lambda: RobustRegression.synthetic(5, 3, outlier_scale=math.inf), "outlier_scale"),
        (lambda: MaxOfAffine.synthetic(5, 3, 1), "pieces must be an integer >= 2"),
        (lambda: MaxOfAffine(torch.zeros(2, 3), torch.zeros(2)), "pieces, d"),
        (lambda: TwoLayerReLU.breast_cancer(hidden=0), "hidden must be an integer >= 1"),
        (lambda: TwoLayerReLU.breast_cancer(loss="squared"), "loss must be one of"),
        (lambda: TwoLayerReLU.breast_cancer(radius=0.0), "radius must be a finite number > 0"),
        (lambda: TwoLayerReLU(torch.ones(3, 2), torch.ones(3), hidden=2), "norm <= 1"),
        (lambda: TwoLayerReLU(torch.zeros(3, 2), torch.zeros(3), hidden=2), r"\+1 or -1"),
    ],
)
def test_bad_arguments_are_refused(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_bad_calls_are_refused():
    problem = make("l1")
    x = points(problem, 2, 3)
    with pytest.raises(ValueError, match=r"x must have shape \(b, k, d\)"):
        problem.losses(x, torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"x must have shape"):
        problem.gradients(x[0], torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"index must lie in \[0, 60\)"):
        problem.losses(x, torch.tensor([0, 60]))
    with pytest.raises(ValueError, match="index must be a 1-D integer tensor"):
        problem.losses(x, torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="points must have shape"):
        problem.value(torch.zeros(3, problem.dim + 1))
    with pytest.raises(ValueError, match="chunk must be an integer >= 1"):
        problem.gradient(x[0], chunk=0)
    with pytest.raises(ValueError, match="delta must be a finite number > 0"):
        problem.smoothed_gradient(x[0], 0.0)
    with pytest.raises(ValueError, match="at least one example"):
        problem.subset(torch.tensor([], dtype=torch.long))


def test_constants_are_the_declared_public_record():
    """L0 is the declared Lipschitz constant; AbsLinear knows F* = 0; the ReLU network declares its
    ball."""
    for name in NAMES:
        assert make(name).constants.L0 == make(name).lipschitz, name
    assert AbsLinear.random(3, seed=0).constants.F_star == 0.0
    relu = TwoLayerReLU.breast_cancer(hidden=2, radius=5.0, seed=0)
    region = relu.constants.region
    assert region.radius == 5.0 and region.contains(torch.zeros(relu.dim, dtype=torch.float64))
    assert not region.contains(torch.full((relu.dim,), 5.0, dtype=torch.float64))
