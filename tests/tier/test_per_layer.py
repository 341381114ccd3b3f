"""The per-layer route (dpnc.tier.per_layer) forms the same clipped sum as torch.func, one example
at a time, for every layer kind it supports, and for a loss that mixes examples (per example by
construction: the losses are vmapped over the examples); DPOptimizer chooses it automatically."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

import dpnc
from dpnc.tier.first_order import ClippedSum, clipped_gradient_sum
from dpnc.tier.per_layer import layer_clipped_sum, supported

F64 = torch.float64


def both(model, loss_fn, inputs, C):
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    exact = clipped_gradient_sum(model, loss_fn, inputs, params, C, microbatch=64)
    fields = layer_clipped_sum(model, loss_fn, inputs, params, C)
    assert fields is not None
    return exact, ClippedSum(*fields)


def assert_same(exact, layers):
    assert torch.allclose(layers.total, exact.total, rtol=1e-10, atol=1e-12)
    assert (layers.clipped, layers.nonfinite) == (exact.clipped, exact.nonfinite)
    assert torch.allclose(layers.losses, exact.losses, equal_nan=True)


def cross_entropy(model):
    return lambda xb, yb: nn.functional.cross_entropy(model(xb), yb, reduction="none")


class Sequence(nn.Module):
    """Embedding (with a padding row) → LayerNorm → Linear over positions → mean → Linear."""

    def __init__(self, width: int = 8, hidden: int = 8):
        super().__init__()
        self.embed, self.norm = nn.Embedding(11, width, padding_idx=0), nn.LayerNorm(width)
        self.mix, self.out = nn.Linear(width, hidden), nn.Linear(hidden, 2)

    def forward(self, ids):
        return self.out(self.mix(self.norm(self.embed(ids))).tanh().mean(1))


def test_mlp_with_a_non_finite_example_and_clipping():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3)).to(F64)
    x, y = torch.randn(20, 6, dtype=F64), torch.randint(0, 3, (20,))
    x[3, 0] = float("nan")  # its gradient is zeroed (counted), as clipped_sum does
    exact, layers = both(model, cross_entropy(model), (x, y), 0.5)
    assert_same(exact, layers)
    assert layers.nonfinite == 1 and layers.clipped > 0 and torch.isfinite(layers.total).all()


def test_cnn():
    torch.manual_seed(1)
    model = nn.Sequential(
        nn.Conv2d(2, 3, 3, padding=1, stride=2), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 4 * 4, 4)
    ).to(F64)
    x, y = torch.randn(10, 2, 8, 8, dtype=F64), torch.randint(0, 4, (10,))
    assert_same(*both(model, cross_entropy(model), (x, y), 1.0))


def _eval(module):
    """A BatchNorm with non-trivial running statistics, in eval mode (it normalises by them, not by
    the batch)."""
    module.running_mean.uniform_(-1, 1)
    module.running_var.uniform_(0.5, 2)
    return module.eval()


# the layers people put in small vision and audio models, each with its per-example products
NORMS = {
    "groupnorm": lambda: nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1),
        nn.GroupNorm(2, 4),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(4 * 6 * 6, 3),
    ),
    "instancenorm": lambda: nn.Sequential(
        nn.Conv2d(2, 4, 3),
        nn.InstanceNorm2d(4, affine=True),
        nn.Tanh(),
        nn.Flatten(),
        nn.Linear(4 * 4 * 4, 3),
    ),
    "batchnorm-eval": lambda: nn.Sequential(
        nn.Conv2d(2, 4, 3),
        _eval(nn.BatchNorm2d(4)),
        nn.Tanh(),
        nn.Flatten(),
        nn.Linear(4 * 4 * 4, 3),
    ),
    "conv1d": lambda: nn.Sequential(
        nn.Conv1d(2, 4, 3, padding=1, stride=2, dilation=2),
        nn.GroupNorm(1, 4),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(4 * 17, 3),
    ),
}


@pytest.mark.parametrize("kind", NORMS)
def test_norm_layers_and_conv1d(kind):
    torch.manual_seed(4)
    model = NORMS[kind]().to(F64)
    for p in model.parameters():  # non-trivial γ, β: the products must use x̂, not the output
        p.data.add_(0.1 * torch.randn_like(p))
    shape = (2, 36) if kind == "conv1d" else (2, 6, 6)
    x, y = torch.randn(10, *shape, dtype=F64), torch.randint(0, 3, (10,))
    assert set(supported(model, dict(model.named_parameters()))) == {
        m for m in model if list(m.parameters())
    }
    assert_same(*both(model, cross_entropy(model), (x, y), 0.5))


def test_batchnorm_in_train_mode_is_not_taken_by_the_per_layer_route():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4, track_running_stats=False))
    assert supported(model, dict(model.named_parameters())) is None


@pytest.mark.parametrize("positions, hidden, frozen", [(3, 8, False), (9, 3, True)])
def test_sequences_by_ghost_norms_and_by_materialised_products(positions, hidden, frozen):
    """T·(in + out) < in·out: ghost norms (3·16 < 8·8); else the (out, in) product per example (9·11
    ≥ 8·3); the padding row gets nothing."""
    torch.manual_seed(2)
    model = Sequence(hidden=hidden).to(F64)
    model.embed.weight.requires_grad_(not frozen)
    ids = torch.randint(0, 11, (12, positions))
    ids[0, :] = 0
    exact, layers = both(model, cross_entropy(model), (ids, torch.randint(0, 2, (12,))), 0.3)
    assert_same(exact, layers)


def test_unsupported_layers_and_tied_weights_fall_back():
    gru = nn.GRU(4, 4, num_layers=2, dropout=0.5)  # its dropout draws between layers in train mode
    assert supported(gru, dict(gru.named_parameters())) is None
    tied = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 5, bias=False))
    tied[1].weight = tied[0].weight
    assert supported(tied, dict(tied.named_parameters())) is None


def _private(model, **kwargs):
    torch.manual_seed(3)
    data = TensorDataset(torch.randn(200, 6), torch.randint(0, 3, (200,)))
    return dpnc.make_private(
        model,
        data=data,
        n=200,
        optimizer="dp-sgd",
        noise_multiplier=1.0,
        clip=1.0,
        steps=3,
        batch_size=32,
        lr=0.1,
        **kwargs,
    )


def test_the_optimizer_chooses_the_per_layer_route_and_a_mixing_loss_is_per_example_by_construction():
    model = nn.Sequential(
        nn.Linear(6, 5), nn.Dropout(0.2), nn.Linear(5, 3)
    ).train()  # train-mode dropout is fine
    optimizer, loader, accountant = _private(model)
    assert optimizer.per_example == "layers"
    next(iter(loader))
    optimizer.step(cross_entropy(model))
    assert accountant.releases == 1 and optimizer.per_example == "layers"

    torch.manual_seed(5)
    mixing = nn.Sequential(nn.Linear(6, 3)).to(F64)

    def centred(
        xb, yb
    ):  # each score centred on "the batch's" mean: under the route's vmap, one example's mean
        scores = mixing(xb)
        return nn.functional.cross_entropy(scores - scores.mean(0), yb, reduction="none")

    x, y = torch.randn(12, 6, dtype=F64), torch.randint(0, 3, (12,))
    exact, layers = both(mixing, centred, (x, y), 0.5)
    assert_same(exact, layers)
    assert torch.allclose(
        layers.losses, torch.full((12,), float(torch.log(torch.tensor(3.0)))).to(F64)
    )


def test_vmap_stays_available_and_layers_is_refused_where_unsupported():
    assert _private(nn.Sequential(nn.Linear(6, 3)), per_example="vmap")[0].per_example == "vmap"
    with pytest.raises(ValueError, match="per_example='layers' needs every trainable parameter"):
        _private(nn.Sequential(nn.Linear(6, 3), nn.PReLU()), per_example="layers")
    assert _private(nn.Sequential(nn.Linear(6, 3), nn.PReLU()))[0].per_example == "vmap"  # auto


def test_only_the_trained_parameters_of_a_layer_count_bitfit():
    """A frozen weight beside a trained bias (BitFit) adds nothing to the norm: the same clipped sum
    as torch.func."""
    torch.manual_seed(4)
    model = Sequence(hidden=6).to(F64)
    conv = nn.Sequential(nn.Conv2d(2, 3, 3), nn.Flatten(), nn.Linear(3 * 4 * 4, 2)).to(F64)
    for net in (model, conv):
        for name, p in net.named_parameters():
            p.requires_grad_(name.endswith("bias"))
    ids = torch.randint(1, 11, (12, 5))
    assert_same(*both(model, cross_entropy(model), (ids, torch.randint(0, 2, (12,))), 0.05))
    x = torch.randn(9, 2, 6, 6, dtype=F64)
    assert_same(*both(conv, cross_entropy(conv), (x, torch.randint(0, 2, (9,))), 0.05))


class Twice(nn.Module):
    """One Linear run twice per forward (as a prompt head runs its encoder on the input and the
    label prompts)."""

    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(6, 6)

    def forward(self, x):
        return self.layer(self.layer(x))[:, :3]


class SharedRow(nn.Module):
    """A position-embedding-like layer whose output is one row shared by every example (BERT's (1,
    L) ids)."""

    def __init__(self):
        super().__init__()
        self.position, self.out = nn.Embedding(4, 6), nn.Linear(6, 3)

    def forward(self, x):
        return self.out(x + self.position(torch.zeros(1, dtype=torch.long)))


class Unused(nn.Module):
    """A trained layer the forward never runs: its gradient is not a product of rows, so the route
    does not apply."""

    def __init__(self):
        super().__init__()
        self.used, self.unused = nn.Linear(6, 3), nn.Linear(6, 3)

    def forward(self, x):
        return self.used(x)


def test_a_layer_run_twice_sums_its_calls_and_a_row_shared_by_the_examples_gets_a_copy_per_example():
    torch.manual_seed(6)
    x, y = torch.randn(7, 6, dtype=F64), torch.randint(0, 3, (7,))
    for net in (Twice().to(F64), SharedRow().to(F64)):
        # two calls: their products summed; a shared (1, L) row: expanded beneath vmap, one copy per
        # example
        assert_same(*both(net, cross_entropy(net), (x, y), 0.4))


def test_auto_keeps_to_vmap_where_a_trained_layer_does_not_run():
    net = Unused()
    params = {n: p for n, p in net.named_parameters()}
    x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
    assert layer_clipped_sum(net, cross_entropy(net), (x, y), params, 1.0) is None
    optimizer, loader, accountant = _private(net)
    assert (
        optimizer.per_example == "layers"
    )  # the layers are supported: only running them shows otherwise
    next(iter(loader))
    optimizer.step(cross_entropy(net))
    assert optimizer.per_example == "vmap" and accountant.releases == 1
    optimizer, loader, accountant = _private(net, per_example="layers")
    next(iter(loader))
    with pytest.raises(ValueError, match="or a trained layer did not run"):
        optimizer.step(cross_entropy(net))


def test_a_stock_hugging_face_encoder_takes_the_per_layer_route():
    """A BERT as AutoModel builds it (2-D padding mask, position and token-type ids shared by the
    batch, SDPA attention), mean-pooled under a linear head: the per-layer route runs it
    (transformers' mask skip, a branch on the data, is off within the route, and its attention
    eager) and equals the per-example loop; the model's own attention setting is put back."""
    transformers = pytest.importorskip("transformers")
    from dpnc.tier.first_order import route_clipped_sum

    torch.manual_seed(5)
    config = transformers.BertConfig(
        vocab_size=30,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
    )
    encoder = transformers.AutoModel.from_config(config).to(F64).eval()
    head = nn.Linear(16, 2).to(F64)
    model = nn.ModuleDict({"encoder": encoder, "head": head})

    def loss_fn(ids, mask, y):
        h = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        m = mask.unsqueeze(-1).to(h.dtype)
        return nn.functional.cross_entropy(head((h * m).sum(1) / m.sum(1)), y, reduction="none")

    ids, mask = torch.randint(1, 30, (6, 7)), torch.ones(6, 7, dtype=torch.long)
    mask[1, 4:] = 0
    y = torch.randint(0, 2, (6,))
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert encoder.config._attn_implementation == "sdpa"  # AutoModel's default
    layers, route = route_clipped_sum(model, loss_fn, (ids, mask, y), params, 0.5)
    assert encoder.config._attn_implementation == "sdpa"  # eager within the route only
    exact, _ = route_clipped_sum(model, loss_fn, (ids, mask, y), params, 0.5, per_example="loop")
    assert route == "layers"
    assert_same(exact, layers)
