"""dpnc reproduce utility: a tiny grid runs and writes its files; the claims on constructed rows."""

import dataclasses
import json
import math

import pytest
import torch
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.privacy import Budget
from dpnc_reproduce import protocol
from dpnc_reproduce.utility import claims as utility_claims
from dpnc_reproduce.utility import config as utility
from dpnc_reproduce.utility import report
from dpnc_reproduce.utility import run as exp
from dpnc_reproduce.utility.config import FULL, QUICK, UtilityConfig, instance
from dpnc_reproduce.utility.experiment import EXPERIMENT
from dpnc_reproduce.utility.methods import (
    MATCHED,
    REFERENCE,
    compute,
    matched_dpsgd,
    methods,
    opacus_runner,
)
from tests.reproduce.written import assert_written

METHODS = ("dp-gd", "dp-sgd", "dp-sgd-tuned", "dpzero", "adaptive-gd", "klt:first-order")
TINY = UtilityConfig(
    problems=("logistic-cancer", "l1-regression"),
    methods=METHODS,
    epsilons=(4.0,),
    samples=(20, 60),
    seeds=2,
    gd_steps=10,
    sgd_epochs=1.0,
    klt_mp_steps=5,
    reference_steps=20,
    n_test=100,
    certificate_samples=8,
    rim=1,
)


@pytest.fixture(scope="module")
def tiny():  # the slow tier only (the tests that use it are marked): one tiny run of the whole grid
    return protocol.run_experiment(EXPERIMENT, TINY, progress=False, workers=1)


@pytest.mark.slow
def test_tiny_run_writes_every_output(tiny, tmp_path):
    rows = tiny.rows
    tasks = EXPERIMENT.tasks(TINY)
    matched = {"dpzero", "klt:first-order"} | {
        "adaptive-gd"
    }  # one compute-matched DP-SGD per paper method that ran
    assert len(tasks) == 2 * 2 * 2
    assert (
        len(rows) == len(tasks) * (1 + len(METHODS)) + 2 * 2 * 3 + 2 * 2 * 2
    )  # adaptive-gd: logistic only
    assert {r.method for r in rows if r.family == "matched"} == {MATCHED + m for m in matched}
    for r in rows:
        if r.method == REFERENCE:
            assert r.excess_risk == 0 and math.isinf(r.epsilon_spent) and not r.private
        elif r.problem == "l1-regression" and r.method == "adaptive-gd":  # needs L1: not applicable
            assert r.status.startswith("n/a") and math.isnan(r.excess_risk)
        else:
            assert r.status == "ok" and r.private, r
            assert r.epsilon_spent <= r.epsilon * (1 + 1e-6)
            assert r.excess_risk >= -1e-6 and r.evaluations + r.gradients > 0
            # a private tuning's time would reveal its secret K: withheld (NaN); every other run is
            # timed
            assert math.isnan(r.seconds) if r.method.endswith("-tuned") else r.seconds >= 0
            assert (
                (0 <= r.test_accuracy <= 1)
                if r.problem.startswith("logistic")
                else math.isnan(r.test_accuracy)
            )
            assert r.start_gap > 0
            # the Goldstein certificate: the O2NC methods and their matched baselines on the
            # nonsmooth problems only
            certified = r.problem == "l1-regression" and r.method in (
                "klt:first-order",
                MATCHED + "klt:first-order",
            )
            assert (
                (r.certificate >= 0 and r.start_certificate > 0)
                if certified
                else math.isnan(r.certificate)
            ), r
    summary = assert_written(
        tiny, tmp_path, "dpnc reproduce utility (test)", {"fig_excess_vs_n.png"}
    )
    for text in (
        "dpzero: within 1.5× of the hand-set baselines",
        "dpzero: within 1.5× of the privately tuned",
        "klt:first-order: within 1.5× of its compute-matched DP-SGD",
        "klt:first-order: its Goldstein certificate",
        "dpzero: closes at least 50% of the start's gap",
        "spends at most the target ε",
        "Declared before the run",
        "| problem | ε | n | method |",
        "Runs that did not run",
    ):
        assert text in summary
    assert (
        "best dpnc method" not in summary and "lowest excess risk" not in summary
    )  # no best-of after the fact
    assert tiny.claims[-1].holds is True  # privacy
    assert list(tiny.declared) == EXPERIMENT.declare(TINY) and len(tiny.declared) == len(
        tiny.claims
    )


