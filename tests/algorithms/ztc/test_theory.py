"""Zhang–Tran–Cutkosky's theory as pure functions (docs/papers.md, ZTC §5): the paper's ρ through the
zCDP conversion, and the variance bound of Lemma 4.8."""

import pytest

from dpnc.algorithms.ztc.theory import paper_rho, variance_bound
from dpnc.privacy import rho_to_epsilon


def test_paper_rho_round_trips_through_the_zcdp_conversion():
    rho = paper_rho(2.0, 1e-6)
    assert rho_to_epsilon(rho**2 / 2, 1e-6) == pytest.approx(2.0, rel=1e-9)


def test_variance_bound_reduces_to_lemma_4_8_and_grows_with_fewer_directions():
    assert variance_bound(10, 1.0, 50, 51, 1) == pytest.approx(160 / 51 + 640 / 50)
    assert variance_bound(10, 1.0, 50, 51, 1, m=1) > variance_bound(10, 1.0, 50, 51, 1, m=10)
