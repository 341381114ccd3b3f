"""Small seeded data, models and parameter snapshots that the unit tests share.

Each test module keeps its own sizes (N, FEATURES, width); these build from them, so the seeds, the
target's weights and the model's shape are written once."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import TensorDataset

WEIGHTS = (1.0, -2.0, 0.5, 1.5)  # the linear target's weights: its first `features` of them


def generator(seed: int = 0) -> torch.Generator:
    """A CPU generator seeded for a test's public randomness (data, points, directions)."""
    return torch.Generator().manual_seed(seed)


def linear_rows(n: int, features: int, *, seed: int = 0, dtype=torch.float32) -> TensorDataset:
    """n rows X ~ N(0, I) of ``features`` columns and their labels y = X·w exactly, w the first
    ``features`` of :data:`WEIGHTS` (at most 4)."""
    X = torch.randn(n, features, generator=generator(seed), dtype=dtype)
    return TensorDataset(X, X @ torch.tensor(WEIGHTS[:features], dtype=dtype))


def tanh_mlp(features: int, width: int, *, seed: int = 0, dtype=torch.float32) -> nn.Sequential:
    """Linear → Tanh → Linear to one output, initialised from ``seed`` (test-only: torch's global
    generator, as a user's script seeds it)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(features, width), nn.Tanh(), nn.Linear(width, 1)).to(dtype)


def snapshot(model: nn.Module) -> list[torch.Tensor]:
    """Copies of the model's parameters, to compare after a step."""
    return [p.detach().clone() for p in model.parameters()]
