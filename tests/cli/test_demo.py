"""``dpnc demo``: private training on embedded data, end to end, says which accountant calibrated its
noise (at a huge ε PLD cannot, and RDP does)."""

from dpnc.cli import app
from tests.cli.usage import runner


def test_the_demo_says_which_accountant_calibrated_its_noise_at_a_huge_epsilon(tmp_path):
    # Before: it warned that PLD fell back to RDP, then printed "calibrated by PLD".
    result = runner.invoke(
        app, ["demo", "--steps", "3", "--epsilon", "1e6", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "calibrated by RDP: PLD cannot account this budget" in result.output
    assert "calibrated by PLD" not in result.output
