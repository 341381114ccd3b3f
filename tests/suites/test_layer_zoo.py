"""Each layer kind of the per-layer route (dpnc.tier.layer_kinds.KINDS), in the configurations
people train, takes the fast route and equals a float64 loop over the examples (each example's
gradient by autograd on it alone, clipped, summed) to rounding."""

from __future__ import annotations

import math
import warnings
from functools import partial
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from dpnc.tier.base import validate_model
from dpnc.tier.first_order import refuse_no_route, route_clipped_sum
from dpnc.tier.layer_kinds import kind
from dpnc.tier.per_layer import layer_clipped_sum, supported

F64 = torch.float64


class Head(nn.Module):
    """``layer`` then a fixed-size read-out: whatever shape the layer returns, two scores per
    example."""

    def __init__(self, layer: nn.Module, width: int):
        super().__init__()
        self.layer, self.out = layer, nn.Linear(width, 2)

    def forward(self, x):
        return self.out(torch.tanh(self.layer(x)).flatten(1))


def case(layer, shape, n=7, seed=0):
    torch.manual_seed(seed)
    x = torch.randn(n, *shape, dtype=F64)
    width = layer.to(F64)(x[:1]).numel()
    model = Head(layer, width).to(F64)
    for p in model.parameters():  # non-trivial γ, β and biases
        p.data.add_(0.1 * torch.randn_like(p))
    return model, x, torch.randint(0, 2, (n,))


def loop_reference(model, x, y, C):
    """Σ_i clip_C(∇ℓ_i), ℓ_i by autograd on example i alone, float64; ``x`` one input or a tuple of
    them."""
    params = [p for p in model.parameters() if p.requires_grad]
    total = torch.zeros(sum(p.numel() for p in params), dtype=F64)
    xs = _inputs(x)
    for i in range(len(y)):
        loss = nn.functional.cross_entropy(model(*(t[i : i + 1] for t in xs)), y[i : i + 1])
        g = torch.cat([t.reshape(-1) for t in torch.autograd.grad(loss, params)])
        norm = float(g.norm())
        total += g.detach() * (min(1.0, C / norm) if norm > 0 else 0.0)
    return total


def fast_route_error(model, x, y, C=0.5):
    """(the route taken, the relative error of its clipped sum against the loop)."""
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert supported(model, params) is not None

    def loss_fn(*batch):
        return nn.functional.cross_entropy(model(*batch[:-1]), batch[-1], reduction="none")

    summed, route = route_clipped_sum(model, loss_fn, (*_inputs(x), y), params, C)
    want = loop_reference(model, x, y, C)
    return route, float((summed.total - want).norm() / want.norm())


