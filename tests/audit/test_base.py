"""An audited mechanism's claim (dpnc.audit.base.Mechanism): the ledger of its correct configuration,
and ε(δ) falling in δ over the profile."""

import pytest

from dpnc.audit import MECHANISMS


def test_the_claim_is_the_ledger_of_the_correct_configuration():
    mechanism = MECHANISMS["dpzero"]()
    report = mechanism.claim()
    assert report.private and report.releases == mechanism.T
    target = mechanism.default_epsilon
    assert (
        report.epsilon == report.epsilon_pld <= target + 1e-6 and report.epsilon_pld > 0.99 * target
    )
    profile = mechanism.claim_profile([1e-3, 0.1])
    assert list(profile) == [1e-5, 1e-3, 0.1] and profile[1e-5] == pytest.approx(report.epsilon)
    assert profile[1e-5] > profile[1e-3] > profile[0.1] >= 0  # ε(δ) decreases in δ
