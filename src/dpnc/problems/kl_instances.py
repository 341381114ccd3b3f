"""The lower-bound instances of Menart et al. (Theorems 7 and 8; docs/papers.md, Menart et al. §3)
and the lower bounds themselves.

Each instance is a :class:`~dpnc.problems.kl_objective.KLObjective` with explicit data (per-example
gradients), declaring its constants with their proofs; the bounds drop their constants and log
factors."""

from __future__ import annotations

import math

import torch

from dpnc.problems.kl_objective import F64, KLObjective, _integer, _positive, default_weak_convexity


class HuberLinear(KLObjective):
    """Theorem 7's instance: f(w; x) = ⟨w, x⟩ + λH(w), F(w) = ⟨w, x̄⟩ + λH(w). Build with
    :func:`thm7_instance`.

    Correction (Menart et al. §3): the paper prints H(w) = ‖w‖² for ‖w‖ ≤ 4D and 4D‖w‖ otherwise,
    whose gradient jumps from 8Dw/‖w‖ to 4Dw/‖w‖ at ‖w‖ = 4D (a concave kink: not convex, not
    smooth, contradicting the theorem's "convex, smooth"). Default: the Huber function H(w) = 8D‖w‖
    − 16D² outside, C¹, convex and 2-smooth; ``paper=True`` restores the printed one. Inside ‖w‖ ≤
    4D both are ‖w‖².

    Constants (region: the ball of radius 4D around 0, where F = λ‖w − w*‖² + F*):
    - w* = −x̄/(2λ), ‖w*‖ ≤ D since ‖Σx_i‖ ≤ NL0 and λ = NL0/(2nD); F* = −λ‖w*‖².
    - KL (κ = 2): F − F* = λ‖w − w*‖², ‖∇F‖ = 2λ‖w − w*‖, so F − F* = ‖∇F‖²/(4λ): γ = 1/(2√λ).
    - L0 = L0_data + 8λD = L0_data(1 + 4N/n) ≤ 5L0_data: ‖x‖ ≤ L0_data and ‖λ∇H‖ ≤ 8λD (the paper
      writes L0 + 4λD, an underestimate inside the quadratic region).
    - L1 = 2λ = NL0/(nD) ≤ √d L0/(nεD) (corrected H; None with paper=True).
    - weak_convexity: corrected: convex, :func:`default_weak_convexity`; paper=True: None (concave
    kink)."""

    name = "thm7-huber"

    def __init__(
        self, X, lam: float, D: float, L0_data: float, N: int, *, paper: bool = False
    ) -> None:
        self.X, self.lam, self.D, self.L0_data, self.N, self.paper = X, lam, D, L0_data, N, paper
        self.n, self.dim = X.shape
        self._explicit = True
        self.x_mean = X.mean(0)
        self.w_star = -self.x_mean / (2 * lam)
        gamma, L0 = 1 / (2 * math.sqrt(lam)), L0_data + 8 * lam * D
        self._declare(
            L0=L0,
            L1=None if paper else 2 * lam,
            weak_convexity=None if paper else default_weak_convexity(gamma, 2.0, L0),
            gamma=gamma,
            kappa=2.0,
            center=torch.zeros(self.dim, dtype=F64),
            radius=4 * D,
            F_star=-lam * float(self.w_star @ self.w_star),
        )

    def _H(self, points):
        r = torch.linalg.vector_norm(points, dim=-1)
        t = 4 * self.D
        outside = 4 * self.D * r if self.paper else 2 * t * r - t * t
        return torch.where(r <= t, r * r, outside)

    def _grad_H(self, points):
        r = torch.linalg.vector_norm(points, dim=-1, keepdim=True)
        t = 4 * self.D
        slope = (4 * self.D if self.paper else 2 * t) / r.clamp_min(1e-300)
        return torch.where(r <= t, 2 * torch.ones_like(r), slope) * points

    def _value(self, points):
        return points @ self.x_mean + self.lam * self._H(points)

    def _gradient(self, points):
        return self.x_mean + self.lam * self._grad_H(points)

    def _example_gradients(self, points):
        return self.X + self.lam * self._grad_H(points)[:, None, :]

    def _example_losses(self, points):
        return points @ self.X.T + self.lam * self._H(points)[:, None]