def _inputs(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


class Attend(nn.Module):
    """An attention layer on x (n, L, E) as its tests call it: self-attention, or with a query, key
    and value formed from x (``how``), masks built from x, its output alone."""

    def __init__(self, mha: nn.Module, how: str = "self", **call):
        super().__init__()
        self.mha, self.how, self.call = mha, how, call

    def forward(self, x):
        batch_first = getattr(self.mha, "batch_first", True)
        q = k = v = x if batch_first else x.transpose(0, 1)
        if self.how == "cross":  # the query from two positions, key and value one tensor
            q = q[:, :2] if batch_first else q[:2]
        if (
            self.how == "three"
        ):  # query, key and value three tensors: three slices of the packed weight
            k, v = 2 * q, torch.tanh(q)
        if self.how == "widths":  # a key and a value of the widths kdim, vdim: x's first features
            k, v = torch.tanh(q[..., : self.mha.kdim]), 2 * q[..., : self.mha.vdim]
        if self.how == "memory":  # key and value one tensor of width kdim = vdim
            k = v = torch.tanh(q[..., : self.mha.kdim])
        call = dict(self.call)
        if call.pop("padding", False):  # a key padding mask read off the example itself
            call["key_padding_mask"] = (torch.arange(x.shape[1]) >= 3).expand(x.shape[:2])
        out = self.mha(q, k, v, **call)[0]
        return out if batch_first else out.transpose(0, 1)


class Layers(nn.Module):
    """A Transformer layer on x (n, L, E); the decoder's memory is x itself."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        if isinstance(self.layer, nn.TransformerDecoderLayer):
            return self.layer(x, torch.tanh(x))
        return self.layer(x)


ZOO = {
    "mha-self": (
        lambda: Attend(nn.MultiheadAttention(8, 2, batch_first=True), need_weights=False),
        (5, 8),
    ),
    "mha-self-weights-seq-first": (lambda: Attend(nn.MultiheadAttention(8, 2)), (5, 8)),
    "mha-cross-no-bias": (
        lambda: Attend(nn.MultiheadAttention(8, 4, bias=False, batch_first=True), "cross"),
        (5, 8),
    ),
    "mha-three-inputs-zero-attn": (
        lambda: Attend(nn.MultiheadAttention(8, 2, add_zero_attn=True, batch_first=True), "three"),
        (4, 8),
    ),
    "mha-padding-mask": (
        lambda: Attend(
            nn.MultiheadAttention(6, 3, batch_first=True), padding=True, need_weights=False
        ),
        (5, 6),
    ),
    "mha-causal": (
        lambda: Attend(
            nn.MultiheadAttention(6, 2, batch_first=True),
            attn_mask=nn.Transformer.generate_square_subsequent_mask(4, dtype=F64),
            is_causal=True,
            need_weights=False,
        ),
        (4, 6),
    ),
    "mha-kdim-vdim": (
        lambda: Attend(nn.MultiheadAttention(8, 2, kdim=5, vdim=3, batch_first=True), "widths"),
        (5, 8),
    ),
    "mha-kdim-memory-no-bias-seq-first": (
        lambda: Attend(nn.MultiheadAttention(6, 3, bias=False, kdim=4, vdim=4), "memory"),
        (4, 6),
    ),
    "mha-kdim-padding-zero-attn": (
        lambda: Attend(
            nn.MultiheadAttention(6, 2, kdim=4, vdim=5, add_zero_attn=True, batch_first=True),
            "widths",
            padding=True,
            need_weights=False,
        ),
        (5, 6),
    ),
    "mha-bias-kv": (
        lambda: Attend(nn.MultiheadAttention(8, 2, add_bias_kv=True, batch_first=True)),
        (5, 8),
    ),
    "mha-bias-kv-cross-mask-seq-first": (
        lambda: Attend(
            nn.MultiheadAttention(6, 2, add_bias_kv=True),
            "cross",
            attn_mask=torch.linspace(-1, 0, 8, dtype=F64).reshape(2, 4),
        ),
        (4, 6),
    ),
    "mha-bias-kv-kdim-vdim-padding-zero-attn": (
        lambda: Attend(
            nn.MultiheadAttention(
                8, 4, kdim=3, vdim=5, add_bias_kv=True, add_zero_attn=True, batch_first=True
            ),
            "widths",
            padding=True,
        ),
        (5, 8),
    ),
    "transformer-encoder-layer": (
        lambda: Layers(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)),
        (4, 8),
    ),
    "transformer-encoder-layer-norm-first": (
        lambda: Layers(
            nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True)
        ),
        (4, 8),
    ),
    "transformer-decoder-layer": (
        lambda: Layers(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True)),
        (3, 8),
    ),
    "rmsnorm": (lambda: nn.RMSNorm(6), (3, 6)),
    "rmsnorm-eps-2d": (lambda: nn.RMSNorm((3, 6), eps=1e-3), (3, 6)),
    "conv1d-same-reflect": (
        lambda: nn.Conv1d(2, 4, 4, padding="same", padding_mode="reflect"),
        (2, 9),
    ),
    "conv1d-valid-dilated": (lambda: nn.Conv1d(2, 4, 3, padding="valid", dilation=2), (2, 11)),
    "conv2d-same": (lambda: nn.Conv2d(2, 3, (3, 4), padding="same"), (2, 6, 5)),
    "conv2d-same-dilated-circular": (
        lambda: nn.Conv2d(2, 3, 3, padding="same", dilation=2, padding_mode="circular"),
        (2, 6, 6),
    ),
    "conv2d-reflect": (lambda: nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), (2, 5, 5)),
    "conv2d-replicate-stride": (
        lambda: nn.Conv2d(2, 3, 3, padding=2, stride=2, padding_mode="replicate"),
        (2, 7, 6),
    ),
    "conv2d-groups": (lambda: nn.Conv2d(4, 6, 3, padding=1, groups=2), (4, 5, 5)),
    "conv2d-depthwise": (lambda: nn.Conv2d(3, 6, 3, groups=3, bias=False), (3, 6, 6)),
    "conv1d-groups-same": (lambda: nn.Conv1d(4, 4, 3, padding="same", groups=4), (4, 8)),
    "conv3d": (lambda: nn.Conv3d(2, 3, 3, padding=1), (2, 4, 5, 4)),
    "conv3d-strided-dilated-groups": (
        lambda: nn.Conv3d(4, 2, (2, 3, 2), stride=(1, 2, 2), dilation=(2, 1, 2), groups=2),
        (4, 5, 6, 6),
    ),
    "conv3d-same-replicate": (
        lambda: nn.Conv3d(2, 2, 3, padding="same", padding_mode="replicate"),
        (2, 3, 4, 4),
    ),
    "conv-transpose1d-stride-output-padding": (
        lambda: nn.ConvTranspose1d(2, 4, 3, stride=2, padding=1, output_padding=1),
        (2, 5),
    ),
    "conv-transpose1d-dilated-output-padding": (  # output_padding ≥ stride: a column no input reads
        lambda: nn.ConvTranspose1d(2, 3, 3, dilation=2, output_padding=1),
        (2, 5),
    ),
    "conv-transpose2d": (lambda: nn.ConvTranspose2d(2, 3, 3), (2, 4, 4)),
    "conv-transpose2d-stride-past-kernel-groups": (  # gaps that only the bias reaches
        lambda: nn.ConvTranspose2d(4, 6, 2, stride=3, groups=2),
        (4, 3, 3),
    ),
    "conv-transpose2d-everything": (
        lambda: nn.ConvTranspose2d(
            4,
            6,
            (3, 2),
            stride=(2, 3),
            padding=(1, 0),
            output_padding=(1, 2),
            groups=2,
            dilation=(1, 2),
        ),
        (4, 4, 3),
    ),
    "conv-transpose2d-depthwise-no-bias": (
        lambda: nn.ConvTranspose2d(3, 3, 3, stride=2, padding=1, groups=3, bias=False),
        (3, 4, 4),
    ),
    "conv-transpose3d": (lambda: nn.ConvTranspose3d(2, 2, 2, stride=2), (2, 2, 3, 2)),
    "conv-transpose3d-everything": (
        lambda: nn.ConvTranspose3d(
            4,
            2,
            (2, 3, 2),
            stride=(3, 1, 2),
            padding=(1, 1, 0),
            output_padding=(2, 0, 1),
            groups=2,
            dilation=(1, 2, 1),
        ),
        (4, 3, 3, 2),
    ),
}


class Decoder(nn.Module):
    """A ConvTranspose2d run twice in one forward: on the example's image with an output size asked
    for, and on two images made from it (an example's rows are two calls and three images)."""

    def __init__(self):
        super().__init__()
        self.up, self.out = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1), nn.LazyLinear(2)

    def forward(self, x):  # x (n, 2, 4, 4)
        one = self.up(x, output_size=(8, 8))  # output_padding 1 in both dimensions
        two = self.up(torch.cat([x, x.flip(-1)], 1).reshape(-1, 2, 4, 4))
        return self.out(torch.cat([one.flatten(1), two.reshape(x.shape[0], -1)], 1).tanh())


def decoder_case():
    torch.manual_seed(0)
    model = Decoder().to(F64)
    x = torch.randn(6, 2, 4, 4, dtype=F64)
    model(x)  # the lazy read-out's shape, before the parameters are listed
    return model, x, torch.randint(0, 2, (6,))


def partly_frozen_attention_case():
    """Separate q, k, v weights and bias_k, bias_v, q's weight and bias_v frozen: each part counts
    its own."""
    torch.manual_seed(0)
    model, x, y = case(
        Attend(
            nn.MultiheadAttention(8, 2, kdim=5, vdim=3, add_bias_kv=True, batch_first=True),
            "widths",
        ),
        (5, 8),
    )
    model.layer.mha.q_proj_weight.requires_grad_(False)
    model.layer.mha.bias_v.requires_grad_(False)
    return model, x, y


class Bags(nn.Module):
    """An EmbeddingBag on integer ids (n, L), a bag per row, with per-sample weights read off the
    ids if asked; ``offsets``: the same bags passed as 1-D ids and an offset per row."""

    def __init__(self, bag: nn.EmbeddingBag, weighted: bool = False, offsets: bool = False):
        super().__init__()
        self.bag, self.weighted, self.offsets = bag, weighted, offsets
        self.out = nn.Linear(bag.embedding_dim, 2)

    def forward(self, ids):
        weights = (ids % 3 + 1).to(torch.float64) / 3 if self.weighted else None
        if not self.offsets:
            return self.out(torch.tanh(self.bag(ids, per_sample_weights=weights)))
        offsets = torch.arange(0, ids.numel(), ids.shape[-1])
        return self.out(torch.tanh(self.bag(ids.reshape(-1), offsets)))


IDS = {
    "embedding-padding-idx": lambda: Head(nn.Embedding(12, 4, padding_idx=0), 6 * 4),
    "embedding-bag-sum": lambda: Bags(nn.EmbeddingBag(12, 4, mode="sum")),
    "embedding-bag-mean-padding-idx": lambda: Bags(
        nn.EmbeddingBag(12, 4, mode="mean", padding_idx=0)
    ),
    "embedding-bag-sum-weighted-padding-idx": lambda: Bags(
        nn.EmbeddingBag(12, 4, mode="sum", padding_idx=3), True
    ),
    "embedding-bag-sum-offsets": lambda: Bags(nn.EmbeddingBag(12, 4, mode="sum"), offsets=True),
}


def ids_case(make):
    """Ids (7, 6) with repeats, one id three times in a row, padding ids (left out, and out of a
    mean's count), under an Embedding or an EmbeddingBag (per-sample weights too)."""
    torch.manual_seed(0)
    model = make().to(F64)
    ids = torch.randint(0, 12, (7, 6))
    ids[2] = 0  # a row of padding alone (mean-padding): an empty bag
    ids[3, :3] = 5  # one id three times in a row
    return model, ids, torch.randint(0, 2, (7,))


@pytest.mark.parametrize(
    "conv, side",
    [
        (lambda: nn.Conv2d(4, 4, 3, padding="same", groups=2, padding_mode="reflect"), 5),
        (lambda: nn.ConvTranspose2d(4, 4, 3, stride=2, output_padding=1, groups=2), 12),
    ],
    ids=["grouped-conv", "conv-transpose"],
)
def test_a_conv_whose_norms_overflow_in_float32_is_scaled_per_example(conv, side):
    """An example of 1e20 in float32 (no saturating activation, so its gradient is of that size):
    its squared norm overflows, the rows are scaled per example (a transposed conv's: the input and
    the per-example gradients, its bias's sums on their own), and the clipped sum still equals the
    float64 loop."""
    torch.manual_seed(3)
    model = nn.Sequential(conv(), nn.Flatten(), nn.Linear(4 * side * side, 2))
    x, y = torch.randn(6, 4, 5, 5), torch.randint(0, 2, (6,))
    x[2] *= 1e20

    def loss_fn(xb, yb):
        return nn.functional.cross_entropy(model(xb), yb, reduction="none")

    summed, route = route_clipped_sum(model, loss_fn, (x, y), dict(model.named_parameters()), 0.5)
    assert route == "layers" and torch.isfinite(summed.total).all()
    want = loop_reference(model.double(), x.double(), y, 0.5)
    assert float((summed.total.double() - want).norm() / want.norm()) < 1e-5


@pytest.mark.parametrize(
    "make", [lambda: nn.Conv2d(4, 4, 3, groups=2), lambda: nn.ConvTranspose2d(4, 4, 3)]
)
def test_a_conv_whose_bias_alone_is_trained_leaves_a_non_finite_example_out(make):
    """Weight frozen, bias trained, one example non-finite: it gets weight 0 and the others' clipped
    sum is the loop's over them (its bias sums were once multiplied by that 0, giving nan)."""
    torch.manual_seed(3)
    conv = make()
    model = nn.Sequential(conv, nn.Flatten(), nn.LazyLinear(2))
    model(torch.randn(1, 4, 5, 5))
    conv.weight.requires_grad_(False)
    x, y = torch.randn(6, 4, 5, 5), torch.randint(0, 2, (6,))
    x[1, 0, 0, 0] = float("nan")

    def loss_fn(xb, yb):
        return nn.functional.cross_entropy(model(xb), yb, reduction="none")

    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    summed, route = route_clipped_sum(model, loss_fn, (x, y), params, 0.5)
    assert route == "layers" and summed.nonfinite == 1
    keep = torch.tensor([0, 2, 3, 4, 5])
    want = loop_reference(model.double(), x[keep].double(), y[keep], 0.5)
    assert float((summed.total.double() - want).norm() / want.norm()) < 1e-5


# The layers the per-layer route does not take, with the route each takes and why: rows of the docs'
# table. Each constructor is checked to have no kind (or to be refused), so the table cannot claim a
# slow route for a layer that became fast.
OTHERS = {
    "RNN, GRU, LSTM with dropout between layers in train mode, or a subclass's own forward": (
        lambda: nn.LSTM(3, 4, num_layers=2, dropout=0.5),
        "loop",
        "the unrolled forward draws no dropout; the fused kernel has no vmap batching rule",
    ),
    "EmbeddingBag mode='max', or 1-D input with offsets": (
        lambda: nn.EmbeddingBag(10, 4, mode="max"),
        "vmap (sparse=True: loop)",
        "max sends each dimension's gradient to one id; offsets: not yet read by the per-layer route",
    ),
    "BatchNorm*d in train mode": (
        lambda: nn.BatchNorm1d(4),
        "refused",
        "it normalises by the batch's statistics: no example's loss is its own",
    ),
    "Lazy layers (LazyLinear, LazyConv2d, ...) before their first forward": (
        lambda: nn.LazyLinear(3),
        "refused",
        "no shape yet: run one forward on public inputs first",
    ),
}


def layer_table() -> str:
    """docs/layers.md's table, from the kinds table (KINDS) and OTHERS."""
    from dpnc.tier.layer_kinds import layer_rows

    lines = ["| layer | route | per-example gradient, or why not fast |", "|---|---|---|"]
    lines += [f"| {name} | per-layer | {product} |" for name, product in layer_rows()]
    lines += [f"| {name} | {route} | {why} |" for name, (_, route, why) in OTHERS.items()]
    return "\n".join(lines) + "\n"


DOC = Path(__file__).resolve().parents[2] / "docs" / "layers.md"
LAYER_TABLE = "<!-- layer table: generated -->\n", "<!-- end of the layer table -->"


def test_the_docs_table_is_generated_from_the_kinds_table():
    for make, route, _ in OTHERS.values():
        module = make()
        if route == "refused":  # by the model checks or the no-route check, before any batch
            try:
                refuse_no_route(module, dict(module.named_parameters()))
            except ValueError:
                continue
            assert validate_model(module, dropout=False)
        else:
            assert kind(module) is None
    assert layer_table() in DOC.read_text(), "regenerate: python tests/suites/test_layer_zoo.py"


def test_an_embedding_bag_called_with_offsets_is_left_to_vmap_and_exact():
    class Offsets(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag, self.out = nn.EmbeddingBag(12, 4, mode="sum"), nn.Linear(4, 2)

        def forward(self, ids):  # each example's ids as one flat bag
            return self.out(self.bag(ids.reshape(-1), torch.tensor([0])))

    torch.manual_seed(0)
    model = Offsets().to(F64)
    params = dict(model.named_parameters())
    ids, y = torch.randint(0, 12, (5, 4)), torch.randint(0, 2, (5,))

    def loss_fn(xb, yb):
        return nn.functional.cross_entropy(model(xb), yb, reduction="none")

    summed, route = route_clipped_sum(model, loss_fn, (ids, y), params, 0.5)
    want = loop_reference(model, ids, y, 0.5)
    assert route != "layers" and float((summed.total - want).norm() / want.norm()) < 1e-12


class Recurrent(nn.Module):
    """A recurrent layer on x (n, T, in), transposed for a layer that is not batch-first, under a
    linear head. Unpacked, the head reads the last step's output (``read="out"``) or the last
    layer's h_n (``"h"``). Given lengths, x is packed (``sort``: enforce_sorted) and the head reads
    h_n, or (``"pad"``) the mean of the output over each sequence's own steps from
    ``pad_packed_sequence(total_length=T)``. ``state``: an initial state of the example's own (tanh
    of its first step's features)."""

    def __init__(self, rnn: nn.Module, read: str = "h", sort: bool = True, state: bool = False):
        super().__init__()
        width = (getattr(rnn, "proj_size", 0) or rnn.hidden_size) * (1 + rnn.bidirectional)
        self.rnn, self.read, self.sort, self.state = rnn, read, sort, state
        self.out = nn.Linear(width if read != "h" else width // (1 + rnn.bidirectional), 2)

    def forward(self, x, lengths=None):
        rnn, first = self.rnn, self.rnn.batch_first
        seq = x if first else x.transpose(0, 1)
        if lengths is not None:
            seq = pack_padded_sequence(seq, lengths, batch_first=first, enforce_sorted=self.sort)
        hx = None
        if self.state:
            layers = rnn.num_layers * (1 + rnn.bidirectional)
            h0 = torch.tanh(x[:, 0, : rnn.hidden_size]).expand(layers, -1, -1)
            hx = (h0, 2 * h0) if isinstance(rnn, nn.LSTM) else h0
        out, h = rnn(seq, hx)
        h = h[0] if isinstance(h, tuple) else h
        if self.read == "h":
            return self.out(torch.tanh(h[-1]))
        if self.read == "pad":
            padded, own = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
            return self.out(padded.sum(1) / own.unsqueeze(1).to(padded.dtype))
        return self.out(torch.tanh(out[:, -1] if first else out[-1]))


class Classifier(nn.Module):
    """Embedding, an LSTM on the packed ids (unsorted lengths), a linear head on the last hidden
    state."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 6, padding_idx=0)
        self.lstm, self.head = nn.LSTM(6, 5, batch_first=True), nn.Linear(5, 2)

    def forward(self, ids, lengths):
        packed = pack_padded_sequence(
            self.embed(ids), lengths, batch_first=True, enforce_sorted=False
        )
        return self.head(self.lstm(packed)[1][0][-1])


LENGTHS = torch.tensor([5, 2, 4, 1, 5, 3, 4])  # unequal, unsorted; sorted for enforce_sorted
# RNN (tanh, relu), GRU and LSTM, batch-first or not, 1 or 2 layers, one or two directions, with or
# without bias, proj_size, an initial state, packed with unequal lengths (sorted or not) and read by
# h_n or by pad_packed_sequence: each weight's calls over the time steps summed before the norm.
RECURRENT = {
    "rnn-tanh": (lambda: Recurrent(nn.RNN(3, 4, batch_first=True), "out"), None),
    "rnn-relu-seq-first-no-bias": (
        lambda: Recurrent(nn.RNN(3, 4, nonlinearity="relu", bias=False), "out"),
        None,
    ),
    "gru": (lambda: Recurrent(nn.GRU(3, 4, batch_first=True), "out"), None),
    "gru-2-layers-bidirectional-seq-first": (
        lambda: Recurrent(nn.GRU(3, 4, num_layers=2, bidirectional=True)),
        None,
    ),
    # hidden 8: W_hh's norm by the ghost norm (5 steps · (8 + 32) < 8 · 32)
    "lstm-seq-first-ghost-norm": (lambda: Recurrent(nn.LSTM(3, 8), "out"), None),
    "lstm-2-layers-bidirectional-state": (
        lambda: Recurrent(
            nn.LSTM(3, 3, num_layers=2, bidirectional=True, batch_first=True), "out", state=True
        ),
        None,
    ),
    "lstm-proj-bidirectional": (
        lambda: Recurrent(nn.LSTM(3, 5, proj_size=2, bidirectional=True, batch_first=True), "out"),
        None,
    ),
    "lstm-packed-sorted": (lambda: Recurrent(nn.LSTM(3, 4, batch_first=True)), "sorted"),
    "lstm-packed-unsorted-2-layers-bidirectional-seq-first": (
        lambda: Recurrent(nn.LSTM(3, 4, num_layers=2, bidirectional=True), sort=False),
        "unsorted",
    ),
    "gru-packed-unsorted-bidirectional-pad": (
        lambda: Recurrent(nn.GRU(3, 4, bidirectional=True, batch_first=True), "pad", sort=False),
        "unsorted",
    ),
    "rnn-relu-packed-sorted-2-layers-state-pad": (
        lambda: Recurrent(
            nn.RNN(3, 3, num_layers=2, nonlinearity="relu"), "pad", sort=True, state=True
        ),
        "sorted",
    ),
    "lstm-packed-unsorted-bidirectional-state-no-bias": (
        lambda: Recurrent(
            nn.LSTM(3, 3, bidirectional=True, bias=False, batch_first=True), sort=False, state=True
        ),
        "unsorted",
    ),
    "lstm-proj-packed-unsorted-pad": (
        lambda: Recurrent(nn.LSTM(3, 5, proj_size=3, batch_first=True), "pad", sort=False),
        "unsorted",
    ),
}


def _recurrent_case(make, lengths, seed=0):
    torch.manual_seed(seed)
    model = make().to(F64)
    for p in model.parameters():  # non-trivial biases
        p.data.add_(0.1 * torch.randn_like(p))
    x, y = torch.randn(len(LENGTHS), 5, 3, dtype=F64), torch.randint(0, 2, (len(LENGTHS),))
    if lengths is None:
        return model, x, y
    if lengths == "sorted":  # enforce_sorted: the batch longest first
        order = LENGTHS.argsort(descending=True, stable=True)
        return model, (x, LENGTHS[order]), y
    return model, (x, LENGTHS), y


def opacus_recurrent_case(rnn):
    """Opacus's DPRNN, DPGRU, DPLSTM: their cells' Linear layers are called once per step (several
    calls of one Linear, summed), their parameters listed again under nn.LSTM's names (an alias, not
    a tied weight)."""
    cls = getattr(pytest.importorskip("opacus.layers"), rnn)
    return _recurrent_case(
        lambda: Recurrent(cls(3, 4, num_layers=2, bidirectional=True, batch_first=True), "out"),
        None,
    )


def classifier_case():
    torch.manual_seed(0)
    model = Classifier().to(F64)
    ids = torch.randint(1, 20, (len(LENGTHS), 5))
    ids[torch.arange(5) >= LENGTHS.unsqueeze(1)] = 0  # padding past each length
    return model, (ids, LENGTHS), torch.randint(0, 2, (len(LENGTHS),))


class Unpadded(Recurrent):
    """Reads the packed output where the route cannot follow: ``pad_packed_sequence`` without
    total_length (torch cuts each example to its own length) or with one shorter than the padded
    input, or the packed ``data``."""

    def __init__(self, how: str):
        super().__init__(nn.LSTM(3, 4, batch_first=True), sort=False)
        self.how = how

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out = self.rnn(packed)[0]
        if self.how == "data":
            return self.out(out.data.sum(0, keepdim=True))
        total = (
            4 if self.how == "short-total-length" else None
        )  # shorter than x, not than a sequence
        return self.out(pad_packed_sequence(out, batch_first=True, total_length=total)[0].amax(1))


@pytest.mark.parametrize("how", ["no-total-length", "short-total-length", "data"])
def test_a_packed_output_read_where_the_route_cannot_follow_takes_the_loop_and_inference_is_unchanged(
    how,
):
    """The route gives way (nothing recorded, everything put back), DPOptimizer's "auto" then takes
    the loop, exact; the layer's own fused forward runs outside the route, as before."""
    torch.manual_seed(0)
    model, lengths = Unpadded(how).to(F64), LENGTHS.clamp(max=4)
    x, y = torch.randn(len(LENGTHS), 5, 3, dtype=F64), torch.randint(0, 2, (len(LENGTHS),))
    before = model(x, lengths)
    params = dict(model.named_parameters())

    def loss_fn(xb, lb, yb):
        return nn.functional.cross_entropy(model(xb, lb), yb, reduction="none")

    assert layer_clipped_sum(model, loss_fn, (x, lengths, y), params, 0.5) is None
    assert "forward" not in vars(model.rnn) and "_pack_padded_sequence" not in vars(torch._VF)
    assert torch.equal(model(x, lengths), before)
    summed, route = route_clipped_sum(
        model, loss_fn, (x, lengths, y), params, 0.5, per_example="loop"
    )
    want = loop_reference(model, (x, lengths), y, 0.5)
    assert route == "loop" and float((summed.total - want).norm() / want.norm()) < 1e-12


def test_a_recurrent_layer_with_dropout_between_layers_in_train_mode_is_not_on_the_route():
    lstm = nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    assert kind(lstm) is None and supported(lstm, dict(lstm.named_parameters())) is None
    assert kind(lstm.eval()) is not None


@pytest.mark.parametrize("trained", ["head only", "biases"])
def test_a_frozen_or_bias_only_recurrent_layer_keeps_the_fast_route(trained):
    """A frozen LSTM under a trained head still runs unrolled (its fused kernel has no vmap rule);
    with its biases alone trained (BitFit), each Linear view's bias is its products' Σ_t g_t."""
    model, x, y = _recurrent_case(
        lambda: Recurrent(nn.LSTM(3, 4, bidirectional=True, batch_first=True), sort=False),
        "unsorted",
    )
    for name, p in model.rnn.named_parameters():
        p.requires_grad_(trained == "biases" and name.startswith("bias"))
    route, error = fast_route_error(model, x, y)
    assert route == "layers" and error < 1e-12, (route, error)


OPACUS_RNN = ("DPRNN", "DPGRU", "DPLSTM")


def zoo_case(name):
    make, shape = ZOO[name]
    torch.manual_seed(0)  # the layer's own initialisation too: Opacus's errors depend on it
    return case(make(), shape)


# Every configuration of the zoo: name → (model, inputs, labels), each checked against the loop and
# listed, with Opacus's error on it, in docs/layers.md's zoo table.
CASES = {
    **{name: partial(zoo_case, name) for name in ZOO},
    "conv-transpose2d-twice-output-size": decoder_case,
    "mha-kdim-vdim-bias-kv-partly-frozen": partly_frozen_attention_case,
    **{name: partial(ids_case, make) for name, make in IDS.items()},
    **{name: partial(_recurrent_case, *spec) for name, spec in RECURRENT.items()},
    **{f"opacus-{rnn.lower()}": partial(opacus_recurrent_case, rnn) for rnn in OPACUS_RNN},
    "embedding-lstm-packed-classifier": classifier_case,
}
# The cases the per-layer route gives way on, and the route DPOptimizer's "auto" takes then.
ROUTES = {"embedding-bag-sum-offsets": "vmap"}
ZOO_TABLE = "<!-- zoo table: generated -->\n", "<!-- end of the zoo table -->"


def zoo_rows() -> dict[str, list[str]]:
    """docs/layers.md's zoo table as committed: case → [dpnc's route, its error, Opacus's]."""
    block = DOC.read_text().split(ZOO_TABLE[0])[1].split(ZOO_TABLE[1])[0]
    rows = [line.strip("| ").split(" | ") for line in block.splitlines()[2:]]
    return {name.strip("`"): cells for name, *cells in rows}


@pytest.mark.parametrize("name", CASES)
def test_each_zoo_case_takes_its_route_and_equals_the_loop(name):
    route, error = fast_route_error(*CASES[name]())
    assert route == ROUTES.get(name, "layers") and error < 1e-12, (route, error)
    assert zoo_rows()[name][0] == route, "regenerate: python tests/suites/test_layer_zoo.py"


def test_the_zoo_table_lists_every_case_with_a_dpnc_error_below_1e_12():
    rows = zoo_rows()
    assert list(rows) == list(CASES), "regenerate: python tests/suites/test_layer_zoo.py"
    assert all(_small(error) for _, error, _ in rows.values()), rows


def _small(cell: str) -> bool:
    """A committed error cell that says below 1e-12."""
    return cell.startswith("< ") and float(cell[2:]) <= 1e-12


@pytest.mark.parametrize("name", CASES)
def test_the_opacus_column_is_what_opacus_computes(name):
    """Opacus's errors recomputed; below 1e-12 the power of ten may differ between machines."""
    opacus = pytest.importorskip("opacus")
    if f"| Opacus {opacus.__version__} error |" not in DOC.read_text():
        pytest.skip("the table was made with another Opacus version")
    got, committed = opacus_error(*CASES[name]()), zoo_rows()[name][2]
    assert got == committed or (_small(got) and _small(committed)), (got, committed)


def magnitude(error: float) -> str:
    """An error as every machine writes it: two significant digits from 1e-3 up, else the power of
    ten it lies below (1e-15 at the least), so the table does not move with rounding's last bits."""
    if not error < 1e-3:
        return f"{error:#.2g}".rstrip(".")  # 0.40, 1.1, 12
    return f"< 1e-{min(15, math.floor(-math.log10(error)))}" if error > 0 else "< 1e-15"


def opacus_error(model, x, y, C=0.5) -> str:
    """Opacus's hooks (``GradSampleModule``, loss summed) on a case: each per-sample gradient
    clipped to C exactly (its optimizer divides by the norm + 1e-6), summed; the relative error
    against the loop, or the error Opacus raised."""
    from opacus import GradSampleModule

    want = loop_reference(model, x, y, C)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            wrapped = GradSampleModule(model, loss_reduction="sum")
            loss = nn.functional.cross_entropy(wrapped(*_inputs(x)), y, reduction="sum")
            loss.backward()
    except NotImplementedError:
        return "not supported"
    except Exception as error:  # any other refusal or crash: its class
        return f"raises {type(error).__name__}"
    grads = [p.grad_sample for p in model.parameters() if p.requires_grad]
    if any(g is None for g in grads):
        return "no per-sample gradient"
    rows = torch.cat([g.reshape(len(y), -1) for g in grads], 1)
    got = (C / rows.norm(dim=1)).clamp(max=1.0) @ rows
    return magnitude(float((got - want).norm() / want.norm()))


def zoo_table() -> str:
    """The zoo table, every case run through dpnc and Opacus."""
    from opacus import __version__

    lines = [
        f"| case | dpnc route | dpnc error | Opacus {__version__} error |",
        "|---|---|---|---|",
    ]
    for name, make in CASES.items():
        route, error = fast_route_error(*make())
        lines.append(f"| `{name}` | {route} | {magnitude(error)} | {opacus_error(*make())} |")
    return "\n".join(lines) + "\n"


def _between(text: str, markers: tuple[str, str], table: str) -> str:
    head, rest = text.split(markers[0])
    return head + markers[0] + table + markers[1] + rest.split(markers[1])[1]


if __name__ == "__main__":  # rewrite the two tables in docs/layers.md between their markers
    text = _between(DOC.read_text(), LAYER_TABLE, layer_table())
    DOC.write_text(_between(text, ZOO_TABLE, zoo_table()))
