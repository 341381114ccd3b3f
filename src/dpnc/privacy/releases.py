"""What a private algorithm released, in exactly the terms accounting needs.

A release is a frozen record checked when it is built (never mid-composition). Each one knows how
to present itself to dp-accounting: as a ``DpEvent`` for the RDP accountant and as a privacy-loss
distribution for PLD accounting, and, where it is zCDP, its ρ. Sensitivities are L2 sensitivities
under the neighbouring relation of the :class:`~dpnc.privacy.accountant.Accountant` that records
the release (use :func:`mean_sensitivity` to get them right). ``secret=False`` marks a release whose
noise came from a seeded test source; reports built on it say "not private".

Symbols: Δ = ``sensitivity``, σ = ``sigma`` (noise standard deviation), q = ``sampling_rate``,
Σ = ``num_leaves``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass, fields
from typing import ClassVar

from dp_accounting import dp_event
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.privacy_accountant import NeighboringRelation

from dpnc.privacy.tree import leaf_participation


class Relation(str, enum.Enum):
    """Which datasets are neighbours. It decides the sensitivity of every query."""

    REPLACE_ONE = "replace-one"
    ADD_OR_REMOVE_ONE = "add/remove"

    @property
    def dp_accounting(self) -> NeighboringRelation:
        return {Relation.REPLACE_ONE: NeighboringRelation.REPLACE_ONE,
                Relation.ADD_OR_REMOVE_ONE: NeighboringRelation.ADD_OR_REMOVE_ONE}[self]

    @classmethod
    def parse(cls, value: Relation | str) -> Relation:
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"relation must be one of {[r.value for r in cls]}; got {value!r}") from None


def mean_sensitivity(bound: float, n: int, relation: Relation | str) -> float:
    """L2 sensitivity of (1/n)·Σ_i v_i when every ‖v_i‖ ≤ ``bound`` and n is fixed (public).

    Replace-one: 2·bound/n (one term changes arbitrarily). Add/remove: bound/n (one term appears).
    """
    relation = Relation.parse(relation)
    _positive("bound", bound)
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1; got {n!r}")
    return (2.0 if relation is Relation.REPLACE_ONE else 1.0) * bound / n


class UnsupportedRelease(ValueError):
    """A release that an accountant cannot interpret (names the release and what would)."""


def _positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        rule = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {rule}; got {value!r}")


def _integer(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")


@dataclass(frozen=True)
class Release:
    """Base class: one noisy output (``count`` equal releases are recorded as one ledger entry)."""

    KINDS: ClassVar[dict[str, type[Release]]] = {}
    # Relations under which dp-accounting interprets this release by RDP / by PLD.
    RDP_RELATIONS: ClassVar[frozenset[Relation]] = frozenset(Relation)
    PLD_RELATIONS: ClassVar[frozenset[Relation]] = frozenset(Relation)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        Release.KINDS[cls.__name__] = cls

    @property
    def rho(self) -> float | None:
        """ρ if the release is ρ-zCDP, else None."""
        return None

    def dp_event(self) -> dp_event.DpEvent:
        """The dp-accounting event of one release (for the RDP accountant)."""
        raise NotImplementedError

    def pld(self, relation: Relation, count: int, interval: float) -> pld_lib.PrivacyLossDistribution:
        """The privacy-loss distribution of ``count`` such releases."""
        raise NotImplementedError

    def to_dict(self) -> dict:
        return {"kind": type(self).__name__, **asdict(self)}

    @staticmethod
    def from_dict(data: dict) -> Release:
        data = dict(data)
        kind = data.pop("kind", None)
        if kind not in Release.KINDS:
            raise ValueError(f"unknown release kind {kind!r}; known: {sorted(Release.KINDS)}")
        cls = Release.KINDS[kind]
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


PLD_MIN_MULTIPLIER = 0.1  # below this σ/Δ a Gaussian's PLD grid has millions of points (and ε ≳ 100)


@dataclass(frozen=True)
class Gaussian(Release):
    """q(S) + N(0, σ² I) for a query of L2 sensitivity Δ: (Δ²/2σ²)-zCDP, noise multiplier σ/Δ."""

    sensitivity: float
    sigma: float
    secret: bool = True

    def __post_init__(self) -> None:
        _positive("sensitivity", self.sensitivity)
        _positive("sigma", self.sigma, allow_zero=True)

    @property
    def noise_multiplier(self) -> float:
        return self.sigma / self.sensitivity

    @property
    def rho(self) -> float:
        return math.inf if self.sigma == 0 else self.sensitivity**2 / (2 * self.sigma**2)

    def dp_event(self):
        if self.sigma == 0:
            return dp_event.NonPrivateDpEvent()
        return dp_event.GaussianDpEvent(self.noise_multiplier)

    def pld(self, relation, count, interval):
        # Neighbouring outputs differ by at most Δ under either relation: the pair N(0, σ²) vs
        # N(Δ, σ²), which dp-accounting models as add/remove with sensitivity 1 at multiplier σ/Δ.
        # (Its REPLACE_ONE model instead shifts both sides by ±1, a distance of 2.) count such
        # releases compose exactly into one with multiplier (σ/Δ)/√count.
        multiplier = self.noise_multiplier / math.sqrt(count)
        if multiplier < PLD_MIN_MULTIPLIER:
            # The privacy loss spans ~1/(2m²) + 10/m: at m = 0.1 PLD takes seconds and ε ≈ 100; below,
            # time and memory grow as 1/m² (and dp-accounting overflows to ε = ∞ near m = 0.03).
            raise UnsupportedRelease(
                f"the noise multiplier σ/Δ = {multiplier:.3g} (after {count} compositions) is below "
                f"{PLD_MIN_MULTIPLIER}: too little noise for PLD accounting on a grid; use method='rdp'")
        return pld_lib.from_gaussian_mechanism(
            multiplier, value_discretization_interval=interval,
            neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE)


@dataclass(frozen=True)
class PoissonSampledGaussian(Release):
    """A Gaussian release computed on a Poisson sample (each point kept w.p. q independently).

    Under add/remove, Δ bounds one point's contribution. Under replace-one, Δ is the distance
    between two points' contributions and each contribution is assumed bounded by Δ/2 (true for the
    sums and means of clipped terms that :func:`mean_sensitivity` describes); PLD then uses
    dp-accounting's replace model with per-point bound Δ/2. RDP supports only add/remove.
    """

    sensitivity: float
    sigma: float
    sampling_rate: float
    secret: bool = True
    RDP_RELATIONS: ClassVar[frozenset[Relation]] = frozenset({Relation.ADD_OR_REMOVE_ONE})

    def __post_init__(self) -> None:
        _positive("sensitivity", self.sensitivity)
        _positive("sigma", self.sigma)
        if not (isinstance(self.sampling_rate, (int, float)) and 0 < self.sampling_rate <= 1):
            raise ValueError(f"sampling_rate must be in (0, 1]; got {self.sampling_rate!r}")

    def dp_event(self):
        return dp_event.PoissonSampledDpEvent(
            self.sampling_rate, dp_event.GaussianDpEvent(self.sigma / self.sensitivity))

    def pld(self, relation, count, interval):
        bound = self.sensitivity / (2 if relation is Relation.REPLACE_ONE else 1)
        return pld_lib.from_gaussian_mechanism(
            self.sigma / bound, sampling_prob=self.sampling_rate,
            value_discretization_interval=interval,
            neighboring_relation=relation.dp_accounting).self_compose(count)


@dataclass(frozen=True)
class FixedSizeSampledGaussian(Release):
    """A Gaussian release computed on a uniformly random batch of B of the n points (no replacement)."""

    sensitivity: float
    sigma: float
    dataset_size: int
    batch_size: int
    secret: bool = True
    RDP_RELATIONS: ClassVar[frozenset[Relation]] = frozenset({Relation.REPLACE_ONE})
    PLD_RELATIONS: ClassVar[frozenset[Relation]] = frozenset()

    def __post_init__(self) -> None:
        _positive("sensitivity", self.sensitivity)
        _positive("sigma", self.sigma)
        _integer("dataset_size", self.dataset_size)
        _integer("batch_size", self.batch_size)
        if self.batch_size > self.dataset_size:
            raise ValueError(f"batch_size must be <= dataset_size={self.dataset_size}; "
                             f"got {self.batch_size!r}")

    def dp_event(self):
        return dp_event.SampledWithoutReplacementDpEvent(
            self.dataset_size, self.batch_size, dp_event.GaussianDpEvent(self.sigma / self.sensitivity))


@dataclass(frozen=True)
class TreeAggregatedGaussian(Release):
    """One period of the tree mechanism over Σ leaves, node noise N(0, σ² I), leaf sensitivity ≤ Δ.

    A data point enters one leaf and is seen through at most ⌊log₂Σ⌋ + 1 node releases, so the
    period costs that many composed Gaussians: ρ = (⌊log₂Σ⌋ + 1)·Δ²/(2σ²).
    """

    sensitivity: float
    sigma: float
    num_leaves: int
    secret: bool = True

    def __post_init__(self) -> None:
        _positive("sensitivity", self.sensitivity)
        _positive("sigma", self.sigma)
        _integer("num_leaves", self.num_leaves)

    @property
    def node_releases(self) -> int:
        return leaf_participation(self.num_leaves)

    @property
    def rho(self) -> float:
        return self.node_releases * self.sensitivity**2 / (2 * self.sigma**2)

    def dp_event(self):
        return dp_event.SelfComposedDpEvent(
            dp_event.GaussianDpEvent(self.sigma / self.sensitivity), self.node_releases)

    def pld(self, relation, count, interval):
        return Gaussian(self.sensitivity, self.sigma).pld(relation, count * self.node_releases, interval)


@dataclass(frozen=True)
class DiscreteGaussian(Release):
    """An integer query of integer sensitivity Δ plus discrete Gaussian N_ℤ(0, σ²) noise.

    Δ²/(2σ²)-zCDP (Canonne, Kamath & Steinke 2020, Thm 4); its exact PLD comes from dp-accounting.
    """

    sensitivity: int
    sigma: float
    secret: bool = True

    def __post_init__(self) -> None:
        _integer("sensitivity", self.sensitivity)
        _positive("sigma", self.sigma)

    @property
    def rho(self) -> float:
        return self.sensitivity**2 / (2 * self.sigma**2)

    def dp_event(self):
        return dp_event.ZCDpEvent(self.rho)

    def pld(self, relation, count, interval):
        return pld_lib.from_discrete_gaussian_mechanism(
            self.sigma, sensitivity=self.sensitivity, value_discretization_interval=interval
        ).self_compose(count)


@dataclass(frozen=True)
class ZCDPMechanism(Release):
    """Any ρ-zCDP mechanism, known only by its ρ (RDP curve αρ; no PLD)."""

    rho_value: float
    secret: bool = True
    PLD_RELATIONS: ClassVar[frozenset[Relation]] = frozenset()

    def __post_init__(self) -> None:
        _positive("rho_value", self.rho_value, allow_zero=True)

    @property
    def rho(self) -> float:
        return self.rho_value

    def dp_event(self):
        return dp_event.ZCDpEvent(self.rho_value)


@dataclass(frozen=True)
class ExponentialMechanism(Release):
    """An ε-DP selection (exponential mechanism with score sensitivity Δ and exponent ε/(2Δ)).

    Accounted as binary randomized response with the same ε, which dominates every ε-DP mechanism
    under replace-one (Kairouz, Oh & Viswanath 2015); zCDP ρ = ε²/8, since the exponential
    mechanism is ε-bounded-range (Cesar & Rogers 2021). Menart et al. charge ε²/2.
    """

    epsilon: float
    secret: bool = True
    RDP_RELATIONS: ClassVar[frozenset[Relation]] = frozenset({Relation.REPLACE_ONE})
    PLD_RELATIONS: ClassVar[frozenset[Relation]] = frozenset({Relation.REPLACE_ONE})

    def __post_init__(self) -> None:
        _positive("epsilon", self.epsilon)

    @property
    def rho(self) -> float:
        return self.epsilon**2 / 8

    def _randomized_response(self) -> dp_event.RandomizedResponseDpEvent:
        # Binary RR keeps the true bit w.p. 1 − η/2; ε = ln((1 − η/2)/(η/2)) ⇔ η = 2/(1 + e^ε).
        return dp_event.RandomizedResponseDpEvent(2 / (1 + math.exp(self.epsilon)), 2)

    def dp_event(self):
        return self._randomized_response()

    def pld(self, relation, count, interval):
        rr = self._randomized_response()
        return pld_lib.from_randomized_response(
            rr.noise_parameter, rr.num_buckets, value_discretization_interval=interval,
            neighboring_relation=relation.dp_accounting).self_compose(count)
