"""Secret randomness: privacy noise and the choice of subsampled batches (:class:`NoiseSource`).

Kept apart from the public, seeded randomness (directions, data order; DESIGN.md). Scalars can be
drawn from the exact discrete Gaussian of Canonne, Kamath & Steinke (2020), free of the
floating-point artefacts that make textbook samplers attackable. See docs/privacy.md."""

from __future__ import annotations

import math
import random
import secrets
from fractions import Fraction

import torch

from dpnc.checks import check_positive


class NoiseSource:
    """The only source of secret randomness in dpnc: privacy noise and subsampled batches.

    ``NoiseSource()`` is seeded from operating-system entropy and is private: it never reads a
    public seed, never touches torch's, numpy's or Python's global generators, and refuses to be
    pickled, so a checkpoint cannot leak its state. ``NoiseSource.for_testing(seed)`` is
    reproducible and therefore *not* private: every release drawn from it carries ``secret=False``
    and every report built on it says so.

    The samplers of :mod:`dpnc.sampling` draw each batch from a NoiseSource of their own whenever
    the accounting claims amplification by subsampling: if an adversary could replay which examples
    were sampled, the amplified ε would be false. (The published DPZero code draws its noise right
    after seeding the public direction generator, so anyone who knows the seeds can subtract the
    noise: docs/papers.md, DPZero §7.2.) :meth:`discrete_gaussian` is driven by :mod:`secrets` with
    rational arithmetic only, so the one scalar a zeroth-order step releases carries no
    floating-point artefact.

    References:
        Canonne, Kamath, Steinke. The discrete Gaussian for differential privacy. arXiv:2004.00010,
        2020. Mironov. On significance of the least significant bits for differential privacy. CCS
        2012.
    """

    def __init__(self) -> None:
        self._init(seed=None)

    @classmethod
    def for_testing(cls, seed: int) -> NoiseSource:
        """A reproducible source for tests. Results that use it are marked not private."""
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ValueError(f"seed must be an int; got {seed!r}")
        source = cls.__new__(cls)
        source._init(seed=seed)
        return source

    def _init(self, seed: int | None) -> None:
        self.secret = seed is None
        self._rng: random.Random = secrets.SystemRandom() if self.secret else random.Random(seed)
        torch_seed = secrets.randbits(63) if self.secret else seed
        self._generators: dict[torch.device, torch.Generator] = {}
        self._torch_seed = torch_seed

    def _generator(self, device: torch.device) -> torch.Generator:
        gen = self._generators.get(device)
        if gen is None:
            gen = torch.Generator(device=device)
            # Each device's generator is an independent stream of the one secret seed.
            gen.manual_seed((self._torch_seed + len(self._generators)) % 2**63)
            self._generators[device] = gen
        return gen

    def gaussian(
        self,
        shape: int | tuple[int, ...] | torch.Size,
        sigma: float,
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> torch.Tensor:
        """A tensor of i.i.d. N(0, σ²) entries."""
        sigma = _check_sigma(sigma)
        device = torch.device(device)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        z = torch.randn(shape, generator=self._generator(device), dtype=dtype, device=device)
        return z.mul_(sigma)

    def uniform(self, shape: int | tuple[int, ...]) -> torch.Tensor:
        """A float64 tensor of i.i.d. U[0, 1) entries (secret batch choices: Poisson sampling)."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return torch.rand(
            shape, generator=self._generator(torch.device("cpu")), dtype=torch.float64
        )

    def permutation(self, n: int) -> torch.Tensor:
        """A uniformly random permutation of 0..n−1 (secret batch choices: sampling without
        replacement)."""
        return torch.randperm(n, generator=self._generator(torch.device("cpu")))

    def gaussian_scalar(self, sigma: float) -> float:
        """One N(0, σ²) float."""
        return float(self.gaussian((), sigma))

    def categorical(self, log_weights: torch.Tensor) -> int:
        """One index i drawn with probability ∝ exp(log_weights[i]), from the secret stream.

        Inverse CDF in float64 on a uniform from :mod:`secrets` (when private); -inf weights are
        never drawn."""
        logits = torch.as_tensor(log_weights, dtype=torch.float64).reshape(-1)
        if logits.numel() == 0 or torch.isnan(logits).any() or not torch.isfinite(logits.max()):
            raise ValueError("log_weights must be non-empty, free of NaN and not all -inf")
        cdf = torch.softmax(logits, 0).cumsum(0)
        u = self._rng.random() * float(cdf[-1])
        return min(
            int(torch.searchsorted(cdf, torch.tensor([u], dtype=torch.float64), right=True)),
            logits.numel() - 1,
        )

    def discrete_gaussian(self, sigma: float) -> int:
        """One exact draw from the discrete Gaussian N_ℤ(0, σ²): P(y) ∝ exp(−y²/(2σ²)), y ∈ ℤ.

        Implements: Canonne, Kamath & Steinke 2020, Algorithm 3 (rejection from a discrete
        Laplace of scale t = ⌊σ⌋ + 1), with exact Bernoulli(exp(−γ)) trials (their Algorithm 1).
        σ is taken as the exact rational value of the given float.
        """
        sigma2 = Fraction(_check_sigma(sigma)) ** 2
        if sigma2 == 0:
            return 0
        t = math.floor(Fraction(_check_sigma(sigma))) + 1
        while True:
            y = self._discrete_laplace(t)
            gamma = (abs(y) - sigma2 / t) ** 2 / (2 * sigma2)
            if self._bernoulli_exp(gamma):
                return y

    # --- exact samplers (CKS 2020, Algorithms 1–2), rational arithmetic only -------------------

    def _bernoulli(self, p: Fraction) -> bool:
        return self._rng.randrange(p.denominator) < p.numerator

    def _bernoulli_exp(self, gamma: Fraction) -> bool:
        """Bernoulli(exp(−γ)) for rational γ ≥ 0."""
        while gamma > 1:  # exp(−γ) = exp(−1)^⌊γ⌋ · exp(−(γ − ⌊γ⌋))
            if not self._bernoulli_exp_le1(Fraction(1)):
                return False
            gamma -= 1
        return self._bernoulli_exp_le1(gamma)

    def _bernoulli_exp_le1(self, gamma: Fraction) -> bool:
        """Bernoulli(exp(−γ)) for γ ∈ [0, 1]: the parity of the first failing k in
        Bernoulli(γ/k)."""
        k = 1
        while self._bernoulli(gamma / k):
            k += 1
        return k % 2 == 1

    def _discrete_laplace(self, t: int) -> int:
        """P(y) ∝ exp(−|y|/t) on ℤ for an integer scale t ≥ 1."""
        while True:
            u = self._rng.randrange(t)
            if not self._bernoulli_exp(Fraction(u, t)):
                continue
            v = 0
            while self._bernoulli_exp(Fraction(1)):
                v += 1
            magnitude = u + t * v  # Geometric(1 − e^{−1/t}) on {0, 1, …}
            negative = self._rng.randrange(2) == 1
            if negative and magnitude == 0:
                continue
            return -magnitude if negative else magnitude

    def __getstate__(self):
        raise TypeError(
            "a NoiseSource holds secret state and cannot be pickled or checkpointed; "
            "create a fresh NoiseSource() when resuming"
        )

    def __repr__(self) -> str:
        return f"NoiseSource(secret={self.secret})"


def _check_sigma(sigma: float) -> float:
    try:
        s = float(sigma)
    except (TypeError, ValueError):
        raise ValueError(f"sigma must be a number; got {sigma!r}") from None
    check_positive(allow_zero=True, sigma=s)
    return s
