"""dpnc.make_private: optimizer, loader of secret Poisson batches and accountant, on a small real
model; epochs and optimizer instances as Opacus users pass them, ε reported by the accountant that
calibrated, and each Opacus habit answered with dpnc's equivalent instead of a bare TypeError."""

# Some refusal tests build closures over the loop's variables on purpose (what the optimizer must refuse).
# ruff: noqa: B023

import math
import re
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import dpnc
from dpnc.engine import LoaderBatches, PoissonBatchSampler
from dpnc.sampling import PoissonSampler
from dpnc.tier.first_order import DPOptimizer
from tests.toys import linear_rows, snapshot

N, FEATURES, B, STEPS, EPS, DELTA = 256, 4, 16, 40, 2.0, 1e-5
GUIDE = (
    Path(__file__).resolve().parents[1] / "docs" / "getting-started.md"
)  # its make_private section


def dataset(n=N):
    """y = Xw exactly; column 0 of X is the example's index, so a batch names its own indices."""
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(n, FEATURES, generator=gen)
    X[:, 0] = torch.arange(n, dtype=X.dtype) / n
    w = torch.tensor([1.0, -2.0, 0.5, 1.5])
    return TensorDataset(X, X @ w)


def indices(xb):
    return torch.round(xb[:, 0] * N).long()


def make_model(seed=0):
    torch.manual_seed(seed)  # test-only: reproducible initialisation
    return nn.Linear(FEATURES, 1).eval()


def per_example_loss(out, yb):
    return (out.squeeze(-1) - yb) ** 2


def private(model, **kwargs):
    data = kwargs.pop("data", None) or dataset()
    defaults = dict(
        data=data,
        n=len(data),
        optimizer="dpzero",
        target_epsilon=EPS,
        delta=DELTA,
        steps=STEPS,
        batch_size=B,
        lr=0.05,
        clip=5.0,
        seed=1,
    )
    return dpnc.make_private(model, **{**defaults, **kwargs})


def full_loss(model, data):
    X, y = data.tensors
    with torch.no_grad():
        return float(per_example_loss(model(X), y).mean())


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


EPS32 = torch.finfo(torch.float32).eps


def restored(a, b):
    """Equal up to the float32 rounding of moving x to x ± λu and back (a few ulps of max(|x|,
    1))."""
    return all(
        torch.allclose(x, y, rtol=0, atol=4 * EPS32 * max(1.0, float(x.abs().max())))
        for x, y in zip(a, b)
    )


def test_epsilon_at_most_the_target_and_close_to_it():
    model = make_model()
    opt, loader, acct = private(model)  # secret sampler and noise: a real private run
    for xb, yb in loader:
        opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
    assert acct.releases == STEPS
    assert acct.relation.value == "add/remove"
    eps = acct.epsilon(DELTA, "pld")
    assert 0.9 * EPS <= eps <= EPS
    report = acct.report(DELTA)
    assert report.private and report.releases == STEPS


def test_loader_yields_exactly_steps_batches_matching_the_secret_sampler():
    model = make_model()
    opt, loader, acct = private(model, testing_seed=7)
    assert isinstance(loader, DataLoader) and isinstance(loader.batch_sampler, PoissonBatchSampler)
    assert isinstance(loader.batch_sampler, torch.utils.data.Sampler)
    assert len(loader) == STEPS
    twin = PoissonSampler.for_testing(N, B, seed=7)  # the same seeded stream: the same batches
    count = 0
    for xb, yb in loader:
        expected = twin.sample()
        assert torch.equal(indices(xb), expected)
        opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
        count += 1
        assert len(loader) == STEPS - count  # what is left, never a realised size
    assert count == STEPS and acct.releases == STEPS
    with pytest.raises(
        ValueError, match="yielded all steps=40 batches"
    ):  # never a silent empty pass
        list(loader)  # the budget covers `steps` batches over the loader's lifetime
    assert not acct.report(DELTA).private  # seeded: marked NOT PRIVATE


def test_an_interrupted_loop_resumes_where_it_stopped():
    model = make_model()
    opt, loader, acct = private(model, testing_seed=3)
    twin = PoissonSampler.for_testing(N, B, seed=3)
    seen = 0
    for xb, yb in loader:
        assert torch.equal(indices(xb), twin.sample())
        opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
        seen += 1
        if seen == 5:
            break
    for xb, yb in loader:
        assert torch.equal(indices(xb), twin.sample())
        opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
        seen += 1
    assert seen == STEPS and acct.releases == STEPS


