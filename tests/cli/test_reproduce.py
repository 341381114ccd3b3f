"""``dpnc reproduce``: the commands generated from each experiment's config keep every documented
option, build the config, refuse bad input before any work and spell δ as --delta."""

import dataclasses

import pytest

from dpnc.cli import app
from dpnc_reproduce import dpzero_lm, nonsmooth_compare, protocol
from tests.cli.usage import assert_usage_error, runner

LM_BAD_INPUTS = [
    (["--lr", "nan"], "--lr"),
    (["--clip", "0"], "--clip"),
    (["--epsilons", "0"], "--epsilons"),
    (["--tasks", "SST-2,NOPE"], "--tasks"),
    (["--seeds", ""], "--seeds"),
    (["--seeds", "42,x"], "--seeds"),
    (["--steps", "0"], "--steps"),
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
