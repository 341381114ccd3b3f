import csv
import dataclasses
import json
import math

import pytest
import torch
from matplotlib.image import imread
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.privacy import NoiseSource
from dpnc.problems.base import Objective
from dpnc_reproduce import protocol
from dpnc_reproduce.dpzero_synthetic import claims as synthetic_claims
from dpnc_reproduce.dpzero_synthetic import report
from dpnc_reproduce.dpzero_synthetic import run as exp
from dpnc_reproduce.dpzero_synthetic.experiment import EXPERIMENT

TINY = exp.SyntheticConfig(
    dims=(10, 40), steps=(10, 40), stepsizes=(0.01, 0.1, 1.0), clips=(1.0, 10.0), n=500
)
FIGURES = ("fig1_test_grad_norm.png", "fig2_train_grad_norm.png", "fig3_loss.png")


def check_outputs(result, out):
    """Every output of a tiny run, against the result it was written from."""
    rows = result.rows
    assert len(rows) == 3 * 2 * 3 * 2 * 3 * 2  # hessians·dims·methods·T·stepsizes·clips
    # task order (Hessian, d, method, T), each task's (step size × C) grid in grid order
    assert [(r.hessian, r.d, r.method, r.T, r.stepsize, r.C) for r in rows] == [
        (h, d, m, T, s, c)
        for h in exp.HESSIANS
        for d in TINY.dims
        for m in exp.METHODS
        for T in TINY.steps
        for s in TINY.stepsizes
        for c in TINY.clips
    ]
    for r in rows:
        # The paper's σ certifies exactly ε = 2 by advanced composition; exact accounting says less.
        assert r.epsilon_paper == pytest.approx(2.0, rel=1e-9)
        assert r.epsilon_pld <= r.epsilon_rdp <= 2.0 and r.private
    privacy = report.privacy_rows(rows)
    assert [p["T"] for p in privacy] == list(TINY.steps)
    assert {"rows.csv", "privacy.csv", *FIGURES, "result.json", "summary.md"} <= {
        p.name for p in out.iterdir()
    }
    for name, records in (
        ("rows.csv", [protocol.csv_record(r) for r in rows]),
        ("privacy.csv", privacy),
    ):
        with (out / name).open() as f:  # every row, every column, as the run made it
            assert list(csv.DictReader(f)) == [
                {k: "" if v is None else str(v) for k, v in r.items()} for r in records
            ]
    with (out / "rows.csv").open() as f:  # the privacy of a T is in privacy.csv, once
        assert "epsilon_rdp" not in next(csv.reader(f))
    # the whole result, compared as JSON text (NaN-safe), and read back
    data = json.loads((out / "result.json").read_text())
    assert json.dumps({k: v for k, v in data.items() if k != "command"}) == json.dumps(
        result.to_json()
    )
    assert protocol.read(EXPERIMENT, out / "result.json").rows == rows
    for name, panel_rows in zip(FIGURES, (1, 1, 2)):
        # one panel per effective rank (3) across, one per metric down: 4.2 × 3.4 inches each at 120
        # dpi
        assert imread(out / name).shape[:2] == (round(3.4 * panel_rows * 120), round(4.2 * 3 * 120))
    summary = (out / "summary.md").read_text()
    assert "DPGD-0th is always worst" in summary and "| T | σ/Δ |" in summary
    assert "every run is (ε, δ) = (2, 1e-06)-DP" in summary
    assert [c.holds for c in result.claims][-1] is True  # the privacy claim


def test_tiny_cli_run_writes_every_output(tmp_path):
    """The command runs protocol.run_experiment and protocol.write (in two worker processes): one
    tiny run checks both, and the files are exactly these."""
    args = [
        "reproduce",
        "dpzero-synthetic",
        "--dims",
        "10,40",
        "--steps",
        "10,40",
        "--stepsizes",
        "0.01,0.1,1",
        "--clips",
        "1,10",
        "--n",
        "500",
        "--workers",
        "2",
        "--out",
        str(tmp_path),
    ]
    run = CliRunner(env={"COLUMNS": "250"}).invoke(app, args)
    assert run.exit_code == 0, run.output
    assert {p.name for p in tmp_path.iterdir()} == {
        "rows.csv",
        "privacy.csv",
        *FIGURES,
        "result.json",
        "summary.md",
    }
    result = protocol.read(EXPERIMENT, tmp_path / "result.json")
    assert result.config == TINY and result.workers == 2
    assert (
        json.loads((tmp_path / "result.json").read_text())["command"].startswith("dpnc ")
        and "# DPZero synthetic experiment (Figures 1–3)" in run.output
    )
    check_outputs(result, tmp_path)


