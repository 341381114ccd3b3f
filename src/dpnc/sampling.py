"""Data samplers that carry their own privacy event and draw their batches in secret.

A sampler chooses each step's batch and says how a release on it is accounted. Where that claims
amplification by subsampling, the batch is secret randomness: never logged, saved or returned, nor
its realised size (docs/privacy.md says why); means divide by the fixed B. The samplers:
docs/dpzero.md."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

import torch

from dpnc.checks import check_integer
from dpnc.privacy import interpret
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.release import BatchSource
from dpnc.privacy.releases import FixedSize, Gaussian, Poisson, Relation, Release, Sampled

__all__ = [
    "BatchClosure",
    "FullBatch",
    "PoissonSampler",
    "Sampler",
    "ShuffleSampler",
    "SinglePass",
    "batch_losses",
    "per_example_losses",
]


class Sampler(BatchSource, Protocol):
    """What every batch source implements: :class:`FullBatch`, :class:`PoissonSampler`,
    :class:`ShuffleSampler` and the make_private loader's :class:`~dpnc.batches.LoaderBatches`.
    Declared, so that no caller probes for a capability (``batch_size`` and ``release`` are
    :class:`~dpnc.privacy.release.BatchSource`'s)."""

    n: int  # the public number of examples (or slots) the batches are drawn from
    rate: float  # the sampling rate q of the release (1: the full batch)
    secret: bool  # the batch is secret randomness (its own entropy stream), or nothing is sampled
    # every rank's sample() is already the same batch: a data-parallel step sends no indices
    shared: bool

    def sample(self) -> torch.Tensor:
        """The next batch's indices."""
        ...

    def check_relation(self, relation: Relation | str) -> None:
        """Raise ValueError if the releases cannot be accounted under ``relation``."""
        ...


class FullBatch:
    """Every step uses all n examples (the DPZero theorems). Release: a plain Gaussian."""

    secret = True  # nothing is sampled, so nothing about the batch is hidden or needs to be
    # every rank's sample() is the same batch (all n): a data-parallel step sends no indices
    shared = True

    rate = 1.0  # no subsampling

    def __init__(self, n: int) -> None:
        check_integer(n=n)
        self.n = self.batch_size = n

    def sample(self) -> torch.Tensor:
        return torch.arange(self.n)

    def release(self, sensitivity: float, sigma: float) -> Release:
        return Gaussian(sensitivity, sigma)

    def check_relation(self, relation: Relation | str) -> None:
        """Every relation accounts a plain Gaussian."""


class _Subsampled:
    """A sampler whose releases are amplified by subsampling: it draws every batch from a secret
    stream."""

    shared = False  # each rank's draw is its own: a data-parallel group sends rank 0's

    def __init__(
        self, n: int, batch_size: int, *, rows: int | None = None, source: NoiseSource | None = None
    ) -> None:
        check_integer(n=n)
        check_integer(batch_size=batch_size)
        if batch_size > n:
            raise ValueError(f"batch_size must be <= n={n}; got {batch_size}")
        if rows is not None:
            check_integer(
                0, rows=rows
            )  # 0: every record dropped by a domain rule (no refusal decided by the data)
        if source is not None and not isinstance(source, NoiseSource):
            raise TypeError(f"source must be a NoiseSource; got {type(source).__name__}")
        self.n, self.batch_size = n, batch_size
        self.rate = batch_size / n
        # Which rows exist is private (under add/remove their number differs between neighbours): it
        # decides only which indices can be drawn, never the rate, the denominator B or the ledger.
        self._rows = n if rows is None else rows
        self._source = source if source is not None else NoiseSource()  # its own secret stream

    @classmethod
    def for_testing(cls, n: int, batch_size: int, *, seed: int, rows: int | None = None):
        """Reproducible batches for tests: *not private*, every release through it says so."""
        return cls(n, batch_size, rows=rows, source=NoiseSource.for_testing(seed))

    @property
    def secret(self) -> bool:
        """True when batches come from operating-system entropy (the amplified ε holds)."""
        return self._source.secret

    def sample(self) -> torch.Tensor:
        """The indices of the next batch. Secret: do not log them or their number."""
        raise NotImplementedError

    def _release(self, sensitivity: float, sigma: float) -> Release:
        raise NotImplementedError

    def release(self, sensitivity: float, sigma: float) -> Release:
        """The release of a Gaussian mechanism on such a batch (not secret if the batches are
        seeded)."""
        release = self._release(sensitivity, sigma)
        return release if self.secret else dataclasses.replace(release, secret=False)

    def check_relation(self, relation: Relation | str) -> None:
        """Refuse, before any step, an accountant that cannot interpret this sampler's releases."""
        relation = Relation.parse(relation)
        allowed = interpret.relations(self._release(1.0, 1.0))
        if relation not in allowed:
            raise ValueError(
                f"{type(self).__name__} releases are accounted under relation "
                f"{sorted(r.value for r in allowed)} only; got an accountant with "
                f"{relation.value!r}"
            )

    def __getstate__(self):
        raise TypeError(
            f"a {type(self).__name__} draws secret batches and cannot be pickled or checkpointed; "
            "create a fresh sampler when resuming"
        )


class PoissonSampler(_Subsampled):
    """Each example joins each step's batch independently with probability q = batch_size / n
    (add/remove).

    ``n`` is a **public** input: the declared number of training examples, or a public bound on it.
    Under add/remove the number of rows a dataset holds differs between neighbours, so it must not
    set q (nor σ, nor the ledger): ``rows`` (default n) says how many rows there are to draw from,
    and each of them joins with the same public q whatever their number. Release:
    ``Sampled(Poisson(q), Gaussian(Δ, σ))``."""

    def sample(self) -> torch.Tensor:
        return torch.nonzero(self._source.uniform(self._rows) < self.rate).flatten()

    def _release(self, sensitivity: float, sigma: float) -> Release:
        return Sampled(Poisson(self.rate), Gaussian(sensitivity, sigma))


class ShuffleSampler(_Subsampled):
    """Each step draws a fresh uniformly random batch of exactly batch_size slots of n (no
    replacement).

    ``rows`` (default n) ≤ n: the slots holding an example; a drawn slot beyond them is empty and
    leaves the batch (a record dropped by a domain rule: replace-one keeps the n records, one of
    which may hold nothing usable). The batch then has fewer than batch_size examples; the step's
    mean still divides by batch_size.

    Release: ``Sampled(FixedSize(n, batch_size), Gaussian(Δ, σ))``, accounted by Wang, Balle &
    Kasiviswanathan (2019) under replace-one (RDP only). Note: shuffled *epochs* (each example once
    per epoch, as Hugging Face's Trainer does) are a different scheme that this event does not
    describe."""

    def sample(self) -> torch.Tensor:
        return self.fill(self.slots())

    def slots(self) -> torch.Tensor:
        """The batch's batch_size slots of n, empty ones included: always the public size (what a
        data-parallel group sends, so that nothing it sends depends on which records were
        dropped)."""
        if self._rows > self.n:
            raise ValueError(
                f"a ShuffleSampler draws from n={self.n} slots (replace-one keeps n fixed); it was given "
                f"rows={self._rows}, more than n"
            )
        return self._source.permutation(self.n)[: self.batch_size]

    def fill(self, slots: torch.Tensor) -> torch.Tensor:
        """The examples of ``slots``: those below rows. Under replace-one n is the same for both
        neighbours, the number of slots; rows < n leaves slots rows..n−1 empty (records a domain
        rule dropped), drawn like any other and adding nothing to the sum over B."""
        return slots[slots < self._rows] if self._rows < self.n else slots

    def _release(self, sensitivity: float, sigma: float) -> Release:
        return Sampled(FixedSize(self.n, self.batch_size), Gaussian(sensitivity, sigma))


class SinglePass:
    """Consecutive slices of one fixed order of the n examples: each example is used at most once.

    The single-pass algorithms (Zhang–Tran–Cutkosky Algorithm 4, Kornowski–Liu–Talwar Algorithms 3
    and 5) need batches that are disjoint and chosen independently of the data (docs/papers.md, ZTC
    §6.16): the order is 0..n−1, or a permutation drawn once from a public generator. The order may
    be public because the accounting claims no amplification: releases on different slices are
    accounted by parallel composition (one accountant ``partition``), which holds for any fixed
    order."""

    def __init__(self, n: int, generator: torch.Generator | None = None) -> None:
        check_integer(n=n)
        self.n = n
        self.order = (
            torch.arange(n) if generator is None else torch.randperm(n, generator=generator)
        )
        self.used = 0

    @property
    def remaining(self) -> int:
        return self.n - self.used

    def take(self, size: int) -> torch.Tensor:
        """The next ``size`` unused examples."""
        check_integer(size=size)
        if size > self.remaining:
            raise ValueError(
                f"single pass exhausted: {size} more examples requested but only {self.remaining} "
                f"of n={self.n} are unused; use fewer steps or a larger dataset"
            )
        batch = self.order[self.used : self.used + size]
        self.used += size
        return batch


BatchClosure = Callable[[torch.Tensor], torch.Tensor]


def batch_losses(
    closure: BatchClosure,
    batch: torch.Tensor,
    runs: tuple[int, ...] = (),
    *,
    dtype: torch.dtype = torch.float64,
    who: str = "the closure",
) -> torch.Tensor:
    """``closure(batch)``, checked to be the per-example losses of exactly that batch
    (:func:`per_example_losses`; ``who`` names the closure in its message).

    The ledger describes the batch the sampler drew; a closure that returns the whole dataset's
    losses, a 0-d mean or losses of some other batch would be accounted as something it is not.
    The expected shape is ``runs + (len(batch),)`` (``runs``: leading dimensions of a grid of runs
    on a flat space, () for a model). An empty batch is not passed to the closure: its losses are an
    empty tensor, so the step's mean is 0 and it releases noise only.
    """
    if len(batch) == 0:
        return torch.zeros((*runs, 0), dtype=dtype)
    return per_example_losses(closure(batch), len(batch), runs, who=who)


def per_example_losses(
    losses: Any, rows: int, runs: tuple[int, ...] = (), *, who: str = "loss_fn"
) -> torch.Tensor:
    """``losses`` if they are one loss per example of the batch ``who`` was given, shape
    ``runs + (rows,)``; else ValueError saying so and how to get them (``reduction="none"`` for a
    reduced loss).

    The shape got is named only when it cannot tell the (secret) batch size: a reduced loss (shape
    ``runs`` or ``runs + (1,)``), or any shape for a batch of one."""
    if isinstance(losses, torch.Tensor) and tuple(losses.shape) == (*runs, rows):
        return losses
    shape = tuple(losses.shape) if isinstance(losses, torch.Tensor) else None
    reduced = shape in (runs, (*runs, 1))
    if shape is None:
        got = type(losses).__name__
    elif rows == 1 or reduced:
        got = f"shape {shape}"
    else:
        got = f"a {len(shape)}-d tensor of another shape"
    here = " (here B = 1: each example is evaluated alone)" if rows == 1 else ""
    fix = (
        'Do not reduce over the batch: use reduction="none", e.g. F.cross_entropy(logits, y, '
        'reduction="none")'
        if reduced or shape is None
        else f"Compute the losses of exactly the batch {who} is given, one per example"
    )
    expected = "(" + ", ".join([*map(str, runs), "B"]) + ("," if not runs else "") + ")"
    raise ValueError(
        f"{who} must return per-example losses of shape {expected}, B the size of the batch it is "
        f"given{here}: clipping is per example; got {got}. {fix}"
    )
    return losses
