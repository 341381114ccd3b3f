"""Parameters moved along seeded random directions, with the direction never stored.

Zeroth-order methods move the parameters x along a random direction u and back:
``perturb_(seed, s)`` moves x by s·u(seed); ``update_(seed, c)`` leaves x at x₀ + c·u(seed), where x₀
is the unperturbed point, undoing any pending perturbation along the same seed in the same pass
(so a step costs three passes over the parameters, not MeZO's four). u is regenerated from its seed,
tensor by tensor, each time it is needed (MeZO's seed trick, Malladi et al. 2023): the memory of a
step is that of inference.

Two tiers share this interface:

* :class:`FlatSpace`: a float64 vector x ∈ R^d, optionally with leading batch dimensions (K, d) for
  K runs that share their directions (a hyper-parameter grid run as one tensor computation). It keeps
  the unperturbed anchor, so perturbed points are computed as x₀ + s·u from it: perturb/restore is
  bit-exact and a trajectory equals a plain reference that evaluates at x ± λu.
* :class:`ModuleSpace`: the trainable parameters of an ``nn.Module``, changed in place; restore is
  exact up to floating-point rounding (a few ulps).

Directions: ``"gaussian"`` (u ~ N(0, I_d), the experiments) or ``"sphere"`` (u uniform on the sphere
of radius √d, the theory), which needs ‖z‖ first: one extra seeded pass, cached per seed.

A :class:`ModuleSpace` on the CPU draws each tensor's u in pieces of :data:`CHUNK` entries into one small
buffer and adds each piece while it is in cache, instead of materialising the tensor's whole u (a
word-embedding matrix's is 47 MB in float32, freshly allocated and page-faulted in every pass). The pieces
are bit-identical to one ``torch.randn`` of the whole tensor: torch fills a tensor of ≥ 16 entries with
uniforms in order and transforms them 16 at a time, redrawing the last 16 when the size is not a multiple
of 16, so pieces whose sizes are multiples of 16 (the last one at least 16 long) consume the generator
exactly as one call does (checked in tests/test_space.py for every floating dtype).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import torch

DIRECTIONS = ("gaussian", "sphere")
CHUNK = 1 << 16   # entries of u drawn at a time on the CPU (a multiple of 16; 256 KB of float32 fits in cache)


class ParameterSpace:
    """Base: seeded directions over a list of tensors and the bookkeeping of a pending perturbation."""

    def __init__(self, shapes: list[torch.Size], dtype: torch.dtype, device: torch.device,
                 direction: str) -> None:
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}; got {direction!r}")
        self.distribution = direction
        self.runs: tuple[int, ...] = ()  # leading dimensions of independent runs (a FlatSpace grid)
        self._shapes, self._dtype, self._device = shapes, dtype, device
        self.d = sum(math.prod(s) for s in shapes)
        self._offset: float | torch.Tensor = 0.0  # x = x₀ + offset·u(seed) while perturbed
        self._seed: int | None = None
        self._sphere_scale: tuple[int, float] | None = None

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of x (of the parameters, for a model)."""
        return self._dtype

    # --- directions ---------------------------------------------------------------------------

    def directions(self, seed: int) -> Iterator[torch.Tensor]:
        """u(seed), one tensor per parameter tensor, regenerated from one generator in order."""
        _check_seed(seed)
        gen = torch.Generator(device=self._device).manual_seed(seed)
        scale = self._scale(seed)
        for shape in self._shapes:
            z = torch.randn(shape, generator=gen, dtype=self._dtype, device=self._device)
            yield z if scale == 1.0 else z.mul_(scale)

    def direction(self, seed: int) -> torch.Tensor:
        """u(seed) materialised as one flat vector of length d (for tests and small problems)."""
        return torch.cat([u.reshape(-1) for u in self.directions(seed)])

    def pieces(self, seed: int) -> Iterator[tuple[int, int, torch.Tensor]]:
        """u(seed) in pieces ``(i, start, z)``: z holds entries start, start + 1, … of tensor i's flat u.

        On the CPU the pieces are at most :data:`CHUNK` long and share one buffer, so each z is valid only
        until the next piece is drawn; elsewhere each piece is a whole tensor. Bit-identical to
        :meth:`directions` either way (see the module docstring).
        """
        _check_seed(seed)
        gen = torch.Generator(device=self._device).manual_seed(seed)
        scale = self._scale(seed)
        buffer = torch.empty(CHUNK + 15, dtype=self._dtype) if self._device.type == "cpu" else None
        for i, shape in enumerate(self._shapes):
            for start, stop in _spans(math.prod(shape), self._chunk(i)):
                z = buffer[:stop - start] if buffer is not None and stop - start <= len(buffer) else \
                    torch.empty(stop - start, dtype=self._dtype, device=self._device)
                z.normal_(generator=gen)
                yield i, start, z if scale == 1.0 else z.mul_(scale)

    def _chunk(self, i: int) -> int | None:
        """How many entries of tensor i's u to draw at a time (None: all at once)."""
        return CHUNK if self._device.type == "cpu" else None

    def _scale(self, seed: int) -> float:
        if self.distribution == "gaussian":
            return 1.0
        if self._sphere_scale is None or self._sphere_scale[0] != seed:
            gen = torch.Generator(device=self._device).manual_seed(seed)
            # The same draws as directions(), piece by piece: in the parameters' dtype, summed in float64
            # (in float64 the partial sums differ from one sum per tensor only by its last bits).
            sq = 0.0
            for i, shape in enumerate(self._shapes):
                for start, stop in _spans(math.prod(shape), self._chunk(i)):
                    z = torch.empty(stop - start, dtype=self._dtype, device=self._device).normal_(generator=gen)
                    sq += float(z.double().square().sum())
            self._sphere_scale = (seed, math.sqrt(self.d / sq))
        return self._sphere_scale[1]

    # --- moves ----------------------------------------------------------------------------------

    def perturb_(self, seed: int, scale: float | torch.Tensor) -> None:
        """Move x by scale·u(seed) (temporarily: the next :meth:`update_` along ``seed`` undoes it)."""
        self._check_pending(seed)
        self._seed = seed
        self._offset = self._offset + scale
        self._move(seed, scale)

    def update_(self, seed: int, coeff: float | torch.Tensor) -> None:
        """Set x ← x₀ + coeff·u(seed), x₀ the unperturbed point (one pass, undoing any perturbation)."""
        self._check_pending(seed)
        self._commit(seed, coeff)
        self._offset, self._seed = 0.0, None

    def restore_(self) -> None:
        """Undo a pending perturbation."""
        if self._seed is not None:
            self.update_(self._seed, 0.0)

    def _check_pending(self, seed: int) -> None:
        if self._seed is not None and self._seed != seed and _nonzero(self._offset):
            raise RuntimeError(f"parameters are perturbed along seed {self._seed}; restore_() or "
                               f"update_() it before moving along seed {seed}")

    def _move(self, seed, scale):
        raise NotImplementedError

    def _commit(self, seed, coeff):
        raise NotImplementedError


