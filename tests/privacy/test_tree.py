import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from dpnc.privacy import NoiseSource, TreeNoise, leaf_participation, node
from dpnc.privacy.tree import nodes_covering


def test_node_examples():
    assert node(7) == [(1, 4), (5, 6), (7, 7)]
    assert node(8) == [(1, 8)]
    assert node(1) == [(1, 1)]
    assert node(13) == [(1, 8), (9, 12), (13, 13)]


def check_decomposition(t: int) -> None:
    intervals = node(t)
    covered = [i for a, b in intervals for i in range(a, b + 1)]
    assert covered == list(range(1, t + 1))  # disjoint, in order, union [1, t]
    assert len(intervals) == bin(t).count("1")  # |NODE(t)| = popcount(t)
    assert all(a == b - (b & -b) + 1 for a, b in intervals)  # a = b − lowbit(b) + 1


def test_node_partitions_every_prefix_up_to_ten_thousand():
    for t in range(1, 10_001):
        check_decomposition(t)


@given(st.integers(1, 10**4))
def test_node_partitions_prefix_property(t):
    check_decomposition(t)


def test_leaf_participation_is_exact():
    for leaves in range(1, 130):
        counts = [len(nodes_covering(i, leaves)) for i in range(1, leaves + 1)]
        assert max(counts) == leaf_participation(leaves) == math.floor(math.log2(leaves)) + 1
        assert counts[0] == max(counts)  # attained at leaf 1
        if leaves >= 2:
            assert max(counts[1:]) <= math.floor(math.log2(leaves))


def test_papers_two_ln_bound_fails_exactly_at_1_2_4():
    failures = [s for s in range(1, 2000) if leaf_participation(s) > 2 * math.log(s)]
    assert failures == [1, 2, 4]


def test_tree_noise_covariance_follows_shared_nodes():
    sigma, d, reps = 0.5, 4, 4000
    samples = torch.empty(reps, 8, d, dtype=torch.float64)
    tree = TreeNoise(d, sigma, NoiseSource.for_testing(0))
    for r in range(reps):
        tree.reset()
        for t in range(1, 9):
            samples[r, t - 1] = tree(t)
    for t in range(1, 9):
        var = samples[:, t - 1].var(dim=0).mean().item()
        expected = bin(t).count("1") * sigma**2
        # The variance estimate over reps·d draws has relative s.e. ≈ √(2/(reps·d)).
        assert var == pytest.approx(expected, rel=6 * math.sqrt(2 / (reps * d)))
    for t, u in [(3, 7), (4, 6), (5, 6), (7, 8)]:
        shared = len(set(node(t)) & set(node(u)))
        cov = (samples[:, t - 1] * samples[:, u - 1]).mean().item()
        assert cov == pytest.approx(shared * sigma**2, abs=6 * sigma**2 * math.sqrt(3 / (reps * d)))


def test_tree_noise_reuses_nodes_and_resets():
    tree = TreeNoise(3, 1.0, NoiseSource.for_testing(1))
    t1, t2, t3, t4 = (tree(t) for t in range(1, 5))
    # TREE(3) = ξ₂ + ξ₃ shares ξ₂ = TREE(2) with step 2.
    assert not torch.equal(t3, t2)
    xi3 = t3 - t2
    assert torch.allclose(tree(4), t4)  # re-querying the current step gives the same value
    tree.reset()
    assert not torch.equal(tree(1), t1)
    assert xi3.shape == (3,)
    with pytest.raises(
        ValueError, match="tree steps must be queried in order; expected t=2, got 5"
    ):
        tree(5)


def test_tree_prefix_sums_are_exact_up_to_the_noise():
    torch.manual_seed(0)
    values = torch.randn(12, 2, dtype=torch.float64)
    tree = TreeNoise(2, 0.0, NoiseSource.for_testing(0))
    for t in range(1, 13):
        node_sums = sum(values[a - 1 : b].sum(0) for a, b in node(t))
        assert torch.allclose(node_sums + tree(t), values[:t].sum(0))


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: node(0), r"t must be an integer >= 1; got 0"),
        (lambda: leaf_participation(0), r"num_leaves must be an integer >= 1; got 0"),
        (lambda: TreeNoise(0, 1.0, NoiseSource()), r"dim must be an integer >= 1; got 0"),
        (lambda: TreeNoise(2, -1.0, NoiseSource()), r"sigma must be >= 0; got -1.0"),
    ],
)
def test_tree_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
