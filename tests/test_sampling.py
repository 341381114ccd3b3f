"""Samplers: secret batches whenever the accounting claims amplification."""

import math
import pickle

import pytest
import torch

from dpnc.privacy import Accountant, NoiseSource
from dpnc.privacy.mechanisms import gaussian_mechanism
from dpnc.sampling import (
    FullBatch,
    PoissonSampler,
    ShuffleSampler,
    SinglePass,
    batch_losses,
    per_example_losses,
)


@pytest.mark.parametrize("cls", [PoissonSampler, ShuffleSampler])
def test_subsampled_batches_are_secret_by_default_and_reproducible_only_for_tests(cls):
    n, B = 200, 20
    secret = [cls(n, B).sample() for _ in range(2)]
    assert cls(n, B).secret and not torch.equal(secret[0], secret[1])
    seeded = [cls.for_testing(n, B, seed=3) for _ in range(2)]
    assert not seeded[0].secret
    assert all(torch.equal(seeded[0].sample(), seeded[1].sample()) for _ in range(3))
    # Torch's global generator neither drives the batches nor is touched by them.
    torch.manual_seed(0)
    state = torch.get_rng_state()
    a = cls(n, B).sample()
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(0)
    assert not torch.equal(a, cls(n, B).sample()) or len(a) == 0


@pytest.mark.parametrize("cls", [PoissonSampler, ShuffleSampler])
def test_a_sampler_cannot_be_checkpointed(cls):
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(cls(10, 2))


def test_seeded_batches_make_the_release_and_report_not_private():
    sampler = PoissonSampler.for_testing(100, 10, seed=0)
    acct = Accountant("add/remove")
    _, release = gaussian_mechanism(0.0, sampler.release(0.1, 1.0), NoiseSource())
    acct.record(release)
    assert not release.secret and not acct.secret and not acct.report(1e-5).private
    _, release = gaussian_mechanism(0.0, PoissonSampler(100, 10).release(0.1, 1.0), NoiseSource())
    assert release.secret


def test_poisson_inclusion_rate_and_shuffle_size():
    n, B, M = 50, 5, 4000
    sampler = PoissonSampler.for_testing(n, B, seed=1)
    counts = torch.zeros(n)
    for _ in range(M):
        counts[sampler.sample()] += 1
    q = B / n
    se = math.sqrt(q * (1 - q) / M)
    assert float((counts / M - q).abs().max()) <= 5 * se  # every example joins with probability q
    shuffle = ShuffleSampler.for_testing(n, B, seed=1)
    batches = [shuffle.sample() for _ in range(20)]
    assert all(len(b) == B and len(set(b.tolist())) == B for b in batches)


def test_shuffle_slots_beyond_the_rows_are_empty():
    # replace-one keeps n, the records; rows < n of them hold an example (a domain rule dropped the
    # others). A batch draws B slots uniformly and keeps those that hold one: a row is in a batch
    # with probability B/n, as before.
    n, B, rows, M = 20, 5, 16, 4000
    sampler = ShuffleSampler.for_testing(n, B, seed=2, rows=rows)
    counts, sizes = torch.zeros(n), []
    for _ in range(M):
        batch = sampler.sample()
        assert len(set(batch.tolist())) == len(batch) and (batch < rows).all()
        counts[batch] += 1
        sizes.append(len(batch))
    q, se = B / n, math.sqrt(B / n * (1 - B / n) / M)
    assert float((counts[:rows] / M - q).abs().max()) <= 5 * se and counts[rows:].sum() == 0
    expected = B * rows / n  # hypergeometric mean: B slots of n, rows of them full
    assert abs(sum(sizes) / M - expected) < 0.05 and min(sizes) < B == max(sizes)
    slots = ShuffleSampler.for_testing(
        n, B, seed=3, rows=rows
    ).slots()  # what a data-parallel group sends
    assert len(slots) == B and torch.equal(
        ShuffleSampler.for_testing(n, B, seed=3, rows=rows).sample(), slots[slots < rows]
    )
    for kind in (
        ShuffleSampler,
        PoissonSampler,
    ):  # every record dropped: empty batches, not a refusal
        assert len(kind.for_testing(n, B, seed=2, rows=0).sample()) == 0
    with pytest.raises(ValueError, match="more than n"):
        ShuffleSampler.for_testing(n, B, seed=2, rows=n + 1).sample()


def test_relations_are_checked_before_any_step():
    ShuffleSampler(10, 2).check_relation("replace-one")
    with pytest.raises(ValueError, match="ShuffleSampler releases are accounted under relation"):
        ShuffleSampler(10, 2).check_relation("add/remove")
    PoissonSampler(10, 2).check_relation("add/remove")
    FullBatch(10).check_relation("add/remove")


def test_batch_losses_checks_the_closure_contract():
    batch = torch.tensor([3, 5, 7])
    assert batch_losses(lambda b: b.double(), batch).tolist() == [3.0, 5.0, 7.0]
    assert batch_losses(lambda b: torch.zeros(2, 3), batch, (2,)).shape == (2, 3)
    for bad in (
        lambda b: torch.zeros(10),
        lambda b: torch.zeros(()),
        lambda b: torch.zeros(3, 1),
        lambda b: 1.0,
    ):
        with pytest.raises(
            ValueError,
            match=r"the closure must return per-example losses of shape \(B,\), B the size of the batch it is given",
        ) as refused:
            batch_losses(bad, batch)
        assert "3" not in str(refused.value) and "10" not in str(
            refused.value
        )  # the batch's size is secret
    called = []
    empty = batch_losses(lambda b: called.append(b), torch.tensor([], dtype=torch.long), (4,))
    assert called == [] and empty.shape == (4, 0) and float(empty.sum()) == 0.0


def test_bad_sampler_arguments():
    for kwargs, message in (
        ({"n": 0, "batch_size": 1}, "^n must be"),
        ({"n": 5, "batch_size": 6}, "^batch_size must be <= n"),
        ({"n": 5, "batch_size": 1.5}, "^batch_size must be"),
    ):
        with pytest.raises(ValueError, match=message):
            PoissonSampler(**kwargs)
    with pytest.raises(TypeError, match="source must be a NoiseSource"):
        PoissonSampler(5, 1, source=torch.Generator())
    assert SinglePass(4).take(4).tolist() == [0, 1, 2, 3]


def test_a_wrong_shape_is_named_only_where_it_cannot_tell_the_batch_size():
    losses = torch.ones(5)
    assert per_example_losses(losses, 5) is losses
    with pytest.raises(ValueError, match=r"got a 1-d tensor of another shape\. Compute the losses"):
        per_example_losses(torch.ones(10), 5)  # (10,) would tell that B = 5
    with pytest.raises(ValueError, match=r"here B = 1.*got shape \(1, 3\)\."):
        per_example_losses(torch.ones(1, 3), 1)
    with pytest.raises(ValueError, match=r"got float\. Do not reduce over the batch"):
        per_example_losses(1.0, 5)
    # a grid of runs: reduced over the batch is shape `runs`, which the grid makes public
    with pytest.raises(ValueError, match=r"of shape \(2, B\), .*got shape \(2,\)\. Do not reduce"):
        per_example_losses(torch.ones(2), 5, (2,))
