import math

import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.privacy_accountant import NeighboringRelation
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from dpnc.privacy import (
    Accountant,
    DiscreteGaussian,
    ExponentialMechanism,
    FixedSize,
    Gaussian,
    NonPrivate,
    Poisson,
    Relation,
    Release,
    Sampled,
    TreeAggregated,
    UnsupportedRelease,
    ZCDPMechanism,
    mean_sensitivity,
    new_partition,
    rho_to_epsilon,
)
from tests.privacy import mixed_ledger

DELTA = 1e-5


@pytest.mark.parametrize("method", ["rdp", "pld"])
class TestEveryMethod:
    """Facts every accountant answers alike (cf. dp-accounting's abstract accountant test)."""

    def test_empty_ledger_spends_nothing(self, method):
        assert Accountant().epsilon(DELTA, method) == 0.0

    def test_noiseless_release_is_not_private(self, method):
        acct = Accountant()
        acct.record(NonPrivate())
        assert acct.epsilon(DELTA, method) == math.inf

    def test_more_releases_cost_more(self, method):
        a, b = Accountant(), Accountant()
        a.record(Gaussian(1.0, 5.0), 10)
        b.record(Gaussian(1.0, 5.0), 20)
        assert b.epsilon(DELTA, method) > a.epsilon(DELTA, method)

    def test_sensitivity_scales_with_noise(self, method):
        a, b = Accountant(), Accountant()
        a.record(Gaussian(1.0, 5.0), 7)
        b.record(Gaussian(3.0, 15.0), 7)
        assert a.epsilon(DELTA, method) == pytest.approx(b.epsilon(DELTA, method), rel=1e-9)


def test_rdp_matches_dp_accounting_directly():
    acct = Accountant("add/remove")
    acct.record(Sampled(Poisson(0.0625), Gaussian(2.0, 27.0)), 10_000)
    acct.record(Gaussian(0.5, 3.0), 3)
    ref = rdp_lib.RdpAccountant()
    ref.compose(
        dp_event.SelfComposedDpEvent(
            dp_event.PoissonSampledDpEvent(0.0625, dp_event.GaussianDpEvent(13.5)), 10_000
        )
    )
    ref.compose(dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(6.0), 3))
    assert acct.epsilon(DELTA, "rdp") == pytest.approx(ref.get_epsilon(DELTA), rel=1e-12)


def test_pld_matches_dp_accounting_directly():
    acct = Accountant("add/remove")
    acct.record(Sampled(Poisson(0.0625), Gaussian(1.0, 13.5156)), 10_000)
    ref = pld_privacy_accountant.PLDAccountant()
    ref.compose(
        dp_event.SelfComposedDpEvent(
            dp_event.PoissonSampledDpEvent(0.0625, dp_event.GaussianDpEvent(13.5156)), 10_000
        )
    )
    assert acct.epsilon(DELTA, "pld") == pytest.approx(ref.get_epsilon(DELTA), abs=2e-3)
    assert acct.epsilon(DELTA, "pld") == pytest.approx(
        1.832, abs=2e-3
    )  # dp-accounting 0.6.0's own PLDAccountant (interval 1e-4) gives 1.8320 here
    assert acct.epsilon(DELTA, "pld") < acct.epsilon(DELTA, "rdp")


def test_gaussian_pld_under_replace_one_is_the_shift_by_the_sensitivity():
    # Replace-one sensitivity Δ: neighbouring outputs differ by Δ; the same pair as add/remove with
    # Δ.
    a, b = Accountant("replace-one"), Accountant("add/remove")
    for acct in (a, b):
        acct.record(Gaussian(2.0, 4.0), 50)
    assert a.epsilon(DELTA, "pld") == pytest.approx(b.epsilon(DELTA, "pld"), rel=1e-9)
    ref = pld_privacy_accountant.PLDAccountant(NeighboringRelation.ADD_OR_REMOVE_ONE)
    ref.compose(dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(2.0), 50))
    assert a.epsilon(DELTA, "pld") == pytest.approx(ref.get_epsilon(DELTA), abs=1e-3)


