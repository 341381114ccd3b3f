import csv
import dataclasses
import json

import pytest
from matplotlib.image import imread
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.experiments import nonsmooth_zo as exp
from dpnc.experiments import protocol
from tests.experiments.written import assert_written

TINY = exp.NonsmoothConfig(dims=(2, 3), samples=(200, 800), epsilons=(1.0, 8.0), seeds=2, n_test=500,
                           certificate_samples=8)


def test_tiny_run_writes_every_output(tmp_path):
    result = protocol.run_experiment(exp.EXPERIMENT, TINY, progress=False, workers=1)
    rows = result.rows
    assert len(rows) == TINY.runs == 2 * 2 * 2 * 2 * 2
    assert [(r.d, r.epsilon, r.M, r.method, r.seed) for r in rows] == exp.EXPERIMENT.tasks(TINY)   # in task order
    for r in rows:
        assert isinstance(r, exp.ZORow)
        assert r.samples_used <= r.M
        assert 0 <= r.certified_grad_norm <= r.grad_norm + 1e-12 <= 1 + 1e-12  # F is 1-Lipschitz
        assert r.epsilon_zcdp == pytest.approx(r.epsilon, rel=1e-9)
        assert r.epsilon_pld <= r.epsilon_rdp <= r.epsilon * (1 + 1e-4)
        assert r.distance >= 0 and r.excess_loss >= -0.05  # x* minimises the population F, not the test F
    command = "dpnc reproduce nonsmooth-zo (test)"
    summary = assert_written(result, tmp_path, command, {"fig_certified.png", "fig_loss.png"})
    for name in ("fig_certified.png", "fig_loss.png"):   # one 4.6 × 3.8-inch panel per dimension, 120 dpi
        assert imread(tmp_path / name).shape[:2] == (round(3.8 * 120), round(4.6 * len(TINY.dims) * 120))
    assert "variance-reduced oracle certifies a smaller" in summary and "| d | ε | method | M |" in summary
    assert "every run is (ε, δ_DP)-DP" in summary


def test_processes_and_a_single_process_give_the_same_runs():
    """Public randomness is per run, so only the secret noise differs between the two (at ε = 10⁹, nothing)."""
    config = exp.NonsmoothConfig(dims=(2,), samples=(200,), epsilons=(1e9,), seeds=2, n_test=200,
                                 certificate_samples=4)
    one = protocol.run_experiment(exp.EXPERIMENT, config, progress=False, workers=1).rows
    two = protocol.run_experiment(exp.EXPERIMENT, config, progress=False, workers=2).rows
    assert len(one) == len(two) == 4
    for a, b in zip(one, two):
        assert (a.method, a.seed) == (b.method, b.seed)
        assert a.distance == pytest.approx(b.distance, abs=1e-4)  # σ ≈ 1e-8: only the noise differs


def test_config_and_cli_validate(tmp_path):
    with pytest.raises(ValueError, match="methods must be among"):
        exp.NonsmoothConfig(methods=("other",))
    with pytest.raises(ValueError, match="seeds must be"):
        exp.NonsmoothConfig(seeds=0)
    with pytest.raises(ValueError, match="smoothing must be"):
        exp.NonsmoothConfig(smoothing=0.0)
    result = CliRunner().invoke(app, ["reproduce", "nonsmooth-zo", "--samples", "a,b", "--out", str(tmp_path)])
    assert result.exit_code != 0 and "comma-separated int" in result.output


def test_cli_runs_a_tiny_grid(tmp_path):
    result = CliRunner().invoke(app, ["reproduce", "nonsmooth-zo", "--dims", "2", "--samples", "100,300",
                                      "--epsilons", "4", "--seeds", "1", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Medians over seeds" in result.output
    assert (tmp_path / "summary.md").read_text() in result.output   # the summary printed is the one written
    saved = json.loads((tmp_path / "result.json").read_text())
    cfg = saved["config"]
    assert (cfg["dims"], cfg["samples"], cfg["epsilons"], cfg["seeds"]) == ([2], [100, 300], [4.0], 1)
    assert sorted((r["M"], r["method"]) for r in saved["rows"]) == sorted(
        (M, m) for M in (100, 300) for m in cfg["methods"])   # one run per (M, method)
    with (tmp_path / "rows.csv").open() as f:   # the rows file holds the same runs
        assert [(int(r["M"]), r["method"]) for r in csv.DictReader(f)] == [(r["M"], r["method"]) for r in saved["rows"]]


def test_quick_is_the_default_and_full_is_larger():
    assert exp.EXPERIMENT.QUICK is exp.QUICK and exp.EXPERIMENT.FULL == exp.NonsmoothConfig()
    assert exp.QUICK.runs < exp.FULL.runs
    assert set(exp.QUICK.methods) == set(exp.METHODS)


def test_claims_need_an_interval_over_seeds():
    """The claims on constructed rows: hold, fail or have no signal as the per-seed numbers say."""
    base = [exp.ZORow(method=m, d=d, epsilon=e, seed=s, samples_used=M, evaluations=1, clipped=0, beyond_radius=0,
                      certified_grad_norm=0.3, grad_norm=0.5, excess_loss=0.1, distance=1.0, epsilon_zcdp=e,
                      epsilon_rdp=e, epsilon_pld=e, seconds=0.0, M=M, rho=1.0, T=1, K=1, B1=1, B2=1, m=1, sigma=1.0,
                      theory_bound=M ** -0.5)
            for d in TINY.dims for e in TINY.epsilons for M in TINY.samples for m in exp.METHODS for s in range(3)]

    def claims(value):
        rows = [dataclasses.replace(r, certified_grad_norm=value(r)) for r in base]
        return {c.statement.split(":")[0]: c.holds for c in exp.check_claims(rows, TINY)}

    vr_better = ("at the largest M = 800, the variance-reduced oracle certifies a smaller ‖∂F‖_2δ than the naive one "
                 "(spec §5.17)")
    falls = "variance-reduced + tree (Alg. 4–5)"
    # M^-1/2 for both, naive twice as large: both fall, VR better
    held = claims(lambda r: (1 + 0.05 * r.seed) * (2 if r.method == "naive" else 1) * r.M ** -0.5)
    assert held[vr_better] is True and held[falls] is True and held["naive (Alg. 6)"] is True
    # rising certificates, VR twice as large: both claims fail
    failed = claims(lambda r: (1 + 0.05 * r.seed) * (2 if r.method != "naive" else 1) * r.M ** 0.5)
    assert failed[vr_better] is False and failed[falls] is False
    # seeds bimodal (~0 or 0.3, as measured): the slopes' interval is wide, no signal
    bimodal = claims(lambda r: 1e-16 if (r.seed, r.M) in ((0, 800), (1, 200)) else 0.3)
    assert bimodal[falls] is None and bimodal[vr_better] is None
    # one seed: no interval, so no signal however clear the numbers
    one = [r for r in base if r.seed == 0]
    rows = [dataclasses.replace(r, certified_grad_norm=(2 if r.method == "naive" else 1) * r.M ** -0.5) for r in one]
    assert {c.holds for c in exp.check_claims(rows, TINY)[:-1]} == {None}
