"""make_private for Opacus habits: epochs, a loader that refuses a pass beyond the budget, optimizer
instances, and ε reported by the accountant that calibrated."""

import math

import pytest
import torch
from torch import nn

import dpnc
from dpnc.tier.first_order import DPOptimizer
from tests.toys import linear_rows

N, FEATURES, B, DELTA = 64, 3, 16, 1e-5


def dataset(n=N):
    return linear_rows(n, FEATURES)


def model(seed=0):
    torch.manual_seed(seed)  # test-only: reproducible initialisation
    return nn.Linear(FEATURES, 1).eval()


def loss(m):
    return lambda xb, yb: (m(xb).squeeze(-1) - yb) ** 2


def run(m, **kwargs):
    defaults = dict(
        data=dataset(),
        n=N,
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
    m = model()
    opt, loader, acct = run(m, epochs=3)
    per_epoch = math.ceil(N / B)
    assert len(loader) == per_epoch
    for _ in range(3):
        seen = 0
        for _batch in loader:
            opt.step(loss(m))
            seen += 1
        assert seen == per_epoch
    assert acct.releases == 3 * per_epoch
    assert acct.epsilon(DELTA) <= 3.0  # calibrated for 3 epochs' steps, each one accounted
    with pytest.raises(ValueError, match="yielded all steps=12 batches"):
        for _batch in loader:  # a fourth epoch: refused, never silently empty
            pass


def test_epochs_match_steps_and_give_the_same_noise():
    a, _, _ = run(model(), epochs=2)
    b, _, _ = run(model(), steps=2 * math.ceil(N / B))
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
        run(model(), **kwargs)


def test_a_second_pass_after_a_steps_run_is_refused_with_a_clear_error():
    m = model()
    opt, loader, acct = run(m, steps=5)
    for _batch in loader:
        opt.step(loss(m))
    assert acct.releases == 5
    with pytest.raises(ValueError, match="another pass would spend beyond the privacy budget"):
        for _batch in loader:
            opt.step(loss(m))
    assert acct.releases == 5


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_epsilon_is_reported_by_the_accountant_that_calibrated(accountant):
    m = model()
    opt, loader, acct = run(m, steps=20, accountant=accountant, target_epsilon=3.0)
    for _batch in loader:
        opt.step(loss(m))
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
    m = model()
    inner = build(m.parameters())
    opt, loader, acct = run(
        m, optimizer=inner, lr=None, steps=4, noise_multiplier=1.0, target_epsilon=None, delta=None
    )
    assert isinstance(opt, DPOptimizer) and opt.optimizer is inner
    before = [p.detach().clone() for p in m.parameters()]
    for _batch in loader:
        opt.step(loss(m))
    assert acct.releases == 4
    assert any(not torch.equal(a, b) for a, b in zip(before, m.parameters()))
    assert inner.param_groups[0]["lr"] == opt.param_groups[0]["lr"]


def test_optimizer_instances_that_cannot_be_wrapped_are_refused_saying_what_to_pass():
    m = model()
    with pytest.raises(ValueError, match="lr must be None when optimizer is an instance"):
        run(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1), steps=4)
    with pytest.raises(ValueError, match="optimizer must hold trainable parameters of model"):
        run(m, optimizer=torch.optim.SGD(nn.Linear(2, 1).parameters(), lr=0.1), lr=None, steps=4)
    private, _, _ = run(model(), optimizer="dp-sgd", steps=2, seed=None)
    with pytest.raises(ValueError, match="already private: pass the torch optimizer it would wrap"):
        run(m, optimizer=private, lr=None, steps=4)
