"""Private hyper-parameter tuning: choose among a grid of settings on the private data, and pay for
it.

Random stopping (Papernot & Steinke 2022) records the whole tuning as one ledger entry whose cost
does not grow with the grid; K and the candidates not chosen stay secret. How: docs/practical.md;
its bound: docs/privacy.md."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dpnc.privacy.accountant import Accountant, PrivacyReport
from dpnc.privacy.budget import check_delta, check_epsilon
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.release import mean_release, private_mean
from dpnc.privacy.releases import RandomStopping, Release, tnb_pmf
from dpnc.sampling import FullBatch

__all__ = [
    "Candidate",
    "Tuned",
    "draw_repetitions",
    "noise_multiplier",
    "private_score",
    "random_stopping",
    "score_release",
]

Candidate = Callable[[Accountant, NoiseSource], tuple[Any, float]]
"""``candidate(accountant, noise) -> (result, score)``: one private run of one setting, every release
(the run's and the score's) recorded in ``accountant``, noise drawn from ``noise``."""


@dataclass
class Tuned:
    """What private tuning outputs: only private quantities.

    Attributes:
        index: which candidate of the grid won (position in ``candidates``).
        result: the winning run's result (what the candidate returned).
        score: the winner's *noisy* score (the private release, never the exact one).
        accountant: the caller's accountant, with the tuning's :class:`RandomStopping` recorded.

    K, the candidates tried and the other scores are secret and are not kept.
    """

    index: int
    result: Any
    score: float
    accountant: Accountant

    def report(self, delta: float) -> PrivacyReport:
        """ε(δ) of everything in the accountant (RDP; PLD and ρ say why they cannot answer)."""
        return self.accountant.report(delta)


def random_stopping(
    candidates: Sequence[Candidate],
    *,
    costs: Accountant | Sequence[Accountant],
    eta: float,
    gamma: float,
    noise: NoiseSource,
    accountant: Accountant,
    minimize: bool = True,
) -> Tuned:
    """Tune by random stopping: the best of K ~ D_{η,γ} runs of uniformly drawn candidates.

    Implements: Papernot & Steinke 2022, §3 (Theorem 2): K from the truncated negative binomial
    D_{η,γ} (η = 0 logarithmic, η = 1 geometric), each repetition a uniformly random candidate,
    output the best. Both draws come from ``noise`` (secret; a seeded test source marks the record
    not private). Each candidate's cost is declared up front, not measured: the record must hold
    the cost of every candidate, tried or not (which were tried is secret); K, the candidates drawn,
    every score but the winner's and the runs not chosen are never returned or logged, but the
    running time grows with K.

    References:
        Papernot, Steinke. Hyperparameter tuning with Renyi differential privacy. ICLR 2022,
        arXiv:2110.03620. Liu, Talwar. Private selection from private candidates. STOC 2019,
        arXiv:1811.07971.

    Args:
        candidates: the grid, m ≥ 1 callables ``(accountant, noise) -> (result, score)``; each runs
            with a fresh accountant of the caller's relation and must release its score privately
            (e.g. :func:`private_score`). A NaN score counts as the worst.
        costs: each candidate's ledger (a public declaration, one Accountant per candidate, or one
            for all): what one call records, score included.
        eta: η ∈ (−1, ∞). gamma: γ ∈ (0, 1); E[K] = η(1 − γ)/(γ(1 − γ^η)), (1/γ − 1)/log(1/γ) at η =
            0.
        noise: the secret randomness for K, the draws and (passed on) the candidates' noise.
        accountant: receives one :class:`~dpnc.privacy.releases.RandomStopping` entry (also on
            error).
        minimize: True when a lower score is better (a loss), False for higher (an accuracy).

    Returns:
        :class:`Tuned`: the winner's index, result, noisy score, and ``accountant``.

    Raises:
        ValueError: on a bad argument (before anything runs), or when a run spent more than its
            declared cost (its ledger is then recorded in ``accountant`` too).
    """
    candidates = list(candidates)
    if not candidates or not all(callable(c) for c in candidates):
        raise ValueError(
            f"candidates must be a non-empty sequence of callables; got {candidates!r}"
        )
    if not isinstance(noise, NoiseSource):
        raise ValueError(f"noise must be a NoiseSource; got {type(noise).__name__}")
    declared = _declared(costs, len(candidates), accountant)
    record = RandomStopping(
        tuple(_ledger(c) for c in declared), eta, gamma, secret=noise.secret
    )  # checks η, γ
    secret, best = record.secret, None
    try:
        for _ in range(draw_repetitions(eta, gamma, noise)):  # K ~ D_{η,γ}
            j = noise.categorical(
                torch.zeros(len(candidates), dtype=torch.float64)
            )  # j ~ Unif{1..m}
            spent = Accountant(accountant.relation)
            result, score = candidates[j](spent, noise)  # a private run and score
            _check_spent(spent, declared[j], accountant)
            secret = secret and spent.secret
            score = float(score)
            key = math.inf if math.isnan(score) else (score if minimize else -score)
            if best is None or key < best[0]:  # keep the best only
                best = (key, j, result, score)
    finally:
        accountant.record(RandomStopping(record.candidates, eta, gamma, secret=secret))
    _, j, result, score = best
    return Tuned(j, result, score, accountant)


def draw_repetitions(eta: float, gamma: float, noise: NoiseSource) -> int:
    """K ~ D_{η,γ} by inversion of its CDF on one secret uniform.

    P[K = 1] = (1 − γ)·η/(γ^{−η} − 1) (1/log(1/γ) in place of η/(γ^{−η} − 1) at η = 0), and P[K = k
    + 1] = P[K = k]·(1 − γ)(k + η)/(k + 1). The walk stops where the float64 CDF stops growing (a
    tail below 2⁻⁵³). Its cost is O(K)."""
    u = float(noise.uniform(()))
    p = tnb_pmf(eta, gamma, 1)[0]
    k, cdf = 1, p
    while u >= cdf:
        p *= (1 - gamma) * (k + eta) / (k + 1)
        k += 1
        if cdf + p == cdf:
            break
        cdf += p
    return k


def private_score(
    losses: torch.Tensor,
    *,
    bound: float,
    noise_multiplier: float,
    noise: NoiseSource,
    accountant: Accountant,
) -> float:
    """A candidate's score: (1/n) Σ_i clip_bound(ℓ_i) + N(0, σ²) over all n examples, recorded.

    A full-batch :func:`~dpnc.privacy.release.private_mean` of per-example values (e.g. losses on
    the private validation data) clipped to [−bound, bound]: Δ = 2·bound/n (replace-one) or bound/n,
    σ = noise_multiplier·Δ. Its cost is :func:`score_release`."""
    losses = torch.as_tensor(losses, dtype=torch.float64).reshape(-1)
    return float(
        private_mean(
            losses,
            bound,
            sampler=FullBatch(losses.numel()),
            noise=noise,
            accountant=accountant,
            noise_multiplier=noise_multiplier,
        ).value
    )


def score_release(
    *, n: int, bound: float, noise_multiplier: float, accountant: Accountant
) -> Release:
    """The release :func:`private_score` records for n values (for declaring a candidate's cost)."""
    return mean_release(
        bound, noise_multiplier, sampler=FullBatch(n), accountant=accountant, noise=NoiseSource()
    )


def noise_multiplier(
    cost: Callable[[float], Accountant],
    *,
    candidates: int,
    eta: float,
    gamma: float,
    epsilon: float,
    delta: float,
    start: float = 1.0,
    rtol: float = 0.01,
) -> float:
    """The smallest σ/Δ (to ``rtol``) at which the whole tuning is (ε, δ)-DP: random stopping over
    ``candidates`` settings that each spend ``cost(σ/Δ)`` (the ledger of one candidate run plus its
    score at that noise multiplier), accounted by :class:`~dpnc.privacy.releases.RandomStopping` in
    RDP. Use it to tune within a budget: run every candidate at the returned multiplier and declare
    ``costs=cost(multiplier)``.

    ``cost`` must grow less private as σ/Δ shrinks (as Gaussian releases do); the search brackets
    from ``start`` by doubling or halving, then bisects geometrically."""
    if not (isinstance(candidates, int) and candidates >= 1):
        raise ValueError(f"candidates must be an integer >= 1; got {candidates!r}")
    check_epsilon(epsilon)
    check_delta(delta)
    for name, value in (("start", start), ("rtol", rtol)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite number > 0; got {value!r}")

    def private_at(multiplier: float) -> bool:
        one = cost(multiplier)
        tuning = Accountant(one.relation)
        tuning.record(RandomStopping((_ledger(one),) * candidates, eta, gamma))
        return tuning.epsilon(delta, "rdp") <= epsilon

    lo, hi = start, start  # bracket: private_at(hi), not private_at(lo)
    while not private_at(hi):
        lo, hi = hi, 2 * hi
        if hi > 1e12:
            raise ValueError(f"no noise multiplier makes the tuning ({epsilon}, {delta})-DP")
    if lo == hi:
        while private_at(lo):
            lo /= 2
            if lo < 1e-12:
                return lo
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if private_at(mid) else (mid, hi)
    return hi


# --- checks ---------------------------------------------------------------------------------------


def _declared(costs, m: int, accountant: Accountant) -> list[Accountant]:
    if not isinstance(accountant, Accountant):
        raise ValueError(f"accountant must be an Accountant; got {type(accountant).__name__}")
    declared = [costs] * m if isinstance(costs, Accountant) else list(costs)
    if len(declared) != m or not all(isinstance(c, Accountant) for c in declared):
        raise ValueError(f"costs must be one Accountant or one per candidate ({m}); got {costs!r}")
    for c in declared:
        if c.relation is not accountant.relation:
            raise ValueError(
                f"costs must be under the accountant's relation {accountant.relation.value!r}; "
                f"got {c.relation.value!r}"
            )
    return declared


def _ledger(cost: Accountant) -> tuple[tuple[Release, int], ...]:
    return tuple((e.release, e.composed_count) for e in cost.ledger if e.composed_count)


def _check_spent(spent: Accountant, declared: Accountant, accountant: Accountant) -> None:
    """Refuse a run whose RDP curve exceeds its declared cost at some order (then count what it
    spent).

    The message does not say which candidate it was: the candidates drawn are secret, and an error
    message is output like any other (check each candidate's cost alone, outside the tuning, to find
    the one that is wrong)."""
    _, actual = spent.rdp()
    _, allowed = declared.rdp()
    if np.any(actual > allowed + 1e-9 * np.maximum(1.0, allowed)):
        accountant.extend(spent)
        raise ValueError(
            "a candidate spent more than its declared cost (RDP curve above its costs entry at some "
            "order); declare what one call records, score release included. Which candidate is not "
            "said: the candidates drawn are secret (check each candidate's cost outside the tuning)"
        )
