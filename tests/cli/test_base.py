"""The command line's shared parts: bad input is a usage error naming its option on every command
(never a traceback, also from the installed entry point), the version, descriptions in paragraphs,
and option choices that are the library's."""

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from dpnc.cli import app
from tests.cli.usage import assert_usage_error, runner

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


# --- conventions ----------------------------------------------------------------------------------


def test_version():
    from dpnc import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"dpnc {__version__}"


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
