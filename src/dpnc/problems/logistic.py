"""Logistic regression with public constants on breast cancer (binary) and digits (10 classes).

Features come from a **public, per-example** map (:func:`unit_features`): no mean, deviation or
range of the private data (cross-example statistics would leak), each row scaled to unit norm, so
‖a‖ ≤ 1 for every admissible example and the constants (:class:`LogisticRegression`) are public."""

from __future__ import annotations

import math

import torch

from dpnc.problems.base import Constants, Problem, Region

__all__ = ["DATASETS", "LogisticRegression", "unit_features"]

DATASETS = ("breast-cancer", "digits")


def unit_features(
    raw: torch.Tensor, transform: str = "identity", *, intercept: bool = True
) -> torch.Tensor:
    """a = (u/√2, 1/√2) with u = φ(z)/‖φ(z)‖ (u = 0 if φ(z) = 0): a public map applied to each row
    alone. Without ``intercept``, a = u (for models that carry their own biases).

    ``transform`` φ, applied entrywise: ``"identity"``; ``"log"``: log(z + 10⁻³) (nonnegative
    features spanning orders of magnitude, e.g. areas beside ratios; the constant keeps zeros
    finite); ``"pixel"``: z/16 (scikit-learn's 8×8 digits, intensities 0..16). Row i of the result
    depends on row i of ``raw`` only, and ‖a‖ ≤ 1 for every row (= 1 unless φ(z) = 0)."""
    raw = torch.as_tensor(raw, dtype=torch.float64)
    if raw.ndim != 2 or not bool(torch.isfinite(raw).all()):
        raise ValueError(f"raw must be a finite (n, p) tensor; got shape {tuple(raw.shape)}")
    if transform == "log":
        if bool((raw < 0).any()):
            raise ValueError("transform 'log' needs nonnegative features")
        phi = torch.log(raw + 1e-3)
    elif transform == "pixel":
        phi = raw / 16.0
    elif transform == "identity":
        phi = raw
    else:
        raise ValueError(
            f"transform must be one of ('identity', 'log', 'pixel'); got {transform!r}"
        )
    u = phi / torch.linalg.vector_norm(phi, dim=-1, keepdim=True).clamp_min(1e-300)
    if not intercept:
        return u
    return torch.cat([u, torch.ones(len(u), 1, dtype=torch.float64)], dim=-1) / math.sqrt(2)


