"""``dpnc account``: ε for a noise multiplier and the multiplier for a target ε, one JSON object
with a value per accountant, PLD by default as everywhere, and under replace-one the accountant
that can."""

import json
import time

import pytest

from dpnc.cli import app
from dpnc.lm import train as lm_train
from tests.cli.usage import runner


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


# --- extreme input: no hang, no half-written answer ------------------------------------------------

SECONDS = 10.0  # generous: ~1 s measured (2 shared cores); before, over 100 s for ε = 1000


@pytest.mark.parametrize("epsilon", ["1000", "1e9"])
@pytest.mark.parametrize("shape", [["-T", "1000", "-q", "0.01"], ["-T", "1"]])
def test_account_answers_a_huge_epsilon_quickly(epsilon, shape):
    start = time.perf_counter()
    result = runner.invoke(app, ["account", *shape, "--epsilon", epsilon, "--accountant", "both"])
    assert time.perf_counter() - start < SECONDS
    assert result.exit_code == 0, result.output
    rdp = next(line for line in result.output.splitlines() if line.startswith("rdp "))
    assert "n/a" not in rdp


def test_account_says_when_pld_fell_back_to_rdp():
    result = runner.invoke(app, ["account", "-T", "1", "--epsilon", "1e6", "--accountant", "pld"])
    assert result.exit_code == 0, result.output
    assert "note: pld:" in result.output and "calibrated by RDP instead" in result.output


@pytest.mark.parametrize(
    "args,message",
    [
        (["--epsilon", "0"], "epsilon must be a finite number > 0"),
        (["--epsilon", "inf"], "epsilon must be a finite number > 0"),
        (["--epsilon", "nan"], "epsilon must be a finite number > 0"),
        (["--noise-multiplier", "-1"], "noise multiplier must be a finite number > 0"),
        (["--noise-multiplier", "0"], "noise multiplier must be a finite number > 0"),
    ],
)
def test_account_refuses_bad_budgets_before_any_work(args, message):
    result = runner.invoke(app, ["account", "-T", "10", *args])
    assert result.exit_code == 2 and message in result.output, result.output
