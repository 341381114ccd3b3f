"""dpnc.privacy.interpret: releases read as dp-accounting events, their ρ and names, and the
combinations it has no interpretation for, refused by the accountant naming them."""

import pytest
from dp_accounting import dp_event as dpe

from dpnc.privacy import (
    Accountant,
    DiscreteGaussian,
    ExponentialMechanism,
    FixedSize,
    Gaussian,
    NonPrivate,
    Poisson,
    Relation,
    Sampled,
    TreeAggregated,
    UnsupportedRelease,
    interpret,
)

R1, AR = "replace-one", "add/remove"


def test_the_interpreter_gives_dp_accounting_events():
    assert interpret.dp_event(Gaussian(2.0, 4.0), Relation.REPLACE_ONE) == dpe.GaussianDpEvent(2.0)
    assert interpret.dp_event(NonPrivate(), Relation.REPLACE_ONE) == dpe.NonPrivateDpEvent()
    assert interpret.dp_event(
        Sampled(Poisson(0.01), Gaussian(2.0, 4.0)), Relation.ADD_OR_REMOVE_ONE
    ) == dpe.PoissonSampledDpEvent(0.01, dpe.GaussianDpEvent(2.0))
    assert interpret.dp_event(
        TreeAggregated(Gaussian(1.0, 3.0), leaves=7), Relation.REPLACE_ONE
    ) == dpe.SelfComposedDpEvent(dpe.GaussianDpEvent(3.0), 3)
    assert interpret.rho(Sampled(Poisson(0.01), Gaussian(2.0, 4.0))) is None
    assert (
        interpret.describe(TreeAggregated(DiscreteGaussian(3, 9.0), leaves=2))
        == "TreeAggregated(DiscreteGaussian)"
    )
    # A tree of discrete Gaussian nodes: the generic rule (node releases composed).
    tree = TreeAggregated(DiscreteGaussian(3, 9.0), leaves=4)
    assert interpret.rho(tree) == pytest.approx(3 * 9 / (2 * 81))


@pytest.mark.parametrize(
    "release",
    [
        Sampled(Poisson(0.1), DiscreteGaussian(1, 2.0)),
        Sampled(FixedSize(10, 2), ExponentialMechanism(1.0)),
        TreeAggregated(Sampled(Poisson(0.1), Gaussian(1.0, 2.0)), leaves=4),
        Sampled(Poisson(0.5), TreeAggregated(Gaussian(1.0, 2.0), leaves=4)),
    ],
)
@pytest.mark.parametrize("relation", [R1, AR])
def test_combinations_without_an_interpretation_are_refused_naming_them(release, relation):
    assert interpret.relations(release) == frozenset()
    with pytest.raises(UnsupportedRelease, match=r"cannot interpret (Sampled|TreeAggregated)\("):
        Accountant(relation).record(release)
