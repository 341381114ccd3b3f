"""Binary-tree aggregation of noisy prefix sums (the "tree mechanism").

Used by Zhang–Tran–Cutkosky (Algorithm 5) and Kornowski–Liu–Talwar (Algorithm 1), through
:class:`TreeMechanism` (noise and the period's release together) or :class:`TreeNoise` (noise only).
NODE(t) is the exact binary decomposition and the per-leaf count ⌊log₂Σ⌋ + 1, not the papers'
(docs/papers.md, ZTC §6.3 and KLT §2.1)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpnc.privacy.releases import Gaussian, NonPrivate, TreeAggregated

if TYPE_CHECKING:  # torch is imported where noise is drawn, so accounting alone starts fast
    import torch

    from dpnc.privacy.noise import NoiseSource


def node(t: int) -> list[tuple[int, int]]:
    """NODE(t): the dyadic intervals (a, b) that partition [1, t], largest first.

    One interval per set bit of t, so ``len(node(t)) == popcount(t)``; each satisfies
    a = b − lowbit(b) + 1. Example: ``node(13) == [(1, 8), (9, 12), (13, 13)]``.
    """
    if not isinstance(t, int) or isinstance(t, bool) or t < 1:
        raise ValueError(f"t must be an integer >= 1; got {t!r}")
    intervals, start = [], 0
    for level in reversed(range(t.bit_length())):
        if t >> level & 1:
            intervals.append((start + 1, start + (1 << level)))
            start += 1 << level
    return intervals


def leaf_participation(num_leaves: int) -> int:
    """The most nodes that any leaf of a tree over [1, Σ] enters: exactly ⌊log₂Σ⌋ + 1 (leaf 1).

    This is the number of Gaussian releases a data point pays for in one tree (Thm 4.3 of
    Zhang–Tran–Cutkosky, with the exact count instead of 2 ln Σ).
    """
    if not isinstance(num_leaves, int) or isinstance(num_leaves, bool) or num_leaves < 1:
        raise ValueError(f"num_leaves must be an integer >= 1; got {num_leaves!r}")
    return num_leaves.bit_length()


def nodes_covering(leaf: int, num_leaves: int) -> set[tuple[int, int]]:
    """The nodes used by some NODE(t), t ≤ Σ, that contain ``leaf``: what one data point pays
    for."""
    used = {iv for t in range(leaf, num_leaves + 1) for iv in node(t)}
    return {(a, b) for a, b in used if a <= leaf <= b}


class TreeNoise:
    """Lazily drawn tree noise TREE(t) for one period of Σ steps; :meth:`reset` starts a new period.

    Step t releases a prefix sum Σ_{j ≤ t} M_j plus TREE(t) = Σ_{(a, b) ∈ NODE(t)} ξ_b, where
    NODE(t) (:func:`node`) is the dyadic decomposition of [1, t] given by the binary expansion of t
    and ξ_b ~ N(0, σ² I_d) is the noise of the node whose right end is b. Nodes are shared between
    steps, so each data point (which enters one M_i) is seen through at most ⌊log₂Σ⌋ + 1 Gaussian
    node releases over a period of Σ steps (:func:`leaf_participation`).

    Args:
        dim: dimension d of each node's noise.
        sigma: standard deviation σ of every coordinate of every node.
        noise: the secret noise source.
        dtype, device: of the returned tensors (default float64 on the CPU).

    Only the nodes still needed by later steps (those of NODE(t)) are kept: O(d log Σ) memory.
    Steps must be queried in increasing order t = 1, 2, … within a period.
    """

    def __init__(
        self,
        dim: int,
        sigma: float,
        noise: NoiseSource,
        *,
        dtype: torch.dtype | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        import torch

        if not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be an integer >= 1; got {dim!r}")
        if not sigma >= 0:
            raise ValueError(f"sigma must be >= 0; got {sigma!r}")
        self.dim, self.sigma, self.noise = dim, float(sigma), noise
        self.dtype, self.device = dtype or torch.float64, torch.device(device)
        self.reset()

    def reset(self) -> None:
        """Start a new period: all node noise is forgotten and drawn afresh."""
        self._nodes: dict[int, torch.Tensor] = {}
        self.t = 0

    def __call__(self, t: int) -> torch.Tensor:
        """TREE(t) = Σ_{(a, b) ∈ NODE(t)} ξ_b."""
        if t != self.t + 1 and t != self.t:
            raise ValueError(
                f"tree steps must be queried in order; expected t={self.t + 1}, got {t}"
            )
        self.t = t
        import torch

        intervals = node(t)
        total = torch.zeros(self.dim, dtype=self.dtype, device=self.device)
        for _, b in intervals:
            if b not in self._nodes:
                self._nodes[b] = self.noise.gaussian(
                    self.dim, self.sigma, dtype=self.dtype, device=self.device
                )
            total += self._nodes[b]
        # A node not in NODE(t) is never in NODE(t') for t' > t (see the class docstring).
        self._nodes = {b: self._nodes[b] for _, b in intervals}
        return total


class TreeMechanism:
    """The tree mechanism over periods of Σ leaves: adds TREE(k) to the k-th prefix sum, and says
    what it released.

    Implements: Zhang–Tran–Cutkosky Algorithm 5 / Kornowski–Liu–Talwar Algorithm 1 (node noise ξ_b ~
    N(0, σ² I_d), leaf sensitivity Δ). Each period is one release, ``TreeAggregated(Gaussian(Δ, σ),
    leaves=Σ)`` (⌊log₂Σ⌋ + 1 Gaussian node releases per data point), not secret when the noise
    source is seeded.

    Args:
        dim: dimension d of each node's noise.
        leaves: Σ, the number of steps (leaves) in one period.
        sensitivity: Δ, how far replacing one data point moves any one leaf's term.
        sigma: σ ≥ 0, the standard deviation of every coordinate of every node (0: no noise, not
            private).
        noise: the secret noise source.
        dtype, device: of the noise (default float64 on the CPU).

    Example (one period)::

        tree = TreeMechanism(d, leaves=S, sensitivity=D, sigma=s, noise=noise)
        accountant.record(tree.reset())          # at k = 1: a new period, and its release
        released = tree(prefix_sum, k)           # prefix sum of steps 1..k + TREE(k), k = 1..S

    Draws exactly what :class:`TreeNoise` draws, in the same order.
    """

    def __init__(
        self,
        dim: int,
        *,
        leaves: int,
        sensitivity: float,
        sigma: float,
        noise: NoiseSource,
        dtype: torch.dtype | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        # Checks Δ > 0, σ ≥ 0 and Σ >= 1; seeded noise makes the release not secret; σ = 0 (an
        # algorithm's non-private twin) releases the sums without noise, which the ledger records as
        # such (ε = ∞).
        node = Gaussian(sensitivity, sigma)
        self.release = (
            TreeAggregated(node, leaves=leaves, secret=noise.secret)
            if sigma > 0
            else NonPrivate(secret=noise.secret)
        )
        self.leaves, self.sensitivity, self.sigma = leaves, float(sensitivity), float(sigma)
        self._noise = TreeNoise(dim, sigma, noise, dtype=dtype, device=device)
        self._open = False

    def reset(self) -> TreeAggregated | NonPrivate:
        """Start a new period (all node noise drawn afresh); returns its release, to record once."""
        self._noise.reset()
        self._open = True
        return self.release

    def __call__(self, value: torch.Tensor, k: int) -> torch.Tensor:
        """``value + TREE(k)``: the k-th prefix sum of this period (k = 1, 2, …, Σ in order)
        released."""
        if not self._open:
            raise ValueError(
                "call reset() at the start of each period and record the release it returns"
            )
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= self.leaves:
            raise ValueError(f"k must be an integer in [1, leaves={self.leaves}]; got {k!r}")
        return value + self._noise(k)
