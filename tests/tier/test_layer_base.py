"""dpnc.tier.layer_base: the per-example scaling that keeps the per-layer route's norms finite
where a row's entries are too large for its dtype, and the products of those scales."""

import math

import torch

from dpnc.tier.layer_base import _product, _scale, _times


def test_rows_are_scaled_to_a_largest_magnitude_of_one_and_the_scales_kept_in_float64():
    rows = torch.tensor([[3.0, -4.0], [1e20, 2e20], [0.0, 0.0]], dtype=torch.float32)
    scaled, peaks = _scale(rows)
    assert peaks.dtype == torch.float64 and scaled.dtype == torch.float32
    assert torch.equal(scaled[0], torch.tensor([0.75, -1.0]))
    assert torch.allclose(scaled[1], torch.tensor([0.5, 1.0]))
    assert torch.equal(scaled[2], torch.zeros(2))  # a zero row stays zero (its peak is tiny)
    assert peaks[0] == 4.0 and math.isclose(float(peaks[1]), 2e20, rel_tol=1e-6)
    assert torch.isinf((rows[1] ** 2).sum()) and torch.isfinite((scaled[1] ** 2).sum())
    restored = _times(scaled.double(), peaks[:, None])
    torch.testing.assert_close(restored, rows.double(), rtol=1e-6, atol=0)


def test_a_non_finite_row_stays_non_finite():
    scaled, _ = _scale(torch.tensor([[1.0, math.nan], [math.inf, 1.0]]))
    assert not torch.isfinite(scaled).all(dim=1).any()


def test_products_of_scales_where_none_stands_for_one():
    a, b = torch.tensor([2.0, 3.0], dtype=torch.float64), torch.tensor([5.0, 7.0])
    assert _product() is None and _product(None, None) is None
    assert _product(a, None) is a and torch.equal(_product(a, b.double()), a * b.double())
    x = torch.ones(2, 3)
    assert _times(x, None) is x
    assert torch.equal(_times(x, a[:, None], 2), x * a[:, None] ** 2)  # scales broadcast by row
