"""dpzero-dimension's claims: declared before the data, no verdict from one seed, and a share
without verdict blames MeZO only when MeZO did not learn."""

from __future__ import annotations

import math

from dpnc_reproduce.dpzero_dimension import claims as dim_claims
from dpnc_reproduce.dpzero_dimension import report
from dpnc_reproduce.dpzero_dimension.experiment import EXPERIMENT
from tests.reproduce.dpzero_dimension.rows import CONFIG, dim_rows


def test_claims_are_declared_and_one_seed_decides_nothing():
    declared = EXPERIMENT.declare(CONFIG)
    assert any("DPZero ε = 6 − MeZO does not fall faster" in d.statement for d in declared)
    one_seed = [r for r in dim_rows() if r.seed == 42]
    claims = dim_claims.check_claims(one_seed, CONFIG)
    judged = [c for c in claims if "every private run" not in c.statement]
    assert judged and all(c.holds is None for c in judged)
    by_hand = {r["mode"]: r for r in report.share_table(dim_rows(), CONFIG)}
    assert set(by_hand) == {"head", "bias"} and by_hand["head"]["d"] == 770


def test_a_share_without_verdict_blames_mezo_only_when_mezo_did_not_learn(monkeypatch):
    """The share's "no verdict" note says MeZO's gain is not above 0 only where that is so: where
    MeZO learned and the share's interval straddles 0.90, the share simply has no verdict (the GPU
    run's SST-2 all, T = 120, once said otherwise)."""
    from dpnc_reproduce.claims import Interval

    gain = {"head": Interval(1.1, 0.4, 1.8, 2), "bias": Interval(1.0, -0.5, 2.5, 2)}
    monkeypatch.setattr(dim_claims, "learns", lambda rows, task: gain)
    monkeypatch.setattr(
        dim_claims, "share", lambda rows, task, mode, eps: Interval(0.8, -0.7, 1.9, 2)
    )
    claims = {c.statement: c for c in dim_claims.check_claims(dim_rows(), CONFIG)}
    head = claims["SST-2, head: DPZero ε = 6 keeps at least 0.90 of MeZO's gain"]
    bias = claims["SST-2, bias: DPZero ε = 6 keeps at least 0.90 of MeZO's gain"]
    assert (
        head.holds is None
        and head.facts["mezo_gain_holds"] == 1
        and head.facts["low"] < 0.9 < head.facts["high"]
    )
    assert bias.holds is None and math.isnan(
        bias.facts["mezo_gain_holds"]
    )  # MeZO's gain: no signal
    # the note is the thing under test here: it names MeZO only where MeZO did not gain
    assert "not above 0" not in head.evidence and "MeZO's gain is not above 0" in bias.evidence
