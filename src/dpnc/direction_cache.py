"""A model's parameter space that generates each step's direction once and keeps it: opt-in, d numbers of memory.

:class:`~dpnc.space.ModuleSpace` regenerates u(seed) from its public seed every time it is needed: for x + λu, for
x − λu and for the update, three passes of the random-number generator over all d entries per step (the seed
trick: a step needs no more memory than inference). On a CPU the generator is the expensive part of those passes
(≈ 5 ms for d = 1.4M in fp32 on one core, the add itself ≈ 0.2 ms), and under data parallelism
(:mod:`dpnc.distributed`) every rank does it in full, so it is the part of a step that does not shrink with more
processes. :class:`CachedModuleSpace` generates u(seed) once per seed into buffers it keeps and reuses them for
the three moves: one generator pass per step instead of three.

Same numbers: the buffers are filled by ``normal_`` from the same generator, tensor by tensor in the same order, as
:meth:`~dpnc.space.ParameterSpace.directions` draws them, so every move adds the very tensors the uncached space
would and the trajectory is bit for bit the same (tested).

Memory: one tensor per parameter tensor, d numbers in the parameters' dtype, on their device (kept between steps
and reused, so nothing is allocated per step): 5.7 MB for the 1.4M-parameter benchmark model, 91 MB for MiniLM
(22.7M, fp32), 540 MB for SmolLM2-135M (fp32). Use it where that memory is free (off by default in
:mod:`dpnc.optim`: ``cache_directions=True``).

The directions are public (regenerated from the logged seed), so keeping them changes nothing about privacy.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

from dpnc.space import ModuleSpace, _check_seed

__all__ = ["CachedModuleSpace"]


class CachedModuleSpace(ModuleSpace):
    """A :class:`~dpnc.space.ModuleSpace` whose direction u(seed) is generated once per seed and kept.

    Args:
        params, direction: as :class:`~dpnc.space.ModuleSpace`.

    Attributes:
        generated: how many times a direction was generated (public; one per step when each step has its own seed).
    """

    def __init__(self, params: Iterable[torch.Tensor], direction: str = "gaussian") -> None:
        super().__init__(params, direction)
        self._buffers: list[torch.Tensor] | None = None   # u(self._cached), one tensor per parameter tensor
        self._cached: int | None = None
        self.generated = 0

    def directions(self, seed: int) -> Iterator[torch.Tensor]:
        """u(seed), one tensor per parameter tensor: generated on the first call for ``seed``, then the kept buffers.

        The tensors are the cache's own: read them, do not change them in place.
        """
        _check_seed(seed)
        if self._cached != seed:
            self._generate(seed)
        return iter(self._buffers)

    @torch.no_grad()
    def _generate(self, seed: int) -> None:
        if self._buffers is None:
            self._buffers = [torch.empty(s, dtype=self._dtype, device=self._device) for s in self._shapes]
        self._cached = None   # a failure half-way leaves no stale seed behind
        gen = torch.Generator(device=self._device).manual_seed(seed)
        scale = self._scale(seed)
        for u in self._buffers:   # the draws of ParameterSpace.directions, in its order, into the kept tensors
            u.normal_(generator=gen)
            if scale != 1.0:
                u.mul_(scale)
        self._cached = seed
        self.generated += 1
