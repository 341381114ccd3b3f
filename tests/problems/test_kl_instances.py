"""Menart et al.'s hard instances (docs/papers.md, Menart et al. §3): Theorem 7's and 8's data,
minimisers and constants, and the lower bounds' values."""

import math

import pytest
import torch

from dpnc.problems.kl_instances import (
    lower_bound_cor1,
    lower_bound_thm7,
    lower_bound_thm8,
    thm7_instance,
    thm8_instance,
)
from dpnc.problems.kl_objective import check_kl

F64 = torch.float64
TOL = 1e-9  # rounding slack where an inequality is tight


@pytest.mark.parametrize("n, d, epsilon", [(200, 16, 0.5), (5, 64, 0.5), (300, 10, 0.25)])
def test_thm7_data_and_constants(n, d, epsilon):
    D, L0 = 2.0, 1.5
    obj = thm7_instance(n, d, epsilon, D=D, L0=L0, seed=11)
    N = min(math.floor(math.sqrt(d) / epsilon), n)
    nonzero = (obj.X != 0).any(1)
    assert obj.N == N and int(nonzero.sum()) == N
    assert torch.allclose(obj.X[nonzero].abs(), torch.full((N, d), L0 / math.sqrt(d), dtype=F64))
    assert (obj.X[~nonzero] == 0).all()
    assert obj.lam == pytest.approx(N * L0 / (2 * n * D))
    assert float(torch.linalg.vector_norm(obj.w_star)) <= D
    assert float(torch.linalg.vector_norm(obj.w_star)) >= 0.2 * D  # biased columns: not ~D/√N
    assert obj.constants.L0 <= 5 * L0 and obj.constants.L1 <= math.sqrt(d) * L0 / (
        n * epsilon * D
    ) * (1 + 1e-12)


@pytest.mark.parametrize(
    "n, epsilon, kappa, sign", [(101, 0.2, 2.0, 1), (400, 0.05, 3.0, -1), (50, 0.5, 4.0, 1)]
)
def test_thm8_minimisers_and_growth(n, epsilon, kappa, sign):
    obj = thm8_instance(n, epsilon, kappa, sign=sign)
    tau, p = kappa / (kappa - 1), 1 / (n * epsilon)
    a = p ** (1 / (tau - 1)) / 2
    assert obj.a == pytest.approx(a, rel=1e-12) and obj.p_hat * sign >= p
    assert float(obj.w_star) == sign * obj.a
    grid = torch.linspace(
        -obj.constants.region.radius, obj.constants.region.radius, 20_001, dtype=F64
    )[:, None]
    values = obj.value(grid)
    assert abs(float(grid[values.argmin()]) - sign * a) <= 2 * obj.constants.region.radius / 20_000
    assert float(values.min()) >= obj.constants.F_star - 1e-15
    # (1, τ)-growth around w*, hence (Lemma 6) (1, κ)-KL: checked on the region.
    growth = (grid[:, 0] - sign * a).abs() ** tau
    assert (values - obj.constants.F_star >= growth - 1e-15).all()
    assert check_kl(obj, grid) <= 1 + TOL
    assert obj.constants.gamma == 1.0 and obj.constants.L0 == 1.0 and obj.constants.L1 is None


def test_lower_bound_values():
    assert lower_bound_thm7(100, 16, 0.5, 2.0, 3.0) == pytest.approx(3.0 * 2.0 * 4 / 50)
    assert lower_bound_thm7(1, 10_000, 0.5, 2.0, 3.0) == 6.0  # min{·, 1}
    assert lower_bound_thm8(100, 0.5, 3.0) == pytest.approx(0.25 / 50**3)
    assert lower_bound_cor1(1000, 25, 0.04, 2.0, 3.0, 1.5) == pytest.approx(
        (2.0 * 3.0 * 5 / (1000 * 0.2)) ** 1.5
    )
    # the rate: multiplying n by 10 divides the bound by 10^κ
    assert lower_bound_cor1(10_000, 25, 0.04, 2.0, 3.0, 1.5) == pytest.approx(
        lower_bound_cor1(1000, 25, 0.04, 2.0, 3.0, 1.5) / 10**1.5
    )
