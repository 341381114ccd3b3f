"""First-order DP in the façade: dpnc.make_private(optimizer="dp-adamw" | "dp-sgd" | a torch
optimizer class)."""

# The façade's loop binds the loop variables late on purpose (each closure runs in its own iteration).
# ruff: noqa: B023

import math

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

import dpnc
from dpnc.privacy.releases import Poisson, Sampled
from dpnc.tier.base import StepInfo
from dpnc.tier.first_order import DPOptimizer, clipped_gradient_sum
from tests.toys import linear_rows, snapshot, tanh_mlp

N, FEATURES, B, STEPS, EPS, DELTA = 256, 4, 16, 40, 2.0, 1e-5


def dataset(n=N, dtype=torch.float32):
    return linear_rows(n, FEATURES, dtype=dtype)


def make_model(seed=0, dtype=torch.float32):
    return tanh_mlp(FEATURES, 8, seed=seed, dtype=dtype)


def loss_fn(model):
    return lambda xb, yb: (model(xb).squeeze(-1) - yb) ** 2


def private(model, **kwargs):
    data = kwargs.pop("data", None) or dataset()
    defaults = dict(
        data=data,
        n=len(data),
        optimizer="dp-adamw",
        target_epsilon=EPS,
        delta=DELTA,
        steps=STEPS,
        batch_size=B,
        lr=0.02,
        clip=1.0,
    )
    return dpnc.make_private(model, **{**defaults, **kwargs})


def quick(model, **kwargs):
    """No calibration (it takes seconds): a given noise multiplier, for tests that do not check
    ε."""
    return private(
        model, **{"target_epsilon": None, "delta": None, "noise_multiplier": 1.0, **kwargs}
    )


def full_loss(model, data):
    X, y = data.tensors
    with torch.no_grad():
        return float(((model(X).squeeze(-1) - y) ** 2).mean())


@pytest.mark.parametrize("optimizer", ["dp-adamw", "dp-sgd", torch.optim.RMSprop])
def test_epsilon_within_target_one_release_per_step_in_real_units(optimizer):
    model = make_model()
    opt, loader, acct = private(model, optimizer=optimizer, clip=2.5)
    assert isinstance(opt, DPOptimizer)
    for xb, yb in loader:
        opt.step(loss_fn(model), xb, yb)
    assert (
        acct.releases == STEPS and len(acct.ledger) == 1
    )  # equal releases merged: one entry, 40 times
    release = acct.ledger[0].release
    assert isinstance(release, Sampled) and release.sampling == Poisson(B / N) and release.secret
    assert release.mechanism.sensitivity == pytest.approx(
        2.5 / B
    )  # Δ = C/B (add/remove, fixed denominator)
    assert release.mechanism.sigma == pytest.approx(opt.noise_multiplier * 2.5 / B)
    eps = acct.epsilon(DELTA, "pld")
    assert 0.9 * EPS < eps <= EPS * (1 + 1e-6)
    assert opt.step_release() == release  # what a trainer writes down before a step


@pytest.mark.parametrize("per_example", ["vmap", "loop"])
def test_per_example_gradients_equal_a_naive_loop(per_example):
    model = make_model(dtype=torch.float64)
    X, y = dataset(dtype=torch.float64).tensors
    X, y = X[:5], y[:5]
    named = {n: p for n, p in model.named_parameters()}
    got = clipped_gradient_sum(
        model, loss_fn(model), (X, y), named, 1e12, per_example=per_example, microbatch=2
    )
    naive = []  # the independent reference: one backward pass per example
    for i in range(5):
        model.zero_grad()
        loss_fn(model)(X[i : i + 1], y[i : i + 1]).sum().backward()
        naive.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    naive = torch.stack(naive)
    torch.testing.assert_close(got.total, naive.sum(0), rtol=1e-12, atol=1e-12)
    C = 0.5 * float(naive.norm(dim=1).median())
    clipped = clipped_gradient_sum(model, loss_fn(model), (X, y), named, C, per_example=per_example)
    by_hand = (naive * torch.clamp(C / naive.norm(dim=1), max=1.0).unsqueeze(1)).sum(0)
    torch.testing.assert_close(clipped.total, by_hand, rtol=1e-12, atol=1e-12)
    assert clipped.clipped == int((naive.norm(dim=1) > C).sum()) and clipped.nonfinite == 0


