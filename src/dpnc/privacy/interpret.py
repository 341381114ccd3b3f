"""The accountant's interpreter: what a release (:mod:`dpnc.privacy.releases`) costs.

Releases are data; this module alone gives them meaning, by their type, recursing through the
wrappers (as dp-accounting's accountants interpret a ``DpEvent`` tree): an RDP curve, a PLD, a ρ.
The choice for each kind: docs/privacy.md ("How each release is accounted")."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from dp_accounting import dp_event as dpe
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.privacy_accountant import NeighboringRelation
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from dpnc.privacy.releases import (
    DiscreteGaussian,
    ExponentialMechanism,
    FixedSize,
    Gaussian,
    Mechanism,
    NonPrivate,
    Poisson,
    RandomStopping,
    Relation,
    Release,
    Sampled,
    TreeAggregated,
    UnsupportedRelease,
    ZCDPMechanism,
    tnb_mean,
)
from dpnc.privacy.tree import leaf_participation

PLD_MIN_MULTIPLIER = (
    0.1  # below this σ/Δ a Gaussian's PLD grid has millions of points (and ε ≳ 100)
)
PLD_TAIL_SDS = (
    10.0  # dp-accounting truncates a Gaussian's tails at mass e^-50: about 10 standard deviations
)
ORDERS = np.asarray(rdp_lib.DEFAULT_RDP_ORDERS, dtype=float)  # the RDP orders λ of every curve
PLD = pld_lib.PrivacyLossDistribution
PldOf = Callable[
    [int, float], PLD
]  # (count, value-discretisation interval) → PLD of count releases

BOTH = frozenset(Relation)
REPLACE = frozenset({Relation.REPLACE_ONE})
ADD_REMOVE = frozenset({Relation.ADD_OR_REMOVE_ONE})


def describe(release: Release) -> str:
    """A short name of the release's shape, e.g. ``Sampled(Poisson, Gaussian)``."""
    match release:
        case Sampled(sampling=s, mechanism=m):
            return f"Sampled({type(s).__name__}, {describe(m)})"
        case TreeAggregated(mechanism=m):
            return f"TreeAggregated({describe(m)})"
        case RandomStopping(candidates=c):
            return f"RandomStopping({len(c)} candidates)"
        case _:
            return type(release).__name__


def non_private(release: Release) -> bool:
    """True for a data-dependent value released without noise (ε = ∞)."""
    return isinstance(release, NonPrivate) or (isinstance(release, Gaussian) and release.sigma == 0)


def rho(release: Release) -> float | None:
    """ρ such that the release is ρ-zCDP, or None if it is not zCDP (e.g. a subsampled release)."""
    match release:
        case Gaussian(sensitivity=d, sigma=s):
            return math.inf if s == 0 else _gaussian_rho(d, s, 1)
        case NonPrivate():
            return math.inf
        case DiscreteGaussian(sensitivity=d, sigma=s):
            return d**2 / (2 * s**2)
        case ZCDPMechanism(rho=r):
            return r
        case ExponentialMechanism(epsilon=e):
            return e**2 / 8
        case TreeAggregated(mechanism=Gaussian(sensitivity=d, sigma=s), leaves=leaves):
            return _gaussian_rho(d, s, leaf_participation(leaves))
        case TreeAggregated(mechanism=Mechanism() as m, leaves=leaves):
            inner = rho(m)
            return None if inner is None else leaf_participation(leaves) * inner
        case _:
            return None


def _gaussian_rho(sensitivity: float, sigma: float, copies: int) -> float:
    return copies * sensitivity**2 / (2 * sigma**2)


# --- RDP ------------------------------------------------------------------------------------------


