"""The recipe tools of dpnc_reproduce.finetune_defaults: validation curves read back from run
folders."""

import csv
import json

from dpnc_reproduce.finetune_defaults import _cell_name, _parse_cell, write_curves


def test_cell_names_round_trip_with_small_and_negative_exponent_values():
    cell = {"lr": 1e-05, "clip": 0.5, "steps": 100000}
    assert _parse_cell(_cell_name("dpzero", cell)) == ("dpzero", cell)


def test_curves_hold_every_evaluation_and_only_evaluations(tmp_path):
    runs = tmp_path / "runs"
    for method, accuracies in (("mezo", [0.3, 0.4]), ("dpzero", [0.3, 0.35])):
        run = runs / _cell_name(method, {"lr": 0.03, "clip": 0.5, "steps": 20})
        run.mkdir(parents=True)
        events = [
            {"event": "eval", "step": 10 * i, "accuracy": a, "loss": 1.0 - a, "epsilon": float(i)}
            for i, a in enumerate(accuracies)
        ]
        events.insert(1, {"event": "step", "step": 1, "epsilon": 0.1, "released": 0.2, "seed": 7})
        (run / "metrics.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n")
    rows = write_curves(runs, tmp_path / "out", "SST-5")
    assert [(r["method"], r["step"], r["accuracy"]) for r in rows] == [
        ("dpzero", 0, 0.3),
        ("dpzero", 10, 0.35),
        ("mezo", 0, 0.3),
        ("mezo", 10, 0.4),
    ]
    with (tmp_path / "out" / "private_curves.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 4
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "SST-5" in summary and summary.startswith(
        "NOT PRIVATE: un-noised evaluations on rows of the training"
    )
    assert not (tmp_path / "out" / "curves.csv").exists()  # a name that does not say so
