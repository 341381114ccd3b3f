"""dpzero-dimension's render on constructed rows: the accuracy table is the mean over seeds of each
(mode, method) with its per-seed values, the figure is written, and intervals print as estimate
[low, high] or say why they cannot."""

import math
import statistics

from dpnc_reproduce.dpzero_dimension import render
from dpnc_reproduce.dpzero_dimension.experiment import EXPERIMENT
from tests.reproduce.dpzero_dimension.rows import CONFIG, dim_rows
from tests.reproduce.results import constructed_result


def _method(row) -> str:
    return row.method + ("" if row.epsilon is None else f" ε={row.epsilon:g}")


def test_the_accuracy_table_is_the_mean_over_seeds_with_every_seeds_value(tmp_path):
    rows = [r for r in dim_rows() if r.phase == "test"]
    result = constructed_result(EXPERIMENT, CONFIG, rows)
    table = render.tables(result)["accuracy.csv"]
    assert {(t["mode"], t["method"]) for t in table} == {(r.mode, _method(r)) for r in rows}
    for t in table:
        mine = [r.accuracy for r in rows if (r.mode, _method(r)) == (t["mode"], t["method"])]
        assert t["seeds"] == len(mine) and t["accuracy"] == statistics.mean(mine)
        assert sorted(t["per_seed"].split()) == sorted(f"{a:.1f}" for a in mine)
    assert [p.name for p in render.plot(result, tmp_path)] == ["fig_dimension.png"]
    assert (tmp_path / "fig_dimension.png").stat().st_size > 0


def test_an_interval_prints_its_ends_or_why_it_has_none():
    assert render._iv(0.5, 0.1, 0.9) == "0.50 [0.10, 0.90]"
    assert render._iv(0.5, -math.inf, 0.9) == "0.50 [no interval]"
    assert render._iv(math.nan, 0.1, 0.9) == "—"
    assert render._pm(80.0, math.nan) == "80.0" and render._pm(80.0, 1.25) == "80.0 ± 1.2"
