import math

import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from hypothesis import given, settings
from hypothesis import strategies as st

from dpnc.privacy import (
    ZCDP,
    Accountant,
    Gaussian,
    TreeAggregated,
    dpzero_sigma,
    epsilon_for,
    klt_tree_sigma,
    mean_sensitivity,
    noise_multiplier,
    opacus_noise_multiplier,
    zcdp_gaussian_sigma,
    ztc_tree_sigma,
)

# docs/papers.md, DPZero §1.5: opacus 1.4.0 multipliers, δ = 1e-5, T = 10 000, B = 64.
DPZERO_TABLE = [
    (1024, 13.5156, 5.1562),
    (1536, 9.0234, 3.4814),
    (2560, 5.4492, 2.1680),
    (3072, 4.5703, 1.8481),
]


@pytest.mark.parametrize("n,mult2,mult6", DPZERO_TABLE)
def test_opacus_recipe_reproduces_the_spec_table(n, mult2, mult6):
    q = 64 / n
    for eps, expected in ((2.0, mult2), (6.0, mult6)):
        sigma = opacus_noise_multiplier(eps, 1e-5, q, 10_000)
        assert sigma == pytest.approx(expected, abs=5e-5)
        spent = epsilon_for(sigma, q, 10_000, 1e-5, accountant="rdp")
        assert spent <= eps and eps - spent <= 0.01 + 1e-3  # opacus's tolerance


def test_opacus_noise_std_column():
    assert 2 * opacus_noise_multiplier(2.0, 1e-5, 0.0625, 10_000) / 64 == pytest.approx(
        0.42236, abs=1e-5
    )


@given(st.floats(0.2, 10), st.floats(0.005, 1.0), st.integers(1, 5000))
@settings(max_examples=15, deadline=None)
def test_rdp_calibration_round_trips(eps, q, steps):
    sigma = noise_multiplier(eps, 1e-5, q, steps, accountant="rdp")
    spent = epsilon_for(sigma, q, steps, 1e-5, accountant="rdp")
    assert spent <= eps
    assert spent == pytest.approx(eps, rel=1e-4)


@pytest.mark.parametrize("eps,q,steps", [(2.0, 0.0625, 10_000), (1.0, 1.0, 100), (4.0, 0.05, 1000)])
def test_pld_calibration_round_trips_and_beats_rdp(eps, q, steps):
    pld = noise_multiplier(eps, 1e-5, q, steps, accountant="pld")
    assert epsilon_for(pld, q, steps, 1e-5, accountant="pld") <= eps
    assert epsilon_for(pld, q, steps, 1e-5, accountant="pld") == pytest.approx(eps, rel=1e-4)
    assert pld < noise_multiplier(eps, 1e-5, q, steps, accountant="rdp")


def test_pld_calibration_is_cached(monkeypatch):
    """A repeated calibration asks the accountant nothing: it is served from the cache."""
    from dpnc.privacy import calibrate

    calls = []
    original = calibrate.epsilon_for
    monkeypatch.setattr(
        calibrate, "epsilon_for", lambda *a, **k: calls.append(a) or original(*a, **k)
    )
    first = noise_multiplier(3.0, 1e-6, 0.05, 2000, accountant="pld")
    computed = len(calls)
    assert computed > 0  # the first call did the root-finding (no other test asks for this budget)
    assert noise_multiplier(3.0, 1e-6, 0.05, 2000, accountant="pld") == first
    assert noise_multiplier(3.0, 1e-6, 0.05, 2000, accountant="pld", relation="add/remove") == first
    assert len(calls) == computed


