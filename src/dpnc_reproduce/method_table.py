"""The reproductions' paper methods by registry name: a method is a row of data, not a factory.

A name is a key of :data:`dpnc.algorithms.registry.ALGORITHMS`, with a ``:<variant>`` suffix only
where one entry runs in more than one way; each maps to an :class:`Entry` (constructor and
options, a value or a rule of the context), built by :func:`build`; :func:`rename` upgrades old
results. See docs/reproducing.md ("Methods by registry name")."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import NamedTuple

from dpnc.algorithms import ALGORITHMS

CONSTRUCTORS = ("practical", "from_theory")


class Entry(NamedTuple):
    """One paper method of a reproduction: ``ALGORITHMS[algorithm].<constructor>(setting, budget,
    **options)``.

    ``options``: keyword arguments; a callable value is a rule, called with the reproduction's
    context when the method is built (a rule that returns None leaves the constructor's own
    default). ``label``: what the method is, in words. ``needs``: the public constants (fields of
    :class:`~dpnc.problems.base.Constants`) the method needs declared; a problem that lacks one is
    not one the method applies to."""

    algorithm: str
    constructor: str
    options: Mapping[str, object]
    label: str
    needs: tuple[str, ...] = ()

    def applies(self, constants) -> bool:
        """Whether the public ``constants`` declare everything this method needs."""
        return all(getattr(constants, name, None) is not None for name in self.needs)


def algorithm_name(name: str) -> str:
    """The registry name of a method name: the part before its variant suffix (``klt:first-order`` →
    ``klt``)."""
    return name.split(":", 1)[0]


def check_table(table: Mapping[str, Entry]) -> None:
    """Raises ValueError unless every name's registry part is its entry's algorithm, a key of
    ALGORITHMS, and every constructor is one of :data:`CONSTRUCTORS`."""
    for name, entry in table.items():
        if entry.algorithm not in ALGORITHMS or algorithm_name(name) != entry.algorithm:
            raise ValueError(
                f"method {name!r}: its name must start with its registry name {entry.algorithm!r}, a key "
                f"of ALGORITHMS ({', '.join(ALGORITHMS)})"
            )
        if entry.constructor not in CONSTRUCTORS:
            raise ValueError(
                f"method {name!r}: constructor must be one of {CONSTRUCTORS}; got {entry.constructor!r}"
            )


def refuse_old_names(methods, renamed: Mapping[str, str]) -> None:
    """Raises ValueError naming the new name of any old method name in ``methods`` (a user's habit
    from before the rename), before the generic "must be among" of the config's own check."""
    old = [name for name in methods if name in renamed]
    if old:
        raise ValueError(
            "methods take their names from dpnc's algorithm registry now: "
            + ", ".join(f"{name!r} is now {renamed[name]!r}" for name in old)
        )


def options(entry: Entry, context) -> dict:
    """The entry's options with every rule computed on ``context`` (a rule's None: the option is
    left out)."""
    values = {
        key: value(context) if callable(value) else value for key, value in entry.options.items()
    }
    return {key: value for key, value in values.items() if value is not None}


def build(entry: Entry, setting, budget, context):
    """The algorithm of ``entry`` on the public ``setting`` and ``budget``, its rules computed on
    ``context``."""
    constructor: Callable = getattr(ALGORITHMS[entry.algorithm], entry.constructor)
    return constructor(setting, budget, **options(entry, context))


# --- older results --------------------------------------------------------------------------------


def rename_text(text: str, renamed: Mapping[str, str]) -> str:
    """``text`` with every whole old method name (not part of a longer name: no letter, digit or
    ``-`` either side, nor a module path's ``.`` before it) replaced by its new one; longer names
    first, so ``ztc-naive`` is not read as ``ztc``."""
    if not renamed:
        return text
    names = "|".join(re.escape(old) for old in sorted(renamed, key=len, reverse=True))
    return re.sub(
        rf"(?<![A-Za-z0-9.-])({names})(?![A-Za-z0-9-])", lambda m: renamed[m.group(1)], text
    )


def _rename(value, renamed: Mapping[str, str]):
    if isinstance(value, str):
        return rename_text(value, renamed)
    if isinstance(value, (list, tuple)):
        return type(value)(_rename(v, renamed) for v in value)
    if isinstance(value, dict):
        return {k: _rename(v, renamed) for k, v in value.items()}
    return value


def rename(data: dict, renamed: Mapping[str, str], *, since: str = "28 Nov 2026") -> dict:
    """A ``result.json`` record with the old method names of ``renamed`` (old → new) replaced by the
    new ones in every text it holds (config, rows, claims, declarations, re-judgings, notes,
    command; nothing else changes: no number, no verdict), and a note saying so (with the date the
    registry names took effect, ``since``). A record that names no old method comes back unchanged."""
    methods = set(data.get("config", {}).get("methods", ())) | {
        r.get("method") for r in data.get("rows", ())
    }
    old = {name for name in renamed if name in methods or f"matched:{name}" in methods}
    if not old:
        return data
    used = {name: renamed[name] for name in sorted(old)}
    keep = {"machine", "seconds", "workers", "declared_commit"}
    out = {k: (v if k in keep else _rename(v, renamed)) for k, v in data.items()}
    note = (
        f"Method names as in the registry since {since} (re-rendered from result.json, nothing re-run): "
        + ", ".join(f"{a} → {b}" for a, b in used.items())
        + "."
    )
    out["notes"] = [*out.get("notes", ()), note]
    return out
