"""dpnc reproduce utility: a tiny grid runs and writes its files; the claims on constructed rows."""

import dataclasses
import math

import pytest
import torch
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.experiments import protocol
from dpnc.experiments import utility as exp
from dpnc.experiments import utility_report as report
from dpnc.privacy import Budget
from tests.experiments.written import assert_written

METHODS = ("dp-gd", "dp-sgd", "dp-sgd-tuned", "dpzero", "kl-adaptive", "klt-fo")
TINY = exp.UtilityConfig(problems=("logistic-cancer", "l1-regression"), methods=METHODS, epsilons=(4.0,),
                         samples=(20, 60), seeds=2, gd_steps=10, sgd_epochs=1.0, dpzero_steps=50, reference_steps=20,
                         n_test=100)


@pytest.fixture(scope="module")
def tiny():
    return protocol.run_experiment(exp.EXPERIMENT, TINY, progress=False, workers=1)


def test_tiny_run_writes_every_output(tiny, tmp_path):
    rows = tiny.rows
    tasks = exp.EXPERIMENT.tasks(TINY)
    assert len(tasks) == 2 * 2 * 2 and len(rows) == len(tasks) * (1 + len(METHODS))
    for r in rows:
        if r.method == exp.REFERENCE:
            assert r.excess_risk == 0 and math.isinf(r.epsilon_spent) and not r.private
        elif r.problem == "l1-regression" and r.method == "kl-adaptive":   # needs L1: not applicable
            assert r.status.startswith("n/a") and math.isnan(r.excess_risk)
        else:
            assert r.status == "ok" and r.private, r
            assert r.epsilon_spent <= r.epsilon * (1 + 1e-6)
            assert r.excess_risk >= -1e-6 and r.evaluations + r.gradients > 0
            # a private tuning's time would reveal its secret K: withheld (NaN); every other run is timed
            assert math.isnan(r.seconds) if r.method.endswith("-tuned") else r.seconds >= 0
            assert (0 <= r.test_accuracy <= 1) if r.problem.startswith("logistic") else math.isnan(r.test_accuracy)
    summary = assert_written(tiny, tmp_path, "dpnc reproduce utility (test)", {"fig_excess_vs_n.png"})
    for text in ("has the lowest excess risk", "within 1.5× of the best privately tuned baseline",
                 "spends at most the target ε",
                 "| problem | ε | n | method |", "Runs that did not run"):
        assert text in summary
    assert tiny.claims[-1].holds is True     # privacy


def test_registry_builds_every_method_on_logistic():
    config = exp.QUICK
    inst = exp.instance(config, "logistic-cancer", 30, 0)
    budget = Budget(2.0, 1e-6)
    registry = exp.methods(config)
    assert set(registry) == set(exp.METHODS)
    for name, method in registry.items():
        if method.factory is not None:
            try:
                algorithm = method.factory(inst, 30, inst.train.dim, budget)
            except ValueError as error:          # a schedule with no admissible run at n = 30: a row says "n/a"
                assert name == "kl-spider" and "n must be large enough" in str(error)
                continue
            assert algorithm is not None and hasattr(algorithm, "run"), name
    assert registry["opacus"].run(config, inst, budget, torch.Generator()) is None   # the network only


def test_opacus_on_the_network():
    pytest.importorskip("opacus")
    config = dataclasses.replace(exp.QUICK, reference_steps=10, sgd_epochs=1.0, hidden=2)
    inst = exp.instance(config, "relu-cancer", 40, 0)
    out = exp.opacus_runner(config, inst, Budget(4.0, 1e-5))
    assert out.x.shape == (inst.train.dim,) and out.gradients > 0 and not out.private
    assert 0 < out.epsilon_spent < 8          # dpnc's PLD for Opacus's (σ, q, T), calibrated by Opacus to 4


def test_command_is_registered(tmp_path):
    result = CliRunner().invoke(app, ["reproduce", "utility", "--help"])
    assert result.exit_code == 0 and "--dpzero-steps" in result.output and "--quick" in result.output


# --- claims on constructed rows ----------------------------------------------------------------------------


