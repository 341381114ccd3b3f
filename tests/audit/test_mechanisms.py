"""The audited mechanisms (dpnc.audit.mechanisms.MECHANISMS): in noiseless replays of D and D′, each
canary moves each release by the ledger's sensitivity, and an unsampled Gaussian mechanism's μ over
all releases is the ledger's: the audit tests the claim at its worst case."""

import pytest

from dpnc.audit import MECHANISMS
from dpnc.audit.model_tier import _ModelTier


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_the_canary_moves_each_release_by_the_recorded_sensitivity(name):
    """Noiseless replays of D and D′: the canary's effect on a release is the ledger's sensitivity
    (so the audit tests the claim at its worst case), and for unsampled Gaussian mechanisms its
    Gaussian-DP μ over all releases is the ledger's μ: the canary's privacy loss is exactly the
    claimed one."""
    effect = MECHANISMS[name]().canary_effect()
    assert effect["shift"] == pytest.approx(effect["sensitivity"], rel=1e-5)
    if MECHANISMS[name].subsampled:
        assert effect["mu"] is None
    # the model tier runs in float32 (0.2 is stored as 0.20000000298): its μ to float32's rounding
    else:
        float32 = isinstance(MECHANISMS[name](), _ModelTier)
        assert effect["mu"] == pytest.approx(effect["claimed_mu"], rel=1e-7 if float32 else 1e-9)
