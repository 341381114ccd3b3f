"""``run_audit``: run a mechanism on neighbouring datasets, test, and put the ε lower bound beside
the claim."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field

from dpnc.audit.base import SIGMA_FACTOR
from dpnc.audit.mechanisms import BROKEN, MECHANISMS, Mechanism
from dpnc.audit.stats import PROFILE_DELTAS, multi_statistic_test
from dpnc.checks import check_probability


@dataclass
class AuditResult:
    """One audit: the claim, the empirical ε lower bounds of several statistics and how they were
    obtained.

    Attributes:
        mechanism: the audited mechanism's name; ``broken`` the deliberately broken variant (None:
            the real one).
        claimed_epsilon: the tightest ε the library's ledger claims for the correct configuration at
            ``delta``.
        audit_delta, claimed_epsilon_at_audit_delta, epsilon_lower_bound, statistic: the decisive
            test (the statistic whose held-out bound exceeds the ledger's ε(δ) by the most, at the δ
            its selection half chose): ε(audit_delta) ≥ epsilon_lower_bound with the family-wise
            ``confidence``.
        tests: every statistic's test (``StatisticTest.to_dict()``), Bonferroni-corrected: with
            probability ≥ ``confidence`` all their bounds hold at once.
        profile: the ledger's ε at each δ the tests could choose.
        runs: runs on each of the two neighbouring datasets (half choose thresholds and δ, half
            bound ε).
        claim: the ledger's full report at ``delta`` (ε by RDP and PLD, ρ, whether its releases were
            private, notes).
        canary, summary: which neighbours, which code ran; statistics: what each statistic computes.
        canary_effect: how far the canary moves a release (``shift``) beside the ledger's
            ``sensitivity``, and for unsampled Gaussian mechanisms the canary's Gaussian-DP ``mu``
            beside the ledger's ``claimed_mu``.
        parameters: the audited configuration. seconds: wall time of the runs and tests.
    """

    mechanism: str
    broken: str | None
    claimed_epsilon: float
    epsilon_lower_bound: float
    audit_delta: float
    claimed_epsilon_at_audit_delta: float
    statistic: str
    delta: float
    confidence: float
    runs: int
    relation: str
    tests: list = field(default_factory=list)
    profile: dict = field(default_factory=dict)
    claim: dict = field(default_factory=dict)
    canary: str = ""
    summary: str = ""
    statistics: dict = field(default_factory=dict)
    canary_effect: dict = field(default_factory=dict)
    parameters: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def violation(self) -> bool:
        """True when some statistic's lower bound exceeds the claim at its δ: the claim is false (at
        ``confidence``)."""
        return any(t["violation"] for t in self.tests)

    @property
    def margin(self) -> float:
        """The decisive test's lower bound minus the ledger's ε at its δ (> 0: a violation)."""
        return self.epsilon_lower_bound - self.claimed_epsilon_at_audit_delta

    def to_dict(self) -> dict:
        data = asdict(self)
        data["profile"] = {f"{d:g}": e for d, e in self.profile.items()}
        data["violation"] = self.violation
        data["margin"] = self.margin
        return _finite(data)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def __str__(self) -> str:
        variant = "correct" if self.broken is None else f"broken: {self.broken}"
        verdict = (
            "VIOLATION: a lower bound exceeds the claim"
            if self.violation
            else "consistent: no lower bound exceeds the claim"
        )
        lines = [
            f"audit {self.mechanism} ({variant}), {self.runs} runs per dataset, {self.relation}",
            f"  claimed ε = {self.claimed_epsilon:.4f} at δ = {self.delta:g}  (ledger: RDP "
            f"{_fmt(self.claim.get('epsilon_rdp'))}, PLD {_fmt(self.claim.get('epsilon_pld'))})",
            f"  decisive: {self.statistic} at δ = {self.audit_delta:g}: empirical ε ≥ {self.epsilon_lower_bound:.4f} "
            f"against the claimed ε(δ) = {self.claimed_epsilon_at_audit_delta:.4f} ({self.confidence:.0%} "
            f"confidence, Bonferroni over {len(self.tests)} statistics)",
            f"  {verdict}",
            "  statistic            δ        claimed ε(δ)  ε ≥      held-out FPR     held-out FNR",
        ]
        for t in self.tests:
            h = t["test"]
            lines.append(
                f"  {t['statistic']:<20} {t['delta']:<8g} {t['claimed_epsilon']:<13.4f} "
                f"{t['epsilon_lower_bound']:<8.4f} {h['false_positives']}/{h['negatives']:<10} "
                f"{h['false_negatives']}/{h['positives']}"
            )
        effect = self.canary_effect
        lines.append(
            f"  canary: moves a release by {effect['shift']:.4g} (ledger sensitivity "
            f"{effect['sensitivity']:.4g})"
            + (
                ""
                if effect.get("mu") is None
                else f", μ {effect['mu']:.4f} (ledger {effect['claimed_mu']:.4f})"
            )
        )
        lines.append(f"  {self.seconds:.1f} s")
        return "\n".join(lines)


def run_audit(
    mechanism: str | Mechanism,
    runs: int,
    broken: str | None = None,
    *,
    confidence: float = 0.95,
    epsilon: float | None = None,
    delta: float = 1e-5,
    seed: int = 0,
    sigma_factor: float = SIGMA_FACTOR,
    deltas=PROFILE_DELTAS,
    progress: bool = False,
) -> AuditResult:
    """Audit ``mechanism``: ``runs`` runs on D and on D′, several statistics' split tests against
    the claim.

    Args:
        mechanism: a name of :data:`~dpnc.audit.mechanisms.MECHANISMS` or a :class:`Mechanism`
            (which then carries its own ε, δ, seed and σ factor).
        runs: runs per dataset, >= 4 (half select thresholds and δ, half give the bounds).
        broken: None (the real mechanism) or one of the mechanism's ``variants`` (see
            :mod:`dpnc.audit.base`).
        confidence: family-wise confidence of the lower bounds, in (0, 1).
        epsilon, delta, seed, sigma_factor: the target ε (None: the mechanism's
            ``default_epsilon``), the δ of the claim, the public seed and the divisor of σ for
            ``broken='sigma'``, for a mechanism given by name.
        deltas: the δ values besides ``delta`` at which a bound may be compared with the ledger's
            ε(δ).
        progress: show a progress bar.

    Raises:
        ValueError: an unknown mechanism or variant, or invalid numbers (before any run).
    """
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 4:
        raise ValueError(f"runs must be an integer >= 4; got {runs!r}")
    check_probability(confidence=confidence)
    if broken is not None and broken not in BROKEN:
        raise ValueError(f"broken must be one of {BROKEN} or None; got {broken!r}")
    if isinstance(mechanism, str):
        if mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {sorted(MECHANISMS)}; got {mechanism!r}")
        mechanism = MECHANISMS[mechanism](
            epsilon=epsilon, delta=delta, seed=seed, sigma_factor=sigma_factor
        )
    mechanism.check_broken(broken)
    mechanism = mechanism.for_variant(broken)
    start = time.perf_counter()
    report = mechanism.claim()
    profile = mechanism.claim_profile(deltas)
    scores = mechanism.scores(runs, broken, progress=progress)
    tests = multi_statistic_test(scores, profile, confidence)
    best = max(tests, key=lambda t: t.margin)
    return AuditResult(
        mechanism=mechanism.name,
        broken=broken,
        claimed_epsilon=report.epsilon,
        epsilon_lower_bound=best.epsilon_lower_bound,
        audit_delta=best.delta,
        claimed_epsilon_at_audit_delta=best.claimed_epsilon,
        statistic=best.statistic,
        delta=mechanism.delta,
        confidence=confidence,
        runs=runs,
        relation=mechanism.relation,
        tests=[t.to_dict() for t in tests],
        profile=profile,
        claim=asdict(report),
        canary=mechanism.canary,
        summary=mechanism.summary,
        statistics=dict(mechanism.statistics),
        canary_effect=mechanism.canary_effect(),
        parameters=mechanism.parameters(),
        seconds=time.perf_counter() - start,
    )


def summary_markdown(results) -> str:
    """A markdown table of audits (:class:`AuditResult` or their ``to_dict()``): the claim beside
    the bound."""
    lines = [
        "| mechanism | variant | runs per dataset | claimed ε (δ = nominal) | decisive statistic | δ | "
        "claimed ε(δ) | empirical ε(δ) ≥ | verdict | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        r = r if isinstance(r, dict) else r.to_dict()
        variant = r["broken"] or "correct"
        if r["broken"] == "sigma":
            variant = f"sigma/{r['parameters']['sigma_factor']:g}"
        lines.append(
            f"| {r['mechanism']} | {variant} | {r['runs']} | {r['claimed_epsilon']:.3f} | {r['statistic']} | "
            f"{r['audit_delta']:g} | {r['claimed_epsilon_at_audit_delta']:.3f} | "
            f"{r['epsilon_lower_bound']:.3f} | "
            f"{'**violation**' if r['violation'] else 'consistent'} | {r['seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _finite(value):
    """JSON has no inf/NaN: they become None (e.g. a ledger answer that does not exist)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
