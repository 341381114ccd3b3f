import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from hypothesis import given, settings
from hypothesis import strategies as st

from dpnc.privacy.budget import ZCDP, Budget, epsilon_to_rho, rdp_to_epsilon, rho_to_epsilon

rhos = st.floats(1e-4, 20, allow_nan=False)
deltas = st.floats(1e-12, 0.5, allow_nan=False)


def test_bun_steinke_closed_form():
    for rho, delta in [(0.5, 1e-5), (0.01, 1e-6), (3.0, 0.1)]:
        expected = rho + 2 * math.sqrt(rho * math.log(1 / delta))
        assert rho_to_epsilon(rho, delta, "bun-steinke") == pytest.approx(expected, rel=1e-15)


def test_zero_rho_is_zero_epsilon():
    assert rho_to_epsilon(0.0, 1e-5) == 0.0


@given(rhos, deltas)
@settings(max_examples=60, deadline=None)
def test_optimal_conversion_never_worse_than_bun_steinke(rho, delta):
    assert rho_to_epsilon(rho, delta) <= rho_to_epsilon(rho, delta, "bun-steinke") + 1e-12


@pytest.mark.parametrize("rho,delta", [(0.1, 1e-5), (0.5, 1e-6), (2.0, 1e-3)])
def test_optimal_conversion_matches_dp_accounting_on_a_dense_grid(rho, delta):
    # dp-accounting applies the same CKS conversion at the orders it is given; on a dense grid the
    # minimum over that grid approaches (from above) our continuous minimum.
    orders = np.linspace(1.02, 200, 200_000)
    acct = rdp_lib.RdpAccountant(orders=orders)
    acct.compose(dp_event.ZCDpEvent(rho))
    ours = rho_to_epsilon(rho, delta)
    assert ours <= acct.get_epsilon(delta) + 1e-9
    assert ours == pytest.approx(acct.get_epsilon(delta), rel=1e-6)


@given(rhos, deltas, st.floats(1.01, 10))
@settings(max_examples=60, deadline=None)
def test_conversions_are_monotone(rho, delta, factor):
    # Strictly increasing wherever ε > 0 (for large δ and small ρ the optimal ε is exactly 0).
    for method in ("optimal", "bun-steinke"):
        base = rho_to_epsilon(rho, delta, method)
        for bigger in (
            rho_to_epsilon(rho * factor, delta, method),
            rho_to_epsilon(rho, delta / factor, method),
        ):
            assert bigger > base if base > 0 else bigger >= base


@given(st.floats(0.01, 30), deltas)
@settings(max_examples=60, deadline=None)
def test_inverse_round_trips(epsilon, delta):
    for method in ("optimal", "bun-steinke"):
        rho = epsilon_to_rho(epsilon, delta, method)
        assert rho_to_epsilon(rho, delta, method) == pytest.approx(epsilon, rel=1e-9)
    # The optimal conversion affords a larger ρ for the same budget.
    assert epsilon_to_rho(epsilon, delta) >= epsilon_to_rho(epsilon, delta, "bun-steinke")


def test_bun_steinke_inverse_closed_form():
    eps, delta = 2.0, 1e-5
    L = math.log(1 / delta)
    assert epsilon_to_rho(eps, delta, "bun-steinke") == pytest.approx(
        (math.sqrt(L + eps) - math.sqrt(L)) ** 2
    )
    assert Budget(eps, delta).to_zcdp("bun-steinke").rho == pytest.approx(
        (math.sqrt(L + eps) - math.sqrt(L)) ** 2
    )


def test_iclr_rdp_convention():
    # (α, αρ²/2)-RDP for all α is (ρ²/2)-zCDP; ε(δ) = ρ²/2 + ρ√(2 ln 1/δ) (docs/papers.md, ZTC §1,
    # §5 property 10).
    z = ZCDP.from_rdp_rho(1.0)
    assert z.rho == 0.5 and z.rdp_rho == pytest.approx(1.0)
    eps = rho_to_epsilon(z.rho, math.exp(-1), "bun-steinke")
    assert eps == pytest.approx(0.5 + math.sqrt(2), abs=1e-12)
    assert round(eps, 4) == 1.9142 and eps <= 2 * 1.0 * math.sqrt(1.0)
    np.testing.assert_allclose(z.rdp([2, 3]), [1.0, 1.5])


def test_rdp_to_epsilon_matches_dp_accounting():
    orders = np.array([1.5, 2, 4, 8, 16, 32, 64])
    rdp = 0.05 * orders + 0.01
    ours, order = rdp_to_epsilon(orders, rdp, 1e-6)
    theirs, their_order = rdp_lib.compute_epsilon(orders, rdp, 1e-6)
    assert ours == pytest.approx(theirs, rel=1e-12) and order == their_order


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"epsilon": 0, "delta": 1e-5}, r"epsilon must be a finite number > 0; got 0"),
        ({"epsilon": -1.0, "delta": 1e-5}, r"epsilon must be a finite number > 0; got -1.0"),
        ({"epsilon": float("nan"), "delta": 1e-5}, r"epsilon must be a finite number > 0; got nan"),
        ({"epsilon": float("inf"), "delta": 1e-5}, r"epsilon must be a finite number > 0"),
        ({"epsilon": 1.0, "delta": 0}, r"delta must be in the open interval \(0, 1\); got 0"),
        ({"epsilon": 1.0, "delta": 1.0}, r"delta must be in the open interval \(0, 1\); got 1.0"),
        (
            {"epsilon": 1.0, "delta": float("nan")},
            r"delta must be in the open interval \(0, 1\); got nan",
        ),
        ({"epsilon": "two", "delta": 1e-5}, r"epsilon must be a number; got 'two'"),
        ({"epsilon": True, "delta": 1e-5}, r"epsilon must be a number; got True"),
    ],
)
def test_budget_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Budget(**kwargs)


def test_zcdp_and_conversions_reject_bad_input():
    with pytest.raises(ValueError, match=r"rho must be a finite number >= 0; got -0.1"):
        ZCDP(-0.1)
    with pytest.raises(
        ValueError, match=r"method must be one of \('optimal', 'bun-steinke'\); got 'mironov'"
    ):
        rho_to_epsilon(1.0, 1e-5, "mironov")
    with pytest.raises(ValueError, match=r"rdp values must be >= 0"):
        rdp_to_epsilon([2.0], [-1.0], 1e-5)
