import csv
import dataclasses
import json
import math

import numpy as np
import pytest
from matplotlib.image import imread
from typer.testing import CliRunner

from dpnc.algorithms.menart.proximal import proximal_point_rounds, statistical_inner_steps
from dpnc.cli import app
from dpnc.privacy.budget import rho_to_epsilon
from dpnc_reproduce import protocol
from dpnc_reproduce.kl_rates import claims as kl_claims
from dpnc_reproduce.kl_rates import report
from dpnc_reproduce.kl_rates import run as exp
from dpnc_reproduce.kl_rates.experiment import EXPERIMENT

TINY = exp.KLRatesConfig(
    objectives=("quadratic", "power-1.5"),
    dims=(1, 4),
    nsrs=(1e4, 1e5, 1e6),
    high_dims=(400,),
    high_nsrs=(1e2, 1e3, 1e4),
    prox_objectives=("power-3",),
    prox_samples=(50, 100),
    max_inner_iters=20,
    rhos=(0.01,),
    rho_sweep_n=10**6,
    rho_sweep_dim=4,
    seeds=2,
    inner_check_n=50,
    inner_check_seeds=2,
)


@pytest.fixture(scope="module")
def tiny():
    return protocol.run_experiment(EXPERIMENT, TINY, progress=False, workers=1)


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


def test_slopes_are_fitted_beside_the_predictions(tiny):
    rows = report.slopes(tiny.rows)
    spider = [s for s in rows if s["algorithm"] == "kl-spider"]
    assert {(s["objective"], s["d"]) for s in spider} == {
        (o, d) for o in TINY.objectives for d in TINY.dims
    }
    for s in rows:
        assert s["points"] >= 2 and s["x_min"] < s["x_max"]
        assert math.isfinite(s["slope"]) and math.isfinite(s["bound_slope"])
        assert s["predicted"] == pytest.approx(report.predicted(s["regime"], s["kappa"]))
    for s in spider:
        assert s["predicted"] == -s["kappa"] and s["slope"] < -0.5  # the excess falls with n√ρ
    assert any(s["algorithm"] == "proximal-point" and s["predicted"] == -3.0 for s in rows)
    assert any(s["algorithm"] == "adaptive-gd" and s["regime"] == "κ/2" for s in rows)


def test_outputs_are_written(tiny, tmp_path):
    paths = protocol.write(tiny, tmp_path, "dpnc reproduce kl-rates (test)")
    assert {p.name for p in paths} == {
        "rows.csv",
        "slopes.csv",
        "fig_excess.png",
        "fig_grad_norm.png",
        "result.json",
        "summary.md",
    }
    slopes = report.slopes(tiny.rows)
    for name, rows in (
        ("rows.csv", [dataclasses.asdict(r) for r in tiny.rows]),
        ("slopes.csv", slopes),
    ):
        with (tmp_path / name).open() as f:  # every row, every column, as the run made it
            assert list(csv.DictReader(f)) == [
                {k: "" if v is None else str(v) for k, v in r.items()} for r in rows
            ]
    # the whole result, compared as JSON text (NaN-safe), and read back into typed rows
    saved = json.loads((tmp_path / "result.json").read_text())
    assert json.dumps(saved) == json.dumps(
        {**tiny.to_json(), "command": "dpnc reproduce kl-rates (test)"}
    )
    again = protocol.read(EXPERIMENT, tmp_path / "result.json")
    assert again.rows == tiny.rows and again.config == TINY
    assert json.dumps([c.to_json() for c in again.claims]) == json.dumps(
        [c.to_json() for c in tiny.claims]
    )  # NaN
    # fig_excess: a 4.3 × 3.5-inch panel per (algorithm, objective); fig_grad_norm: 4.6 × 3.8 per
    # objective of adaptive GD; 100 dpi
    algorithms, objectives = {r.algorithm for r in tiny.rows}, {r.objective for r in tiny.rows}
    assert imread(tmp_path / "fig_excess.png").shape[:2] == (
        round(3.5 * len(algorithms) * 100),
        round(4.3 * len(objectives) * 100),
    )
    adaptive = {
        r.objective for r in tiny.rows if r.algorithm.startswith("adaptive-gd") and r.sweep == "n"
    }
    assert imread(tmp_path / "fig_grad_norm.png").shape[:2] == (
        round(3.8 * 100),
        round(4.6 * len(adaptive) * 100),
    )
    summary = (tmp_path / "summary.md").read_text()
    for text in (
        "dpnc reproduce kl-rates (test)",
        "## Claims",
        "Fitted log-log slopes",
        "predicted",
        "Gradient norm of the output",
        "Medians over seeds",
        "every run is private",
        "constants and log factors dropped",
        "≤ Φfloor in every run (Theorem 1, w.p. ≥ 1 − β each) | yes",
        "`rows.csv`",
        f"{len(tiny.rows)} runs, 1 at a time",
    ):
        assert text in summary, text
    assert "results.csv" not in summary


