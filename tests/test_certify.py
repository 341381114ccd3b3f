"""Goldstein-stationarity certificate (docs/papers.md, ZTC §1): closed forms, an independent solver,
validation.

Facts used:
- h(x) = ‖x‖ with ‖x‖ = R > δ: the gradients y/‖y‖, y ∈ B(x, δ), fill the open spherical cap of unit
  vectors within angle θ = asin(δ/R) of x̂. Every u in the cap has ⟨u, x̂⟩ > cos θ, so every convex
  combination p has ‖p‖ ≥ ⟨p, x̂⟩ ≥ cos θ; the centroid of the cap's rim circle is cos θ·x̂. Hence
  ‖∂h(x)‖_δ = cos θ = √(1 − (δ/R)²) (d ≥ 2). The rim is the gradients at the tangent points
  y = √(R² − δ²)(cos θ x̂ ± sin θ e), e ⊥ x̂, which lie on the sphere ‖y − x‖ = δ.
- h(x) = ‖x‖ with ‖x‖ < δ: the ball contains a ball around 0, so the gradients cover every direction
  and their hull contains 0.
- h(x) = |x_1|: gradients ±e_1; the value is 0 if the ball meets both sides of {x_1 = 0}, else 1.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from scipy.optimize import brentq, minimize

import dpnc.certify as certify
from dpnc.certify import (
    Certificate,
    goldstein_certificate,
    min_norm_convex_combination,
    uniform_ball,
)

DT = torch.float64


def norm_gradient(y: torch.Tensor) -> torch.Tensor:
    return y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)


def abs_first_gradient(y: torch.Tensor) -> torch.Tensor:
    g = torch.zeros_like(y)
    g[:, 0] = torch.sign(y[:, 0])
    return g


def random_unit(d: int, seed: int) -> torch.Tensor:
    v = torch.randn(d, generator=torch.Generator().manual_seed(seed), dtype=DT)
    return v / v.norm()


def tangent_points(x: torch.Tensor, delta: float) -> torch.Tensor:
    """The 2(d−1) tangent points of the cone from 0 to the sphere ‖y − x‖ = δ along an orthonormal
    basis of x̂^⊥."""
    R, d = float(x.norm()), x.shape[0]
    xhat = x / R
    Q, _ = torch.linalg.qr(torch.cat([xhat[:, None], torch.eye(d, dtype=DT)], dim=1))
    E = Q[:, 1:d].T  # (d−1, d), orthonormal, ⊥ x̂
    theta = math.asin(delta / R)
    rho = math.sqrt(R**2 - delta**2)
    return torch.cat([rho * (math.cos(theta) * xhat + s * math.sin(theta) * E) for s in (1, -1)])


def check_certificate(c: Certificate, x: torch.Tensor) -> None:
    """The invariants every certificate has: weights on the simplex, points in the ball, bound = ‖Σ
    w_i g_i‖."""
    k = c.points.shape[0]
    assert c.weights.shape == (k,) and c.gradients.shape == c.points.shape
    assert (c.weights >= 0).all() and abs(c.weights.sum() - 1) < 1e-12
    assert torch.equal(c.points[0], x)
    dist = torch.linalg.vector_norm(c.points - x, dim=-1)
    assert float(dist.max()) <= c.radius * (1 + 1e-12)
    combo = torch.as_tensor(c.weights) @ c.gradients
    assert c.bound == pytest.approx(float(combo.norm()), rel=1e-12, abs=1e-15)
    # never worse than ZTC §1's practical certificate, the plain average
    assert c.bound <= float(c.gradients.mean(0).norm()) + 1e-12


# --- h(x) = ‖x‖ -----------------------------------------------------------------------------------


@pytest.mark.parametrize("d, R, delta", [(2, 1.0, 0.5), (5, 2.0, 0.7), (12, 1.0, 0.99)])
def test_norm_far_from_kink_tangent_points_give_exact_value(d, R, delta):
    x = R * random_unit(d, seed=d)
    exact = math.sqrt(1 - (delta / R) ** 2)
    c = goldstein_certificate(
        norm_gradient,
        x,
        delta,
        points=tangent_points(x, delta),
        samples=200,
        generator=torch.Generator().manual_seed(1),
    )
    check_certificate(c, x)
    assert c.bound == pytest.approx(exact, abs=1e-12)


def test_norm_far_from_kink_random_samples_bound_from_above():
    """d = 2, R = 1, δ = ½ (θ = 30°), only x and n uniform samples.

    Tolerance: a sample y has gradient angle ≥ θ − α iff it lies beyond the line through 0 at angle
    θ − α, a circular segment of the disc of height h = δ − R sin(θ − α), i.e. with probability p(α)
    = [δ² acos(1 − h/δ) − (δ − h)√(2δh − h²)] / (πδ²). If some sample lies beyond each of the two
    lines (angles ±(θ − α)), the hull holds a chord between unit vectors at angles a, −b with (a +
    b)/2 ≥ θ − α, whose midpoint has norm ≤ cos(θ − α). That fails with probability ≤ 2(1 − p)^n; we
    take α with 2(1 − p(α))^n = 1e-9. The lower side is exact: the bound is an upper bound."""
    R, delta, n = 1.0, 0.5, 4000
    theta = math.asin(delta / R)
    exact = math.cos(theta)

    def p(alpha):
        h = delta - R * math.sin(theta - alpha)
        area = delta**2 * math.acos(1 - h / delta) - (delta - h) * math.sqrt(2 * delta * h - h * h)
        return area / (math.pi * delta**2)

    p_needed = 1 - (1e-9 / 2) ** (1 / n)
    alpha = brentq(lambda a: p(a) - p_needed, 1e-9, theta)
    tol = math.cos(theta - alpha) - exact
    assert 0.005 < tol < 0.02  # a meaningful check, not a vacuous one

    for seed in range(3):
        x = R * random_unit(2, seed=seed)
        c = goldstein_certificate(
            norm_gradient, x, delta, samples=n, generator=torch.Generator().manual_seed(seed)
        )
        check_certificate(c, x)
        assert exact - 1e-12 <= c.bound <= exact + tol


@pytest.mark.parametrize("d", [2, 3, 8])
def test_norm_near_kink_bound_is_zero(d):
    """‖x‖ = 0.3 < δ = 0.5: the hull of the sampled gradients contains 0.

    Justification in d = 3 (the others are easier or similar): B(x, δ) ⊃ B(0, 0.2), which receives
    on average n(0.2/0.5)^d = 64 of n = 1000 samples, with uniform directions; by Wendel's theorem m
    uniform directions in R^d all lie in a half-space with probability 2^{1−m} Σ_{j<d} C(m−1, j),
    tiny."""
    x = 0.3 * random_unit(d, seed=10 + d)
    c = goldstein_certificate(
        norm_gradient, x, 0.5, samples=1000, generator=torch.Generator().manual_seed(d)
    )
    check_certificate(c, x)
    assert c.bound <= 1e-12
    assert float(c.gradients.mean(0).norm()) > 0.1  # the plain average would not certify anything


# --- h(x) = |x_1| ---------------------------------------------------------------------------------


@pytest.mark.parametrize("x1", [0.2, -0.2, 0.0])
def test_abs_near_kink_bound_is_zero(x1):
    """|x_1| = 0.2δ < δ in d = 10: a sample has y_1 on the other side with probability ≈ 0.27 each,
    so all 64 miss it with probability ≈ 0.73^64 ≈ 2e-9."""
    d, delta = 10, 1.0
    x = torch.zeros(d, dtype=DT)
    x[0] = x1 * delta
    x[1:] = torch.linspace(-1, 1, d - 1, dtype=DT)
    c = goldstein_certificate(
        abs_first_gradient, x, delta, samples=64, generator=torch.Generator().manual_seed(0)
    )
    check_certificate(c, x)
    assert c.bound <= 1e-15


@pytest.mark.parametrize("x1", [1.5, -3.0, 1.0 + 1e-9])
def test_abs_far_from_kink_bound_is_exactly_one(x1):
    d = 10
    x = torch.zeros(d, dtype=DT)
    x[0] = x1
    c = goldstein_certificate(
        abs_first_gradient, x, 1.0, samples=256, generator=torch.Generator().manual_seed(0)
    )
    check_certificate(c, x)
    assert c.bound == pytest.approx(1.0, abs=1e-14)


def test_given_points_are_used_and_boundary_points_allowed():
    x = torch.tensor([0.5, 0.0], dtype=DT)
    # (−0.5, 0) is on the sphere ‖y − x‖ = 1 and on the other side of the kink
    c = goldstein_certificate(abs_first_gradient, x, 1.0, points=[[-0.5, 0.0]], samples=0)
    assert c.points.shape == (2, 2)
    assert c.bound <= 1e-15
    assert c.weights == pytest.approx([0.5, 0.5], abs=1e-15)


def test_default_generator_is_reproducible_and_generator_changes_samples():
    x = torch.tensor([0.3, -0.1, 0.2], dtype=DT)
    a = goldstein_certificate(norm_gradient, x, 0.2)
    b = goldstein_certificate(norm_gradient, x, 0.2)
    c = goldstein_certificate(norm_gradient, x, 0.2, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a.points, b.points) and a.bound == b.bound
    assert a.points.shape == (65, 3) and not torch.equal(a.points, c.points)


def test_str_reports_bound_and_radius():
    x = torch.tensor([2.0, 0.0], dtype=DT)
    c = goldstein_certificate(norm_gradient, x, 0.5, samples=8)
    s = str(c)
    assert f"{c.bound:.6g}" in s and "0.5" in s and "of 9 gradients" in s


def test_uniform_ball_is_uniform():
    """‖U‖^d is U[0, 1] for U uniform in the unit ball: mean ½, variance 1/12; 20000 draws give a
    standard error of 0.002 on the mean, tested at 5 standard errors. Directions average to 0."""
    n, d = 20_000, 4
    u = uniform_ball(n, d, torch.Generator().manual_seed(0))
    r = torch.linalg.vector_norm(u, dim=-1)
    assert float(r.max()) < 1
    assert abs(float((r**d).mean()) - 0.5) < 5 * math.sqrt(1 / 12 / n)
    assert float((u / r[:, None]).mean(0).norm()) < 5 * math.sqrt(1 / n)


# --- min_norm_convex_combination ------------------------------------------------------------------


def segment_distance(a: np.ndarray, b: np.ndarray) -> float:
    v = b - a
    t = min(max(-float(a @ v) / float(v @ v), 0.0), 1.0)
    return float(np.linalg.norm(a + t * v))


def check_simplex(G, norm, w):
    G = np.asarray(G, dtype=np.float64)
    assert w.shape == (G.shape[0],) and w.dtype == np.float64
    assert (w >= 0).all() and abs(w.sum() - 1) < 1e-12
    s = (
        float(np.abs(G).max()) or 1.0
    )  # scaled, so that tiny or huge G neither underflows nor overflows
    assert norm == pytest.approx(s * float(np.linalg.norm((G / s).T @ w)), rel=1e-12, abs=1e-15 * s)


@pytest.mark.parametrize("seed", range(5))
def test_segment_matches_closed_form(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(4) + 1, rng.standard_normal(4)
    norm, w = min_norm_convex_combination(np.stack([a, b]))
    check_simplex(np.stack([a, b]), norm, w)
    assert norm == pytest.approx(segment_distance(a, b), abs=1e-13)


def test_segment_endpoint_and_interior():
    # interior: the nearest point of [(−1, 1), (1, 1)] is (0, 1), halfway
    norm, w = min_norm_convex_combination(np.array([[-1.0, 1.0], [1.0, 1.0]]))
    assert norm == pytest.approx(1.0, abs=1e-15) and w == pytest.approx([0.5, 0.5], abs=1e-15)
    # endpoint: [(1, 1), (2, 3)] is nearest 0 at (1, 1)
    norm, w = min_norm_convex_combination(np.array([[1.0, 1.0], [2.0, 3.0]]))
    assert norm == pytest.approx(math.sqrt(2), abs=1e-15) and w == pytest.approx(
        [1.0, 0.0], abs=1e-15
    )


def test_duplicated_points_change_nothing():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(6) + 0.5, rng.standard_normal(6)
    G = np.stack([a, a, b, b, a, b, b])
    norm, w = min_norm_convex_combination(G)
    check_simplex(G, norm, w)
    assert norm == pytest.approx(segment_distance(a, b), abs=1e-13)


@pytest.mark.parametrize("d", [1, 2, 5, 30])
def test_simplex_containing_zero(d):
    """v_1..v_d random and v_{d+1} = −cΣv_i: 0 = Σ w_i v_i with w = (c, …, c, 1)/(1 + dc),
    unique."""
    rng = np.random.default_rng(d)
    V = rng.standard_normal((d, d))
    c = 0.7
    G = np.vstack([V, -c * V.sum(0)])
    norm, w = min_norm_convex_combination(G)
    check_simplex(G, norm, w)
    assert norm < 1e-13
    assert w == pytest.approx(np.r_[np.full(d, c), 1.0] / (1 + d * c), abs=1e-10)


def test_single_point_and_zero_points():
    g = np.array([[3.0, -4.0]])
    norm, w = min_norm_convex_combination(g)
    assert norm == 5.0 and list(w) == [1.0]
    norm, w = min_norm_convex_combination(np.zeros((3, 4)))
    check_simplex(np.zeros((3, 4)), norm, w)
    assert norm == 0.0


def test_one_dimension():
    norm, w = min_norm_convex_combination(np.array([[3.0], [-1.0], [2.0]]))
    assert norm < 1e-15
    assert 3 * w[0] - w[1] + 2 * w[2] == pytest.approx(0, abs=1e-15)
    norm, w = min_norm_convex_combination(np.array([[3.0], [1.0], [2.0]]))
    assert norm == pytest.approx(1.0, abs=1e-15) and w == pytest.approx([0, 1, 0], abs=1e-15)


def test_torch_input_and_extreme_scales():
    rng = np.random.default_rng(7)
    G = (
        rng.standard_normal((20, 6)) + 3
    )  # 0 is far outside the hull, so the norm is not rounding noise
    norm, w = min_norm_convex_combination(G)
    assert norm > 1
    tnorm, tw = min_norm_convex_combination(torch.tensor(G))
    assert tnorm == norm and np.array_equal(tw, w)
    for s in (1e-200, 1e200, 2.0**-1000):
        snorm, sw = min_norm_convex_combination(G * s)
        check_simplex(G * s, snorm, sw)
        assert snorm == pytest.approx(norm * s, rel=1e-12)


def slsqp_min_norm(G: np.ndarray) -> float:
    k = G.shape[0]
    Q = G @ G.T
    res = minimize(
        lambda w: w @ Q @ w,
        np.full(k, 1 / k),
        jac=lambda w: 2 * Q @ w,
        method="SLSQP",
        bounds=[(0, 1)] * k,
        constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1}],
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    w = np.maximum(res.x, 0)
    return float(np.linalg.norm(G.T @ (w / w.sum())))


@pytest.mark.parametrize("seed", range(20))
def test_random_instances_match_slsqp(seed):
    rng = np.random.default_rng(100 + seed)
    k, d = int(rng.integers(2, 40)), int(rng.integers(1, 30))
    G = rng.standard_normal((k, d)) + rng.uniform(0, 1.5) * rng.standard_normal(d)
    norm, w = min_norm_convex_combination(G)
    check_simplex(G, norm, w)
    ref = slsqp_min_norm(G)
    assert norm <= ref + 1e-8
    assert norm >= ref - 1e-6  # SLSQP is not far off either: the two solve the same problem


@pytest.mark.parametrize(
    "k, d, shift", [(300, 80, 0.2), (120, 600, 0.0), (400, 400, 0.05), (250, 50, 2.0)]
)
def test_optimality_certified_by_kkt(k, d, shift):
    """Solver-independent: z = Gᵀw is the min-norm point iff ⟨g_i, z⟩ ≥ ‖z‖² for all i, and in any
    case ‖p‖ ≥ ⟨p, z⟩/‖z‖ ≥ min_i ⟨g_i, z⟩/‖z‖ for every p in the hull, a lower bound on the
    optimum."""
    rng = np.random.default_rng(k + d)
    G = rng.standard_normal((k, d)) + shift
    norm, w = min_norm_convex_combination(G)
    check_simplex(G, norm, w)
    z = G.T @ w
    lower = float((G @ z).min()) / float(np.linalg.norm(z)) if norm > 0 else 0.0
    assert lower <= norm * (1 + 1e-12)
    assert norm - lower <= 1e-10 * max(1.0, norm)


def test_nnls_failure_falls_back_to_a_valid_bound(monkeypatch):
    def failing(*args, **kwargs):
        raise RuntimeError("Maximum number of iterations reached.")

    monkeypatch.setattr(certify, "nnls", failing)
    G = np.array([[-1.0, 1.0], [1.0, 1.0], [0.0, 3.0]])
    with pytest.warns(RuntimeWarning, match="did not converge"):
        norm, w = min_norm_convex_combination(G)
    check_simplex(G, norm, w)
    assert norm == pytest.approx(1.0, abs=1e-12)


# --- validation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "G, match",
    [
        (np.ones(3), "shape"),
        (np.ones((0, 3)), "shape"),
        (np.ones((3, 0)), "shape"),
        (np.array([[1.0, np.nan]]), "finite"),
        (np.array([[1.0, np.inf]]), "finite"),
    ],
)
def test_min_norm_rejects_bad_input(G, match):
    with pytest.raises(ValueError, match=match):
        min_norm_convex_combination(G)


X = torch.tensor([1.0, 2.0], dtype=DT)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"radius": 0.0}, "radius"),
        ({"radius": -1.0}, "radius"),
        ({"radius": math.nan}, "radius"),
        ({"radius": math.inf}, "radius"),
        ({"radius": "1"}, "radius"),
        ({"radius": True}, "radius"),
        ({"samples": -1}, "samples"),
        ({"samples": 1.5}, "samples"),
        ({"samples": True}, "samples"),
        ({"x": torch.ones(2, 2, dtype=DT)}, "x must be a vector"),
        ({"x": torch.ones(0, dtype=DT)}, "x must be a vector"),
        ({"x": torch.tensor([1.0, math.nan], dtype=DT)}, "x must be finite"),
        ({"points": torch.ones(3, dtype=DT)}, "points must have shape"),
        ({"points": torch.ones(2, 3, dtype=DT)}, "points must have shape"),
        ({"points": torch.tensor([[math.nan, 1.0]], dtype=DT)}, "points must be finite"),
        (
            {"points": torch.tensor([[1.0, 2.5], [1.0, 3.1]], dtype=DT)},
            "within radius=1 of x; 1 do not",
        ),
        ({"gradient": lambda y: y[:, :1]}, "gradient must map"),
        ({"gradient": lambda y: y.sum(-1)}, "gradient must map"),
        ({"gradient": lambda y: torch.where(y > 1.9, math.inf, y)}, "non-finite"),
        ({"gradient": lambda y: y / 0 * 0}, "non-finite"),
    ],
)
def test_certificate_rejects_bad_input(kwargs, match):
    args = {"gradient": norm_gradient, "x": X, "radius": 1.0, "samples": 4} | kwargs
    gradient, x, radius = args.pop("gradient"), args.pop("x"), args.pop("radius")
    with pytest.raises(ValueError, match=match):
        goldstein_certificate(gradient, x, radius, **args)


def test_integer_x_and_numpy_inputs_are_accepted():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = goldstein_certificate(
            lambda y: np.sign(y.numpy()),
            torch.tensor([3, 4]),
            np.float64(0.5),
            points=np.array([[3.0, 4.4]]),
            samples=np.int64(3),
        )
    assert c.points.dtype == DT and c.points.shape == (5, 2)
    assert c.bound == pytest.approx(math.sqrt(2), abs=1e-14)


def test_certify_run_uses_the_runs_points_at_twice_its_smoothing_radius():
    from dpnc.algorithms.base import Setting
    from dpnc.algorithms.ztc import ZhangTranCutkosky
    from dpnc.certify import certify_run
    from dpnc.privacy import Accountant, NoiseSource
    from dpnc.privacy.budget import ZCDP
    from dpnc.problems.base import Constants
    from dpnc.problems.nonsmooth import L1Regression

    data = L1Regression.synthetic(200, 3, seed=0)
    config = ZhangTranCutkosky.from_theory(
        Setting(Constants(L0=1.0), 200, 3, gap=1.0), ZCDP.from_rdp_rho(1.0), smoothing=0.2
    )
    run = config.run(
        data,
        torch.zeros(3, dtype=torch.float64),
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
        generator=torch.Generator().manual_seed(0),
        keep_points=True,
    )
    cert = certify_run(run, data, samples=4, generator=torch.Generator().manual_seed(1))
    assert cert.radius == 2 * config.smoothing
    assert cert.points.shape[0] == 1 + config.period + 4  # x, the block's points, the samples
    assert torch.equal(cert.points[1 : 1 + config.period], run.trace.output_points)


# --- rim points and the held-out concentration term -----------------------------------------------


def test_rim_points_lie_in_the_ball_in_antipodal_pairs_about_the_axis():
    d, pairs = 10, 3
    x = torch.randn(d, generator=torch.Generator().manual_seed(0), dtype=DT)
    axis = random_unit(d, 1)
    Y = certify.rim_points(x, 0.3, 5 * axis, pairs, angles=8)
    assert Y.shape == (2 * pairs * 8 + 1, d)
    dist = torch.linalg.vector_norm(Y - x, dim=-1)
    assert (dist < 0.3).all() and (dist > 0.3 * (1 - 1e-8)).all()
    tilt = (Y - x) @ axis / dist
    sines = (torch.arange(8, dtype=DT) / 8)[:, None].expand(8, 2 * pairs)
    assert torch.allclose(tilt[:-1].reshape(8, 2 * pairs), -sines)
    assert float(tilt[-1]) == pytest.approx(-1.0)
    perp = (Y[:-1] - x) - ((Y[:-1] - x) @ axis)[:, None] * axis
    assert torch.allclose(
        perp.reshape(8, 2, pairs, d).sum(1), torch.zeros(8, pairs, d, dtype=DT), atol=1e-12
    )
    assert certify.rim_points(x, 0.3, torch.zeros(d, dtype=DT), pairs).shape == (0, d)


@pytest.mark.parametrize("R", [0.11, 0.15, 0.3, 1.0])
def test_rim_points_make_the_norm_certificate_nearly_exact(R):
    """h = ‖x‖: with one antipodal pair per tilt the bound is within 1e-2 of √(1 − δ²/R²) (uniform
    samples of a d = 32 ball stay far above it near the kink)."""
    d, delta = 32, 0.1
    x = R * random_unit(d, 3)
    exact = math.sqrt(1 - (delta / R) ** 2)
    with_rim = goldstein_certificate(norm_gradient, x, delta, samples=64, rim=1).bound
    assert exact - 1e-12 <= with_rim <= exact + 1e-2
    if R < 0.2:
        assert goldstein_certificate(norm_gradient, x, delta, samples=64).bound > exact + 0.05


def test_concentration_term_and_its_checks():
    assert certify.concentration(L=2.0, m=400, points=10, failure=0.1) == pytest.approx(
        2.0 / 20 * (1 + math.sqrt(2 * math.log(100)))
    )
    bad = (
        ({"L": 0.0}, "L"),
        ({"m": 0}, "m"),
        ({"points": 1.5}, "points"),
        ({"failure": 1.0}, "failure"),
    )
    for kwargs, match in bad:
        with pytest.raises(ValueError, match=match):
            certify.concentration(**{"L": 1.0, "m": 10, "points": 3, **kwargs})
    c = goldstein_certificate(norm_gradient, torch.ones(3, dtype=DT), 0.1, samples=5)
    assert c.population_bound(L=1.0, m=100) == c.bound + certify.concentration(
        L=1.0, m=100, points=6
    )


@pytest.mark.parametrize("repel", [0.0, 0.25])
@pytest.mark.parametrize("rho", [0.05, 0.25, 0.3, 1.0])
def test_held_out_certificate_bounds_the_population_norm_and_is_close(repel, rho):
    """On the radial problem the held-out certificate plus its concentration term is >= the
    closed-form population norm (an upper bound), near stationarity (ρ ≤ 1.5δ) and far from it, and
    the empirical bound is within the concentration term of it (tight up to the sampling error the
    term accounts for). The rim's axis comes from other data than the certifying sample."""
    from dpnc.problems.radial import RadialDistance

    d, delta, m = 16, 0.2, 20_000
    test = RadialDistance.synthetic(m, d, repel=repel, seed=11)
    axis_data = RadialDistance.synthetic(1_000, d, repel=repel, seed=12)
    x = rho * random_unit(d, 5)
    truth = float(test.goldstein_norm(x, delta))
    c = goldstein_certificate(
        test.gradient, x, delta, samples=64, rim=4, axis=axis_data.gradient(x)
    )
    slack = certify.concentration(L=1.0, m=m, points=c.points.shape[0])
    assert c.population_bound(L=1.0, m=m) >= truth
    assert abs(c.bound - truth) <= slack
