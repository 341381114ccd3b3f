import csv
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
