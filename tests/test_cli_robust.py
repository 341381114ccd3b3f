"""The command line neither hangs nor half-writes on extreme input."""

import time

import pytest
from typer.testing import CliRunner

from dpnc.cli import app

runner = CliRunner(env={"COLUMNS": "250"})
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


def test_the_demo_says_which_accountant_calibrated_its_noise_at_a_huge_epsilon(tmp_path):
    # Before: it warned that PLD fell back to RDP, then printed "calibrated by PLD".
    result = runner.invoke(
        app, ["demo", "--steps", "3", "--epsilon", "1e6", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "calibrated by RDP: PLD cannot account this budget" in result.output
    assert "calibrated by PLD" not in result.output
