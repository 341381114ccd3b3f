"""dpnc.options: each entry's options are checked when built, None leaves a default, names a class
does not hold are not read, and a noised run's clip is finite."""

import dataclasses
import math

import pytest

from dpnc.options import (
    ALL,
    DPFirstOrderOptions,
    DPZeroOptions,
    MeZOOptions,
    WrappedOptions,
    check_noised,
    check_options,
    option_field,
    option_names,
    options_of,
)

VALID = {"lr": 0.1, "clip": 1.0}  # the step size is required where a class holds it


def valid(cls, **values):
    """``cls``'s values: a valid lr and clip where it holds them, with ``values`` on top."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {**{k: v for k, v in VALID.items() if k in names}, **values}


def test_options_of_takes_its_fields_leaves_none_as_default_and_reads_nothing_else():
    options = options_of(
        DPZeroOptions,
        {"lr": 0.1, "clip": 2.0, "smoothing": None, "microbatch": 8, "batch_size": 4},
        noised=True,
    )
    assert options == DPZeroOptions(lr=0.1, clip=2.0)
    assert options.smoothing == 1e-3 and options.direction == "gaussian"


@pytest.mark.parametrize(
    "cls, values, message",
    [
        (MeZOOptions, {"lr": -0.1}, r"lr must be >= 0 and finite; got -0.1"),
        (MeZOOptions, {"smoothing": 0.0}, r"smoothing must be > 0 and finite; got 0.0"),
        (MeZOOptions, {"direction": "ball"}, r"direction must be one of \('gaussian', 'sphere'\)"),
        (MeZOOptions, {"seed": -1}, r"seed must be an integer >= 0 or None; got -1"),
        (MeZOOptions, {"cache_directions": 1}, r"cache_directions must be a bool; got 1"),
        (DPZeroOptions, {"clip": math.nan}, r"clip must be > 0 \(inf only without noise\)"),
        (WrappedOptions, {"microbatch": 0}, r"microbatch must be an integer >= 1; got 0"),
        (WrappedOptions, {"per_example": "rows"}, r"per_example must be one of"),
        (DPFirstOrderOptions, {"optimizer_kwargs": [1]}, r"optimizer_kwargs must be a dict"),
    ],
)
def test_a_bad_value_is_refused_when_built_naming_the_field_and_its_rule(cls, values, message):
    with pytest.raises(ValueError, match=message):
        cls(**valid(cls, **values))
    with pytest.raises(ValueError, match=message):
        options_of(cls, valid(cls, **values), noised=False)


def test_the_step_size_is_required_and_said_so():
    with pytest.raises(ValueError, match=r"lr must be the step size, a number >= 0 .*; got None"):
        options_of(MeZOOptions, {"lr": None}, noised=False)
    assert WrappedOptions(clip=1.0).per_example == "auto"  # an instance brings its own lr


def test_options_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DPZeroOptions(**VALID).clip = 2.0


def test_an_infinite_clip_is_taken_only_without_noise():
    unclipped = valid(DPZeroOptions, clip=math.inf)
    assert options_of(DPZeroOptions, unclipped, noised=False).clip == math.inf
    with pytest.raises(ValueError, match="clip must be finite when noise_multiplier > 0"):
        options_of(DPZeroOptions, unclipped, noised=True)
    check_noised(MeZOOptions(lr=0.1), noised=True)  # no clip at all: nothing to scale


def test_every_option_name_is_listed_once_with_its_help_and_rule():
    names = option_names()
    declared = {f.name for cls in ALL for f in dataclasses.fields(cls)}
    assert len(names) == len(set(names)) and set(names) == declared
    for name in names:
        field = option_field(name)
        assert field.name == name and field.metadata["help"].strip() and "rule" in field.metadata
    assert option_field("direction").metadata["choices"] == ("gaussian", "sphere")
    assert option_field("microbatch").metadata["minimum"] == 1


def test_check_options_applies_each_names_rule():
    check_options({"lr": 0.0, "clip": 1.0, "per_example": "vmap", "seed": None})
    with pytest.raises(ValueError, match="per_example must be one of"):
        check_options({"lr": 0.1, "per_example": "rows"})
    with pytest.raises(KeyError):
        check_options({"batch_size": 4})