def dp_event(release: Release, relation: Relation) -> dpe.DpEvent:
    """The dp-accounting event of one release, for an RDP accountant under ``relation``.

    Raises:
        UnsupportedRelease: if the RDP accountant cannot interpret it under ``relation``.
    """
    relation = Relation.parse(relation)
    match release:
        case Gaussian() | NonPrivate() if non_private(release):
            return dpe.NonPrivateDpEvent()
        case Gaussian(sensitivity=d, sigma=s):
            return dpe.GaussianDpEvent(s / d)
        case DiscreteGaussian() | ZCDPMechanism():
            return dpe.ZCDpEvent(rho(release))
        case ExponentialMechanism(epsilon=e):
            _require(relation, REPLACE, release, "the RDP accountant")
            return _randomized_response(e)
        case Sampled(sampling=Poisson(q=q), mechanism=Gaussian(sensitivity=d, sigma=s)):
            _require(relation, ADD_REMOVE, release, "the RDP accountant")
            return dpe.PoissonSampledDpEvent(q, dpe.GaussianDpEvent(s / d))
        case Sampled(sampling=FixedSize(n=n, B=B), mechanism=Gaussian(sensitivity=d, sigma=s)):
            _require(relation, REPLACE, release, "the RDP accountant")
            return dpe.SampledWithoutReplacementDpEvent(n, B, dpe.GaussianDpEvent(s / d))
        case TreeAggregated(mechanism=Mechanism() as m, leaves=leaves):
            return dpe.SelfComposedDpEvent(dp_event(m, relation), leaf_participation(leaves))
        case RandomStopping():
            raise UnsupportedRelease(
                "dp-accounting has no event for RandomStopping: the RDP accountant "
                "interprets it through rdp_curve (Papernot & Steinke 2022, Theorem 2)"
            )
    raise UnsupportedRelease(
        f"the RDP accountant cannot interpret {describe(release)}: dpnc has no "
        "interpretation of that combination"
    )


def rdp_curve(release: Release, relation: Relation) -> np.ndarray:
    """ε(λ) at each order λ of :data:`ORDERS` such that ``release`` is (λ, ε(λ))-RDP under
    ``relation``.

    A read-only array (cached). Raises:
        UnsupportedRelease: if the RDP accountant cannot interpret it under ``relation``.
    """
    return _rdp_curve(release, Relation.parse(relation))


@functools.lru_cache(maxsize=512)
def _rdp_curve(release: Release, relation: Relation) -> np.ndarray:
    if isinstance(release, RandomStopping):
        base = np.max([ledger_rdp(ledger, relation) for ledger in release.candidates], axis=0)
        curve = random_stopping_rdp(base, release.eta, release.gamma)
    else:
        acct = rdp_lib.RdpAccountant(
            orders=list(ORDERS), neighboring_relation=relation.dp_accounting
        )
        acct.compose(
            dp_event(release, relation)
        )  # (dp-accounting warns per dropped order; callers quiet it)
        curve = np.asarray(
            acct._rdp, dtype=float
        ).copy()  # the curve get_epsilon converts (no public getter)
    curve.flags.writeable = False
    return curve


def ledger_rdp(ledger, relation: Relation) -> np.ndarray:
    """Σ count·ε_release(λ) over a ledger of (release, count) pairs (RDP composes additively)."""
    total = np.zeros_like(ORDERS)
    for release, count in ledger:
        total = total + count * rdp_curve(release, relation)
    return total


def random_stopping_rdp(base: np.ndarray, eta: float, gamma: float) -> np.ndarray:
    """Papernot & Steinke 2022, Theorem 2, at each λ of :data:`ORDERS`, for Q with RDP curve
    ``base``.

    ε'(λ) = ε(λ) + min_λ̂ [(1 + η)(1 − 1/λ̂)·ε(λ̂) + (1 + η)·log(1/γ)/λ̂] + log(E[K])/(λ − 1), the
    minimum over λ̂ ∈ {1} ∪ ORDERS; λ̂ = 1 (the KL divergence, finite when some ε(λ) is) gives (1 +
    η)·log(1/γ)."""
    base = np.asarray(base, dtype=float)
    log_inv_gamma = math.log(1 / gamma)
    with np.errstate(invalid="ignore"):
        hat = (1 + eta) * ((1 - 1 / ORDERS) * base + log_inv_gamma / ORDERS)
    options = list(hat[np.isfinite(hat)])
    if np.isfinite(base).any():
        options.append((1 + eta) * log_inv_gamma)  # λ̂ = 1
    extra = min(options) if options else math.inf
    return base + extra + math.log(tnb_mean(eta, gamma)) / (ORDERS - 1)