def test_a_fresh_pld_calibration_decides_in_a_few_calls_on_the_accountants_grid(monkeypatch):
    """The search runs on a 10× coarser grid first, then one secant step along the coarse slope: at
    most 3 calls on the accountant's own grid (it took 11 before, 44 s of CPU at this q), and the
    answer is still the smallest multiplier to the tolerance, as the accountant itself measures
    it."""
    from dpnc.privacy import calibrate

    fine = []
    original = calibrate.epsilon_for
    monkeypatch.setattr(
        calibrate,
        "epsilon_for",
        lambda *a, **k: (
            (fine.append(a) if k.get("accountant") == "pld" else None) or original(*a, **k)
        ),
    )
    sigma = noise_multiplier(2.5, 1e-6, 0.004, 3, accountant="pld")  # a question no other test asks
    assert 1 <= len(fine) <= 3
    spent = original(sigma, 0.004, 3, 1e-6, accountant="pld")
    assert 2.5 * math.exp(-1e-5) <= spent <= 2.5


def test_epsilon_is_monotone():
    base = epsilon_for(5.0, 0.05, 1000, 1e-5)
    assert epsilon_for(6.0, 0.05, 1000, 1e-5) < base
    assert epsilon_for(5.0, 0.05, 2000, 1e-5) > base
    assert epsilon_for(5.0, 0.10, 1000, 1e-5) > base


def test_full_batch_rdp_is_alpha_over_two_sigma_squared():
    sigma, steps, delta = 3.0, 40, 1e-6
    orders = np.array(rdp_lib.DEFAULT_RDP_ORDERS)
    expected, _ = rdp_lib.compute_epsilon(orders, steps * orders / (2 * sigma**2), delta)
    assert epsilon_for(sigma, 1.0, steps, delta) == pytest.approx(expected, rel=1e-12)


# --- DPZero §1.4 -------------------------------------------------------------------------


def test_dpzero_sigma_reference_values():
    assert math.log(math.e + 2 / 1e-6) == pytest.approx(14.50866, abs=1e-5)
    for T, expected in ((10, 0.0034069), (1000, 0.0340689), (5120, 0.0770892)):
        assert dpzero_sigma(1.0, 10_000, T, 2.0, 1e-6) == pytest.approx(expected, abs=5e-8)
    assert dpzero_sigma(1.0, 1024, 10_000, 2.0, 1e-5) == pytest.approx(0.965, abs=1e-3)


def test_dpzero_sigma_is_monotone():
    s = dpzero_sigma(1.0, 1000, 100, 1.0, 1e-5)
    assert (
        dpzero_sigma(1.0, 1000, 200, 1.0, 1e-5) > s and dpzero_sigma(2.0, 1000, 100, 1.0, 1e-5) > s
    )
    assert (
        dpzero_sigma(1.0, 2000, 100, 1.0, 1e-5) < s and dpzero_sigma(1.0, 1000, 100, 2.0, 1e-5) < s
    )


@pytest.mark.parametrize("T,eps,delta", [(10, 2.0, 1e-6), (1000, 2.0, 1e-6), (10_000, 6.0, 1e-5)])
def test_dpzero_sigma_is_private_by_the_accountant(T, eps, delta):
    # Advanced composition is conservative: exact accounting of the same releases spends less.
    C, n = 1.0, 10_000
    acct = Accountant("replace-one")
    acct.record(
        Gaussian(mean_sensitivity(C, n, "replace-one"), dpzero_sigma(C, n, T, eps, delta)), T
    )
    assert acct.epsilon(delta, "rdp") <= eps
    assert acct.epsilon(delta, "pld") <= acct.epsilon(delta, "rdp")


# --- Zhang–Tran–Cutkosky tree noise (Cor 4.4; ZTC §6.2–6.3) --------------------------------


@pytest.mark.parametrize("T", [1, 2, 3, 4, 7, 8, 100, 1024])
def test_ztc_corrected_sigma_spends_exactly_rho(T):
    d, L, rho, B1 = 10, 2.0, 0.5, T + 1
    sigma = ztc_tree_sigma(d, L, rho, T, B1)
    s = max(2 * d * L / B1, 4 * d * L / T)
    acct = Accountant("replace-one")
    acct.record(TreeAggregated(Gaussian(s, sigma), leaves=T))
    assert acct.rho() == pytest.approx(ZCDP.from_rdp_rho(rho).rho, rel=1e-12)


