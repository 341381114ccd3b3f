"""The audit guards the real code: the library's own release path, patched in a test-only way, must
be flagged.

The variants of tests/audit/test_audit.py break a mechanism by its configuration (σ/1.5 passed as
the noise multiplier) or by a hand-written broken algorithm. Here the real code runs as a user calls
it, calibrated to the target ε by the public path, and one line of the library is patched
underneath:

* ``sigma``: the Gaussian noise drawn at σ/1.5 (or σ/2, below) inside
  :func:`dpnc.privacy.release.release_sum` (its draw from the :class:`~dpnc.privacy.NoiseSource`),
  the ledger entry unchanged, as a bug in the release would leave it;
* ``realised``: the clipped sum divided by the realised batch size instead of the fixed B, in
  ``release_sum`` itself (so in DPZero's ``private_mean`` and in the first-order step alike).

Every case must be flagged (an empirical ε lower bound above the ledger's ε) at the run counts
below, and the unpatched code must not be. Run counts and times are in docs/audit.md ("The real
code, patched")."""

import sys

import numpy as np
import pytest
import torch

import dpnc.audit.model_tier  # noqa: F401  (bound before the patches look for the names)
import dpnc.privacy.release as release
from dpnc.audit import MECHANISMS, run_audit
from dpnc.audit.model_tier import (
    DPZeroOptimizerPoisson,
    MakePrivateDPSGD,
    MakePrivateDPZero,
    _ModelTier,
)
from dpnc.privacy import NoiseSource
from dpnc.sampling import PoissonSampler


def patch_everywhere(monkeypatch, real, fake):
    """``fake`` wherever a dpnc module has bound ``real`` (``from ... import release_sum`` binds it
    by name)."""
    bound = [
        m
        for name, m in sorted(sys.modules.items())
        if name.startswith("dpnc") and m is not None and any(v is real for v in vars(m).values())
    ]
    assert bound, f"{real.__name__} is bound nowhere: the patch would test nothing"
    for module in bound:
        for key, value in list(vars(module).items()):
            if value is real:
                monkeypatch.setattr(module, key, fake)


def patch_sigma(monkeypatch, factor=1.5):
    """The noise of every release drawn at σ/factor; the release (and so the ledger) unchanged.
    release_sum draws its noise from the run's NoiseSource (the only Gaussian draws of these
    mechanisms: their directions and batches come from other generators), so the draw itself is
    patched."""
    real = NoiseSource.gaussian

    def weaker(self, shape, sigma, **kwargs):
        return real(self, shape, sigma / factor, **kwargs)

    monkeypatch.setattr(NoiseSource, "gaussian", weaker)


def patch_realised(monkeypatch):
    """The clipped sum divided by the realised batch size |b| (at least 1) instead of the fixed
    B."""
    real_sample, real_release_sum = PoissonSampler.sample, release.release_sum

    def remembering(self):
        self.last_batch = real_sample(self)
        return self.last_batch

    def by_realised(total, bound, *, sampler, **kwargs):
        inner = getattr(
            sampler, "_sampler", sampler
        )  # a make_private loader's batches, or the sampler itself
        realised = max(1, len(inner.last_batch))
        return real_release_sum(
            total * sampler.batch_size / realised, bound, sampler=sampler, **kwargs
        )

    monkeypatch.setattr(PoissonSampler, "sample", remembering)
    patch_everywhere(monkeypatch, real_release_sum, by_realised)


class _Pair:
    """D = the canary and one row of gradient 0, D′ = that row alone, at q = 1/2: a realised batch
    of 1 or 2 moves the canary's release by C/1 or C/2 instead of the recorded C/B (B = 10). With n
    rows of gradient 0 the realised denominator would shift every release alike and hide the
    hole."""

    n, B, T = 20, 10, 5

    def canary_row(self, broken):
        return 0

    def data(self, canary):
        X = torch.zeros(2 if canary is not None else 1, 1)
        if canary is not None:
            X[0, 0] = 1.0
        return X, torch.zeros(len(X), dtype=torch.long)


class OptimizerPair(_Pair, DPZeroOptimizerPoisson):
    pass


class MakePrivateDPZeroPair(_Pair, MakePrivateDPZero):
    pass


class MakePrivateDPSGDPair(_Pair, MakePrivateDPSGD):
    pass


# (mechanism, patch, factor, runs). The real zeroth-order step (dpzero-poisson:
# dpnc.algorithms.dpzero on the real PoissonSampler) at σ/1.5, the smallest hole the audit's CI must
# catch, at its run count in tests/audit/test_audit.py. The optimizer and make_private's first-order
# step cost ~10-20 ms a run: σ/2 (true/claimed ε 2.4) at 1000 runs, as the data-parallel and trainer
# steps are audited (their σ/1.5 needs 2000 runs, ~3 minutes more of CI). The realised denominator
# moves a release by 5-10 Δ on the pair designs: 300 runs, the unpatched pair beside it. The
# unpatched dpzero-poisson, dpzero-optimizer and make-private-dp-sgd run in
# tests/audit/test_audit.py.
CASES = [
    ("dpzero-poisson", "sigma", 1.5, 20000),
    ("dpzero-optimizer", "sigma", 2.0, 1000),
    ("make-private-dp-sgd", "sigma", 2.0, 1000),
    (OptimizerPair, None, None, 300),
    (OptimizerPair, "realised", None, 300),
    (MakePrivateDPZeroPair, None, None, 300),
    (MakePrivateDPZeroPair, "realised", None, 300),
    (MakePrivateDPSGDPair, None, None, 300),
    (MakePrivateDPSGDPair, "realised", None, 300),
]


def _case(mechanism, patch, factor, runs):
    """The σ patches of the optimizer and make_private (1000 runs of a model-tier step: 1-1.5
    minutes each) are in the slow tier (`make test-all`); CI keeps the real Poisson step's σ/1.5 and
    every pair."""
    slow = (
        isinstance(mechanism, str)
        and issubclass(MECHANISMS[mechanism], _ModelTier)
        and runs >= 1000
    )
    return pytest.param(
        mechanism,
        patch,
        factor,
        runs,
        marks=pytest.mark.slow if slow else (),
        id=f"{mechanism if isinstance(mechanism, str) else mechanism.__name__}-{patch or 'unpatched'}",
    )


@pytest.mark.parametrize("mechanism, patch, factor, runs", [_case(*c) for c in CASES])
def test_the_audit_flags_the_patched_release_and_passes_the_real_one(
    monkeypatch, mechanism, patch, factor, runs
):
    if patch == "sigma":
        patch_sigma(monkeypatch, factor)
    elif patch == "realised":
        patch_realised(monkeypatch)
    result = run_audit(mechanism if isinstance(mechanism, str) else mechanism(), runs)
    assert np.isfinite(result.claimed_epsilon)
    flagged = result.epsilon_lower_bound > result.claimed_epsilon_at_audit_delta
    assert flagged == (patch is not None), (
        result.epsilon_lower_bound,
        result.claimed_epsilon_at_audit_delta,
    )