def test_without_noise_the_update_is_clipped_mean_adamw_by_hand():
    model = make_model(dtype=torch.float64)
    data = dataset(dtype=torch.float64)
    reference = make_model(dtype=torch.float64)
    adamw = torch.optim.AdamW(reference.parameters(), lr=0.01, weight_decay=0.1)
    opt, loader, acct = private(
        model,
        data=data,
        target_epsilon=None,
        delta=None,
        noise_multiplier=0.0,
        lr=0.01,
        clip=0.3,
        optimizer_kwargs={"weight_decay": 0.1},
        testing_seed=5,
    )
    X, y = data.tensors
    for xb, yb in loader:
        rows = [i for i in range(N) if any(torch.equal(X[i], x) for x in xb)]
        assert len(rows) == len(xb)
        grads = []
        for i in rows:  # by hand: each example's gradient, clipped to 0.3 over all parameters
            reference.zero_grad()
            loss_fn(reference)(X[i : i + 1], y[i : i + 1]).sum().backward()
            g = torch.cat([p.grad.reshape(-1) for p in reference.parameters()])
            grads.append(g * min(1.0, 0.3 / float(g.norm())))
        mean = (
            torch.stack(grads).sum(0) / B
            if grads
            else torch.zeros(sum(p.numel() for p in model.parameters()), dtype=torch.float64)
        )
        offset = 0
        for p in reference.parameters():
            p.grad = mean[offset : offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        adamw.step()
        opt.step(loss_fn(model), xb, yb)
        for a, b in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert (
        acct.releases == STEPS and acct.epsilon(DELTA, "pld") == math.inf
    )  # no noise: not private


def test_the_model_learns_a_small_regression():
    model = make_model()
    data = dataset()
    opt, loader, acct = private(model, data=data, steps=150, lr=0.02, clip=5.0, target_epsilon=4.0)
    initial = full_loss(model, data)
    for xb, yb in loader:
        opt.step(loss_fn(model), xb, yb)
    assert full_loss(model, data) < 0.3 * initial
    assert acct.epsilon(DELTA, "pld") <= 4.0 * (1 + 1e-6)


def test_step_hooks_report_public_values_and_private_stats_apart():
    model = make_model()
    opt, loader, acct = quick(model, steps=3, testing_seed=0)
    infos: list[StepInfo] = []
    handle = opt.register_step_hook(lambda o, info: infos.append(info))
    for xb, yb in loader:
        loss = opt.step(loss_fn(model), xb, yb)
    assert [i.step for i in infos] == [0, 1, 2] and all(i.seed is None for i in infos)
    d = sum(p.numel() for p in model.parameters())
    assert all(i.released.shape == (d,) and i.release == acct.ledger[0].release for i in infos)
    stats = infos[-1].private_stats
    assert stats.loss == pytest.approx(float(loss), rel=1e-5) and 0 <= stats.clipped_fraction <= 1
    handle.remove()
    assert opt.steps == 3


def test_refusals_before_the_data_release_nothing_and_after_it_charge_the_batch():
    model = make_model()
    opt, loader, acct = quick(model, steps=2, testing_seed=3)
    it = iter(loader)
    xb, yb = next(it)
    assert len(xb) > 1
    before = snapshot(model)
    bad = [
        (
            (loss_fn(model), xb[:-1], yb[:-1]),
            "inputs must be the batch the loader just yielded",
        ),  # another
        (
            (lambda: loss_fn(model)(xb, yb),),
            "must take the batch as arguments",
        ),  # not handed the batch
        ((None, xb, yb), "loss_fn must be a callable"),
    ]
    for args, message in bad:
        with pytest.raises(ValueError, match=message):
            opt.step(*args)
        assert acct.releases == 0 and all(
            torch.equal(a, b) for a, b in zip(before, model.parameters())
        )
    opt.step(loss_fn(model), xb, yb)  # the corrected call takes the same pending batch
    assert acct.releases == 1
    with pytest.raises(ValueError, match="no batch is pending"):
        opt.step(loss_fn(model), xb, yb)
    xb, yb = next(it)
    before = snapshot(model)
    with pytest.raises(ValueError, match="per-example losses"):  # reduced: the loss saw the batch
        opt.step(lambda xb, yb: loss_fn(model)(xb, yb).mean(), xb, yb)
    # released all the same (every example counting 0): the model moved by the noise, as in any step
    assert acct.releases == 2 and any(
        not torch.equal(a, b) for a, b in zip(before, model.parameters())
    )
    with pytest.raises(
        ValueError, match="steps must be at most 2"
    ):  # charged and spent: both steps are taken
        opt.step(loss_fn(model), xb, yb)


def test_an_empty_batch_releases_noise_only():
    model = make_model()
    # q = 1/256: most Poisson batches are empty.
    opt, loader, acct = quick(model, batch_size=1, steps=5, testing_seed=1)
    calls = []

    def counted(xb, yb):
        calls.append(len(xb))
        return loss_fn(model)(xb, yb)

    sizes = []
    for xb, yb in loader:
        sizes.append(len(xb))
        before = snapshot(model)
        loss = opt.step(counted, xb, yb)
        if len(xb) == 0:
            assert math.isnan(float(loss))
            assert any(
                not torch.equal(a, b) for a, b in zip(before, model.parameters())
            )  # noise moved it
    assert 0 in sizes and 0 not in calls and acct.releases == 5


def test_non_finite_gradients_count_as_zero():
    model = make_model(dtype=torch.float64)
    X, y = dataset(dtype=torch.float64).tensors
    y = y[:4].clone()
    y[1] = math.nan
    named = dict(model.named_parameters())
    got = clipped_gradient_sum(model, loss_fn(model), (X[:4], y), named, 1.0)
    ref = clipped_gradient_sum(model, loss_fn(model), (X[[0, 2, 3]], y[[0, 2, 3]]), named, 1.0)
    assert got.nonfinite == 1
    torch.testing.assert_close(got.total, ref.total, rtol=1e-12, atol=1e-12)


def test_schedulers_and_state_dict_work_on_the_wrapped_optimizer():
    model = make_model()
    opt, loader, _ = quick(model, steps=4, testing_seed=2)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for xb, yb in loader:
        opt.step(loss_fn(model), xb, yb)
        scheduler.step()
    assert (
        opt.param_groups[0]["lr"] == pytest.approx(0.02 / 16) == opt.optimizer.param_groups[0]["lr"]
    )
    state = opt.state_dict()
    assert state["dpnc"] == {"steps": 4} and "noise" not in str(state.keys())
    fresh_model = make_model()
    fresh, _, _ = quick(fresh_model, steps=4, testing_seed=2)
    fresh.load_state_dict(state)
    assert (
        fresh.steps == 4
        and fresh.optimizer.state_dict()["state"].keys()
        == opt.optimizer.state_dict()["state"].keys()
    )


def test_bad_first_order_arguments_are_refused_by_name():
    model = make_model()
    with pytest.raises(ValueError, match="optimizer must be one of"):
        private(model, optimizer="adamw")
    with pytest.raises(ValueError, match="optimizer must be a name"):
        private(model, optimizer=DPOptimizer)
    with pytest.raises(ValueError, match="seed must be None for .* zeroth-order optimizers only"):
        private(model, seed=3)
    with pytest.raises(
        ValueError, match="direction must be None for .* zeroth-order optimizers only"
    ):
        private(model, direction="sphere")
    with pytest.raises(ValueError, match="optimizer_kwargs must be arguments of AdamW"):
        private(model, optimizer_kwargs={"momentum": 0.9})
    with pytest.raises(
        ValueError, match="target_epsilon must be None when noise_multiplier is given"
    ):
        private(model, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="per_example must be one of"):
        private(model, per_example="hooks")
    with pytest.raises(ValueError, match="clip must be"):
        private(model, clip=-1.0)
    bn = nn.Sequential(nn.Linear(FEATURES, 8), nn.BatchNorm1d(8), nn.Linear(8, 1)).train()
    with pytest.raises(ValueError, match="BatchNorm in train mode mixes examples"):
        quick(bn)
    dropout = nn.Sequential(nn.Linear(FEATURES, 8), nn.Dropout(0.1), nn.Linear(8, 1)).train()
    opt, loader, acct = quick(
        dropout, steps=1
    )  # dropout is fine for first-order steps (one pass each)
    for xb, yb in loader:
        opt.step(loss_fn(dropout), xb, yb)
    assert acct.releases == 1


class _OwnGRU(nn.GRU):
    """A GRU with a forward of its own, which the per-layer route does not unroll: its fused kernel
    runs, which vmap cannot batch."""

    def forward(self, x, hx=None):
        return super().forward(x, hx)


class _GRUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru, self.out = _OwnGRU(2, 4, batch_first=True), nn.Linear(4, 1)

    def forward(self, x):
        return self.out(self.gru(x)[0][:, -1]).squeeze(-1)


def test_auto_takes_the_loop_where_vmap_cannot_batch_a_layer():
    # Before: nn.GRU's fused kernel has no vmap batching rule, and "auto" surfaced torch's
    #     RuntimeError at step one.
    torch.manual_seed(0)
    X, y = torch.randn(40, 5, 2), torch.randn(40)
    for per_example in ("auto", "vmap"):
        model = _GRUNet()
        opt, loader, accountant = dpnc.make_private(
            model,
            data=TensorDataset(X, y),
            n=40,
            optimizer="dp-sgd",
            noise_multiplier=1.0,
            clip=1.0,
            steps=2,
            batch_size=10,
            lr=0.1,
            per_example=per_example,
            testing_seed=0,
        )
        batches = iter(loader)
        next(batches)
        step = lambda xb, yb: (model(xb) - yb) ** 2  # noqa: E731
        if per_example == "vmap":
            with pytest.raises(ValueError, match="Use per_example='loop'") as refused:
                opt.step(step)
            assert accountant.releases == 1 and not any(
                c.isdigit() for c in str(refused.value)
            )  # no shapes
            assert (
                refused.value.__cause__ is None and refused.value.__suppress_context__
            )  # nor torch's, chained
            continue
        opt.step(step)
        assert opt.per_example == "loop" and accountant.releases == 1
    xb, yb = X[:6], y[:6]
    loss = lambda a, b: (model(a) - b) ** 2  # noqa: E731
    params = dict(model.named_parameters())
    looped = clipped_gradient_sum(model, loss, (xb, yb), params, 0.5, per_example="loop")
    by_hand = torch.zeros_like(looped.total)
    for i in range(6):  # each example's gradient, clipped to 0.5, summed
        model.zero_grad()
        loss(xb[i : i + 1], yb[i : i + 1]).sum().backward()
        g = torch.cat([p.grad.reshape(-1) for p in params.values()])
        by_hand += g * min(1.0, 0.5 / float(g.norm()))
    assert torch.allclose(looped.total, by_hand, atol=1e-6)


def test_auto_takes_the_loop_where_vmap_cannot_batch_a_frozen_layer():
    # A frozen GRU encoder (one the route does not unroll) under trained Linear layers: the
    # per-layer route maps the loss over the examples with vmap, which cannot batch the GRU, so
    # "auto" takes the loop (one example at a time) instead of raising torch's RuntimeError (a
    # review's repro).
    torch.manual_seed(0)
    X, y = torch.randn(40, 5, 2), torch.randn(40)
    model = _GRUNet()
    model.gru.requires_grad_(False)
    opt, loader, accountant = dpnc.make_private(
        model,
        data=TensorDataset(X, y),
        n=40,
        optimizer="dp-sgd",
        noise_multiplier=1.0,
        clip=1.0,
        steps=2,
        batch_size=10,
        lr=0.1,
        testing_seed=0,
    )
    assert opt.per_example == "layers"
    for _ in loader:
        opt.step(lambda xb, yb: (model(xb) - yb) ** 2)
    assert opt.per_example == "loop" and accountant.releases == 2


@pytest.mark.parametrize("per_example", ["layers", "vmap"])
def test_a_loss_that_couples_the_examples_is_refused_at_the_first_step_before_any_release(
    per_example,
):
    """An in-batch contrastive loss: each example's loss alone is 0 (log 1), so every route, which
    forms each example's gradient from that example alone, would train on noise. Refused at the
    first step, charged."""
    model = make_model()
    opt, loader, acct = private(model, per_example=per_example, testing_seed=2)

    def contrastive(
        xb, yb
    ):  # BROKEN ON PURPOSE: example i's loss reads every other example's score
        scores = model(xb).squeeze(-1)
        return torch.logsumexp(scores.unsqueeze(0) - scores.unsqueeze(1), dim=1)

    before = [p.detach().clone() for p in model.parameters()]
    for xb, _ in loader:
        if len(xb) >= 2:
            break
        opt.step(loss_fn(model))  # batches of one or none: nothing to compare
    released = acct.releases
    with pytest.raises(ValueError, match="loss_fn couples the examples of a batch"):
        opt.step(contrastive)
    assert acct.releases == released + 1  # charged: the loss saw the batch, nothing published
    if released == 0:
        assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
