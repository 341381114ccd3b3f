"""nonsmooth-rates' rendering helpers: a method's oracle cost at the largest n it ran, beside ZTC's,
and the target region, which grows with α."""

import dataclasses
import re
from types import SimpleNamespace

from dpnc_reproduce.nonsmooth_rates import render
from tests.reproduce.nonsmooth_rates.tiny import TINY

CELL = (2, 4.0, 0.2)  # d, ε, α


def _row(method, n, m, evaluations, d=2):
    return SimpleNamespace(
        objective="radial", d=d, epsilon=4.0, alpha=0.2, method=method, n=n, m=m,
        evaluations=evaluations,
    )  # fmt: skip


def test_the_cost_is_the_median_at_the_largest_n_with_its_ratio_to_ztcs():
    rows = [
        _row("zo-o2nc", 100, 8, 1000),
        _row("zo-o2nc", 200, 8, 2000),
        _row("zo-o2nc", 200, 8, 4000),
        _row("klt", 200, 4, 1000),
        _row("klt", 200, 2, 1500),
        _row("klt", 200, 4, 2000),
        _row("klt", 400, 4, 9999, d=3),  # another cell
    ]
    assert render.evaluation_cost(rows, "radial", CELL, "klt") == "m = 2/4; n = 200: 1,500 (0.50)"
    assert render.evaluation_cost(rows, "radial", CELL, "zo-o2nc") == "m = 8; n = 200: 3,000"
    assert render.evaluation_cost(rows, "radial", CELL, "zo-o2nc:naive") == "—"  # did not run


def test_the_target_region_grows_with_alpha_until_the_start_is_inside_it():
    text = render.target_region(dataclasses.replace(TINY, alphas=(0.2, 0.05, 0.1)))
    reach = [float(x) for x in re.findall(r"up to ‖x − x\*‖ = ([0-9.]+)", text)]
    assert len(reach) == 2 and reach[0] < reach[1] < TINY.start_distance  # α = 0.05, then 0.1
    assert text.index("α = 0.05") < text.index("α = 0.1") < text.index("α = 0.2: already at x₀")
    assert f"β = {TINY.main_beta:g}" in text
