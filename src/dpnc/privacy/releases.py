"""What a private algorithm released: plain frozen records, in exactly the terms accounting needs.

A release is data, checked when it is built; :mod:`dpnc.privacy.interpret` gives its cost. As in
dp-accounting's ``dp_event``, a combination wraps: ``Sampled(Poisson(q), Gaussian(Δ, σ))``.
Meanings never change; a new field is optional; ``from_dict`` refuses unknown kinds and still reads
the kinds of earlier versions (``PoissonSampledGaussian`` …), mapped to the records here."""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass, field, fields
from typing import Any

from dp_accounting.privacy_accountant import NeighboringRelation

from dpnc.checks import check_integer, check_positive, check_probability


class Relation(str, enum.Enum):
    """Which datasets are neighbours. It decides the sensitivity of every query."""

    REPLACE_ONE = "replace-one"
    ADD_OR_REMOVE_ONE = "add/remove"

    @property
    def dp_accounting(self) -> NeighboringRelation:
        return {
            Relation.REPLACE_ONE: NeighboringRelation.REPLACE_ONE,
            Relation.ADD_OR_REMOVE_ONE: NeighboringRelation.ADD_OR_REMOVE_ONE,
        }[self]

    @classmethod
    def parse(cls, value: Relation | str) -> Relation:
        try:
            return cls(value)
        except ValueError:
            raise ValueError(
                f"relation must be one of {[r.value for r in cls]}; got {value!r}"
            ) from None


def mean_sensitivity(bound: float, n: int, relation: Relation | str) -> float:
    """L2 sensitivity of (1/n)·Σ_i v_i when every ‖v_i‖ ≤ ``bound`` and n is fixed (public).

    Replace-one: 2·bound/n (one term changes arbitrarily). Add/remove: bound/n (one term appears).
    """
    relation = Relation.parse(relation)
    check_positive(bound=bound)
    check_integer(n=n)
    return (2.0 if relation is Relation.REPLACE_ONE else 1.0) * bound / n


class UnsupportedRelease(ValueError):
    """A release that an accountant cannot interpret (names the release and what would)."""


# --- records and their serialisation --------------------------------------------------------------

_KINDS: dict[str, type] = {}


