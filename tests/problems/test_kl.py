"""KL objectives: gradients, shapes, declared constants (KL, L0, L1, L̃1, F*), hard instances
(docs/papers.md, Menart et al. §3, §5)."""

import copy
import dataclasses
import functools
import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar

from dpnc.problems import kl
from dpnc.problems.kl import (
    KLObjective,
    LeastSquares,
    PowerGrowth,
    PseudoHuber,
    Quadratic,
    SinePL,
    check_kl,
    lower_bound_cor1,
    sample_ball,
    thm7_instance,
    thm8_instance,
)

F64 = torch.float64
TOL = 1e-9  # rounding slack where an inequality is tight


@functools.cache
def make(name: str) -> KLObjective:
    return {
        "quadratic": lambda: Quadratic(
            3, n=10, c=[1.0, -2.0, 0.5], center=[0.5, -1.5, 0.0], radius=2.0
        ),
        "power-1.5": lambda: PowerGrowth(1.5, 3, radius=2.0),
        "power-2": lambda: PowerGrowth(2.0, 2, n=100, w_star=[1.0, 1.0], radius=1.5),
        "power-3": lambda: PowerGrowth(3.0, 3, radius=2.0),
        "pseudo-huber": lambda: PseudoHuber(3, radius=5.0),
        "sine": lambda: SinePL.generate(4, 40, seed=1, radius=5.0),
        "sine-mean": lambda: SinePL.from_mean(0.5, 2, 10**9, radius=3.0),
        "ls": lambda: LeastSquares.generate(5, 60, seed=2),
        "ls-sufficient": lambda: LeastSquares.generate(5, 10**9, seed=3, sufficient=True),
        "thm7": lambda: thm7_instance(200, 16, 0.5, D=2.0, L0=1.5, seed=4),
        "thm7-paper": lambda: thm7_instance(200, 16, 0.5, D=2.0, L0=1.5, seed=4, paper=True),
        "thm8-2": lambda: thm8_instance(101, 0.2, 2.0),
        "thm8-3": lambda: thm8_instance(400, 0.05, 3.0, sign=-1),
    }[name]()


NAMES = [
    "quadratic",
    "power-1.5",
    "power-2",
    "power-3",
    "pseudo-huber",
    "sine",
    "sine-mean",
    "ls",
    "ls-sufficient",
    "thm7",
    "thm7-paper",
    "thm8-2",
    "thm8-3",
]
EXPLICIT = ["sine", "ls", "thm7", "thm7-paper", "thm8-2", "thm8-3"]
LS_PUBLIC = dict(
    row_bound=1.0, target_bound=1.0, radius=2.0, mu=0.1
)  # public inputs of LeastSquares
TIGHT = [
    "quadratic",
    "power-1.5",
    "power-2",
    "power-3",
    "pseudo-huber",
    "thm7",
    "thm8-2",
]  # γ attained in the region


def per_example_losses(obj: KLObjective, w: torch.Tensor) -> torch.Tensor:
    """f(w; x_i) for every example, written from the papers' formulas independently of the
    module."""
    if isinstance(obj, SinePL):
        return obj.x * (w**2 + 3 * torch.sin(w) ** 2).sum()
    if isinstance(obj, LeastSquares):
        return 0.5 * (obj.A @ w - obj.b) ** 2
    if isinstance(obj, kl.HuberLinear):
        r, t = torch.linalg.vector_norm(w), 4 * obj.D
        H = r**2 if r <= t else (4 * obj.D * r if obj.paper else 8 * obj.D * r - 16 * obj.D**2)
        return obj.X @ w + obj.lam * H
    if isinstance(obj, kl.TwoSidedPower):
        a, tau, v = obj.a, obj.tau, w[0]
        plus = a - v if v <= a else (v - a) ** tau
        minus = (-a - v) ** tau if v <= -a else v + a
        return torch.where(obj.y > 0, plus, minus)
    raise TypeError(obj)


def example_gradients(obj: KLObjective, w: torch.Tensor) -> torch.Tensor:
    """(k, n, d) per-example gradients at w (k, d), or (k, 1, d) for data-free /
    sufficient-statistics objectives."""
    g = obj.example_gradients(w)
    return obj.gradient(w).unsqueeze(-2) if g is None else g


