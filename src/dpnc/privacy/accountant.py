"""The privacy accountant: a ledger of releases, interpreted by dp-accounting.

Algorithms never compute ε themselves: they record what they released (:mod:`dpnc.privacy.releases`)
and the accountant answers ε(δ) by RDP and by PLD, and ρ when every release is zCDP.
See docs/privacy.md."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import uuid
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from dpnc.privacy import interpret
from dpnc.privacy.budget import Conversion, check_delta, rho_to_epsilon
from dpnc.privacy.releases import Gaussian, Relation, Release, UnsupportedRelease

Method = Literal["rdp", "pld"]
METHODS: tuple[str, ...] = ("rdp", "pld")
PLD_INTERVAL = (
    1e-4  # dp-accounting's default value-discretisation interval (ε resolution), the finest used
)
PLD_FINE_UP_TO = 10.0  # up to this ε (estimated by RDP) every PLD uses PLD_INTERVAL; above, ...
PLD_RELATIVE = (
    1e-4  # ... the interval is this fraction of the estimate (the ε error stays ≲ 2e-5·ε)
)
PLD_MAX_POINTS = (
    1_000_000  # ... and coarse enough that no release's grid holds more points than this
)


@dataclass
class Entry:
    """``count`` consecutive copies of one release; with a ``partition``, each on its own part of
    the data."""

    release: Release
    count: int
    partition: str | None = None

    @property
    def composed_count(self) -> int:
        """How many times the release composes: parallel composition makes disjoint copies cost
        one."""
        return min(self.count, 1) if self.partition is not None else self.count


class Accountant:
    """A ledger of privacy releases under one neighbouring relation.

    The releases are interpreted by :mod:`dpnc.privacy.interpret`: ε(δ) by Rényi DP (dp-accounting's
    ``RdpAccountant``) and by privacy-loss distributions (dp-accounting's PLD library, tight up to
    its pessimistic discretisation), ρ when every release is zCDP; :meth:`rdp` gives the ledger's
    RDP curve. Consecutive equal releases are merged, so T identical steps cost O(1) to store and to
    account. Releases made on pairwise disjoint parts of the data (the single-pass algorithms'
    epochs or batches) are recorded under one ``partition`` name and cost one release by parallel
    composition. The ledger round-trips through JSON, so a resumed run continues the same ledger and
    never under-counts.

    Args:
        relation: ``"replace-one"`` (the papers' default: n fixed, one point replaced) or
            ``"add/remove"``. Every recorded release must state its sensitivity under it.
        method: the accountant :meth:`epsilon` and :meth:`get_epsilon` answer by when not told:
            ``"rdp"`` (the default) or ``"pld"``. A run whose noise was calibrated by one accountant
            reports by the same one (:func:`dpnc.make_private` sets it to its calibrating
            accountant); :meth:`report` gives every answer.

    Example:
        >>> acct = Accountant("replace-one")
        >>> acct.record(Gaussian(sensitivity=1.0, sigma=10.0), count=100)
        >>> round(acct.rho(), 6)
        0.5
    """

    def __iter__(self):
        # `model, optimizer, loader = make_private(...)` (Opacus's order) makes this the loader
        raise TypeError(
            "an Accountant is not iterable: dpnc.make_private returns (optimizer, loader, accountant), "
            "in that order (Opacus returns (model, optimizer, loader))"
        )

    def __init__(
        self, relation: Relation | str = Relation.REPLACE_ONE, method: Method = "rdp"
    ) -> None:
        self.relation = Relation.parse(relation)
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}; got {method!r}")
        self.method = method
        self.ledger: list[Entry] = []

    # --- recording -------------------------------------------------------------------------

    def record(self, release: Release, count: int = 1, *, partition: str | None = None) -> None:
        """Append ``count`` copies of ``release`` (merged with the last entry if equal).

        ``partition`` names a split of the data into parts fixed independently of the data (e.g. the
        consecutive slices of one single pass): releases recorded consecutively under the same name
        are computed on pairwise disjoint parts, each private for any auxiliary input built from
        earlier outputs, so by parallel composition they cost one release together. Use a fresh name
        per pass over the data (:func:`new_partition`); a second pass is a second partition. Refused
        under add/remove, where removing a point would shift a positional partition.

        Raises:
            UnsupportedRelease: if dp-accounting can interpret the release under this relation
                neither by RDP nor by PLD.
        """
        if not isinstance(release, Release):
            raise TypeError(f"release must be a dpnc Release; got {type(release).__name__}")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"count must be an integer >= 0; got {count!r}")
        last = self.ledger[-1] if self.ledger else None
        if last is not None and last.release == release and last.partition == partition:
            last.count += (
                count  # checked when first recorded (the checks below read only these three)
            )
            return
        allowed = interpret.relations(release)
        if self.relation not in allowed:
            if not allowed:  # no interpretation at all: say which part
                interpret.dp_event(release, self.relation)
            raise UnsupportedRelease(
                f"{interpret.describe(release)} cannot be accounted under relation "
                f"{self.relation.value!r}; use an Accountant with relation "
                f"{sorted(r.value for r in allowed)}"
            )
        if partition is not None and self.relation is not Relation.REPLACE_ONE:
            raise UnsupportedRelease(
                "disjoint (parallel-composition) releases need a data-independent partition that one "
                "neighbouring change cannot shift; that holds under replace-one, not add/remove"
            )
        if count:
            self.ledger.append(Entry(release, count, partition))

    def extend(self, other: Accountant) -> None:
        """Record every entry of ``other`` (same relation) after this ledger's."""
        if other.relation is not self.relation:
            raise ValueError(
                f"cannot merge a {other.relation.value!r} ledger into a {self.relation.value!r} one"
            )
        for entry in other.ledger:
            self.record(entry.release, entry.count, partition=entry.partition)

    @property
    def releases(self) -> int:
        """Total number of releases recorded."""
        return sum(e.count for e in self.ledger)

    @property
    def secret(self) -> bool:
        """False if any release drew its noise from a seeded (test) source."""
        return all(e.release.secret for e in self.ledger)  # a composite's flag covers its parts

    # --- answers ---------------------------------------------------------------------------

    def epsilon(self, delta: float, method: Method | None = None) -> float:
        """ε such that everything recorded is (ε, δ)-DP, by RDP or PLD accounting (default:
        :attr:`method`)."""
        delta = check_delta(delta)
        method = self.method if method is None else method
        if method == "rdp":
            return _rdp_epsilon(self._key(), self.relation, delta)
        if method == "pld":
            return _pld_epsilon(self._key(), self.relation, delta)
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")

    def get_epsilon(self, delta: float) -> float:
        """ε(δ) by this accountant's :attr:`method` (Opacus's name for :meth:`epsilon`)."""
        return self.epsilon(delta)

    def rdp(self) -> tuple[np.ndarray, np.ndarray]:
        """(orders λ, ε(λ)): everything recorded is (λ, ε(λ))-RDP at each order (the curve ε(δ)
        converts).

        Raises:
            UnsupportedRelease: if some release has no RDP interpretation under this relation.
        """
        total = np.zeros_like(interpret.ORDERS)
        for release, count in self._key():
            total = total + count * _rdp_curve(release, self.relation)[1]
        return interpret.ORDERS.copy(), total

    def rho(self) -> float:
        """ρ such that everything recorded is ρ-zCDP (sum over releases).

        Raises:
            UnsupportedRelease: if some release (e.g. a subsampled one) is not zCDP.
        """
        total = 0.0
        for e in self.ledger:
            rho = interpret.rho(e.release)
            if rho is None:
                raise UnsupportedRelease(
                    f"{interpret.describe(e.release)} is not zCDP, so the ledger has no ρ; "
                    "ask epsilon(delta, 'rdp') or epsilon(delta, 'pld') instead"
                )
            total += e.composed_count * rho
        return total

    def report(
        self, delta: float, *, conversion: Conversion = "optimal", paper_claim: str | None = None
    ) -> PrivacyReport:
        """Every answer this ledger supports at ``delta``; unsupported ones are None with a note."""
        delta = check_delta(delta)
        answers: dict[str, float | None] = {}
        notes: list[str] = []
        for name, fn in (
            ("rdp", lambda: self.epsilon(delta, "rdp")),
            ("pld", lambda: self.epsilon(delta, "pld")),
            ("rho", self.rho),
        ):
            try:
                answers[name] = fn()
            except UnsupportedRelease as err:
                answers[name] = None
                notes.append(f"{name}: {err}")
        rho = answers["rho"]
        eps_zcdp = (
            None
            if rho is None
            else (math.inf if math.isinf(rho) else rho_to_epsilon(rho, delta, conversion))
        )
        if not self.secret:
            notes.append("NOT PRIVATE: some noise came from a seeded test NoiseSource")
        noiseless = any(interpret.non_private(e.release) for e in self.ledger)
        if noiseless:
            notes.append("NOT PRIVATE: some release carried no noise (ε = ∞)")
        return PrivacyReport(
            relation=self.relation.value,
            delta=delta,
            releases=self.releases,
            epsilon_rdp=answers["rdp"],
            epsilon_pld=answers["pld"],
            rho=rho,
            epsilon_zcdp=eps_zcdp,
            private=self.secret and not noiseless,
            paper_claim=paper_claim,
            notes=notes,
        )

    # --- persistence -----------------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps(
            {
                "relation": self.relation.value,
                "method": self.method,
                "ledger": [
                    {"count": e.count, "partition": e.partition, "release": e.release.to_dict()}
                    for e in self.ledger
                ],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Accountant:
        data = json.loads(text)
        acct = cls(data["relation"], data.get("method", "rdp"))
        for item in data["ledger"]:
            acct.record(
                Release.from_dict(item["release"]), item["count"], partition=item.get("partition")
            )
        return acct

    def _key(self) -> tuple[tuple[Release, int], ...]:
        return tuple((e.release, e.composed_count) for e in self.ledger if e.composed_count)

    def __repr__(self) -> str:
        return (
            f"Accountant(relation={self.relation.value!r}, method={self.method!r}, entries={len(self.ledger)}, "
            f"releases={self.releases})"
        )


def new_partition(label: str) -> str:
    """A fresh partition name for :meth:`Accountant.record`: ``label`` plus a unique suffix."""
    return f"{label}-{uuid.uuid4().hex[:12]}"


@dataclass
class PrivacyReport:
    """What a run spent. ε values are for the given δ; None means that accountant cannot answer.

    ``private`` is False when any release drew its noise from a seeded (test) source or carried no
    noise."""

    relation: str
    delta: float
    releases: int
    epsilon_rdp: float | None
    epsilon_pld: float | None
    rho: float | None
    epsilon_zcdp: float | None
    private: bool
    paper_claim: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def epsilon(self) -> float:
        """The tightest ε available (smallest of the valid upper bounds)."""
        values = [
            v for v in (self.epsilon_rdp, self.epsilon_pld, self.epsilon_zcdp) if v is not None
        ]
        return min(values) if values else math.inf

    def __str__(self) -> str:
        def fmt(v):
            return "n/a" if v is None else f"{v:.6g}"

        lines = [
            f"privacy ({self.relation}, {self.releases} releases, δ={self.delta:g})"
            + ("" if self.private else "  ** NOT PRIVATE **"),
            f"  ε (RDP)  = {fmt(self.epsilon_rdp)}",
            f"  ε (PLD)  = {fmt(self.epsilon_pld)}",
        ]
        if self.rho is not None:  # otherwise a note says why the ledger has none
            lines.append(f"  ρ (zCDP) = {fmt(self.rho)}  → ε = {fmt(self.epsilon_zcdp)}")
        if self.paper_claim:
            lines.append(f"  paper's claim: {self.paper_claim}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _errors_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR


@contextlib.contextmanager
def quiet_dp_accounting():
    """Silence dp-accounting's warning for each RDP order whose series does not converge.

    It then drops that order, which is safe (the minimum over the remaining orders is still valid).
    A filter, not ``setLevel``: setting a logger's level clears every logger's cache, which cost a
    head-mode fine-tuning step (asking ε after each step) about a fifth of its time."""
    logger = logging.getLogger("absl")
    logger.addFilter(_errors_only)
    try:
        yield
    finally:
        logger.removeFilter(_errors_only)


@functools.lru_cache(maxsize=256)
def _rdp_epsilon(ledger, relation: Relation, delta: float) -> float:
    for release, _ in ledger:
        if relation not in interpret.rdp_relations(release):
            raise UnsupportedRelease(
                f"the RDP accountant cannot interpret {interpret.describe(release)} under "
                f"{relation.value!r}; use method='pld'"
                if relation in interpret.pld_relations(release)
                else f"the RDP accountant cannot interpret {interpret.describe(release)} under {relation.value!r}"
            )
    # RDP adds up over releases: Σ count·RDP(release), each release's curve computed once (a trainer
    # asks for ε after every step, and the Poisson-subsampled curve costs ~0.1 s), exactly what
    # composing the ledger's event gives.
    orders, total = None, 0.0
    for release, count in ledger:
        orders, curve = _rdp_curve(release, relation)
        total = total + count * curve
    if orders is None:
        return 0.0
    with quiet_dp_accounting():
        return float(rdp_lib.compute_epsilon(orders, total, delta)[0])


def _rdp_curve(release: Release, relation: Relation):
    """(orders, RDP at each order) of one ``release`` (:func:`dpnc.privacy.interpret.rdp_curve`,
    cached there)."""
    with quiet_dp_accounting():
        return interpret.ORDERS, interpret.rdp_curve(release, relation)


def coarse_pld_epsilon(accountant: Accountant, delta: float, coarseness: float) -> float:
    """ε(δ) by PLD on a grid ``coarseness`` times coarser than :meth:`Accountant.epsilon`'s: a guide
    that costs about 1/coarseness of the answer (calibration searches on it first, then decides on
    the accountant's own grid)."""
    return _pld_epsilon(accountant._key(), accountant.relation, check_delta(delta), coarseness)


@functools.lru_cache(maxsize=256)
def _pld_epsilon(ledger, relation: Relation, delta: float, coarseness: float = 1.0) -> float:
    composed, precision = None, 0.0
    for release, _count in ledger:
        if relation not in interpret.pld_relations(release):
            raise UnsupportedRelease(
                f"PLD accounting does not support {interpret.describe(release)} under "
                f"{relation.value!r}; use method='rdp'"
            )
        if interpret.non_private(release):
            return math.inf
    parts = []
    for release, count in ledger:
        if type(release) is Gaussian:
            # Gaussian releases compose exactly into one Gaussian with 1/m² = Σ count_i/m_i² (the
            # privacy loss of each is Gaussian, and means and variances add): one PLD instead of one
            # per distinct σ (KL-Spider's ledger holds thousands), and no discretisation error
            # composed thousands of times.
            precision += count / release.noise_multiplier**2
        else:
            parts.append((release, count))
    if precision:
        parts.append((Gaussian(1.0, 1.0 / math.sqrt(precision)), 1))
    if not parts:
        return 0.0
    interval = coarseness * pld_interval(ledger, relation, delta, parts)
    try:
        with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
            for release, count in parts:
                pld = interpret.pld(release, relation, count, interval)
                composed = pld if composed is None else composed.compose(pld)
            epsilon = float(composed.get_epsilon_for_delta(delta))
    except (
        OverflowError,
        FloatingPointError,
        MemoryError,
    ) as err:  # privacy losses beyond exp's range
        raise UnsupportedRelease(
            f"PLD accounting cannot represent this ledger's privacy loss ({err!r} at "
            f"discretisation interval {interval:.3g}); use method='rdp'"
        ) from None
    if math.isnan(epsilon):
        raise UnsupportedRelease(
            f"PLD accounting failed numerically on this ledger (ε = nan at discretisation "
            f"interval {interval:.3g}); use method='rdp'"
        )
    return epsilon


def pld_interval(ledger, relation: Relation, delta: float, parts=None) -> float:
    """The value-discretisation interval of the ledger's PLD: fine where that is cheap, coarser
    where ε is large.

    dp-accounting's grid spans the privacy-loss values (about ε and beyond) in steps of the
    interval, so its cost grows as ε / interval: at the fixed 1e-4, ε = 100 took a minute and ε =
    10⁶ exhausted memory. The interval is :data:`PLD_INTERVAL` (dp-accounting's default) while the
    ledger's RDP ε (a cheap estimate of the scale; skipped where RDP cannot interpret the ledger) is
    at most :data:`PLD_FINE_UP_TO`, else :data:`PLD_RELATIVE` × that ε; and at least each release's
    loss range / :data:`PLD_MAX_POINTS` (``parts``: the (release, count) pairs whose PLDs are built,
    by default the ledger's). Any interval is valid: dp-accounting's pessimistic discretisation
    rounds every privacy loss up, so ε stays an upper bound, only less tight (measured: +2·10⁻⁵·ε at
    the relative interval, ε ≈ 100)."""
    interval = PLD_INTERVAL
    try:
        scale = _rdp_epsilon(ledger, relation, delta)
    except UnsupportedRelease:
        scale = 0.0
    if PLD_FINE_UP_TO < scale < math.inf:
        interval = PLD_RELATIVE * scale
    for release, count in ledger if parts is None else parts:
        interval = max(
            interval, interpret.pld_loss_range(release, relation, count) / PLD_MAX_POINTS
        )
    return interval
