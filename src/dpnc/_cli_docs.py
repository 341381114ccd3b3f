"""The CLI as one click command, for the documentation site's reference (docs/cli.md renders it with
mkdocs-click, so every command's options, types, choices and defaults come from the code, never retyped)."""

import typer

from dpnc.cli import app

command = typer.main.get_command(app)
