"""dpnc.algorithms.registry: every algorithm class once, under its own name, and each name in the
family its class declares."""

import inspect

from dpnc.algorithms import dpzero, klt, menart, ztc
from dpnc.algorithms.base import Algorithm
from dpnc.algorithms.registry import ALGORITHMS, FAMILIES


def test_each_name_is_its_class_s_own_and_each_class_is_listed_once():
    assert all(cls.name == name for name, cls in ALGORITHMS.items())
    assert len(set(ALGORITHMS.values())) == len(ALGORITHMS)
    assert all(issubclass(cls, Algorithm) for cls in ALGORITHMS.values())


def test_families_partition_the_names_by_the_class_s_family():
    listed = [name for members in FAMILIES.values() for name in members]
    assert sorted(listed) == sorted(ALGORITHMS)
    for family, members in FAMILIES.items():
        assert all(ALGORITHMS[name].family == family for name in members)


def test_every_concrete_algorithm_of_the_families_packages_is_registered():
    exported = {
        cls
        for package in (dpzero, klt, menart, ztc)
        for _, cls in inspect.getmembers(package, inspect.isclass)
        if issubclass(cls, Algorithm) and "name" in vars(cls)
    }
    assert exported <= set(ALGORITHMS.values())
