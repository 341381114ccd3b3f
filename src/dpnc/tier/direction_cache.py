"""A model's parameter space that generates each step's direction once and keeps it: opt-in, d
numbers of memory.

On a CPU, drawing u three times a step is the part of a zeroth-order step that does not shrink with
more processes; keeping it costs memory and changes no number. Cost and memory: docs/dpzero.md."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

from dpnc.space import ModuleSpace

__all__ = ["CachedModuleSpace"]


class CachedModuleSpace(ModuleSpace):
    """A :class:`~dpnc.space.ModuleSpace` whose direction u(seed) is drawn once per seed and kept.

    :class:`~dpnc.space.ModuleSpace` regenerates u(seed) from its public seed for x + λu, for
    x − λu and for the update: three generator passes over all d entries per step (the seed trick:
    a step needs no more memory than inference). On a CPU the generator is the expensive part
    (≈ 5 ms for d = 1.4M in fp32 on one core, the add itself ≈ 0.2 ms), and under data parallelism
    every rank does it in full. This space draws once per seed and adds the kept tensors as the
    uncached space adds u, whatever scheme :mod:`dpnc.space` uses, so the trajectory is bit for bit
    the same (tested). The kept tensors are d numbers in the parameters' dtype, on their device,
    until the next seed's are drawn (the old ones are let go first, so never 2d).

    Args:
        params, direction: as :class:`~dpnc.space.ModuleSpace`.

    Attributes:
        generated: how many times a direction was drawn (public; one per step when each step has its
            own seed).
    """

    def __init__(self, params: Iterable[torch.Tensor], direction: str = "gaussian") -> None:
        super().__init__(params, direction)
        self._kept: list[torch.Tensor] | None = (
            None  # u(self._cached), one tensor per parameter tensor
        )
        self._cached: int | None = None
        self.generated = 0

    def directions(self, seed: int) -> Iterator[torch.Tensor]:
        """u(seed), one tensor per parameter tensor: drawn on the first call for ``seed``, then the
        kept tensors.

        The tensors are the cache's own: read them, do not change them in place.
        """
        if self._cached != seed:
            self._kept, self._cached = (
                None,
                None,
            )  # let the last seed's go first; a failure leaves nothing stale
            self._kept = list(super().directions(seed))
            self._cached = seed
            self.generated += 1
        return iter(self._kept)

    @torch.no_grad()
    def _move(self, seed, scale):
        # Every move (x + λu, x − λu, and the update through _commit) adds the kept u, whichever way
        # the uncached space would draw and add it.
        for p, u in zip(self.params, self.directions(seed)):
            p.add_(u, alpha=float(scale))
