"""Parameters moved along seeded random directions, with the direction never stored.

Zeroth-order methods move the parameters along a random direction u and back; u is regenerated from
its seed each time it is needed (MeZO's seed trick, Malladi et al. 2023), so a step's memory is
inference's. :class:`FlatSpace` holds a float64 vector, :class:`ModuleSpace` a model's parameters.
See docs/dpzero.md, "How a direction is drawn", for the definition of u(seed)."""

from __future__ import annotations

import math
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import torch

from dpnc.options import DIRECTIONS  # one home with the optimizers' option choices

__all__ = [
    "CHUNK",
    "GROUP",
    "STREAM",
    "FlatSpace",
    "ModuleSpace",
    "ParameterSpace",
    "Piece",
]

GROUP = (
    1 << 20
)  # entries of u per generator (a multiple of CHUNK); part of the definition of u(seed)
# The definition of u(seed) where d > GROUP: 1, one generator over every tensor (dpnc before 26 Nov
# 2026); 2, groups. A journal records it, and a resume that would replay steps drawn by another
# definition is refused.
STREAM = 2
CHUNK = (
    1 << 18
)  # entries of u drawn at a time on the CPU (a multiple of 16; 1 MB of float32: few Python calls)

Piece = Callable[[int, int, torch.Tensor], None]


