"""The audit's power table (dpnc.audit.power.true_epsilon): σ/k's true ε is its own ledger's, the
claim at k = 1 and larger for every k > 1."""

import pytest

from dpnc.audit import MECHANISMS
from dpnc.audit.power import true_epsilon


@pytest.mark.parametrize("name", ["dpzero", "dpzero-poisson"])
def test_the_true_epsilon_of_sigma_over_k_grows_from_the_claim(name):
    claimed = MECHANISMS[name]().claim().epsilon
    assert true_epsilon(name, 1.0) == pytest.approx(claimed, rel=1e-9)
    spent = [true_epsilon(name, k) for k in (1.25, 1.5, 2.0)]
    assert claimed < spent[0] < spent[1] < spent[2]
