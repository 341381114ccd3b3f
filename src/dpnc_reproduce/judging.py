"""A claim as one object: declared before the run, judged after, its texts from one formatter.

A :class:`ClaimSpec` holds what a claim says (a statement template), how it is declared (direction,
threshold, test) and how its evidence reads (an evidence template); its :meth:`~ClaimSpec.judge`
returns :class:`Verdict`\\ s (holds, facts), and :func:`render` writes the statement and the
evidence from those facts. An experiment lists its specs once (``Experiment.specs``): the declared
table and the judged table are both made from them, so a declaration and its judgement cannot
drift. The statistics behind a verdict stay in :mod:`dpnc_reproduce.claims`."""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dpnc_reproduce.protocol import Claim, Declared

Template = str | tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    """One judged claim (or one part of a family): ``holds`` True, False or None (no signal);
    ``facts``, the numbers it was read from (stored with the claim, asserted by tests); ``words``,
    the text the templates read besides the numbers (names, formulas; not stored); ``status``: why
    the claim is not judged at all, when that is not "no signal"."""

    holds: bool | None
    facts: Mapping[str, float] = field(default_factory=dict)
    words: Mapping[str, Any] = field(default_factory=dict)
    status: str = ""


def _names(piece: str) -> set[str]:
    """The fields a template piece reads (``{x:.2f}`` and ``{x[0]}`` read ``x``)."""
    return {
        name.split(".")[0].split("[")[0]
        for _, name, _, _ in string.Formatter().parse(piece)
        if name
    }


def render(template: Template, fields: Mapping[str, Any]) -> str:
    """The one formatter of claim texts: each piece of ``template`` formatted with ``fields``
    (``str.format`` syntax), a piece reading a field that ``fields`` lacks left out — so a part of
    the evidence shows exactly where the judge recorded what it reads."""
    pieces = (template,) if isinstance(template, str) else template
    return "".join(p.format_map(fields) for p in pieces if _names(p) <= fields.keys())


@dataclass(frozen=True)
class ClaimSpec:
    """A claim (or a family of claims, one per part) as one declarative object.

    Attributes:
        statement: the judged statement, a template filled from the verdict's facts and words (a
            family names its part there, e.g. ``"proximal point on {objective}: …"``).
        evidence: the evidence template (pieces whose fields are missing are left out, :func:`render`).
        direction, threshold, test: how it is declared before the run (:class:`Declared`).
        declared: the declared statement where it differs from ``statement`` (a family's, before its
            parts are known); by default ``statement`` itself.
        judge_rows: the judge, rows → verdicts (one per part; none: nothing to judge on these rows).
        declares: False for claims declared by another spec (e.g. the per-task parts of claims on
            every task): they have no declaration of their own.
    """

    statement: Template
    evidence: Template
    direction: str
    threshold: str
    test: str
    judge_rows: Callable[[Sequence], Sequence[Verdict]]
    declared: str = ""
    declares: bool = True

    def declaration(self) -> Declared | None:
        """The claim as declared before the run (None where another spec declares it)."""
        if not self.declares:
            return None
        text = self.declared or render(self.statement, {})
        return Declared(text, self.direction, self.threshold, self.test)

    def judge(self, rows: Sequence) -> list[Verdict]:
        """The verdicts on ``rows``: one per part of the family, none where the rows hold none."""
        return list(self.judge_rows(rows))

    def claims(self, rows: Sequence) -> list[Claim]:
        """The judged claims on ``rows``, their texts rendered from the verdicts (:func:`judged`)."""
        return [judged(self, v) for v in self.judge(rows)]


def on_view(specs: Sequence[ClaimSpec], view: Callable[[Sequence], Any]) -> list[ClaimSpec]:
    """``specs`` whose judges read a view of the rows (the runs paired, the intervals fitted)
    rather than the rows: each is judged on ``view(rows)``, computed once for the rows last judged
    and shared by all of them."""
    last: dict = {}

    def viewed(rows: Sequence) -> Any:
        if last.get("rows") is not rows:
            last.update(rows=rows, view=view(rows))
        return last["view"]

    def bound(spec: ClaimSpec) -> ClaimSpec:
        return dataclasses.replace(spec, judge_rows=lambda rows: spec.judge_rows(viewed(rows)))

    return [bound(spec) for spec in specs]


def judged(spec: ClaimSpec, verdict: Verdict) -> Claim:
    """A verdict as the claim every table shows: statement and evidence rendered from its facts and
    words by :func:`render`."""
    fields = {**verdict.facts, **verdict.words}
    return Claim(
        render(spec.statement, fields),
        verdict.holds,
        render(spec.evidence, fields),
        verdict.status,
        MappingProxyType(dict(verdict.facts)),
    )


def every_run(
    statement: Template,
    evidence: Template,
    ratio: Callable[[Any], float],
    *,
    names: tuple[str | None, str] = ("max_ratio", "runs_over"),
    select: Callable[[Any], bool] = lambda r: True,
    slack: float = 0.0,
    facts: Callable[[Sequence], Mapping[str, float]] = lambda rows: {},
    words: Callable[[Sequence], Mapping[str, Any]] = lambda rows: {},
    threshold: str = "1",
    declared: str = "",
) -> ClaimSpec:
    """A claim that a per-run ratio stays at most 1 (up to ``slack``) in every selected run: holds
    when no run is over, fails otherwise; nothing to judge without a selected run. Facts: ``runs``
    and, named by ``names``, the largest ratio (a name None: not recorded) and the count of runs
    over, then ``facts(rows)`` (of the selected rows); words: ``runs_within`` (the runs not over)
    and ``words(rows)``."""
    largest, counted = names

    def judge(rows: Sequence) -> list[Verdict]:
        mine = [r for r in rows if select(r)]
        if not mine:
            return []
        above = sum(ratio(r) > 1 + slack for r in mine)
        numbers = {"runs": len(mine), counted: above}
        if largest is not None:
            numbers[largest] = max(map(ratio, mine))
        text = {"runs_within": len(mine) - above, **words(mine)}
        return [Verdict(not above, {**numbers, **facts(mine)}, text)]

    return ClaimSpec(statement, evidence, "at most", threshold, "every run", judge, declared)
