"""The convolution kinds of the per-layer route (:mod:`dpnc.tier.layer_kinds`): Conv1d/2d/3d, whose
per-example weight gradient is g · unfold(a)ᵀ per group, and ConvTranspose1d/2d/3d, the same product
with the roles of the input and the output gradient exchanged (a transposed convolution is the
adjoint of a convolution)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from dpnc.tier.layer_base import Layer, _product, _scale, _times


def _unfold(x, kernel, dilation, padding, stride) -> torch.Tensor:
    """im2col over 1, 2 or 3 spatial dimensions: (n, in·∏k, L), each column channel-major as the
    weight's (in, *k) entries are laid out (a 1-D convolution as a 2-D one of height 1; F.unfold
    takes only 2-D)."""
    dims = len(kernel)
    if dims == 1:
        x, kernel, dilation = x.unsqueeze(-2), (1, *kernel), (1, *dilation)
        padding, stride = (0, *padding), (1, *stride)
    if dims <= 2:
        return F.unfold(x, kernel, dilation=dilation, padding=padding, stride=stride)
    if any(padding):
        x = F.pad(x, [p for p in reversed(padding) for _ in (0, 1)])
    for d, (k, step, every) in enumerate(zip(kernel, stride, dilation)):
        # windows of the dilated extent, then every dilation-th entry: (n, in, *out, *k) after the
        # last
        x = x.unfold(2 + d, every * (k - 1) + 1, step)[..., ::every]
    n, channels = x.shape[:2]
    return x.permute(0, 1, 5, 6, 7, 2, 3, 4).reshape(n, channels * math.prod(kernel), -1)


class _Conv(Layer):
    """Conv1d, Conv2d and Conv3d, every padding (a number, 'same', 'valid', any padding_mode),
    stride, dilation and groups: ∇W_i = g_i · unfold(a_i)ᵀ per group."""

    # the docs' layer table
    product = "g · unfold(a)ᵀ per group; any padding, padding_mode, stride, dilation"

    axis = 2  # (b, ·, L): an example's k images and a layer's calls side by side along L

    @staticmethod
    def rows(module, a, g):
        """(b, in·∏k, k'·L) unfolded inputs and (b, out, k'·L) output gradients: an example's k'
        images side by side."""
        b, dims = a.shape[0], module.weight.ndim - 2  # 1, 2 or 3 spatial dimensions
        x = a.reshape(-1, *a.shape[a.ndim - dims - 1 :])  # (b·k', in, *spatial)
        padding = module.padding
        if isinstance(padding, str) or module.padding_mode != "zeros":
            # 'same' can pad one side more than the other, and reflect/replicate/circular pad with
            # the input's own entries: the input padded as the module's forward pads it, then
            # unfolded without padding
            mode = "constant" if module.padding_mode == "zeros" else module.padding_mode
            x = F.pad(x, module._reversed_padding_repeated_twice, mode=mode)
            padding = (0,) * dims
        cols = _unfold(x, module.kernel_size, module.dilation, padding, module.stride)
        g = g.reshape(
            -1, g.shape[g.ndim - dims - 1], math.prod(g.shape[g.ndim - dims :])
        )  # (b·k', out, L)
        if cols.shape[0] == b:
            return cols, g
        return (
            cols.reshape(b, -1, *cols.shape[1:]).transpose(1, 2).flatten(2),
            g.reshape(b, -1, *g.shape[1:]).transpose(1, 2).flatten(2),
        )

    # the unfolded inputs are large: scale the (B, out, in·k·k) gradients formed from them
    scale_inputs = False

    def __init__(self, module, a, g, trained, scaled):
        super().__init__(module, a, g, trained, scaled)
        self._grads = None
        if "weight" in trained:  # ∇W_i = t_i·ĝ_i a_iᵀ = t_i·s_i·(scaled), s_i its own peak
            n, groups, rows = self.g.shape[0], module.groups, self.g.shape[-1]
            # group j's outputs read only its inputs: one (out/G, in/G·∏k) product per group,
            # stacked along the outputs as the weight (out, in/G, *k) is (ConvTranspose's (in,
            # out/G, *k): a and g exchanged)
            grads = torch.bmm(
                self.g.reshape(n * groups, -1, rows),
                self.a.reshape(n * groups, -1, rows).transpose(1, 2),
            ).reshape(n, module.weight.shape[0], -1)
            self._grads, self.s = (grads, None) if self.t is None else _scale(grads)

    def norms2(self):
        total = torch.zeros(self.g.shape[0], dtype=torch.float64, device=self.g.device)
        if "weight" in self.trained:
            total += _times(
                (self._grads**2).sum((1, 2)).to(torch.float64), _product(self.s, self.t), 2
            )
        if "bias" in self.trained:
            sums, scale = self.bias_rows()
            total += _times((sums**2).sum(-1).to(torch.float64), scale, 2)
        return total

    def bias_rows(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Each example's bias gradient, (b, out), and its scale (None: unscaled)."""
        return self.g.sum(2), self.t

    def weighted_sums(self, w, finite):
        sums = {}
        if "weight" in self.trained:
            grads = (
                self._grads
                if finite
                else torch.where(
                    (w > 0).reshape(-1, 1, 1), self._grads, torch.zeros_like(self._grads)
                )
            )
            ws = self._weights(w, _product(self.s, self.t), finite).reshape(-1)
            sums["weight"] = torch.einsum("b,boi->oi", ws, grads).reshape(self.module.weight.shape)
        if "bias" in self.trained:
            rows, scale = self.bias_rows()
            ws = self._weights(w, scale, finite).reshape(-1, 1)
            if not finite:  # 0·inf = nan: a non-finite example's sums are left out
                rows = torch.where(ws > 0, rows, torch.zeros_like(rows))
            sums["bias"] = (rows * ws).sum(0)
        return sums


