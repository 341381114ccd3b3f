"""``dpnc reproduce <experiment>``: one command per reproduction, generated from its config
dataclass."""

from __future__ import annotations

import dataclasses
import inspect
import shlex
import sys
import types
import typing
from pathlib import Path

import typer

from dpnc.cli.base import _Group, _Typer, app


class _Reproductions(_Group):
    """``dpnc reproduce``: its commands are generated from the reproductions
    (:func:`add_reproduction`) when the group is first used, so that ``import dpnc.cli`` and every
    other command never import :mod:`dpnc_reproduce` (a client of the library, which the library
    never imports at load time)."""

    def _load(self) -> None:
        if not self.commands:
            generated = _Typer()
            _add_reproductions(generated)
            self.commands.update(typer.main.get_group(generated).commands)

    def list_commands(self, ctx):
        self._load()
        return super().list_commands(ctx)

    def get_command(self, ctx, name):
        self._load()
        return super().get_command(ctx, name)


reproduce = _Typer(
    cls=_Reproductions,
    no_args_is_help=True,
    help="Reproduce a paper's experiment (figures, CSV, summary).",
)
app.add_typer(reproduce, name="reproduce")


def add_reproduction(group: typer.Typer, experiment) -> None:
    """Register ``dpnc reproduce <experiment.name>``, generated from the experiment's config
    dataclass.

    Options: ``--full/--quick`` (start from ``FULL`` or ``QUICK``), ``--out``, ``--workers``, and
    one per config field, named like it (``fo_methods`` → ``--fo-methods``), its help from the
    field's ``metadata["help"]`` plus its quick and full values, except the fields of
    :data:`_RENAMED` (``dp_delta`` is ``--delta``, as everywhere; the old ``--dp-delta`` still
    works, hidden and deprecated). Tuple fields take comma-separated values ('' is the empty tuple);
    bool fields are ``--name/--no-name``; ``metadata["required"]`` makes an option required,
    ``metadata["folder"]`` an existing folder. Given options replace the config's values
    (``dataclasses.replace``), so the config validates them before any work; a bad value is a usage
    error naming its option."""
    reserved = {"full", "out", "workers"}
    fields = dataclasses.fields(experiment.Config)
    if reserved & {f.name for f in fields}:
        raise ValueError(f"{experiment.Config.__name__} fields may not be named {sorted(reserved)}")
    hints = typing.get_type_hints(experiment.Config)
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [
        inspect.Parameter(
            "full",
            keyword,
            annotation=bool,
            default=typer.Option(False, "--full/--quick", help=experiment.sizes),
        ),
        inspect.Parameter(
            "out",
            keyword,
            annotation=Path,
            default=typer.Option(
                Path(f"runs/{experiment.name}"),
                "--out",
                help="Folder for CSV, JSON, PNG and summary.md.",
            ),
        ),
        inspect.Parameter(
            "workers",
            keyword,
            annotation=int,
            default=typer.Option(
                2, "--workers", min=1, help="Runs side by side (processes; 1: in this process)."
            ),
        ),
    ]
    parsers = {}
    for f in fields:
        kind, parse = _option_type(f.name, hints[f.name], f.metadata)
        parsers[f.name] = parse
        flag = _RENAMED.get(f.name, "--" + f.name.replace("_", "-"))
        help_text = " ".join(
            filter(None, [f.metadata.get("help", ""), _defaults(experiment, f.name)])
        )
        option = typer.Option(
            ... if f.metadata.get("required") else None,
            f"{flag}/--no-{flag[2:]}" if kind is bool else flag,
            help=help_text,
            **({"exists": True, "file_okay": False} if f.metadata.get("folder") else {}),
        )
        params.append(inspect.Parameter(f.name, keyword, annotation=kind | None, default=option))
        if f.name in _RENAMED:  # the old spelling, hidden
            params.append(
                inspect.Parameter(
                    f.name + _OLD,
                    keyword,
                    annotation=kind | None,
                    default=typer.Option(None, "--" + f.name.replace("_", "-"), hidden=True),
                )
            )

    def command(*, full: bool, out: Path, workers: int, **values) -> None:
        from dpnc_reproduce import protocol

        for name in [v for v in values if v.endswith(_OLD)]:
            old = values.pop(name)
            if old is not None:
                new = _RENAMED[name.removesuffix(_OLD)]
                typer.echo(
                    f"warning: --{name.removesuffix(_OLD).replace('_', '-')} is deprecated; use {new}",
                    err=True,
                )
                if values[name.removesuffix(_OLD)] is None:
                    values[name.removesuffix(_OLD)] = old
        overrides = {name: parsers[name](v) for name, v in values.items() if v is not None}
        config = dataclasses.replace(experiment.FULL if full else experiment.QUICK, **overrides)
        config = experiment.bind_output(config, out)
        result = protocol.run_experiment(
            experiment, config, workers=workers, out=out
        )  # claims declared first
        paths = protocol.write(result, out, _command_line())
        typer.echo((out / "summary.md").read_text())
        typer.echo("wrote " + ", ".join(str(p) for p in paths))

    command.__signature__ = inspect.Signature(params)
    command.__doc__ = inspect.getdoc(experiment)
    command.__name__ = experiment.name.replace("-", "_")
    group.command(experiment.name)(command)


_RENAMED = {
    "dp_delta": "--delta"
}  # config fields whose option is spelled as in the rest of the CLI
_OLD = "__deprecated"


def _option_type(name: str, hint, metadata) -> tuple[type, object]:
    """The command-line type of a config field and the parser of its value (``X | None`` is X; a
    tuple is text)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]
    if typing.get_origin(hint) is tuple:
        item = typing.get_args(hint)[0]

        def parse(text: str) -> tuple:
            try:
                return tuple(item(v.strip()) for v in text.split(",")) if text.strip() else ()
            except ValueError:
                raise ValueError(
                    f"{name} must be comma-separated {item.__name__} values; got {text!r}"
                ) from None

        return str, parse
    if metadata.get("folder"):
        return Path, str
    if hint not in (bool, int, float, str):
        raise TypeError(f"config field {name}: no command-line option for type {hint!r}")
    return hint, lambda v: v


def _defaults(experiment, name: str) -> str:
    """ "(quick: …; full: …)", "(default: …)" where they agree, nothing where both are None."""

    def show(v):
        if isinstance(v, tuple):
            return ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in v) or "''"
        return f"{v:g}" if isinstance(v, float) else str(v)

    quick, full = getattr(experiment.QUICK, name), getattr(experiment.FULL, name)
    if quick is None and full is None:
        return ""
    return (
        f"(default: {show(quick)})"
        if quick == full
        else f"(quick: {show(quick)}; full: {show(full)})"
    )


def _command_line() -> str:
    return "dpnc " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _add_reproductions(group: typer.Typer) -> None:
    """One generated command per reproduction of :data:`dpnc_reproduce.EXPERIMENTS` (the client's
    registry: the library names none), added to ``group`` on first use of ``dpnc reproduce``
    (:class:`_Reproductions`)."""
    from dpnc_reproduce import EXPERIMENTS

    for experiment in EXPERIMENTS.values():
        add_reproduction(group, experiment)
