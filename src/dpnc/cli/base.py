"""The ``dpnc`` command line's shared parts: the option choices, the command classes (bad input is a
usage error naming its option) and the ``app`` every command module registers on."""

from __future__ import annotations

import inspect
import re
from typing import Literal

import typer
from typer.core import TyperCommand, TyperGroup

# The choices of the options, as click choices (shown in --help, checked before any work). They are
# the library's: tests/cli/test_base.py checks each against its tuple in dpnc.lm.config (not imported
# here: it imports torch). The optimizer options' flags take theirs from dpnc.options
# (dpnc.cli.finetune generates them).
Task = Literal["SST-2", "SST-5", "TREC", "RTE", "SNLI", "MNLI"]
Method = Literal["zero-shot", "mezo", "dpzero", "adamw", "dp-adamw"]
TrainMode = Literal["head", "top-k", "bias", "lora", "all"]
Head = Literal["prompt", "linear", "causal"]
PromptMode = Literal["label", "filled"]
Accountant = Literal["rdp", "pld"]
AccountantOrBoth = Literal["pld", "rdp", "both"]
Relation = Literal["add/remove", "replace-one"]
Sampler = Literal["poisson", "shuffle"]
Device = Literal["auto", "cpu", "cuda"]
Dtype = Literal["fp32", "bf16", "fp16"]
ReportTo = Literal["none", "tensorboard"]
DEFAULT_ACCOUNTANT = "pld"  # make_private's, finetune's (under add/remove) and account's

# --help panels of dpnc finetune
DATA, MODEL, OPTIMIZER, PRIVACY, OUTPUT, DEVICE = (
    "Data",
    "Model and what is trained",
    "Method and optimizer",
    "Privacy",
    "Output and logging",
    "Device",
)


def _without_flag_types(params: list) -> list:
    """``params`` with no type shown for a flag (``--json``, ``--cache/--no-cache``, ``--help``):
    typer would show ``<bool>``, though a flag takes no value."""
    for param in params:
        if getattr(param, "is_flag", False):
            param.display_type_rich = lambda ctx: None
    return params


def _one_line_paragraphs(help_text: str | None) -> str | None:
    """``help_text`` with each paragraph on one line. Rich ``--help`` keeps a docstring's single
    line breaks, so a terminal narrower than the source lines broke each of them again, leaving
    ragged half-empty lines."""
    if not help_text:
        return help_text
    paragraphs = inspect.cleandoc(help_text).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


class _Group(TyperGroup):
    """A group whose flags show no ``<bool>`` type and whose help flows in paragraphs."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.help = _one_line_paragraphs(self.help)

    def get_params(self, ctx):
        return _without_flag_types(super().get_params(ctx))


class _Command(TyperCommand):
    """A command whose bad input is a usage error (exit 2, no traceback), as typer's own checks are.

    The library validates its arguments when objects are built, raising ``ValueError("name must be
    …; got …")`` (or FileNotFoundError for a missing data file); the usage error names the option of
    that argument. Its help flows in paragraphs (:func:`_one_line_paragraphs`)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.help = _one_line_paragraphs(self.help)

    def get_params(self, ctx):
        return _without_flag_types(super().get_params(ctx))

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (ValueError, FileNotFoundError) as err:
            raise typer.BadParameter(str(err), ctx=ctx, param=self._option_of(str(err))) from None

    def _option_of(self, message: str):
        """The option whose library argument ``message`` starts with ("noise multiplier must …", "lr
        must …")."""
        return next(
            (p for p in self.params if re.match(p.name.replace("_", "[_ ]") + r"\b", message)), None
        )


class _Typer(typer.Typer):
    """Typer whose commands are :class:`_Command` s."""

    def command(self, *args, **kwargs):
        kwargs.setdefault("cls", _Command)
        return super().command(*args, **kwargs)


app = _Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    help="Differentially private optimization of nonconvex and nonsmooth objectives.",
)


def _show_version(value: bool) -> None:
    if value:
        from dpnc import __version__

        typer.echo(f"dpnc {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_show_version,
        is_eager=True,
        help="Print dpnc's version and exit.",
    ),
) -> None:
    """Differentially private optimization of nonconvex and nonsmooth objectives."""
