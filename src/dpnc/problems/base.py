"""The interface every objective gives the algorithms: per-example losses over a dataset, batched.

One protocol for every objective (:class:`Objective`): per-example losses, optional per-example
gradients, the mean F and ∇F, and the public :class:`Constants` the algorithms read.
:class:`Problem` implements it for objectives backed by data tensors; the KL objectives and the
DPZero quadratic implement it too."""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Region:
    """The ball B_radius(center) where an objective declares its constants; iterates are projected
    onto it."""

    center: torch.Tensor
    radius: float

    def distance(self, w: torch.Tensor) -> float:
        return float(torch.linalg.vector_norm(w - self.center))

    def contains(self, w: torch.Tensor) -> bool:
        return self.distance(w) <= self.radius * (1 + 1e-9)

    def project(self, w: torch.Tensor) -> torch.Tensor:
        """The Euclidean projection onto the ball."""
        offset = w - self.center
        distance = float(torch.linalg.vector_norm(offset))
        return w if distance <= self.radius else self.center + offset * (self.radius / distance)


@dataclass(frozen=True)
class Constants:
    """The public constants of an objective, valid on its region for *every* admissible example.

    They come from the data domain and the user's choices, never from the private data (a
    neighbouring dataset must give the same record). Fields a paper does not need are None.

    Attributes:
        L0: per-example Lipschitz constant, ‖∇f(x; z)‖ ≤ L0 (ZTC/KLT's L, DPZero's ℓ, Menart et
            al.'s L0); None for an objective that is not Lipschitz (DPZero's quadratic: its methods
            clip instead).
        L1: per-example smoothness, ∇f(·; z) is L1-Lipschitz (DPZero's L).
        weak_convexity: L̃1 with f(·; z) + (L̃1/2)‖·‖² convex.
        gamma, kappa: the (γ, κ)-KL inequality F(x) − F* ≤ γ^κ‖∇F(x)‖^κ on the region.
        region: where the constants hold (None: all of R^d).
        F_star: min F where known, for *evaluating* results only (no algorithm reads it).
    """

    L0: float | None
    L1: float | None = None
    weak_convexity: float | None = None
    gamma: float | None = None
    kappa: float | None = None
    region: Region | None = None
    F_star: float | None = None

    def __post_init__(self) -> None:
        for name in ("L0", "L1", "weak_convexity", "gamma", "kappa"):
            value = getattr(self, name)
            if value is None:
                continue
            if not (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value)
                and value >= 0
                and (value > 0 or name == "weak_convexity")
            ):
                raise ValueError(f"{name} must be a finite number > 0; got {value!r}")


@dataclass(frozen=True)
class Directional:
    """An objective's closed-form two-point differences (:meth:`Objective.two_point`): the
    per-example differences a_i = (ℓ_i(x + λu) − ℓ_i(x − λu))/(2λ) (shape (..., B)) and the mean
    loss over both points."""

    a: torch.Tensor
    loss: torch.Tensor

    @property
    def examples(self) -> int:
        return self.a.shape[-1]