def test_empty_batches_reach_the_loop_but_not_the_closure_and_release_noise_only():
    # B = 1 of n = 64: a batch is empty with probability (63/64)^64 ≈ 0.37, so 30 steps see several.
    n, steps = 64, 30
    model = make_model()
    opt, loader, acct = private(model, data=dataset(n), batch_size=1, steps=steps, testing_seed=0)
    calls, empties = 0, 0

    def closure(xb, yb):
        nonlocal calls
        calls += 1
        return per_example_loss(model(xb), yb)

    for xb, yb in loader:
        if len(xb) == 0:
            empties += 1
            assert xb.shape == (0, FEATURES) and yb.shape == (0,) and xb.dtype == torch.float32
            before = snapshot(model)
            loss = opt.step(closure)
            assert math.isnan(float(loss))
            assert not same(before, snapshot(model))  # the noise moved the parameters
        else:
            opt.step(closure)
    assert empties >= 1  # fixed seed: the count is deterministic
    assert calls == 2 * (
        steps - empties
    )  # two forward passes per non-empty step, none on empty ones
    assert acct.releases == steps


def test_losses_that_are_not_one_per_example_of_the_batch_are_refused_and_the_batch_is_charged():
    """The loss function saw the batch, so the step releases all the same (every example counting 0:
    noise only, the parameters moved as by any step), the batch is spent and the error raised after:
    the ledger counts every drawn batch, and the model does not tell which steps failed."""
    model = make_model()
    data = dataset()
    opt, loader, acct = private(model, data=data, testing_seed=1)
    X, y = data.tensors
    it = iter(loader)
    for wrong in (
        lambda xb, yb: per_example_loss(model(xb[1:]), yb[1:]),  # one example short
        lambda xb, yb: per_example_loss(model(X), y),  # the whole dataset
        lambda xb, yb: per_example_loss(model(xb), yb).mean(),
    ):  # a reduced loss
        xb, yb = next(it)
        while (
            len(xb) < 2
        ):  # a batch of >= 2 examples, so dropping one leaves a non-empty wrong batch
            opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
            xb, yb = next(it)
        before, released = snapshot(model), acct.releases
        with pytest.raises(ValueError, match=r"per-example losses of shape \(B,\)"):
            opt.step(wrong)
        assert acct.releases == released + 1 and not restored(before, snapshot(model))
        with pytest.raises(ValueError, match="no batch is pending"):  # spent: not retried
            opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
    assert acct.releases == opt.sampler.drawn


def test_a_second_step_on_one_batch_is_refused():
    model = make_model()
    opt, loader, acct = private(model, testing_seed=2)
    xb, yb = next(iter(loader))
    opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
    before, released = snapshot(model), acct.releases
    with pytest.raises(ValueError, match="no batch is pending"):
        opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
    assert acct.releases == released and same(before, snapshot(model))


def test_a_step_before_the_loader_yields_is_refused():
    model = make_model()
    opt, _, acct = private(model, testing_seed=2)
    with pytest.raises(ValueError, match="no batch is pending"):
        opt.step(lambda xb, yb: torch.zeros(3))
    assert acct.releases == 0


def test_more_than_steps_steps_are_refused():
    model = make_model()
    opt, loader, acct = private(model, testing_seed=4)
    for xb, yb in loader:
        opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
    before = snapshot(model)
    with pytest.raises(ValueError, match=f"steps must be at most {STEPS}"):
        opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
    assert acct.releases == STEPS and same(before, snapshot(model))


def test_the_batch_sampler_draws_no_more_than_steps():
    batches = LoaderBatches(PoissonSampler.for_testing(N, B, seed=0), steps=2)
    batches.draw(), batches.draw()
    with pytest.raises(ValueError, match="all steps=2 batches"):
        batches.draw()


