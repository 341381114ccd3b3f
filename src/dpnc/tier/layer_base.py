"""What every layer kind of the per-layer route shares (:mod:`dpnc.tier.layer_kinds` maps layer
types to kinds): :class:`Layer`, one layer's input rows ``a`` and output gradients ``g`` over a
batch, and :class:`_Linear`, the product Σ_t g_t a_tᵀ that the attention's projections reuse; the
per-example scaling that keeps norms finite."""

from __future__ import annotations

import math

import torch
from torch import nn


def _scale(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``t`` divided per example by its largest magnitude, and those magnitudes (float64, one per
    example): norms formed from the scaled rows cannot overflow, whatever one row holds (an example
    of 1e20 in float32 has a finite gradient norm, as torch.func's route finds). A non-finite row
    stays non-finite (its weight is 0)."""
    peak = torch.linalg.vector_norm(t.detach().flatten(1), ord=math.inf, dim=1).clamp_min(
        torch.finfo(t.dtype).tiny
    )
    return t / peak.reshape(-1, *[1] * (t.ndim - 1)), peak.to(torch.float64)


def _product(*scales: torch.Tensor | None) -> torch.Tensor | None:
    """The per-example product of scale factors, None standing for 1 (rows kept unscaled, in
    float64)."""
    present = [s for s in scales if s is not None]
    if not present:
        return None
    return present[0] if len(present) == 1 else present[0] * present[1]


def _times(x: torch.Tensor, scale: torch.Tensor | None, power: int = 1) -> torch.Tensor:
    """x · scale^power per example, or x itself for unscaled rows (scale None)."""
    return x if scale is None else x * scale**power


class Layer:
    """One layer's input activations ``a`` and output gradients ``g`` over a batch, every call of
    the layer in one forward concatenated as further rows of each example (the gradient of a layer
    run k times is the sum of the k products): the per-example squared gradient norms and the
    weighted sums Σ_i w_i ∇θ_i of its ``trained`` parameters (local names; a frozen weight beside a
    trained bias, as in BitFit, counts for nothing).

    Overflow-safe: ``a`` and ``g`` are kept divided per example by their largest magnitudes ``s``
    and ``t`` (:func:`_scale`), so ∇W_i = s_i t_i ĝ_i â_iᵀ and ∇b_i = t_i Σ ĝ_i; the norms are
    formed from the scaled rows and multiplied back in float64, and the weights w_i s_i t_i are
    applied to the scaled rows. That costs two passes over every row, so the rows are first taken as
    they are (``scaled=False``: ``s``, ``t`` None) and scaled only where a norm comes out non-finite
    (:func:`layer_clipped_sum`)."""

    product = ""  # ∇θ_i in words, for the docs' layer table
    axis = 1  # the dimension along which an example's rows (and a layer's calls) lie
    scale_inputs = (
        True  # False: the layer scales what it forms from a (Conv2d: its per-example gradients)
    )

    def __init__(
        self, module: nn.Module, a: torch.Tensor, g: torch.Tensor, trained: set[str], scaled: bool
    ) -> None:
        self.module, self.trained, self.zeroed = module, trained, False
        if not scaled:  # the rows as they are (s, t None)
            self.a, self.g, self.s, self.t = a, g, None, None
            return
        if a.is_floating_point() and self.scale_inputs:
            self.a, self.s = _scale(a)
        else:
            self.a, self.s = a, None
        self.g, self.t = _scale(g)

    @staticmethod
    def handles(module: nn.Module) -> bool:
        """Whether this kind's products hold for ``module`` as configured (a subclass refuses what
        they do not)."""
        return True

    @staticmethod
    def inputs(module: nn.Module, args: tuple, kwargs: dict):
        """What of a call the products read: its first argument (a kind that reads more returns a
        tuple), or None for a call they do not hold for (the route then falls back)."""
        return args[0]

    @classmethod
    def of(
        cls,
        module: nn.Module,
        calls: list[tuple[torch.Tensor, torch.Tensor]],
        trained: set[str],
        scaled: bool,
        shared: dict,
    ) -> Layer:
        """The layer's rows over its ``calls`` (``cls``: the module's kind), each call's rows
        further rows of each example along :attr:`axis`; ``shared``: products the step's layers
        share (a Linear's Gram matrices of an input several layers read)."""

        def join(parts):  # rows of several tensors (ConvTranspose's): each joined
            if isinstance(parts[0], tuple):
                return tuple(join(list(p)) for p in zip(*parts))
            return parts[0] if len(parts) == 1 else torch.cat(parts, cls.axis)

        a, g = zip(*(cls.rows(module, a, g) for a, g in calls))
        layer = cls(module, join(list(a)), join(list(g)), trained, scaled)
        layer.shared = shared
        return layer

    @staticmethod
    def rows(
        module: nn.Module, a: torch.Tensor, g: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One call's (a, g) as (b, rows, width): every position of an example is a row."""
        b = a.shape[0]
        return a.reshape(b, -1, a.shape[-1]), g.reshape(b, -1, g.shape[-1])

    def _weights(self, w: torch.Tensor, scale: torch.Tensor | None, finite: bool) -> torch.Tensor:
        """w_i·scale_i broadcast over g's trailing dims, in g's dtype. Unless every example is
        ``finite``, an example of weight 0 (non-finite) has its rows of a and g zeroed first, since
        0·inf = nan."""
        if not finite and not self.zeroed:
            keep = w > 0
            self.g = torch.where(
                keep.reshape(-1, *[1] * (self.g.ndim - 1)), self.g, torch.zeros_like(self.g)
            )
            if self.a.is_floating_point():
                self.a = torch.where(
                    keep.reshape(-1, *[1] * (self.a.ndim - 1)), self.a, torch.zeros_like(self.a)
                )
            self.zeroed = True
        if (
            scale is None
        ):  # unscaled rows (exact in float64): w is 0 for a non-finite example already
            scaled = w
        else:
            scaled = w * scale if finite else torch.where(w > 0, w * scale, torch.zeros_like(scale))
        return scaled.to(self.g.dtype).reshape(-1, *[1] * (self.g.ndim - 1))


class _Linear(Layer):
    """Per example, ∇W_i = Σ_t g_it a_itᵀ and ∇b_i = Σ_t g_it. The squared weight norm by whichever
    costs less per example: ‖a‖²‖g‖² for one position; the ghost norm Σ_{t,s} (a_t·a_s)(g_t·g_s)
    from two (T, T) Gram matrices, T²·(in + out) multiplications, where that is below the T·in·out
    of the materialised (out, in) product. A Gram matrix of inputs is shared by the layers that read
    the same tensor (an attention's query, key and value)."""

    product = (
        "Σ_t g_t a_tᵀ, its norm by the ghost norm where that costs less"  # the docs' layer table
    )

    def __init__(self, module, a, g, trained, scaled) -> None:
        super().__init__(module, a, g, trained, scaled)
        self._g_sums = None

    def g_sums(self) -> torch.Tensor:
        """Σ_t g_it per example, (b, out): the bias's per-example gradient, formed once for its norm
        and its sum."""
        if self._g_sums is None:
            self._g_sums = self.g.sum(1)
        return self._g_sums

    def _gram(self, a: torch.Tensor) -> torch.Tensor:
        key = (a.data_ptr(), a.shape, a.stride())  # the same rows: the same (b, T, T) products
        if key not in self.shared:
            self.shared[key] = (
                a,
                torch.bmm(a, a.transpose(1, 2)),
            )  # a kept alive: its address stays its own
        return self.shared[key][1]

    def norms2(self) -> torch.Tensor:
        a, g = self.a, self.g
        T, d_in, d_out = a.shape[1], a.shape[2], g.shape[2]
        total = torch.zeros(a.shape[0], dtype=torch.float64, device=g.device)
        if "weight" in self.trained:
            if T == 1:  # ‖g aᵀ‖² = ‖a‖²‖g‖²
                hat = a.square().sum((1, 2)) * g.square().sum((1, 2))
            elif (
                T * (d_in + d_out) < d_in * d_out
            ):  # ghost norm: (B, T, T) Gram matrices, no (B, out, in) product
                hat = (self._gram(a) * torch.bmm(g, g.transpose(1, 2))).sum((1, 2))
            else:
                hat = (torch.bmm(g.transpose(1, 2), a) ** 2).sum((1, 2))
            total = total + _times(hat.to(torch.float64), _product(self.s, self.t), 2)
        if "bias" in self.trained:
            total = total + _times(self.g_sums().square().sum(-1).to(torch.float64), self.t, 2)
        return total

    def weighted_sums(self, w, finite):
        sums = {}
        if "weight" in self.trained:
            ws = self._weights(
                w, _product(self.s, self.t), finite
            )  # first: it zeroes a non-finite example's rows
            g, a = self.g, self.a
            if (
                a.shape[-1] < g.shape[-1]
            ):  # the weights onto the narrower rows: fewer multiplications
                a = a * ws.to(a.dtype)
            else:
                g = g * ws
            sums["weight"] = g.reshape(-1, g.shape[-1]).T @ a.reshape(
                -1, a.shape[-1]
            )  # Σ_{i,t} w_i g_it a_itᵀ
        if "bias" in self.trained:
            wt = self._weights(w, self.t, finite).reshape(1, -1)
            g_sums = (
                self.g_sums() if finite else self.g.sum(1)
            )  # rows of a non-finite example zeroed by _weights
            sums["bias"] = (wt @ g_sums).reshape(-1)
        return sums
