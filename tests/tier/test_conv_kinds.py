"""dpnc.tier.conv_kinds: the im2col that every convolution kind's per-example gradient g·unfold(a)ᵀ
rests on: W·unfold(x) is the convolution itself, in 1, 2 and 3 spatial dimensions."""

import pytest
import torch
import torch.nn.functional as F

from dpnc.tier.conv_kinds import _unfold

CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


@pytest.mark.parametrize(
    "dims, kernel, dilation, padding, stride",
    [
        (1, (3,), (1,), (0,), (1,)),
        (1, (2,), (2,), (3,), (2,)),
        (2, (3, 2), (1, 2), (1, 0), (2, 1)),
        (3, (2, 2, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1)),
        (3, (2, 1, 2), (2, 1, 1), (1, 2, 0), (1, 2, 2)),
    ],
)
def test_the_weight_times_the_unfolded_input_is_the_convolution(
    dims, kernel, dilation, padding, stride
):
    gen = torch.Generator().manual_seed(dims)
    x = torch.randn(2, 3, *[7] * dims, generator=gen, dtype=torch.float64)
    weight = torch.randn(4, 3, *kernel, generator=gen, dtype=torch.float64)
    expected = CONV[dims](x, weight, stride=stride, padding=padding, dilation=dilation)
    columns = _unfold(x, kernel, dilation, padding, stride)  # (n, in·∏k, L)
    assert columns.shape == (2, 3 * weight[0, 0].numel(), expected[0, 0].numel())
    got = (weight.flatten(1) @ columns).reshape(expected.shape)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