def test_grid_runs_are_independent_of_batching():
    """A grid point run inside the batch equals the same point run alone (they share the public
    seed).

    The noise draws differ between the two runs, so ε is made huge to make the noise negligible.
    """
    problem = exp.Quadratic.synthetic(15, "sqrt", n=300)
    noiseless = dataclasses.replace(TINY, epsilon=1e12, stepsizes=(0.01, 0.1), clips=(1.0, 10.0))
    batch = exp.run_grid(
        problem, "DPZero", 20, noiseless, NoiseSource.for_testing(0), hessian="sqrt"
    )
    alone = exp.run_grid(
        problem,
        "DPZero",
        20,
        dataclasses.replace(noiseless, stepsizes=(0.1,), clips=(10.0,)),
        NoiseSource.for_testing(1),
        hessian="sqrt",
    )
    match = [r for r in batch if r.stepsize == 0.1 and r.C == 10.0]
    assert len(batch) == 4 and len(match) == 1 and len(alone) == 1
    assert match[0].test_grad_norm == pytest.approx(alone[0].test_grad_norm, rel=1e-9)
    assert match[0].test_grad_norm < problem.gradient_norm(problem.train[0] * 0, "test")
    assert not alone[0].private  # seeded test noise: the report says not private


@pytest.mark.slow
def test_effective_rank_not_dimension_drives_dpzero():
    """DPZero §5.13 (docs/papers.md) on a small instance: DPGD-0th grows with d in all three modes,
    and DPZero's growth in d is much smaller with r = log d than with r = d."""
    config = exp.SyntheticConfig(
        dims=(20, 200),
        steps=(40, 160),
        stepsizes=(0.03, 0.1, 0.3, 1.0),
        clips=(1.0, 3.0, 10.0),
        n=5_000,
    )
    best = report.best_over_grid(
        protocol.run_experiment(EXPERIMENT, config, progress=False, workers=2).rows
    )
    g = {k: v["test_grad_norm"] for k, v in best.items()}
    for h in exp.HESSIANS:
        assert g[(h, 200, "DPGD-0th")] > g[(h, 20, "DPGD-0th")]
    growth = {h: g[(h, 200, "DPZero")] / g[(h, 20, "DPZero")] for h in ("identity", "inverse")}
    assert growth["inverse"] < growth["identity"] / 3


def test_full_is_the_paper_s_table_4_grid():
    assert exp.FULL == exp.SyntheticConfig() and len(EXPERIMENT.tasks(exp.FULL)) == 3 * 7 * 3 * 10
    assert exp.QUICK.dims == (20, 60, 200) and EXPERIMENT.tasks(exp.QUICK)[0] == exp.SyntheticTask(
        "identity", 20, "DPZero", 40
    )


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("dims", (20, 0), r"dims must be an integer >= 1; got 0"),
        ("steps", (), r"steps must be non-empty; got \(\)"),
        ("stepsizes", (0.1, math.nan), r"stepsizes must be a finite number >= 0; got nan"),
        ("clips", (-1.0,), r"clips must be a finite number > 0; got -1.0"),
        ("clips", (math.inf,), r"clips must be a finite number > 0; got inf"),
        ("epsilon", 0.0, r"epsilon must be a finite number > 0; got 0.0"),
        ("delta", 1.0, r"delta must be in the open interval \(0, 1\); got 1.0"),
        ("direction", "cube", r"direction must be among \('gaussian', 'sphere'\); got 'cube'"),
        ("seed", -1, r"seed must be an integer >= 0; got -1"),
    ],
)
def test_config_rejects_bad_values_at_construction(field, value, message):
    with pytest.raises(ValueError, match=message):
        exp.SyntheticConfig(**{field: value})