def _randomized_response(epsilon: float) -> dpe.RandomizedResponseDpEvent:
    # Binary RR keeps the true bit w.p. 1 − η/2; ε = ln((1 − η/2)/(η/2)) ⇔ η = 2/(1 + e^ε).
    return dpe.RandomizedResponseDpEvent(2 / (1 + math.exp(epsilon)), 2)


# --- PLD ------------------------------------------------------------------------------------------


def pld(release: Release, relation: Relation, count: int, interval: float) -> PLD:
    """The privacy-loss distribution of ``count`` such releases under ``relation``.

    Raises:
        UnsupportedRelease: if PLD accounting cannot interpret it under ``relation``, or (Gaussian)
            its composed noise multiplier is below :data:`PLD_MIN_MULTIPLIER`.
    """
    return _pld_of(release, Relation.parse(relation))(count, interval)


def _pld_of(release: Release, relation: Relation) -> PldOf:
    """How to build the PLD of ``count`` releases (built lazily, so support is checked for free)."""
    match release:
        case Gaussian() | NonPrivate() if non_private(release):

            def none(count, interval):
                raise UnsupportedRelease(
                    f"{describe(release)} releases without noise: ε = ∞, no PLD"
                )

            return none
        case Gaussian(sensitivity=d, sigma=s):
            return lambda count, interval: _gaussian_pld(s / d, count, interval)
        case DiscreteGaussian(sensitivity=d, sigma=s):
            return lambda count, interval: pld_lib.from_discrete_gaussian_mechanism(
                s, sensitivity=d, value_discretization_interval=interval
            ).self_compose(count)
        case ExponentialMechanism(epsilon=e):
            _require(relation, REPLACE, release, "PLD accounting")
            rr = _randomized_response(e)
            return lambda count, interval: pld_lib.from_randomized_response(
                rr.noise_parameter,
                rr.num_buckets,
                value_discretization_interval=interval,
                neighboring_relation=relation.dp_accounting,
            ).self_compose(count)
        case Sampled(sampling=Poisson(q=q), mechanism=Gaussian(sensitivity=d, sigma=s)):
            bound = d / (2 if relation is Relation.REPLACE_ONE else 1)  # one point's contribution
            return lambda count, interval: _sampled_gaussian_pld(
                s / bound, q, interval, relation
            ).self_compose(count)
        case TreeAggregated(mechanism=Mechanism() as m, leaves=leaves):
            nodes, node_pld = leaf_participation(leaves), _pld_of(m, relation)
            return lambda count, interval: node_pld(count * nodes, interval)
        case RandomStopping():
            raise UnsupportedRelease(
                "PLD accounting does not support RandomStopping (tuning by random stopping "
                "is analysed in Rényi DP: Papernot & Steinke 2022, Theorem 2); "
                "use method='rdp', the RDP accountant"
            )
    raise UnsupportedRelease(
        f"PLD accounting does not support {describe(release)} under "
        f"{relation.value!r}; use method='rdp'"
    )


