"""O2NC invariants (docs/papers.md: ZTC §5 properties 12–14; KLT §2.2's deterministic facts)."""

import pytest
import torch

from dpnc.algorithms.o2nc import ProjectedOGD, o2nc, project_ball

TOL = 1e-12


def noisy_abs_gradient(seed):
    """A subgradient of ‖x‖₁ plus large noise: the learner is pushed against its ball often."""
    gen = torch.Generator().manual_seed(seed)
    return lambda t, w: torch.sign(w) + 5 * torch.randn(w.shape, generator=gen, dtype=w.dtype)


def run(reset, block=16, steps=160, D=0.01, eta=0.05, seed=0, **kw):
    trace = []
    result = o2nc(
        noisy_abs_gradient(seed),
        torch.full((5,), 0.3, dtype=torch.float64),
        D=D,
        eta=eta,
        steps=steps,
        block=block,
        reset_each_block=reset,
        generator=torch.Generator().manual_seed(seed),
        keep_points=True,
        on_step=lambda t, w, g: trace.append(w.clone()),
        **kw,
    )
    return result, torch.stack(trace)


def test_project_ball():
    v = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert torch.allclose(project_ball(v, 1.0), v / 5)
    assert project_ball(v, 10.0) is v


@pytest.mark.parametrize("reset", [True, False])
def test_increments_moves_and_block_radius(reset):
    D, block = 0.01, 16
    result, w = run(reset, block=block, D=D)
    assert result.max_increment <= D * (1 + TOL)
    moves = torch.linalg.vector_norm(w[1:] - w[:-1], dim=1)
    assert moves.max() <= 2 * D * (1 + TOL) and result.max_move <= 2 * D * (1 + TOL)
    # Every w of a block is within block·D of the block's average (ZTC: T·D = δ).
    for k in range(result.block_averages.shape[0]):
        spread = torch.linalg.vector_norm(result.points[k] - result.block_averages[k], dim=1).max()
        assert spread <= block * D * (1 + TOL)
    # The points recorded per block are the queried w's, in order.
    assert torch.equal(result.points.reshape(-1, 5), w[: result.points.shape[0] * block])


def test_reset_restarts_the_learner_each_block():
    """ZTC: Δ₁ᵏ = 0, so w₁ᵏ = x₁ᵏ = the end point of the previous epoch; and the learner really
    restarts."""
    D, block = 0.01, 16
    result, w = run(True, block=block, D=D)
    first = w[::block]
    # With Δ = 0 at an epoch's start, x stops moving for one step: w_1^{k+1} − w_T^k = (1 − s_T)Δ_T
    # only.
    for k in range(1, first.shape[0]):
        assert torch.linalg.vector_norm(first[k] - w[k * block - 1]) <= D * (1 + TOL)
    no_reset, _ = run(False, block=block, D=D)
    assert not torch.equal(result.x, no_reset.x)


def test_output_is_one_block_average_and_runs_replay():
    a, _ = run(True)
    b, _ = run(True)
    assert torch.equal(a.output, b.output) and a.output_block == b.output_block
    assert torch.equal(a.output, a.block_averages[a.output_block])
    assert torch.equal(a.output_points, a.points[a.output_block])


def test_trailing_steps_are_not_averaged():
    result, _ = run(False, block=16, steps=40)
    assert result.block_averages.shape[0] == 2 and result.steps == 40


def test_exact_gradient_on_a_smooth_function_descends():
    """Non-private O2NC with exact gradients of ½‖x‖²: the block gradients shrink toward 0."""
    x0 = torch.ones(3, dtype=torch.float64)
    result = o2nc(
        lambda t, w: w,
        x0,
        D=0.01,
        eta=0.01,
        steps=400,
        block=20,
        reset_each_block=True,
        generator=torch.Generator().manual_seed(0),
    )
    norms = torch.linalg.vector_norm(result.block_averages, dim=1)
    assert norms[-1] < 0.05 < norms[0]


def test_learner_and_driver_validate():
    with pytest.raises(ValueError, match="D must be"):
        ProjectedOGD(3, 0.0, 0.1)
    with pytest.raises(ValueError, match="eta must be"):
        ProjectedOGD(3, 1.0, -1.0)
    with pytest.raises(ValueError, match="block must be <= steps"):
        o2nc(
            lambda t, w: w,
            torch.zeros(2),
            D=1,
            eta=1,
            steps=3,
            block=4,
            reset_each_block=True,
            generator=torch.Generator(),
        )
    with pytest.raises(ValueError, match="x0 must be a vector"):
        o2nc(
            lambda t, w: w,
            torch.zeros(2, 2),
            D=1,
            eta=1,
            steps=3,
            block=1,
            reset_each_block=True,
            generator=torch.Generator(),
        )