class _Record:
    """Serialisation shared by releases and sampling schemes: ``{"kind": class name, field: value,
    …}``."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):
            _KINDS[cls.__name__] = cls

    def to_dict(self) -> dict:
        """A JSON-ready dict; nested records become nested dicts."""
        out: dict[str, Any] = {"kind": type(self).__name__}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if isinstance(value, _Record) else value
        return out

    def __repr__(self) -> str:  # fields in order; secret only when False
        shown = [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)  # type: ignore[arg-type]
            if f.name != "secret"
        ]
        if getattr(self, "secret", True) is not True:
            shown.append(f"secret={self.secret!r}")  # type: ignore[attr-defined]
        return f"{type(self).__name__}({', '.join(shown)})"


def _from_dict(data: dict) -> Any:
    data = dict(data)
    kind = data.pop("kind", None)
    if kind in _OLD_KINDS:
        return _OLD_KINDS[kind](data)
    if kind not in _KINDS or kind in ("Release", "Mechanism", "Sampling"):
        known = sorted(k for k in _KINDS if k not in ("Release", "Mechanism", "Sampling"))
        raise ValueError(f"unknown release kind {kind!r}; known: {known}")
    cls = _KINDS[kind]
    names = {f.name for f in fields(cls)}
    return cls(
        **{k: _from_dict(v) if isinstance(v, dict) else v for k, v in data.items() if k in names}
    )


@dataclass(frozen=True, repr=False)
class Release(_Record):
    """Base class: one noisy output (``count`` equal releases are recorded as one ledger entry).

    Sensitivities are L2 sensitivities under the neighbouring relation of the
    :class:`~dpnc.privacy.accountant.Accountant` that records the release (use
    :func:`mean_sensitivity` to get them right). ``secret`` (keyword-only): False when the noise or
    the batch came from a seeded test source; reports built on it say "not private". The flag of a
    composite lives on its outer record: a wrapper built from a non-secret part is itself not secret
    (the part is stored with ``secret=True``), so no secret composite can hide a non-secret part.

    Symbols: Δ = ``sensitivity``, σ = ``sigma`` (noise standard deviation), q (Poisson sampling
    rate), n, B (dataset and batch size of fixed-size sampling), Σ = ``leaves``."""

    secret: bool = field(default=True, kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.secret, bool):
            raise ValueError(f"secret must be a bool; got {self.secret!r}")

    @property
    def additive(self) -> bool:
        """Whether the released value is the query plus noise drawn independently of it, so that a
        sum's release is the sum of its parts plus one draw (what a data-parallel group relies on to
        release a sum in one collective). False unless a mechanism says so (the discrete Gaussian
        rounds the query to its grid first)."""
        return False

    @staticmethod
    def from_dict(data: dict) -> Release:
        """The release that :meth:`to_dict` wrote (also reads the kinds of earlier dpnc
        versions)."""
        release = _from_dict(data)
        if not isinstance(release, Release):
            raise ValueError(f"{data.get('kind')!r} is a sampling scheme, not a release")
        return release


@dataclass(frozen=True, repr=False)
class Mechanism(Release):
    """A release computed on the whole dataset (no sampling, no tree): what wrappers wrap."""


@dataclass(frozen=True, repr=False)
class Gaussian(Mechanism):
    """q(S) + N(0, σ² I) for a query of L2 sensitivity Δ: (Δ²/2σ²)-zCDP, noise multiplier σ/Δ.

    σ = 0 is the old spelling of :class:`NonPrivate` (what algorithms/ and lm/ wrote before they
    recorded NonPrivate): it is interpreted as a release without noise (ε = ∞)."""

    sensitivity: float
    sigma: float

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(sensitivity=self.sensitivity)
        check_positive(allow_zero=True, sigma=self.sigma)

    @property
    def noise_multiplier(self) -> float:
        """σ/Δ."""
        return self.sigma / self.sensitivity

    @property
    def additive(self) -> bool:
        """q(S) + z with z ~ N(0, σ²I) drawn independently of q(S)."""
        return True


@dataclass(frozen=True, repr=False)
class NonPrivate(Mechanism):
    """A data-dependent value released without noise (MeZO's step, a noise multiplier of 0): ε =
    ∞."""

    @property
    def additive(self) -> bool:
        """q(S) + 0."""
        return True


@dataclass(frozen=True, repr=False)
class DiscreteGaussian(Mechanism):
    """An integer query of integer sensitivity Δ plus discrete Gaussian N_ℤ(0, σ²) noise.

    Δ²/(2σ²)-zCDP (Canonne, Kamath & Steinke 2020, Thm 4); its exact PLD comes from dp-accounting.
    """

    sensitivity: int
    sigma: float

    def __post_init__(self) -> None:
        super().__post_init__()
        check_integer(sensitivity=self.sensitivity)
        check_positive(sigma=self.sigma)


@dataclass(frozen=True, repr=False)
class ZCDPMechanism(Mechanism):
    """Any ρ-zCDP mechanism, known only by its ρ (RDP curve αρ; no PLD).

    (Named apart from :class:`dpnc.privacy.budget.ZCDP`, the budget.)
    """

    rho: float

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(allow_zero=True, rho=self.rho)


@dataclass(frozen=True, repr=False)
class ExponentialMechanism(Mechanism):
    """An ε-DP selection (exponential mechanism with score sensitivity Δ and exponent ε/(2Δ)).

    Accounted as binary randomized response with the same ε (replace-one) and as ε-bounded-range,
    ρ = ε²/8 (see :mod:`dpnc.privacy.interpret`).
    """

    epsilon: float

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(epsilon=self.epsilon)


# --- sampling schemes -----------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Sampling(_Record):
    """How the batch a wrapped mechanism sees is drawn from the dataset."""


@dataclass(frozen=True, repr=False)
class Poisson(Sampling):
    """Each point joins the batch independently with probability q."""

    q: float

    def __post_init__(self) -> None:
        check_probability(include_one=True, q=self.q)


@dataclass(frozen=True, repr=False)
class FixedSize(Sampling):
    """A uniformly random batch of exactly B of the n points (without replacement)."""

    n: int
    B: int

    def __post_init__(self) -> None:
        check_integer(n=self.n)
        check_integer(B=self.B)
        if self.B > self.n:
            raise ValueError(f"B must be <= n={self.n}; got {self.B!r}")


# --- wrappers -------------------------------------------------------------------------------------


class _Wrapper:
    """A release built around another (``mechanism``, which must add noise); its secret flag absorbs
    the part's."""

    mechanism: Release

    def _check_part(self) -> None:
        if not isinstance(self.mechanism, Release):
            raise ValueError(
                f"mechanism must be a dpnc Release; got {type(self.mechanism).__name__}"
            )
        if isinstance(self.mechanism, NonPrivate) or (
            isinstance(self.mechanism, Gaussian) and self.mechanism.sigma == 0
        ):
            raise ValueError(
                f"sigma must be a finite number > 0; got {getattr(self.mechanism, 'sigma', 0.0)!r} "
                f"({type(self).__name__} wraps a noisy mechanism)"
            )
        if not self.mechanism.secret:
            object.__setattr__(self, "secret", False)
            object.__setattr__(self, "mechanism", dataclasses.replace(self.mechanism, secret=True))

    # Old attribute reads (call sites outside privacy/ that read a release's Δ and σ): the innermost
    # Gaussian's.
    @property
    def sensitivity(self) -> float:
        return _innermost_gaussian(self).sensitivity

    @property
    def sigma(self) -> float:
        return _innermost_gaussian(self).sigma


def innermost(release: Release) -> Release:
    """The mechanism at the centre of a release (through every wrapper)."""
    while isinstance(release, _Wrapper):
        release = release.mechanism
    return release


def _innermost_gaussian(release: Release) -> Gaussian:
    inner = innermost(release)
    if not isinstance(inner, Gaussian):
        raise AttributeError(
            f"{type(release).__name__} wraps a {type(inner).__name__}, not a Gaussian"
        )
    return inner


@dataclass(frozen=True, repr=False)
class Sampled(_Wrapper, Release):
    """``mechanism`` run on a batch drawn by ``sampling`` (amplification by subsampling).

    Under add/remove the mechanism's Δ bounds one point's contribution. Under replace-one Δ is the
    distance between two points' contributions (each assumed bounded by Δ/2, true for the sums and
    means of clipped terms that :func:`mean_sensitivity` describes).

    Example:
        >>> Sampled(Poisson(0.01), Gaussian(sensitivity=0.1, sigma=0.2))
        Sampled(sampling=Poisson(q=0.01), mechanism=Gaussian(sensitivity=0.1, sigma=0.2))
    """

    sampling: Sampling
    mechanism: Release

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.sampling, Sampling):
            raise ValueError(
                f"sampling must be Poisson(q) or FixedSize(n, B); got {self.sampling!r}"
            )
        self._check_part()

    @property
    def additive(self) -> bool:
        """The mechanism's (sampling chooses the batch, not how noise meets the query)."""
        return self.mechanism.additive

    @property
    def sampling_rate(self) -> float:
        """q = B/n, the probability that one point is in the batch (old attribute read)."""
        s = self.sampling
        return s.q if isinstance(s, Poisson) else s.B / s.n


