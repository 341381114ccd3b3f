"""A claim as one object (:mod:`dpnc_reproduce.judging`): its declaration and its judged texts
come from the same spec, rendered by one formatter."""

from __future__ import annotations

from types import SimpleNamespace

from dpnc_reproduce import judging, protocol


def test_render_formats_each_piece_and_leaves_out_a_piece_whose_field_is_missing():
    template = ("{runs} runs", "; max {ratio:.2f}", "; reason: {reason}")
    assert judging.render(template, {"runs": 3, "ratio": 0.5}) == "3 runs; max 0.50"
    assert judging.render(template, {"runs": 3, "ratio": 2, "reason": "x"}) == (
        "3 runs; max 2.00; reason: x"
    )
    assert judging.render("plain", {}) == "plain"


def _spec() -> judging.ClaimSpec:
    return judging.every_run(
        "every run spends at most its budget",
        ("max spent / budget = {max_ratio:.3f} over {runs} runs", "; {runs_over} over"),
        lambda r: r.spent / r.budget,
        select=lambda r: r.budget > 0,
        words=lambda rows: {"first": rows[0].spent},
    )


def test_every_run_holds_fails_and_judges_nothing_without_a_run():
    spec = _spec()
    ok = [SimpleNamespace(spent=1.0, budget=2.0), SimpleNamespace(spent=2.0, budget=2.0)]
    (claim,) = spec.claims(ok)
    assert claim.holds is True and dict(claim.facts) == {
        "runs": 2,
        "runs_over": 0,
        "max_ratio": 1.0,
    }
    assert claim.evidence == "max spent / budget = 1.000 over 2 runs; 0 over"
    (bad,) = spec.claims([*ok, SimpleNamespace(spent=3.0, budget=2.0)])
    assert bad.holds is False and bad.facts["runs_over"] == 1 and bad.facts["max_ratio"] == 1.5
    assert spec.claims([SimpleNamespace(spent=1.0, budget=0.0)]) == []


def test_the_declaration_and_the_judged_claim_share_their_statement():
    spec = _spec()
    declared = spec.declaration()
    (claim,) = spec.claims([SimpleNamespace(spent=1.0, budget=2.0)])
    assert declared == protocol.Declared(claim.statement, "at most", "1", "every run")


def test_a_family_declares_once_and_names_each_part_when_judged():
    spec = judging.ClaimSpec(
        "{name}: above zero",
        "estimate {estimate:.1f}",
        "above",
        "0",
        "sign",
        lambda rows: [
            judging.Verdict(r.value > 0, {"estimate": r.value}, {"name": r.name}) for r in rows
        ],
        declared="each part: above zero",
    )
    rows = [SimpleNamespace(name="a", value=1.0), SimpleNamespace(name="b", value=-1.0)]
    assert spec.declaration().statement == "each part: above zero"
    assert [(c.statement, c.holds, c.evidence) for c in spec.claims(rows)] == [
        ("a: above zero", True, "estimate 1.0"),
        ("b: above zero", False, "estimate -1.0"),
    ]


class _Tiny(protocol.Experiment):
    name = "tiny"

    def specs(self, config):
        return [_spec()]


def test_an_experiment_declares_and_judges_its_specs_by_default():
    rows = [SimpleNamespace(spent=1.0, budget=2.0)]
    experiment = _Tiny()
    assert experiment.declare(None) == [_spec().declaration()]
    assert experiment.claims(rows, None) == _spec().claims(rows)


def test_specs_on_a_view_share_it_once_per_row_set():
    views = []

    def view(rows):
        views.append(len(rows))
        return sum(rows)

    def spec(name):
        return judging.ClaimSpec(
            name + " {total}",
            "",
            "",
            "",
            "",
            lambda total: [judging.Verdict(total > 0, words={"total": total})],
        )

    specs = judging.on_view([spec("a"), spec("b")], view)
    rows = [1, 2]
    assert [c.statement for s in specs for c in s.claims(rows)] == ["a 3", "b 3"]
    assert views == [2]
    assert specs[0].claims([-1])[0].holds is False and views == [2, 1]
