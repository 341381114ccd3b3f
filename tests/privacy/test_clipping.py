"""docs/papers.md, DPZero §5.3: clipping, and non-finite values zeroed before clipping
(DESIGN.md)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dpnc.privacy.clipping import (
    clip_each,
    clip_scalars,
    clip_vectors,
    clip_weights,
    clipped_sum,
    per_run,
    zero_nonfinite,
)

EPS64 = torch.finfo(torch.float64).eps

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
thresholds = st.floats(min_value=1e-6, max_value=1e6)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, min_size=1, max_size=20), thresholds)
def test_scalar_clip_properties(values, C):
    a = torch.tensor(values, dtype=torch.float64)
    clipped, frac = clip_scalars(a, C)
    assert torch.all(clipped.abs() <= C)
    inside = a.abs() <= C
    assert torch.equal(clipped[inside], a[inside])  # identity below C
    assert torch.equal(clipped[~inside], C * torch.sign(a[~inside]))  # ±C above C
    assert torch.equal(torch.sign(clipped), torch.sign(a))  # sign kept, 0 ↦ 0
    assert float(frac) == pytest.approx(float((~inside).double().mean()), abs=1e-15)


def test_scalar_clip_of_zero_and_extremes():
    a = torch.tensor([0.0, -0.0, 5e-324, -1e308, 1e308, math.inf, -math.inf], dtype=torch.float64)
    clipped, frac = clip_scalars(a, 2.0)
    assert torch.equal(
        clipped, torch.tensor([0.0, 0.0, 5e-324, -2.0, 2.0, 2.0, -2.0], dtype=torch.float64)
    )
    assert not torch.any(torch.isnan(clipped))
    assert float(frac) == pytest.approx(4 / 7)


def test_scalar_clip_inf_threshold_is_a_no_op():
    a = torch.tensor([0.0, -3.5, 1e300, 7e-310], dtype=torch.float64)
    clipped, frac = clip_scalars(a, math.inf)
    assert torch.equal(clipped, a) and float(frac) == 0.0


def test_nonfinite_become_zero_before_clipping_and_are_counted():
    a = torch.tensor(
        [[1.0, math.nan, 5.0, math.inf, -math.inf], [-4.0, 0.5, math.nan, 2.0, 3.0]],
        dtype=torch.float64,
    )
    zeroed, count = zero_nonfinite(a)
    assert torch.equal(count, torch.tensor([3, 1]))
    assert torch.equal(
        zeroed,
        torch.tensor([[1.0, 0.0, 5.0, 0.0, 0.0], [-4.0, 0.5, 0.0, 2.0, 3.0]], dtype=torch.float64),
    )
    clipped, _ = clip_scalars(zeroed, 2.0)
    # A non-finite value contributes 0, not ±C (it is zeroed first), and nothing is NaN.
    assert torch.equal(
        clipped,
        torch.tensor([[1.0, 0.0, 2.0, 0.0, 0.0], [-2.0, 0.5, 0.0, 2.0, 2.0]], dtype=torch.float64),
    )
    assert torch.equal(zero_nonfinite(torch.ones(3))[1], torch.tensor(0))


def test_scalar_clip_per_run_threshold():
    gen = torch.Generator().manual_seed(0)
    a = 3 * torch.randn(4, 50, generator=gen, dtype=torch.float64)
    C = torch.tensor([0.5, 1.0, 2.0, math.inf], dtype=torch.float64)
    clipped, frac = clip_scalars(a, C)
    assert frac.shape == (4,)
    for k in range(4):
        row, row_frac = clip_scalars(a[k], float(C[k]))
        assert torch.equal(clipped[k], row) and torch.equal(frac[k], row_frac)
        assert torch.all(clipped[k].abs() <= C[k])
    assert 0 < float(frac[0]) < 1 and float(frac[3]) == 0.0


vectors = st.lists(
    st.lists(st.floats(min_value=-1e100, max_value=1e100), min_size=3, max_size=3),
    min_size=1,
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(vectors, thresholds)
def test_vector_clip_norm_is_min_of_norm_and_C(rows, C):
    g = torch.tensor(rows, dtype=torch.float64)
    clipped, frac = clip_vectors(g, C)
    norms = torch.linalg.vector_norm(g, dim=-1)
    new = torch.linalg.vector_norm(clipped, dim=-1)
    target = torch.minimum(norms, torch.tensor(C, dtype=torch.float64))
    assert torch.all((new - target).abs() <= 4 * EPS64 * target)
    assert torch.all(new <= C * (1 + 2 * EPS64))
    # Each v is only shrunk, never turned: clip(v) = t·v with t = min(1, C/‖v‖) (to rounding, and
    # a tiny component may underflow to 0 but never flips sign).
    t = torch.where(norms > C, C / norms.clamp_min(1e-300), torch.ones_like(norms)).unsqueeze(-1)
    assert torch.all(torch.sign(clipped) * torch.sign(g) >= 0)
    assert torch.all((clipped - t * g).abs() <= 4 * EPS64 * (t * g).abs() + 1e-300)
    assert torch.equal(clipped[norms <= C], g[norms <= C])
    assert float(frac) == pytest.approx(float((norms > C).double().mean()), abs=1e-15)


def test_vector_clip_of_a_huge_but_finite_vector_has_norm_C():
    """‖v‖ ≈ 1.4e200 is a float, but Σ v_j² overflows: the clip must still return norm C (not 0)."""
    g = torch.tensor([[1e200, -1e200, 0.0], [3.0, 4.0, 0.0]], dtype=torch.float64)
    clipped, _ = clip_vectors(g, 1.0)
    norms = torch.linalg.vector_norm(clipped, dim=-1)
    assert torch.allclose(norms, torch.ones(2, dtype=torch.float64), rtol=4 * EPS64, atol=0)
    assert torch.allclose(
        clipped[0], torch.tensor([1.0, -1.0, 0.0], dtype=torch.float64) / math.sqrt(2)
    )


def test_vector_clip_zero_vector_no_nan_and_inf_threshold():
    g = torch.tensor([[0.0, 0.0], [3.0, 4.0]], dtype=torch.float64)
    clipped, frac = clip_vectors(g, 1.0)
    assert torch.equal(clipped[0], torch.zeros(2, dtype=torch.float64))
    assert torch.allclose(
        clipped[1], torch.tensor([0.6, 0.8], dtype=torch.float64), rtol=0, atol=2 * EPS64
    )
    assert float(frac) == 0.5
    same, frac = clip_vectors(g, math.inf)
    assert torch.equal(same, g) and float(frac) == 0.0


def test_vector_clip_per_run_threshold():
    gen = torch.Generator().manual_seed(1)
    g = torch.randn(3, 20, 4, generator=gen, dtype=torch.float64)
    C = torch.tensor([0.5, 2.0, math.inf], dtype=torch.float64)
    clipped, frac = clip_vectors(g, C)
    assert frac.shape == (3,)
    for k in range(3):
        row, row_frac = clip_vectors(g[k], float(C[k]))
        assert torch.equal(clipped[k], row) and torch.equal(frac[k], row_frac)
        assert torch.all(torch.linalg.vector_norm(clipped[k], dim=-1) <= C[k] * (1 + 2 * EPS64))
    assert float(frac[0]) == 1.0 or 0 < float(frac[0]) < 1
    assert float(frac[2]) == 0.0


def test_per_run_shapes():
    like = torch.zeros(3, 5, 2)
    assert per_run(2.0, like).shape == ()
    assert per_run(torch.tensor([1.0, 2.0, 3.0]), like).shape == (3, 1, 1)
    assert per_run(1, torch.zeros(4, dtype=torch.float64)).dtype == torch.float64


def test_clipped_sum_is_zero_nonfinite_then_clip_then_sum():
    a = torch.tensor([[0.5, -3.0, math.nan, 2.0], [math.inf, 0.1, -0.2, 5.0]], dtype=torch.float64)
    s = clipped_sum(a, torch.tensor([1.0, 2.0], dtype=torch.float64))
    zeroed, nonfinite = zero_nonfinite(a)
    clipped, frac = clip_scalars(zeroed, torch.tensor([1.0, 2.0], dtype=torch.float64))
    assert torch.equal(s.total, clipped.sum(-1)) and torch.equal(s.nonfinite, nonfinite)
    assert s.clipped.tolist() == [2, 1] and s.examples == 4 and torch.equal(s.fraction, frac)


def test_clipped_sum_of_vectors_and_of_an_empty_batch():
    g = torch.tensor([[3.0, 4.0], [math.nan, 1.0], [0.3, 0.4]], dtype=torch.float64)
    s = clipped_sum(g, 1.0, vector=True)
    assert torch.allclose(s.total, torch.tensor([0.6 + 0.3, 0.8 + 0.4], dtype=torch.float64))
    assert (int(s.clipped), int(s.nonfinite), s.examples) == (1, 1, 3)
    assert torch.equal(clip_each(g, 1.0, vector=True).values.sum(-2), s.total)
    empty = clipped_sum(torch.zeros(0, dtype=torch.float64), 1.0)
    assert float(empty.total) == 0.0 and empty.examples == 0 and math.isnan(float(empty.fraction))


def test_clip_weights_from_norms_alone_equal_clip_vectors():
    g = torch.randn(3, 7, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    C = torch.tensor([0.5, 2.0, math.inf], dtype=torch.float64)
    w, over = clip_weights(torch.linalg.vector_norm(g, dim=-1), C)
    clipped, fraction = clip_vectors(g, C)
    assert torch.allclose(w.unsqueeze(-1) * g, clipped, rtol=1e-12, atol=0)
    assert torch.equal(over.to(g.dtype).mean(-1), fraction) and not over[2].any()
