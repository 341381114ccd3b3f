"""dpnc.tier.layer_kinds: which kind forms each layer type's per-example gradients (subclasses
included, a configuration the kind cannot take refused), and the names the refusals and the docs'
table list."""

import pytest
from torch import nn

from dpnc.tier.attention import _Attention
from dpnc.tier.conv_kinds import _Conv, _ConvTranspose
from dpnc.tier.layer_base import _Linear
from dpnc.tier.layer_kinds import (
    KINDS,
    SUPPORTED,
    _ChannelNorm,
    _Embedding,
    _EmbeddingBag,
    _LayerNorm,
    _Recurrent,
    _RMSNorm,
    kind,
    layer_names,
    layer_rows,
)


class OwnLinear(nn.Linear):
    """A subclass that keeps nn.Linear's forward."""


@pytest.mark.parametrize(
    "module, expected",
    [
        (nn.Linear(3, 2), _Linear),
        (OwnLinear(3, 2), _Linear),
        (nn.Embedding(5, 2, padding_idx=0), _Embedding),
        (nn.EmbeddingBag(5, 2, mode="mean"), _EmbeddingBag),
        (nn.LayerNorm(4), _LayerNorm),
        (nn.RMSNorm(4), _RMSNorm),
        (nn.Conv2d(1, 2, 3, padding_mode="reflect", padding=1), _Conv),
        (nn.ConvTranspose1d(2, 1, 3), _ConvTranspose),
        (nn.GroupNorm(2, 4), _ChannelNorm),
        (nn.InstanceNorm2d(4, affine=True), _ChannelNorm),
        (nn.BatchNorm1d(4).eval(), _ChannelNorm),
        (nn.MultiheadAttention(4, 2), _Attention),
        (nn.GRU(3, 4, num_layers=2, dropout=0.5).eval(), _Recurrent),
    ],
)
def test_each_supported_layer_has_its_kind(module, expected):
    assert kind(module) is expected and isinstance(module, SUPPORTED)


@pytest.mark.parametrize(
    "module",
    [
        nn.Bilinear(2, 2, 1),  # no kind for the type
        nn.BatchNorm1d(4).train(),  # the batch's statistics mix the examples
        nn.LSTM(3, 4, num_layers=2, dropout=0.5).train(),  # dropout between layers
        nn.ReLU(),
    ],
)
def test_a_layer_the_route_cannot_take_has_no_kind(module):
    assert kind(module) is None


def test_the_names_are_the_types_a_user_writes_with_their_conditions():
    names = layer_names()
    assert len(names) == len(KINDS) and names[0] == "Linear"
    assert "BatchNorm*d (eval mode, running statistics)" in names
    assert "InstanceNorm*d" in names and "LSTM (no dropout between layers in train mode)" in names
    rows = layer_rows()
    assert [name for name, _ in rows] == names
    assert all(product.strip() for _, product in rows)