def claims_of(rows) -> dict[str, bool | None]:
    return {c.statement: c.holds for c in kl_claims.check_claims(rows)}


def test_claims_are_judged_on_the_numbers(tiny):
    rows = list(tiny.rows)
    assert all(isinstance(c, protocol.Claim) for c in tiny.claims)
    assert {c.statement: c.holds for c in tiny.claims} == claims_of(
        rows
    )  # the runner's claims are these
    claims = claims_of(rows)
    assert next(ok for text, ok in claims.items() if text.startswith("every run spends at most"))
    over = [
        dataclasses.replace(r, rho_spent=r.rho * 1.01) if i == 0 else r for i, r in enumerate(rows)
    ]
    claims = claims_of(over)
    assert not next(
        ok for text, ok in claims.items() if text.startswith("every run spends at most")
    )
    assert next(ok for text, ok in claims.items() if text.startswith("every iterate"))
    outside = [
        dataclasses.replace(r, region_distance=8.0) if r.algorithm == "proximal-point" else r
        for r in rows
    ]
    claims = claims_of(outside)
    assert not next(ok for text, ok in claims.items() if text.startswith("every iterate"))
    worse = [
        dataclasses.replace(r, excess=2 * r.bound) if r.algorithm == "kl-spider" else r
        for r in rows
    ]
    claims = claims_of(worse)
    assert not next(ok for text, ok in claims.items() if "≤ Φfloor" in text)


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