@dataclass(frozen=True, repr=False)
class TreeAggregated(_Wrapper, Release):
    """One period of the tree mechanism over Σ ``leaves``, each node releasing ``mechanism``.

    A data point enters one leaf and is seen through at most ⌊log₂Σ⌋ + 1 node releases
    (:func:`dpnc.privacy.tree.leaf_participation`), so the period costs that many composed copies of
    the node mechanism (for Gaussian nodes, ρ = (⌊log₂Σ⌋ + 1)·Δ²/(2σ²)).
    """

    mechanism: Release
    leaves: int

    def __post_init__(self) -> None:
        super().__post_init__()
        check_integer(leaves=self.leaves)
        self._check_part()


# --- selection among candidates -------------------------------------------------------------------


Ledger = tuple[tuple[Release, int], ...]  # (release, how many times it composes), in order


@dataclass(frozen=True, repr=False)
class RandomStopping(Release):
    """Private tuning by random stopping: the best of K runs of candidates drawn uniformly from a
    grid.

    K ~ D_{η,γ}, the truncated negative binomial of Papernot & Steinke (2022), drawn in secret; each
    repetition draws one of the m candidates uniformly (in secret), runs it (its releases: one
    ledger of ``candidates``) and scores it privately (a release of the same ledger); only the best
    run is output. η = 0 is the logarithmic distribution, η = 1 the geometric one.

        P[K = k] = (1 − γ)^k / (γ^{−η} − 1) · Π_{ℓ=0}^{k−1} (ℓ + η)/(ℓ + 1)      (η ≠ 0)
        P[K = k] = (1 − γ)^k / (k·log(1/γ))                                  (η = 0),   k = 1, 2, …

    ``candidates`` holds the ledger of every candidate of the grid, tried or not (which ones were
    tried is secret); one ledger is a tuple of (release, count) pairs, count ≥ 1 being how many
    times the release composes. Lists and the dicts :meth:`to_dict` writes are accepted and stored
    as tuples. The RDP interpretation (Theorem 2) is in :mod:`dpnc.privacy.interpret`; there is no
    PLD and no ρ.

    Symbols: eta = η ∈ (−1, ∞), gamma = γ ∈ (0, 1), K (repetitions, secret).

    References:
        Papernot, Steinke. Hyperparameter tuning with Renyi differential privacy. ICLR 2022,
        arXiv:2110.03620.
    """

    candidates: tuple[Ledger, ...]
    eta: float
    gamma: float

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (
            isinstance(self.eta, (int, float))
            and not isinstance(self.eta, bool)
            and math.isfinite(self.eta)
            and self.eta > -1
        ):
            raise ValueError(f"eta must be a finite number > -1; got {self.eta!r}")
        check_probability(gamma=self.gamma)
        if not isinstance(self.candidates, (tuple, list)) or not self.candidates:
            raise ValueError(
                f"candidates must be a non-empty sequence of ledgers; got {self.candidates!r}"
            )
        candidates, secret = [], self.secret
        for ledger in self.candidates:
            if not isinstance(ledger, (tuple, list)):
                raise ValueError(
                    f"each candidate must be a sequence of (release, count) pairs; got {ledger!r}"
                )
            entries = []
            for entry in ledger:
                release, count = _ledger_entry(entry)
                secret = secret and release.secret  # the composite's flag covers its parts
                entries.append(
                    (
                        release if release.secret else dataclasses.replace(release, secret=True),
                        count,
                    )
                )
            candidates.append(tuple(entries))
        object.__setattr__(self, "candidates", tuple(candidates))
        object.__setattr__(self, "secret", secret)

    @property
    def expected_repetitions(self) -> float:
        """E[K] = η(1 − γ)/(γ(1 − γ^η)) for η ≠ 0, (1/γ − 1)/log(1/γ) for η = 0 (the
        logarithmic)."""
        return tnb_mean(self.eta, self.gamma)

    def to_dict(self) -> dict:
        return {
            "kind": type(self).__name__,
            "candidates": [
                [{"release": r.to_dict(), "count": c} for r, c in ledger]
                for ledger in self.candidates
            ],
            "eta": self.eta,
            "gamma": self.gamma,
            "secret": self.secret,
        }


