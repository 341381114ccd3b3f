"""``dpnc demo``: private training on embedded data, end to end."""

from __future__ import annotations

from pathlib import Path

import typer

from dpnc.cli.base import app


@app.command()
def demo(
    out: Path = typer.Option(Path("runs/demo"), "--out", help="Folder for the plot."),
    epsilon: float = typer.Option(2.0, "--epsilon", help="Target ε of the private run."),
    steps: int = typer.Option(500, "--steps", min=1, help="Full-batch DPZero steps."),
) -> None:
    """The main job: train privately with DPZero on embedded data, print accuracy and ε, write a
    plot."""
    from dpnc import demo as exp

    config = exp.DemoConfig(epsilon=epsilon, steps=steps)
    result = exp.run_demo(config)
    typer.echo(exp.summary(result))
    typer.echo(f"plot: {exp.write_plot(result, out / 'demo.png')}")
