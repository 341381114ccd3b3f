"""dpzero-dimension as an experiment: its runs go under the output folder as dpzero-lm's do, and it
writes the five tables its render makes."""

import dataclasses

from dpnc_reproduce.dpzero_dimension.experiment import EXPERIMENT
from tests.reproduce.dpzero_dimension.rows import CONFIG, dim_rows
from tests.reproduce.results import constructed_result


def test_the_runs_go_under_the_output_folder_unless_a_runs_folder_is_given(tmp_path):
    bound = EXPERIMENT.bind_output(dataclasses.replace(CONFIG, runs_dir=None), tmp_path)
    assert bound.runs_dir == str(tmp_path / "runs")
    given = dataclasses.replace(CONFIG, runs_dir="elsewhere")
    assert EXPERIMENT.bind_output(given, tmp_path) is given


def test_the_tables_are_accuracy_share_diagnostics_recipes_and_cost():
    result = constructed_result(EXPERIMENT, CONFIG, dim_rows())
    assert set(EXPERIMENT.tables(result)) == {
        "accuracy.csv",
        "share.csv",
        "diagnostics.csv",
        "recipes.csv",
        "cost.csv",
    }
