"""The ``dpnc`` command line, one module per command. Thin: every option maps onto a library
argument of the same name. A command imports its machinery when it runs, so that ``dpnc --help``
does not import torch."""

from dpnc.cli import account, demo, finetune, predict, reproduce  # noqa: F401  (each registers its command on app)
from dpnc.cli.base import _Typer, app
from dpnc.cli.reproduce import add_reproduction

app.command("audit")(
    __import__("dpnc.audit.command", fromlist=["audit"]).audit
)  # dpnc audit (torch loaded on use)

__all__ = ["_Typer", "add_reproduction", "app"]
