"""The loop route forms each example's gradient by plain autograd, so models torch.func cannot take
train: packed sequences into nn.RNN/GRU/LSTM (their tensors have no storage beneath torch.func;
"auto" takes the per-layer route, which unrolls them) and sparse embedding gradients. Each is equal
to a float64 reference formed another way; a model no route can take is refused before a batch is
drawn, naming the layer, and nothing is charged."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.data import TensorDataset

import dpnc
from dpnc.tier.first_order import clipped_gradient_sum, route_clipped_sum

F64 = torch.float64


class Packed(nn.Module):
    """An RNN over padded sequences packed by their lengths; the last hidden state into a Linear."""

    def __init__(self, cell):
        super().__init__()
        self.rnn, self.out = cell(3, 4, batch_first=True), nn.Linear(4, 2)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, h = self.rnn(packed)
        return self.out((h[0] if isinstance(h, tuple) else h)[-1])


def reference(model, per_example_loss, n, C):
    """Σ_i clip_C(∇ℓ_i), each ℓ_i from ``per_example_loss(i)`` alone, by backward, in float64."""
    params = [p for p in model.parameters() if p.requires_grad]
    total = torch.zeros(sum(p.numel() for p in params), dtype=F64)
    for i in range(n):
        grads = torch.autograd.grad(per_example_loss(i), params)
        g = torch.cat([t.reshape(-1) for t in grads])
        total += g * min(1.0, C / float(g.norm()))
    return total


def relative_error(got, want):
    return float((got - want).norm() / want.norm())


@pytest.mark.parametrize("cell", [nn.RNN, nn.GRU, nn.LSTM])
def test_packed_sequences_train_by_the_loop_and_equal_each_sequence_run_alone_unpacked(cell):
    torch.manual_seed(0)
    model = Packed(cell).to(F64)
    x, lengths = torch.randn(6, 5, 3, dtype=F64), torch.tensor([5, 2, 1, 4, 3, 5])
    y = torch.randint(0, 2, (6,))

    def loss_fn(xb, lb, yb):
        return nn.functional.cross_entropy(model(xb, lb), yb, reduction="none")

    def alone(i):  # the example cut to its own length, no packing: the padding must not matter
        _, h = model.rnn(x[i : i + 1, : lengths[i]])
        scores = model.out((h[0] if isinstance(h, tuple) else h)[-1])
        return nn.functional.cross_entropy(scores, y[i : i + 1])

    params = dict(model.named_parameters())
    looped = clipped_gradient_sum(model, loss_fn, (x, lengths, y), params, 0.3, per_example="loop")
    assert relative_error(looped.total, reference(model, alone, 6, 0.3)) < 1e-12
    assert looped.clipped > 0 and looped.nonfinite == 0


def test_auto_trains_a_packed_lstm_by_the_per_layer_route_without_a_failed_step():
    """The route unrolls the LSTM over the padded steps (dpnc.tier.recurrent); its equality with the
    loop is tests/suites/test_layer_zoo.py's."""
    torch.manual_seed(1)
    model = Packed(nn.LSTM)
    x, lengths = torch.randn(40, 5, 3), torch.randint(1, 6, (40,))
    data = TensorDataset(x, lengths, torch.randint(0, 2, (40,)))
    opt, loader, accountant = dpnc.make_private(
        model,
        data=data,
        n=40,
        optimizer="dp-sgd",
        noise_multiplier=1.0,
        clip=1.0,
        steps=2,
        batch_size=10,
        lr=0.1,
        testing_seed=0,
    )
    before = [p.detach().clone() for p in model.parameters()]
    for _ in loader:
        opt.step(
            lambda xb, lb, yb: nn.functional.cross_entropy(model(xb, lb), yb, reduction="none")
        )
    assert opt.per_example == "layers" and accountant.releases == 2
    assert all(not torch.equal(a, p) for a, p in zip(before, model.parameters()))


def test_a_sparse_embedding_bag_trains_by_the_loop():
    torch.manual_seed(2)
    model = nn.Sequential(nn.EmbeddingBag(10, 4, mode="sum", sparse=True), nn.Linear(4, 2)).to(F64)
    ids, y = torch.randint(0, 10, (5, 3)), torch.randint(0, 2, (5,))
    ids[0] = torch.tensor(
        [4, 4, 7]
    )  # an id repeated in a bag: its row gets both positions' gradients

    def loss_fn(a, b):
        return nn.functional.cross_entropy(model(a), b, reduction="none")

    params = dict(model.named_parameters())
    looped = clipped_gradient_sum(model, loss_fn, (ids, y), params, 0.5, per_example="loop")
    dense = nn.Sequential(nn.EmbeddingBag(10, 4, mode="sum"), nn.Linear(4, 2)).to(F64)
    dense.load_state_dict(model.state_dict())
    want = reference(dense, lambda i: _alone(dense, i, ids, y), 5, 0.5)
    assert relative_error(looped.total, want) < 1e-12


def _alone(net, i, ids, y):
    return nn.functional.cross_entropy(net(ids[i : i + 1]), y[i : i + 1])


def _private(model, **kwargs):
    data = TensorDataset(torch.randn(50, 6), torch.randint(0, 3, (50,)))
    return dpnc.make_private(
        model,
        data=data,
        n=50,
        optimizer="dp-sgd",
        noise_multiplier=1.0,
        clip=1.0,
        steps=2,
        batch_size=10,
        lr=0.1,
        testing_seed=0,
        **kwargs,
    )


def test_a_model_no_route_can_take_is_refused_before_a_batch_naming_the_layer():
    with pytest.raises(ValueError, match=r"0 \(LazyLinear\), 0.weight, 0.bias: not initialised"):
        _private(nn.Sequential(nn.LazyLinear(3)))
    model = nn.Sequential(nn.Linear(6, 4), nn.Linear(4, 3, device="meta"))
    with pytest.raises(ValueError, match=r"1 \(Linear\), 1.weight, 1.bias: on the meta device"):
        _private(model)
    params = dict(model.named_parameters())
    x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
    with pytest.raises(ValueError, match="no per-example route can take this model"):
        route_clipped_sum(model, lambda a, b: model(a).sum(1), (x, y), params, 1.0)
