"""``nn.RNN``, ``nn.GRU`` and ``nn.LSTM`` on the per-layer route: each weight matrix read as a
Linear product.

torch runs a recurrent layer as one fused kernel, which vmap cannot batch and no hook sees into, so
during the route's forward it runs as a loop of ``F.linear`` calls over the time steps. What each
product is and how packed sequences are read: docs/layers.md."""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import rnn

__all__ = ["Padded", "Part", "held", "parts", "takes", "unrolled"]


class NotOnRoute(RuntimeError):
    """A recurrent call the unrolled forward does not reproduce: the per-layer route gives way (it
    catches RuntimeError), and the step takes another route."""


def takes(module: nn.Module) -> bool:
    """Whether the unrolled forward computes what ``module``'s own does: torch's forward (not a
    subclass's), and no dropout between layers in train mode."""
    if not isinstance(module, nn.RNNBase):
        return False
    own = type(module).forward in (nn.RNN.forward, nn.GRU.forward, nn.LSTM.forward)
    return own and not (module.dropout > 0 and module.training and module.num_layers > 1)


class Part(nn.Linear):
    """One weight matrix of a recurrent layer with its bias (``weight_ih_l0`` and ``bias_ih_l0``),
    as a Linear: the unit whose products the route forms. A view of the layer's own parameters,
    never called as a module."""

    def __init__(self, layer: nn.Module, weight: str, bias: str | None) -> None:
        nn.Module.__init__(self)
        self.layer = [layer]  # in a list: not registered as a submodule
        self.weight = getattr(layer, weight)
        self.bias = getattr(layer, bias) if bias is not None else None
        self.out_features, self.in_features = self.weight.shape
        self.names = {"weight": weight, "bias": bias}  # local name → the layer's


def held(module: nn.Module) -> Iterator[tuple[nn.Module, str, torch.Tensor]]:
    """(the layer whose products give its gradient, its local name there, the parameter) for each
    parameter ``module`` holds itself: a recurrent layer's through its :class:`Part` views; an alias
    is left to the submodule it names (Opacus's DPRNN, DPGRU, DPLSTM register their cells' Linear
    parameters again under nn.LSTM's names, ``new_to_old`` mapping them back)."""
    if takes(module):
        for part in parts(module):
            for local, p in part.named_parameters():
                yield part, local, p
        return
    aliases = getattr(module, "new_to_old", None)
    for local, p in module.named_parameters(recurse=False):
        old = aliases.get(local) if isinstance(aliases, dict) else None
        if old is not None:
            path, _, name = old.rpartition(".")
            if module.get_submodule(path)._parameters.get(name) is p:
                continue
        yield module, local, p


def parts(module: nn.Module) -> list[Part]:
    """The Linear views of a recurrent layer's weights, layer by layer, direction by direction."""
    found = []
    for k in range(module.num_layers):
        for suffix in ("", "_reverse")[: 2 if module.bidirectional else 1]:
            for which in ("ih", "hh", "hr") if module.proj_size > 0 else ("ih", "hh"):
                bias = f"bias_{which}_l{k}{suffix}" if module.bias and which != "hr" else None
                found.append(Part(module, f"weight_{which}_l{k}{suffix}", bias))
    return found


class Padded(rnn.PackedSequence):
    """A packed sequence as the route keeps it: ``data`` holds every step of every sequence,
    time-major ((T·n, *) for n sequences padded to T), ``batch_sizes`` (T,) how many are still
    running at each step (0 past the longest). Both differ from torch's (rows and steps it has not),
    so only the unrolled layers (which take the fields by position) and ``pad_packed_sequence`` with
    ``total_length`` >= T read them; any other read raises :class:`NotOnRoute`, before torch's own
    check of total_length (a ValueError) could."""

    @property
    def data(self) -> torch.Tensor:  # type: ignore[override]
        return _read(self, 0)

    @property
    def batch_sizes(self) -> torch.Tensor:  # type: ignore[override]
        return _read(self, 1)


def _read(packed: Padded, field: int) -> torch.Tensor:
    caller = sys._getframe(2)
    if caller.f_code is not _PAD_CODE:
        raise NotOnRoute("a padded sequence is read only by the recurrent layers")
    total = caller.f_locals.get("total_length")
    if total is None or total < tuple.__getitem__(packed, 1).shape[0]:
        raise NotOnRoute("pad_packed_sequence on the route needs total_length >= the padded width")
    return tuple.__getitem__(packed, field)


_PAD_CODE = rnn.pad_packed_sequence.__code__