def test_the_model_learns_an_easy_problem():
    # Deterministic given testing_seed (batches, noise) and seed (directions); at ε = 2 the
    # full-data loss falls from ~7 to ~1e-2 on this run. The assertion asks for a 10x decrease.
    model = make_model()
    data = dataset()
    opt, loader, _ = private(model, data=data, testing_seed=5)
    start = full_loss(model, data)
    for xb, yb in loader:
        opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
    assert full_loss(model, data) < 0.1 * start


def test_mezo_is_not_private_and_learns():
    model = make_model()
    data = dataset()
    opt, loader, acct = dpnc.make_private(
        model,
        data=data,
        n=N,
        optimizer="mezo",
        steps=STEPS,
        batch_size=B,
        lr=0.05,
        seed=1,
        testing_seed=5,
    )
    start = full_loss(model, data)
    count = 0
    for xb, yb in loader:
        opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
        count += 1
    assert count == STEPS
    assert full_loss(model, data) < 0.1 * start
    assert math.isinf(acct.epsilon(DELTA, "pld"))
    with pytest.raises(ValueError, match=f"steps must be at most {STEPS}"):
        opt.step(lambda xb, yb: per_example_loss(model(xb), yb))


def test_mezo_makes_no_update_on_an_empty_batch():
    model = make_model()
    opt, loader, _ = dpnc.make_private(
        model,
        data=dataset(64),
        optimizer="mezo",
        steps=20,
        batch_size=1,
        lr=0.05,
        seed=1,
        testing_seed=0,
    )
    empties = 0
    for xb, yb in loader:
        before = snapshot(model)
        loss = opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
        if len(xb) == 0:
            empties += 1
            # The ±λu perturbation is undone arithmetically: equal up to float32 rounding (a few
            # ulps).
            assert math.isnan(float(loss)) and all(
                torch.allclose(a, b, rtol=1e-6, atol=1e-7) for a, b in zip(before, snapshot(model))
            )
    assert empties >= 1
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_a_user_collate_fn_is_used_and_empty_batches_keep_its_structure():
    def as_dict(items):
        return {"x": torch.stack([x for x, _ in items]), "y": torch.stack([y for _, y in items])}

    model = make_model()
    opt, loader, acct = private(
        model, data=dataset(64), batch_size=1, steps=30, collate_fn=as_dict, testing_seed=0
    )
    shapes = set()
    for batch in loader:
        assert set(batch) == {"x", "y"}
        shapes.add(len(batch["x"]) == 0)
        opt.step(
            lambda batch: per_example_loss(model(batch["x"]), batch["y"])
        )  # a dict is one argument
    assert shapes == {True, False} and acct.releases == 30