class LogisticRegression(Problem):
    """Binary (``classes=2``) or multinomial logistic regression with optional ridge λ on the ball
    ‖x‖ ≤ R.

    Args:
        a: features (n, p), every row of norm ≤ 1 (e.g. :func:`unit_features`); the constants rely
            on it.
        y: integer labels (n,) in [0, classes).
        classes: K ≥ 2; d = p for K = 2 (one weight vector), d = K·p otherwise.
        l2: λ ≥ 0, the ridge term (λ/2)‖x‖² of every per-example loss.
        radius: R of the region ‖x‖ ≤ R (default √(2 log K/λ) when λ > 0, none when λ = 0).

    Constants (public: they follow from the loss alone, given ‖a‖ ≤ 1 for *every* admissible
    example):

    * binary (``classes=2``), y ∈ {0, 1}, s = 2y − 1: f(x; a, y) = log(1 + exp(−s⟨x, a⟩)) +
      (λ/2)‖x‖², ∇f = −s·σ(−s⟨x, a⟩)·a + λx, so ‖∇f‖ ≤ ‖a‖ + λ‖x‖ ≤ 1 + λR and ∇²f ⪯ (‖a‖²/4 + λ)I:
      L0 = 1 + λR, L1 = 1/4 + λ.
    * multinomial (``classes=K``), x = vec(W), W ∈ R^{K×p}: f = logsumexp(Wa) − (Wa)_y + (λ/2)‖x‖²,
      ∇f = (π − e_y) ⊗ a + λx with π = softmax(Wa); ‖π − e_y‖² = (1 − π_y)² + Σ_{k≠y} π_k² ≤ 2(1 −
      π_y)² ≤ 2, so L0 = √2 + λR; ∇²f = (diag π − ππᵀ) ⊗ aaᵀ + λI and λ_max(diag π − ππᵀ) ≤ 1/2: L1
      = 1/2 + λ.

    Both losses are convex (weak convexity 0). With λ > 0, F is λ-strongly convex, hence PL: F(x) −
    F* ≤ ‖∇F(x)‖²/(2λ), the (γ, κ)-KL inequality with κ = 2, γ = 1/√(2λ). The default region R =
    √(2·log K/λ) holds the minimiser: λ/2‖x*‖² ≤ F(x*) ≤ F(0) = log K (public). With λ = 0 there is
    no region (L0 = 1 or √2 on all of R^d) and no KL constants (the minimum may not be attained).
    Closed-form per-example gradients."""

    name = "logistic"

    def __init__(
        self,
        a: torch.Tensor,
        y: torch.Tensor,
        *,
        classes: int = 2,
        l2: float = 0.0,
        radius: float | None = None,
    ) -> None:
        a = torch.as_tensor(a, dtype=torch.float64)
        y = torch.as_tensor(y)
        if not isinstance(classes, int) or isinstance(classes, bool) or classes < 2:
            raise ValueError(f"classes must be an integer >= 2; got {classes!r}")
        if a.ndim != 2 or y.shape != (a.shape[0],):
            raise ValueError(f"a must be (n, p) and y (n,); got {tuple(a.shape)}, {tuple(y.shape)}")
        if (
            not bool(torch.isfinite(a).all())
            or float(torch.linalg.vector_norm(a, dim=-1).max()) > 1 + 1e-12
        ):
            raise ValueError(
                "every feature row a must be finite with norm <= 1 (the declared L0 relies on it)"
            )
        if y.dtype.is_floating_point or bool(((y < 0) | (y >= classes)).any()):
            raise ValueError(f"labels y must be integers in [0, {classes})")
        if not (
            isinstance(l2, (int, float))
            and not isinstance(l2, bool)
            and math.isfinite(l2)
            and l2 >= 0
        ):
            raise ValueError(f"l2 must be a finite number >= 0; got {l2!r}")
        if radius is None and l2 > 0:
            radius = math.sqrt(2 * math.log(classes) / l2)
        if radius is not None and not (
            isinstance(radius, (int, float)) and math.isfinite(radius) and radius > 0
        ):
            raise ValueError(f"radius must be a finite number > 0; got {radius!r}")
        self.classes, self.features, self.l2 = classes, a.shape[1], float(l2)
        self.radius = None if radius is None else float(radius)
        G = 1.0 if classes == 2 else math.sqrt(2.0)
        lipschitz = G + self.l2 * (self.radius or 0.0)
        super().__init__(
            (a, y.long()), dim=a.shape[1] * (1 if classes == 2 else classes), lipschitz=lipschitz
        )

    @classmethod
    def load(
        cls, dataset: str, *, l2: float = 1e-4, seed: int = 0, test_fraction: float = 0.2
    ) -> tuple[LogisticRegression, LogisticRegression]:
        """(train, test) on a scikit-learn dataset shipped with the package, rows shuffled by
        ``seed``.

        ``"breast-cancer"``: 569 × 30, binary (1 = benign), φ = log(z + 10⁻³); ``"digits"``: 1797 ×
        64, 10 classes, φ = z/16. Features by :func:`unit_features` (public, per example), so the
        split changes no constant."""
        from sklearn import datasets

        if dataset == "breast-cancer":
            raw, transform, classes = datasets.load_breast_cancer(), "log", 2
        elif dataset == "digits":
            raw, transform, classes = datasets.load_digits(), "pixel", 10
        else:
            raise ValueError(f"dataset must be one of {DATASETS}; got {dataset!r}")
        if not (isinstance(test_fraction, float) and 0 < test_fraction < 1):
            raise ValueError(f"test_fraction must be a float in (0, 1); got {test_fraction!r}")
        a = unit_features(torch.as_tensor(raw.data), transform)
        y = torch.as_tensor(raw.target).long()
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
        n_test = max(1, round(test_fraction * len(y)))
        problem = cls(a[order], y[order], classes=classes, l2=l2)
        problem.name = f"logistic-{dataset}"
        return problem.subset(torch.arange(n_test, len(y))), problem.subset(torch.arange(n_test))

    @property
    def constants(self) -> Constants:
        """L0, L1, weak convexity 0, the region, and with λ > 0 the PL constants κ = 2, γ =
        1/√(2λ)."""
        region = (
            None
            if self.radius is None
            else Region(torch.zeros(self.dim, dtype=torch.float64), self.radius)
        )
        kl = {"gamma": 1 / math.sqrt(2 * self.l2), "kappa": 2.0} if self.l2 > 0 else {}
        return Constants(
            L0=self.lipschitz,
            L1=(0.25 if self.classes == 2 else 0.5) + self.l2,
            weak_convexity=0.0,
            region=region,
            **kl,
        )

    # --- losses and gradients ------------------------------------------------------------------

    def _scores(self, x: torch.Tensor, a: torch.Tensor, shared: bool) -> torch.Tensor:
        """⟨x, a⟩ (binary) or W a (multinomial): x (b, k, d) per example, or (k, d) shared → (b, k[,
        K])."""
        if self.classes == 2:
            return torch.einsum("kd,bd->bk" if shared else "bkd,bd->bk", x, a)
        W = x.unflatten(-1, (self.classes, self.features))
        return torch.einsum("kcp,bp->bkc" if shared else "bkcp,bp->bkc", W, a)

    def _loss(self, x, a, y, shared: bool) -> torch.Tensor:
        s = self._scores(x, a, shared)
        if self.classes == 2:
            sign = (2 * y - 1).to(s.dtype)[:, None]
            value = torch.nn.functional.softplus(-sign * s)
        else:
            value = torch.logsumexp(s, -1) - s.gather(
                -1, y[:, None, None].expand(*s.shape[:2], 1)
            ).squeeze(-1)
        if self.l2:
            value = value + 0.5 * self.l2 * (x * x).sum(-1)
        return value

    def loss(self, x: torch.Tensor, a: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._loss(x, a, y, shared=False)

    def _shared_loss(self, points: torch.Tensor, a: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._loss(points, a, y, shared=True)

    def _residual(self, x, a, y, shared: bool) -> torch.Tensor:
        """∂f/∂score: −s·σ(−s·score) (b, k), or π − e_y (b, k, K)."""
        s = self._scores(x, a, shared)
        if self.classes == 2:
            sign = (2 * y - 1).to(s.dtype)[:, None]
            return -sign * torch.sigmoid(-sign * s)
        return (
            torch.softmax(s, -1)
            - torch.nn.functional.one_hot(y, self.classes).to(s.dtype)[:, None, :]
        )

    def gradients(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """∇f(x[i, j]; z_index[i]) in closed form → (b, k, d)."""
        index = self._check_index(index)
        self._check_points(x, len(index))
        a, y = self.data[0][index], self.data[1][index]
        r = self._residual(x, a, y, shared=False)
        g = (
            r[..., None] * a[:, None, :]
            if self.classes == 2
            else (r[..., None] * a[:, None, None, :]).flatten(-2)
        )
        return g + self.l2 * x if self.l2 else g

    def example_gradients(self, w: torch.Tensor) -> torch.Tensor:
        """∇f(w; z_i) for every example, as the KL algorithms ask: (d,) → (n, d), (k, d) → (k, n,
        d)."""
        points, single = self._as_points(w, "w")
        g = self.gradients(points.expand(self.n, *points.shape), torch.arange(self.n)).transpose(
            0, 1
        )
        return g[0] if single else g

    def _gradient_sum(self, points: torch.Tensor, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        a, y = batch
        r = self._residual(points, a, y, shared=True)
        g = (
            torch.einsum("bk,bp->kp", r, a)
            if self.classes == 2
            else torch.einsum("bkc,bp->kcp", r, a).flatten(-2)
        )
        return g + len(y) * self.l2 * points if self.l2 else g

    # --- evaluation ------------------------------------------------------------------------------

    def accuracy(self, points: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
        """The fraction of examples classified right at points (k, d) → (k,) (or (d,) → a
        scalar)."""
        points, single = self._check_eval(points, chunk)
        correct = torch.zeros(points.shape[0], dtype=points.dtype)
        for a, y in self._chunks(chunk):
            s = self._scores(points, a, shared=True)
            predicted = (s > 0).long() if self.classes == 2 else s.argmax(-1)
            correct += (predicted == y[:, None]).sum(0)
        correct /= self.n
        return correct[0] if single else correct

    def solve(self, iterations: int = 200) -> torch.Tensor:
        """The non-private minimiser of F (L-BFGS from 0, projected onto the region): the ε = ∞
        reference.

        Not private: for evaluating private runs only (excess risk F(x) − F(x̂))."""
        x = torch.zeros(self.dim, dtype=torch.float64, requires_grad=True)
        optimizer = torch.optim.LBFGS(
            [x],
            lr=1,
            max_iter=iterations,
            tolerance_grad=1e-12,
            tolerance_change=1e-14,
            line_search_fn="strong_wolfe",
        )

        def closure():
            optimizer.zero_grad()
            value = self.value(x[None])[0]
            value.backward()
            return value

        with torch.enable_grad():
            optimizer.step(closure)
        x = x.detach()
        region = self.constants.region
        return x if region is None else region.project(x)

    def __repr__(self) -> str:
        return (
            f"LogisticRegression(n={self.n}, p={self.features}, classes={self.classes}, l2={self.l2:g}, "
            f"d={self.dim}, L0={self.lipschitz:.4g})"
        )