def test_compute_matched_baseline_spends_the_methods_compute():
    """matched:<m> is DP-SGD whose expected gradient evaluations T·B equal the method's compute
    (gradients + evaluations / 2), B from √n up to n so that T <= matched_max_steps."""
    config = dataclasses.replace(
        TINY, problems=("l1-regression",), methods=("dpzero", "klt:multi-pass")
    )
    rows = {r.method: r for r in EXPERIMENT.run_one(config, ("l1-regression", 4.0, 60, 0))}
    for m in ("dpzero", "klt:multi-pass"):
        cost = compute(rows[m].evaluations, rows[m].gradients)
        algorithm = matched_dpsgd(
            config, instance(config, "l1-regression", 60, 0), Budget(4.0, 1e-6), cost
        )
        assert (
            algorithm.steps * algorithm.batch_size == pytest.approx(cost, rel=0.02)
            or algorithm.steps == 1
        )
        assert algorithm.steps <= config.matched_max_steps or algorithm.batch_size == 60
        assert rows[MATCHED + m].status == "ok" and rows[MATCHED + m].epsilon_spent <= 4.0 * (
            1 + 1e-6
        )
    assert (
        rows["klt:multi-pass"].evaluations == 2 * config.klt_mp_steps * 60 * 10
    )  # multi-pass: T·n·2m, m = d = 10


def test_dpzero_takes_its_steps_from_its_theorem():
    inst = instance(QUICK, "logistic-cancer", 200, 0)
    d, budget = inst.train.dim, Budget(4.0, 1e-6)
    algorithm = methods(QUICK)["dpzero"].factory(inst, 200, d, budget)
    lg = math.log(math.e + 4.0 / 1e-6)
    assert algorithm.steps == max(int(200 * (d + 2) * 4.0 / (4 * math.sqrt(d * lg))), 1)


def test_registry_builds_every_method_on_logistic():
    config = QUICK
    inst = instance(config, "logistic-cancer", 30, 0)
    budget = Budget(2.0, 1e-6)
    registry = methods(config)
    assert set(registry) == set(utility.METHODS)
    for name, method in registry.items():
        if method.factory is not None:
            try:
                algorithm = method.factory(inst, 30, inst.train.dim, budget)
            except (
                ValueError
            ) as error:  # a schedule with no admissible run at n = 30: a row says "n/a"
                assert name == "kl-spider" and "n must be large enough" in str(error)
                continue
            assert algorithm is not None and hasattr(algorithm, "run"), name
    assert (
        registry["opacus"].run(config, inst, budget, torch.Generator()) is None
    )  # the network only


def test_opacus_on_the_network():
    pytest.importorskip("opacus")
    config = dataclasses.replace(QUICK, reference_steps=10, sgd_epochs=1.0, hidden=2)
    inst = instance(config, "relu-cancer", 40, 0)
    out = opacus_runner(config, inst, Budget(4.0, 1e-5))
    assert out.x.shape == (inst.train.dim,) and out.gradients > 0 and not out.private
    assert 0 < out.epsilon_spent < 8  # dpnc's PLD for Opacus's (σ, q, T), calibrated by Opacus to 4


def test_command_is_registered(tmp_path):
    result = CliRunner().invoke(app, ["reproduce", "utility", "--help"])
    assert (
        result.exit_code == 0 and "--klt-mp-steps" in result.output and "--quick" in result.output
    )


# --- claims on constructed rows -------------------------------------------------------------------


def row(
    method, family, seed, excess, problem="p", epsilon=1.0, n=100, spent=1.0, private=True, gap=10.0
):
    return exp.UtilityRow(
        problem,
        method,
        family,
        epsilon,
        n,
        seed,
        "ok",
        excess,
        0.0,
        math.nan,
        0.1,
        0,
        10,
        spent,
        private,
        "",
        excess,
        gap,
    )


CONFIG = UtilityConfig(
    problems=("least-squares",),
    methods=("dp-gd", "dp-sgd", "dpzero"),
    epsilons=(1.0,),
    samples=(100,),
    seeds=10,
)


def cell(rows, yardstick="hand-set"):
    rows = [dataclasses.replace(r, problem="least-squares") for r in rows]
    (c,) = report.cells(rows, CONFIG, "dpzero", yardstick)
    return c