def row(method, family, seed, excess, problem="p", epsilon=1.0, n=100, spent=1.0, private=True):
    return exp.UtilityRow(problem, method, family, epsilon, n, seed, "ok", excess, 0.0, math.nan, 0.1, 0, 10, spent,
                          private, "")


FAMILIES = {"base": "baseline", "ours": "dpnc", "other": "dpnc"}


def values(rows):
    return report.by_seed(rows, "p", 1.0, 100)


def jitter(seed):
    return 0.001 * (seed % 3 - 1)


def test_twice_worse_with_tight_intervals_fails_the_ratio_claim():
    rows = [row("base", "baseline", s, 1.0 + jitter(s)) for s in range(10)]
    rows += [row("ours", "dpnc", s, 2.0 + jitter(s + 1)) for s in range(10)]
    claim = report.baseline_claim(values(rows), FAMILIES, "p")
    assert claim.holds is False and "2.00×" in claim.evidence
    winner = report.winner_claim(values(rows), "p")
    assert winner.holds is True and "base has the lowest" in winner.statement


def test_within_the_ratio_with_tight_intervals_holds():
    rows = [row("base", "baseline", s, 1.0 + jitter(s)) for s in range(10)]
    rows += [row("ours", "dpnc", s, 1.2 + jitter(s)) for s in range(10)]
    rows += [row("other", "dpnc", s, 3.0) for s in range(10)]          # the best dpnc method is the one judged
    claim = report.baseline_claim(values(rows), FAMILIES, "p")
    assert claim.holds is True and "(ours)" in claim.statement


def test_overlapping_intervals_give_no_signal():
    wide = [0.0, 2.0, 0.5, 1.5, 1.0, 0.2, 1.8, 0.9, 1.1, 1.0]
    rows = [row("base", "baseline", s, 1.0 + wide[s]) for s in range(10)]
    rows += [row("ours", "dpnc", s, 1.05 + wide[(s + 5) % 10]) for s in range(10)]
    assert report.winner_claim(values(rows), "p").holds is None
    rows = [row("base", "baseline", s, 1.0 + wide[s]) for s in range(10)]
    rows += [row("ours", "dpnc", s, 2.0 + wide[(s + 5) % 10]) for s in range(10)]    # ratio ≈ 1.5 ± a lot
    assert report.baseline_claim(values(rows), FAMILIES, "p").holds is None


def test_one_seed_never_gives_a_signal():
    rows = [row("base", "baseline", 0, 1.0), row("ours", "dpnc", 0, 5.0)]
    assert report.winner_claim(values(rows), "p").holds is None
    assert report.baseline_claim(values(rows), FAMILIES, "p").holds is None


def test_privacy_claim_counts_only_private_runs():
    rows = [row("base", "baseline", 0, 1.0, spent=0.99), row("ours", "dpnc", 0, 1.0, spent=1.0)]
    assert report.privacy_claim(rows).holds is True
    assert report.privacy_claim(rows + [row("x", "baseline", 0, 1.0, spent=1.5, private=False)]).holds is True
    assert report.privacy_claim(rows + [row("y", "dpnc", 0, 1.0, spent=1.01)]).holds is False


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="problems"):
        exp.UtilityConfig(problems=("mnist",))
    with pytest.raises(ValueError, match="samples"):
        exp.UtilityConfig(samples=(4,))
    assert exp.UtilityConfig(samples=(50, 500)).sizes("logistic-cancer") == [50, 455]


# --- the synthetic problems with known minimisers ----------------------------------------------------------


@pytest.mark.parametrize("name", ["least-squares", "max-affine"])
def test_synthetic_problems_have_public_constants_and_exact_minimisers(name):
    config = exp.QUICK
    first, second = exp.instance(config, name, 70, 0), exp.instance(config, name, 70, 1)
    for a, b in ((first.train.constants.L0, second.train.constants.L0), (first.Phi, second.Phi),
                 (first.train.constants.L1, second.train.constants.L1),
                 (first.train.constants.gamma, second.train.constants.gamma)):
        assert a == b                                   # the same for every draw: not read off the data
    assert not first.classification and first.smooth == (name == "least-squares")
    for inst in (first, second):
        gap = float(inst.train.value(inst.x0) - inst.train.value(inst.reference))
        assert 0 < gap <= inst.Phi                      # Φ bounds F(x0) − F(x̂)
        around = inst.reference + 1e-3 * torch.randn(20, inst.train.dim, dtype=torch.float64,
                                                      generator=torch.Generator().manual_seed(0))
        assert (inst.train.value(around) >= inst.train.value(inst.reference) - 1e-12).all()   # x̂ minimises
    assert exp.instance(config, "least-squares", 70, 0).train.constants.L1 == 1.0


