import csv
import dataclasses
import json

import pytest
from matplotlib.image import imread
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.experiments import nonsmooth_compare as exp
from dpnc.experiments import protocol
from dpnc.experiments.report import privacy_claim as privacy
from tests.experiments.written import assert_written

TINY = exp.CompareConfig(dims=(2, 3), samples=(100, 300), epsilons=(2.0,), seeds=1, n_test=200,
                         certificate_samples=4, multipass_max_steps=5, max_directions=2)


@pytest.fixture(scope="module")
def tiny():
    return protocol.run_experiment(exp.EXPERIMENT, TINY, progress=False, workers=1)


def test_tiny_run_writes_every_output(tiny, tmp_path):
    rows = tiny.rows
    assert len(rows) == TINY.runs == 2 * 2 * 4
    assert [(r.d, r.epsilon, r.n, r.method, r.seed) for r in rows] == exp.EXPERIMENT.tasks(TINY)   # in task order
    assert {r.method for r in rows} == set(exp.METHODS)
    for r in rows:
        assert isinstance(r, exp.CompareRow) and all(v is not None for v in dataclasses.asdict(r).values())
        assert r.samples_used <= r.n and r.evaluations > 0 and r.seconds >= 0
        assert 0 <= r.certified_grad_norm <= r.grad_norm + 1e-12 <= 1 + 1e-12  # F is 1-Lipschitz
        assert r.epsilon_zcdp == pytest.approx(r.epsilon, rel=1e-9)  # every method spends exactly its ρ
        # dp-accounting's RDP uses discrete orders: a hair above the target at some ε
        assert r.epsilon_pld <= r.epsilon and r.epsilon_rdp <= r.epsilon * (1 + 1e-3)
        assert r.theory_rate > 0 and r.excess_loss >= -0.1
        if r.method != "ztc":
            assert r.m <= TINY.max_directions and r.m == min(r.default_m, TINY.max_directions)
        if r.method == "klt-multipass":
            assert r.T <= TINY.multipass_max_steps and r.samples_used == r.n
            assert r.population_gap > 0
    command = "dpnc reproduce nonsmooth-compare (test)"
    summary = assert_written(tiny, tmp_path, command, {"fig_vs_n.png", "fig_vs_d.png"})
    for name, panels in (("fig_vs_n.png", TINY.dims), ("fig_vs_d.png", TINY.samples)):   # 4.6 × 3.8 in, 120 dpi
        assert imread(tmp_path / name).shape[:2] == (round(3.8 * 120), round(4.6 * len(panels) * 120))
    for text in ("KLT single-pass ZO certifies less than ZTC", "Fitted log-log slopes", "| d | ε | method | n |",
                 "against d, per n", "Cost per method", "every run is (ε, δ_DP)-DP"):
        assert text in summary


def seeded(rows, seeds: int, value):
    """``rows`` repeated over ``seeds`` seeds, each certificate set to ``value(row, seed)``."""
    return [dataclasses.replace(r, seed=s, certified_grad_norm=value(r, s)) for s in range(seeds) for r in rows]


def verdict_of(rows, text: str) -> bool | None:
    return next(c.holds for c in exp.check_claims(rows, TINY) if text in c.statement)


def test_claims_report_what_was_measured(tiny):
    claims = exp.check_claims(tiny.rows, TINY)
    assert list(tiny.claims) == claims   # the runner's claims are the experiment's
    privacy_holds = [c.holds for c in claims if "(ε, δ_DP)-DP" in c.statement]
    assert privacy_holds == [True]
    # one seed: no interval, so no comparison or trend holds or fails, whatever the numbers
    assert all(c.holds is None for c in claims if "(ε, δ_DP)-DP" not in c.statement)
    zo_vs_ztc = "single-pass ZO certifies less than ZTC"
    # three seeds, ZTC clearly worse in every cell: holds; clearly better: fails; overlapping: no signal
    worse = seeded(tiny.rows, 3, lambda r, s: 0.5 + 0.01 * s if r.method == "ztc" else 0.1 + 0.01 * s)
    assert verdict_of(worse, zo_vs_ztc) is True
    better = seeded(tiny.rows, 3, lambda r, s: 0.1 + 0.01 * s if r.method == "ztc" else 0.5 + 0.01 * s)
    assert verdict_of(better, zo_vs_ztc) is False
    mixed = seeded(tiny.rows, 3, lambda r, s: (0.1, 0.5, 0.3)[s] if r.method == "ztc" else (0.5, 0.1, 0.31)[s])
    assert verdict_of(mixed, zo_vs_ztc) is None
    # the trend in n: per-seed slopes; c·n^-1/2 in every seed falls, c·n^+1/2 rises, ±n^∓1 by seed has no signal
    falls = "ZTC variance-reduced (Thm 4.9): the certified ‖∂F‖_2α falls with n"
    assert verdict_of(seeded(tiny.rows, 3, lambda r, s: (1 + 0.1 * s) * r.n ** -0.5), falls) is True
    assert verdict_of(seeded(tiny.rows, 3, lambda r, s: (1 + 0.1 * s) * r.n ** 0.5), falls) is False
    assert verdict_of(seeded(tiny.rows, 3, lambda r, s: r.n ** (-1.0, 1.0, 0.0)[s]), falls) is None