class FlatSpace(ParameterSpace):
    """A vector x of shape (..., d), float64 by default; leading dimensions are independent runs.

    Args:
        x: initial point(s); copied. ``x`` (the attribute) is always the current point.
        direction: ``"gaussian"`` or ``"sphere"``.
    """

    def __init__(self, x: torch.Tensor, direction: str = "gaussian") -> None:
        if not isinstance(x, torch.Tensor) or x.ndim < 1 or not x.is_floating_point():
            raise ValueError("x must be a floating-point tensor of shape (..., d)")
        super().__init__([x.shape[-1:]], x.dtype, x.device, direction)
        self.runs = tuple(x.shape[:-1])
        self.anchor = x.detach().clone()
        self.x = self.anchor

    def _move(self, seed, scale):
        u = self.direction(seed)
        offset = _column(self._offset, self.anchor)
        self.x = self.anchor if not _nonzero(self._offset) else self.anchor + offset * u

    def _commit(self, seed, coeff):
        self.anchor = self.anchor + _column(coeff, self.anchor) * self.direction(seed)
        self.x = self.anchor

    def _chunk(self, i):
        return None   # u is materialised whole anyway (x itself is d entries)

    def add_(self, delta: torch.Tensor) -> None:
        """x ← x + delta for an arbitrary (materialised) vector, e.g. d-dimensional noise."""
        if self._seed is not None and _nonzero(self._offset):
            raise RuntimeError("restore_() the pending perturbation before add_()")
        self.anchor = self.anchor + delta
        self.x = self.anchor

    def project_(self, region) -> None:
        """x ← Π_region(x), the nearest point of a :class:`~dpnc.problems.base.Region` (None: unchanged)."""
        if region is not None:
            if self._seed is not None and _nonzero(self._offset):
                raise RuntimeError("restore_() the pending perturbation before project_()")
            self.anchor = region.project(self.anchor)
            self.x = self.anchor


class ModuleSpace(ParameterSpace):
    """The trainable parameters of a model (or any list of tensors), moved in place.

    Args:
        params: the tensors (e.g. ``model.parameters()``); those with ``requires_grad=False`` are
            skipped, as they are not being trained.
        direction: ``"gaussian"`` or ``"sphere"``.
    """

    def __init__(self, params: Iterable[torch.Tensor], direction: str = "gaussian") -> None:
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("params must contain at least one tensor with requires_grad=True")
        devices = {p.device for p in self.params}
        dtypes = {p.dtype for p in self.params}
        if len(devices) > 1 or len(dtypes) > 1:
            raise ValueError(f"params must share one device and dtype; got {devices} and {dtypes}")
        super().__init__([p.shape for p in self.params], self.params[0].dtype, self.params[0].device,
                         direction)

    @torch.no_grad()
    def _move(self, seed, scale):
        alpha = float(scale)
        for i, start, z in self.pieces(seed):
            p = self.params[i]
            if len(z) == p.numel():
                p.add_(z.view(p.shape), alpha=alpha)
            else:
                p.view(-1)[start:start + len(z)].add_(z, alpha=alpha)

    def _chunk(self, i):
        # A non-contiguous tensor has no flat view to add a piece into: its u is drawn whole.
        return super()._chunk(i) if self.params[i].is_contiguous() else None

    @torch.no_grad()
    def _commit(self, seed, coeff):
        alpha = float(coeff) - float(self._offset)
        if alpha != 0.0:
            self._move(seed, alpha)


def _nonzero(value) -> bool:
    return bool(torch.any(value != 0)) if isinstance(value, torch.Tensor) else value != 0


def _column(value, like: torch.Tensor):
    """A per-run coefficient of shape (K,) as (K, 1) so it scales each run's row."""
    if isinstance(value, torch.Tensor) and value.ndim > 0:
        return value.to(like.dtype).reshape(*value.shape, *([1] * (like.ndim - value.ndim)))
    return value


def _spans(n: int, chunk: int | None) -> list[tuple[int, int]]:
    """[start, stop) pieces of n entries, ``chunk`` long (None: one piece); a last piece shorter than 16
    joins the one before, so that torch draws exactly what one call of n would (module docstring)."""
    if chunk is None:
        return [(0, n)]
    spans, start = [], 0
    while start < n:
        stop = min(start + chunk, n)
        if n - stop < 16:
            stop = n
        spans.append((start, stop))
        start = stop
    return spans


def _check_seed(seed: int) -> None:
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be an integer in [0, 2**63); got {seed!r}")