def test_cli_runs_a_tiny_grid(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "reproduce",
            "kl-rates",
            "--algorithms",
            "kl-spider,proximal-point",
            "--objectives",
            "quadratic",
            "--dims",
            "1",
            "--nsrs",
            "1e4,1e5",
            "--prox-samples",
            "50,100",
            "--max-inner-iters",
            "10",
            "--inner-check-n",
            "0",
            "--seeds",
            "1",
            "--reproducible",
            "--seed",
            "7",
            "--workers",
            "1",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Fitted log-log slopes" in result.output
    assert (
        tmp_path / "summary.md"
    ).read_text() in result.output  # the summary printed is the one written
    assert "NOT PRIVATE" in (tmp_path / "summary.md").read_text()
    saved = json.loads((tmp_path / "result.json").read_text())
    cfg = saved["config"]
    assert (cfg["algorithms"], cfg["objectives"], cfg["dims"], cfg["nsrs"]) == (
        ["kl-spider", "proximal-point"],
        ["quadratic"],
        [1],
        [1e4, 1e5],
    )
    assert (cfg["prox_samples"], cfg["max_inner_iters"], cfg["seeds"]) == ([50, 100], 10, 1)
    assert (cfg["reproducible"], cfg["seed"]) == (True, 7)
    assert sorted(
        (r["algorithm"], r["objective"], r["d"], r["n"]) for r in saved["rows"] if r["sweep"] == "n"
    ) == [
        ("kl-spider", "quadratic", 1, 10**4),
        ("kl-spider", "quadratic", 1, 10**5),
        ("proximal-point", "power-3", 1, 50),
        ("proximal-point", "power-3", 1, 100),
    ]  # one seed per setting
    with (tmp_path / "rows.csv").open() as f:  # the rows file holds the same runs
        records = list(csv.DictReader(f))
    assert [(r["algorithm"], int(r["n"]), float(r["excess"])) for r in records] == [
        (r["algorithm"], r["n"], r["excess"]) for r in saved["rows"]
    ]
    assert all(r["private"] == "False" for r in records)
    assert {p.name for p in tmp_path.iterdir()} == {
        "rows.csv",
        "slopes.csv",
        "result.json",
        "summary.md",
        "fig_excess.png",
    }  # no adaptive GD: no gradient figure


def spider_rows(excess, seeds: int = 3, algorithm: str = "proximal-point") -> list:
    """Constructed n-sweep rows of one (algorithm, power-1.5, d = 1): excess(x, seed) at x = 10^4 …
    10^8."""
    return [
        exp.KLRow(
            algorithm=algorithm,
            objective="power-1.5",
            kappa=1.5,
            gamma=1 / 3,
            L0=3.0,
            d=1,
            n=int(x),
            rho=1.0,
            nsr=x,
            x=x,
            sweep="n",
            seed=s,
            excess=excess(x, s),
            grad_norm=0.1,
            F0=1.0,
            start_excess=0.7,
            bound=1.0 * x**-1.4,
            bound_dim_term=None,
            bound_noise_term=None,
            regime="κ/2" if algorithm in exp.ADAPTIVE else "κ",
            grad_bound=None,
            lower_bound=None,
            steps=1,
            queries=1,
            rho_spent=1.0,
            epsilon=7.8,
            private=True,
            sensitivity="declared",
            region_distance=0.9,
            radius=1.0,
            seconds=0.0,
        )
        for x in (1e4, 1e5, 1e6, 1e7, 1e8)
        for s in range(seeds)
    ]


def rate_claim(rows) -> protocol.Claim:
    (claim,) = [
        c
        for c in kl_claims.check_claims(rows)
        if "falls no slower than the theorem's upper bound" in c.statement
    ]
    assert "[" in claim.evidence  # the interval is printed
    if claim.status:  # KL-Spider: judged on its explicit bound, the slope rule's reading kept
        assert "the slope rule alone:" in claim.evidence and claim.holds is None
    else:
        assert ("Reason:" in claim.evidence) == (
            claim.holds is not True
        )  # a reason wherever it does not hold
    return claim


def rate_verdict(rows) -> bool | None:
    return rate_claim(rows).holds


def test_rate_claims_are_judged_one_sided_against_the_bound():
    # the bound falls as x^-1.4 over these points: a slope ≤ −1.4 + tol holds, one wholly above it
    # fails; the proximal point's bound keeps its log factors, so its tolerance is 0 (the old single
    # RATE_TOL = 0.1 let −1.35 hold)
    xs = [1e4, 1e5, 1e6, 1e7, 1e8]
    assert report.tolerance("proximal-point", "κ", 1.0, 1, xs).value == 0.0
    assert report.tolerance("kl-spider", "κ", 1.0, 1, xs).value == 0.0
    assert rate_verdict(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.45)) is True
    assert (
        rate_verdict(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-2.0)) is True
    )  # faster: consistent
    assert (
        rate_verdict(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.35)) is False
    )  # 0.05 slower: no tolerance
    assert (
        rate_verdict(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.2)) is False
    )  # slower, interval clear
    assert rate_verdict(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-0.9)) is False
    assert (
        rate_verdict(spider_rows(lambda x, s: x ** (-1.0, -1.5, -2.1)[s])) is None
    )  # seeds disagree: straddles
    assert rate_verdict(spider_rows(lambda x, s: x**-1.5, seeds=1)) is None  # one seed: no interval
    assert (
        rate_verdict(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.1, algorithm="adaptive-gd"))
        is False
    )


def test_adaptive_gd_tolerance_is_its_dropped_logs_over_the_grid():
    # Thm 4 drops ℓ = ln(n√ρ/β): in the κ/2 regime its term carries ℓ^{κ/2}; the tolerance is that
    # factor's least-squares slope over the grid (n√ρ = x√d), computed here with numpy
    xs, d, kappa = [1e4, 1e5, 1e6, 1e7, 1e8], 100, 1.0
    ell = np.log(np.array(xs) * math.sqrt(d) / report.BETA)
    expected = kappa / 2 * np.polyfit(np.log(xs), np.log(ell), 1)[0]
    tol = report.tolerance("adaptive-gd", "κ/2", kappa, d, xs)
    assert tol.value == pytest.approx(expected) and 0 < tol.value < 0.1
    # an excess falling 0.03 slower than its x^-1.4 bound holds within that tolerance, not without
    # it
    rows = spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.37, algorithm="adaptive-gd")
    assert rate_verdict(rows) is True
    assert (
        rate_verdict(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.37)) is False
    )  # proximal: tolerance 0


