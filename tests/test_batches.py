"""The batch contract by construction: the optimizer hands the loss function its batch, and refuses
the rest.

Each refusal here was accepted by main at 2d9212e (an adversarial review measured the holes: a
closure on `X[:len(xb)]` accepted in 40 of 40 steps, a stale batch in 119 of 199, BatchNorm without
running statistics and `model.train()` after construction accepted at every step). Every refused
step must release nothing and leave the parameters as they were."""

import re

import pytest
import torch
from torch import nn

import dpnc
from dpnc.privacy.accountant import Accountant
from dpnc.sampling import FullBatch, PoissonSampler
from dpnc.tier.zeroth_order import DPZeroOptimizer, MeZOOptimizer
from tests.toys import linear_rows

N, FEATURES, B, STEPS = 128, 4, 16, 6
ZEROTH, FIRST = ("dpzero", "mezo"), ("dp-sgd",)


def dataset(n=N, seed=0):
    return linear_rows(n, FEATURES, seed=seed)


def loss(model):
    return lambda xb, yb: (model(xb).squeeze(-1) - yb) ** 2


def private(model, optimizer, data=None, **kwargs):
    data = data if data is not None else dataset()
    extra = dict(target_epsilon=2.0, delta=1e-5, clip=5.0) if optimizer != "mezo" else {}
    return dpnc.make_private(
        model,
        data=data,
        n=N,
        optimizer=optimizer,
        steps=STEPS,
        batch_size=B,
        lr=0.05,
        **{**extra, **kwargs},
    )


def snapshot(model):
    return [p.detach().clone() for p in model.parameters()]


def unchanged(before, model):
    # The ±λu perturbation of a refused zeroth-order step is undone arithmetically: equal to float32
    # rounding.
    return all(torch.allclose(a, b, rtol=0, atol=1e-6) for a, b in zip(before, model.parameters()))


def non_empty_batch(opt, loader, model):
    """The loader's first batch with >= 2 rows (stepping on the ones before it); returns (iterator,
    xb, yb)."""
    it = iter(loader)
    xb, yb = next(it)
    while len(xb) < 2:
        opt.step(loss(model))
        xb, yb = next(it)
    return it, xb, yb


@pytest.mark.parametrize("optimizer", ZEROTH + FIRST)
def test_another_batch_of_the_pending_batchs_size_is_refused(optimizer):
    model = nn.Linear(FEATURES, 1).eval()
    data = dataset()
    opt, loader, acct = private(model, optimizer, data=data, testing_seed=1)
    X, y = data.tensors
    _, xb, yb = non_empty_batch(opt, loader, model)
    before, released = snapshot(model), acct.releases
    for other in (
        (X[: len(xb)], y[: len(xb)]),  # the review's attack: the first rows, same size
        (xb.clone(), yb.clone()),  # a copy: equal values, not the batch the loader yielded
        (xb[:], yb),
    ):  # a view
        with pytest.raises(ValueError, match="inputs must be the batch the loader just yielded"):
            opt.step(loss(model), *other)
        assert acct.releases == released and unchanged(before, model)
    opt.step(loss(model), xb, yb)  # the very objects the loader yielded are accepted
    assert acct.releases == released + 1


@pytest.mark.parametrize("optimizer", ZEROTH + FIRST)
def test_a_stale_or_spent_batch_is_refused(optimizer):
    model = nn.Linear(FEATURES, 1).eval()
    opt, loader, acct = private(model, optimizer, testing_seed=2)
    it, xb, yb = non_empty_batch(opt, loader, model)
    opt.step(loss(model), xb, yb)
    released = acct.releases
    with pytest.raises(ValueError, match="no batch is pending"):  # spent: a second step on it
        opt.step(loss(model), xb, yb)
    next(it)  # the next batch is drawn and pending
    before = snapshot(model)
    with pytest.raises(
        ValueError, match="inputs must be the batch the loader just yielded"
    ):  # stale
        opt.step(loss(model), xb, yb)
    assert acct.releases == released and unchanged(before, model)


@pytest.mark.parametrize("optimizer", ZEROTH + FIRST)
def test_the_loss_function_is_handed_exactly_the_batch_the_loader_yielded(optimizer):
    model = nn.Linear(FEATURES, 1).eval()
    extra = (
        {"per_example": "loop"} if optimizer in FIRST else {}
    )  # real tensors to record (not vmap's)
    opt, loader, acct = private(model, optimizer, testing_seed=3, **extra)
    coupling_checked = False
    for xb, yb in loader:
        handed = []

        def recording(x, y, handed=handed):
            handed.append((x, y))
            return loss(model)(x, y)

        opt.step(recording)
        if len(xb) == 0:
            assert (
                handed == []
            )  # an empty batch releases noise only, without calling the loss function
        elif optimizer in ZEROTH:
            assert (
                all(x is xb and y is yb for x, y in handed) and len(handed) == 2
            )  # the two forward passes
        else:  # per-example gradients: one example at a time, sliced from the yielded batch
            rows = [x for x, _ in handed]
            if (
                len(xb) >= 2 and not coupling_checked
            ):  # then the coupled-loss check, once: the whole
                rows, check = rows[:-3], rows[-3:]  # batch, and its first two examples alone
                assert torch.equal(check[0], xb) and torch.equal(torch.cat(check[1:]), xb[:2])
                coupling_checked = True
            assert torch.equal(torch.cat(rows), xb)
    assert acct.releases == STEPS
    assert coupling_checked or optimizer in ZEROTH


