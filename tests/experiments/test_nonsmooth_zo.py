import csv

import pytest
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.experiments import nonsmooth_zo as exp

TINY = exp.NonsmoothConfig(dims=(2, 3), samples=(200, 800), epsilons=(1.0, 8.0), seeds=2, n_test=500,
                           certificate_samples=8)


def test_tiny_run_writes_every_output(tmp_path):
    result = exp.run_experiment(TINY, progress=False, workers=1)
    rows = result["rows"]
    assert len(rows) == TINY.runs == 2 * 2 * 2 * 2 * 2
    for r in rows:
        assert r["samples_used"] <= r["M"]
        assert 0 <= r["certified_grad_norm"] <= r["grad_norm"] + 1e-12 <= 1 + 1e-12  # F is 1-Lipschitz
        assert r["epsilon_zcdp"] == pytest.approx(r["epsilon"], rel=1e-9)
        assert r["epsilon_pld"] <= r["epsilon_rdp"] <= r["epsilon"] * (1 + 1e-4)
        assert r["distance"] >= 0 and r["excess_loss"] >= -0.05  # x* minimises the population F, not the test F
    paths = exp.write_outputs(result, tmp_path, "dpnc reproduce nonsmooth-zo (test)")
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
    with (tmp_path / "results.csv").open() as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    summary = (tmp_path / "summary.md").read_text()
    assert "variance-reduced oracle certifies a smaller" in summary and "| d | ε | method | M |" in summary


def test_processes_and_a_single_process_give_the_same_runs():
    """Public randomness is per run, so only the secret noise differs between the two (at ε = 10⁹, nothing)."""
    config = exp.NonsmoothConfig(dims=(2,), samples=(200,), epsilons=(1e9,), seeds=2, n_test=200,
                                 certificate_samples=4)
    one = exp.run_experiment(config, progress=False, workers=1)["rows"]
    two = exp.run_experiment(config, progress=False, workers=2)["rows"]
    for a, b in zip(one, two):
        assert (a["method"], a["seed"]) == (b["method"], b["seed"])
        assert a["distance"] == pytest.approx(b["distance"], abs=1e-4)  # σ ≈ 1e-8: only the noise differs


def test_config_and_cli_validate(tmp_path):
    with pytest.raises(ValueError, match="methods must be among"):
        exp.NonsmoothConfig(methods=("other",))
    with pytest.raises(ValueError, match="seeds must be"):
        exp.NonsmoothConfig(seeds=0)
    result = CliRunner().invoke(app, ["reproduce", "nonsmooth-zo", "--samples", "a,b", "--out", str(tmp_path)])
    assert result.exit_code != 0 and "comma-separated int" in result.output


def test_cli_runs_a_tiny_grid(tmp_path):
    result = CliRunner().invoke(app, ["reproduce", "nonsmooth-zo", "--dims", "2", "--samples", "100,300",
                                      "--epsilons", "4", "--seeds", "1", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "summary.md").exists() and "Medians over seeds" in result.output
