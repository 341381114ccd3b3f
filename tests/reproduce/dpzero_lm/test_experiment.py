"""dpzero-lm as an experiment: its trainer runs go under the output folder unless the config names
a runs folder, and a config asking for isolation runs each task in a fresh process."""

import dataclasses

from dpnc_reproduce.dpzero_lm.experiment import EXPERIMENT
from tests.reproduce.dpzero_lm.rows import FULL_SET


def test_the_runs_go_under_the_output_folder_unless_a_runs_folder_is_given(tmp_path):
    assert FULL_SET.runs_dir is None
    assert EXPERIMENT.bind_output(FULL_SET, tmp_path).runs_dir == str(tmp_path / "runs")
    given = dataclasses.replace(FULL_SET, runs_dir="elsewhere")
    assert EXPERIMENT.bind_output(given, tmp_path) is given


def test_isolation_is_the_configs_choice():
    for isolate in (True, False):
        assert EXPERIMENT.isolated(dataclasses.replace(FULL_SET, isolate=isolate)) is isolate
