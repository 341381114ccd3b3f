"""RandomStopping: Papernot & Steinke's Theorem 2 in the RDP accountant, against a plain-numpy
reference."""

import json
import math

import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from scipy import stats

from dpnc.privacy import (
    Accountant,
    Gaussian,
    NoiseSource,
    NonPrivate,
    Poisson,
    RandomStopping,
    Release,
    Sampled,
    UnsupportedRelease,
    tnb_mean,
    tnb_pmf,
)
from dpnc.tune import draw_repetitions

DELTA = 1e-6
ORDERS = np.asarray(rdp_lib.DEFAULT_RDP_ORDERS, dtype=float)


# --- an independent reference: Theorem 2 for Gaussian base mechanisms, in numpy -------------------


def gaussian_rdp(orders, *parts):
    """RDP of composed Gaussians: λ·Σ count·Δ²/(2σ²), for parts (Δ, σ, count)."""
    return np.asarray(orders, dtype=float) * sum(c * d**2 / (2 * s**2) for d, s, c in parts)


def expected_k(eta, gamma):
    if eta == 0:
        return (1 / gamma - 1) / math.log(1 / gamma)
    return eta * (1 - gamma) / (gamma * (1 - gamma**eta))


def theorem2(base, eta, gamma):
    """ε'(λ) = ε(λ) + min over λ̂ ∈ {1} ∪ orders of (1+η)(1 − 1/λ̂)ε(λ̂) + (1+η)log(1/γ)/λ̂, + log
    E[K]/(λ − 1)."""
    hats = [(1 + eta) * math.log(1 / gamma)]  # λ̂ = 1: (1 − 1/λ̂) = 0
    hats += [
        (1 + eta) * (1 - 1 / h) * e + (1 + eta) * math.log(1 / gamma) / h
        for h, e in zip(ORDERS, base)
    ]
    return base + min(hats) + math.log(expected_k(eta, gamma)) / (ORDERS - 1)


def geometric_form(base):
    """The authors' geometric (η = 1) statement, written their way: ε + 2(1 − 1/λ̂)ε̂ + (2/λ̂ + 1/(λ
    − 1))log(1/γ)."""

    def at(gamma):
        out = []
        for lam, e in zip(ORDERS, base):
            cands = [
                e + 2 * (1 - 1 / h) * eh + (2 / h + 1 / (lam - 1)) * math.log(1 / gamma)
                for h, eh in zip([1.0, *ORDERS], [base[0], *base])
            ]
            out.append(min(cands))
        return np.array(out)

    return at


def ledger(*parts):
    return tuple((Gaussian(d, s), c) for d, s, c in parts)


@pytest.mark.parametrize("eta", [0.0, 0.5, 1.0, 3.0, -0.5])
@pytest.mark.parametrize("gamma", [0.02, 0.3])
def test_rdp_curve_and_epsilon_match_theorem_2_computed_independently(eta, gamma):
    run, score = (
        (0.01, 0.05, 300),
        (0.04, 0.2, 1),
    )  # (Δ, σ, count): T Gaussian steps and one score release
    acct = Accountant()
    acct.record(RandomStopping((ledger(run, score),), eta, gamma))
    base = gaussian_rdp(ORDERS, run, score)
    ref = theorem2(base, eta, gamma)
    orders, curve = acct.rdp()
    np.testing.assert_allclose(orders, ORDERS)
    np.testing.assert_allclose(curve, ref, rtol=1e-9)
    eps_ref = rdp_lib.compute_epsilon(list(ORDERS), ref, DELTA)[0]
    assert acct.epsilon(DELTA) == pytest.approx(eps_ref, rel=1e-9)
    one = Accountant()
    one.record(Gaussian(*run[:2]), run[2])
    one.record(Gaussian(*score[:2]))
    assert acct.epsilon(DELTA) > one.epsilon(DELTA)  # tuning costs more than one run …
    assert np.all(curve > one.rdp()[1])


def test_geometric_case_matches_the_authors_own_form():
    base = gaussian_rdp(ORDERS, (1.0, 4.0, 10))
    for gamma in (0.01, 0.1, 0.5):
        acct = Accountant()
        acct.record(RandomStopping((ledger((1.0, 4.0, 10)),), 1, gamma))
        np.testing.assert_allclose(acct.rdp()[1], geometric_form(base)(gamma), rtol=1e-9)