def test_the_privacy_claim_without_every_accountant_has_no_signal_or_fails(tiny):
    """dp-accounting's PLD gives no ε at a huge ε (e.g. 10⁹): such runs cannot make the claim hold."""
    rows = list(tiny.rows)
    assert privacy(rows).holds is True
    one_missing = [dataclasses.replace(rows[0], epsilon_pld=None), *rows[1:]]
    claim = privacy(one_missing)
    assert claim.holds is None and "1 run(s) without an ε from every accountant" in claim.evidence
    over = [*one_missing[:-1], dataclasses.replace(rows[-1], epsilon_pld=2 * rows[-1].epsilon)]
    assert privacy(over).holds is False
    assert privacy([dataclasses.replace(r, epsilon_pld=None) for r in rows]).holds is None


def test_a_subset_of_methods_runs_and_summarises(tmp_path):
    config = dataclasses.replace(TINY, dims=(2,), samples=(100,), methods=("klt-fo",))
    result = protocol.run_experiment(exp.EXPERIMENT, config, progress=False, workers=2)
    assert [r.method for r in result.rows] == ["klt-fo"]
    protocol.write(result, tmp_path, "test")
    assert "—" in (tmp_path / "summary.md").read_text()  # no slope from a single n or d


def test_config_and_cli_validate(tmp_path):
    with pytest.raises(ValueError, match="methods must be among"):
        exp.CompareConfig(methods=("other",))
    with pytest.raises(ValueError, match="seeds must be"):
        exp.CompareConfig(seeds=0)
    with pytest.raises(ValueError, match="alpha"):
        exp.CompareConfig(alpha=0.0)
    with pytest.raises(ValueError, match="max_directions"):
        exp.CompareConfig(max_directions=0)
    with pytest.raises(ValueError, match=r"samples must be an integer >= 4; got 2"):
        exp.CompareConfig(samples=(2,))
    with pytest.raises(ValueError, match="n_test must be"):
        exp.CompareConfig(n_test=0)
    runner = CliRunner()
    result = runner.invoke(app, ["reproduce", "nonsmooth-compare", "--samples", "a,b", "--out", str(tmp_path)])
    assert result.exit_code != 0 and "comma-separated int" in result.output
    result = runner.invoke(app, ["reproduce", "nonsmooth-compare", "--methods", "ztc,other", "--out", str(tmp_path)])
    assert result.exit_code != 0 and "methods must be among" in result.output
    result = runner.invoke(app, ["reproduce", "nonsmooth-compare", "--help"])
    assert result.exit_code == 0
    for option in ("--full", "--quick", "--alpha", "--multipass-max-steps", "--max-directions", "--methods"):
        assert option in result.output


def test_quick_is_the_default_and_full_is_larger():
    assert exp.EXPERIMENT.QUICK is exp.QUICK and exp.EXPERIMENT.FULL == exp.CompareConfig()
    assert exp.QUICK.runs < exp.FULL.runs
    assert set(exp.QUICK.methods) == set(exp.METHODS)


def test_cli_runs_a_tiny_grid(tmp_path):
    result = CliRunner().invoke(app, ["reproduce", "nonsmooth-compare", "--dims", "2", "--samples", "100,200",
                                      "--epsilons", "4", "--seeds", "1", "--multipass-max-steps", "3",
                                      "--max-directions", "2", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Medians over seeds" in result.output
    assert (tmp_path / "summary.md").read_text() in result.output   # the summary printed is the one written
    saved = json.loads((tmp_path / "result.json").read_text())
    cfg = saved["config"]
    assert (cfg["dims"], cfg["samples"], cfg["epsilons"], cfg["seeds"]) == ([2], [100, 200], [4.0], 1)
    assert (cfg["multipass_max_steps"], cfg["max_directions"]) == (3, 2)
    assert sorted((r["n"], r["method"]) for r in saved["rows"]) == sorted(
        (n, m) for n in (100, 200) for m in exp.METHODS)   # one run per (n, method)
    assert all(r["T"] <= 3 for r in saved["rows"] if r["method"] == "klt-multipass")
    assert all(r["m"] <= 2 for r in saved["rows"] if r["method"] != "ztc")
    with (tmp_path / "rows.csv").open() as f:   # the rows file holds the same runs
        assert [(int(r["n"]), r["method"], int(r["T"])) for r in csv.DictReader(f)] == [
            (r["n"], r["method"], r["T"]) for r in saved["rows"]]
