"""Neural-network objectives: nonsmooth, nonconvex, Lipschitz only on a ball of parameters.

- :class:`TwoLayerReLU`: a one-hidden-layer ReLU network on scikit-learn's breast-cancer data, hinge
  or absolute loss; its Lipschitz constant L0 = √(1 + 2R²) holds on the ball ‖x‖ ≤ R, declared as
  its :class:`~dpnc.problems.base.Region`.
"""

from __future__ import annotations

import math

import torch

from dpnc.problems.base import Constants, Problem, Region
from dpnc.problems.logistic import unit_features

LOSSES = ("hinge", "absolute")


class TwoLayerReLU(Problem):
    """A one-hidden-layer ReLU network, f(x, (z, y)) = ℓ(y, v·relu(Wz + c) + b0), on real data.

    Parameters x ∈ R^d, d = h·p + 2h + 1, are the flattened (W (h×p, row-major), c (h), v (h), b0
    (1)). Loss ``"hinge"``: max(0, 1 − y·pred); ``"absolute"``: |y − pred|; labels y = ±1. Both are
    1-Lipschitz in pred, and nonsmooth (hinge, ReLU) and nonconvex (the product v·relu(Wz)) in x.

    Lipschitz (on the ball ‖x‖ ≤ R only: f grows quadratically in x, so no global L exists). For ‖z‖
    ≤ 1, where the gradient exists, ∂pred/∂W_k = v_k·1[pre_k > 0]·z, ∂pred/∂c_k = v_k·1[pre_k > 0],
    ∂pred/∂v_k = relu(pre_k) ≤ ‖W_k‖‖z‖ + |c_k|, ∂pred/∂b0 = 1, so

        ‖∇pred‖² ≤ 1 + Σ_k [v_k²(‖z‖² + 1) + (‖W_k‖ + |c_k|)²] ≤ 1 + 2‖v‖² + 2(‖W‖²_F + ‖c‖²) ≤ 1 +
        2R²,

    using (s + t)² ≤ 2(s² + t²) and ‖v‖² + ‖W‖²_F + ‖c‖² ≤ ‖x‖² ≤ R². Hence ‖∇f‖ ≤ L = √(1 + 2R²),
    and, the ball being convex, |f(x) − f(y)| ≤ L‖x − y‖ for x, y in it (Lebourg's mean value
    theorem). The bound is attained (b0 = 0, W_k ∥ z, |c_k| = ‖W_k‖, ‖z‖ = 1, loss active). Outside
    the ball the declared L is not a bound: the estimators then clip differences to it, so privacy
    holds but unbiasedness does not.

    Data (:meth:`breast_cancer`): scikit-learn's Wisconsin breast-cancer set (569 × 30, shipped with
    scikit-learn), each row mapped alone by :func:`~dpnc.problems.logistic.unit_features` (log(z +
    10⁻³), then scaled to unit norm): no statistic across examples (a mean or standard deviation of
    the data would be an un-noised release of it); y = +1 benign, −1 malignant; rows shuffled by
    ``seed``."""

    name = "two-layer-relu"

    def __init__(
        self,
        z: torch.Tensor,
        y: torch.Tensor,
        *,
        hidden: int,
        loss: str = "hinge",
        radius: float = 10.0,
    ) -> None:
        z, y = torch.as_tensor(z, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)
        if z.ndim != 2 or y.shape != (z.shape[0],):
            raise ValueError(f"z must be (n, p) and y (n,); got {tuple(z.shape)}, {tuple(y.shape)}")
        if not torch.isfinite(z).all() or torch.linalg.vector_norm(z, dim=-1).max() > 1 + 1e-12:
            raise ValueError(
                "every feature row z must be finite with norm <= 1 (the declared L relies on it)"
            )
        if not ((y == 1) | (y == -1)).all():
            raise ValueError("labels y must be +1 or -1")
        _refuse_unless(
            isinstance(hidden, int) and not isinstance(hidden, bool) and hidden >= 1,
            "hidden",
            "an integer >= 1",
            hidden,
        )
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}; got {loss!r}")
        _refuse_unless(
            isinstance(radius, (int, float))
            and not isinstance(radius, bool)
            and math.isfinite(radius)
            and radius > 0,
            "radius",
            "a finite number > 0",
            radius,
        )
        self.hidden, self.features, self.loss_name, self.radius = (
            hidden,
            z.shape[1],
            loss,
            float(radius),
        )
        super().__init__(
            (z, y), dim=hidden * z.shape[1] + 2 * hidden + 1, lipschitz=math.sqrt(1 + 2 * radius**2)
        )

    @classmethod
    def breast_cancer(
        cls, hidden: int = 16, loss: str = "hinge", radius: float = 10.0, seed: int | None = 0
    ) -> TwoLayerReLU:
        """The breast-cancer instance; ``seed`` shuffles the rows (None keeps scikit-learn's
        order)."""
        from sklearn.datasets import load_breast_cancer

        raw = load_breast_cancer()
        z = unit_features(raw.data, "log", intercept=False)
        y = torch.as_tensor(2.0 * raw.target - 1.0, dtype=torch.float64)
        if seed is not None:
            _refuse_unless(
                isinstance(seed, int) and not isinstance(seed, bool), "seed", "an integer", seed
            )
            order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
            z, y = z[order], y[order]
        return cls(z, y, hidden=hidden, loss=loss, radius=radius)

    @property
    def constants(self) -> Constants:
        """L0 = √(1 + 2R²), valid on the region ‖x‖ ≤ R only (see the class docstring)."""
        return Constants(
            L0=self.lipschitz,
            region=Region(torch.zeros(self.dim, dtype=torch.float64), self.radius),
        )

    def unpack(
        self, x: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Views (W (..., h, p), c (..., h), v (..., h), b0 (...)) of parameters x (..., d)."""
        h, p = self.hidden, self.features
        return (
            x[..., : h * p].unflatten(-1, (h, p)),
            x[..., h * p : h * p + h],
            x[..., h * p + h : h * p + 2 * h],
            x[..., -1],
        )

    def init(self, generator: torch.Generator) -> torch.Tensor:
        """A standard random start (torch.nn.Linear's): W, c ∼ U(±1/√p), v, b0 ∼ U(±1/√h); ‖x‖² ≈
        h/3.

        Raises ValueError if the point falls outside the ball ‖x‖ ≤ radius, where L is declared.
        """
        h, p = self.hidden, self.features
        scale = torch.cat(
            [
                torch.full((h * p + h,), p**-0.5, dtype=torch.float64),
                torch.full((h + 1,), h**-0.5, dtype=torch.float64),
            ]
        )
        x = scale * (2 * torch.rand(self.dim, generator=generator, dtype=torch.float64) - 1)
        if torch.linalg.vector_norm(x) > self.radius:
            raise ValueError(
                f"the initial point has norm {float(torch.linalg.vector_norm(x)):.3g} > radius "
                f"{self.radius}; construct the problem with a larger radius"
            )
        return x

    def _predict(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        W, c, v, b0 = self.unpack(x)
        hidden = torch.relu(torch.einsum("bkhp,bp->bkh", W, z) + c)
        return torch.einsum("bkh,bkh->bk", v, hidden) + b0

    def _apply_loss(self, pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.loss_name == "hinge":
            return torch.relu(1 - y[:, None] * pred)
        return (y[:, None] - pred).abs()

    def loss(self, x: torch.Tensor, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._apply_loss(self._predict(x, z), y)

    def _shared_predict(self, points: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        W, c, v, b0 = self.unpack(points)  # (k, h, p), (k, h), (k, h), (k,)
        hidden = torch.relu(torch.einsum("khp,bp->bkh", W, z) + c)
        return torch.einsum("kh,bkh->bk", v, hidden) + b0

    def _shared_loss(self, points: torch.Tensor, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._apply_loss(self._shared_predict(points, z), y)

    def accuracy(self, points: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
        """The fraction of examples with sign(pred) = y, at points (k, d) → (k,) (or (d,) → a
        scalar)."""
        points, single = self._check_eval(points, chunk)
        correct = torch.zeros(points.shape[0], dtype=points.dtype)
        for z, y in self._chunks(chunk):
            correct += (self._shared_predict(points, z) * y[:, None] > 0).sum(0)
        correct /= self.n
        return correct[0] if single else correct

    def __repr__(self) -> str:
        return (
            f"TwoLayerReLU(n={self.n}, p={self.features}, hidden={self.hidden}, loss={self.loss_name!r}, "
            f"radius={self.radius:.4g}, d={self.dim}, L={self.lipschitz:.4g})"
        )


def _refuse_unless(ok: bool, name: str, rule: str, value) -> None:
    if not ok:
        raise ValueError(f"{name} must be {rule}; got {value!r}")