def test_gaussian_rho_is_exact_and_converts():
    acct = Accountant()
    acct.record(Gaussian(1.0, 10.0), 100)
    assert acct.rho() == pytest.approx(100 / 200)
    report = acct.report(DELTA)
    assert report.epsilon_zcdp == pytest.approx(rho_to_epsilon(0.5, DELTA))
    # Exact Gaussian accounting (PLD) is tighter than the zCDP conversion.
    assert report.epsilon_pld < report.epsilon_zcdp <= rho_to_epsilon(0.5, DELTA, "bun-steinke")


def test_ledger_merges_consecutive_equal_releases():
    acct = Accountant()
    for _ in range(1000):
        acct.record(Gaussian(1.0, 3.0))
    acct.record(Gaussian(1.0, 4.0))
    acct.record(Gaussian(1.0, 3.0), 5)
    assert [e.count for e in acct.ledger] == [1000, 1, 5] and acct.releases == 1006


def test_json_round_trip_keeps_every_release():
    acct = mixed_ledger()
    back = Accountant.from_json(acct.to_json())
    assert back.relation is Relation.REPLACE_ONE
    assert [(e.release, e.count) for e in back.ledger] == [
        (e.release, e.count) for e in acct.ledger
    ]
    assert back.epsilon(DELTA) == acct.epsilon(DELTA)
    with pytest.raises(ValueError, match="unknown release kind 'Laplace'"):
        Release.from_dict({"kind": "Laplace"})


def test_tree_release_counts_exact_leaf_participation():
    # A leaf of a tree over Σ leaves enters ⌊log₂Σ⌋ + 1 nodes; papers bound it by 2 ln Σ.
    for leaves, nodes in [(1, 1), (2, 2), (4, 3), (7, 3), (8, 4), (1000, 10), (1024, 11)]:
        acct = Accountant()
        acct.record(TreeAggregated(Gaussian(1.5, 3.0), leaves=leaves))
        assert acct.rho() == pytest.approx(nodes * 1.5**2 / (2 * 9.0))
        composed = Accountant()
        composed.record(Gaussian(1.5, 3.0), nodes)
        assert acct.epsilon(DELTA) == pytest.approx(composed.epsilon(DELTA), rel=1e-12)
        assert acct.epsilon(DELTA, "pld") == pytest.approx(
            composed.epsilon(DELTA, "pld"), rel=1e-12
        )


def test_mean_sensitivity_follows_the_relation():
    assert mean_sensitivity(3.0, 100, "replace-one") == pytest.approx(0.06)
    assert mean_sensitivity(3.0, 100, "add/remove") == pytest.approx(0.03)
    with pytest.raises(
        ValueError, match=r"relation must be one of \['replace-one', 'add/remove'\]; got 'swap'"
    ):
        mean_sensitivity(1.0, 10, "swap")


def test_unsupported_releases_are_refused_with_a_way_out():
    with pytest.raises(
        UnsupportedRelease,
        match=r"Sampled\(FixedSize, Gaussian\) cannot be accounted under "
        r"relation 'add/remove'; use an Accountant with relation \['replace-one'\]",
    ):
        Accountant("add/remove").record(Sampled(FixedSize(100, 10), Gaussian(1.0, 2.0)))
    acct = Accountant("replace-one")
    acct.record(Sampled(Poisson(0.1), Gaussian(2.0, 20.0)), 100)
    with pytest.raises(
        UnsupportedRelease,
        match=r"RDP accountant cannot interpret Sampled\(Poisson, Gaussian\).*use method='pld'",
    ):
        acct.epsilon(DELTA, "rdp")
    assert 0 < acct.epsilon(DELTA, "pld") < math.inf
    with pytest.raises(UnsupportedRelease, match="not zCDP"):
        acct.rho()
    zc = Accountant()
    zc.record(ZCDPMechanism(0.1))
    with pytest.raises(
        UnsupportedRelease, match="PLD accounting does not support ZCDPMechanism.*use method='rdp'"
    ):
        zc.epsilon(DELTA, "pld")
    report = zc.report(DELTA)
    assert report.epsilon_pld is None and report.epsilon_rdp is not None and report.rho == 0.1


