"""The DPZero paper's synthetic quadratic of chosen effective rank (docs/papers.md, DPZero §4.1).

f(x; ξ) = ½(x − ξ)ᵀA(x − ξ) with A = diag(a), evaluated for a batch of points (..., d) at once, in
closed form from per-example sufficient statistics (Aξ_i, ½ξ_iᵀAξ_i, …)."""

from __future__ import annotations

import torch

from dpnc.privacy.clipping import clip_weights
from dpnc.problems.base import Constants, Directional, Objective

HESSIANS = ("identity", "sqrt", "inverse")


class Quadratic(Objective):
    """F_S(x) = (1/2n) Σ_i (x − ξ_i)ᵀA(x − ξ_i) on a train and a test set: an :class:`Objective`.

    The algorithms see the training set through the protocol (:meth:`losses`, :meth:`losses_at`,
    :meth:`gradients`, and DP-GD's closed form :meth:`clipped_gradient_sum`); :meth:`value` and
    :meth:`gradient` take a ``split`` ("train" or "test") for evaluation.

    Constants: ∇f(·; ξ) is ‖A‖₂-Lipschitz, so L1 = max_j a_j (= 1). f(·; ξ) is *not* globally
    Lipschitz (‖∇f(x; ξ)‖ = ‖A(x − ξ)‖ grows with ‖x‖ and with the unbounded Gaussian data), so no
    L0 is declared: the quadratic is DPZero's smoothness test (A3.5 holds only locally, DPZero
    §7.8), and the algorithms' privacy rests on their clipping threshold C, never on an L0.

    Args:
        a: the diagonal of A, shape (d,).
        train, test: data ξ, shapes (n, d) and (n_test, d).
    """

    name = "dpzero-quadratic"

    def __init__(self, a: torch.Tensor, train: torch.Tensor, test: torch.Tensor) -> None:
        if (
            a.ndim != 1
            or train.ndim != 2
            or train.shape[1] != a.shape[0]
            or test.shape[1] != a.shape[0]
        ):
            raise ValueError("a must be (d,), train (n, d) and test (m, d)")
        self.a, self.train, self.test = a, train, test
        self.d, self.n = a.shape[0], train.shape[0]
        self.dim = self.d
        self._stats = {
            name: self._split_stats(data) for name, data in (("train", train), ("test", test))
        }

    @classmethod
    def synthetic(
        cls,
        d: int,
        hessian: str,
        n: int = 10_000,
        n_test: int | None = None,
        *,
        seed: int = 0,
        dtype: torch.dtype = torch.float64,
    ) -> Quadratic:
        """The paper's instance: ξ ~ N(1, I_d), A by ``hessian`` in {"identity", "sqrt", "inverse"}.

        A = diag(a), ‖A‖₂ = 1, so the effective rank is r = Tr A: ``"identity"``, a_j = 1, r = d;
        ``"sqrt"``, a_j = 1/√j, r = O(√d); ``"inverse"``, a_j = 1/j, r = O(log d). Every coordinate
        of every ξ_i is i.i.d. N(1, 1); the test set (``n_test`` rows, default n) has the same
        law."""
        if hessian not in HESSIANS:
            raise ValueError(f"hessian must be one of {HESSIANS}; got {hessian!r}")
        if not isinstance(d, int) or d < 1:
            raise ValueError(f"d must be an integer >= 1; got {d!r}")
        j = torch.arange(1, d + 1, dtype=dtype)
        a = {"identity": torch.ones_like(j), "sqrt": j.rsqrt(), "inverse": 1 / j}[hessian]
        gen = torch.Generator().manual_seed(seed)
        data = 1 + torch.randn(n + (n_test or n), d, generator=gen, dtype=dtype)
        return cls(a, data[:n], data[n:])

    @property
    def constants(self) -> Constants:
        """L1 = ‖A‖₂ = max_j a_j; L0 = None (not globally Lipschitz; see the class docstring)."""
        return Constants(L0=None, L1=float(self.a.max()))

    @property
    def effective_rank(self) -> float:
        return float(self.a.sum() / self.a.max())

    def _split_stats(self, xi: torch.Tensor) -> dict[str, torch.Tensor]:
        return {
            "a_xi": xi * self.a,
            "a2_xi": xi * self.a**2,
            "c": 0.5 * (xi**2 * self.a).sum(-1),
            "c2": (xi**2 * self.a**2).sum(-1),
            "mean": xi.mean(0),
            "mean_c": 0.5 * (xi**2 * self.a).sum(-1).mean(),
        }

    # --- per-example values (what the algorithms see) -------------------------------------------

    def losses_at(self, points: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        """ℓ_i(x) = ½xᵀAx − xᵀAξ_i + ½ξ_iᵀAξ_i at points (..., d) shared by the batch → (...,
        |index|).

        ``index`` None: every training example.
        """
        a_xi, c = self._rows(index, "a_xi", "c")
        return 0.5 * (points**2 * self.a).sum(-1, keepdim=True) - points @ a_xi.T + c

    def two_point(
        self, x: torch.Tensor, u: torch.Tensor, lam: float, index: torch.Tensor | None = None
    ):
        """The two-point differences at points x (..., d) along u, in closed form: a
        :class:`~dpnc.problems.base. Directional` with a_i = (ℓ_i(x + λu) − ℓ_i(x − λu))/(2λ) =
        (Au)ᵀx − (Au)ᵀξ_i (exact on a quadratic, for every λ) → (..., |index|), and the mean loss
        over both points, F_batch(x) + ½λ²uᵀAu, as :class:`~dpnc.estimators.TwoPoint` reports it.
        The product of the batch's data with Au is shared by all runs: O(nd + Kn) a step instead of
        two O(Knd) evaluations."""
        au = self.a * u
        xi, c = self._rows(index, "xi", "c")
        if self._full(index):
            loss = self.value(x, "train")
        elif len(index):
            loss = 0.5 * (x**2 * self.a).sum(-1) - x @ (self.a * xi.mean(0)) + c.mean()
        else:
            loss = torch.zeros(x.shape[:-1], dtype=x.dtype)
        return Directional((x @ au).unsqueeze(-1) - xi @ au, loss + 0.5 * lam**2 * (u * au).sum())

    def _full(self, index: torch.Tensor | None) -> bool:
        """Is ``index`` the whole training set in order (None, or what a full-batch sampler
        draws)?"""
        return index is None or (
            len(index) == self.n and bool((index == torch.arange(self.n)).all())
        )

    def _rows(self, index: torch.Tensor | None, *names: str) -> tuple[torch.Tensor, ...]:
        """The training statistics ``names`` ("xi" the data) of the examples ``index``; the full
        batch (None, or every example in order, as a full-batch sampler draws it) without copying n
        × d rows each step."""
        s, full = {"xi": self.train, **self._stats["train"]}, self._full(index)
        return tuple(s[name] if full else s[name][index] for name in names)

    def losses(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """f(x[i, j], ξ_index[i]) for x (b, k, d) → (b, k)."""
        s = self._stats["train"]
        return (
            0.5 * (x**2 * self.a).sum(-1)
            - (x * s["a_xi"][index].unsqueeze(1)).sum(-1)
            + s["c"][index].unsqueeze(1)
        )

    def gradients(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """∇f(x[i, j], ξ_index[i]) = A(x[i, j] − ξ_index[i]) for x (b, k, d) → (b, k, d)."""
        return self.a * (x - self.train[index].unsqueeze(1))

    @staticmethod
    def loss_one(a: torch.Tensor):
        """One example's loss ℓ(x; ξ) as a function for torch.func (per-example gradients)."""
        return lambda x, xi: 0.5 * ((x - xi) ** 2 * a).sum()

    def clipped_gradient_sum(self, x: torch.Tensor, C, batch: torch.Tensor | None = None):
        """Σ_i clip_C(A(x − ξ_i)), the fraction clipped, and the mean loss, in closed form.

        A sum, not a mean: DP-GD divides it by its fixed batch size B (under Poisson sampling the
        realised |batch| varies, and dividing by it would break the C/B sensitivity).

        ‖A(x − ξ_i)‖² = xᵀA²x − 2xᵀA²ξ_i + ξ_iᵀA²ξ_i and Σ_i w_i A(x − ξ_i) = A(x·Σ_i w_i − Σ_i w_i
        ξ_i): two matrix products, no (runs × n × d) tensor. Equals the torch.func route (tested).
        """
        xi, a2_xi, c2 = self._rows(batch, "xi", "a2_xi", "c2")
        sq = (x**2 * self.a**2).sum(-1, keepdim=True) - 2 * x @ a2_xi.T + c2
        norms = sq.clamp_min(0).sqrt()
        w, over = clip_weights(norms, C)
        g = self.a * (x * w.sum(-1, keepdim=True) - w @ xi)
        return g, over.to(x.dtype).mean(-1), self.losses_at(x, batch).mean(-1)

    # --- evaluation -------------------------------------------------------------------------------

    def value(self, points: torch.Tensor, split: str = "train") -> torch.Tensor:
        """F(x) on a split: ½xᵀAx − xᵀAξ̄ + mean_i ½ξ_iᵀAξ_i, for points (..., d) → (...)."""
        s = self._stats[split]
        return (
            0.5 * (points**2 * self.a).sum(-1) - (points * self.a * s["mean"]).sum(-1) + s["mean_c"]
        )

    def gradient(self, points: torch.Tensor, split: str = "train") -> torch.Tensor:
        """∇F(x) = A(x − ξ̄)."""
        return self.a * (points - self._stats[split]["mean"])

    def gradient_norm(self, x: torch.Tensor, split: str = "train") -> torch.Tensor:
        return torch.linalg.vector_norm(self.gradient(x, split), dim=-1)

    def __repr__(self) -> str:
        return f"Quadratic(n={self.n}, d={self.d}, r={self.effective_rank:.4g})"