GOOD = dict(
    data=dataset(),
    n=N,
    optimizer="dpzero",
    target_epsilon=EPS,
    delta=DELTA,
    steps=STEPS,
    batch_size=B,
    lr=0.05,
    clip=5.0,
)
BAD = [
    (
        dict(optimizer="adamw"),
        r"optimizer must be one of \['dpzero', 'mezo', 'dp-adamw', 'dp-sgd'\] or a "
        r"torch.optim.Optimizer subclass; got 'adamw'",
    ),
    (dict(optimizer=nn.Linear), r"optimizer must be one of"),
    (
        dict(optimizer_kwargs={"weight_decay": 0.1}),
        r"optimizer_kwargs is for first-order optimizers only",
    ),
    (
        dict(noise_multiplier=-1.0, target_epsilon=None, delta=None),
        r"noise_multiplier must be >= 0 and finite",
    ),
    (dict(noise_multiplier=1.0), r"target_epsilon must be None when noise_multiplier is given"),
    (dict(target_epsilon=0.0), r"target_epsilon must be a finite number > 0; got 0.0"),
    (dict(target_epsilon=math.inf), r"target_epsilon must be a finite number > 0; got inf"),
    (dict(target_epsilon=None), r"target_epsilon must be a number; got None"),
    (dict(delta=1.0), r"delta must be in the open interval \(0, 1\); got 1.0"),
    (dict(delta=0), r"delta must be in the open interval \(0, 1\)"),
    (dict(steps=0), r"steps must be an integer >= 1; got 0"),
    (dict(steps=2.5), r"steps must be an integer >= 1"),
    (dict(batch_size=0), r"batch_size must be an integer in \[1, 256\]"),
    (dict(batch_size=N + 1), r"batch_size must be an integer in \[1, 256\]"),
    (dict(lr=-1.0), r"lr must be >= 0 and finite; got -1.0"),
    (dict(lr=math.nan), r"lr must be >= 0 and finite"),
    (dict(clip=0.0), r"clip must be > 0 \(inf only without noise\); got 0.0"),
    (dict(clip=math.inf), r"clip must be finite when noise_multiplier > 0"),
    *[  # left out: what the threshold is for, values to start from and how to tune it
        (
            dict(optimizer=name, clip=None),
            r"clip must be the clipping threshold C > 0 that a private optimizer needs .*clip=1\.0 "
            r".*clip=5\.0 .*clipped_fraction\); got None",
        )
        for name in ("dpzero", "dp-sgd")
    ],
    (dict(smoothing=0.0), r"smoothing must be > 0 and finite"),
    (dict(collate_fn=3), r"collate_fn must be callable or None; got 3"),
    (dict(direction="uniform"), r"direction must be one of"),
    (dict(seed=-1), r"seed must be an integer >= 0 or None"),
    (dict(testing_seed="0"), r"testing_seed must be an integer >= 0 or None"),
    (dict(data=[1, 2, 3][:0]), r"data must hold at least one example"),
    (dict(n=None), r"n must be the public number of training examples"),
    (dict(n=0), r"n must be an integer >= 1; got 0"),
    (dict(n=8), r"batch_size must be an integer in \[1, 8\]"),
    (dict(data=object()), r"data must be a map-style torch Dataset"),
    (
        dict(data=(torch.randn(N, FEATURES), torch.randn(N))),  # before: two "examples", X and y
        r"data must be a Dataset of examples; got a tuple of tensors with one length, as \(X, y\). Wrap them",
    ),
    (dict(optimizer="mezo"), r"target_epsilon must be None for optimizer='mezo'"),
    (
        dict(optimizer="mezo", target_epsilon=None, delta=None),
        r"clip must be None for optimizer='mezo'",
    ),
]


def test_a_list_of_examples_is_a_dataset_and_a_tuple_x_y_is_not():
    from dpnc.engine import _check_data

    assert _check_data([torch.zeros(FEATURES)] * 5) == 5  # one tensor per example: 5 examples
    assert _check_data([(torch.zeros(FEATURES), torch.zeros(()))] * 3) == 3
    with pytest.raises(ValueError, match=r"as \(X, y\)"):
        _check_data((torch.zeros(5, FEATURES), torch.zeros(5)))


def test_numpy_scalars_are_taken_as_numbers():
    # Before: steps=np.int64(3) was refused ("steps must be an integer >= 1; got np.int64(3)"), and
    # so were n, batch_size and noise_multiplier=np.float32(1.0), while target_epsilon="4" was
    # accepted.
    import numpy as np

    kwargs = {
        **GOOD,
        "steps": np.int64(3),
        "n": np.int32(GOOD["n"]),
        "batch_size": np.int64(GOOD["batch_size"]),
        "lr": np.float32(0.05),
    }
    model = make_model()
    opt, loader, accountant = dpnc.make_private(model, **kwargs)
    for _ in loader:
        opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
    assert accountant.releases == 3 and accountant.epsilon(DELTA) <= EPS * (1 + 1e-6)


@pytest.mark.parametrize("kwargs, message", BAD)
def test_bad_arguments_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        dpnc.make_private(make_model(), **{**GOOD, **kwargs})


def test_a_model_not_ready_for_zeroth_order_steps_is_refused_listing_every_problem():
    model = nn.Sequential(
        nn.Linear(FEATURES, 8), nn.Dropout(0.5), nn.BatchNorm1d(8), nn.Linear(8, 1)
    ).train()
    with pytest.raises(ValueError, match=r"(?s)dropout.*BatchNorm"):
        dpnc.make_private(model, **GOOD)
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        dpnc.make_private(lambda x: x, **GOOD)


def test_the_step_needs_a_loss_function_that_takes_the_batch():
    model = make_model()
    opt, loader, acct = private(model, testing_seed=0)
    xb, yb = next(iter(loader))
    with pytest.raises(ValueError, match="loss_fn must be a callable"):
        opt.step(None)
    with pytest.raises(ValueError, match="loss_fn must take the batch as arguments"):
        opt.step(
            lambda: per_example_loss(model(xb), yb)
        )  # a closure over the loop's batch: not handed one
    assert acct.releases == 0