# --- the interface ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_shapes_and_dtypes(name):
    obj = make(name)
    w = sample_ball(obj, 5, seed=0)
    assert w.shape == (5, obj.dim) and w.dtype == F64
    assert obj.value(w).shape == (5,) and obj.value(w[0]).shape == ()
    assert obj.gradient(w).shape == (5, obj.dim) and obj.gradient(w[0]).shape == (obj.dim,)
    assert obj.value(w).dtype == F64 and obj.gradient(w).dtype == F64
    torch.testing.assert_close(obj.value(w)[2], obj.value(w[2]), rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(obj.gradient(w)[2], obj.gradient(w[2]), rtol=1e-14, atol=1e-14)
    region = obj.constants.region
    assert region.center.shape == (obj.dim,) and region.center.dtype == F64 and region.radius > 0
    assert (
        obj.w_star.shape == (obj.dim,)
        and math.isfinite(obj.constants.F_star)
        and isinstance(obj.n, int)
    )
    g = obj.example_gradients(w[0])
    if name in EXPLICIT:
        assert g.shape == (obj.n, obj.dim) and obj.example_gradients(w).shape == (5, obj.n, obj.dim)
    else:
        assert g is None
    with pytest.raises(ValueError, match="w must have shape"):
        obj.value(torch.zeros(obj.dim + 1))


@pytest.mark.parametrize("name", NAMES)
def test_gradient_matches_autograd_and_central_differences(name):
    obj = make(name)
    w = sample_ball(obj, 16, seed=1)
    leaf = w.clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(obj.value(leaf).sum(), leaf)
    torch.testing.assert_close(obj.gradient(w), auto, rtol=1e-10, atol=1e-12)
    h, d = 1e-6, obj.dim
    steps = h * torch.eye(d, dtype=F64)
    fd = (
        obj.value((w[:, None] + steps).reshape(-1, d))
        - obj.value((w[:, None] - steps).reshape(-1, d))
    ) / (2 * h)
    torch.testing.assert_close(obj.gradient(w), fd.reshape(16, d), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", EXPLICIT)
def test_example_gradients_are_the_per_example_losses_gradients_and_average_to_the_gradient(name):
    obj = make(name)
    for w in sample_ball(obj, 4, seed=2):
        jac = torch.autograd.functional.jacobian(lambda v, obj=obj: per_example_losses(obj, v), w)
        torch.testing.assert_close(obj.example_gradients(w), jac, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(
            obj.example_gradients(w).mean(0), obj.gradient(w), rtol=1e-10, atol=1e-12
        )
        torch.testing.assert_close(
            per_example_losses(obj, w).mean(), obj.value(w), rtol=1e-10, atol=1e-12
        )


@pytest.mark.parametrize("name", NAMES)
def test_the_objective_protocol_per_example_methods(name):
    """losses/gradients (b, k, d) → (b, k) / (b, k, d): the per-example closed forms for explicit
    data, F itself for a data-free objective (n copies of one example), and a clear refusal for
    sufficient statistics."""
    obj = make(name)
    x = sample_ball(obj, 6, seed=21).reshape(2, 3, obj.dim)
    index = torch.tensor([0, obj.n - 1])
    if name in EXPLICIT:
        want = torch.stack(
            [per_example_losses(obj, p)[int(i)] for row, i in zip(x, index) for p in row]
        ).reshape(2, 3)
        torch.testing.assert_close(obj.losses(x, index), want, rtol=1e-12, atol=1e-14)
        grads = torch.stack([obj.example_gradients(row)[:, int(i)] for row, i in zip(x, index)])
        torch.testing.assert_close(obj.gradients(x, index), grads)
    elif isinstance(obj, kl.DataFree):
        torch.testing.assert_close(obj.losses(x, index), obj.value(x.reshape(6, -1)).reshape(2, 3))
        torch.testing.assert_close(
            obj.gradients(x, index), obj.gradient(x.reshape(6, -1)).reshape(2, 3, -1)
        )
    else:
        with pytest.raises(NotImplementedError, match="per-example"):
            obj.losses(x, index)


# --- the declared constants ---------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_kl_inequality_holds_on_the_region(name):
    obj = make(name)
    for radial in ("volume", "uniform"):
        assert check_kl(obj, sample_ball(obj, 2000, seed=3, radial=radial)) <= 1 + TOL


@pytest.mark.parametrize("name", TIGHT)
def test_kl_checker_fails_for_a_too_small_gamma(name):
    obj = copy.copy(make(name))
    points = torch.cat([sample_ball(obj, 2000, seed=4, radial=r) for r in ("volume", "uniform")])
    assert check_kl(obj, points) > 0.95  # γ is (nearly) attained: the declared constant is tight
    obj.constants = dataclasses.replace(obj.constants, gamma=obj.constants.gamma * 0.97)
    assert check_kl(obj, points) > 1


@pytest.mark.parametrize("name", NAMES)
def test_per_example_lipschitz_smoothness_and_weak_convexity_bounds_hold(name):
    obj = make(name)
    w, v = sample_ball(obj, 300, seed=5), sample_ball(obj, 300, seed=6, radial="uniform")
    gw, gv = example_gradients(obj, w), example_gradients(obj, v)  # (k, n, d)
    norms = torch.linalg.vector_norm(gw, dim=-1)
    assert float(norms.max()) <= obj.constants.L0 * (1 + TOL)
    diff = w - v
    dist = torch.linalg.vector_norm(diff, dim=-1)[:, None]
    if obj.constants.L1 is not None:
        assert (
            torch.linalg.vector_norm(gw - gv, dim=-1) <= obj.constants.L1 * dist * (1 + TOL) + 1e-12
        ).all()
    if (
        obj.constants.weak_convexity is not None
    ):  # ⟨∇f(w) − ∇f(v), w − v⟩ ≥ −L̃1‖w − v‖²  ⟺  f + (L̃1/2)‖·‖² convex
        inner = ((gw - gv) * diff[:, None, :]).sum(-1)
        assert (inner >= -obj.constants.weak_convexity * dist**2 - 1e-10).all()
        assert obj.constants.weak_convexity > 0


@pytest.mark.parametrize("name", ["quadratic", "power-1.5", "power-3", "pseudo-huber", "thm8-2"])
def test_lipschitz_constant_is_attained_near_the_boundary(name):
    obj = make(name)
    norms = torch.linalg.vector_norm(example_gradients(obj, sample_ball(obj, 4000, seed=7)), dim=-1)
    assert float(norms.max()) >= 0.95 * obj.constants.L0


def test_sine_is_not_convex_so_its_weak_convexity_constant_is_needed():
    obj = make("sine-mean")
    w = torch.full((1, 2), math.pi / 2, dtype=F64)  # g″ = 2 + 6cos 2w = −4 here
    v = w + 1e-3
    inner = float(((obj.gradient(w) - obj.gradient(v)) * (w - v)).sum())
    assert (
        inner < 0 and inner >= -obj.constants.weak_convexity * float(((w - v) ** 2).sum()) * 1.001
    )


@pytest.mark.parametrize("name", NAMES)
def test_w_star_is_a_minimiser_with_value_F_star(name):
    obj = make(name)
    assert abs(float(obj.value(obj.w_star)) - obj.constants.F_star) <= 1e-12 * max(
        1.0, abs(obj.constants.F_star)
    )
    if name not in ("thm8-2", "thm8-3"):  # the thm8 minimiser sits at a kink
        assert float(torch.linalg.vector_norm(obj.gradient(obj.w_star))) <= 1e-10
    assert float(obj.value(sample_ball(obj, 2000, seed=8)).min()) >= obj.constants.F_star - 1e-12


def test_least_squares_minimum_matches_numpy_lstsq():
    obj = make("ls")
    A, b = obj.A.numpy(), obj.b.numpy()
    w, *_ = np.linalg.lstsq(A, b, rcond=None)
    np.testing.assert_allclose(obj.w_star.numpy(), w, rtol=1e-10, atol=1e-12)
    assert obj.constants.F_star == pytest.approx(0.5 * np.mean((A @ w - b) ** 2), rel=1e-10)
    # the balanced design fixes the spectrum: its declared μ = ⌊m/d⌋/m is the data's smallest
    # eigenvalue
    mu = np.linalg.eigvalsh(A.T @ A / len(b)).min()
    assert obj.mu == pytest.approx(mu, rel=1e-10) and obj.mu == (60 // 5) / 60
    assert obj.constants.gamma == pytest.approx(1 / math.sqrt(2 * mu), rel=1e-10)


def test_least_squares_kl_is_tight_along_the_smallest_eigenvector():
    obj = make("ls")
    v = torch.linalg.eigh(obj.H)[1][:, 0]
    points = obj.w_star + torch.linspace(-1, 1, 11, dtype=F64)[:, None] * v
    assert check_kl(obj, points) == pytest.approx(1.0, rel=1e-8)


# --- spec numbers -------------------------------------------------------------------------------


def test_sine_constant_2_849():
    """sup_t (t² + 3sin²t)/(2t + 3sin 2t)² ≈ 2.849 (Menart et al. §5): a grid over [0, 50], then a
    bounded search."""
    t = np.linspace(1e-4, 50, 500_001)
    ratio = (t**2 + 3 * np.sin(t) ** 2) / (2 * t + 3 * np.sin(2 * t)) ** 2
    t0 = t[ratio.argmax()]
    best = minimize_scalar(
        lambda s: -(s**2 + 3 * np.sin(s) ** 2) / (2 * s + 3 * np.sin(2 * s)) ** 2,
        bounds=(t0 - 1e-3, t0 + 1e-3),
        method="bounded",
        options={"xatol": 1e-12},
    )
    assert -best.fun == pytest.approx(2.8485, abs=1e-4)  # Menart et al. §5 rounds it to 2.849
    assert kl.SINE_PL_RATIO >= -best.fun and kl.SINE_PL_RATIO - (-best.fun) < 1e-9
    assert math.sqrt(kl.SINE_PL_RATIO) == pytest.approx(1.69, abs=5e-3)  # γ for x̄ = 1
    # The declared γ is attained: d = 1 on a grid through the argmax (x̄ = 1).
    obj = SinePL.from_mean(1.0, 1, 1, radius=3.0)
    assert check_kl(obj, torch.linspace(-3, 3, 60_001, dtype=F64)[:, None]) == pytest.approx(
        1.0, abs=1e-6
    )


def test_sine_gamma_comes_from_the_domain_not_the_data():
    """γ² = s/x_low (x_low the domain's lower bound), valid for every dataset of the domain: F/‖∇F‖²
    ≤ s/x̄."""
    obj = make("sine")
    assert obj.constants.gamma**2 == pytest.approx(
        kl.SINE_PL_RATIO / 0.1, rel=1e-14
    )  # generate's domain [0.1, 1]
    assert obj.constants.gamma**2 >= kl.SINE_PL_RATIO / float(obj.x.mean())
    assert obj.constants.L1 == 8.0 and obj.constants.weak_convexity == 4.0  # x_bound = 1


@pytest.mark.parametrize("R, gamma", [(1, 0.59), (5, 4.18), (10, 9.10)])
def test_pseudo_huber_gamma_matches_the_spec(R, gamma):
    obj = PseudoHuber(2, radius=float(R))
    assert obj.constants.gamma == pytest.approx(gamma, abs=0.005)
    assert kl.pseudo_huber_gamma(R) == obj.constants.gamma
    boundary = (
        sample_ball(obj, 200, seed=9)
        / torch.linalg.vector_norm(sample_ball(obj, 200, seed=9), dim=-1, keepdim=True)
        * R
    )
    assert check_kl(obj, boundary) == pytest.approx(
        1.0, rel=1e-12
    )  # attained on the sphere ‖w‖ = R


@pytest.mark.parametrize("kappa, tau", [(1.5, 3.0), (2.0, 2.0), (3.0, 1.5)])
def test_power_growth_constants(kappa, tau):
    R = 2.0
    obj = PowerGrowth(kappa, 2, radius=R)
    assert (
        obj.tau == tau
        and obj.constants.gamma == 1 / tau
        and obj.constants.L0 == pytest.approx(tau * R ** (tau - 1))
    )
    assert obj.constants.L1 == (
        pytest.approx(tau * (tau - 1) * R ** (tau - 2)) if tau >= 2 else None
    )
    w = sample_ball(obj, 500, seed=10)
    gap = obj.value(w)
    bound = (obj.constants.gamma * torch.linalg.vector_norm(obj.gradient(w), dim=-1)) ** kappa
    torch.testing.assert_close(gap, bound, rtol=1e-12, atol=1e-14)  # exactly (1/τ, κ)-KL: equality
    assert obj.constants.weak_convexity == pytest.approx(tau**2 * R ** (tau - 2) / 32)


# --- hard instances ------------------------------------------------------------------------------


def test_thm7_huber_correction_is_c1_and_the_paper_version_is_not():
    ours, paper = make("thm7"), make("thm7-paper")
    u = sample_ball(ours, 3, seed=12) - ours.constants.region.center
    u = u / torch.linalg.vector_norm(u, dim=-1, keepdim=True)
    t = 4 * ours.D
    inside, outside = u * (t - 1e-9), u * (t + 1e-9)
    torch.testing.assert_close(ours.gradient(inside), ours.gradient(outside), rtol=1e-6, atol=1e-6)
    jump = torch.linalg.vector_norm(paper.gradient(outside) - paper.gradient(inside), dim=-1)
    assert torch.allclose(jump, torch.full((3,), 4 * paper.lam * paper.D, dtype=F64), rtol=1e-6)
    w = sample_ball(ours, 100, seed=13)
    torch.testing.assert_close(ours.value(w), paper.value(w))  # equal inside the region
    far = u * 3 * t
    assert (ours.value(far) > paper.value(far)).all()


# --- least squares: explicit and sufficient-statistics forms ------------------------------------


def test_sufficient_statistics_equal_the_explicit_data():
    explicit = make("ls")
    for suff in (
        explicit.sufficient(),
        explicit.sufficient(explicit.n * 1000),
        LeastSquares.from_statistics(
            explicit.H,
            explicit.q,
            explicit.s,
            explicit.n,
            row_bound=1.0,
            target_bound=explicit.target_bound,
            radius=explicit.constants.region.radius,
            mu=explicit.mu,
        ),
    ):
        assert suff.example_gradients(explicit.w_star) is None
        w = sample_ball(explicit, 50, seed=14)
        torch.testing.assert_close(suff.gradient(w), explicit.gradient(w), rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(suff.value(w), explicit.value(w), rtol=1e-12, atol=1e-14)
        mine, theirs = suff.constants, explicit.constants
        assert (mine.gamma, mine.L0, mine.L1) == pytest.approx((theirs.gamma, theirs.L0, theirs.L1))
    # ... and the gradient from statistics equals the mean of the explicit per-example gradients
    torch.testing.assert_close(
        explicit.sufficient().gradient(w), explicit.example_gradients(w).mean(1)
    )
    assert explicit.sufficient(explicit.n * 1000).n == explicit.n * 1000


def test_generated_sufficient_statistics_are_a_replicated_sample():
    big = make("ls-sufficient")
    assert big.n == 10**9 and big.example_gradients(big.constants.region.center) is None
    sample = LeastSquares.generate(5, 1000, seed=3)  # the largest divisor of 1e9 that is <= 1000
    torch.testing.assert_close(big.H, sample.H)
    torch.testing.assert_close(big.q, sample.q)
    w = sample_ball(big, 10, seed=15)
    torch.testing.assert_close(big.gradient(w), sample.gradient(w))


# --- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: Quadratic(0), "dim must be an integer >= 1"),
        (lambda: Quadratic(2, n=0), "n must be an integer >= 1"),
        (lambda: Quadratic(2, radius=-1.0), "radius must be a finite number > 0"),
        (lambda: Quadratic(2, c=[1.0]), r"c must be a finite vector of shape \(2,\)"),
        (lambda: PowerGrowth(1.0, 2), "kappa must be a finite number > 1"),
        (
            lambda: PowerGrowth(2.0, 2, weak_convexity=-1.0),
            "weak_convexity must be a finite number >= 0",
        ),
        (lambda: PseudoHuber(2, center=[0.0]), "center must be a finite vector"),
        (
            lambda: SinePL(torch.tensor([0.5, 1.5]), 2, x_low=0.1),
            r"x must be a non-empty vector with values in \[x_low",
        ),
        (lambda: SinePL(torch.tensor([0.05]), 2, x_low=0.1), "x must be"),
        (lambda: SinePL(torch.tensor([0.5]), 2, x_low=2.0), "x_low must be"),
        (lambda: SinePL.from_mean(2.0, 2, 10), "x_mean must be in"),
        (lambda: LeastSquares(torch.ones(3, 2), torch.ones(2), **LS_PUBLIC), "A must be"),
        (
            lambda: LeastSquares(torch.ones(3, 2), torch.ones(3), **LS_PUBLIC),
            "the data must lie in the domain",
        ),
        (
            lambda: LeastSquares(torch.ones(3, 2) / 2, torch.ones(3), **(LS_PUBLIC | dict(mu=0.0))),
            "mu must be a finite number > 0",
        ),
        (
            lambda: LeastSquares.from_statistics(
                torch.eye(2), torch.zeros(2), 0.5, 10, **LS_PUBLIC
            ),
            "tr H <= row_bound",
        ),
        (
            lambda: LeastSquares.from_statistics(
                -torch.eye(2), torch.zeros(2), 0.5, 10, **(LS_PUBLIC | dict(row_bound=9.0))
            ),
            "positive semidefinite",
        ),
        (lambda: LeastSquares.generate(5, 60).sufficient(61), "multiple"),
        (lambda: LeastSquares.generate(50, 10**9 + 7, sufficient=True), "sample must divide"),
        (lambda: thm7_instance(10, 4, 0.0), "epsilon must be a finite number > 0"),
        (lambda: thm8_instance(10, 0.05, 2.0), "p = 1/"),
        (lambda: thm8_instance(100, 0.5, 2.0, sign=0), "sign must be"),
        (lambda: lower_bound_cor1(10, 2, 0.0, 1.0, 1.0, 2.0), "rho must be"),
        (lambda: sample_ball(Quadratic(2), 5, radial="edge"), "radial must be"),
    ],
)
def test_bad_arguments_raise_clear_errors(build, message):
    with pytest.raises(ValueError, match=message):
        build()


# --- public constants -----------------------------------------------------------------------------
#
# The algorithms read γ, κ, L0, L1, L̃1 and the region as *public* inputs: their schedules and noise are built from
# them. An objective built from private data must therefore declare them from the data domain and the user's
# choices, never from the data; replacing one example must leave every one of them unchanged.


def test_least_squares_refuses_to_read_its_constants_off_the_data():
    A, b = LeastSquares.generate(3, 30, seed=0).A, LeastSquares.generate(3, 30, seed=0).b
    for name in LS_PUBLIC:
        with pytest.raises(ValueError, match=f"{name} must be"):
            LeastSquares(A, b, **{k: v for k, v in LS_PUBLIC.items() if k != name})
        with pytest.raises(ValueError, match=f"{name} must be"):
            LeastSquares.from_statistics(
                A.T @ A / 30,
                A.T @ b / 30,
                float(b @ b) / 30,
                30,
                **{k: v for k, v in LS_PUBLIC.items() if k != name},
            )


def test_sine_refuses_to_read_its_constants_off_the_data():
    with pytest.raises(ValueError, match="x_low must be"):
        SinePL(torch.tensor([0.5, 0.7]), 2)


def _neighbours(name: str) -> tuple[KLObjective, KLObjective]:
    """An objective on a dataset and on that dataset with one example replaced, adversarially (the
    replacement moves the data statistics the old code read its constants from: the smallest
    eigenvalue, w*, the mean, the label imbalance)."""
    if name == "ls":
        base = LeastSquares.generate(4, 40, seed=5)
        A, b = base.A.clone(), base.b.clone()
        v = torch.linalg.eigh(base.H)[1][
            :, 0
        ]  # add mass along the weakest direction, with an extreme target
        A[0], b[0] = v, 1.4
        public = dict(row_bound=1.0, target_bound=1.4, radius=2.0, mu=0.05)
        return LeastSquares(base.A, base.b, **public), LeastSquares(A, b, **public)
    if name == "ls-statistics":
        one, two = _neighbours("ls")
        public = dict(row_bound=1.0, target_bound=1.4, radius=2.0, mu=0.05)
        return tuple(LeastSquares.from_statistics(f.H, f.q, f.s, f.n, **public) for f in (one, two))
    if name == "sine":
        base = SinePL.generate(3, 30, seed=6, low=0.1)
        x = base.x.clone()
        x[0] = 0.1  # the smallest value of the domain: the mean drops
        return base, SinePL(x, 3, x_low=0.1)
    if name == "thm7":
        base = thm7_instance(50, 9, 0.5, D=1.0, L0=1.0, seed=7)
        X = base.X.clone()
        X[0] = -X[0]
        return base, kl.HuberLinear(X, base.lam, base.D, base.L0_data, base.N)
    if name == "thm8":
        base = thm8_instance(400, 0.05, 3.0)
        y = base.y.clone()
        y[-1] = -y[-1]  # one more majority label: the imbalance p̂ grows
        return base, kl.TwoSidedPower(y, base.a, base.constants.kappa, base.p)
    raise KeyError(name)


PUBLIC = ("L0", "L1", "weak_convexity", "gamma", "kappa")


@pytest.mark.parametrize("name", ["ls", "ls-statistics", "sine", "thm7", "thm8"])
def test_neighbouring_datasets_declare_identical_public_constants(name):
    one, two = _neighbours(name)
    assert (one.n, one.dim) == (two.n, two.dim)
    assert [getattr(one.constants, k) for k in PUBLIC] == [
        getattr(two.constants, k) for k in PUBLIC
    ]
    assert one.constants.region.radius == two.constants.region.radius
    assert torch.equal(one.constants.region.center, two.constants.region.center)
    # ... while the data did change (the gradient inside the region)
    region = one.constants.region
    probe = region.center + 0.5 * region.radius * torch.ones(one.dim, dtype=F64) / math.sqrt(
        one.dim
    )
    assert not torch.allclose(one.gradient(probe), two.gradient(probe))


@pytest.mark.parametrize("name", ["ls", "sine", "thm8"])
def test_declared_constants_still_hold_for_the_neighbour(name):
    """The constants are declared for the whole domain, so the KL and Lipschitz claims hold for both
    datasets (least squares: the declared μ = 0.05 is below both datasets' smallest eigenvalue)."""
    for obj in _neighbours(name):
        assert check_kl(obj, sample_ball(obj, 2000, seed=16)) <= 1 + TOL
        g = example_gradients(obj, sample_ball(obj, 300, seed=17))
        assert float(torch.linalg.vector_norm(g, dim=-1).max()) <= obj.constants.L0 * (1 + TOL)


def test_least_squares_per_example_values_read_only_the_rows_asked_for():
    """LeastSquares.losses/gradients (row-wise, O(b)) equal the generic all-rows path of KLObjective
    (O(b·n)), and an index outside [0, n) or sufficient statistics are refused as before."""
    from dpnc.problems.kl import LeastSquares
    from dpnc.problems.kl_objective import KLObjective

    f = LeastSquares.generate(7, 3000, seed=0, noise=0.05)
    index = torch.randperm(f.n, generator=torch.Generator().manual_seed(1))[:50]
    x = torch.randn(50, 3, 7, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    for mine, generic in ((f.losses, KLObjective.losses), (f.gradients, KLObjective.gradients)):
        f._example_losses = lambda p: 0.5 * (p @ f.A.T - f.b) ** 2  # the all-rows reference
        torch.testing.assert_close(mine(x, index), generic(f, x, index), rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="index must lie in"):
        f.losses(x[:1], torch.tensor([f.n]))
    with pytest.raises(NotImplementedError, match="keeps no per-example data"):
        LeastSquares.generate(7, 3000, seed=0, noise=0.05, sufficient=True).gradients(x, index)
