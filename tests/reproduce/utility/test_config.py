"""utility's configuration: bad values are refused, and the synthetic problems have public
constants and exact minimisers."""

import pytest
import torch

from dpnc_reproduce.utility.config import QUICK, UtilityConfig, instance


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="problems"):
        UtilityConfig(problems=("mnist",))
    with pytest.raises(ValueError, match="samples"):
        UtilityConfig(samples=(4,))
    assert UtilityConfig(samples=(50, 500)).sizes("logistic-cancer") == [50, 455]


# --- the synthetic problems with known minimisers -------------------------------------------------


@pytest.mark.parametrize("name", ["least-squares", "max-affine"])
def test_synthetic_problems_have_public_constants_and_exact_minimisers(name):
    config = QUICK
    first, second = instance(config, name, 70, 0), instance(config, name, 70, 1)
    for a, b in (
        (first.train.constants.L0, second.train.constants.L0),
        (first.Phi, second.Phi),
        (first.train.constants.L1, second.train.constants.L1),
        (first.train.constants.gamma, second.train.constants.gamma),
    ):
        assert a == b  # the same for every draw: not read off the data
    assert not first.classification and first.smooth == (name == "least-squares")
    for inst in (first, second):
        gap = float(inst.train.value(inst.x0) - inst.train.value(inst.reference))
        assert 0 < gap <= inst.Phi  # Φ bounds F(x0) − F(x̂)
        around = inst.reference + 1e-3 * torch.randn(
            20, inst.train.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(0)
        )
        assert (
            inst.train.value(around) >= inst.train.value(inst.reference) - 1e-12
        ).all()  # x̂ minimises
    assert instance(config, "least-squares", 70, 0).train.constants.L1 == 1.0