def test_the_getting_started_make_private_section_runs_as_written():
    text = GUIDE.read_text()
    section = text.split("## The quickest start: `dpnc.make_private`", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    namespace: dict = {}
    exec(compile(blocks[0], "docs/getting-started.md (make_private)", "exec"), namespace)
    accountant = namespace["accountant"]
    assert accountant.releases == 600 and accountant.epsilon(1e-5, "pld") <= 4.0
    namespace = {}
    exec(
        compile(blocks[1], "docs/getting-started.md (make_private, first order)", "exec"), namespace
    )
    accountant, model, X, y = (namespace[k] for k in ("accountant", "model", "X", "y"))
    assert namespace["optimizer"].__class__.__name__ == "DPOptimizer"
    assert accountant.releases == 600 and accountant.epsilon(1e-5, "pld") <= 4.0
    with torch.no_grad():
        assert float(((model(X).squeeze(-1) - y) ** 2).mean()) < 0.1 * float(
            (y**2).mean()
        )  # it learned


def test_every_optimizer_takes_the_same_loop():
    # step(loss_fn, xb, yb): the zeroth-order optimizers accept the first-order call too.
    for optimizer in ("dpzero", "mezo", "dp-sgd"):
        model = make_model()
        extra = (
            {}
            if optimizer == "dpzero"
            else dict(target_epsilon=None, delta=None, clip=None)
            if optimizer == "mezo"
            else dict(target_epsilon=None, delta=None, noise_multiplier=1.0)
        )
        opt, loader, acct = private(
            model,
            optimizer=optimizer,
            steps=3,
            testing_seed=0,
            **{"seed": None if optimizer == "dp-sgd" else 1, **extra},
        )
        for xb, yb in loader:
            opt.step(lambda xb, yb: per_example_loss(model(xb), yb), xb, yb)
        assert acct.releases == 3, optimizer


def test_a_declared_n_far_from_len_data_and_a_delta_above_1_over_n_are_told_to_the_owner():
    # n = 100 on 1,400 rows (batches 14× B) or n = 10⁶ (almost every batch empty) went unremarked.
    import warnings

    from dpnc.declared import DataWarning

    data = dataset(1400)
    rdp = dict(
        accountant="rdp"
    )  # the checks precede calibration; RDP calibrates in milliseconds, PLD in seconds
    for n, said in ((100, "14.0× the batch size"), (10**6, "nearly empty")):
        with pytest.warns(DataWarning, match=said):
            private(make_model(), data=data, n=n, **rdp)
    with pytest.warns(DataWarning, match=r"delta = 0.01 is at least 1/n = 0.000714"):
        private(make_model(), data=data, n=1400, delta=0.01, **rdp)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        _, _, accountant = private(
            make_model(), data=data, n=1000, **rdp
        )  # within 2×, δ ≪ 1/n: nothing to say
    assert "owner" not in repr(accountant.report(DELTA))


@pytest.mark.parametrize("optimizer", ["dpzero", "dp-sgd"])
def test_the_opacus_habit_step_without_a_loss_function_explains_the_contract(optimizer):
    # `loss.backward(); optimizer.step()` used to get a bare "step() missing 1 required positional
    # argument".
    model = make_model()
    opt, loader, accountant = private(
        model, optimizer=optimizer, **({"seed": None} if optimizer == "dp-sgd" else {})
    )
    xb, yb = next(iter(loader))
    if optimizer == "dp-sgd":
        per_example_loss(model(xb), yb).mean().backward()
    with pytest.raises(ValueError) as refused:
        opt.step()
    lines = str(refused.value).splitlines()
    assert len(lines) == 3 and lines[0].startswith(
        "loss_fn must be a callable: optimizer.step(loss_fn) draws"
    )
    assert "loss.backward()" in lines[1] and "optimizer.step(lambda xb, yb:" in lines[2]
    assert accountant.releases == 0


def test_a_run_continued_in_one_call_reports_both_runs_epsilon():
    model = make_model()
    opt, loader, first = private(model, steps=3)
    for xb, yb in loader:
        opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
    with pytest.raises(ValueError, match="continue_from=accountant"):
        iter(loader).__next__()  # the calibrated steps are spent: the message says how to go on
    opt, loader, both = private(model, steps=2, continue_from=first)
    for xb, yb in loader:
        opt.step(lambda xb, yb: per_example_loss(model(xb), yb))
    assert both.releases == first.releases + 2 == 5  # the earlier releases, then this run's
    assert both.ledger[0].release == first.ledger[0].release
    assert both.epsilon(DELTA) > first.epsilon(DELTA)
    with pytest.raises(ValueError, match="continue_from must be the earlier run's Accountant"):
        private(make_model(), continue_from=first.to_json())


# --- epochs, a loader that refuses a pass beyond the budget, optimizer instances, and ε reported
# by the accountant that calibrated, on a 3-feature linear model -------------------------------

N_LINEAR, LINEAR_FEATURES = 64, 3


def linear_dataset(n=N_LINEAR):
    return linear_rows(n, LINEAR_FEATURES)


def linear_model(seed=0):
    torch.manual_seed(seed)  # test-only: reproducible initialisation
    return nn.Linear(LINEAR_FEATURES, 1).eval()


def squared_loss(m):
    return lambda xb, yb: (m(xb).squeeze(-1) - yb) ** 2


def private_linear(m, **kwargs):
    defaults = dict(
        data=linear_dataset(),
        n=N_LINEAR,
        optimizer="dpzero",
        target_epsilon=3.0,
        delta=DELTA,
        batch_size=B,
        lr=0.05,
        clip=5.0,
        testing_seed=0,
    )
    return dpnc.make_private(m, **{**defaults, **kwargs})


def test_epochs_calibrate_for_every_step_and_each_loop_is_one_epoch():
    m = linear_model()
    opt, loader, acct = private_linear(m, epochs=3)
    per_epoch = math.ceil(N_LINEAR / B)
    assert len(loader) == per_epoch
    for _ in range(3):
        seen = 0
        for _batch in loader:
            opt.step(squared_loss(m))
            seen += 1
        assert seen == per_epoch
    assert acct.releases == 3 * per_epoch
    assert acct.epsilon(DELTA) <= 3.0  # calibrated for 3 epochs' steps, each one accounted
    with pytest.raises(ValueError, match="yielded all steps=12 batches"):
        for _batch in loader:  # a fourth epoch: refused, never silently empty
            pass


def test_epochs_match_steps_and_give_the_same_noise():
    a, _, _ = private_linear(linear_model(), epochs=2)
    b, _, _ = private_linear(linear_model(), steps=2 * math.ceil(N_LINEAR / B))
    assert a.defaults["noise_multiplier"] == b.defaults["noise_multiplier"]


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(), "give exactly one of steps and epochs"),
        (dict(steps=4, epochs=1), "give exactly one of steps and epochs"),
        (dict(epochs=0), r"epochs must be an integer >= 1; got 0"),
        (dict(epochs=1.5), r"epochs must be an integer >= 1"),
        (dict(steps=4, accountant="prv"), r"accountant must be one of \['pld', 'rdp'\]"),
        (dict(steps=4, lr=None), "lr must be the step size"),
    ],
)
def test_bad_epochs_steps_and_accountants_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        private_linear(linear_model(), **kwargs)