@contextmanager
def unrolled(model: nn.Module, owners, record: Callable) -> Iterator[None]:
    """While open, every recurrent layer of ``model`` that :func:`takes` runs its unrolled forward,
    each call on a weight of a :class:`Part` among ``owners`` (the route's layers) calling
    ``record(part, input, output, None)``, and packing keeps the padded rows (:class:`Padded`); all
    put back on leaving."""
    layers = [m for m in model.modules() if takes(m)]
    if not layers:
        yield
        return
    recorded = {
        (id(part.layer[0]), part.names["weight"]): part for part in owners if isinstance(part, Part)
    }

    def linear(layer, name, x, weight, bias=None):
        out = F.linear(x, weight, bias)
        part = recorded.get((id(layer), name))
        if part is not None:
            record(part, x, out, None)
        return out

    vf = torch._VF  # torch.nn.utils.rnn calls _VF's functions by attribute, at call time
    saved = {m: m.__dict__.get("forward") for m in layers}
    ours: dict[int, torch.Tensor] = {}  # batch_sizes of the padded sequences made here, by id

    def init(data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            # the inverse permutation by argsort, which vmap batches (torch's scatter_ it does not)
            unsorted_indices = torch.argsort(sorted_indices)
        ours[id(batch_sizes)] = batch_sizes
        return Padded(data, batch_sizes, sorted_indices, unsorted_indices)

    def pad(data, batch_sizes, batch_first, padding_value, total_length):
        if ours.get(id(batch_sizes)) is not batch_sizes:  # a packed sequence of torch's own
            return torch._C._VariableFunctions._pad_packed_sequence(
                data, batch_sizes, batch_first, padding_value, total_length
            )
        x, mask = _steps(data, batch_sizes)
        x = torch.where(_wide(mask, x), x, torch.full_like(x, padding_value))
        if total_length > x.shape[0]:
            tail = x.new_full((total_length - x.shape[0], *x.shape[1:]), padding_value)
            x = torch.cat([x, tail])
        # each sequence's length, on the CPU as torch's
        lengths = (batch_sizes.unsqueeze(1) > torch.arange(x.shape[1])).sum(0)
        return (x.transpose(0, 1) if batch_first else x), lengths

    old_init = rnn._packed_sequence_init
    vf._pack_padded_sequence, vf._pad_packed_sequence = _pack, pad
    rnn._packed_sequence_init = init
    for m in layers:
        m.forward = types.MethodType(functools.partial(_forward, linear=linear), m)
    try:
        yield
    finally:
        del vf._pack_padded_sequence, vf._pad_packed_sequence
        rnn._packed_sequence_init = old_init
        for m, forward in saved.items():
            if forward is None:
                del m.forward
            else:
                m.forward = forward


def _pack(input: torch.Tensor, lengths: torch.Tensor, batch_first: bool):
    """``_VF._pack_padded_sequence`` keeping every step: (data (T·n, *) time-major, batch_sizes
    (T,)). Lengths torch refuses are not packed here (:class:`NotOnRoute`): the route gives way, and
    the example's own forward says why."""
    x = input.transpose(0, 1) if batch_first else input
    T, n = x.shape[:2]
    _check_lengths(lengths, T)
    steps = torch.arange(T, device=lengths.device)
    batch_sizes = (lengths.unsqueeze(0) > steps.unsqueeze(1)).sum(1)
    return x.reshape(T * n, *x.shape[2:]), batch_sizes


def _check_lengths(lengths: torch.Tensor, T: int) -> None:
    """NotOnRoute unless every length is in 1..T and each example's lengths are sorted longest first
    (as torch's packing requires): checked on the values beneath the route's vmap."""
    from torch._C._functorch import get_unwrapped, is_batchedtensor, maybe_get_bdim

    if lengths.device.type != "cpu":
        raise NotOnRoute("lengths must be on the CPU")
    values = lengths
    while is_batchedtensor(values):  # the examples' lengths, an example's own last
        values = get_unwrapped(values).movedim(maybe_get_bdim(values), 0)
    rows = values.reshape(-1, values.shape[-1]) if values.ndim else values.reshape(1, 1)
    if not ((rows >= 1).all() and (rows <= T).all() and (rows[:, :-1] >= rows[:, 1:]).all()):
        raise NotOnRoute("lengths torch's packing refuses")


def _steps(data: torch.Tensor, batch_sizes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A padded sequence's rows as (T, n, *) and which of them run, (T, n) (sorted longest
    first)."""
    x = data.reshape(batch_sizes.shape[0], -1, *data.shape[1:])
    running = torch.arange(x.shape[1], device=batch_sizes.device)
    return x, (running.unsqueeze(0) < batch_sizes.unsqueeze(1)).to(x.device)


def _wide(mask: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return mask.reshape(*mask.shape, *[1] * (x.ndim - mask.ndim))


def _cell(mode: str, gx, gh, h, c):
    """One step of torch's cell from the two projections gx = W_ih x + b_ih, gh = W_hh h + b_hh:
    (h', c'), by torch's gate equations:

    * RNN: h' = tanh or relu(gx + gh);
    * GRU: r, z = σ(gx_{r,z} + gh_{r,z}), n = tanh(gx_n + r ⊙ gh_n), h' = (1 − z) ⊙ n + z ⊙ h;
    * LSTM: i, f, o = σ(·), g = tanh(·) of gx + gh; c' = f ⊙ c + i ⊙ g; h' = o ⊙ tanh(c') (then
      W_hr h' where ``proj_size`` > 0, outside the cell).
    """
    if mode == "LSTM":
        i, f, g, o = (gx + gh).chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c
    if mode == "GRU":
        xr, xz, xn = gx.chunk(3, -1)
        hr, hz, hn = gh.chunk(3, -1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return (1 - z) * n + z * h, None
    return (torch.tanh if mode == "RNN_TANH" else torch.relu)(gx + gh), None


def _forward(self: nn.RNNBase, input, hx=None, *, linear: Callable):
    """The layer's forward as a loop over the time steps of ``F.linear`` calls (``linear``) and
    :func:`_cell`; returns what torch's does: (output, h_n), or (output, (h_n, c_n)) for an LSTM; a
    :class:`Padded` output for a padded input, whose steps past each sequence's length keep its
    state and output 0, as torch's packed kernels leave them."""
    lstm, packed = self.mode == "LSTM", isinstance(input, rnn.PackedSequence)
    sorted_indices = unsorted_indices = mask = None
    unbatched = False
    if packed:
        if not isinstance(input, Padded):
            raise NotOnRoute("a packed sequence not packed during the route's forward")
        data, batch_sizes, sorted_indices, unsorted_indices = tuple(input)
        x, mask = _steps(data, batch_sizes)
        x = torch.where(_wide(mask, x), x, torch.zeros_like(x))  # the padding is never read
    else:
        unbatched = input.dim() == 2
        x = (
            input.unsqueeze(1)
            if unbatched
            else (input.transpose(0, 1) if self.batch_first else input)
        )
    dirs, n = 2 if self.bidirectional else 1, x.shape[1]
    width = self.proj_size if self.proj_size > 0 else self.hidden_size
    zero = x.new_zeros(())  # adds the route's batch dimension to a state shared by the examples
    if hx is None:
        h0 = x.new_zeros(self.num_layers * dirs, n, width)
        c0 = x.new_zeros(self.num_layers * dirs, n, self.hidden_size) if lstm else None
    else:
        h0, c0 = hx if lstm else (hx, None)
        if unbatched:
            h0, c0 = h0.unsqueeze(1), (c0.unsqueeze(1) if lstm else None)
        if sorted_indices is not None:
            h0 = h0.index_select(1, sorted_indices)
            c0 = c0.index_select(1, sorted_indices) if lstm else None
        h0, c0 = h0 + zero, (c0 + zero if lstm else None)
    last_h, last_c = [], []
    for k in range(self.num_layers):
        outputs = []
        for d in range(dirs):
            i = k * dirs + d
            out, h, c = _direction(self, linear, x, mask, (k, d), h0[i], c0[i] if lstm else None)
            outputs.append(out)
            last_h.append(h)
            last_c.append(c)
        x = torch.cat(outputs, -1) if dirs > 1 else outputs[0]
    h_n = torch.stack(last_h)
    c_n = torch.stack(last_c) if lstm else None
    if packed:
        output = Padded(x.reshape(-1, x.shape[-1]), batch_sizes, sorted_indices, unsorted_indices)
        if unsorted_indices is not None:
            h_n = h_n.index_select(1, unsorted_indices)
            c_n = c_n.index_select(1, unsorted_indices) if lstm else None
    else:
        output = x.squeeze(1) if unbatched else (x.transpose(0, 1) if self.batch_first else x)
        if unbatched:
            h_n, c_n = h_n.squeeze(1), (c_n.squeeze(1) if lstm else None)
    return output, ((h_n, c_n) if lstm else h_n)


def _direction(self: nn.RNNBase, linear: Callable, x, mask, where: tuple[int, int], h, c):
    """Layer k, direction d (1: reversed), ``where`` = (k, d), over x (T, n, in): its outputs (T, n,
    width) and last h, c. A masked step keeps the state and outputs 0. ``linear(layer, weight's
    name, x, weight, bias)``."""
    k, d = where
    suffix = "_reverse" if d else ""

    def project(which, x):  # W_which x + b_which by the recording linear
        name = f"weight_{which}_l{k}{suffix}"
        bias = getattr(self, f"bias_{which}_l{k}{suffix}") if self.bias and which != "hr" else None
        return linear(self, name, x, getattr(self, name), bias)

    gx = project("ih", x)  # every step at once: one call, T·n rows
    T = x.shape[0]
    outputs = [None] * T
    for t in range(T - 1, -1, -1) if d else range(T):
        h_new, c_new = _cell(self.mode, gx[t], project("hh", h), h, c)
        if self.proj_size > 0:
            h_new = project("hr", h_new)
        if mask is None:
            h, c, outputs[t] = h_new, c_new, h_new
            continue
        running = mask[t].unsqueeze(-1)
        h = torch.where(running, h_new, h)
        c = torch.where(running, c_new, c) if c is not None else None
        outputs[t] = torch.where(running, h_new, torch.zeros_like(h_new))
    return torch.stack(outputs), h, c