def jitter(seed):
    return 0.01 * (seed % 3 - 1)


def baselines(level=1.0):
    return [
        row(b, "baseline", s, level * (1 + jitter(s)))
        for s in range(10)
        for b in ("dp-gd", "dp-sgd")
    ]


def test_three_times_worse_with_tight_intervals_fails_whatever_the_progress():
    rows = baselines() + [row("dpzero", "dpnc", s, 3.0 * (1 + jitter(s + 1))) for s in range(10)]
    c = cell(rows)
    assert c["margin"] is True and c["within"] is False and c["verdict"] is False
    assert c["ratios"]["dp-gd"].estimate == pytest.approx(3.0, rel=0.02)
    claim = utility_claims.within_claim(
        [dataclasses.replace(r, problem="least-squares") for r in rows],
        CONFIG,
        "dpzero",
        "hand-set",
    )
    assert claim.holds is False and (claim.facts["parts_hold"], claim.facts["parts_fail"]) == (0, 1)
    assert claim.facts["least-squares_eps1_dp-gd_low"] > claim.facts["threshold"] == report.RATIO


def test_within_the_ratio_holds_only_past_the_progress_margin():
    rows = baselines() + [row("dpzero", "dpnc", s, 1.2 * (1 + jitter(s))) for s in range(10)]
    assert cell(rows)["verdict"] is True  # 1.2 of a gap of 10: 88 % closed
    # every method at chance (nothing closed): within 1.5× of each other, but no verdict
    at_chance = [
        dataclasses.replace(r, excess_risk=9.9 * r.excess_risk, train_loss=9.9 * r.excess_risk)
        for r in rows
    ]
    c = cell(at_chance)
    assert c["within"] is True and c["margin"] is False and c["verdict"] is None


def test_heavy_tails_are_summarised_by_the_geometric_mean():
    """One seed 100× worse moves a ratio of means by ~10×; the geometric mean of the paired ratios
    far less."""
    rows = baselines() + [
        row("dpzero", "dpnc", s, (100.0 if s == 0 else 1.0) * (1 + jitter(s))) for s in range(10)
    ]
    rows = [dataclasses.replace(r, start_gap=1000.0) for r in rows]
    assert cell(rows)["ratios"]["dp-gd"].estimate == pytest.approx(100**0.1, rel=0.02)


def test_overlapping_intervals_and_one_seed_give_no_signal():
    wide = [0.2, 2.0, 0.5, 1.5, 1.0, 0.3, 1.8, 0.9, 1.1, 1.0]
    rows = baselines() + [row("dpzero", "dpnc", s, 1.5 * wide[s]) for s in range(10)]
    assert cell(rows)["within"] is None
    one = [
        row("dp-gd", "baseline", 0, 1.0),
        row("dp-sgd", "baseline", 0, 1.0),
        row("dpzero", "dpnc", 0, 5.0),
    ]
    assert cell(one)["verdict"] is None


def test_privacy_claim_counts_only_private_runs():
    rows = [row("base", "baseline", 0, 1.0, spent=0.99), row("ours", "dpnc", 0, 1.0, spent=1.0)]
    assert utility_claims.privacy_claim(rows).holds is True
    assert (
        utility_claims.privacy_claim(
            rows + [row("x", "baseline", 0, 1.0, spent=1.5, private=False)]
        ).holds
        is True
    )
    assert (
        utility_claims.privacy_claim(rows + [row("y", "dpnc", 0, 1.0, spent=1.01)]).holds is False
    )


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="problems"):
        UtilityConfig(problems=("mnist",))
    with pytest.raises(ValueError, match="samples"):
        UtilityConfig(samples=(4,))
    assert UtilityConfig(samples=(50, 500)).sizes("logistic-cancer") == [50, 455]


# --- the synthetic problems with known minimisers -------------------------------------------------