def test_replace_one_poisson_costs_more_than_add_remove():
    # The same clipped sum: contribution bound C, add/remove Δ = C, replace-one Δ = 2C.
    a, r = Accountant("add/remove"), Accountant("replace-one")
    a.record(Sampled(Poisson(0.05), Gaussian(1.0, 10.0)), 1000)
    r.record(Sampled(Poisson(0.05), Gaussian(2.0, 10.0)), 1000)
    assert a.epsilon(DELTA, "pld") < r.epsilon(DELTA, "pld") <= 2.2 * a.epsilon(DELTA, "pld")


def test_exponential_mechanism_is_pure_dp():
    acct = Accountant("replace-one")
    acct.record(ExponentialMechanism(0.7))
    assert acct.rho() == pytest.approx(0.7**2 / 8)
    # PLD is exact for randomized response: ε(δ → 0) = ε. RDP's conversion is a looser bound.
    assert acct.epsilon(1e-12, "pld") == pytest.approx(0.7, abs=1e-3)
    assert acct.epsilon(1e-12, "rdp") >= acct.epsilon(1e-12, "pld")
    with pytest.raises(UnsupportedRelease):
        Accountant("add/remove").record(ExponentialMechanism(0.7))


def test_discrete_gaussian_is_accounted_by_its_own_pld_and_zcdp():
    acct = Accountant()
    acct.record(DiscreteGaussian(1, 2.0), 10)
    assert acct.rho() == pytest.approx(10 / 8)
    cont = Accountant()
    cont.record(Gaussian(1.0, 2.0), 10)
    # CKS 2020: the discrete Gaussian is at least as private as the continuous one.
    assert acct.epsilon(DELTA, "pld") <= cont.epsilon(DELTA, "pld") + 1e-3


def test_report_marks_seeded_noise_as_not_private():
    acct = Accountant()
    acct.record(Gaussian(1.0, 3.0, secret=False))
    report = acct.report(DELTA, paper_claim="(2, 1e-5)-DP by Thm 1")
    assert not report.private and "NOT PRIVATE" in str(report) and "Thm 1" in str(report)
    acct2 = Accountant()
    acct2.record(Gaussian(1.0, 3.0))
    assert acct2.report(DELTA).private


def test_a_subsampled_ledgers_report_has_no_rho_line_and_a_note_says_why():
    # make_private's first printout (quick start 1) read "ρ (zCDP) = n/a  → ε = n/a"
    acct = Accountant("add/remove")  # make_private's relation
    acct.record(Sampled(Poisson(0.032), Gaussian(1.0, 1.0)), 600)
    text = str(acct.report(DELTA))
    assert "n/a" not in text and "ρ (zCDP)" not in text and "ε (PLD)" in text
    assert "is not zCDP, so the ledger has no ρ" in text
    plain = Accountant()
    plain.record(Gaussian(1.0, 10.0), 100)  # a zCDP ledger keeps its line
    assert "ρ (zCDP) = 0.5  → ε = " in str(plain.report(DELTA))


@pytest.mark.parametrize(
    "factory,message",
    [
        (lambda: Gaussian(0.0, 1.0), r"sensitivity must be a finite number > 0; got 0.0"),
        (lambda: Gaussian(1.0, -1.0), r"sigma must be a finite number >= 0; got -1.0"),
        (lambda: Gaussian(1.0, float("nan")), r"sigma must be a finite number >= 0; got nan"),
        (lambda: Sampled(Poisson(1.5), Gaussian(1.0, 1.0)), r"q must be in \(0, 1\]; got 1.5"),
        (lambda: Sampled(FixedSize(10, 11), Gaussian(1.0, 1.0)), r"B must be <= n=10; got 11"),
        (
            lambda: TreeAggregated(Gaussian(1.0, 1.0), leaves=0),
            r"leaves must be an integer >= 1; got 0",
        ),
        (lambda: ZCDPMechanism(-1.0), r"rho must be a finite number >= 0; got -1.0"),
        (lambda: ExponentialMechanism(0.0), r"epsilon must be a finite number > 0; got 0.0"),
        (lambda: DiscreteGaussian(1.5, 1.0), r"sensitivity must be an integer >= 1; got 1.5"),
    ],
)
def test_releases_validate_when_built(factory, message):
    with pytest.raises(ValueError, match=message):
        factory()


