"""The reproductions name their paper methods by registry name, keep their options as data, and read
results written under the old names."""

import dataclasses
import json
import math

import pytest

from dpnc.algorithms.base import Setting
from dpnc.algorithms.klt import KornowskiLiuTalwar
from dpnc.algorithms.registry import ALGORITHMS
from dpnc.privacy.budget import Budget
from dpnc.problems.base import Constants
from dpnc_reproduce import method_table, nonsmooth_compare, nonsmooth_rates, protocol, utility
from dpnc_reproduce.method_table import Entry, algorithm_name, check_table, rename, rename_text
from dpnc_reproduce.nonsmooth_rates import claims as rates_claims
from dpnc_reproduce.nonsmooth_rates import run as rates
from dpnc_reproduce.utility import config as utility_config
from dpnc_reproduce.utility import methods as utility_methods

BASELINES = {
    "dp-gd",
    "dp-sgd",
    "dp-gd-tuned",
    "dp-sgd-tuned",
    "opacus",
}  # the utility's hand-set and tuned runners


@pytest.mark.parametrize(
    "table", [utility_methods.PAPER_METHODS, rates.METHODS], ids=["utility", "nonsmooth"]
)
def test_every_paper_method_is_named_by_its_registry_entry(table):
    for name, entry in table.items():
        assert algorithm_name(name) == entry.algorithm and entry.algorithm in ALGORITHMS, name
        assert entry.constructor in method_table.CONSTRUCTORS and entry.label


def test_every_method_a_reproduction_offers_is_a_paper_method_or_a_named_baseline():
    assert set(utility_config.METHODS) == BASELINES | set(utility_methods.PAPER_METHODS)
    assert set(utility_methods.methods(utility.FULL)) == set(utility_config.METHODS)
    assert set(rates.NAMES) == set(rates.METHODS) and set(nonsmooth_compare.FULL.methods) == set(
        rates.METHODS
    )
    # the old names are gone, and each maps to a current one
    for renamed, offered in (
        (utility_config.RENAMED, utility_config.METHODS),
        (rates.RENAMED, rates.NAMES),
    ):
        assert not set(renamed) & set(offered) and set(renamed.values()) <= set(offered)


def test_a_table_whose_name_is_not_its_registry_entry_is_refused():
    with pytest.raises(ValueError, match="registry name"):
        check_table({"ztc": Entry("zo-o2nc", "practical", {}, "old name")})
    with pytest.raises(ValueError, match="registry name"):
        check_table({"magic": Entry("magic", "practical", {}, "no such algorithm")})
    with pytest.raises(ValueError, match="constructor"):
        check_table({"klt": Entry("klt", "paper", {}, "no such constructor")})


def test_goldstein_targets_are_read_off_the_registry():
    targets = {name for name in utility_config.METHODS if utility_methods.targets_goldstein(name)}
    assert targets == {
        "zo-o2nc",
        "klt",
        "klt:first-order",
        "klt:multi-pass",
        "zo-o2nc:theory",
        "klt:theory",
        "klt:first-order:theory",
    }


def test_rules_are_computed_and_a_none_leaves_the_default():
    entry = Entry(
        "klt",
        "from_theory",
        {"oracle": "first-order", "m": lambda at: None, "smoothing": lambda at: at},
        "a test entry",
    )
    assert method_table.options(entry, 0.25) == {"oracle": "first-order", "smoothing": 0.25}


def test_the_nonsmooth_settings_are_the_tables():
    """``klt:first-order`` and ``klt:multi-pass`` take the theorem's m capped at d (the library's
    max_directions), which is what the factories computed before the table (the theorem's m, then
    min(m, d))."""
    setting = Setting(Constants(L0=1.0), 4_000, 8, gap=1.0)
    budget = Budget(2.0, 1e-6)
    for name, extra in (("klt:first-order", {}), ("klt:multi-pass", {"max_steps": 100})):
        oracle = rates.METHODS[name].options["oracle"]
        uncapped = KornowskiLiuTalwar.from_theory(
            setting, budget, smoothing=0.1, oracle=oracle, **extra
        )
        by_hand = KornowskiLiuTalwar.from_theory(
            setting, budget, smoothing=0.1, oracle=oracle, **extra, m=min(uncapped.m, 8)
        )
        assert rates.parameters(rates.FULL, name, n=4_000, d=8, epsilon=2.0, alpha=0.1) == by_hand
    assert uncapped.m == 19  # multi-pass: the cap binds here (m = 8), so the comparison tests it
    # the library's cap, on the zeroth-order oracle (variance-matching m = 18 here): η is the capped
    # m's
    capped = KornowskiLiuTalwar.from_theory(setting, budget, smoothing=0.1, max_directions=5)
    assert (
        capped == KornowskiLiuTalwar.from_theory(setting, budget, smoothing=0.1, m=5)
        and capped.m == 5
    )
    assert KornowskiLiuTalwar.from_theory(setting, budget, smoothing=0.1, max_directions=50).m == 18


def test_rename_replaces_whole_names_only():
    renamed = {**utility_config.RENAMED, **rates.RENAMED}
    text = (
        "klt-zo-theory, ztc-naive and ztc; matched:klt-fo; log₂(n_ztc/n_klt-zo); ZTC; kl-spider; klt-zone; "
        "dpnc.algorithms.ztc"
    )
    assert rename_text(text, renamed) == (
        "klt:theory, zo-o2nc:naive and zo-o2nc; matched:klt:first-order; "
        "log₂(n_zo-o2nc/n_klt); ZTC; kl-spider; klt-zone; dpnc.algorithms.ztc"
    )