class ParameterSpace:
    """Base: seeded directions over a list of tensors and the bookkeeping of a pending
    perturbation.

    Directions: ``"gaussian"`` (u ~ N(0, I_d), the experiments) or ``"sphere"`` (u uniform on the
    sphere of radius √d, the theory), which needs ‖z‖ first: one extra seeded pass, cached per seed.
    A step costs three passes over the parameters (to x + λu, to x − λu, then :meth:`update_`,
    which undoes the pending perturbation as it updates), not MeZO's four.
    """

    def __init__(
        self, shapes: list[torch.Size], dtype: torch.dtype, device: torch.device, direction: str
    ) -> None:
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}; got {direction!r}")
        self.distribution = direction
        self.runs: tuple[int, ...] = ()  # leading dimensions of independent runs (a FlatSpace grid)
        self._shapes, self._dtype, self._device = shapes, dtype, device
        self.d = sum(math.prod(s) for s in shapes)
        self._groups = _groups([math.prod(s) for s in shapes])
        self._offset: float | torch.Tensor = 0.0  # x = x₀ + offset·u(seed) while perturbed
        self._seed: int | None = None
        self._sphere_scale: tuple[int, float] | None = None

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of x (of the parameters, for a model)."""
        return self._dtype

    # --- directions ---------------------------------------------------------------------------

    def directions(self, seed: int) -> Iterator[torch.Tensor]:
        """u(seed), one tensor per parameter tensor (all of them drawn before the first is
        yielded)."""
        _check_seed(seed)
        scale = self._scale(seed)
        us = [torch.empty(shape, dtype=self._dtype, device=self._device) for shape in self._shapes]

        def scaled(
            g: int, i: int, start: int, z: torch.Tensor
        ) -> None:  # z: u's own entries, drawn in place
            if scale != 1.0:
                z.mul_(scale)

        self._draw(seed, scaled, into=[u.view(-1) for u in us])
        yield from us

    def direction(self, seed: int) -> torch.Tensor:
        """u(seed) materialised as one flat vector of length d (for tests and small problems)."""
        return torch.cat([u.reshape(-1) for u in self.directions(seed)])

    def each_piece(self, seed: int, fn: Piece) -> None:
        """Call ``fn(i, start, z)`` for pieces of u(seed) covering it once: z holds entries start,
        start + 1, … of tensor i's flat u. On the CPU, pieces are at most :data:`CHUNK` (+ 15) long,
        share their group's buffer (z is valid only during the call) and come from several threads
        at once: ``fn`` may only touch its piece's entries. Elsewhere each piece is a whole group
        segment, in order."""
        _check_seed(seed)
        scale = self._scale(seed)
        self._draw(seed, lambda g, i, start, z: fn(i, start, z if scale == 1.0 else z.mul_(scale)))

    def _draw(
        self,
        seed: int,
        fn: Callable[[int, int, int, torch.Tensor], None],
        into: list[torch.Tensor] | None = None,
    ) -> None:
        """``fn(g, i, start, z)`` for the pieces of the unscaled Gaussian draw, g the group
        (each_piece's order). ``into``: flat tensors of u's shapes that the pieces are drawn into,
        in place (z is then their view: no buffer, no copy); the same numbers, as a piece's draw
        depends only on its length and the generator."""
        cpu = self._device.type == "cpu"

        def draw(g: int) -> None:
            gen = torch.Generator(device=self._device).manual_seed(_group_seed(seed, g))
            buffer = torch.empty(CHUNK + 15, dtype=self._dtype) if cpu and into is None else None
            for i, start, stop in self._groups[g]:
                for a, b in _spans(stop - start, CHUNK if cpu else None):
                    if into is not None:
                        z = into[i][start + a : start + b]
                    elif buffer is not None:
                        z = buffer[: b - a]
                    else:
                        z = torch.empty(b - a, dtype=self._dtype, device=self._device)
                    fn(g, i, start + a, z.normal_(generator=gen))

        _run(draw, len(self._groups), parallel=cpu)

    def _scale(self, seed: int) -> float:
        if self.distribution == "gaussian":
            return 1.0
        if self._sphere_scale is None or self._sphere_scale[0] != seed:
            # The same draws as each_piece(), in the parameters' dtype, squared and summed in
            # float64: per group in order, then over the groups in order, so the sum does not depend
            # on the threads.
            squares = [0.0] * len(self._groups)

            def square(g: int, i: int, start: int, z: torch.Tensor) -> None:
                squares[g] += float(z.double().square().sum())

            self._draw(seed, square)
            self._sphere_scale = (seed, math.sqrt(self.d / sum(squares)))
        return self._sphere_scale[1]

    # --- moves ----------------------------------------------------------------------------------

    def perturb_(self, seed: int, scale: float | torch.Tensor) -> None:
        """Move x by scale·u(seed) (temporarily: the next :meth:`update_` along ``seed`` undoes
        it)."""
        self._check_pending(seed)
        self._seed = seed
        self._offset = self._offset + scale
        self._move(seed, scale)

    def update_(self, seed: int, coeff: float | torch.Tensor) -> None:
        """Set x ← x₀ + coeff·u(seed), x₀ the unperturbed point (one pass, undoing any
        perturbation)."""
        self._check_pending(seed)
        self._commit(seed, coeff)
        self._offset, self._seed = 0.0, None

    def restore_(self) -> None:
        """Undo a pending perturbation."""
        if self._seed is not None:
            self.update_(self._seed, 0.0)

    def _check_pending(self, seed: int) -> None:
        if self._seed is not None and self._seed != seed and _nonzero(self._offset):
            raise RuntimeError(
                f"parameters are perturbed along seed {self._seed}; restore_() or "
                f"update_() it before moving along seed {seed}"
            )

    def _move(self, seed, scale):
        raise NotImplementedError

    def _commit(self, seed, coeff):
        raise NotImplementedError


class FlatSpace(ParameterSpace):
    """A vector x of shape (..., d), float64 by default; leading dimensions are independent runs.

    The K runs of x of shape (K, d) share their directions (a hyper-parameter grid run as one
    tensor computation). The unperturbed anchor x₀ is kept and perturbed points are computed from
    it as x₀ + s·u, so perturb and restore are bit-exact and a trajectory equals a plain reference
    that evaluates at x ± λu.

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

    def add_(self, delta: torch.Tensor) -> None:
        """x ← x + delta for an arbitrary (materialised) vector, e.g. d-dimensional noise."""
        if self._seed is not None and _nonzero(self._offset):
            raise RuntimeError("restore_() the pending perturbation before add_()")
        self.anchor = self.anchor + delta
        self.x = self.anchor

    def project_(self, region) -> None:
        """x ← Π_region(x), the nearest point of a :class:`~dpnc.problems.base.Region` (None:
        unchanged)."""
        if region is not None:
            if self._seed is not None and _nonzero(self._offset):
                raise RuntimeError("restore_() the pending perturbation before project_()")
            self.anchor = region.project(self.anchor)
            self.x = self.anchor


class ModuleSpace(ParameterSpace):
    """The trainable parameters of a model (or any list of tensors), moved in place; restore is
    exact up to floating-point rounding (a few ulps).

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
        super().__init__(
            [p.shape for p in self.params], self.params[0].dtype, self.params[0].device, direction
        )
        if self.dtype in (torch.float16, torch.bfloat16):
            warnings.warn(
                f"parameters in {self.dtype}: moving them along u and back rounds at every pass, so they "
                "drift by rounding each step even at lr 0, and a perturbation below their resolution is "
                "lost. Keep the parameters in float32 and run the forward passes in half precision "
                "(torch.autocast)",
                UserWarning,
                stacklevel=3,
            )

    @torch.no_grad()
    def _move(self, seed, scale):
        alpha = float(scale)
        flat = [p.view(-1) if p.is_contiguous() else None for p in self.params]
        # A non-contiguous tensor has no flat view to add a piece into: its u is gathered whole
        # first.
        whole = {
            i: torch.empty(p.numel(), dtype=p.dtype, device=p.device)
            for i, p in enumerate(self.params)
            if flat[i] is None
        }

        def add(i: int, start: int, z: torch.Tensor) -> None:
            if flat[i] is not None:
                flat[i][start : start + len(z)].add_(z, alpha=alpha)
            else:
                whole[i][start : start + len(z)].copy_(z)

        self.each_piece(seed, add)
        for i, u in whole.items():
            self.params[i].add_(u.view(self.params[i].shape), alpha=alpha)

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


def _groups(sizes: list[int]) -> list[list[tuple[int, int, int]]]:
    """The generator groups of tensors of these sizes: lists of (tensor, start, stop), at most GROUP
    entries each; consecutive tensors share a group while they fit, a tensor larger than GROUP is
    cut into its own."""
    groups: list[list[tuple[int, int, int]]] = []
    current: list[tuple[int, int, int]] = []
    filled = 0
    for i, n in enumerate(sizes):
        if current and (n > GROUP or filled + n > GROUP):
            groups.append(current)
            current, filled = [], 0
        if n > GROUP:
            groups.extend([(i, start, min(start + GROUP, n))] for start in range(0, n, GROUP))
        else:
            current.append((i, 0, n))
            filled += n
    return groups + [current] if current else groups


def _group_seed(seed: int, g: int) -> int:
    """Group g's generator seed: the step's seed for group 0, else a splitmix64 hash of (seed,
    g)."""
    if g == 0:
        return seed
    z = (seed + g * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) >> 1  # 63 bits: a non-negative seed


_POOL: tuple[tuple[int, int], ThreadPoolExecutor] | None = None
_POOL_LOCK = threading.Lock()


def _run(work: Callable[[int], None], n: int, *, parallel: bool) -> None:
    """work(0), …, work(n − 1): in order here, or (``parallel``, n > 1) over torch.get_num_threads()
    threads (torch releases the GIL while it draws and adds)."""
    threads = torch.get_num_threads() if parallel and n > 1 else 1
    if threads == 1:
        for g in range(n):
            work(g)
        return
    global _POOL
    key = (threads, os.getpid())  # a forked child inherits the pool object but not its threads
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != key:
            if _POOL is not None and _POOL[0][1] == key[1]:
                _POOL[1].shutdown(wait=False)
            _POOL = (key, ThreadPoolExecutor(threads, thread_name_prefix="dpnc-directions"))
        pool = _POOL[1]
    grad = (
        torch.is_grad_enabled()
    )  # grad mode is per thread: the workers take the caller's (no_grad)

    def run(g: int) -> None:
        with torch.set_grad_enabled(grad):
            work(g)

    for future in [pool.submit(run, g) for g in range(n)]:
        future.result()  # re-raises a worker's exception


def _spans(n: int, chunk: int | None) -> list[tuple[int, int]]:
    """[start, stop) pieces of n entries, ``chunk`` long (None: one piece); a last piece shorter
    than 16 joins the one before, so that torch draws exactly what one call of n would (module
    docstring)."""
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