def test_config_rejects_unknown_names():
    with pytest.raises(
        ValueError, match=r"hessians must be among \('identity', 'sqrt', 'inverse'\); got 'diag'"
    ):
        exp.SyntheticConfig(hessians=("diag",))
    with pytest.raises(ValueError, match="methods must be among"):
        exp.SyntheticConfig(methods=("SGD",))


def constructed(norm, seeds: int = 3, dims=(20, 50, 100, 200)) -> dict:
    """:func:`report.selected`-shaped values: test (and train) ‖∇F‖ = norm(hessian, d, method, seed)
    at every cell."""
    return {
        (h, d, m, s): {"test_grad_norm": norm(h, d, m, s), "train_grad_norm": norm(h, d, m, s)}
        for h in exp.HESSIANS
        for d in dims
        for m in exp.METHODS
        for s in range(seeds)
    }


def verdicts(values) -> dict[str, bool | None]:
    return {c.statement.split(":")[0]: c.holds for c in synthetic_claims.paper_claims(values)}


RANK = {"identity": 1.0, "sqrt": 0.5, "inverse": 0.25}  # smaller r, smaller norm
SCALE = {"DPZero": 1.0, "DPGD-0th": 3.0, "DP-GD": 0.8}  # 0th worst, DP-GD best


def test_claims_hold_fail_or_have_no_signal_on_constructed_values():
    flat = "with r = log d, DPZero is nearly flat in d"
    worst, best = (
        "DPGD-0th is always worst (test gradient norm at the train-chosen point)",
        "DP-GD is always best",
    )
    # the paper's picture, with a little seed noise: every comparison holds; ‖∇F‖ ∝ d^0.05 at r =
    # log d is flat
    good = verdicts(
        constructed(
            lambda h, d, m, s: (
                SCALE[m] * RANK[h] * (1 + 0.02 * s) * d ** (0.5 if h == "identity" else 0.05)
            )
        )
    )
    assert good[worst] is True and good[best] is True and good[flat] is True
    assert good["with r = d, every method gets worse as d grows"] is True
    assert good["every method improves as r gets smaller (d, √d, log d)"] is True
    # the committed run's slope 0.41 rises faster than half the bound's slope (0.18): the flatness
    # claim fails
    steep = verdicts(constructed(lambda h, d, m, s: SCALE[m] * RANK[h] * (1 + 0.02 * s) * d**0.41))
    assert steep[flat] is False
    # DP-GD worse than DPZero in every seed: "always best" fails; one seed: nothing holds or fails
    swapped = verdicts(
        constructed(lambda h, d, m, s: {"DP-GD": 1.2}.get(m, SCALE[m]) * (1 + 0.02 * s))
    )
    assert swapped[best] is False
    (facts,) = [
        c.facts
        for c in synthetic_claims.paper_claims(
            constructed(lambda h, d, m, s: {"DP-GD": 1.2}.get(m, SCALE[m]) * (1 + 0.02 * s))
        )
        if c.statement.startswith(best)
    ]
    assert (
        facts["parts"] == facts["parts_fail"] == 3 * 4
    )  # every (Hessian, d) cell: log(1 / 1.2) < 0, exactly
    assert (
        facts["identity_d20_estimate"] == pytest.approx(math.log(1 / 1.2))
        and facts["inverse_d200_high"] < 0
    )
    one = verdicts(constructed(lambda h, d, m, s: SCALE[m] * RANK[h] * d**0.05, seeds=1))
    assert set(one.values()) == {None}


def test_best_is_chosen_on_train_and_the_test_floor_is_reported():
    row = dict(
        hessian="sqrt",
        effective_rank=1.0,
        d=10,
        method="DPZero",
        T=10,
        C=1.0,
        train_loss=1.0,
        test_loss=1.0,
        noise_multiplier=1.0,
        epsilon_paper=2.0,
        epsilon_rdp=1.0,
        epsilon_pld=1.0,
        private=True,
    )
    rows = [
        exp.SyntheticRow(stepsize=0.1, train_grad_norm=0.2, test_grad_norm=0.5, **row),
        exp.SyntheticRow(stepsize=0.3, train_grad_norm=0.4, test_grad_norm=0.1, **row),
    ]
    chosen = report.selected(rows)[("sqrt", 10, "DPZero", 0)]
    assert (
        chosen["train_grad_norm"] == 0.2
        and chosen["test_grad_norm"] == 0.5
        and chosen["test_floor"] == 0.1
    )


