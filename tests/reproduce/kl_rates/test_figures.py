"""kl-rates' figures: a panel per (algorithm, objective) of the excess, and one per objective of
adaptive GD's gradient norm, at their stated sizes."""

from matplotlib.image import imread

from dpnc_reproduce.kl_rates import figures


def test_one_panel_per_algorithm_and_objective_at_its_size(tiny, tmp_path):
    paths = figures.plot(tiny, tmp_path)
    assert sorted(p.name for p in paths) == ["fig_excess.png", "fig_grad_norm.png"]
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
