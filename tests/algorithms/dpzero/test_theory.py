"""docs/papers.md, DPZero §5.14: the theorem parameter helpers match the closed forms."""

import math

import pytest

from dpnc.algorithms.base import Setting
from dpnc.algorithms.dpzero import DPGD, DPGD0th, DPZero, MeZO
from dpnc.algorithms.dpzero.theory import calibrate_noise, dpgd0th_from_theory, dpzero_from_theory
from dpnc.privacy import dpzero_sigma
from dpnc.privacy.budget import Budget
from dpnc.problems.base import Constants

N, D, R, L, ELL, EPS, DELTA = 10_000, 100, 5.0, 1.0, 1.0, 2.0, 1e-6
LG = math.log(math.e + EPS / DELTA)
SETTING, BUDGET = (
    Setting(Constants(L0=L, L1=ELL), N, D),
    Budget(EPS, DELTA),
)  # L = L0 (Lipschitz), ℓ = L1


def test_theorem1():
    p = dpgd0th_from_theory(n=N, d=D, L=L, ell=ELL, epsilon=EPS, delta=DELTA)
    assert p.theorem == "Theorem 1"
    assert p.eta == pytest.approx(1 / (4 * ELL * D))
    assert p.T == int(N * EPS / math.sqrt(D * LG))
    assert p.C == L * D
    assert p.lam == pytest.approx((4 * L / (ELL * D)) * math.sqrt(math.sqrt(D * LG) / (N * EPS)))
    # The noise multiplier is the paper's σ over Δ = 2C/n.
    assert p.noise_multiplier * 2 * p.C / N == pytest.approx(dpzero_sigma(p.C, N, p.T, EPS, DELTA))


def test_theorem2():
    p = dpgd0th_from_theory(n=N, d=D, L=L, ell=ELL, epsilon=EPS, delta=DELTA, r=R)
    assert p.theorem == "Theorem 2"
    assert p.eta == pytest.approx(1 / (4 * ELL * (R + 2)))
    assert p.T == int(N * (R + 2) * EPS / (D * math.sqrt(R * LG)))
    assert p.lam == pytest.approx((4 * L / (ELL * D)) * math.sqrt(math.sqrt(R * LG) / (N * EPS)))


def test_theorem3_and_its_no_clip_condition():
    p = dpzero_from_theory(n=N, d=D, r=R, L=L, ell=ELL, epsilon=EPS, delta=DELTA)
    L_tilde = L * math.sqrt(
        math.log(2 * math.sqrt(2 * math.pi) * D * (R + 2) * N**3 * EPS**2 / (R * LG))
    )
    assert p.theorem == "Theorem 3"
    assert p.C == pytest.approx(4 * L_tilde)
    assert p.T == int(N * (R + 2) * EPS / (4 * math.sqrt(R * LG)))
    assert p.lam == pytest.approx(
        min(
            4 * (2 - math.sqrt(2)) * L_tilde,
            (L / math.sqrt(D)) * math.sqrt(math.sqrt(R * LG) / (N * EPS)),
        )
        / (ELL * D)
    )
    C0 = 2 * math.sqrt(2) * L_tilde  # C₀² = 8L²·log(…), Appendix E
    assert p.C >= C0 + ELL * p.lam * D / 2 - 1e-12


def test_corollaries_f2_f3_f4():
    kappa = 10.0
    f2 = dpgd0th_from_theory(n=N, d=D, L=L, ell=ELL, epsilon=EPS, delta=DELTA, kappa=kappa)
    assert f2.theorem == "Corollary F.2"
    assert f2.T == int(8 * kappa * D * math.log(N**2 * EPS**2 / (kappa * D**3 * LG)))
    assert f2.lam == pytest.approx((2 * L / ELL) * math.sqrt(LG) / (N * EPS))
    f3 = dpgd0th_from_theory(n=N, d=D, L=L, ell=ELL, epsilon=EPS, delta=DELTA, r=R, kappa=kappa)
    assert f3.theorem == "Corollary F.3"
    assert f3.T == int(8 * kappa * (R + 2) * math.log(N**2 * EPS**2 / (kappa * R * D**2 * LG)))
    f4 = dpzero_from_theory(n=N, d=D, r=R, L=L, ell=ELL, epsilon=EPS, delta=DELTA, kappa=kappa)
    L_tilde = (
        8
        * L
        * math.sqrt(
            math.log(32 * math.sqrt(2 * math.pi) * kappa * N**3 * D * (R + 2) * EPS**2 / (R * LG))
        )
    )
    assert f4.theorem == "Corollary F.4" and f4.C == pytest.approx(L_tilde / 2)
    assert f4.T == int(8 * kappa * (R + 2) * math.log(N**2 * EPS**2 / (kappa * R * LG)))
    assert f4.lam == pytest.approx(
        min((2 - math.sqrt(2)) * L_tilde, (4 * L / math.sqrt(D)) * math.sqrt(R * LG) / (N * EPS))
        / (2 * ELL * D)
    )