def test_a_second_pass_after_a_steps_run_is_refused_with_a_clear_error():
    m = linear_model()
    opt, loader, acct = private_linear(m, steps=5)
    for _batch in loader:
        opt.step(squared_loss(m))
    assert acct.releases == 5
    with pytest.raises(ValueError, match="another pass would spend beyond the privacy budget"):
        for _batch in loader:
            opt.step(squared_loss(m))
    assert acct.releases == 5


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_epsilon_is_reported_by_the_accountant_that_calibrated(accountant):
    m = linear_model()
    opt, loader, acct = private_linear(m, steps=20, accountant=accountant, target_epsilon=3.0)
    for _batch in loader:
        opt.step(squared_loss(m))
    assert acct.method == accountant
    assert acct.epsilon(DELTA) == acct.get_epsilon(DELTA) == acct.epsilon(DELTA, accountant)
    assert 0.99 * 3.0 <= acct.get_epsilon(DELTA) <= 3.0
    report = acct.report(DELTA)
    assert report.epsilon_rdp is not None and report.epsilon_pld is not None  # the others beside it
    restored = type(acct).from_json(acct.to_json())
    assert restored.method == accountant and restored.epsilon(DELTA) == acct.epsilon(DELTA)


@pytest.mark.parametrize(
    "build",
    [lambda p: torch.optim.SGD(p, lr=0.1), lambda p: torch.optim.Adam(p, lr=0.01)],
    ids=["sgd", "adam"],
)
def test_an_optimizer_instance_on_the_model_is_wrapped_as_the_dp_step(build):
    m = linear_model()
    inner = build(m.parameters())
    opt, loader, acct = private_linear(
        m, optimizer=inner, lr=None, steps=4, noise_multiplier=1.0, target_epsilon=None, delta=None
    )
    assert isinstance(opt, DPOptimizer) and opt.optimizer is inner
    before = [p.detach().clone() for p in m.parameters()]
    for _batch in loader:
        opt.step(squared_loss(m))
    assert acct.releases == 4
    assert any(not torch.equal(a, b) for a, b in zip(before, m.parameters()))
    assert inner.param_groups[0]["lr"] == opt.param_groups[0]["lr"]