def test_the_direct_optimizer_fetches_its_rows_from_the_data_it_was_given():
    X, y = dataset().tensors
    model = nn.Linear(FEATURES, 1).eval()
    opt = DPZeroOptimizer(
        model.parameters(),
        lr=0.05,
        clip=5.0,
        noise_multiplier=1.0,
        model=model,
        data=(X, y),
        sampler=PoissonSampler.for_testing(N, B, seed=4),
        accountant=Accountant("add/remove"),
    )
    twin = PoissonSampler.for_testing(N, B, seed=4)
    for _ in range(3):
        handed = []
        opt.step(lambda xb, yb, handed=handed: handed.append((xb, yb)) or loss(model)(xb, yb))
        rows = twin.sample()
        assert all(torch.equal(x, X[rows]) and torch.equal(t, y[rows]) for x, t in handed)
    with pytest.raises(ValueError, match="inputs must be left out"):
        opt.step(loss(model), X[:B], y[:B])
    with pytest.raises(ValueError, match="loss_fn must take the batch as arguments"):
        opt.step(lambda: loss(model)(X[:B], y[:B]))
    with pytest.raises(ValueError, match="data must be the training data"):
        DPZeroOptimizer(
            model.parameters(),
            lr=0.05,
            clip=5.0,
            noise_multiplier=1.0,
            model=model,
            sampler=FullBatch(N),
            accountant=Accountant(),
        )


BATCH_STATISTICS = {
    "train-mode BatchNorm": lambda: nn.Sequential(
        nn.Linear(FEATURES, 4), nn.BatchNorm1d(4), nn.Linear(4, 1)
    ),
    "BatchNorm without running statistics, in eval mode": lambda: nn.Sequential(
        nn.Linear(FEATURES, 4), nn.BatchNorm1d(4, track_running_stats=False), nn.Linear(4, 1)
    ).eval(),
}


@pytest.mark.parametrize("name", BATCH_STATISTICS)
@pytest.mark.parametrize("optimizer", ZEROTH + FIRST)
def test_normalisation_with_batch_statistics_is_refused(name, optimizer):
    with pytest.raises(ValueError, match="BatchNorm"):
        private(BATCH_STATISTICS[name](), optimizer, testing_seed=0)


@pytest.mark.parametrize("optimizer", ZEROTH + FIRST)
def test_model_train_after_construction_is_refused_at_the_next_step(optimizer):
    model = nn.Sequential(nn.Linear(FEATURES, 4), nn.BatchNorm1d(4), nn.Linear(4, 1)).eval()
    opt, loader, acct = private(model, optimizer, testing_seed=5)
    _, xb, yb = non_empty_batch(opt, loader, model)
    opt.step(loss(model))
    next(iter(loader))
    # BatchNorm would now normalise with the batch and write its mean into running_mean
    model.train()
    norm = model[1]
    before, running, released = snapshot(model), norm.running_mean.clone(), acct.releases
    with pytest.raises(ValueError, match="BatchNorm in train mode"):
        opt.step(loss(model))
    assert acct.releases == released and unchanged(before, model)
    assert torch.equal(norm.running_mean, running)  # no batch statistic reached the saved state
    model.eval()
    opt.step(loss(model))  # the batch stayed pending: the corrected model may take it
    assert acct.releases == released + 1


def test_active_dropout_after_construction_is_refused_for_zeroth_order_steps():
    model = nn.Sequential(nn.Linear(FEATURES, 4), nn.Dropout(0.5), nn.Linear(4, 1)).eval()
    X, y = dataset().tensors
    opt = MeZOOptimizer(model.parameters(), lr=0.05, model=model, data=(X, y), sampler=FullBatch(N))
    opt.step(loss(model))
    model.train()
    with pytest.raises(ValueError, match="dropout"):
        opt.step(loss(model))


@pytest.mark.parametrize("optimizer", ("dpzero", "dp-sgd"))
def test_a_neighbour_with_one_more_row_gets_the_same_noise_and_ledger(optimizer):
    # n is declared: q, σ and every ledger entry are the same whether the data hold N or N + 1 rows.
    ledgers = []
    for rows in (N, N + 1):
        model = nn.Linear(FEATURES, 1).eval()
        opt, loader, acct = private(model, optimizer, data=dataset(rows), testing_seed=6)
        for _ in loader:
            opt.step(loss(model))
        ledgers.append(acct.to_json())
    assert ledgers[0] == ledgers[1]