def test_kl_spider_is_judged_on_its_explicit_bound_not_its_slope():
    # Theorem 1 gives Φfloor with explicit constants and logs: its claim "excess ≤ Φfloor in every
    # run" is the test; the slope claim is reported with the rule's reading, unjudged
    claim = rate_claim(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.2, algorithm="kl-spider"))
    assert claim.holds is None and claim.status == report.EXPLICIT["kl-spider"]
    assert (
        claim.facts["slope_rule"] == 0 and claim.facts["slope_low"] > claim.facts["limit"]
    )  # the rule: fails


def test_reasons_are_measured_on_the_rows():
    """The numbers a rate claim's reasons are read from are its facts (the evidence renders
    them)."""
    slower = rate_claim(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-0.9))
    assert (
        slower.holds is False and slower.facts["slope_low"] > slower.facts["limit"]
    )  # wholly above the bound
    assert slower.facts["slope"] == pytest.approx(-0.9, abs=1e-9) and slower.facts[
        "limit"
    ] == pytest.approx(-1.4)
    # the excess pinned near F(w0) − F* = 0.7 at the lowest x: a floor from the start (median seed:
    # 0.5·1.05/0.7)
    floor = rate_claim(spider_rows(lambda x, s: min(0.5, 1e5 * x**-1.0) * (1 + 0.05 * s)))
    assert (
        floor.facts["start_share_low"] == pytest.approx(0.75)
        and floor.facts["start_share_low"] > report.FLOOR
    )
    assert (
        "a floor from the excess at x0" in floor.evidence
    )  # the reason is named where its fact says so
    # capped inner solves (recorded per row) are counted: 5 points × 3 seeds
    capped = [
        dataclasses.replace(r, inner_steps=10, inner_rule=40)
        for r in spider_rows(lambda x, s: (1 + 0.05 * s) * x**-0.9)
    ]
    assert rate_claim(capped).facts["capped_runs"] == 15 and slower.facts["capped_runs"] == 0
    straddles = rate_claim(spider_rows(lambda x, s: x ** (-1.0, -1.5, -2.1)[s]))
    assert straddles.holds is None
    assert straddles.facts["slope_low"] < straddles.facts["limit"] < straddles.facts["slope_high"]


def check_rows(ratio: float, seeds: int = 12) -> list:
    """Constructed inner-check rows at κ = 3: the 16× arm's excess is ``ratio`` times the 1× arm's
    (with seed noise); an optimisation-limited excess would fall 16^1.5 = 64×, the claim's midpoint
    is 8×."""
    base = spider_rows(
        lambda x, s: 1e-4 * (1 + 0.3 * math.sin(s)), seeds=seeds, algorithm="proximal-point"
    )
    return [
        dataclasses.replace(
            r,
            sweep="inner",
            kappa=3.0,
            inner_factor=f,
            inner_steps=int(10 * f),
            inner_rule=int(10 * f),
            excess=r.excess * (ratio if f > 1 else 1.0) * (1 + 0.2 * math.cos(3 * r.seed + f)),
        )
        for r in base
        if r.x == 1e4
        for f in (1.0, 16.0)
    ]


def test_inner_check_claim():
    def verdict(rows):
        (claim,) = [
            c for c in kl_claims.check_claims(rows) if "the inner steps do not limit" in c.statement
        ]
        return claim.holds

    assert verdict(check_rows(1.0)) is True
    assert verdict(check_rows(1 / 8)) is None  # below no change, but not beyond the midpoint
    assert (
        verdict(check_rows(1 / 64)) is False
    )  # what an optimisation-limited excess would do at κ = 3


def test_the_proximal_points_rate_needs_its_inner_check():
    """A fast slope whose low-n points may be optimisation-limited (the inner check has no signal)
    does not hold."""
    fast = spider_rows(lambda x, s: (1 + 0.05 * s) * x**-2.0, algorithm="proximal-point")
    assert rate_verdict(fast + check_rows(1.0)) is True
    limited = rate_claim(fast + check_rows(1 / 8))
    assert limited.holds is None and math.isnan(
        limited.facts["inner_check"]
    )  # the inner check: no signal
    assert limited.facts["slope_rule"] == 1  # the slope alone would hold
    assert rate_verdict(fast + check_rows(1 / 64)) is False


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
