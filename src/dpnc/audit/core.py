"""``run_audit``: run a mechanism on neighbouring datasets, test, and put the ε lower bound beside the claim."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field

from dpnc.audit.mechanisms import BROKEN, MECHANISMS, Mechanism
from dpnc.audit.stats import ThresholdTest, split_threshold_test


@dataclass
class AuditResult:
    """One audit: the claim, the empirical ε lower bound and how it was obtained.

    Attributes:
        mechanism: the audited mechanism's name; ``broken`` the deliberately broken variant (None: the real one).
        claimed_epsilon: the tightest ε the library's ledger claims for the correct configuration at ``delta``.
        epsilon_lower_bound: ε that the mechanism as run provably exceeds, with probability ≥ ``confidence``.
        runs: runs on each of the two neighbouring datasets (half choose the threshold, half bound ε).
        test: the threshold test on the held-out half (counts, Clopper–Pearson bounds and intervals).
        claim: the ledger's full report (ε by RDP and PLD, ρ, whether its releases were private, notes).
        statistic, canary, summary: what the adversary computed, which neighbours, which code ran.
        canary_effect: how far the canary moves a release (``shift``) beside the ledger's ``sensitivity``, and
            for unsampled Gaussian mechanisms the canary's Gaussian-DP ``mu`` beside the ledger's ``claimed_mu``
            (equal: the canary's privacy loss is exactly the claimed one).
        parameters: the audited configuration. seconds: wall time of the runs.
    """

    mechanism: str
    broken: str | None
    claimed_epsilon: float
    epsilon_lower_bound: float
    delta: float
    confidence: float
    runs: int
    relation: str
    test: ThresholdTest
    claim: dict
    statistic: str
    canary: str
    summary: str
    canary_effect: dict = field(default_factory=dict)
    parameters: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def violation(self) -> bool:
        """True when the lower bound exceeds the claim: the claim is false (with probability ≥ confidence)."""
        return self.epsilon_lower_bound > self.claimed_epsilon

    def to_dict(self) -> dict:
        data = asdict(self)
        data["test"] = self.test.to_dict()
        data["violation"] = self.violation
        return _finite(data)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def __str__(self) -> str:
        t = self.test
        variant = "correct" if self.broken is None else f"broken: {self.broken}"
        verdict = ("VIOLATION: the lower bound exceeds the claim" if self.violation
                   else "consistent: the lower bound does not exceed the claim")
        return "\n".join([
            f"audit {self.mechanism} ({variant}), {self.runs} runs per dataset, {self.relation}, δ = {self.delta:g}",
            f"  claimed ε            = {self.claimed_epsilon:.4f}  (ledger: RDP {_fmt(self.claim['epsilon_rdp'])}, "
            f"PLD {_fmt(self.claim['epsilon_pld'])})",
            f"  empirical ε ≥        {self.epsilon_lower_bound:.4f}  ({self.confidence:.0%} confidence; point "
            f"estimate {_fmt(t.epsilon_estimate)})",
            f"  test on held-out half: FPR {t.false_positives}/{t.negatives} (≤ {t.fpr_upper:.4g}), "
            f"FNR {t.false_negatives}/{t.positives} (≤ {t.fnr_upper:.4g})",
            f"  {verdict}",
            f"  canary: moves a release by {self.canary_effect['shift']:.4g} (ledger sensitivity "
            f"{self.canary_effect['sensitivity']:.4g})" + ("" if self.canary_effect.get("mu") is None else
                                                          f", μ {self.canary_effect['mu']:.4f} (ledger "
                                                          f"{self.canary_effect['claimed_mu']:.4f})"),
            f"  statistic: {self.statistic}",
            f"  {self.seconds:.1f} s"])


def run_audit(mechanism: str | Mechanism, runs: int, broken: str | None = None, *, confidence: float = 0.95,
              epsilon: float = 1.0, delta: float = 1e-5, seed: int = 0, progress: bool = False) -> AuditResult:
    """Audit ``mechanism``: ``runs`` runs on D and on D′, a split threshold test, ε lower bound vs the claim.

    Args:
        mechanism: a name of :data:`~dpnc.audit.mechanisms.MECHANISMS` or a :class:`Mechanism` (which then
            carries its own ε, δ and seed).
        runs: runs per dataset, >= 4 (half select the threshold, half give the bound).
        broken: None (the real mechanism), ``"sigma"`` (σ/10, same claim) or ``"public-batches"`` (seeded
            batches the adversary replays; subsampled mechanisms only).
        confidence: of the lower bound, in (0, 1).
        epsilon, delta, seed: the target ε, the δ and the public seed of a mechanism given by name.
        progress: show a progress bar.

    Raises:
        ValueError: an unknown mechanism or variant, or invalid numbers (before any run).
    """
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 4:
        raise ValueError(f"runs must be an integer >= 4; got {runs!r}")
    if not (isinstance(confidence, (int, float)) and 0 < confidence < 1):
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
    if broken is not None and broken not in BROKEN:
        raise ValueError(f"broken must be one of {BROKEN} or None; got {broken!r}")
    if isinstance(mechanism, str):
        if mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {sorted(MECHANISMS)}; got {mechanism!r}")
        mechanism = MECHANISMS[mechanism](epsilon=epsilon, delta=delta, seed=seed)
    mechanism.check_broken(broken)
    start = time.perf_counter()
    report = mechanism.claim()
    scores_in, scores_out = mechanism.scores(runs, broken, progress=progress)
    test = split_threshold_test(scores_in, scores_out, mechanism.delta, confidence)
    return AuditResult(mechanism=mechanism.name, broken=broken, claimed_epsilon=report.epsilon,
                       epsilon_lower_bound=test.epsilon_lower_bound, delta=mechanism.delta, confidence=confidence,
                       runs=runs, relation=mechanism.relation, test=test, claim=asdict(report),
                       statistic=mechanism.statistic, canary=mechanism.canary, summary=mechanism.summary,
                       canary_effect=mechanism.canary_effect(), parameters=mechanism.parameters(),
                       seconds=time.perf_counter() - start)


def summary_markdown(results) -> str:
    """A markdown table of audits (:class:`AuditResult` or their ``to_dict()``): the claim beside the bound."""
    lines = ["| mechanism | variant | runs per dataset | claimed ε | empirical ε ≥ | point estimate | held-out FPR | "
             "held-out FNR | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        r = r if isinstance(r, dict) else r.to_dict()
        t = r["test"]
        lines.append(f"| {r['mechanism']} | {r['broken'] or 'correct'} | {r['runs']} | {r['claimed_epsilon']:.3f} | "
                     f"{r['epsilon_lower_bound']:.3f} | {_fmt(t['epsilon_estimate'])} | "
                     f"{t['false_positives']}/{t['negatives']} | {t['false_negatives']}/{t['positives']} | "
                     f"{'**violation**' if r['violation'] else 'consistent'} |")
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