def _ledger_entry(entry: Any) -> tuple[Release, int]:
    if isinstance(entry, dict):  # as to_dict wrote it
        release, count = Release.from_dict(entry["release"]), entry["count"]
    elif isinstance(entry, (tuple, list)) and len(entry) == 2:
        release, count = entry
    else:
        raise ValueError(f"a ledger entry must be a (release, count) pair; got {entry!r}")
    if not isinstance(release, Release):
        raise ValueError(f"a ledger entry must hold a dpnc Release; got {type(release).__name__}")
    check_integer(count=count)
    return release, count


def _tnb_scale(eta: float, gamma: float) -> float:
    """η/(γ^{−η} − 1), and its limit 1/log(1/γ) at η = 0 (P[K = 1] = (1 − γ)·this)."""
    if eta == 0:
        return 1 / math.log(1 / gamma)
    return eta / math.expm1(-eta * math.log(gamma))


def tnb_mean(eta: float, gamma: float) -> float:
    """E[K] of the truncated negative binomial D_{η,γ} (Papernot & Steinke 2022, §3)."""
    if eta == 0:
        return (1 / gamma - 1) / math.log(1 / gamma)
    return eta * (1 - gamma) / (gamma * -math.expm1(eta * math.log(gamma)))


def tnb_pmf(eta: float, gamma: float, kmax: int) -> list[float]:
    """[P[K = 1], …, P[K = kmax]] of D_{η,γ}, by P[K = k+1] = P[K = k]·(1 − γ)(k + η)/(k + 1)."""
    check_integer(kmax=kmax)
    p, out = (1 - gamma) * _tnb_scale(eta, gamma), []
    for k in range(1, kmax + 1):
        out.append(p)
        p *= (1 - gamma) * (k + eta) / (k + 1)
    return out


# --- Journals of earlier versions -----------------------------------------------------------------


def _old_gaussian(data: dict) -> Gaussian:
    return Gaussian(data["sensitivity"], data["sigma"])


_OLD_KINDS: dict[str, Any] = {  # kinds written by journals of earlier versions → the records above
    "PoissonSampledGaussian": lambda d: Sampled(
        Poisson(d["sampling_rate"]), _old_gaussian(d), secret=d.get("secret", True)
    ),
    "FixedSizeSampledGaussian": lambda d: Sampled(
        FixedSize(d["dataset_size"], d["batch_size"]),
        _old_gaussian(d),
        secret=d.get("secret", True),
    ),
    "TreeAggregatedGaussian": lambda d: TreeAggregated(
        _old_gaussian(d), leaves=d["num_leaves"], secret=d.get("secret", True)
    ),
}


def _old_zcdp(data: dict) -> ZCDPMechanism:
    if "rho_value" in data:  # earlier versions called the field rho_value
        return ZCDPMechanism(data["rho_value"], secret=data.get("secret", True))
    return ZCDPMechanism(data["rho"], secret=data.get("secret", True))


_OLD_KINDS["ZCDPMechanism"] = _old_zcdp
