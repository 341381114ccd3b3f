"""The group a step's sums are aggregated over: :data:`LOCAL` (this process alone, a no-op) or a
:class:`Group` of ``torch.distributed`` ranks, so the one-process step and the data-parallel step
are one code path. Data-parallel DPZero and MeZO exchange a few numbers a step, whatever the
model's size; :func:`from_environment` finds the group under ``torchrun``.

See docs/distributed.md: the protocol, why its privacy is one process's, the trust boundary."""

from __future__ import annotations

import dataclasses
import os
import pickle
import time
import warnings
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from dpnc.privacy.releases import Release
from dpnc.sampling import Sampler, ShuffleSampler

__all__ = ["LOCAL", "Group", "Local", "from_environment", "shutdown", "world_size"]

T = TypeVar("T")


class Local:
    """This process alone: the group a step aggregates over by default, a no-op.

    :meth:`draw` is the sampler's own draw, :meth:`sum` returns its arguments as they are and
    :meth:`on_source` calls the release; nothing is communicated. Use the instance :data:`LOCAL`.
    """

    rank, world_size, is_source = 0, 1, True

    def draw(self, sampler: Sampler) -> torch.Tensor:
        """The batch the sampler draws (secret when subsampled)."""
        return sampler.sample()

    def sum(self, *values: Any) -> tuple:
        """``values`` themselves: alone, a partial sum is the whole sum."""
        return values

    def on_source(self, compute: Callable[[], torch.Tensor], *, like: torch.Tensor) -> torch.Tensor:
        """``compute()``."""
        return compute()

    def release_sum(
        self,
        part: torch.Tensor,
        *values: Any,
        release: Callable[[torch.Tensor], torch.Tensor],
        denominator: int,
        entry: Release,
    ) -> tuple:
        """``(release(part), *values)``: alone, the partial sum is the whole sum (``denominator``
        and ``entry`` serve :meth:`Group.release_sum`)."""
        return (release(part), *values)

    def __repr__(self) -> str:
        return "LOCAL"


LOCAL = Local()


