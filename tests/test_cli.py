import json

from typer.testing import CliRunner

from dpnc.cli import app

runner = CliRunner(env={"COLUMNS": "250"})  # rich wraps errors at the terminal width


def test_account_gives_epsilon_for_a_noise_multiplier():
    result = runner.invoke(app, ["account", "-T", "10000", "-q", "0.0625", "--noise-multiplier", "13.5156",
                                 "--delta", "1e-5"])
    assert result.exit_code == 0, result.output
    assert "1.9922" in result.output and "1.8320" in result.output  # RDP and PLD (anchor-bench.md)


def test_account_gives_the_multiplier_for_a_target_epsilon_as_json():
    result = runner.invoke(app, ["account", "-T", "10000", "-q", "0.0625", "--epsilon", "2",
                                 "--accountant", "rdp", "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)
    assert row["accountant"] == "rdp" and abs(row["noise_multiplier"] - 13.468) < 1e-3
    assert row["epsilon"] <= 2.0
    assert row["seconds"] < 1.0  # the RDP answer itself takes well under a second


def test_account_refuses_ambiguous_or_invalid_requests():
    both = runner.invoke(app, ["account", "-T", "10", "--epsilon", "1", "--noise-multiplier", "2"])
    assert both.exit_code != 0 and "exactly one of --noise-multiplier and --epsilon" in both.output
    bad_q = runner.invoke(app, ["account", "-T", "10", "-q", "2", "--epsilon", "1"])
    assert bad_q.exit_code != 0 and "sampling_rate must be in (0, 1]" in bad_q.output
    rdp_replace = runner.invoke(app, ["account", "-T", "10", "-q", "0.1", "--epsilon", "1",
                                      "--accountant", "rdp", "--relation", "replace-one"])
    assert rdp_replace.exit_code != 0 and "cannot interpret PoissonSampledGaussian" in rdp_replace.output


def test_account_help_explains_every_option():
    result = runner.invoke(app, ["account", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in ("--steps", "--delta", "--sampling-rate", "--noise-multiplier", "--epsilon",
                   "--accountant", "--relation", "--json"):
        assert option in result.output
