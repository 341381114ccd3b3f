"""dpnc.tier.registry: the names each front door offers, the lookup that lists them when a name is
wrong, the entry of a user's torch optimizer, and the refusal of an option the entry does not take."""

import pytest
import torch

from dpnc.options import DPFirstOrderOptions, WrappedOptions
from dpnc.tier.first_order import DPOptimizer
from dpnc.tier.registry import OPTIMIZERS, names, refuse_others, spec, wrapping


def test_names_filter_by_door_privacy_and_order_in_registry_order():
    every = tuple(OPTIMIZERS)
    for door in ("make_private", "trainer"):
        offered = names(door)
        assert offered == tuple(n for n in every if n in offered)  # registry order
        assert set(names(door, private=True)) | set(names(door, private=False)) == set(offered)
        assert set(names(door, order=0)) | set(names(door, order=1)) == set(offered)
    assert all(OPTIMIZERS[n].private for n in names("trainer", private=True))
    assert all(OPTIMIZERS[n].order == 0 for n in names("make_private", order=0))
    assert "dp-sgd" in names("make_private") and "dp-sgd" not in names("trainer")
    assert "adamw" in names("trainer") and "adamw" not in names("make_private")


def test_spec_names_what_the_door_offers_when_a_name_is_wrong():
    assert spec("dpzero") is OPTIMIZERS["dpzero"]
    assert spec("dp-sgd", "make_private") is OPTIMIZERS["dp-sgd"]
    with pytest.raises(ValueError, match=r"optimizer must be one of \[.*'dp-adamw'.*\]; got 'sgd'"):
        spec("sgd")
    with pytest.raises(ValueError, match=r"got 'dp-sgd'"):
        spec("dp-sgd", "trainer")


def test_a_users_optimizer_is_wrapped_as_a_private_first_order_entry():
    by_class = wrapping(torch.optim.RMSprop)
    by_instance = wrapping(torch.optim.RMSprop, torch.optim.RMSprop([torch.zeros(1)], lr=0.1))
    for entry in (by_class, by_instance):
        assert entry.cls is DPOptimizer and entry.private and entry.order == 1
        assert entry.help == "DP-RMSprop" and entry.doors == ("make_private",)
    assert by_class.options is DPFirstOrderOptions  # lr and its arguments come from the door
    assert by_instance.options is WrappedOptions  # the instance brings its own


def test_an_option_the_entry_does_not_take_is_refused_naming_who_takes_it():
    refuse_others("dp-sgd", OPTIMIZERS["dp-sgd"], {"clip": 1.0, "smoothing": None})
    with pytest.raises(
        ValueError, match=r"smoothing must be None for optimizer='dp-sgd': .* zeroth-order"
    ):
        refuse_others("dp-sgd", OPTIMIZERS["dp-sgd"], {"smoothing": 1e-3})
    with pytest.raises(ValueError, match=r"microbatch must be None for optimizer='dpzero'"):
        refuse_others("dpzero", OPTIMIZERS["dpzero"], {"microbatch": 8})
