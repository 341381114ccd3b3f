"""make_private's first-order step on 2 gloo processes, audited as the one-process step is, with
the group path's own broken variants.

The release is the one-process release (rank 0's noise inside the one all_reduce of the ranks'
clipped sums, rank 0's ledger), so the audit must pass it. Each broken variant patches the real code
inside the ranks, as tests/audit/test_model_tier.py patches the one-process release (no production
flag), and must be caught: by the audit where the canary's release breaks the claim, else by an
exact check of the group path (:data:`VARIANTS` says which). More noise, noise split over the ranks
and a ledger kept twice break no privacy claim, so no empirical lower bound can exceed it. A split
that drops an odd batch's last example does break it (an example's presence flips the batch's
parity, so it can also drop or keep another example: the release moves by up to 2Δ), but through
another example's coordinate, which this canary design does not score: the exact checks catch it.

The canary is the one-process audit's (``make-private-dp-sgd`` of :mod:`dpnc.audit.model_tier`: a
gradient clipped to exactly C, no other gradient), many times in one run: an ``Embedding(2K, 1)``
(float64, zero at the start) and K rows, row k the index k with loss BIG·w_k, so its gradient
BIG·e_k is clipped to C·e_k. Coordinate k < K of each noisy mean is then C/B·1[k ∈ batch] + z (the
canary "in"), coordinate K + k is z alone (its neighbour without the canary, "out"), independent
across coordinates (Poisson inclusions and Gaussian noise are): one run is K audit runs a side. The
adversary reads every rank's parameters after every step (SGD, lr 1: the released mean is
w_t − w_{t+1}) and scores each rank's releases with the Poisson statistics of
:func:`dpnc.audit.base.release_statistics`. The claim is the ledger of the same run in one process
(ε = 4 at δ = 1e-5, T = 5 steps, q = 0.8, by PLD). The two variants whose noise is σ/√2 (true ε
6.15) are flagged in about 99 % of audits (:data:`K`); a miss is to be rerun.

    OMP_NUM_THREADS=1 pytest -q -p no:randomly tests/audit/test_distributed_first_order.py -s

prints each variant's audit: the decisive statistic's ε lower bound against the claimed ε(δ).
"""

from __future__ import annotations

import contextlib
import functools
import math

import pytest
import torch
from torch import nn

import dpnc
import dpnc.tier.first_order as first_order
from dpnc.audit import run_audit
from dpnc.audit.base import (
    BIG,
    STATISTICS_POISSON,
    Mechanism,
    ledger_sensitivity,
    release_statistics,
    replay_inclusions,
)
from dpnc.audit.stats import PROFILE_DELTAS, multi_statistic_test
from dpnc.distributed import Group
from dpnc.privacy import NoiseSource
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.releases import Gaussian, innermost
from tests.spawned import run_ranks

WORLD, T, C, EPSILON, DELTA, Q = 2, 5, 1.0, 4.0, 1e-5, 0.8
# Canaries in the run, audit runs a side: a simulated audit of σ/√2 flags it in 59 of 60 draws
# (test_the_design_flags_half_the_noise_variance_at_its_run_count below; 349 of 350 in trial
# runs; at K = 6000, 99 of 100).
K = 12000
UNIT = C / round(Q * K)  # Δ = C/B
SEED = 3  # the noiseless replay's public testing seed (the adversary replays its batches)

# variant: (what the patch does, whether the audit must flag it, the exact checks that fail)
VARIANTS = {
    "correct": ("the real code", False, set()),
    "noise-every-rank": (
        "every rank releases (its own noise σ and ledger entry) before the all_reduce: σ√2 in all",
        False,
        {"ledger", "noise off rank 0", "noise scale"},
    ),
    "noise-split": (
        "every rank adds its own noise σ/√2 (σ in all: the claimed distribution); rank 0 records",
        False,
        {"noise off rank 0"},
    ),
    "noise-split-linear": (
        "every rank adds its own noise σ/2 (σ/√2 in all); rank 0 records",
        True,
        {"noise off rank 0", "noise scale"},
    ),
    "noise-source-share": (
        "rank 0 alone adds noise, σ/√2 (its share of a noise the others were to add)",
        True,
        {"noise scale"},
    ),
    "ledger-every-rank": (
        "the release right, but every rank records it in its ledger (two ledgers of T)",
        False,
        {"ledger", "noise off rank 0"},
    ),
    "no-clip-rank-1": ("rank 1 sums its examples' gradients unclipped", True, {"canary effect"}),
    "rank-1-noiseless": (
        "rank 1 applies the sum of the parts without the noise (a second all_reduce)",
        True,
        {"ranks agree", "noise scale"},
    ),
    "split-drops": (
        "each rank evaluates ⌊|b|/2⌋ examples: an odd batch's last example is dropped",
        False,
        {"canary effect", "rows"},
    ),
    "split-overlaps": (
        "every rank evaluates the whole batch: each example counted twice",
        True,
        {"canary effect", "rows"},
    ),
}