def test_ztc_paper_sigma_formula_and_its_undercount():
    d, L, rho = 10, 2.0, 0.5
    for T in (4, 1024):
        sigma = ztc_tree_sigma(d, L, rho, T, T + 1, paper=True)
        assert sigma == pytest.approx(4 * math.sqrt(2 * math.log(T)) * d * L / (rho * T))
    acct = Accountant()
    acct.record(
        TreeAggregated(
            Gaussian(4 * d * L / 4, ztc_tree_sigma(d, L, rho, 4, 5, paper=True)), leaves=4
        )
    )
    assert acct.rho() > rho**2 / 2  # 2 ln 4 < 3 nodes: the printed σ overspends at T = 4
    with pytest.raises(ValueError, match=r"Cor 4.4 requires B1 >= T·B2/2 = 50; got B1=10"):
        ztc_tree_sigma(d, L, rho, 100, 10, paper=True)


# --- Kornowski–Liu–Talwar tree noise (KLT §2.1, Prop 2.5) -----------------------------------


@pytest.mark.parametrize("leaves", [1, 2, 5, 64, 1000])
@pytest.mark.parametrize("eps,delta", [(1.0, 1e-5), (4.0, 1e-6)])
def test_klt_tree_sigma_is_private_by_the_accountant(leaves, eps, delta):
    s = 0.3
    sigma = klt_tree_sigma(s, leaves, eps, delta)
    levels = math.floor(math.log2(leaves)) + 1
    assert sigma == pytest.approx(4 * s * math.sqrt(levels * math.log(1 / delta)) / eps)
    acct = Accountant()
    acct.record(TreeAggregated(Gaussian(s, sigma), leaves=leaves))
    assert acct.epsilon(delta, "rdp") <= eps


def test_klt_paper_depth_is_zero_for_one_leaf():
    assert klt_tree_sigma(1.0, 1, 1.0, 1e-5, paper=True) == 0.0
    assert klt_tree_sigma(1.0, 8, 1.0, 1e-5, paper=True) < klt_tree_sigma(1.0, 8, 1.0, 1e-5)


# --- Menart et al. §1.2 -----------------------------------------------------------------------


def test_zcdp_gaussian_sigma_spends_rho():
    for delta_s, rho in ((0.1, 0.5), (2.0, 0.01)):
        sigma = zcdp_gaussian_sigma(delta_s, rho)
        assert sigma == pytest.approx(delta_s / math.sqrt(2 * rho))
        acct = Accountant()
        acct.record(Gaussian(delta_s, sigma))
        assert acct.rho() == pytest.approx(rho)


@pytest.mark.parametrize(
    "call,message",
    [
        (
            lambda: noise_multiplier(2.0, 1e-5, 0.0, 10),
            r"sampling_rate must be in \(0, 1\]; got 0.0",
        ),
        (lambda: noise_multiplier(2.0, 1e-5, 0.1, 0), r"steps must be an integer >= 1; got 0"),
        (
            lambda: noise_multiplier(2.0, 1e-5, 0.1, 10, accountant="prv"),
            r"accountant must be one of",
        ),
        (
            lambda: noise_multiplier(-2.0, 1e-5, 0.1, 10),
            r"epsilon must be a finite number > 0; got -2.0",
        ),
        (
            lambda: epsilon_for(0.0, 0.1, 10, 1e-5),
            r"noise multiplier must be a finite number > 0; got 0.0",
        ),
        (lambda: dpzero_sigma(1.0, 0, 10, 1.0, 1e-5), r"n must be an integer >= 1; got 0"),
        (lambda: ztc_tree_sigma(0, 1.0, 1.0, 10, 11), r"d must be an integer >= 1; got 0"),
        (lambda: zcdp_gaussian_sigma(1.0, 0.0), r"rho must be > 0"),
    ],
)
def test_calibration_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