class _ConvTranspose(_Conv):
    """ConvTranspose1d, ConvTranspose2d and ConvTranspose3d, every stride, padding, output_padding,
    dilation and groups. y = conv_transpose(a, W) is the adjoint of a convolution by W with the
    layer's kernel, stride, padding and dilation, so ∇W_i[c, o, k] = Σ_p a_i[c, p] · unfold(g_i)[o,
    k, p] per group: Conv's product with the unfolded output gradient in place of the input. The
    bias reads every output position, also those no weight reaches (output_padding's last rows, the
    gaps of a stride wider than the kernel): its gradient is Σ g."""

    product = "a · unfold(g)ᵀ per group, W (in, out/G, *k); bias: Σ g over every output position"

    @staticmethod
    def rows(module, a, g):
        """((b, out·∏k, k'·L) unfolded output gradients, (b, out, k') their sums) and (b, in, k'·L)
        inputs: an example's k' images side by side."""
        b, dims = a.shape[0], module.weight.ndim - 2
        x = a.reshape(-1, *a.shape[a.ndim - dims - 1 :])  # (b·k', in, *spatial)
        y = g.reshape(-1, *g.shape[g.ndim - dims - 1 :])  # (b·k', out, *spatial out)
        kernel, dilation, padding, stride = (
            module.kernel_size,
            module.dilation,
            module.padding,
            module.stride,
        )
        cols = _unfold(y, kernel, dilation, padding, stride)
        # a column per input position, and one more per dimension where output_padding ≥ stride: no
        # input reads it
        spans = zip(y.shape[2:], kernel, dilation, padding, stride)
        sizes = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, d, p, s in spans]
        cols = cols.reshape(*cols.shape[:2], *sizes)[(..., *(slice(n) for n in x.shape[2:]))]
        cols, x, sums = cols.flatten(2), x.flatten(2), y.flatten(2).sum(2)
        if x.shape[0] == b:
            return (cols, sums.unsqueeze(-1)), x
        return (
            cols.reshape(b, -1, *cols.shape[1:]).transpose(1, 2).flatten(2),
            sums.reshape(b, -1, sums.shape[-1]).transpose(1, 2),
        ), x.reshape(b, -1, *x.shape[1:]).transpose(1, 2).flatten(2)

    def __init__(self, module, a, g, trained, scaled):
        cols, sums = a
        super().__init__(module, cols, g, trained, scaled)
        sums = sums.sum(2)  # an example's images and the layer's calls
        self._bias = (sums, None) if not scaled else _scale(sums)

    def bias_rows(self):
        return self._bias