def _old_nonsmooth_record() -> tuple[dict, protocol.Result]:
    """A nonsmooth-rates result under the current names, and the same record as written before the
    rename (28 Nov 2026)."""
    config = dataclasses.replace(
        rates.QUICK, methods=("zo-o2nc", "klt"), seeds=2, n_start=100, n_max=800
    )
    rows = tuple(
        rates.RateRow(
            "radial",
            method,
            d,
            config.base_epsilon,
            config.base_alpha,
            seed,
            n,
            n,
            2 * d * n,
            d,
            10,
            2,
            0.5 if n >= target else 1.0,
            0.7,
            0.3,
            0.6,
            0.6,
            0.8,
            1.0,
            1.5,
            1.2,
            0.01,
        )
        for method, target in (("zo-o2nc", 400), ("klt", 200))
        for d in config.dims
        for seed in range(2)
        for n in (100, 200, 400, 800)
    )
    claims = tuple(rates_claims.comparison_claims(rows, config))
    new = protocol.Result(
        nonsmooth_rates.EXPERIMENT,
        config,
        rows,
        claims,
        60.0,
        1,
        {},
        notes=("grid trimmed",),
        rejudged=(
            {
                "date": "2026-11-27",
                "rule": "a rule",
                "declared_after": True,
                "changes": [
                    {
                        "statement": claims[0].statement,
                        "new_statement": claims[0].statement,
                        "old": "removed",
                        "new": protocol.verdict(claims[0].holds),
                        "old_evidence": "before",
                        "new_evidence": claims[0].evidence,
                    }
                ],
                "previous": [c.to_json() for c in claims],
            },
        ),
    )
    back = {new_name: old for old, new_name in rates.RENAMED.items()}
    command = "dpnc reproduce nonsmooth-rates --methods zo-o2nc,klt"
    as_written = json.loads(json.dumps({**new.to_json(), "command": command}))
    old = rename(as_written, back)
    old["notes"] = old["notes"][:-1]  # the old file had no note of the renaming
    return old, new


def test_an_old_result_reads_under_the_new_names(tmp_path):
    old, new = _old_nonsmooth_record()
    text = json.dumps(old)
    assert (
        '"ztc"' in text and "n_ztc/n_klt-zo" in text and "zo-o2nc" not in text
    )  # the old names, as written
    path = tmp_path / "result.json"
    path.write_text(text)
    result = protocol.read(nonsmooth_rates.EXPERIMENT, path)
    assert (
        result.config == new.config and result.rows == new.rows
    )  # every number as written, the names new
    assert [(c.statement, c.holds, c.evidence) for c in result.claims] == [
        (c.statement, c.holds, c.evidence) for c in new.claims
    ]
    assert (
        result.notes[0] == "grid trimmed"
        and "ztc → zo-o2nc" in result.notes[1]
        and len(result.notes) == 2
    )
    # the verdict before the last re-judging still pairs with its claim
    summary = protocol.summary(result, "dpnc reproduce nonsmooth-rates")
    assert (
        "(was removed before re-judging)" in summary
        and "n_ztc" not in summary
        and "n_zo-o2nc/n_klt" in summary
    )
    # re-judging reads it too, and the judged claims are the stored ones (same rows, same rule)
    assert [
        c.holds
        for c in nonsmooth_rates.EXPERIMENT.claims(result.rows, result.config)
        if c.statement in {s.statement for s in new.claims}
    ] == [c.holds for c in new.claims]


def test_a_current_result_is_not_changed_by_the_upgrade():
    old, new = _old_nonsmooth_record()
    current = json.loads(json.dumps({**new.to_json(), "command": "c"}))
    assert nonsmooth_rates.EXPERIMENT.upgrade(current) is current
    assert nonsmooth_compare.EXPERIMENT.upgrade(old)["config"]["methods"] == ["zo-o2nc", "klt"]


def test_an_old_utility_record_gets_the_registry_names():
    row = dataclasses.asdict(
        utility.UtilityRow(
            "l1-regression",
            "klt-fo",
            "dpnc",
            1.0,
            100,
            0,
            "ok",
            0.1,
            0.2,
            math.nan,
            1.0,
            0,
            10,
            0.9,
            True,
            "",
        )
    )
    data = {
        "experiment": "utility",
        "config": {"methods": ["dp-gd", "klt-fo", "kl-spider-theory"]},
        "rows": [row, {**row, "method": "matched:klt-fo", "family": "matched"}],
        "claims": [
            {
                "statement": "klt-fo: within 1.5× of the hand-set baselines",
                "holds": None,
                "evidence": "dp-gd 1.2×",
                "status": "",
            }
        ],
        "notes": [],
        "machine": {"processor": "ztc"},
    }
    up = utility.EXPERIMENT.upgrade(data)
    assert up["config"]["methods"] == ["dp-gd", "klt:first-order", "kl-spider:theory"]
    assert [r["method"] for r in up["rows"]] == ["klt:first-order", "matched:klt:first-order"]
    assert up["rows"][0]["excess_risk"] == 0.1 and up["claims"][0]["statement"].startswith(
        "klt:first-order: within"
    )
    assert up["machine"] == {"processor": "ztc"} and up["notes"] == [
        "Method names as in the registry since 28 Nov 2026 (re-rendered from result.json, nothing re-run): "
        "kl-spider-theory → kl-spider:theory, klt-fo → klt:first-order."
    ]


@pytest.mark.parametrize(
    "make, old, new",
    [
        (
            lambda m: dataclasses.replace(utility_config.QUICK, methods=m),
            "kl-adaptive",
            "adaptive-gd",
        ),
        (lambda m: dataclasses.replace(rates.QUICK, methods=m), "klt-zo", "klt"),
    ],
)
def test_an_old_method_name_is_refused_with_its_new_name(make, old, new):
    with pytest.raises(ValueError, match=f"'{old}' is now '{new}'"):
        make((old,))