def test_new_problems_run_every_applicable_method():
    config = dataclasses.replace(TINY, problems=("least-squares", "max-affine"),
                                 methods=("dp-gd", "dp-gd-tuned", "kl-adaptive", "kl-proximal", "ztc", "klt-zo"))
    for problem in config.problems:
        rows = exp.EXPERIMENT.run_one(config, (problem, 4.0, 60, 0))
        for r in rows[1:]:
            if problem == "max-affine" and r.method.startswith("kl-"):     # need L1: not applicable
                assert r.status.startswith("n/a"), r
            else:
                assert r.status == "ok" and r.epsilon_spent <= 4.0 * (1 + 1e-6) and r.excess_risk >= -1e-9, r


def test_full_grid_trims():
    full = exp.FULL
    assert full.seeds >= 10 and set(full.epsilons) == {1.0, 4.0, 8.0}
    assert full.sizes("least-squares")[-1] / full.sizes("least-squares")[0] >= 100    # two decades
    assert full.sizes("logistic-digits") == [1438] and full.sizes("logistic-cancer") == [100, 455]


def test_explain_says_why_the_papers_methods_lose_from_the_rows():
    config = dataclasses.replace(TINY, problems=("least-squares",), samples=(60,))
    families = {"dp-gd": "baseline", "dp-gd-tuned": "baseline", "klt-fo": "dpnc", "ztc": "dpnc", "kl-spider": "dpnc"}
    p = "least-squares"
    rows = [row("dp-gd-tuned", "baseline", s, 0.010 + jitter(s) / 100, problem=p, epsilon=4.0, n=60)
            for s in range(10)]
    rows = [dataclasses.replace(r, note="tuned: η × 4") for r in rows]
    rows += [row("dp-gd", "baseline", s, 0.050, problem=p, epsilon=4.0, n=60) for s in range(10)]
    rows += [row("klt-fo", "dpnc", s, 0.030 + jitter(s) / 100, problem=p, epsilon=4.0, n=60) for s in range(10)]
    rows += [row("ztc", "dpnc", s, 0.090, problem=p, epsilon=4.0, n=60) for s in range(10)]
    rows += [dataclasses.replace(row("kl-spider", "dpnc", 0, math.nan, problem=p, epsilon=4.0, n=60),
                                 status="n/a: n must be large enough")]
    (line,) = report.explain(rows, config, families)
    assert "**not** within 1.5× at ε = 4 (klt-fo 3.00× dp-gd-tuned)" in line
    assert "kl-spider (n must be large enough)" in line
    assert "η × 4 (10×)" in line and "the hand-set dp-gd reached 0.05 = 1.7× klt-fo's 0.03" in line
    assert "the start x0 has excess" in line and "klt-fo closed" in line
    assert "ztc, 0.09 = 3.00× the best first-order paper method klt-fo" in line and "d = 7" in line
    assert "L0 = 3.2 is" in line
    rows = [dataclasses.replace(r, excess_risk=r.excess_risk / 10) if r.method == "klt-fo" else r for r in rows]
    assert report.explain(rows, config, families) == ["- **least-squares** (n = 60): within 1.5× at ε = 4 "
                                                      "(klt-fo 0.30× dp-gd-tuned)."]


def test_a_private_tuning_publishes_no_wall_time():
    """The time of a random-stopping tuning grows with its secret number of runs K: the tuned baselines' rows carry
    no time (NaN), every other method's does."""
    config = dataclasses.replace(TINY, problems=("l1-regression",), methods=("dp-gd", "dp-gd-tuned"))
    rows = {r.method: r for r in exp.EXPERIMENT.run_one(config, ("l1-regression", 4.0, 60, 0))}
    assert rows["dp-gd-tuned"].status == "ok" and math.isnan(rows["dp-gd-tuned"].seconds)
    assert rows["dp-gd"].seconds > 0