def test_tuning_overhead_is_a_constant_not_m_fold_composition():
    # … but far less than running all m = 20 candidates: E[K] = 10 repetitions for η = 1, γ = 0.1.
    parts = ((0.01, 0.05, 300), (0.04, 0.2, 1))
    tuned, one, all20 = Accountant(), Accountant(), Accountant()
    tuned.record(RandomStopping((ledger(*parts),) * 20, 1, 0.1))
    for acct, times in ((one, 1), (all20, 20)):
        for d, s, c in parts:
            acct.record(Gaussian(d, s), c * times)
    assert one.epsilon(DELTA) < tuned.epsilon(DELTA) < all20.epsilon(DELTA)


def test_base_mechanism_is_the_worst_candidate():
    cheap, dear = ledger((1.0, 8.0, 5)), ledger((1.0, 2.0, 5), (1.0, 10.0, 1))
    both, alone = Accountant(), Accountant()
    both.record(RandomStopping((cheap, dear, cheap), 0, 0.05))
    alone.record(RandomStopping((dear,), 0, 0.05))
    np.testing.assert_allclose(both.rdp()[1], alone.rdp()[1], rtol=1e-12)
    ref = theorem2(gaussian_rdp(ORDERS, (1.0, 2.0, 5), (1.0, 10.0, 1)), 0, 0.05)
    np.testing.assert_allclose(both.rdp()[1], ref, rtol=1e-9)


def test_composes_with_other_releases_additively():
    acct = Accountant()
    acct.record(Gaussian(1.0, 5.0), 3)
    acct.record(RandomStopping((ledger((1.0, 6.0, 4)),), 1, 0.2))
    ref = gaussian_rdp(ORDERS, (1.0, 5.0, 3)) + theorem2(
        gaussian_rdp(ORDERS, (1.0, 6.0, 4)), 1, 0.2
    )
    np.testing.assert_allclose(acct.rdp()[1], ref, rtol=1e-9)


# --- the distribution of K ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "eta,gamma", [(0.0, 0.05), (0.5, 0.1), (1.0, 0.3), (2.0, 0.2), (-0.5, 0.1)]
)
def test_tnb_pmf_sums_to_one_and_has_the_closed_form_mean(eta, gamma):
    p = np.array(tnb_pmf(eta, gamma, 5000))
    k = np.arange(1, p.size + 1)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert (k * p).sum() == pytest.approx(expected_k(eta, gamma), rel=1e-10)
    assert tnb_mean(eta, gamma) == pytest.approx(expected_k(eta, gamma), rel=1e-12)
    assert RandomStopping(((),), eta, gamma).expected_repetitions == pytest.approx(
        expected_k(eta, gamma), rel=1e-12
    )


def test_special_cases_are_the_logarithmic_and_geometric_laws():
    gamma, k = 0.2, np.arange(1, 40)
    np.testing.assert_allclose(tnb_pmf(1.0, gamma, 39), gamma * (1 - gamma) ** (k - 1), rtol=1e-12)
    np.testing.assert_allclose(
        tnb_pmf(0.0, gamma, 39), (1 - gamma) ** k / (k * math.log(1 / gamma)), rtol=1e-12
    )
    assert tnb_mean(1.0, gamma) == pytest.approx(1 / gamma)


@pytest.mark.parametrize(
    "eta,gamma,seed", [(0.0, 0.05, 1), (0.5, 0.1, 2), (1.0, 0.3, 3), (2.0, 0.2, 4)]
)
def test_sampler_frequencies_pass_a_chi_square_test_against_the_pmf(eta, gamma, seed):
    n = 20_000
    noise = NoiseSource.for_testing(seed)
    draws = np.array([draw_repetitions(eta, gamma, noise) for _ in range(n)])
    p = np.array(tnb_pmf(eta, gamma, 10_000))
    # Bins k = 1..k* with expected count ≥ 5 each, the tail k > k* merged into one more bin.
    kstar = int(np.nonzero(n * p >= 5)[0].max()) + 1
    observed = np.array([np.sum(draws == k) for k in range(1, kstar + 1)] + [np.sum(draws > kstar)])
    expected = n * np.append(p[:kstar], 1 - p[:kstar].sum())
    chi2 = ((observed - expected) ** 2 / expected).sum()
    threshold = stats.chi2.ppf(0.999, df=observed.size - 1)  # a correct sampler fails 1 in 1000
    assert chi2 < threshold, (chi2, threshold)
    # and the mean, within 5 standard errors (variance from the pmf)
    k = np.arange(1, p.size + 1)
    var = (k**2 * p).sum() - expected_k(eta, gamma) ** 2
    assert abs(draws.mean() - expected_k(eta, gamma)) < 5 * math.sqrt(var / n)