def test_T_is_at_least_one():
    # Remark F.6: tiny n makes the formula's T < 1.
    p = dpzero_from_theory(n=50, d=D, r=R, L=L, ell=ELL, epsilon=0.01, delta=DELTA)
    assert 50 * (R + 2) * 0.01 / (4 * math.sqrt(R * math.log(math.e + 0.01 / DELTA))) < 1
    assert p.T == 1


def test_theorems_refuse_settings_outside_their_range():
    with pytest.raises(ValueError, match="Theorem 3 does not apply"):
        dpzero_from_theory(n=1, d=1, r=1.0, L=L, ell=ELL, epsilon=1e-3, delta=0.5)
    with pytest.raises(ValueError, match="Corollary F.2 does not apply"):
        dpgd0th_from_theory(n=10, d=D, L=L, ell=ELL, epsilon=EPS, delta=DELTA, kappa=10.0)


def test_calibrate_noise_modes():
    paper = calibrate_noise("paper", 2.0, 1e-5, 1000, 1024)
    assert paper == pytest.approx(2 * math.sqrt(2 * 1000 * math.log(math.e + 2 / 1e-5)) / 2)
    rdp, pld = (
        calibrate_noise("rdp", 2.0, 1e-5, 1000, 1024),
        calibrate_noise("pld", 2.0, 1e-5, 1000, 1024),
    )
    assert pld < rdp < paper
    # Minibatch RDP mode is the published code's recipe (DPZero §1.5's table).
    assert calibrate_noise("rdp", 2.0, 1e-5, 10_000, 1024, batch_size=64) == pytest.approx(
        13.5156, abs=5e-5
    )
    with pytest.raises(ValueError, match="full batch only"):
        calibrate_noise("paper", 2.0, 1e-5, 10, 1024, batch_size=64)
    with pytest.raises(
        ValueError, match=r"accounting must be one of \('paper', 'rdp', 'pld'\); got 'prv'"
    ):
        calibrate_noise("prv", 2.0, 1e-5, 10, 1024)


def test_from_theory_builds_the_configs_the_theorems_prescribe():
    """Each config's from_theory is the theorem calculator's parameters as a frozen Algorithm."""
    for config, p in (
        (
            DPZero.from_theory(SETTING, BUDGET, r=R),
            dpzero_from_theory(n=N, d=D, r=R, L=L, ell=ELL, epsilon=EPS, delta=DELTA),
        ),
        (
            DPGD0th.from_theory(SETTING, BUDGET, r=R),
            dpgd0th_from_theory(n=N, d=D, L=L, ell=ELL, epsilon=EPS, delta=DELTA, r=R),
        ),
    ):
        assert (config.eta, config.lam, config.C, config.noise_multiplier, config.steps) == (
            p.eta,
            p.lam,
            p.C,
            p.noise_multiplier,
            p.T,
        )
        assert config.family == "dpzero" and config.paper is False
    sphere = DPZero.from_theory(SETTING, BUDGET, r=R, direction="sphere")
    assert sphere.direction == "sphere"
    gd = DPGD.from_theory(SETTING, BUDGET, steps=100)
    assert (
        gd.C == L
        and gd.steps == 100
        and gd.noise_multiplier == calibrate_noise("paper", EPS, DELTA, 100, N)
    )
    mezo = MeZO.from_theory()
    assert (mezo.eta, mezo.lam, mezo.steps) == (
        1e-6,
        1e-3,
        10_000,
    )  # the paper's MeZO baseline (DPZero §2.6)
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        DPGD.from_theory(SETTING, BUDGET, steps=0)


def test_the_papers_claim_is_flagged_where_its_lemma_is_false():
    # Lemma 2.2's formula σ = 2Δ√(2T log(e + ε/δ))/ε inverted for ε. Where σ/Δ is tiny (a huge
    # budget) the ε it gives is false: T releases at m are one Gaussian at m/√T, whose δ(ε)
    # (dp-accounting) is 1 there. Before, the demo at ε = 1e6 printed "paper's claim: ε = 1.77e+04"
    # beside a ledger of 1e6, unflagged.
    from dpnc.algorithms.dpzero import paper_claim
    from dpnc.privacy.calibrate import advanced_composition_epsilon

    assert (
        paper_claim(13.5, 1000, 1e-5)
        == f"ε = {advanced_composition_epsilon(13.5, 1000, 1e-5):.4g} by "
        "advanced composition (Lemma 2.2)"
    )  # holds: printed as it is
    false = paper_claim(0.00128, 3, 1e-5)
    assert (
        false.startswith("ε = 1.766e+04 by advanced composition")
        and "false here: these releases have δ" in false
    )
