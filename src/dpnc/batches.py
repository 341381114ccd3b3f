"""Where a model-tier step's batch comes from: the optimizer hands the loss function its batch.

The ledger describes one mechanism: the losses of the examples the sampler drew, each counted once.
That holds by construction only if the loss function is *given* its batch instead of reaching for
one, so every dpnc optimizer calls ``loss_fn(*inputs)`` with the inputs of the batch it drew, from
the data it was given:

* :class:`DataRows`: the optimizer was given the training data (a tuple of tensors, a map-style
  ``Dataset``, or a function of the indices); a step's inputs are the rows its sampler drew, fetched
  once and shared by every forward pass of the step.
* :class:`LoaderBatches`: a :func:`dpnc.make_private` run, whose ``DataLoader`` draws the secret
  batch and yields it to the user's loop; the optimizer's step takes that pending batch, as the very
  objects the loader yielded. ``step(loss_fn, *inputs)`` is accepted only when ``inputs`` *are*
  those objects (identity, not shape): an other batch of the same size, a stale batch after the next
  draw, or a batch spent by an earlier step is refused before anything runs.

What no library can detect: a loss function that ignores its arguments, or reads other data besides
them (a global dataset, the loop's variables, statistics of other examples). Its losses would not be
those of the batch the ledger describes. dpnc does not claim to refuse it; the contract is the
user's (docs/privacy.md)."""

from __future__ import annotations

import contextlib
import inspect
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.utils.data.dataloader import default_collate

from dpnc import distributed
from dpnc.privacy.releases import Relation, Release
from dpnc.sampling import per_example_losses


def leaves(tree: Any) -> list:
    """The leaves of a nest of dicts, lists and tuples."""
    if isinstance(tree, Mapping):
        return [leaf for v in tree.values() for leaf in leaves(v)]
    if isinstance(tree, (list, tuple)):
        return [leaf for v in tree for leaf in leaves(v)]
    return [tree]


def map_leaves(fn: Callable[[Any], Any], tree: Any) -> Any:
    """``tree`` with ``fn`` applied to every leaf (dicts, namedtuples, lists and tuples kept)."""
    if isinstance(tree, Mapping):
        return type(tree)({k: map_leaves(fn, v) for k, v in tree.items()})
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(map_leaves(fn, v) for v in tree))
    if isinstance(tree, (list, tuple)):
        return type(tree)(map_leaves(fn, v) for v in tree)
    return fn(tree)


def batch_rows(inputs: tuple) -> int:
    """The common leading dimension of every tensor in ``inputs`` (ValueError if they differ or are
    not tensors)."""
    found = leaves(inputs)
    if not found or not all(isinstance(t, torch.Tensor) and t.ndim >= 1 for t in found):
        raise ValueError(
            "inputs must be tensors (or dicts, lists, tuples of tensors) with a leading batch "
            f"dimension; got {[type(t).__name__ for t in found]}"
        )
    rows = {int(t.shape[0]) for t in found}
    if len(rows) != 1:
        raise ValueError(f"inputs must share one leading (batch) dimension; got {sorted(rows)}")
    return rows.pop()


def as_arguments(batch: Any) -> tuple:
    """A collated batch as the positional arguments of a loss function: a list or tuple is unpacked
    (``TensorDataset`` batches are ``[xb, yb]``), anything else (a dict, a tensor, a namedtuple) is
    one argument."""
    if isinstance(batch, (list, tuple)) and not hasattr(batch, "_fields"):
        return tuple(batch)
    return (batch,)