def test_optimizer_instances_that_cannot_be_wrapped_are_refused_saying_what_to_pass():
    m = linear_model()
    with pytest.raises(ValueError, match="lr must be None when optimizer is an instance"):
        private_linear(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1), steps=4)
    with pytest.raises(ValueError, match="optimizer must hold trainable parameters of model"):
        private_linear(
            m, optimizer=torch.optim.SGD(nn.Linear(2, 1).parameters(), lr=0.1), lr=None, steps=4
        )
    private, _, _ = private_linear(linear_model(), optimizer="dp-sgd", steps=2, seed=None)
    with pytest.raises(ValueError, match="already private: pass the torch optimizer it would wrap"):
        private_linear(m, optimizer=private, lr=None, steps=4)


# --- Opacus's habits, each answered with dpnc's equivalent ------------------------------------

OPACUS_DATA = TensorDataset(torch.randn(20, 3), torch.randn(20))
OPACUS_OPTIONS = dict(
    n=20, optimizer="dp-sgd", target_epsilon=1.0, delta=1e-5, steps=2, batch_size=4, lr=0.1
)


@pytest.mark.parametrize(
    "name,value,answer",
    [
        ("target_delta", 1e-5, "target_delta -> delta="),
        ("max_grad_norm", 1.0, "max_grad_norm -> clip="),
        ("sample_rate", 0.1, "sample_rate -> batch_size="),
        ("poisson_sampling", True, "secret Poisson batches"),
    ],
)
def test_opacus_names_get_dpncs_equivalent(name, value, answer):
    with pytest.raises(TypeError, match=f"unexpected keyword arguments \\['{name}'\\].*{answer}"):
        dpnc.make_private(
            nn.Linear(3, 1), data=OPACUS_DATA, clip=1.0, **OPACUS_OPTIONS, **{name: value}
        )


def test_an_unknown_name_lists_the_options_and_says_what_make_private_returns():
    with pytest.raises(
        TypeError,
        match=r"\['lrr'\] \(the optimizers' options are lr, smoothing, .*clip, .*\)\. "
        r"It returns \(optimizer, loader, accountant\)",
    ):
        dpnc.make_private(nn.Linear(3, 1), data=OPACUS_DATA, clip=1.0, lrr=0.1, **OPACUS_OPTIONS)


def test_a_data_loader_is_answered_with_its_dataset_and_batch_size():
    with pytest.raises(ValueError, match=r"pass data=loader.dataset and batch_size="):
        dpnc.make_private(
            nn.Linear(3, 1), data=DataLoader(OPACUS_DATA, batch_size=4), clip=1.0, **OPACUS_OPTIONS
        )


def test_unpacking_in_opacuss_order_says_dpncs_order():
    model, optimizer, loader = dpnc.make_private(
        nn.Linear(3, 1), data=OPACUS_DATA, clip=1.0, **OPACUS_OPTIONS
    )
    with pytest.raises(
        TypeError, match=r"returns \(optimizer, loader, accountant\), in that order"
    ):
        for _ in loader:  # the accountant, under Opacus's order
            pass