@pytest.mark.parametrize("name", ["least-squares", "max-affine"])
def test_synthetic_problems_have_public_constants_and_exact_minimisers(name):
    config = QUICK
    first, second = instance(config, name, 70, 0), instance(config, name, 70, 1)
    for a, b in (
        (first.train.constants.L0, second.train.constants.L0),
        (first.Phi, second.Phi),
        (first.train.constants.L1, second.train.constants.L1),
        (first.train.constants.gamma, second.train.constants.gamma),
    ):
        assert a == b  # the same for every draw: not read off the data
    assert not first.classification and first.smooth == (name == "least-squares")
    for inst in (first, second):
        gap = float(inst.train.value(inst.x0) - inst.train.value(inst.reference))
        assert 0 < gap <= inst.Phi  # Φ bounds F(x0) − F(x̂)
        around = inst.reference + 1e-3 * torch.randn(
            20, inst.train.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(0)
        )
        assert (
            inst.train.value(around) >= inst.train.value(inst.reference) - 1e-12
        ).all()  # x̂ minimises
    assert instance(config, "least-squares", 70, 0).train.constants.L1 == 1.0


def test_new_problems_run_every_applicable_method():
    config = dataclasses.replace(
        TINY,
        problems=("least-squares", "max-affine"),
        methods=("dp-gd", "dp-gd-tuned", "adaptive-gd", "proximal-point", "zo-o2nc", "klt"),
    )
    for problem in config.problems:
        rows = EXPERIMENT.run_one(config, (problem, 4.0, 60, 0))
        for r in rows[1:]:
            if problem == "max-affine" and r.method in (
                "adaptive-gd",
                "proximal-point",
            ):  # need L1: not applicable
                assert r.status.startswith("n/a"), r
            else:
                assert (
                    r.status == "ok"
                    and r.epsilon_spent <= 4.0 * (1 + 1e-6)
                    and r.excess_risk >= -1e-9
                ), r


def test_full_grid_trims():
    full = FULL
    assert full.seeds >= 5 and set(full.epsilons) == {1.0, 4.0}
    assert full.sizes("least-squares") == [1000] and full.sizes("logistic-cancer") == [455]
    assert full.sizes("logistic-digits") == [1000] and full.largest_only_epsilons == (1.0,)
    tasks = EXPERIMENT.tasks(full)
    assert {e for p, e, n, s in tasks if p == "logistic-digits"} == {1.0} and len(tasks) == (
        5 * 2 + 1
    ) * 5


def test_a_private_tuning_publishes_no_wall_time():
    """The time of a random-stopping tuning grows with its secret number of runs K: the tuned
    baselines' rows carry no time (NaN), every other method's does."""
    config = dataclasses.replace(
        TINY, problems=("l1-regression",), methods=("dp-gd", "dp-gd-tuned")
    )
    rows = {r.method: r for r in EXPERIMENT.run_one(config, ("l1-regression", 4.0, 60, 0))}
    assert rows["dp-gd-tuned"].status == "ok" and math.isnan(rows["dp-gd-tuned"].seconds)
    assert rows["dp-gd"].seconds > 0


@pytest.mark.slow
def test_supersede_keeps_the_replaced_results_verdicts(tiny, tmp_path):
    protocol.write(tiny, tmp_path, "dpnc reproduce utility (test)")
    old = {
        "claims": [
            {"statement": report.PRIVACY, "holds": True, "evidence": "old privacy"},
            {
                "statement": "l1, ε = 1: the best dpnc method (klt-fo) is within 1.5× of the best baseline",
                "holds": False,
                "evidence": "2.97×",
            },
        ],
        "rejudged": [{"date": "2026-11-25", "rule": "earlier", "changes": [], "previous": []}],
        "command": "old command",
        "seconds": 60.0,
    }
    protocol.supersede(
        EXPERIMENT, tmp_path, old, "re-run", date="2026-11-26", notes=("grid trimmed",)
    )
    again = protocol.read(EXPERIMENT, tmp_path / "result.json")
    assert [r["rule"] for r in again.rejudged] == ["earlier", "re-run"]
    assert json.dumps([c.to_json() for c in again.claims]) == json.dumps(
        [c.to_json() for c in tiny.claims]
    )  # NaN
    changes = {c["statement"]: c for c in again.rejudged[-1]["changes"]}
    assert changes[report.PRIVACY]["new"] == "yes" and changes[report.PRIVACY]["old"] == "yes"
    best = changes["l1, ε = 1: the best dpnc method (klt-fo) is within 1.5× of the best baseline"]
    assert best["old"] == "**no**" and best["new"] == "removed" and best["old_evidence"] == "2.97×"
    summary = (tmp_path / "summary.md").read_text()
    assert (
        "grid trimmed" in summary
        and "2.97×" in summary
        and again.rejudged[-1]["previous_command"] == "old command"
    )
