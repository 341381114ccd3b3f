"""kl-rates' runs: a tiny grid records every run within its budget, in task order; reproducible
noise replays and is marked not private; the configuration and command line validate."""

import dataclasses
import math

import pytest
from typer.testing import CliRunner

from dpnc.algorithms.menart.proximal import proximal_point_rounds, statistical_inner_steps
from dpnc.cli import app
from dpnc.privacy.budget import rho_to_epsilon
from dpnc_reproduce import protocol
from dpnc_reproduce.kl_rates import run as exp
from dpnc_reproduce.kl_rates.experiment import EXPERIMENT
from tests.reproduce.kl_rates.rows import TINY


def test_tiny_run_records_every_run_within_its_budget(tiny):
    rows = tiny.rows
    assert len(rows) == len(EXPERIMENT.tasks(TINY))
    assert {r.algorithm for r in rows} == set(exp.ALGORITHMS)
    for r in rows:
        assert isinstance(r, exp.KLRow)
        # privacy: the accountant's ρ never exceeds the budget; ε is its zCDP conversion; secret
        #     noise
        assert 0 < r.rho_spent <= r.rho * (1 + 1e-9), r
        assert r.epsilon == pytest.approx(rho_to_epsilon(r.rho_spent, TINY.dp_delta))
        assert r.private is True
        assert (
            r.sensitivity == "declared"
        )  # data-free objectives: projected onto the region, nothing to clip
        assert r.region_distance <= r.radius * (1 + 1e-12), (
            r
        )  # where L0 holds (inner iterates included)
        assert r.nsr == pytest.approx(r.n * math.sqrt(r.rho))
        assert r.x == pytest.approx(r.nsr / math.sqrt(r.d))
        assert r.excess >= 0 and r.grad_norm >= 0 and r.queries > 0 and r.seconds >= 0
        assert r.bound > 0
        if r.algorithm in ("adaptive-gd+select", "proximal-point"):
            assert r.rho_spent == pytest.approx(r.rho, rel=1e-9)  # 8ρ/9 + (8ρ/9)/8; T·(ρ/T)
        if r.algorithm == "adaptive-gd+select":
            assert r.grad_bound > 0
        if r.algorithm in exp.ADAPTIVE:
            assert r.regime in ("2κ/(4−κ)", "κ/2", exp.TRIVIAL)
            assert r.bound >= max(r.bound_dim_term, r.bound_noise_term)
        kappa = r.kappa
        assert r.lower_bound is not None and (kappa <= 2 or r.d == 1)
        if (
            r.algorithm == "proximal-point"
        ):  # the rule's inner steps for the run's rounds, times the factor, capped
            T = proximal_point_rounds(
                n=r.n,
                d=r.d,
                rho=r.rho,
                gamma=r.gamma,
                kappa=r.kappa,
                L0=r.L0,
                weak_convexity=exp.objective(r.objective, r.d, r.n).constants.weak_convexity,
                F0=r.F0,
            )
            assert r.inner_rule == statistical_inner_steps(
                n=r.n, d=r.d, rho=r.rho / T, beta=TINY.beta / T, scale=r.inner_factor
            )
            assert r.inner_steps == min(r.inner_rule, TINY.max_inner_iters)
            assert r.steps == T * (r.inner_steps - 1)
            assert r.inner_factor == (1.0 if r.sweep == "n" else r.inner_factor)
        else:
            assert r.inner_steps is r.inner_rule is r.inner_factor is None
    check = [r for r in rows if r.sweep == "inner"]
    assert sorted((r.inner_factor, r.seed) for r in check) == [
        (f, s) for f in (1.0, 16.0) for s in range(2)
    ]
    assert {r.n for r in check} == {50}


def test_the_tasks_are_the_grid_in_order_each_with_its_index():
    tasks = EXPERIMENT.tasks(TINY)
    assert [t.index for t in tasks] == list(range(len(tasks)))
    assert [t.algorithm for t in tasks] == sorted(
        (t.algorithm for t in tasks), key=exp.ALGORITHMS.index
    )
    assert {(t.objective, t.d, t.n, t.rho) for t in tasks if t.sweep == "rho"} == {
        ("power-1.5", 4, 10**6, 0.01)
    }


def test_spider_excess_is_below_phi_floor_in_every_run(tiny):
    """Theorem 1: w.p. ≥ 1 − β, F(w_out) − F* ≤ Φfloor (its conservative constants make a miss very
    unlikely)."""
    spider = [r for r in tiny.rows if r.algorithm == "kl-spider"]
    assert len(spider) == 2 * 2 * 3 * 2 + 2
    for r in spider:
        assert r.excess <= r.bound, r
        assert r.excess < r.start_excess


def test_reproducible_noise_replays_and_is_marked_not_private(tmp_path):
    config = dataclasses.replace(
        TINY,
        algorithms=("kl-spider", "adaptive-gd"),
        objectives=("power-1.5",),
        dims=(4,),
        nsrs=(1e4,),
        high_dims=(),
        rhos=(),
        seeds=2,
        reproducible=True,
        seed=3,
    )
    one, two = (
        protocol.run_experiment(EXPERIMENT, config, progress=False, workers=w) for w in (1, 2)
    )
    assert [r.excess for r in one.rows] == [r.excess for r in two.rows]
    assert not any(r.private for r in one.rows)
    protocol.write(one, tmp_path, "test")
    assert "NOT PRIVATE" in (tmp_path / "summary.md").read_text()