def thm7_instance(
    n: int,
    d: int,
    epsilon: float,
    D: float = 1.0,
    L0: float = 1.0,
    seed: int = 0,
    *,
    paper: bool = False,
) -> HuberLinear:
    """Theorem 7's hard instance (Menart et al. §3): N = min(⌊√d/ε⌋, n) points in {±L0/√d}^d, the
    rest 0.

    The theorem needs a fingerprinting code for the nonzero points; here each column j has a bias
    p_j = sin²θ_j, θ_j uniform on [t, π/2 − t] with t = 1/(300N) (Tardos' law) and entries +L0/√d
    with probability p_j, so that ‖Σx_i‖ is a constant fraction of NL0 (with unbiased signs it would
    be ~√N L0). λ = NL0/(2nD). See :class:`HuberLinear` for the constants and the correction taken
    (``paper``)."""
    n, d = _integer("n", n, 1), _integer("d", d, 1)
    epsilon, D, L0 = _positive("epsilon", epsilon), _positive("D", D), _positive("L0", L0)
    N = max(1, min(math.floor(math.sqrt(d) / epsilon), n))
    gen = torch.Generator().manual_seed(seed)
    t = 1 / (300 * N)
    theta = t + (math.pi / 2 - 2 * t) * torch.rand(d, generator=gen, dtype=F64)
    signs = torch.where(
        torch.rand(N, d, generator=gen, dtype=F64) < torch.sin(theta) ** 2, 1.0, -1.0
    )
    X = torch.zeros(n, d, dtype=F64)
    X[:N] = signs.to(F64) * (L0 / math.sqrt(d))
    return HuberLinear(X, N * L0 / (2 * n * D), D, L0, N, paper=paper)


class TwoSidedPower(KLObjective):
    """Theorem 8's d = 1 instance, labels y ∈ {±1}. Build with :func:`thm8_instance`.

    f(w; +1) = a − w for w ≤ a, (w − a)^τ for w > a;  f(w; −1) = (−a − w)^τ for w ≤ −a, w + a for w
    > −a; τ = κ/(κ−1), p = 1/(nε), a = p^{κ−1}/2 (= p^{1/(τ−1)}/2). With n₊ = ⌈n(1+p)/2⌉ labels +1
    and p̂ = (2n₊ − n)/n ≥ p (the realised imbalance):
    - on [−a, a], F(w) = a − p̂w; F′ = −p̂ on (−a, a), (1−p̂)/2 at a⁺, so w* = a, F* = a(1 − p̂)
      (the mirrored dataset, sign = −1, has w* = −a).
    - growth (1, τ) near w*: on [−a, a], F − F* = p̂r ≥ r^τ since r^{τ−1} ≤ (2a)^{τ−1} = p ≤ p̂.
    - KL, γ = 1 (tight as w → −a: F − F* → 2ap̂ = p^{κ−1}p̂ ≤ p̂^κ = |F′|^κ). Beyond ±a, by
      convexity F − F* ≤ |F′|·r, so |F′|^κ ≥ F − F* whenever r ≤ |F′|^{κ−1}; right of a, |F′| ≥
      (1−p̂)/2 and
      |F′| ≥ τ(1+p̂)/2·r^{τ−1} (so |F′|^{κ−1} ≥ (τ(1+p̂)/2)^{κ−1} r, enough when τ(1+p̂) ≥ 2); left of −a
      at distance s, r = 2a + s and |F′| ≥ (1+p̂)/2. So KL holds within a + r₀(p̂) of 0, r₀(q) =
      min{τ^{−(κ−1)}, r_right(q), ((1+q)/2)^{κ−1} − p^{κ−1}}, r_right(q) = ∞ if τ(1+q) ≥ 2 else
      ((1−q)/2)^{κ−1}.
    - The region is public: p̂ is a statistic of the labels (one replaced label moves it by 2/n), so
      the radius is a + min over the family q = |p̂| ∈ [p, 1] of r₀(q): the last term is smallest at
      q = p, and r_right(q) stays above (1 − 1/τ)^{κ−1} = κ^{−(κ−1)} (its value at q = 2/τ − 1,
      beyond which it is ∞), so r₀ = min{τ^{−(κ−1)}, κ^{−(κ−1)} if τ(1+p) < 2, ((1+p)/2)^{κ−1} −
      p^{κ−1}}. The minimiser w* = ±a and F* are read off the labels, for evaluation only.
    - L0 = 1 on the region: slopes are 1 or τr^{τ−1} ≤ τ·τ^{−(κ−1)(τ−1)} = 1 for r ≤ τ^{−(κ−1)}.
    - L1 = None (kinks at ±a); convex, weak_convexity :func:`default_weak_convexity`.
    """

    name = "thm8-two-sided-power"

    def __init__(self, y: torch.Tensor, a: float, kappa: float, p: float) -> None:
        self.y, self.a, self.p = y, a, p
        self.tau = kappa / (kappa - 1)
        self.n, self.dim, self._explicit = len(y), 1, True
        n_plus = int((y > 0).sum())
        self.p_hat = (2 * n_plus - self.n) / self.n
        sign = 1.0 if self.p_hat > 0 else -1.0
        self.w_star = torch.tensor([sign * a], dtype=F64)
        r_right = math.inf if self.tau * (1 + p) >= 2 else kappa ** (-(kappa - 1))
        r0 = min(
            self.tau ** (-(kappa - 1)), r_right, ((1 + p) / 2) ** (kappa - 1) - p ** (kappa - 1)
        )
        self._declare(
            L0=1.0,
            L1=None,
            weak_convexity=default_weak_convexity(1.0, kappa, 1.0),
            gamma=1.0,
            kappa=kappa,
            center=torch.zeros(1, dtype=F64),
            radius=a + r0,
            F_star=a * (1 - abs(self.p_hat)),
        )

    def _example_losses(self, points):  # (k, 1) → (k, n)
        w, a, tau = points, self.a, self.tau
        plus = torch.where(w <= a, a - w, (w - a).clamp_min(0) ** tau)
        minus = torch.where(w <= -a, (-a - w).clamp_min(0) ** tau, w + a)
        return torch.where(self.y > 0, plus, minus)

    def _value(self, points):
        return self._example_losses(points).mean(-1)

    def _example_gradients(self, points):
        w, a, tau = points, self.a, self.tau
        plus = torch.where(w <= a, -torch.ones_like(w), tau * (w - a).clamp_min(0) ** (tau - 1))
        minus = torch.where(w <= -a, -tau * (-a - w).clamp_min(0) ** (tau - 1), torch.ones_like(w))
        return torch.where(self.y > 0, plus, minus)[..., None]  # (k, n, 1)

    def _gradient(self, points):
        return self._example_gradients(points).mean(-2)