# --- the broken variants: test-only patches of the real code, inside a rank -----------------------


@contextlib.contextmanager
def broken(variant: str, rank: int):
    """Within: this process's copy of the real code patched as ``variant`` says (restored after)."""
    saved = [(Group, "shard"), (Group, "release_sum"), (first_order, "route_clipped_sum")]
    saved = [(owner, name, getattr(owner, name)) for owner, name in saved]
    if variant in ("split-drops", "split-overlaps"):

        def shard(self, batch):
            if variant == "split-overlaps":
                return batch
            k = len(batch) // self.world_size
            return batch[self.rank * k : (self.rank + 1) * k]

        Group.shard = shard
    elif variant == "no-clip-rank-1" and rank == 1:
        real_route = first_order.route_clipped_sum

        def unclipped(model, loss_fn, inputs, params, C, **kwargs):
            return real_route(model, loss_fn, inputs, params, math.inf, **kwargs)

        first_order.route_clipped_sum = unclipped
    elif variant.startswith(("noise", "ledger", "rank-1")):
        Group.release_sum = functools.partialmethod(_broken_release_sum, variant=variant)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def _broken_release_sum(self, part, *values, release, denominator, entry, variant):
    """Group.release_sum as ``variant`` gets it wrong (the noiseless replay takes the real one)."""
    real = functools.partial(
        _REAL_RELEASE_SUM, self, part, *values, release=release, denominator=denominator
    )
    if not isinstance(innermost(entry), Gaussian) or innermost(entry).sigma == 0:
        return real(entry=entry)
    if variant == "rank-1-noiseless":
        released, *summed = real(entry=entry)
        plain = self.all_reduce_(part.to(self.device, torch.float64) / denominator)
        return (released if self.is_source else plain.to(part.dtype), *summed)
    mine, zero = part.to(self.device, torch.float64) / denominator, torch.zeros_like(part)
    if variant == "noise-every-rank":
        mine = mine + release(zero)
    elif variant == "ledger-every-rank":
        noise = release(zero)
        mine = mine + noise if self.is_source else mine
    else:  # rank 0 records the one entry; the noise is split into shares
        share = {"noise-split": math.sqrt(2), "noise-split-linear": 2.0}.get(variant, math.sqrt(2))
        if self.is_source:
            mine = mine + release(zero) / share
        elif variant != "noise-source-share":
            mine = mine + NoiseSource().gaussian(part.shape, entry.sigma / share)
    released, *summed = self.sum(mine, *values)
    return (released.to(part.dtype), *summed)


_REAL_RELEASE_SUM = Group.release_sum


# --- one run, and a rank's share of the audits --------------------------------------------------


def train(multiplier: float | None) -> dict:
    """One make_private(dp-sgd) run on the canaries (rows 0..K−1): every step's released mean, read
    from the parameters; the rows this process evaluated per step; the ledger. ``multiplier`` None:
    calibrated to the target (the one-process claim); a number: that noise multiplier, secret
    batches and noise; 0: noiseless, batches from the public testing seed."""
    model = nn.Embedding(2 * K, 1, dtype=torch.float64)
    nn.init.zeros_(model.weight)
    options = (
        dict(target_epsilon=EPSILON, delta=DELTA)
        if multiplier is None
        else dict(noise_multiplier=multiplier, testing_seed=None if multiplier else SEED)
    )
    opt, loader, accountant = dpnc.make_private(
        model,
        data=list(range(K)),
        n=K,
        optimizer="dp-sgd",
        steps=T,
        batch_size=round(Q * K),
        lr=1.0,
        clip=C,
        **options,
    )
    weights, rows = [model.weight.detach().clone().reshape(-1)], []
    for index in loader:
        rows.append(len(index))
        opt.step(lambda i: BIG * model(i).reshape(-1))
        weights.append(model.weight.detach().clone().reshape(-1))
    w = torch.stack(weights)
    return {"released": w[:-1] - w[1:], "rows": rows, "ledger": accountant.to_json()}