class Objective(ABC):
    """What every algorithm may ask of an objective F(x) = (1/n) Σ_i f(x, z_i).

    Attributes:
        name: a short name for reports.
        n: the dataset size (public: neighbours have the same n under replace-one).
        dim: d.
        constants: the public :class:`Constants`.

    Per-example access (:meth:`losses`, and :meth:`gradients` where the objective has closed forms
    or autograd) is what private algorithms query; :meth:`value` and :meth:`gradient` of the mean
    are for evaluation and for algorithms whose sensitivity follows from the constants alone. An
    objective kept as sufficient statistics (no per-example data) raises
    :class:`NotImplementedError` from the per-example methods."""

    name: str = "objective"
    n: int
    dim: int
    constants: Constants

    def losses(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """f(x[i, j], z_index[i]) for x (b, k, d) and integer ``index`` (b,) → (b, k)."""
        raise NotImplementedError(f"{self.name} keeps no per-example data")

    def gradients(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """∇_x f(x[i, j], z_index[i]) → (b, k, d)."""
        raise NotImplementedError(f"{self.name} has no per-example gradients")

    # Optional capabilities: an objective with a closed form overrides these; None means "evaluate
    # instead".

    def two_point(
        self, x: torch.Tensor, u: torch.Tensor, lam: float, index: torch.Tensor | None = None
    ) -> Directional | None:
        """The two-point differences at points x (..., d) along u in closed form, or None (the
        default): the zeroth-order steps then evaluate :meth:`losses_at` at x ± λu."""
        return None

    def clipped_gradient_sum(
        self, x: torch.Tensor, C, index: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, ...] | None:
        """Σ_{i in index} clip_C(∇f(x; z_i)), the fraction clipped and the mean loss in closed form,
        or None (the default): DP-GD then clips the per-example :meth:`gradients`."""
        return None

    def example_gradients(self, w: torch.Tensor) -> torch.Tensor | None:
        """∇f(w; z_i) for every example, (d,) → (n, d) and (k, d) → (k, n, d), as the KL algorithms
        ask; or None (the default): an objective that keeps no per-example data (sufficient
        statistics) has none, and the KL algorithms then use its full gradient without per-example
        clipping."""
        return None

    def losses_at(self, points: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """f(points, z_i) for i in ``index`` at points shared by the batch: (..., d) → (..., b).

        What a step at one iterate (or one per run of a grid) needs: DPZero's x ± λu, DP-GD's x_t.
        """
        flat = points.reshape(-1, points.shape[-1])
        values = self.losses(flat.expand(len(index), *flat.shape), index)  # (b, k)
        return values.T.reshape(*points.shape[:-1], len(index))

    def _as_points(self, points, name: str = "points") -> tuple[torch.Tensor, bool]:
        """``points`` as float64 (k, d), and whether a single point (d,) was given."""
        points = torch.as_tensor(points, dtype=torch.float64)
        single = points.ndim == 1
        points = points.unsqueeze(0) if single else points
        if points.ndim != 2 or points.shape[1] != self.dim:
            raise ValueError(
                f"{name} must have shape (k, {self.dim}) or ({self.dim},); got {tuple(points.shape)}"
            )
        return points, single

    @abstractmethod
    def value(self, points: torch.Tensor) -> torch.Tensor:
        """F at points (k, d) → (k,), or (d,) → a scalar."""

    @abstractmethod
    def gradient(self, points: torch.Tensor) -> torch.Tensor:
        """∇F at points (k, d) → (k, d), or (d,) → (d,) (a.e. where f has kinks)."""


class Problem(Objective):
    """Per-example losses f(x, z_i) over a dataset, evaluated for many points at once.

    F(x) = (1/n) Σ_i f(x, z_i) with, for every z, f(·, z) L-Lipschitz (docs/papers.md, ZTC §1). The
    zeroth-order estimators evaluate each example at many points at once (x ± δu_ij for m
    directions), so the one primitive is :meth:`loss` on points of shape (b, k, d): example i at its
    own k points. Everything else (values, gradients, subsets) is built from it here.

    The declared ``lipschitz`` is what the algorithms use to bound sensitivities and to clip finite
    differences (ZTC §6.14), so privacy never rests on it being tight, but utility does, and the
    estimators' unbiasedness needs it to be *true*. Each problem states its constant and the proof.
    It is a bound for every z in the problem's data domain (e.g. ‖a‖ ≤ 1), not only for the data at
    hand, because a neighbouring dataset may hold any such z.

    Attributes:
        data: tensors with leading dimension n (the dataset), float64 (integer labels excepted).
        dim: d, the dimension of x.
        lipschitz: L, with |f(x, z) − f(y, z)| ≤ L‖x − y‖ for every z in the data domain.
        name: a short name for reports.

    Subclasses implement :meth:`loss`; they may override :meth:`gradients` (and the summed
    :meth:`_gradient_sum`) with closed forms.
    """

    name: str = "problem"
    _per_example: tuple[
        str, ...
    ] = ()  # attributes with one entry per example, subset with the data

    def __init__(self, data: Sequence[torch.Tensor], dim: int, lipschitz: float) -> None:
        data = tuple(data)
        if not data or not all(isinstance(t, torch.Tensor) and t.ndim >= 1 for t in data):
            raise ValueError(
                "data must be a non-empty sequence of tensors with a leading dimension n"
            )
        n = data[0].shape[0]
        if n < 1 or any(t.shape[0] != n for t in data):
            shapes = [tuple(t.shape) for t in data]
            raise ValueError(
                f"data tensors must share a leading dimension n >= 1; got shapes {shapes}"
            )
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"dim must be an integer >= 1; got {dim!r}")
        if not (isinstance(lipschitz, (int, float)) and math.isfinite(lipschitz) and lipschitz > 0):
            raise ValueError(f"lipschitz must be a finite number > 0; got {lipschitz!r}")
        self.data, self.dim, self.lipschitz = data, dim, float(lipschitz)

    @property
    def constants(self) -> Constants:
        """L0 = the declared Lipschitz constant (the region and the rest: none declared)."""
        return Constants(L0=self.lipschitz)

    @property
    def n(self) -> int:
        """The number of data points."""
        return self.data[0].shape[0]

    # --- per-example values (what the algorithms see) -------------------------------------------

    @abstractmethod
    def loss(self, x: torch.Tensor, *batch: torch.Tensor) -> torch.Tensor:
        """f(x[i, j], z_i) for x of shape (b, k, d) and data tensors with leading dimension b → (b,
        k)."""

    def losses(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """f(x[i, j], z_index[i]) for x (b, k, d) and integer ``index`` (b,) → (b, k)."""
        index = self._check_index(index)
        self._check_points(x, len(index))
        return self.loss(x, *(t[index] for t in self.data))

    def gradients(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """∇_x f(x[i, j], z_index[i]) → (b, k, d), by autograd of the summed losses.

        Each loss depends only on its own x[i, j], so the gradient of the sum is every per-example
        gradient at once. f is only Lipschitz, so the gradient exists almost everywhere; at a kink
        this returns autograd's choice (|·|′(0) = 0, relu′(0) = 0), which is a subgradient only for
        convex kinks. Subclasses with closed forms override this.
        """
        index = self._check_index(index)
        self._check_points(x, len(index))
        batch = tuple(t[index] for t in self.data)
        with torch.enable_grad():
            leaf = x.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(self.loss(leaf, *batch).sum(), leaf)
        return g

    # --- the objective F = mean over the dataset ------------------------------------------------

    def value(self, points: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
        """F(x) = (1/n) Σ_i f(x, z_i) at points (k, d) → (k,) (or (d,) → a scalar).

        The data are visited ``chunk`` examples at a time, so memory is O(chunk · k · d) at most
        whatever n is; the result does not depend on ``chunk`` (up to rounding).
        """
        points, single = self._check_eval(points, chunk)
        total = torch.zeros(points.shape[0], dtype=points.dtype)
        for batch in self._chunks(chunk):
            total += self._shared_loss(points, *batch).sum(0)
        total /= self.n
        return total[0] if single else total

    def gradient(self, points: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
        """∇F(x) = (1/n) Σ_i ∇f(x, z_i) at points (k, d) → (k, d) (a.e.; or (d,) → (d,)), in
        chunks."""
        points, single = self._check_eval(points, chunk)
        total = torch.zeros_like(points)
        for batch in self._chunks(chunk):
            total += self._gradient_sum(points, batch)
        total /= self.n
        return total[0] if single else total

    def _shared_loss(self, points: torch.Tensor, *batch: torch.Tensor) -> torch.Tensor:
        """f(points[j], z_i) for every example of ``batch`` at the same points (k, d) → (c, k)."""
        return self.loss(points.expand(batch[0].shape[0], *points.shape), *batch)

    def _gradient_sum(self, points: torch.Tensor, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Σ_{i in batch} ∇f(points, z_i) → (k, d): autograd through the points shared by the batch.

        Autograd reduces over the examples itself, so no (batch, k, d) tensor of gradients is
        formed."""
        with torch.enable_grad():
            leaf = points.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(self._shared_loss(leaf, *batch).sum(), leaf)
        return g

    # --- data ----------------------------------------------------------------------------------

    def subset(self, index) -> Problem:
        """The same objective (same f, d, L and known facts) on data[index], e.g. a train or test
        split.

        ``index``: integer indices, a boolean mask of length n, or a slice; must select at least one
        example. Subclasses holding per-example extras (e.g. an outlier mask) subset those too.
        """
        if isinstance(index, slice):
            index = torch.arange(self.n)[index]
        index = torch.as_tensor(index)
        if index.dtype == torch.bool:
            if index.shape != (self.n,):
                raise ValueError(
                    f"a boolean index must have shape ({self.n},); got {tuple(index.shape)}"
                )
            index = index.nonzero().flatten()
        index = self._check_index(index)
        if len(index) == 0:
            raise ValueError("index must select at least one example; got none")
        new = copy.copy(self)
        new.data = tuple(t[index] for t in self.data)
        for attribute in self._per_example:
            setattr(new, attribute, getattr(self, attribute)[index])
        return new

    def _chunks(self, chunk: int):
        for start in range(0, self.n, chunk):
            yield tuple(t[start : start + chunk] for t in self.data)

    # --- checks ---------------------------------------------------------------------------------

    def _check_index(self, index) -> torch.Tensor:
        index = torch.as_tensor(index)
        if (
            index.ndim != 1
            or index.dtype.is_floating_point
            or index.dtype.is_complex
            or index.dtype == torch.bool
        ):
            raise ValueError(
                f"index must be a 1-D integer tensor; got shape {tuple(index.shape)}, {index.dtype}"
            )
        index = index.long()
        if len(index) and (int(index.min()) < 0 or int(index.max()) >= self.n):
            raise ValueError(
                f"index must lie in [0, {self.n}); got values in [{int(index.min())}, {int(index.max())}]"
            )
        return index

    def _check_points(self, x: torch.Tensor, b: int) -> None:
        if x.ndim != 3 or x.shape[0] != b or x.shape[2] != self.dim:
            raise ValueError(
                f"x must have shape (b, k, d) = ({b}, k, {self.dim}); got {tuple(x.shape)}"
            )

    def _check_eval(self, points, chunk) -> tuple[torch.Tensor, bool]:
        if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
            raise ValueError(f"chunk must be an integer >= 1; got {chunk!r}")
        return self._as_points(points)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self.n}, d={self.dim}, L={self.lipschitz:.4g})"
