"""What the command-line tests share: a runner on a wide terminal (rich wraps errors at its
width) and the check that bad input is a usage error naming its option."""

from typer.testing import CliRunner

runner = CliRunner(env={"COLUMNS": "250"})  # rich wraps errors at the terminal width


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
