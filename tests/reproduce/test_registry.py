"""The registry :data:`dpnc_reproduce.EXPERIMENTS` is the one list of reproductions: ``dpnc
reproduce`` makes a command of each and docs/cli.md's table names the same, so a new reproduction
is one line in the registry (and a snapshot case, :mod:`tests.reproduce.test_snapshots`)."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from dpnc.cli.reproduce import _add_reproductions
from dpnc_reproduce import EXPERIMENTS, protocol

CLI_PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_the_registry_is_keyed_by_each_experiments_command():
    assert all(isinstance(e, protocol.Experiment) for e in EXPERIMENTS.values())
    assert all(name == e.name for name, e in EXPERIMENTS.items())


def test_the_command_line_makes_one_command_per_registered_experiment():
    group = typer.Typer()
    _add_reproductions(group)
    assert [c.name for c in group.registered_commands] == list(EXPERIMENTS)


def test_the_cli_page_lists_every_registered_experiment():
    section = CLI_PAGE.read_text().split("## dpnc reproduce", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([a-z0-9-]+)` \|", section, flags=re.MULTILINE)
    assert sorted(listed) == sorted(EXPERIMENTS)
