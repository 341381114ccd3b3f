"""FinetuneConfig's defaults and refusals (dpnc.lm.config): no privacy spent unasked, a recipe's
passes kept on a small data set, classes declared rather than read off a private test file.

Before: without ``--epsilon`` a private run spent ε = 6, shown only in its header; without
``--steps`` DPZero's head took 5000 steps on 80 rows; and a private test file's labels declared the
classes."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.lm import FinetuneConfig
from dpnc.lm.config import PATHS, RECIPE_N, default_steps, public_fields

FILES = dict(text_column="review", label_column="sentiment", train_file="tr.csv")


def test_default_steps_keep_the_recipes_passes_over_a_small_data_set():
    # At the recipes' own n (SST-2's 512 × 2) and above: the recipe's T, as before.
    assert RECIPE_N == 1024
    assert FinetuneConfig(method="dpzero", epsilon=4).steps == 5000  # SST-2, n = 1024
    assert FinetuneConfig(method="dpzero", epsilon=4, train="all").steps == 10000
    assert FinetuneConfig(method="dp-adamw", epsilon=4, task="SST-5").steps == 1000  # n = 2560
    # 80 rows: the same passes over the data, not 5000 steps.
    small = FinetuneConfig(**FILES, method="dpzero", epsilon=4, n=80, labels="a,b", batch_size=16)
    assert small.steps == 391 == default_steps("dpzero", "head", 80) and small.eval_every == 0
    assert default_steps("dp-adamw", "head", 80) == 79 and default_steps("mezo", "lora", 80) == 157
    assert (
        default_steps("zero-shot", "head", 80) == 0 and default_steps("mezo", "head", None) == 5000
    )
    assert FinetuneConfig(**FILES, method="mezo", n=80, steps=7).steps == 7  # given: kept


def test_a_users_file_defaults_to_the_recipe_chosen_for_one_a_task_to_the_papers():
    # docs/results/default-recipe: DP-AdamW on the head with C = 0.1, chosen on SST-5 and TREC
    mine = FinetuneConfig(**FILES, epsilon=4, n=1500, labels="a,b")
    assert (mine.method, mine.train, mine.clip, mine.lr, mine.steps) == (
        "dp-adamw",
        "head",
        0.1,
        1e-2,
        1000,
    )
    paper = FinetuneConfig(epsilon=4)
    assert (paper.method, paper.clip) == ("dpzero", 0.5)
    assert FinetuneConfig(**FILES, epsilon=4, n=1500, labels="a,b", train="top-k").clip == 10.0
    result = CliRunner().invoke(
        app, ["finetune", "--train-file", "tr.csv", "--text-column", "review"]
    )
    assert result.exit_code != 0 and "dp-adamw is private" in result.output


def test_classes_are_declared_never_read_off_a_private_test_file():
    private = dict(FILES, method="dpzero", epsilon=4, n=80, test_file="te.csv")
    with pytest.raises(ValueError, match="classes must be declared.*--labels"):
        FinetuneConfig(**private)
    with pytest.raises(ValueError, match="classes must be declared"):
        FinetuneConfig(**{**private, "test_file": None})  # train-only: nothing to take them from
    assert FinetuneConfig(**private, labels="negative,positive").labels == "negative,positive"
    assert FinetuneConfig(
        **private, test_public=True
    ).test_public  # a public test file may declare them
    assert FinetuneConfig(**FILES, method="mezo").labels is None  # not private: the training file's


def test_public_fields_name_files_by_base_name_and_leave_the_rest_as_they_are():
    fields = FinetuneConfig(**FILES, method="mezo", out="/home/ana/runs/notes").to_dict()
    fields["train_file"] = "/home/ana/clinic/tr.csv"
    public = public_fields(fields)
    assert public["train_file"] == "tr.csv" and public["out"] == "notes"
    assert {k: v for k, v in public.items() if k not in PATHS} == {
        k: v for k, v in fields.items() if k not in PATHS
    }
    assert public_fields(public) == public  # applied twice, the same


def settings(tmp_path, **kwargs) -> FinetuneConfig:
    """A private DPZero config on SST-2 (the default task) into tmp_path/out; kwargs override."""
    return FinetuneConfig(
        **{**dict(epsilon=6.0, method="dpzero", steps=3, out=str(tmp_path / "out")), **kwargs}
    )


def test_bad_settings_are_refused_and_checkpoints_default_to_the_run_folder(tmp_path):
    with pytest.raises(ValueError, match="method must be one of"):
        settings(tmp_path, method="sgd")
    with pytest.raises(ValueError, match="sampler must be 'poisson' for the private method"):
        settings(tmp_path, sampler="shuffle", relation="add/remove")
    with pytest.raises(ValueError, match="sampler must be 'shuffle' for the private method"):
        settings(tmp_path, sampler="poisson", relation="replace-one")
    with pytest.raises(ValueError, match="steps must be 0 for method='zero-shot'"):
        settings(tmp_path, method="zero-shot")
    with pytest.raises(ValueError, match="delta must be in the open interval"):
        settings(tmp_path, delta=1.5)
    with pytest.raises(ValueError, match="checkpoint_every needs a folder"):
        settings(tmp_path, checkpoint_every=2, out=None)
    assert (
        settings(tmp_path, checkpoint_every=2).run_dir == tmp_path / "out"
    )  # the checkpoints go beside the journal
