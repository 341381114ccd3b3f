"""dpzero-lm's rendering helpers on constructed rows: a run's label, the warning when the
zeroth-order runs left the accuracy where zero-shot had it, and the trained-parameter counts."""

import dataclasses

from dpnc_reproduce.dpzero_lm import render
from tests.reproduce.dpzero_lm.rows import lm_row


def test_a_label_names_the_method_its_epsilon_and_sphere_directions():
    private = lm_row("SST-2", 42, "dpzero", 80.0, 6.0)
    assert render.label(private) == "DPZero ε=6"
    assert render.label(dataclasses.replace(private, direction="sphere")) == "DPZero ε=6 (sphere)"
    assert render.label(lm_row("SST-2", 42, "mezo", 80.0)) == "MeZO (non-private)"


def test_unmoved_zeroth_order_runs_are_told_when_at_least_half_are():
    zero = lm_row("SST-2", 42, "zero-shot", 70.0)
    moved = [zero, lm_row("SST-2", 42, "mezo", 71.0), lm_row("SST-2", 42, "dpzero", 70.0, 6.0)]
    assert render._unmoved([zero, lm_row("SST-2", 42, "mezo", 71.0)]) == ""
    assert render._unmoved(moved).startswith("1 of 2 zeroth-order runs end with exactly")
    other_task = lm_row("SST-5", 42, "mezo", 70.0)  # zero-shot's accuracy, but on another task
    assert render._unmoved([zero, other_task, lm_row("SST-2", 42, "mezo", 75.0)]) == ""


def test_the_trained_parameters_are_counted_over_the_runs_that_trained():
    rows = [
        lm_row("SST-2", 42, "zero-shot", 70.0, steps=0, parameters_trained=0),
        lm_row("SST-2", 42, "mezo", 71.0, parameters_trained=770),
        lm_row("SST-2", 42, "dpzero", 71.0, 6.0, parameters_trained=1_774_465),
    ]
    assert render._trained(rows) == "770, 1.8M"
    assert render._trained(rows[:1]) == "none"