def one_example(loss_fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``loss_fn`` on one example: its inputs as a batch of one (a leading dimension of 1), its loss
    a scalar.

    Mapped over a batch (``torch.func.vmap``, or a loop), each example's loss is computed from that
    example alone, whatever ``loss_fn`` does: a statistic "over the batch" inside it is over one
    example. ValueError unless ``loss_fn`` returns one loss, shape (1,)."""

    def loss_one(*example: Any) -> torch.Tensor:
        out = loss_fn(*map_leaves(lambda t: t.unsqueeze(0), example))
        return per_example_losses(out, 1).squeeze(0)

    return loss_one


@contextlib.contextmanager
def mappable(model: Any):
    """Within: a Hugging Face ``model`` as ``AutoModel`` loads it maps over the examples
    (torch.func.vmap), fast.

    * transformers skips building the attention mask when no token is padded, deciding by
      ``mask.all()``: a branch on the data, which vmap cannot take. Here that skip is off (its two
      private helpers in ``transformers.masking_utils`` answer "do not skip"), so the mask is always
      built: the same attention, the skip only saves work.
    * SDPA attention, the default, has no batching rule on CPU: vmap runs it example by example
      (4-8x slower on MiniLM at B = 32). Here every config of the model that names "sdpa" names
      "eager" instead: the same softmax(QKᵀ/√d + mask)·V in plain operations, which vmap batches.

    Both are put back after. Nothing happens where transformers is not imported.
    """
    masks = sys.modules.get("transformers.masking_utils")
    saved = {
        name: getattr(masks, name)
        for name in ("_ignore_bidirectional_mask_sdpa", "_ignore_causal_mask_sdpa")
        if masks is not None and hasattr(masks, name)
    }
    configs = (
        []
        if masks is None
        else list(
            {
                id(c): c
                for c in (getattr(m, "config", None) for m in model.modules())
                if getattr(c, "_attn_implementation", None) == "sdpa"
            }.values()
        )
    )
    try:
        for name in saved:
            setattr(masks, name, _never_skip)
        for config in configs:
            config._attn_implementation = "eager"
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message="There is a performance drop because we have not yet"
            )
            yield
    finally:
        for name, helper in saved.items():
            setattr(masks, name, helper)
        for config in configs:
            config._attn_implementation = "sdpa"


def _never_skip(*args: Any, **kwargs: Any) -> bool:
    return False


MISSING_LOSS_FN = (
    "loss_fn must be a callable: optimizer.step(loss_fn) draws each secret batch itself and hands it to loss_fn, so\n"
    "  a gradient from loss.backward() on a batch you chose (the Opacus habit) is not what the ledger describes. Fix:\n"
    "  optimizer.step(lambda xb, yb: F.cross_entropy(model(xb), yb, reduction='none'))   # per-example losses, (B,)"
)


def check_loss_fn(loss_fn: Any) -> None:
    """Refuse what cannot be handed a batch: a non-callable, or a callable that takes no positional
    argument.

    ``optimizer.step()`` with no loss function (the Opacus and torch.optim habit ``loss.backward();
    optimizer.step()``) gets the contract and the fix in three lines."""
    if loss_fn is None:
        raise ValueError(MISSING_LOSS_FN)
    if not callable(loss_fn):
        raise ValueError(
            f"loss_fn must be a callable loss_fn(*batch) returning the per-example losses of the "
            f"batch it is given; got {loss_fn!r}"
        )
    try:
        parameters = inspect.signature(loss_fn).parameters.values()
    except (
        TypeError,
        ValueError,
    ):  # a builtin or C callable without a signature: it will be called as is
        return
    if not any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters
    ):
        raise ValueError(
            "loss_fn must take the batch as arguments, loss_fn(xb, yb) (the optimizer hands each step "
            "its batch); a closure without arguments would evaluate data the optimizer did not draw, "
            "so the ledger would not describe it"
        )


def check_loss_arity(loss_fn: Callable[..., torch.Tensor], inputs: tuple | None) -> None:
    """Refuse, before a step draws or moves anything, a ``loss_fn`` that cannot take ``inputs`` (a
    batch's positional arguments, None where not known) as arguments: ``lambda batch: ...`` for an
    (x, y) batch.

    Checked on the signature, so a TypeError raised inside ``loss_fn`` is never mistaken for this
    one (a callable without a signature is called as is)."""
    if inputs is None:
        return
    try:
        signature = inspect.signature(loss_fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*inputs)
    except TypeError:
        pass
    else:
        return
    k = len(inputs)
    names = ("x", "x, y")[k - 1] if 1 <= k <= 2 else ", ".join(f"x{i}" for i in range(1, k + 1))
    tensors = all(isinstance(t, torch.Tensor) for t in inputs)
    kind = ("tensor" if tensors else "value") + ("s" if k != 1 else "")
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    m = sum(q.kind in positional for q in signature.parameters.values())
    name = getattr(loss_fn, "__name__", type(loss_fn).__name__)
    raise ValueError(
        f"loss_fn is called as loss_fn(*batch) with the batch unpacked (here {k} {kind}: {names}); "
        f"got a function of {m} argument{'s' if m != 1 else ''}, {name}{signature}. Write "
        f"loss_fn({names}) or lambda *batch: ..."
    )


def check_same_objects(given: tuple, held: tuple) -> None:
    """Refuse ``given`` unless it is ``held`` itself: the same tensors (identity), not merely the
    same shapes."""
    a, b = leaves(given), leaves(held)
    if len(a) != len(b) or any(x is not y for x, y in zip(a, b)):
        raise ValueError(
            "inputs must be the batch the loader just yielded (the very objects, e.g. "
            "`for xb, yb in loader: optimizer.step(loss_fn, xb, yb)`), or leave them out: "
            "optimizer.step(loss_fn) hands loss_fn that batch. Another batch, a copy or a slice of "
            "one, or a batch a previous step used is refused"
        )


class DataRows:
    """The training data an optimizer fetches its batches from: ``rows(indices)`` gives a batch's
    inputs.

    Args:
        data: a tuple or list of tensors with one row per example (``X[idx], y[idx]``); a map-style
            torch ``Dataset`` (its items collated by ``collate_fn``, torch's ``default_collate`` by
            default); or None with ``fetch``.
        collate_fn: how a ``Dataset``'s items form a batch.
        fetch: a function of the indices returning the batch (library code that reads its own data
            by index, e.g. the fine-tuning trainer's tokenised cache).
    """

    def __init__(
        self,
        data: Any = None,
        *,
        collate_fn: Callable[[list], Any] | None = None,
        fetch: Callable[[torch.Tensor], Any] | None = None,
    ) -> None:
        if (data is None) == (fetch is None):
            raise ValueError(
                "data must be given (a tuple of tensors or a map-style Dataset), or fetch; got "
                f"{'both' if fetch is not None else 'neither'}"
            )
        if fetch is not None and not callable(fetch):
            raise ValueError(f"fetch must be callable as fetch(indices); got {fetch!r}")
        if collate_fn is not None and not callable(collate_fn):
            raise ValueError(f"collate_fn must be callable or None; got {collate_fn!r}")
        if isinstance(data, (tuple, list)):
            if not data or not all(isinstance(t, torch.Tensor) and t.ndim >= 1 for t in data):
                raise ValueError(
                    "data must be a tuple of tensors with a leading example dimension, or a "
                    f"map-style Dataset; got {[type(t).__name__ for t in data]}"
                )
            if len({len(t) for t in data}) != 1:
                raise ValueError(
                    f"data's tensors must have one row per example; got {[len(t) for t in data]} rows"
                )
        elif data is not None and (
            isinstance(data, torch.utils.data.IterableDataset)
            or not (hasattr(data, "__len__") and hasattr(data, "__getitem__"))
        ):
            raise ValueError(
                f"data must be a tuple of tensors or a map-style Dataset; got {type(data).__name__}"
            )
        self.data, self.fetch = data, fetch
        self._arguments: tuple | None = None  # a Dataset's first example, read once (arguments())
        self.collate_fn = collate_fn if collate_fn is not None else default_collate

    def arguments(self) -> tuple | None:
        """A batch's positional arguments as its loss function gets them (the first example's; the
        structure is the data's, the same for every batch); None with ``fetch``."""
        if self.fetch is not None:
            return None
        if isinstance(self.data, (tuple, list)):
            return tuple(self.data)
        if self._arguments is None and len(self.data):
            self._arguments = self.rows(torch.zeros(1, dtype=torch.long))
        return self._arguments

    def rows(self, indices: torch.Tensor) -> tuple:
        """The inputs of the examples ``indices``, as a loss function's positional arguments."""
        if self.fetch is not None:
            return as_arguments(self.fetch(indices))
        if isinstance(self.data, (tuple, list)):
            return tuple(t[indices] for t in self.data)
        return as_arguments(self.collate_fn([self.data[int(i)] for i in indices]))


class LoaderBatches:
    """The optimizer's sampler in a :func:`make_private` run: it hands out the loader's pending
    batch.

    The loader's batch sampler calls :meth:`draw` (a fresh secret Poisson batch, left pending) and
    its collate function :meth:`hold` s the collated batch the loader is about to yield; the
    optimizer's step calls :meth:`sample`, which takes the pending batch, and :meth:`inputs`, which
    gives its inputs for the loss function. Releases and the relation check are delegated to the
    :class:`~dpnc.sampling.PoissonSampler`, so each step is accounted as a Poisson-subsampled
    Gaussian at q = batch_size / n. Secret: never log what :meth:`sample` returns.

    ``fetch`` (library code such as the trainer): a function of the indices that gives the batch's
    inputs at :meth:`draw`, instead of a loader's collate.

    With a :class:`~dpnc.distributed.Group`, :meth:`draw` is rank 0's draw taken by every rank
    (:meth:`~dpnc.distributed.Group.take_batch`, carried by the last step's all_reduce; the other
    ranks' samplers are never used), so every rank holds the same pending batch (``shared``: the
    optimizer's step does not send it again) and the loader yields this rank's part of it
    (:meth:`part`)."""

    def __init__(
        self,
        sampler,
        steps: int,
        group: distributed.Group | None = None,
        *,
        fetch: Callable[[torch.Tensor], Any] | None = None,
    ) -> None:
        self._sampler = sampler
        self.group = group
        self.shared = group is not None  # every rank's sample() is the same batch already
        self.steps = steps
        self.batch_size = sampler.batch_size
        self.fetch = fetch
        self.drawn = 0  # batches the loader has drawn (public: one per loop iteration)
        self.used = 0  # batches a step has taken (= steps taken)
        self._pending: tuple[torch.Tensor, tuple | None] | None = (
            None  # (indices, inputs) of the next step
        )
        self._taken: tuple[torch.Tensor, tuple | None] | None = (
            None  # those of the step in progress
        )
        self._versions: list[
            int
        ] = []  # the version counters of the pending inputs when the loader yielded them
        # Set by the optimizer: charge() records a step's release for a drawn batch no step released
        # for, and guard.mark() notes the model's state when a batch is drawn
        # (dpnc.tier.model_state.StateGuard).
        self.charge: Callable[[], None] | None = None
        self.guard = None

    @property
    def n(self) -> int:
        """The public n of the sampler it draws from."""
        return self._sampler.n

    @property
    def rate(self) -> float:
        """The sampler's sampling rate q."""
        return self._sampler.rate

    @property
    def secret(self) -> bool:
        return self._sampler.secret

    @property
    def remaining(self) -> int:
        """Batches the loader may still draw."""
        return self.steps - self.drawn

    def check_ready(self) -> None:
        """Refuse a step now if it could not take a batch (nothing pending, or all steps taken)."""
        if self.used >= self.steps:
            raise ValueError(
                f"steps must be at most {self.steps} (the number the run was built and its noise "
                "calibrated for); all of them were taken. Build a new run with make_private for more"
            )
        if self._pending is None:
            raise ValueError(
                "no batch is pending: call optimizer.step once per batch the loader yields "
                "(a second step on one batch would use data the privacy ledger describes once)"
            )

    def draw(self) -> torch.Tensor:
        """Draw the next secret batch and leave it pending for the optimizer (a batch not stepped on
        is dropped)."""
        if self.remaining <= 0:
            raise ValueError(
                f"all steps={self.steps} batches have been drawn; the privacy budget was "
                f"calibrated for {self.steps} steps"
            )
        self.charge_dropped()
        batch = (
            self._sampler.sample() if self.group is None else self.group.take_batch(self._sampler)
        )
        self._pending = (batch, None)
        self.drawn += 1
        if self.guard is not None:
            self.guard.mark()
        if self.fetch is not None:
            self.hold(self.fetch(self.part(batch)))
        return batch

    def hold(self, collated: Any) -> Any:
        """Record ``collated`` as the inputs of the pending batch (what the loader yields for it);
        returns it."""
        if self._pending is None:
            raise ValueError("no batch is pending to hold inputs for (draw first)")
        self._pending = (self._pending[0], as_arguments(collated))
        self._versions = [
            t._version for t in leaves(self._pending[1]) if isinstance(t, torch.Tensor)
        ]
        if (
            self.guard is not None
        ):  # it also watches the batch's values (a .data write moves no version)
            self.guard.hold(collated)
        return collated

    def charge_dropped(self) -> None:
        """Charge the pending batch, if one was drawn and no step took it (a loop that skipped it,
        or ended): its release is recorded though nothing is published, so that the ledger counts
        every drawn batch and its length tells nothing of which batches a user's code skipped."""
        if self._pending is not None and self.charge is not None:
            self._pending = None
            self.used += 1
            self.charge()

    def part(self, batch: torch.Tensor) -> torch.Tensor:
        """The examples of ``batch`` this process evaluates: all of them, or this rank's shard under
        a group."""
        return batch if self.group is None else self.group.shard(batch)

    def check_inputs(self, given: tuple) -> None:
        """Refuse, before a step, ``given`` inputs that are not the pending batch's (see
        :func:`check_same_objects`)."""
        self.check_ready()
        check_same_objects(given, self._pending[1] or ())

    def arguments(self) -> tuple | None:
        """The pending batch's inputs, the positional arguments its loss function gets (None if none
        is pending or it has no inputs)."""
        return None if self._pending is None else self._pending[1]

    def sample(self) -> torch.Tensor:
        """Take the pending batch (the one the loader yielded last) for one step.

        Its inputs must hold what the loader yielded: a tensor written in place since (``xb -=
        xb.mean(0)``, ``xb.copy_(other)``) is refused, and the batch is charged (the user's code has
        read it) and spent."""
        self.check_ready()
        inputs = self._pending[1] or ()
        now = [t._version for t in leaves(inputs) if isinstance(t, torch.Tensor)]
        if inputs and now != self._versions:
            self.charge_dropped()
            raise ValueError(
                "inputs must hold what the loader yielded: a tensor of the batch was written in place "
                "since (e.g. xb -= xb.mean(0), or xb.copy_(...)), so the batch the loss would see is not "
                "the one the ledger describes. Transform a batch inside loss_fn, out of place, per "
                "example; this batch is charged and dropped"
            )
        self._taken, self._pending = self._pending, None
        self.used += 1
        return self._taken[0]

    def rows(self, indices: torch.Tensor) -> tuple:
        """The inputs of the batch the step in progress took, ``indices`` (those the loader collated
        already)."""
        return self.inputs()

    def inputs(self) -> tuple:
        """The inputs of the batch the step in progress took (the objects the loader yielded for
        it)."""
        if self._taken is None or self._taken[1] is None:
            raise ValueError(
                "the batch has no inputs: iterate the loader make_private returned, and step once "
                "per batch it yields"
            )
        return self._taken[1]

    def give_back(self) -> None:
        """Undo :meth:`sample` after a step refused before it touched the data: its batch is pending
        again."""
        if self._taken is not None and self._pending is None:
            self._pending, self._taken = self._taken, None
            self.used -= 1

    def finish(self) -> None:
        """The step in progress released: its batch is spent (its inputs are never handed out
        again)."""
        self._taken = None

    def release(self, sensitivity: float, sigma: float) -> Release:
        return self._sampler.release(sensitivity, sigma)

    def check_relation(self, relation: Relation | str) -> None:
        self._sampler.check_relation(relation)

    def __getstate__(self):
        raise TypeError("LoaderBatches holds secret batches and cannot be pickled or checkpointed")
