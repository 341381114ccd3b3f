"""dpnc.checks: each rule accepts what it states and refuses the rest (bools, NaN and infinities
included) with a ValueError naming the argument, the rule and the value."""

import math
import re

import pytest
import torch

from dpnc.checks import (
    INTEGER,
    NATURAL,
    NONNEGATIVE,
    POSITIVE,
    check_at_least,
    check_axis,
    check_choice,
    check_integer,
    check_per_run,
    check_positive,
    check_probability,
    check_value,
    one_of,
)

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    "rule, good, bad",
    [
        (INTEGER, [1, 7], [0, -1, 1.0, True, "1"]),
        (NATURAL, [0, 3], [-1, 0.0, False]),
        (POSITIVE, [1e-300, 2, 0.5], [0, -1.0, INF, NAN, True]),
        (NONNEGATIVE, [0, 0.0, 3.5], [-1e-9, INF, NAN, False]),
        (one_of(("rdp", "pld")), ["rdp", "pld"], ["RDP", None]),
    ],
)
def test_check_value_applies_the_rule_and_names_it(rule, good, bad):
    for value in good:
        check_value("x", value, rule)
    for value in bad:
        with pytest.raises(ValueError, match=rf"^x must be {re.escape(rule[0])}; got "):
            check_value("x", value, rule)


def test_check_axis_refuses_an_empty_axis_and_names_the_first_bad_value():
    check_axis("seeds", [0, 1, 2], NATURAL)
    with pytest.raises(ValueError, match=r"seeds must be non-empty; got \(\)"):
        check_axis("seeds", [], NATURAL)
    with pytest.raises(ValueError, match=r"seeds must be an integer >= 0; got -1$"):
        check_axis("seeds", [0, -1, -2], NATURAL)


@pytest.mark.parametrize(
    "options, good, bad, message",
    [
        ({}, [1, 0.1], [0, -2, INF, NAN, True, "1"], "lr must be a finite number > 0"),
        ({"allow_zero": True}, [0, 0.0, 3], [-1, INF, NAN], "lr must be a finite number >= 0"),
        ({"allow_inf": True}, [INF, 2], [0, -INF, NAN], r"lr must be a number > 0 \(or inf\)"),
    ],
)
def test_check_positive(options, good, bad, message):
    for value in good:
        check_positive(**options, lr=value)
    for value in bad:
        with pytest.raises(ValueError, match=message):
            check_positive(**options, lr=value)


def test_check_positive_names_the_first_bad_value_of_several():
    with pytest.raises(ValueError, match="^C must"):
        check_positive(eta=0.1, C=0.0, lam=-1.0)


def test_check_per_run_takes_one_number_or_one_per_run():
    check_per_run("C", 1.0)
    check_per_run("C", torch.tensor([0.5, 1.0, 2.0]))
    check_per_run("C", [0.5, INF], allow_inf=True)
    check_per_run("C", torch.tensor([0.0, 1.0]), allow_zero=True)
    for value in (0.0, torch.tensor([1.0, 0.0]), [1.0, INF], [NAN], torch.tensor([1.0, -1.0])):
        with pytest.raises(ValueError, match="C must be finite and > 0"):
            check_per_run("C", value)
    with pytest.raises(ValueError, match="C must be > 0"):
        check_per_run("C", [-INF], allow_inf=True)


def test_check_at_least_is_strict_unless_asked():
    check_at_least(2, kappa=2.5)
    check_at_least(2, strict=False, kappa=2)
    with pytest.raises(ValueError, match="kappa must be a finite number > 2; got 2"):
        check_at_least(2, kappa=2)
    for value in (1.9, INF, NAN, True):
        with pytest.raises(ValueError, match="kappa must be a finite number >= 2"):
            check_at_least(2, strict=False, kappa=value)


def test_check_probability_is_open_unless_one_is_included():
    check_probability(delta=1e-5)
    check_probability(include_one=True, q=1.0)
    for value in (0, 1, 1.5, NAN, True):
        with pytest.raises(ValueError, match=r"delta must be in the open interval \(0, 1\)"):
            check_probability(delta=value)
    with pytest.raises(ValueError, match=r"q must be in \(0, 1\]; got 0"):
        check_probability(include_one=True, q=0)


def test_check_integer_refuses_floats_and_bools_below_or_above_the_minimum():
    check_integer(steps=1)
    check_integer(minimum=0, warmup=0)
    for value in (0, 2.0, True, None):
        with pytest.raises(ValueError, match="steps must be an integer >= 1"):
            check_integer(steps=value)


def test_check_choice_lists_the_choices():
    check_choice("direction", "sphere", ("gaussian", "sphere"))
    with pytest.raises(
        ValueError, match=r"direction must be one of \('gaussian', 'sphere'\); got 'ball'"
    ):
        check_choice("direction", "ball", ("gaussian", "sphere"))
