"""Logistic regression on real data: public per-example features, and the declared constants against
gradients."""

import functools
import math

import pytest
import torch

from dpnc.problems import LogisticRegression, unit_features

F64 = torch.float64


@functools.cache
def load(dataset: str):
    return LogisticRegression.load(dataset, seed=0)


def ball_points(problem, k: int, seed: int) -> torch.Tensor:
    """k points of the region: directions uniform, radii in [0, R], the last ones on the sphere."""
    gen = torch.Generator().manual_seed(seed)
    u = torch.randn(k, problem.dim, generator=gen, dtype=F64)
    u /= torch.linalg.vector_norm(u, dim=-1, keepdim=True)
    r = torch.rand(k, 1, generator=gen, dtype=F64) * problem.radius
    r[-k // 4 :] = problem.radius
    return u * r


@pytest.mark.parametrize("dataset", ["breast-cancer", "digits"])
def test_features_unit_norm_and_constants_hold(dataset):
    train, test = load(dataset)
    a = train.data[0]
    assert torch.allclose(torch.linalg.vector_norm(a, dim=-1), torch.ones(len(a), dtype=F64))
    c = train.constants
    G = 1.0 if train.classes == 2 else math.sqrt(2)
    assert c.L0 == pytest.approx(G + train.l2 * train.radius)
    assert c.L1 == pytest.approx((0.25 if train.classes == 2 else 0.5) + train.l2)
    assert c.kappa == 2 and c.gamma == pytest.approx(1 / math.sqrt(2 * train.l2))
    assert (test.constants.L0, test.constants.L1, test.constants.region.radius) == (
        c.L0,
        c.L1,
        c.region.radius,
    )
    # ‖∇f(x; z_i)‖ ≤ L0 for every example at points of the region, on its sphere included
    points = ball_points(train, 16, seed=1)
    index = torch.arange(train.n)
    g = train.gradients(points.expand(train.n, *points.shape), index)
    norms = torch.linalg.vector_norm(g, dim=-1)
    assert float(norms.max()) <= c.L0 * (1 + 1e-12)
    assert (
        float(norms.max()) >= 0.5 * c.L0
    )  # not a vacuous bound: large scores make it nearly tight
    # ∇f(·; z) is L1-Lipschitz: pairs of nearby and far points
    x, y = points[:8], points[8:]
    gx = train.gradients(x.expand(train.n, *x.shape), index)
    gy = train.gradients(y.expand(train.n, *y.shape), index)
    ratio = torch.linalg.vector_norm(gx - gy, dim=-1) / torch.linalg.vector_norm(x - y, dim=-1)
    assert float(ratio.max()) <= c.L1 * (1 + 1e-12)


@pytest.mark.parametrize("classes", [2, 4])
def test_closed_form_gradients_match_autograd(classes):
    gen = torch.Generator().manual_seed(2)
    a = unit_features(torch.rand(30, 5, generator=gen, dtype=F64))
    y = torch.randint(classes, (30,), generator=gen)
    problem = LogisticRegression(a, y, classes=classes, l2=0.01)
    x = torch.randn(30, 3, problem.dim, generator=gen, dtype=F64)
    autograd = super(LogisticRegression, problem).gradients(x, torch.arange(30))
    assert torch.allclose(problem.gradients(x, torch.arange(30)), autograd, atol=1e-12)
    points = x[0]
    shared = problem.gradients(points.expand(30, *points.shape), torch.arange(30))
    assert torch.allclose(problem.gradient(points), shared.mean(0), atol=1e-12)  # closed-form sum
    assert torch.allclose(
        problem.value(points), problem.losses_at(points, torch.arange(30)).mean(-1)
    )


def test_multiclass_bound_is_sqrt2_and_attained():
    """‖π − e_y‖ → √2 when the mass goes to a wrong class: the √2 in L0 cannot be lowered."""
    a = unit_features(torch.tensor([[1.0, 0.0]]))
    problem = LogisticRegression(a, torch.tensor([0]), classes=3)
    x = torch.zeros(problem.dim, dtype=F64)
    x[problem.features : 2 * problem.features] = 100 * a[0]  # class 1 scores ≫ class 0
    g = problem.gradients(x[None, None], torch.tensor([0]))
    assert float(torch.linalg.vector_norm(g)) == pytest.approx(math.sqrt(2), rel=1e-9)
    assert problem.constants.L0 == pytest.approx(math.sqrt(2)) and problem.constants.region is None


def test_features_are_per_example():
    """Row i of the features depends on row i of the raw data only: changing one example changes one
    row."""
    gen = torch.Generator().manual_seed(3)
    raw = torch.rand(10, 4, generator=gen, dtype=F64) * 100
    changed = raw.clone()
    changed[3] = torch.tensor([1e4, 0.0, 5.0, 2.0], dtype=F64)
    for transform in ("identity", "log", "pixel"):
        before, after = unit_features(raw, transform), unit_features(changed, transform)
        rows = (before != after).any(-1).nonzero().flatten().tolist()
        assert rows == [3]


def test_minimiser_in_region_and_non_private_reference():
    train, test = load("breast-cancer")
    x = train.solve()
    assert float(torch.linalg.vector_norm(x)) < train.radius
    assert float(torch.linalg.vector_norm(train.gradient(x))) < 1e-6
    assert float(test.accuracy(x)) > 0.85


def test_bad_input_is_refused():
    a = unit_features(torch.rand(4, 2, dtype=F64))
    with pytest.raises(ValueError, match="norm <= 1"):
        LogisticRegression(2 * a, torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="labels y"):
        LogisticRegression(a, torch.tensor([0, 1, 2, 0]), classes=2)
    with pytest.raises(ValueError, match="l2"):
        LogisticRegression(a, torch.zeros(4, dtype=torch.long), l2=-1.0)
    with pytest.raises(ValueError, match="transform"):
        unit_features(torch.rand(4, 2), "standardise")
    with pytest.raises(ValueError, match="dataset"):
        LogisticRegression.load("iris")
