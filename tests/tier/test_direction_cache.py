"""dpnc.tier.direction_cache: the cached space draws the very directions ModuleSpace draws, once per
seed.

Equality is bit for bit (no tolerance): the cache fills its buffers from the same generator in the
same order, and every move adds the same tensors with the same coefficients as the uncached space.
"""

import pytest
import torch
from torch import nn

from dpnc.privacy import Accountant, NoiseSource
from dpnc.sampling import PoissonSampler
from dpnc.space import DIRECTIONS, ModuleSpace
from dpnc.tier.direction_cache import CachedModuleSpace
from dpnc.tier.zeroth_order import DPZeroOptimizer, MeZOOptimizer


def mlp(dtype, seed=0):
    torch.manual_seed(seed)  # test-only: initialise the model reproducibly
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1)).to(dtype).eval()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_cached_directions_are_the_regenerated_ones_bit_for_bit(direction, dtype):
    model = mlp(dtype)
    plain, cached = (
        ModuleSpace(model.parameters(), direction),
        CachedModuleSpace(model.parameters(), direction),
    )
    for seed in (11, 12, 11):  # back to an earlier seed: regenerated, not a stale buffer
        assert torch.equal(cached.direction(seed), plain.direction(seed))
    assert cached.generated == 3
    for _ in range(3):  # the same seed again: kept
        cached.direction(11)
    assert cached.generated == 3


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_a_step_of_moves_generates_once_and_lands_where_the_uncached_space_does(direction):
    a, b = mlp(torch.float32), mlp(torch.float32)
    plain, cached = (
        ModuleSpace(a.parameters(), direction),
        CachedModuleSpace(b.parameters(), direction),
    )
    for t, seed in enumerate((5, 6, 7)):
        for space in (plain, cached):  # x + λu, x − λu, then x₀ − 0.3·u: the three moves of a step
            space.perturb_(seed, 1e-3)
            space.perturb_(seed, -2e-3)
            space.update_(seed, -0.3)
        assert cached.generated == t + 1
        assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert any(
        not torch.equal(p, q) for p, q in zip(a.parameters(), mlp(torch.float32).parameters())
    )


def optimizers(make, cache):
    X = torch.randn(64, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = X.sum(-1).sin()
    model = mlp(torch.float64)
    sampler = PoissonSampler.for_testing(64, 16, seed=3)
    if make == "dpzero":
        opt = DPZeroOptimizer(
            model.parameters(),
            lr=0.05,
            clip=0.5,
            noise_multiplier=1.0,
            sampler=sampler,
            accountant=Accountant("add/remove"),
            noise=NoiseSource.for_testing(7),
            seed=1,
            model=model,
            data=(X, y),
            cache_directions=cache,
        )
    else:
        opt = MeZOOptimizer(
            model.parameters(),
            lr=0.05,
            sampler=sampler,
            seed=1,
            model=model,
            data=(X, y),
            cache_directions=cache,
        )
    return model, opt


@pytest.mark.parametrize("make", ["dpzero", "mezo"])
def test_the_optimizers_with_cached_directions_follow_the_same_trajectory(make):
    runs = []
    for cache in (False, True):
        model, opt = optimizers(make, cache)
        losses = [
            float(opt.step(lambda xb, yb, m=model: (m(xb).squeeze(-1) - yb) ** 2)) for _ in range(5)
        ]
        runs.append(([p.detach().clone() for p in model.parameters()], losses, opt))
    (plain, plain_losses, plain_opt), (cached, cached_losses, cached_opt) = runs
    assert all(torch.equal(p, q) for p, q in zip(plain, cached)) and plain_losses == cached_losses
    assert isinstance(cached_opt.space, CachedModuleSpace) and cached_opt.space.generated == 5
    assert type(plain_opt.space) is ModuleSpace  # off by default
    assert cached_opt.accountant.to_json() == plain_opt.accountant.to_json()


def test_cache_directions_must_be_a_bool():
    model = mlp(torch.float64)
    with pytest.raises(ValueError, match="cache_directions must be a bool"):
        MeZOOptimizer(
            model.parameters(),
            lr=0.1,
            sampler=PoissonSampler.for_testing(8, 2, seed=0),
            model=model,
            data=(torch.zeros(8, 5), torch.zeros(8)),
            cache_directions=1,
        )


def test_a_model_of_more_than_a_million_entries_moves_alike():
    """Above 2^20 entries (where dpnc.space may draw u from several generators) the cache still adds
    what the uncached space adds, bit for bit."""

    def model():
        torch.manual_seed(0)  # test-only: initialise the model reproducibly
        return nn.Sequential(nn.Embedding(9000, 128), nn.Linear(128, 4))

    a, b = model(), model()
    plain, cached = ModuleSpace(a.parameters()), CachedModuleSpace(b.parameters())
    assert plain.d > 2**20
    for seed in (21, 22):
        for space in (plain, cached):
            space.perturb_(seed, 1e-3)
            space.perturb_(seed, -2e-3)
            space.update_(seed, -0.3)
    assert (
        all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
        and cached.generated == 2
    )
