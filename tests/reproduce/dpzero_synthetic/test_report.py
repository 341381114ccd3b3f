"""dpzero-synthetic's report: the best point chosen on the training split, the grid's edges, the
instance factor, and effective rank (not dimension) driving DPZero."""

import pytest
import torch

from dpnc_reproduce import protocol
from dpnc_reproduce.dpzero_synthetic import report
from dpnc_reproduce.dpzero_synthetic import run as exp
from dpnc_reproduce.dpzero_synthetic.experiment import EXPERIMENT


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