def test_data_rows_from_a_dataset_collate_the_drawn_items():
    from dpnc.batches import DataRows

    data = dataset()
    X, y = data.tensors
    rows = torch.tensor([5, 0, 17])
    xb, yb = DataRows(data).rows(
        rows
    )  # a TensorDataset's items, collated by torch's default_collate
    assert torch.equal(xb, X[rows]) and torch.equal(yb, y[rows])
    as_dict = DataRows(
        data, collate_fn=lambda items: {"x": torch.stack([x for x, _ in items])}
    ).rows(rows)
    assert len(as_dict) == 1 and torch.equal(as_dict[0]["x"], X[rows])  # a dict is one argument
    for bad, message in (
        ((X, y[:-1]), "one row per example"),
        (object(), "map-style Dataset"),
        (None, "data must be given"),
    ):
        with pytest.raises(ValueError, match=message):
            DataRows(bad)


@pytest.mark.parametrize("optimizer", ZEROTH + FIRST)
def test_a_loss_fn_of_one_argument_is_refused_before_it_sees_the_batch(optimizer):
    # Before: Python's TypeError "<lambda>() takes 1 positional argument but 2 were given", raised
    # after the step had released (the batch counted as raising in every example).
    model = nn.Linear(FEATURES, 1).eval()
    opt, loader, acct = private(model, optimizer, testing_seed=4)
    it, xb, yb = non_empty_batch(opt, loader, model)
    before, released = snapshot(model), acct.releases
    with pytest.raises(
        ValueError,
        match=r"loss_fn is called as loss_fn\(\*batch\) with the batch unpacked \(here 2 tensors: "
        r"x, y\); got a function of 1 argument, <lambda>\(batch\)\. Write loss_fn\(x, y\) or "
        r"lambda \*batch: \.\.\.",
    ):
        opt.step(lambda batch: loss(model)(*batch))
    assert acct.releases == released and unchanged(before, model)
    opt.step(loss(model))  # the batch was not seen: it is still pending, and the next step takes it
    assert acct.releases == released + 1


@pytest.mark.parametrize("optimizer", ZEROTH + FIRST)
def test_a_type_error_inside_the_loss_fn_is_the_users_own(optimizer):
    model = nn.Linear(FEATURES, 1).eval()
    opt, loader, _ = private(model, optimizer, testing_seed=4)
    non_empty_batch(opt, loader, model)

    def raising(x, y):
        raise TypeError("the user's own")

    with pytest.raises(TypeError, match="the user's own"):
        opt.step(raising)


def test_the_direct_optimizer_refuses_a_loss_fn_of_the_wrong_arity_before_any_release():
    X, y = dataset().tensors
    model = nn.Linear(FEATURES, 1).eval()
    acct = Accountant("add/remove")
    opt = DPZeroOptimizer(
        model.parameters(),
        lr=0.05,
        clip=5.0,
        noise_multiplier=1.0,
        sampler=FullBatch(N),
        accountant=acct,
        model=model,
        data=(X, y),
    )
    with pytest.raises(ValueError, match=r"here 2 tensors: x, y\); got a function of 3 arguments"):
        opt.step(lambda x, y, z: loss(model)(x, y))
    assert acct.releases == 0


@pytest.mark.parametrize("optimizer", ZEROTH + FIRST)
@pytest.mark.parametrize("shape", [(), (1,)])
def test_a_loss_reduced_over_the_batch_is_refused_with_reduction_none(optimizer, shape):
    # Before: "the closure must return ... a 1-d tensor ...; got a 0-d tensor of another shape"
    # (zeroth order), "... shape (b,) (here (1,) for one example); got ()" (first order), no fix.
    model = nn.Linear(FEATURES, 1).eval()
    opt, loader, acct = private(model, optimizer, testing_seed=4)
    non_empty_batch(opt, loader, model)
    released = acct.releases

    def reduced(x, y):
        return loss(model)(x, y).mean().reshape(shape)

    if optimizer in FIRST and shape == (1,):
        # each example is evaluated alone, as a batch of one: its mean is its own loss
        opt.step(reduced)
        return
    here = r" \(here B = 1: each example is evaluated alone\)" if optimizer in FIRST else ""
    with pytest.raises(
        ValueError,
        match=rf"loss_fn must return per-example losses of shape \(B,\), B the size of the batch it "
        rf"is given{here}: clipping is per example; got shape {re.escape(str(shape))}\. Do not "
        r'reduce over the batch: use reduction="none", e\.g\. F\.cross_entropy\(logits, y, '
        r'reduction="none"\)',
    ) as raised:
        opt.step(reduced)
    # The loss ran on the secret batch: the step released as any step does (docs/privacy.md), and
    # says so.
    assert raised.value.dpnc_released and acct.releases == released + 1