def test_accountant_rejects_bad_calls():
    acct = Accountant()
    with pytest.raises(ValueError, match=r"count must be an integer >= 0; got -1"):
        acct.record(Gaussian(1.0, 1.0), -1)
    with pytest.raises(TypeError, match="release must be a dpnc Release"):
        acct.record(dp_event.GaussianDpEvent(1.0))
    with pytest.raises(ValueError, match=r"method must be one of \('rdp', 'pld'\); got 'prv'"):
        acct.epsilon(DELTA, "prv")
    with pytest.raises(ValueError, match=r"delta must be in the open interval"):
        acct.epsilon(0.0)


def test_a_partition_of_disjoint_releases_costs_one_release():
    one, many = Accountant(), Accountant()
    one.record(Gaussian(1.0, 3.0))
    part = new_partition("epochs")
    for _ in range(50):
        many.record(Gaussian(1.0, 3.0), partition=part)
    assert many.releases == 50
    for method in ("rdp", "pld"):
        assert many.epsilon(DELTA, method) == pytest.approx(one.epsilon(DELTA, method), rel=1e-12)
    assert many.rho() == pytest.approx(one.rho())


def test_partitions_never_merge_across_names_or_with_plain_releases():
    # Two passes over the same data are two partitions: they compose.
    acct, single = Accountant(), Accountant()
    single.record(Gaussian(1.0, 3.0))
    for part in (new_partition("pass"), new_partition("pass")):
        acct.record(Gaussian(1.0, 3.0), 10, partition=part)
    acct.record(Gaussian(1.0, 3.0), 2)
    assert acct.rho() == pytest.approx(4 * single.rho())
    assert [e.partition is None for e in acct.ledger] == [False, False, True]


def test_partitions_survive_json_and_are_refused_under_add_remove():
    acct = Accountant()
    acct.record(TreeAggregated(Gaussian(1.0, 2.0), leaves=8), 5, partition=new_partition("tree"))
    back = Accountant.from_json(acct.to_json())
    assert back.ledger == acct.ledger and back.rho() == acct.rho()
    with pytest.raises(UnsupportedRelease, match="replace-one"):
        Accountant("add/remove").record(Gaussian(1.0, 2.0), partition="p")


def test_pld_refuses_nearly_noiseless_releases_instead_of_exhausting_memory():
    acct = Accountant()
    acct.record(Gaussian(1.0, 0.001))
    with pytest.raises(UnsupportedRelease, match="use method='rdp'"):
        acct.epsilon(DELTA, "pld")
    report = acct.report(DELTA)
    assert (
        report.epsilon_pld is None
        and report.epsilon_rdp > 1e5
        and any("pld" in n for n in report.notes)
    )


def test_distinct_gaussians_compose_by_pld_to_the_exact_gaussian_epsilon():
    """A ledger of Gaussians with many distinct σ (KL-Spider's) composes to one Gaussian with μ² = Σ
    (Δ_i/σ_i)²; the PLD ε must equal the analytic ε of that Gaussian (Balle & Wang 2018, Thm 8),
    computed here with scipy."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    acct = Accountant("add/remove")
    multipliers = [3.0 + 0.01 * i for i in range(300)]
    for i, m in enumerate(multipliers):
        acct.record(Gaussian(0.5, 0.5 * m), count=1 + i % 3)
    mu = math.sqrt(sum((1 + i % 3) / m**2 for i, m in enumerate(multipliers)))

    def delta_of(eps):
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)

    exact = brentq(lambda e: delta_of(e) - 1e-6, 0, 100)
    assert acct.epsilon(1e-6, method="pld") == pytest.approx(exact, rel=2e-3)
    assert acct.epsilon(1e-6, method="pld") <= acct.epsilon(1e-6, method="rdp")
