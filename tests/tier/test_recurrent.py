"""dpnc.tier.recurrent: which recurrent layers the unrolled forward reproduces, and each one's weight
matrices as Linear views of its own parameters (every layer, direction and projection)."""

import pytest
import torch
from torch import nn

from dpnc.tier.recurrent import held, parts, takes


class OwnForward(nn.GRU):
    """A subclass whose forward is not torch's: the unrolled forward would not be its."""

    def forward(self, x, h=None):
        return super().forward(x, h)


def test_torchs_own_forward_without_dropout_between_layers_is_taken():
    assert takes(nn.RNN(3, 4)) and takes(nn.GRU(3, 4)) and takes(nn.LSTM(3, 4))
    dropped = nn.LSTM(3, 4, num_layers=2, dropout=0.3)
    assert not takes(dropped.train()) and takes(dropped.eval())
    assert takes(nn.LSTM(3, 4, num_layers=1, dropout=0.0).train())
    assert not takes(OwnForward(3, 4)) and not takes(nn.Linear(3, 4))


@pytest.mark.parametrize(
    "layer, names",
    [
        (nn.RNN(3, 4), ["weight_ih_l0", "weight_hh_l0"]),
        (
            nn.GRU(3, 4, num_layers=2, bias=False),
            ["weight_ih_l0", "weight_hh_l0", "weight_ih_l1", "weight_hh_l1"],
        ),
        (
            nn.LSTM(3, 4, bidirectional=True, proj_size=2),
            ["weight_ih_l0", "weight_hh_l0", "weight_hr_l0"]
            + ["weight_ih_l0_reverse", "weight_hh_l0_reverse", "weight_hr_l0_reverse"],
        ),
    ],
)
def test_the_parts_are_views_of_every_weight_matrix_and_its_bias(layer, names):
    found = parts(layer)
    assert [part.names["weight"] for part in found] == names
    for part in found:
        assert part.weight is getattr(layer, part.names["weight"])
        assert (part.out_features, part.in_features) == tuple(part.weight.shape)
        bias = part.names["bias"]
        assert (part.bias is None) == (bias is None)
        if bias is not None:
            assert part.bias is getattr(layer, bias)
    assert not list(found[0].children())  # the layer is not registered under its part


def test_held_lists_each_parameter_once_through_the_parts():
    layer = nn.LSTM(3, 4, num_layers=2)
    seen = [p for _, _, p in held(layer)]
    assert len(seen) == len(list(layer.parameters()))
    assert {id(p) for p in seen} == {id(p) for p in layer.parameters()}
    linear = nn.Linear(2, 2)
    assert [(owner, name) for owner, name, _ in held(linear)] == [
        (linear, "weight"),
        (linear, "bias"),
    ]
    assert torch.equal(next(iter(held(linear)))[2], linear.weight)