def audit_ranks(rank: int, folder: str, *, multiplier: float) -> dict:
    """A rank's part of every variant's audit: its secret run at the claim's noise multiplier
    (calibrated once, in one process), the noiseless replay, and how often this rank drew noise. One
    spawn for all variants: starting the processes costs more than the runs."""
    draws = [0]
    real_gaussian = NoiseSource.gaussian

    def counted(self, *args, **kwargs):
        draws[0] += 1
        return real_gaussian(self, *args, **kwargs)

    NoiseSource.gaussian = counted
    results = {}
    for variant in VARIANTS:
        draws[0] = 0
        with broken(variant, rank):
            results[variant] = {
                "run": train(multiplier),
                "replay": train(0.0),
                "draws": draws[0],
            }
    return results


@functools.cache
def one_process_ledger() -> str:
    """The claim: the correct run's ledger in one process, calibrated to the target."""
    return train(None)["ledger"]


def rank_scores(released: list[torch.Tensor], multiplier: float) -> dict:
    """Each rank's statistics of its releases in units of Δ, (T, 2K): coordinates 0..K−1 on D,
    K..2K−1 on D′.

    The ranks split a batch by index, so the canaries are taken in a fixed random order: both halves
    of the split test (one chooses the threshold, the other bounds ε) hold canaries of every rank.
    """
    order = torch.randperm(K, generator=torch.Generator().manual_seed(0))
    scores = {}
    for r, y in enumerate(released):
        s_in, s_out = (
            release_statistics(part[:, order], multiplier, q=Q) for part in y.split(K, 1)
        )
        scores |= {f"rank {r} {k}": (s_in[k], s_out[k]) for k in s_in}
    return scores


def ledger_multiplier(ledger: str) -> float:
    """σ/Δ of the ledger's one entry."""
    (entry,) = Accountant.from_json(ledger).ledger
    gaussian = innermost(entry.release)
    return gaussian.sigma / gaussian.sensitivity


# --- the audit ---------------------------------------------------------------------------------


class TwoRanks(Mechanism):
    """``make_private(optimizer="dp-sgd")`` on 2 gloo ranks, ``variant`` patched into their code."""

    name = "make-private-dp-sgd-2-ranks"
    relation = "add/remove"
    subsampled = True
    default_epsilon = EPSILON
    statistics = {
        f"rank {r} {k}": v
        for r in range(WORLD)
        for k, v in STATISTICS_POISSON.items()
        if k != "replayed"
    }
    canary = (
        "K canaries in one run, row k with gradient BIG·e_k (clipped to C·e_k); coordinate k of "
        "the releases is its run on D, coordinate K + k (no row) its run on D′"
    )

    def __init__(self, variant: str, ranks: list[dict]) -> None:
        super().__init__(epsilon=EPSILON, delta=DELTA)
        self.variant, self.ranks = variant, [rank[variant] for rank in ranks]
        self.summary = f"make_private(dp-sgd) on {WORLD} gloo ranks: {VARIANTS[variant][0]}"

    def claim_accountant(self) -> Accountant:
        return Accountant.from_json(one_process_ledger())

    def multiplier(self) -> float:
        return ledger_multiplier(one_process_ledger())

    def scores(self, runs, broken=None, *, progress=False):
        """Each rank's statistics of the run the ranks made (``runs``: :data:`K`)."""
        assert runs == K
        return rank_scores(
            [rank["run"]["released"] / UNIT for rank in self.ranks], self.multiplier()
        )

    def canary_effect(self) -> dict:
        """The noiseless replay: the largest move of a coordinate (an empty one releases 0)."""
        moved = max(float(rank["replay"]["released"].abs().max()) for rank in self.ranks)
        return {
            "shift": moved,
            "sensitivity": ledger_sensitivity(self.claim_accountant()),
            "mu": None,
            "claimed_mu": None,
        }

    def failed_checks(self) -> set[str]:
        """The exact checks of the group path that the ranks' outputs fail."""
        failed = set()
        zero, *others = self.ranks
        if zero["run"]["ledger"] != one_process_ledger() or any(
            Accountant.from_json(rank["run"]["ledger"]).releases for rank in others
        ):
            failed.add("ledger")  # rank 0's is the one-process run's, the others' are empty
        if any(rank["draws"] for rank in others):
            failed.add("noise off rank 0")  # only rank 0's noise source draws
        if not all(
            torch.equal(zero["run"]["released"], rank["run"]["released"]) for rank in others
        ):
            failed.add("ranks agree")  # every rank applies the same released mean, bit for bit
        sigma = self.multiplier() * UNIT
        for rank in self.ranks:
            empty = rank["run"]["released"][:, K:]
            # the mean square of m pure-noise releases over σ²: 1 ± √(2/m) (χ²/m); 6 of those: 2e-9
            if abs(float(empty.pow(2).mean()) / sigma**2 - 1) > 6 * math.sqrt(2 / empty.numel()):
                failed.add("noise scale")
        included = replay_inclusions(K, round(Q * K), T, SEED)
        want = torch.cat([included, torch.zeros_like(included)], 1)
        for rank in self.ranks:
            # a canary moves its coordinate by C/B exactly when its batch holds it, nothing else
            if not torch.allclose(rank["replay"]["released"] / UNIT, want, rtol=0, atol=1e-9):
                failed.add("canary effect")
        evaluated = torch.tensor([rank["replay"]["rows"] for rank in self.ranks]).sum(0)
        if not torch.equal(evaluated, included.sum(1).to(evaluated.dtype)):
            failed.add("rows")  # the ranks' parts are the whole batch, no example twice
        return failed