def test_sampler_is_not_driven_by_a_public_seed():
    a, b = NoiseSource(), NoiseSource()
    assert [draw_repetitions(0.0, 0.01, a) for _ in range(20)] != [
        draw_repetitions(0.0, 0.01, b) for _ in range(20)
    ]


# --- the record -----------------------------------------------------------------------------------


def test_pld_and_zcdp_refuse_it_naming_rdp():
    acct = Accountant()
    acct.record(RandomStopping((ledger((1.0, 5.0, 2)),), 1, 0.1))
    with pytest.raises(UnsupportedRelease, match="rdp"):
        acct.epsilon(DELTA, "pld")
    with pytest.raises(UnsupportedRelease, match="not zCDP"):
        acct.rho()
    report = acct.report(DELTA)
    assert (
        report.epsilon_pld is None
        and report.rho is None
        and report.epsilon_rdp == acct.epsilon(DELTA)
    )
    from dpnc.privacy import interpret

    with pytest.raises(UnsupportedRelease, match="RDP"):
        interpret.pld(RandomStopping((ledger((1.0, 5.0, 2)),), 1, 0.1), "replace-one", 1, 1e-4)


def test_json_round_trip_keeps_the_record_and_its_cost():
    rs = RandomStopping((ledger((1.0, 5.0, 2), (0.5, 3.0, 1)), ledger((2.0, 9.0, 7))), 0.5, 0.1)
    acct = Accountant()
    acct.record(rs)
    again = Accountant.from_json(json.dumps(json.loads(acct.to_json())))
    assert again.ledger[0].release == rs
    assert again.epsilon(DELTA) == acct.epsilon(DELTA)
    assert Release.from_dict(rs.to_dict()) == rs
    assert hash(Release.from_dict(rs.to_dict())) == hash(rs)


def test_a_non_secret_part_makes_the_record_not_secret():
    rs = RandomStopping((((Gaussian(1.0, 5.0, secret=False), 3),),), 1, 0.1)
    assert not rs.secret and rs.candidates[0][0][0].secret  # the flag lives on the outer record
    acct = Accountant()
    acct.record(rs)
    assert not acct.report(DELTA).private


def test_noiseless_candidate_makes_tuning_not_private():
    acct = Accountant()
    acct.record(RandomStopping((((NonPrivate(), 1),), ledger((1.0, 5.0, 1))), 1, 0.1))
    assert acct.epsilon(DELTA) == math.inf


def test_parts_keep_their_relations():
    poisson = ((Sampled(Poisson(0.1), Gaussian(1.0, 2.0)), 10),)
    Accountant("add/remove").record(RandomStopping((poisson,), 1, 0.1))
    with pytest.raises(UnsupportedRelease):
        Accountant("replace-one").record(RandomStopping((poisson,), 1, 0.1))


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(eta=-1.0), "eta must be a finite number > -1"),
        (dict(eta=math.nan), "eta must be"),
        (dict(eta=True), "eta must be"),
        (dict(gamma=0.0), r"gamma must be in the open interval \(0, 1\)"),
        (dict(gamma=1.0), r"gamma must be in the open interval \(0, 1\)"),
        (dict(candidates=()), "candidates must be a non-empty"),
        (dict(candidates=(((Gaussian(1.0, 2.0), 0),),)), "count must be an integer >= 1"),
        (dict(candidates=((("not a release", 1),),)), "must hold a dpnc Release"),
        (dict(candidates=(Gaussian(1.0, 2.0),)), "each candidate must be a sequence"),
    ],
)
def test_invalid_records_are_refused_when_built(kwargs, message):
    args = dict(candidates=(ledger((1.0, 2.0, 1)),), eta=1.0, gamma=0.1) | kwargs
    with pytest.raises(ValueError, match=message):
        RandomStopping(**args)
