"""Value rules for arguments and configs: what a value must be, and the ValueError naming it when it
is not.

The one home of dpnc's validators: :func:`check_positive`, :func:`check_at_least`,
:func:`check_integer`, :func:`check_probability`, :func:`check_per_run` and :func:`check_choice` for
keyword arguments (algorithm configs, problems, samplers, privacy releases, the LM config),
:func:`check_value` / :func:`check_axis` with a rule for configs and grids. Used across the library
(privacy/ included: it imports nothing else of dpnc) and by the reproductions' configs
(:mod:`dpnc_reproduce.common` re-exports them)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

__all__ = [
    "INTEGER",
    "NATURAL",
    "NONNEGATIVE",
    "POSITIVE",
    "Rule",
    "check_at_least",
    "check_axis",
    "check_choice",
    "check_integer",
    "check_per_run",
    "check_positive",
    "check_probability",
    "check_value",
    "one_of",
]


# Rules for :func:`check_value` and :func:`check_axis`: (what a value must be, a predicate).
INTEGER = ("an integer >= 1", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1)
NATURAL = ("an integer >= 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0)
POSITIVE = ("a finite number > 0", lambda v: _real(v) and math.isfinite(v) and v > 0)
NONNEGATIVE = ("a finite number >= 0", lambda v: _real(v) and math.isfinite(v) and v >= 0)
Rule = tuple[str, Callable[[object], bool]]


def one_of(choices: Sequence) -> Rule:
    """The rule "among ``choices``"."""
    return f"among {tuple(choices)}", lambda v: v in choices


def _real(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_value(name: str, value, rule: Rule) -> None:
    """``value`` obeys ``rule`` (:data:`INTEGER`, :data:`NATURAL`, :data:`POSITIVE`,
    :data:`NONNEGATIVE`, :func:`one_of` or any (description, predicate) pair), else ValueError
    naming ``name`` and the rule."""
    if not rule[1](value):
        raise ValueError(f"{name} must be {rule[0]}; got {value!r}")


def check_axis(name: str, values: Sequence, rule: Rule) -> None:
    """A grid axis ``name`` is non-empty and each of its values obeys ``rule``, else ValueError
    naming the axis and the first offending value."""
    if not values:
        raise ValueError(f"{name} must be non-empty; got {tuple(values)!r}")
    for v in values:
        check_value(name, v, rule)


def check_positive(allow_zero: bool = False, allow_inf: bool = False, **values: float) -> None:
    """Refuse a value that is not a finite number > 0 (or ≥ 0 / inf where allowed), naming it."""
    for name, v in values.items():
        number = isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)
        ok = (
            number
            and (math.isfinite(v) or (allow_inf and v > 0))
            and (v > 0 or (allow_zero and v == 0))
        )
        if not ok:
            rule = (">= 0" if allow_zero else "> 0") + (" (or inf)" if allow_inf else "")
            raise ValueError(
                f"{name} must be a {'' if allow_inf else 'finite '}number {rule}; got {v!r}"
            )


def check_per_run(name: str, value, *, allow_inf: bool = False, allow_zero: bool = False) -> None:
    """:func:`check_positive` for a value that may be one per run of a grid (a number or a tensor of
    shape (K,))."""
    if _real(
        value
    ):  # one number, the common case (a trainer checks its lr on every step): no tensor built
        ok = (value > 0 or (allow_zero and value == 0)) and (math.isfinite(value) or allow_inf)
    else:
        import torch  # only here: the rest of this module is plain Python

        v = torch.as_tensor(value, dtype=torch.float64)
        ok = (v > 0) | (v == 0) if allow_zero else v > 0
        ok = bool(torch.all(ok & (torch.isfinite(v) | (allow_inf & torch.isinf(v)))))
    if not ok:
        rule = ">= 0" if allow_zero else "> 0"
        raise ValueError(
            f"{name} must be {'' if allow_inf else 'finite and '}{rule}; got {value!r}"
        )


def check_at_least(low: float, strict: bool = True, **values: float) -> None:
    """Refuse a value that is not a finite number > ``low`` (≥ ``low`` with ``strict=False``),
    naming it."""
    for name, v in values.items():
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        if not ok or v < low or (strict and v == low):
            raise ValueError(
                f"{name} must be a finite number {'>' if strict else '>='} {low:g}; got {v!r}"
            )


def check_probability(include_one: bool = False, **values: float) -> None:
    """Refuse a value that is not a number in the open interval (0, 1) (in (0, 1] with
    ``include_one``), naming it: δ, a failure probability, a confidence level, a sampling rate."""
    for name, v in values.items():
        ok = _real(v) and 0 < v and (v <= 1 if include_one else v < 1)  # NaN fails every comparison
        if not ok:
            where = "(0, 1]" if include_one else "the open interval (0, 1)"
            raise ValueError(f"{name} must be in {where}; got {v!r}")


def check_integer(minimum: int = 1, **values: int) -> None:
    """Refuse a value that is not an integer ≥ ``minimum``, naming it."""
    for name, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}; got {v!r}")


def check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    """Refuse a value outside ``allowed``, naming the argument and the choices."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}; got {value!r}")