@pytest.fixture(scope="module")
def ranks():
    multiplier = ledger_multiplier(one_process_ledger())
    return run_ranks(functools.partial(audit_ranks, multiplier=multiplier), WORLD)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_two_ranks_pass_the_audit_and_each_broken_variant_is_caught(ranks, variant):
    _, flagged, checks = VARIANTS[variant]
    mechanism = TwoRanks(variant, ranks)
    result = run_audit(mechanism, K)
    failed = mechanism.failed_checks()
    print(
        f"\n{variant}: {result.statistic} at δ = {result.audit_delta:g}: ε ≥ "
        f"{result.epsilon_lower_bound:.3f} against the claimed ε(δ) = "
        f"{result.claimed_epsilon_at_audit_delta:.3f} (claimed ε = {result.claimed_epsilon:.3f} at "
        f"δ = {DELTA:g}); failed checks: {sorted(failed)}; {result.seconds:.1f} s"
    )
    assert result.claimed_epsilon == pytest.approx(EPSILON, abs=0.1 * EPSILON)
    assert result.violation == flagged, result
    if not flagged:
        assert all(t["epsilon_lower_bound"] <= t["claimed_epsilon"] for t in result.tests), result
    assert failed == checks
    # where the canary path is intact, the canary moves a release by the recorded sensitivity
    if "canary effect" not in checks:
        assert result.canary_effect["shift"] == pytest.approx(
            result.canary_effect["sensitivity"], rel=1e-9
        )


@pytest.mark.slow
def test_the_design_flags_half_the_noise_variance_at_its_run_count():
    """Power, by simulating the same audit on Gaussian releases: both ranks release C/B·1[drawn] + z
    per canary coordinate and z per empty one, z ~ N(0, (σ/√2)²) (what noise-split-linear and
    noise-source-share release). At least 95 % of the audits must flag it (a miss: the selection
    half picks a δ in the tail that the held-out half does not confirm)."""
    multiplier = ledger_multiplier(one_process_ledger())
    profile = TwoRanks("correct", [{"correct": {}}] * WORLD).claim_profile(PROFILE_DELTAS)
    gen = torch.Generator().manual_seed(1)
    flagged = 0
    for _ in range(60):
        drawn = (torch.rand(T, K, generator=gen, dtype=torch.float64) < Q).double()
        noise = (
            torch.randn(T, 2 * K, generator=gen, dtype=torch.float64) * multiplier / math.sqrt(2)
        )
        y = torch.cat([drawn, torch.zeros_like(drawn)], 1) + noise
        tests = multi_statistic_test(rank_scores([y] * WORLD, multiplier), profile)
        flagged += any(t.violation for t in tests)
    print(f"\nσ/√2 flagged in {flagged} of 60 simulated audits")
    assert flagged >= 57