def pld_loss_range(release: Release, relation: Relation, count: int) -> float:
    """An upper estimate of the width of the privacy-loss values on the PLD grid of one of ``count``
    releases.

    The grid holds about width / interval points (the cost of building it). A Gaussian of multiplier
    m (sensitivity
    1) has privacy loss (x − 1/2)/m² over the x dp-accounting keeps (within :data:`PLD_TAIL_SDS`
    standard deviations of either mean): width ≈ 1/m² + 2·z/m; Poisson subsampling only narrows it.
    0 for a release whose grid does not grow with its parameters."""
    relation = Relation.parse(relation)
    match release:
        case Gaussian(sensitivity=d, sigma=s) if s > 0:
            return _gaussian_width(s / d / math.sqrt(count))
        case DiscreteGaussian(sensitivity=d, sigma=s):
            return _gaussian_width(s / d)
        case Sampled(sampling=Poisson(), mechanism=Gaussian(sensitivity=d, sigma=s)) if s > 0:
            return _gaussian_width(s / (d / (2 if relation is Relation.REPLACE_ONE else 1)))
        case ExponentialMechanism(epsilon=e):
            return 2 * e
        case TreeAggregated(mechanism=Mechanism() as m, leaves=leaves):
            return pld_loss_range(m, relation, count * leaf_participation(leaves))
    return 0.0


def _gaussian_width(multiplier: float) -> float:
    return (1 + 2 * PLD_TAIL_SDS * multiplier) / multiplier**2


@functools.lru_cache(maxsize=64)
def _sampled_gaussian_pld(multiplier: float, q: float, interval: float, relation: Relation) -> PLD:
    """One Poisson-subsampled Gaussian's PLD, cached: building it costs up to a second
    (dp-accounting evaluates ~10⁶ grid points in Python), and a trainer asks for ε after every step
    of the same release; composing is cheap. (dp-accounting's PLDs are immutable: compose and
    self_compose return new objects.)"""
    return pld_lib.from_gaussian_mechanism(
        multiplier,
        sampling_prob=q,
        value_discretization_interval=interval,
        neighboring_relation=relation.dp_accounting,
    )


def _gaussian_pld(multiplier: float, count: int, interval: float) -> PLD:
    # count releases with multiplier m compose exactly into one with multiplier m/√count.
    multiplier = multiplier / math.sqrt(count)
    if multiplier < PLD_MIN_MULTIPLIER:
        # The privacy loss spans ~1/(2m²) + 10/m: at m = 0.1 PLD takes seconds and ε ≈ 100; below,
        # time and memory grow as 1/m² (and dp-accounting overflows to ε = ∞ near m = 0.03).
        raise UnsupportedRelease(
            f"the noise multiplier σ/Δ = {multiplier:.3g} (after {count} compositions) is below "
            f"{PLD_MIN_MULTIPLIER}: too little noise for PLD accounting on a grid; use method='rdp'"
        )
    return pld_lib.from_gaussian_mechanism(
        multiplier,
        value_discretization_interval=interval,
        neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
    )


# --- which relations ------------------------------------------------------------------------------


def _require(relation: Relation, allowed: frozenset[Relation], release: Release, who: str) -> None:
    if relation not in allowed:
        raise UnsupportedRelease(
            f"{who} cannot interpret {describe(release)} under {relation.value!r}"
        )


def _supported(
    build: Callable[[Release, Relation], object], release: Release, relation: Relation
) -> bool:
    try:
        build(release, relation)
    except UnsupportedRelease:
        return False
    return True


def _rdp_check(release: Release, relation: Relation) -> None:
    """A dry run of :func:`rdp_curve`: raises UnsupportedRelease where it would."""
    if isinstance(release, RandomStopping):
        for ledger in release.candidates:
            for part, _ in ledger:
                _rdp_check(part, relation)
    else:
        dp_event(release, relation)


def rdp_relations(release: Release) -> frozenset[Relation]:
    """The relations under which the RDP accountant interprets ``release``."""
    return frozenset(r for r in Relation if _supported(_rdp_check, release, r))


def pld_relations(release: Release) -> frozenset[Relation]:
    """The relations under which PLD accounting interprets ``release``."""
    return frozenset(r for r in Relation if _supported(_pld_of, release, r))


def relations(release: Release) -> frozenset[Relation]:
    """The relations under which some accountant (RDP or PLD) interprets ``release``."""
    return rdp_relations(release) | pld_relations(release)
