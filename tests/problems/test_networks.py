"""The two-layer ReLU network on the breast-cancer data (docs/papers.md, ZTC §5): its rows, its
prediction against a plain network, its Lipschitz constant attained on the ball and exceeded outside,
its seeded start."""

import math

import pytest
import torch

from dpnc.problems.logistic import unit_features
from dpnc.problems.networks import TwoLayerReLU
from tests.problems import F64, make, points
from tests.toys import generator


def test_breast_cancer_data():
    problem = make("relu-hinge")
    z, y = problem.data
    assert problem.n == 569 and problem.features == 30 and problem.dim == 4 * 30 + 2 * 4 + 1
    assert torch.linalg.vector_norm(z, dim=-1).max() <= 1 + 1e-12
    assert int((y == 1).sum()) == 357 and int((y == -1).sum()) == 212  # benign / malignant
    unshuffled = TwoLayerReLU.breast_cancer(hidden=4, seed=None)
    # Each row is a function of its own raw row only (no statistic across examples): the features of
    # the first ten tumours are the same whether the other 559 are there or not.
    from sklearn.datasets import load_breast_cancer

    raw = torch.as_tensor(load_breast_cancer().data, dtype=torch.float64)
    first = TwoLayerReLU(unit_features(raw[:10], "log", intercept=False), torch.ones(10), hidden=4)
    assert torch.allclose(first.data[0], unshuffled.data[0][:10], rtol=0, atol=1e-15)
    assert torch.linalg.vector_norm(unshuffled.data[0], dim=-1).sub(1).abs().max() < 1e-12
    assert not torch.equal(unshuffled.data[1], y)
    assert torch.equal(unshuffled.data[1].sort().values, y.sort().values)
    assert problem.lipschitz == pytest.approx(math.sqrt(1 + 2 * 5.0**2))


def test_relu_prediction_matches_a_plain_network():
    problem = make("relu-absolute")
    x = points(problem, 2, seed=18)
    z, y = problem.data
    for point in x:
        W, c, v, b0 = problem.unpack(point)
        pred = torch.relu(z @ W.T + c) @ v + b0
        torch.testing.assert_close(problem.value(point), (y - pred).abs().mean())
        hinge = make("relu-hinge")
        torch.testing.assert_close(hinge.value(point), torch.relu(1 - y * pred).mean())
        torch.testing.assert_close(hinge.accuracy(point), (pred * y > 0).double().mean())


def test_relu_lipschitz_bound_is_attained_and_only_holds_on_the_ball():
    """b0 = 0, W_k = αz, c_k = α‖z‖ (active), v_k = −α (so y·pred < 1): ‖∇f‖ = √(1 + 2‖x‖²)
    exactly."""
    problem = make("relu-hinge")
    z, y = problem.data
    i = int(torch.nonzero((torch.linalg.vector_norm(z, dim=-1) > 1 - 1e-12) & (y == 1))[0])
    h, R = problem.hidden, problem.radius

    def tight_point(norm):
        alpha = norm / math.sqrt(3 * h)  # ‖W‖² + ‖c‖² + ‖v‖² = 3hα²
        x = torch.zeros(problem.dim, dtype=F64)
        W, c, v, _ = problem.unpack(x)
        W += alpha * z[i]
        c += alpha
        v -= alpha
        return x

    on_sphere = tight_point(R)
    assert float(torch.linalg.vector_norm(on_sphere)) == pytest.approx(R)
    g = problem.gradients(on_sphere[None, None], torch.tensor([i]))
    assert float(torch.linalg.vector_norm(g)) == pytest.approx(problem.lipschitz, rel=1e-12)
    outside = problem.gradients(tight_point(2 * R)[None, None], torch.tensor([i]))
    assert torch.linalg.vector_norm(outside) > problem.lipschitz


def test_relu_init_is_seeded_and_inside_the_ball():
    problem = make("relu-hinge")
    x0 = problem.init(generator(19))
    assert x0.shape == (problem.dim,) and x0.dtype == F64
    assert torch.equal(x0, problem.init(generator(19))) and not torch.equal(
        x0, problem.init(generator(20))
    )
    assert torch.linalg.vector_norm(x0) <= problem.radius
    assert 0.0 <= float(problem.accuracy(x0)) <= 1.0
    with pytest.raises(ValueError, match="larger radius"):
        TwoLayerReLU.breast_cancer(hidden=4, radius=0.01).init(generator(19))