def thm8_instance(n: int, epsilon: float, kappa: float, *, sign: int = 1) -> TwoSidedPower:
    """Theorem 8's instance (Menart et al. §3): d = 1, ⌈n(1+p)/2⌉ labels ``sign`` (the rest −sign),
    p = 1/(nε).

    Requires p < 1 with at least one label of each kind (nε > 1). w* = sign·a, a = p^{κ−1}/2.
    """
    n = _integer("n", n, 2)
    epsilon, kappa = _positive("epsilon", epsilon), _positive("kappa", kappa, low=1.0)
    if sign not in (1, -1):
        raise ValueError(f"sign must be 1 or -1; got {sign!r}")
    p = 1 / (n * epsilon)
    n_major = math.ceil(n * (1 + p) / 2 - 1e-9)
    if not p < 1 or n_major >= n:
        raise ValueError(
            f"n*epsilon must be large enough that p = 1/(n*epsilon) < 1 leaves both labels; "
            f"got n={n}, epsilon={epsilon}"
        )
    y = torch.full((n,), -float(sign), dtype=F64)
    y[:n_major] = float(sign)
    return TwoSidedPower(y, p ** (kappa - 1) / 2, float(kappa), p)


# --- lower bounds (constants and log factors dropped) -------------------------------------------


def lower_bound_thm7(n: int, d: int, epsilon: float, D: float, L0: float) -> float:
    """L0·D·min{√d/(nε), 1}: Theorem 7's Ω(·) without its constant ((ε, δ)-DP, ε ≤ 1, δ < 1/n)."""
    n, d = _integer("n", n, 1), _integer("d", d, 1)
    epsilon, D, L0 = _positive("epsilon", epsilon), _positive("D", D), _positive("L0", L0)
    return L0 * D * min(math.sqrt(d) / (n * epsilon), 1.0)


def lower_bound_thm8(n: int, epsilon: float, kappa: float) -> float:
    """¼(1/(nε))^κ, Theorem 8's bound on E[excess] ((ε, δ)-DP, 0 < ε ≤ ln 2, δ ≤ (1 −
    e^{−ε})/16)."""
    n = _integer("n", n, 1)
    epsilon, kappa = _positive("epsilon", epsilon), _positive("kappa", kappa, low=1.0)
    return 0.25 * (1 / (n * epsilon)) ** kappa


def lower_bound_cor1(n: int, d: int, rho: float, gamma: float, L0: float, kappa: float) -> float:
    """(γL0√d/(n√ρ))^κ: Corollary 1's Ω̃(·) for ρ-zCDP with its constant and log factors dropped."""
    n, d = _integer("n", n, 1), _integer("d", d, 1)
    rho, gamma, L0 = _positive("rho", rho), _positive("gamma", gamma), _positive("L0", L0)
    kappa = _positive("kappa", kappa, low=1.0, strict=False)
    return (gamma * L0 * math.sqrt(d) / (n * math.sqrt(rho))) ** kappa