def test_config_and_cli_validate(tmp_path):
    with pytest.raises(ValueError, match="algorithms must be among"):
        exp.KLRatesConfig(algorithms=("sgd",))
    with pytest.raises(ValueError, match="kappa <= 2"):
        exp.KLRatesConfig(objectives=("power-3",))
    with pytest.raises(ValueError, match="kappa >= 2"):
        exp.KLRatesConfig(prox_objectives=("power-1.5",))
    with pytest.raises(ValueError, match="seeds"):
        exp.KLRatesConfig(seeds=0)
    for kwargs, message in (
        (dict(nsrs=(1.0,)), r"^nsrs must be a finite number >= 10; got 1.0$"),
        (dict(dims=(0,)), r"^dims must be an integer >= 1; got 0$"),
        (dict(dims=()), r"^dims must be non-empty"),
        (dict(prox_samples=(5,)), r"^prox_samples must be an integer >= 10; got 5$"),
        (dict(high_nsrs=(math.nan,)), r"^high_nsrs must be"),
        (dict(max_inner_iters=0), r"^max_inner_iters must be"),
        (dict(max_inner_iters=1), r"^max_inner_iters must be an integer >= 2; got 1$"),
        (dict(inner_scale=0.0), r"^inner_scale must be"),
        (dict(inner_check_n=5), r"^inner_check_n must be 0 or an integer >= 10; got 5$"),
        (dict(inner_check_factor=1.0), r"^inner_check_factor must be a finite number > 1"),
        (dict(beta=1.0), r"^beta must be in \(0, 1\); got 1.0$"),
        (dict(dp_delta=0.0), r"^dp_delta must be in \(0, 1\); got 0.0$"),
        (dict(start_fraction=1.5), r"^start_fraction must be in \(0, 1\]; got 1.5$"),
        (dict(seed=-1), r"^seed must be an integer >= 0; got -1$"),
    ):
        with pytest.raises(ValueError, match=message):  # each message names the option's field
            exp.KLRatesConfig(**kwargs)
    bad = dataclasses.replace(TINY)
    object.__setattr__(
        bad, "dims", (0,)
    )  # validate() checks a config mutated past its construction
    with pytest.raises(ValueError, match="^dims must be"):
        bad.validate()
    runner = CliRunner()
    result = runner.invoke(app, ["reproduce", "kl-rates", "--nsrs", "a,b", "--out", str(tmp_path)])
    assert result.exit_code != 0 and "comma-separated float" in result.output
    result = runner.invoke(
        app, ["reproduce", "kl-rates", "--algorithms", "sgd", "--out", str(tmp_path)]
    )
    assert result.exit_code != 0 and "algorithms must be among" in result.output
    result = runner.invoke(app, ["reproduce", "kl-rates", "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    for option in (
        "--full",
        "--quick",
        "--reproducible",
        "--no-reproducible",
        "--nsrs",
        "--prox-samples",
        "--max-inner-iters",
        "--inner-scale",
        "--inner-check-n",
        "--algorithms",
        "--objectives",
        "--dims",
        "--seeds",
        "--seed",
        "--workers",
        "--out",
        "--rhos",
        "--delta",
    ):  # --dp-delta: hidden, deprecated
        assert option in result.output, option


def test_quick_is_the_default_and_full_is_larger():
    assert len(EXPERIMENT.tasks(exp.QUICK)) < len(EXPERIMENT.tasks(exp.FULL))
    assert exp.FULL == exp.KLRatesConfig() and EXPERIMENT.QUICK is exp.QUICK
    assert set(exp.QUICK.algorithms) == set(exp.ALGORITHMS)
    assert exp.QUICK.seeds >= 10 and exp.FULL.seeds >= 10 and max(exp.QUICK.prox_samples) <= 1000
    # the inner steps follow the rule in both (the cap is for tests), and both check that more would
    # not help
    for config in (exp.QUICK, exp.FULL):
        assert config.inner_scale == 1 and config.max_inner_iters >= 10**6
        assert (
            config.inner_check_n
            and config.inner_check_factor >= 4
            and config.inner_check_seeds >= 30
        )
    assert not exp.QUICK.reproducible
    assert all(
        f.metadata.get("help") for f in dataclasses.fields(exp.KLRatesConfig)
    )  # every option explained


def test_statistical_inner_steps_grow_like_the_square_of_n_sqrt_rho():
    # about n²ρ_A/(d·ℓ): 100× more n² gives about 100× more steps (ℓ grows only logarithmically)
    small, large = (
        statistical_inner_steps(n=n, d=1, rho=1 / 40, beta=0.05 / 40) for n in (1000, 10_000)
    )
    assert 70 < large / small < 100
    assert (
        statistical_inner_steps(n=1000, d=1, rho=1 / 42, beta=0.05 / 42) == 970
    )  # the summary's n = 1000
    assert (
        statistical_inner_steps(n=1000, d=10, rho=1 / 42, beta=0.05 / 42) < 970 / 5
    )  # noise in d coordinates
    assert statistical_inner_steps(n=10, d=1, rho=1e-3, beta=0.05) == 2  # never below 2
    assert statistical_inner_steps(
        n=1000, d=1, rho=1 / 42, beta=0.05 / 42, scale=4
    ) == pytest.approx(4 * 970, abs=4)