class Group:
    """The process group of a data-parallel zeroth-order run, with a count of what its collectives
    carry.

    Args:
        process_group: a ``torch.distributed`` group (default: the world). The process group must be
            initialised already (``torch.distributed.init_process_group``).

    Attributes:
        rank, world_size: this process's rank in the group and the group's size.
        device: where collective tensors live (``cuda:current_device()`` under nccl, else the CPU).
        sent: elements passed to collectives so far, by kind (``"all_reduce"``, ``"broadcast"``),
            their total in bytes (``"bytes"``) and the number of collective calls
            (``"collectives"``), e.g. to measure the communication per step. **Secret where batches
            vary in size** (Poisson): a step's all_reduce carries the next batch, so the counts
            follow the batch sizes; publish them only for fixed-size batches. The object collectives
            (:meth:`share`, :meth:`gather_object`: setup, resume and evaluation, never a step's) are
            counted apart, as calls (``"objects"``).

    Raises:
        ValueError: if ``torch.distributed`` is unavailable or not initialised.
    """

    def __init__(self, process_group: dist.ProcessGroup | None = None) -> None:
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError(
                "group needs an initialised torch.distributed process group; call "
                "torch.distributed.init_process_group (e.g. under torchrun) first"
            )
        self.process_group = process_group
        self.rank = dist.get_rank(process_group)
        self.world_size = dist.get_world_size(process_group)
        self.source = (
            0 if process_group is None else dist.get_global_rank(process_group, 0)
        )  # rank 0's global rank
        cuda = dist.get_backend(process_group) == "nccl"
        self.device = (
            torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
        )
        self.sent: Counter[str] = Counter()
        self._ahead: dict[
            int, _Ahead
        ] = {}  # by sampler (its id): its next batch, known ahead of its draw
        self._kept: list[Sampler] = []
        self._carrying: Sampler | None = (
            None  # the sampler whose next batch this step's all_reduce carries
        )

    @property
    def is_source(self) -> bool:
        """True on rank 0: the rank that draws the batch and the noise and keeps the ledger."""
        return self.rank == 0

    def _count(self, kind: str, tensor: torch.Tensor) -> None:
        self.sent["collectives"] += 1
        self.sent[kind] += tensor.numel()
        self.sent["bytes"] += tensor.numel() * tensor.element_size()

    def all_reduce_(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum ``tensor`` over the ranks, in place (through a copy on :attr:`device`); returns
        it."""
        self._count("all_reduce", tensor)
        return self._all_reduce(tensor)

    def broadcast_(self, tensor: torch.Tensor) -> torch.Tensor:
        """Rank 0's ``tensor`` on every rank, in place (its shape and dtype must agree on every
        rank)."""
        self._count("broadcast", tensor)
        return self._broadcast(tensor)

    # Uncounted (the object collectives are counted as calls). Every collective goes through one of
    # these two, with a copy of the group's own that it keeps until the backend lets go of it
    # (_handed).

    def _all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        buffer = _handed(tensor.to(self.device, copy=True))
        dist.all_reduce(buffer, op=dist.ReduceOp.SUM, group=self.process_group)
        return tensor.copy_(buffer)

    def _broadcast(self, tensor: torch.Tensor) -> torch.Tensor:
        buffer = _handed(tensor.to(self.device, copy=True))
        dist.broadcast(buffer, src=self.source, group=self.process_group)
        return tensor.copy_(buffer)

    def broadcast_seed(self, seed: int) -> int:
        """Rank 0's public direction seed (once, at construction), so every rank draws the same
        directions."""
        return int(self.broadcast_(torch.tensor([seed], dtype=torch.int64)))

    @torch.no_grad()
    def broadcast_parameters_(self, params: Iterable[torch.Tensor]) -> None:
        """Copy rank 0's parameters to every rank (d numbers, once, as DistributedDataParallel
        does)."""
        for p in params:
            self.broadcast_(p.data)

    def share(self, compute: Callable[[], T]) -> T:
        """Rank 0's ``compute()`` on every rank: a small picklable public value (e.g. a resumed
        run's state).

        Only rank 0 runs ``compute``. A ``ValueError`` it raises (a refusal) is raised on every rank
        with the same message, so the whole run stops alike rather than the other ranks waiting at
        the next collective. Pickled into bytes and broadcast through the group's own kept tensors
        (its size, then its bytes), not ``torch.distributed.broadcast_object_list``, whose tensors a
        gloo thread may free as the process exits (:data:`_HANDED`)."""
        box = None
        if self.is_source:
            try:
                box = ("value", compute())
            except ValueError as error:
                box = ("refused", str(error))
        self.sent["objects"] += 1
        data = pickle.dumps(box) if self.is_source else b""
        size = int(self._broadcast(torch.tensor([len(data)], dtype=torch.int64)))
        payload = _as_bytes(data) if self.is_source else torch.empty(size, dtype=torch.uint8)
        kind, value = pickle.loads(self._broadcast(payload).numpy().tobytes())
        if kind == "refused":
            raise ValueError(value)
        return value

    def gather_object(self, value: T) -> list[T]:
        """Every rank's ``value`` (picklable), in rank order, on every rank (e.g. evaluation shards'
        results).

        Each rank's pickled bytes fill its own row of a (ranks × longest) byte tensor, zero
        elsewhere, and one ``all_reduce`` of the rows (after one of the sizes) hands every rank
        every row: the group's own kept tensors, not ``torch.distributed.all_gather_object``'s
        (:data:`_HANDED`)."""
        self.sent["objects"] += 1
        data = pickle.dumps(value)
        sizes = torch.zeros(self.world_size, dtype=torch.int64)
        sizes[self.rank] = len(data)
        self._all_reduce(sizes)
        rows = torch.zeros(self.world_size, int(sizes.max()), dtype=torch.uint8)
        rows[self.rank, : len(data)] = _as_bytes(data)
        self._all_reduce(rows)
        return [pickle.loads(rows[r, :n].numpy().tobytes()) for r, n in enumerate(sizes.tolist())]

    def shard(self, batch: torch.Tensor) -> torch.Tensor:
        """This rank's contiguous part of ``batch`` (sizes differ by at most one; some may be
        empty)."""
        return torch.tensor_split(batch, self.world_size)[self.rank]

    def draw(self, sampler: Sampler) -> torch.Tensor:
        """This rank's part (:meth:`shard`) of the batch rank 0 draws from its secret ``sampler``
        (:meth:`take_batch`): what a step evaluates here."""
        return self.shard(self.take_batch(sampler))

    def take_batch(self, sampler: Sampler) -> torch.Tensor:
        """The next batch rank 0 draws from its secret ``sampler``, whole, on every rank.

        It reached every rank inside the previous step's all_reduce (the first :meth:`sum` after
        this call carries the batch after it), so a step's one all_reduce is its only collective.
        The first batch of a sampler has no previous step: rank 0 broadcasts it (its indices; for
        batches of varying size, its size and the next one's first). Secret: the indices and their
        number never leave the group; the other ranks' samplers are not used. A sampler marked
        ``shared`` already hands every rank the same batch (:class:`~dpnc.sampling.FullBatch`, and
        the façade's loader, which took it here when it yielded it): each rank takes its own,
        unsent."""
        if sampler.shared:
            return sampler.sample()
        ahead = self._state(sampler)
        self._carrying = sampler
        batch = ahead.batch if ahead.batch is not None else self._broadcast_batch(sampler, ahead)
        ahead.batch = None
        # a fixed-size sampler's batch travels as its slots, empty ones included (their number is
        # public); each rank keeps the examples among them
        return sampler.fill(batch) if isinstance(sampler, ShuffleSampler) else batch

    def _state(self, sampler: Sampler) -> _Ahead:
        """What the group knows ahead of ``sampler``'s batches, kept by the sampler's id and
        forgotten with the sampler (an id can be reused once its object is gone); a sampler without
        weak references is kept alive."""
        key = id(sampler)
        if key not in self._ahead:
            self._ahead[key] = _Ahead()
            try:
                weakref.finalize(sampler, self._ahead.pop, key, None)
            except TypeError:
                self._kept.append(sampler)
        return self._ahead[key]

    def __getstate__(self):
        raise TypeError(
            "a Group holds a process group and rank 0's secret batches drawn ahead; it cannot be pickled "
            "or checkpointed: build a new one in each process"
        )

    def _broadcast_batch(self, sampler: Sampler, ahead: _Ahead) -> torch.Tensor:
        """The batch rank 0 draws next, broadcast (a sampler's first, or one no step carried): its
        indices alone where every batch has one public size (:class:`~dpnc.sampling.ShuffleSampler`:
        ``batch_size``), else its size and the following batch's, then its indices (the following
        one's size lets the next all_reduce carry it)."""
        fixed = _fixed_size(sampler)
        batch = self._next(sampler, ahead) if self.is_source else None
        if fixed is not None:  # the size is public and the same on every rank: the indices alone
            size = fixed
        else:
            sizes = torch.zeros(2, dtype=torch.int64)
            if self.is_source:
                ahead.following = sampler.sample()
                sizes[:] = torch.tensor([len(batch), len(ahead.following)])
            size, ahead.size = self.broadcast_(sizes).tolist()
        if not self.is_source:
            batch = torch.empty(size, dtype=torch.int64)
        if size:
            self.broadcast_(batch := batch.to(torch.int64))
        return batch

    def _next(self, sampler: Sampler, ahead: _Ahead) -> torch.Tensor:
        """Rank 0's next batch of ``sampler``: the one drawn ahead if any, else a fresh draw
        (checked against a fixed public size)."""
        batch, ahead.following = ahead.following, None
        batch = (
            batch
            if batch is not None
            else (sampler.slots() if isinstance(sampler, ShuffleSampler) else sampler.sample())
        )
        fixed = _fixed_size(sampler)
        if fixed is not None and len(batch) != fixed:
            raise RuntimeError(
                f"{type(sampler).__name__} drew {len(batch)} examples; it must draw exactly "
                f"batch_size = {fixed}"
            )
        return batch

    def _carry(self) -> tuple[_Ahead, int, torch.Tensor] | None:
        """What this step's all_reduce carries besides the sums, if a :meth:`take_batch` came before
        it: the next batch of the same sampler, rank 0's (zeros elsewhere, so the sum is rank 0's
        exactly), and for batches of varying size the size of the one after it, which rank 0 draws
        now. Indices are integers < 2⁵³: exact in float64. Returns (the sampler's state, the batch's
        size, the numbers to add), or None."""
        sampler, self._carrying = self._carrying, None
        if sampler is None:
            return None
        ahead = self._ahead[id(sampler)]
        fixed = _fixed_size(sampler)
        size = fixed if fixed is not None else ahead.size
        carried = torch.zeros(size + (fixed is None), dtype=torch.float64)
        if self.is_source:
            batch = self._next(sampler, ahead)
            if (
                len(batch) != size
            ):  # its size was sent one step ahead (the sizes are secret: not in the message)
                raise RuntimeError("the batch drawn ahead is not of the size announced for it")
            carried[:size] = batch
            if fixed is None:
                ahead.following = sampler.sample()
                carried[size] = len(ahead.following)
        return ahead, size, carried

    def sum(self, *values: Any) -> tuple:
        """Each of ``values`` (Python numbers or tensors of any shape: a step's partial sums) added
        over the ranks, in **one** ``all_reduce`` of their elements in float64; returned as given
        (an int stays an int, a tensor keeps its shape, dtype and device). Every rank must pass the
        same shapes in the same order. After a :meth:`take_batch`, the same all_reduce also carries
        that sampler's next batch."""
        flat = [torch.as_tensor(v).to(self.device, torch.float64).reshape(-1) for v in values]
        carry = self._carry()
        if carry is not None:
            flat.append(carry[2].to(self.device))
        summed = self.all_reduce_(torch.cat(flat)).split([f.numel() for f in flat])
        if carry is not None:  # the next batch (and the size after it), the same on every rank
            ahead, size, _ = carry
            received = summed[-1].cpu()
            ahead.batch = received[:size].to(torch.int64)
            if len(received) > size:
                ahead.size = int(received[size])
        return tuple(
            part.reshape(v.shape).to(dtype=v.dtype, device=v.device)
            if isinstance(v, torch.Tensor)
            else type(v)(part.item())
            for v, part in zip(values, summed)
        )

    def on_source(self, compute: Callable[[], torch.Tensor], *, like: torch.Tensor) -> torch.Tensor:
        """Rank 0 alone calls ``compute()`` (e.g. the release, which draws noise and records it);
        every rank gets its value, shaped and typed as ``like`` (which must agree on every rank)."""
        value = compute() if self.is_source else torch.empty_like(like)
        return self.broadcast_(value.reshape(like.shape).to(like.dtype))

    def release_sum(
        self,
        part: torch.Tensor,
        *values: Any,
        release: Callable[[torch.Tensor], torch.Tensor],
        denominator: int,
        entry: Release,
    ) -> tuple:
        """``release(Σ part)`` and each of ``values`` summed over the ranks (as :meth:`sum`), on
        every rank.

        ``release(s)`` is rank 0's release of a sum s: it draws the secret noise and records
        ``entry`` (built once by :func:`~dpnc.privacy.release.mean_release`), whose
        :attr:`~dpnc.privacy.releases.Release.additive` picks the path. Additive, ``release(s) = s /
        denominator + z`` with z drawn independently of s (the Gaussian mechanism of
        :func:`~dpnc.privacy.release.release_sum`), rank 0 calls ``release(0) = z`` before the sum
        and adds z to its own part, every other rank contributes part/denominator, and the **one**
        ``all_reduce`` of the values yields the released value, Σ part/denominator + z, bit for bit
        the same on every rank: same release (its distribution, ledger entry, noise from rank 0's
        source alone), no broadcast. Not additive (the discrete Gaussian rounds the sum to its grid
        first): :meth:`sum`, then rank 0 releases and broadcasts."""
        if not entry.additive:
            total, *summed = self.sum(part, *values)
            return (self.on_source(lambda: release(total), like=total), *summed)
        mine = part.to(self.device, torch.float64) / denominator
        if self.is_source:
            noise = release(
                torch.zeros_like(part)
            )  # z alone: 0 / denominator + z; the release is recorded here
            mine = mine + noise.to(self.device, torch.float64)
        released, *summed = self.sum(mine, *values)
        return (released.to(dtype=part.dtype, device=part.device), *summed)


@dataclasses.dataclass
class _Ahead:
    """What a :class:`Group` knows of a sampler's batches before they are taken. ``batch``: the next
    one, on every rank (carried by the last step's all_reduce); for samplers whose batches vary in
    size, ``size``: the size of the one after it, on every rank, and ``following``: that batch, on
    rank 0 (secret, like every batch)."""

    batch: torch.Tensor | None = None
    size: int = 0
    following: torch.Tensor | None = None


def _fixed_size(sampler: Sampler) -> int | None:
    """The size every batch of ``sampler`` has, public, or None where it varies (Poisson) or is not
    known."""
    return sampler.batch_size if isinstance(sampler, ShuffleSampler) else None


def world_size() -> int:
    """This run's processes, without starting a group: an initialised group's size, else
    ``WORLD_SIZE`` (or 1)."""
    if not dist.is_available():
        return 1
    return (
        dist.get_world_size() if dist.is_initialized() else int(os.environ.get("WORLD_SIZE", "1"))
    )


def from_environment() -> Group | None:
    """This process's data-parallel :class:`Group`: None when it runs alone, the world's under
    ``torchrun``.

    A process group already initialised (by the user's script) is used as it is. Otherwise, when the
    environment says ``WORLD_SIZE`` > 1 (``torchrun --nproc-per-node N``, or several nodes with the
    usual rendezvous flags), the default group is initialised from that environment: nccl on CUDA
    machines (each process on ``cuda:LOCAL_RANK``), gloo on the CPU. A world of one process needs no
    group: None."""
    if world_size() <= 1:
        return None
    if not dist.is_initialized():
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl" if cuda else "gloo")
    return Group() if dist.get_world_size() > 1 else None


# The tensors this process handed to collectives that the backend may still hold. Why they are kept:
# a gloo worker thread lets go of a collective's tensors after the collective has completed, so it
# can be the last to hold one. Then it frees the tensor's Python object, which takes the GIL, and if
# the process is exiting by then (its last collective just done) taking the GIL ends the thread by a
# forced unwind through C++ that cannot unwind: std::terminate, SIGABRT, "terminate called without
# an active exception". A core dump of it (26 Nov 2026, one 2-process run in 66 on 2 cores):
# ~AsyncWork → TensorImpl::decref_pyobject → take_gil → PyThread_exit_thread, with the main thread
# in Py_FinalizeEx. While Python holds a reference too, the worker's release is a count decrement,
# and the last reference goes in the main thread, alive.
_HANDED: list[torch.Tensor] = []


def _as_bytes(data: bytes) -> torch.Tensor:
    """``data`` as a uint8 tensor (a copy: torch.frombuffer wants a writable buffer)."""
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _held_elsewhere(tensor: torch.Tensor) -> bool:
    """Whether anything but Python holds ``tensor`` (a buffer of :data:`_HANDED`, which no other
    Python code sees): the backend's work, until it lets go."""
    return tensor._use_count() > 1


def _handed(buffer: torch.Tensor) -> torch.Tensor:
    """``buffer``, a fresh tensor about to go to a collective, kept until the backend lets go of it
    (and the ones it has let go of, released)."""
    _HANDED[:] = [t for t in _HANDED if _held_elsewhere(t)]
    _HANDED.append(buffer)
    return buffer


def shutdown(timeout: float = 60.0) -> None:
    """End this process's part of the data-parallel run: wait for every rank, wait until the backend
    has let go of every tensor this process handed to a collective (:data:`_HANDED`), then destroy
    the process group. No-op without a group.

    Call it before the process exits: the wait is what keeps a gloo worker thread from freeing a
    tensor while the interpreter shuts down, which aborts the process (SIGABRT). It covers every
    collective of :class:`Group`, the object ones included; not collectives a script makes through
    ``torch.distributed`` itself."""
    if not (dist.is_available() and dist.is_initialized()):
        return
    dist.barrier()
    deadline = time.monotonic() + timeout
    while any(_held_elsewhere(t) for t in _HANDED):
        if time.monotonic() > deadline:
            warnings.warn(
                f"the process group still holds {sum(map(_held_elsewhere, _HANDED))} collective "
                f"tensor(s) after {timeout:g} s; destroying it anyway",
                RuntimeWarning,
                stacklevel=2,
            )
            break
        time.sleep(0.001)
    else:
        _HANDED.clear()
    dist.destroy_process_group()
