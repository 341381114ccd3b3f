"""docs/cli-reference.md is typer's own Markdown of the CLI (``typer dpnc.cli utils docs``): every
command's options, types, choices and defaults from the code. Run this file to regenerate it."""

import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli-reference.md"
TITLE = "# CLI reference\n\nEvery command and option, generated from the CLI itself.\n\n"


def generated() -> str:
    command = [sys.executable, "-m", "typer", "dpnc.cli", "utils", "docs", "--name", "dpnc"]
    text = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    # one page title: typer's top heading becomes the first section
    text = text.replace("# `dpnc`", "## `dpnc`", 1).replace("\n## `dpnc ", "\n### `dpnc ")
    text = text.replace("```console", "```text")  # usage lines, not commands to run
    return TITLE + "\n".join(escaped(text.split("\n")))


def escaped(lines):
    """Angle brackets in prose as entities (``p_<label>`` would be read as an HTML tag), code left
    as it is."""
    fenced = False
    for line in lines:
        fenced ^= line.startswith("```")
        parts = line.split("`")
        if not fenced and not line.startswith("```"):
            parts[::2] = [t.replace("<", "&lt;").replace(">", "&gt;") for t in parts[::2]]
        yield "`".join(parts)


def test_the_cli_reference_is_the_clis_own():
    assert PAGE.read_text() == generated(), (
        "docs/cli-reference.md is stale: python tests/suites/test_cli_reference.py"
    )


def test_every_option_of_finetune_is_listed():
    page = PAGE.read_text()
    finetune = page[page.index("### `dpnc finetune`") : page.index("### `dpnc predict`")]
    assert (
        finetune.count("\n* `--") > 40
        and "`-C, --clip <float>`" in finetune
        and "* `--epsilon" in finetune
    )


if __name__ == "__main__":
    PAGE.write_text(generated())
