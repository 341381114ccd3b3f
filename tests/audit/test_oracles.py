"""The audited tree oracles' node matrix (dpnc.audit.oracles.node_matrix): release t of a period
holds the noise of the dyadic nodes that cover [1, t], one node per set bit of t."""

import pytest
import torch

from dpnc.audit.oracles import node_matrix


def dyadic_right_ends(t: int) -> set[int]:
    """The right ends of [1, t] cut into dyadic blocks, largest first: t = 6 = 4 + 2 → {4, 6}."""
    ends, end = set(), 0
    for bit in reversed(range(t.bit_length())):
        if t >> bit & 1:
            end += 1 << bit
            ends.add(end)
    return ends


@pytest.mark.parametrize("period", [1, 6, 16, 23])
def test_each_release_holds_the_nodes_of_its_dyadic_cover(period):
    A = node_matrix(period)
    assert A.shape == (period, period) and A.dtype == torch.float64
    assert torch.equal(A, A.tril()) and torch.equal(A.diagonal(), torch.ones(period))
    for t in range(1, period + 1):
        columns = {int(b) + 1 for b in torch.nonzero(A[t - 1])}
        assert columns == dyadic_right_ends(t) and len(columns) == bin(t).count("1")
