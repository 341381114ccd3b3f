"""dpnc.algorithms.oracles: the tree oracle's running sum (an anchor per period, an increment per
step), each example read once, one ledger entry per period, and the move bound its increments'
sensitivity assumes."""

from types import SimpleNamespace

import pytest
import torch

from dpnc.algorithms.oracles import OracleStats, SinglePassOracle, TreeOracle, check_move
from dpnc.privacy import Accountant, NoiseSource

PROBLEM = SimpleNamespace(n=20, dim=2)  # what an oracle reads of its objective


class Exact(TreeOracle):
    """Estimators without error: the anchor is w itself, the increment w − w_prev; records what it
    read."""

    def anchor(self, w, index):
        self.read.append(index)
        return w.clone()

    def increment(self, w, w_prev, index):
        self.read.append(index)
        return w - w_prev


def oracle(sigma=0.0, samples=9, **more):
    built = Exact(
        PROBLEM,
        period=3,
        B1=2,
        B2=1,
        sensitivity=1.0,
        sigma=sigma,
        max_move=0.5,
        label="test",
        samples=samples,
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
        generator=torch.Generator().manual_seed(0),
        **more,
    )
    built.read = []
    return built


def test_without_noise_the_release_is_the_running_sum_and_each_example_is_read_once():
    o = oracle()
    points = [torch.tensor([0.1 * t, -0.2 * t], dtype=torch.float64) for t in range(1, 7)]
    for t, w in enumerate(points, 1):
        torch.testing.assert_close(o(t, w), w)  # anchor + Σ increments telescopes to w
    sizes = [len(index) for index in o.read]
    assert sizes == [2, 1, 1, 2, 1, 1]  # B1 opens each period of 3, B2 each step after
    read = torch.cat(o.read)
    assert len(set(read.tolist())) == len(read) == o.samples_used == 8
    assert o.accountant.releases == 2  # one tree per period, under one partition


def test_with_noise_the_release_moves_and_the_ledger_names_the_tree():
    o = oracle(sigma=1.0)
    w = torch.zeros(2, dtype=torch.float64)
    released = o(1, w)
    assert not torch.equal(released, w)
    assert "Tree" in type(o.accountant.ledger[0].release).__name__


def test_a_move_beyond_the_bound_is_refused_before_the_increment_is_read():
    o = oracle()
    o(1, torch.zeros(2, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="exceeds 0.5; the increment's sensitivity"):
        o(2, torch.tensor([1.0, 0.0], dtype=torch.float64))
    assert len(o.read) == 1
    check_move(torch.tensor([0.3, 0.4]), torch.zeros(2), 0.5)  # on the bound: allowed


def test_a_run_that_needs_more_examples_than_are_left_is_refused():
    with pytest.raises(ValueError, match="the run needs 21 examples once each; only 20 are left"):
        SinglePassOracle(
            PROBLEM,
            samples=21,
            noise=NoiseSource.for_testing(0),
            accountant=Accountant(),
            generator=torch.Generator(),
        )


def test_the_clip_rate_is_the_share_of_increment_terms_clipped():
    assert OracleStats().clip_rate == 0.0
    assert OracleStats(increments=8, increments_clipped=2).clip_rate == 0.25
