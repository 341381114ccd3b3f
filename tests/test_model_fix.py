"""``dpnc.fix_model``: BatchNorm → GroupNorm, as Opacus's ``ModuleValidator.fix``, so that a model
dpnc refused for its BatchNorm trains privately; the refusal names it first."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

import dpnc
from dpnc.tier.base import validate_model


def cnn() -> nn.Module:
    torch.manual_seed(0)  # test-only: reproducible initialisation
    return nn.Sequential(
        nn.Conv2d(1, 48, 3),
        nn.BatchNorm2d(48),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(48 * 4, 10),
        nn.BatchNorm1d(10),
        nn.InstanceNorm1d(1, affine=True, track_running_stats=True),
    )


def test_batchnorm_becomes_groupnorm_and_the_input_model_is_left_alone():
    model = cnn()
    fixed = dpnc.fix_model(model)
    kinds = [type(m).__name__ for m in fixed]
    assert kinds == [
        "Conv2d",
        "GroupNorm",
        "ReLU",
        "Flatten",
        "Linear",
        "GroupNorm",
        "InstanceNorm1d",
    ]
    # gcd(32, C) groups for BatchNorm2d; one group for BatchNorm1d (LayerNorm over its channels)
    assert (fixed[1].num_groups, fixed[1].num_channels, fixed[5].num_groups) == (16, 48, 1)
    assert not fixed[6].track_running_stats and fixed[6].running_mean is None and fixed[6].affine
    assert isinstance(model[1], nn.BatchNorm2d)  # a copy: the user's model is unchanged
    assert torch.equal(fixed[0].weight, model[0].weight) and fixed[0].weight is not model[0].weight
    assert isinstance(dpnc.fix_model(nn.BatchNorm1d(4)), nn.GroupNorm)  # a model that is one layer
    with pytest.raises(ValueError, match="has not been initialised"):
        dpnc.fix_model(nn.Sequential(nn.LazyBatchNorm1d()))
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        dpnc.fix_model("resnet")


def test_the_batchnorm_refusal_names_fix_model_first_and_the_fixed_model_trains_privately():
    model = cnn()[:5].train()
    problems = validate_model(model, dropout=False)
    assert (
        len(problems) == 1
        and "replace it with GroupNorm: model = dpnc.fix_model(model)" in problems[0]
    )
    assert problems[0].index("fix_model") < problems[0].index("model.eval()")
    fixed = dpnc.fix_model(model)
    assert validate_model(fixed, dropout=False) == []
    gen = torch.Generator().manual_seed(0)
    data = TensorDataset(
        torch.randn(64, 1, 4, 4, generator=gen), torch.randint(0, 10, (64,), generator=gen)
    )
    opt, loader, accountant = dpnc.make_private(
        fixed,
        data=data,
        n=64,
        optimizer="dp-sgd",
        target_epsilon=2.0,
        delta=1e-5,
        steps=2,
        batch_size=16,
        lr=0.1,
        clip=1.0,
    )
    before = [p.detach().clone() for p in fixed.parameters()]
    for _ in loader:
        opt.step(lambda x, y: nn.functional.cross_entropy(fixed(x), y, reduction="none"))
    assert accountant.releases == 2
    assert any(not torch.equal(a, b) for a, b in zip(before, fixed.parameters()))


def test_a_batchnorm1d_mlp_becomes_the_layernorm_mlp_and_learns_as_it_does():
    """BatchNorm1d on (N, C) input: GroupNorm(C, C) would normalise one value per group to a
    constant output (std 1e-5). The fix is LayerNorm(C) to float precision, and trains privately on
    real data as it does."""
    from sklearn.datasets import load_breast_cancer

    def mlp(norm: nn.Module) -> nn.Module:
        torch.manual_seed(0)  # test-only: reproducible initialisation
        return nn.Sequential(nn.Linear(30, 16), norm, nn.ReLU(), nn.Linear(16, 2))

    fixed, layer = dpnc.fix_model(mlp(nn.BatchNorm1d(16))), mlp(nn.LayerNorm(16))
    x = torch.randn(8, 16)
    assert torch.allclose(fixed[1](x), layer[1](x), atol=1e-6) and fixed[1](x).std(0).min() > 0.1
    X, y = load_breast_cancer(return_X_y=True)
    X = torch.tensor((X - X.mean(0)) / X.std(0), dtype=torch.float32)  # public: the features' scale
    y = torch.tensor(y)
    accuracies = []
    for model in (fixed, layer):
        opt, loader, _ = dpnc.make_private(
            model,
            data=TensorDataset(X, y),
            n=len(y),
            optimizer="dp-sgd",
            target_epsilon=4.0,
            delta=1e-5,
            steps=150,
            batch_size=64,
            lr=0.5,
            clip=1.0,
            accountant="rdp",
            testing_seed=0,
        )
        for _ in loader:
            opt.step(
                lambda xb, yb, m=model: nn.functional.cross_entropy(m(xb), yb, reduction="none")
            )
        with torch.no_grad():
            accuracies.append(float((model(X).argmax(1) == y).float().mean()))
    assert accuracies[0] == pytest.approx(accuracies[1], abs=0.01) and accuracies[0] > 0.9