def test_closed_form_two_point_equals_the_evaluated_one():
    """The quadratic's closed-form differences (what DPZero and DPGD-0th step on) equal the
    two-point difference of its per-example losses at x ± λu, on the full batch and a subset, and so
    does the mean loss."""
    import torch

    from dpnc.estimators import two_point
    from dpnc.space import FlatSpace

    problem = exp.Quadratic.synthetic(12, "inverse", n=50)
    x = torch.randn(3, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for index in (torch.arange(50), torch.tensor([3, 7, 7, 40])):
        space = FlatSpace(x, "sphere")
        evaluated = two_point(space, lambda s=space, i=index: problem.losses_at(s.x, i), 5, 1e-3)
        space.restore_()
        closed = problem.two_point(x, space.direction(5), 1e-3, index)
        assert torch.allclose(closed.a, evaluated.a, rtol=1e-7, atol=1e-8)
        assert torch.allclose(closed.loss, evaluated.loss, rtol=1e-12)


class _Evaluated(Objective):
    """The quadratic without its closed form (its optional ``two_point`` left at None): the
    algorithms evaluate its losses at x ± λu."""

    def __init__(self, problem):
        self.problem, self.n = problem, problem.n

    def value(self, points):
        return self.problem.value(points)

    def gradient(self, points):
        return self.problem.gradient(points)

    def losses_at(self, points, index):
        return self.problem.losses_at(points, index)


@pytest.mark.parametrize("method", ["DPZero", "DPGD-0th"])
def test_a_grid_run_on_the_closed_form_equals_one_on_evaluated_losses(method):
    """The same public seeds and test noise: the closed form changes the cost, not the run."""
    import torch

    from dpnc.algorithms.dpzero import DPGD0th, DPZero
    from dpnc.privacy.accountant import Accountant
    from dpnc.sampling import FullBatch

    problem = exp.Quadratic.synthetic(15, "sqrt", n=200)
    algorithm = {"DPZero": DPZero, "DPGD-0th": DPGD0th}[method](
        eta=torch.tensor([0.01, 0.1]),
        lam=1e-4,
        C=torch.tensor([0.3, 3.0]),
        noise_multiplier=2.0,
        steps=30,
        direction="sphere",
    )
    outputs = [
        algorithm.run(
            p,
            torch.zeros(2, 15, dtype=torch.float64),
            noise=NoiseSource.for_testing(3),
            accountant=Accountant("replace-one"),
            generator=torch.Generator().manual_seed(4),
            sampler=FullBatch(200),
        ).output
        for p in (problem, _Evaluated(problem))
    ]
    assert torch.allclose(outputs[0], outputs[1], rtol=1e-6, atol=1e-9)


def test_grid_edges_high_rank_cap_and_dp_gd_grid():
    """high_rank_max_d drops the r = d and √d cells above it (the claims skip them); DP-GD runs its
    own grid; the edges name where each train-chosen point sits."""
    config = exp.SyntheticConfig(
        dims=(10, 30),
        steps=(10, 20),
        stepsizes=(0.1, 0.3),
        clips=(1.0, 3.0),
        n=200,
        seeds=2,
        high_rank_max_d=10,
        high_rank_max_T=15,
        first_order_stepsizes=(1.0,),
        first_order_steps=(15,),
    )
    tasks = EXPERIMENT.tasks(config)
    assert {(t.hessian, t.d) for t in tasks} == {
        ("identity", 10),
        ("sqrt", 10),
        ("inverse", 10),
        ("inverse", 30),
    }
    assert {t.T for t in tasks if t.hessian != "inverse" and t.method != "DP-GD"} == {10}
    assert {t.T for t in tasks if t.method == "DP-GD"} == {15} and {
        t.T for t in tasks if t.method != "DP-GD"
    } == {10, 20}
    result = protocol.run_experiment(EXPERIMENT, config, progress=False, workers=1)
    assert {r.stepsize for r in result.rows if r.method == "DP-GD"} == {1.0}
    at = report.edges(result.rows)
    for key, (row, hit) in at.items():
        assert row.train_grad_norm == min(
            r.train_grad_norm for r in result.rows if (r.hessian, r.d, r.method, r.seed) == key
        )
        largest = (
            15 if key[2] == "DP-GD" else 20 if key[0] == "inverse" else 10
        )  # the cell's own T grid
        assert ("largest T" in hit) == (row.T == largest)
        assert ("smallest C" in hit) == (row.C == 1.0) and ("largest C" in hit) == (row.C == 3.0)
    statements = [c.statement for c in result.claims]
    assert any(s.startswith("with r = log d, DPZero is nearly flat in d") for s in statements)
    assert not any(
        s.startswith("with r = d, every method") for s in statements
    )  # one d with r = d: no slope
    assert "## Where the train-chosen point sits in the grid" in EXPERIMENT.render(result)


def test_a_rate_that_fails_reports_where_the_chosen_points_sit():
    row = dict(
        hessian="identity",
        effective_rank=1.0,
        method="DPZero",
        stepsize=0.1,
        C=1.0,
        train_loss=1.0,
        test_loss=1.0,
        train_grad_norm=0.1,
        test_grad_norm=0.1,
        noise_multiplier=1.0,
        epsilon_paper=2.0,
        epsilon_rdp=1.0,
        epsilon_pld=1.0,
        private=True,
    )

    def chosen(edge_at: dict[int, int]):  # d → how many of 3 seeds sit at the largest T
        return {
            ("identity", d, "DPZero", s): (
                exp.SyntheticRow(d=d, T=40, seed=s, **row),
                ["largest T"] if s < k else [],
            )
            for d, k in edge_at.items()
            for s in range(3)
        }

    assert "the train-chosen T is the grid's largest (d=20: 3/3, d=200: 2/3)" in report.t_grid_note(
        chosen({20: 3, 200: 2}), "identity", "DPZero", [20, 200], fitted=1.4, theory=0.4
    )
    inside = report.t_grid_note(
        chosen({20: 3, 200: 1}), "identity", "DPZero", [20, 200], fitted=1.4, theory=0.4
    )
    assert "grows faster with d" in inside and "d=200: 1/3" in inside
    values = constructed(
        lambda h, d, m, s: (1 + 0.02 * s) * d**1.0
    )  # far steeper than any Table 1 exponent
    edges = {
        (h, d, m, s): (
            exp.SyntheticRow(**{**row, "hessian": h, "method": m}, d=d, T=40, seed=s),
            ["largest T"],
        )
        for h, d, m, s in values
    }
    claim = next(
        c
        for c in synthetic_claims.paper_claims(values, edges)
        if c.statement.startswith("with r = d, the train ‖∇F_S‖ grows")
    )
    assert claim.holds is False and claim.facts["parts_fail"] == 3
    # the reason, measured: every seed's train-chosen point of every method at every d sits at the
    # largest T
    assert [claim.facts[f"{m.lower()}_largest_t_runs"] for m in exp.METHODS] == [4 * 3] * 3
    assert (
        claim.evidence.count("the train-chosen T is the grid's largest") == 3
    )  # and each failing part says so


def test_the_instance_factor_is_the_initial_gap_plus_the_gradient_bound_of_the_paper_s_quadratic():
    """ℓ(F_S(x₀) − F_S*) + L² on the instance: Tr A/2 + 2 Tr A², checked against the data's own gap
    at x₀ = 0."""
    for hessian, d in (("identity", 20), ("sqrt", 200), ("inverse", 200)):
        q = exp.Quadratic.synthetic(d, hessian, n=20_000, seed=3)
        x0, x_star = torch.zeros(d, dtype=torch.float64), q.train.mean(0)
        gap = float(q.value(x0) - q.value(x_star))
        assert gap == pytest.approx(report.trace(hessian, d) / 2, rel=0.05)
        assert report.instance_factor(hessian, d) == pytest.approx(
            gap + 2 * float((q.a**2).sum()), rel=0.05
        )
    assert report.instance_factor("identity", 200) == pytest.approx(2.5 * 200)
