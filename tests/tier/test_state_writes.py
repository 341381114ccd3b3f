"""Writes the state guard must catch whatever their path, and steps that raise (review of the state
guard).

Each case is ordinary user code that leaked against a claimed ε = 1 before the guard watched every
module a loss runs, compared values as well as version counters, poisoned the run at the first
write, and released for a step whose loss raises:

(a) a frozen BatchNorm backbone left in train mode, outside the ``model`` given to make_private (ε ≥
2.28); (b) writes through ``.data``: a buffer kept by ``.data.mul_().add_()``, an ActNorm-style
initialisation
    ``loc.data.copy_(-x.mean(0))``, ``xb.data.copy_(...)`` on the yielded batch (ε ≥ 1.53, 1.76,
    2.96);
(c) a skip-on-error loop that kept stepping after a caught parameter write and published it (ε ≥
1.40); (d) a raising step that moved nothing, so the saved model told which steps raised (ε ≥ 2.81 /
2.73)."""

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from dpnc.tier.model_state import ModelStateChanged, ModuleNotReady, RunPoisoned, StateGuard
from tests.tier.test_model_state import FEATURES, FIRST, ZEROTH, dataset, private, squared

# -- (a) a module the loss runs that is not the model ----------------------------------------------


@pytest.mark.parametrize("optimizer", [ZEROTH, FIRST])
def test_a_train_mode_batchnorm_backbone_outside_the_model_is_refused_before_its_forward(optimizer):
    backbone = nn.Sequential(
        nn.Linear(FEATURES, 4), nn.BatchNorm1d(4)
    )  # frozen, left in train mode
    backbone.requires_grad_(False)
    head = nn.Linear(4, 1)
    opt, loader, accountant = private(head, optimizer)

    def loss_fn(xb, yb):
        return (head(backbone(xb)).squeeze(-1) - yb) ** 2

    batches = iter(loader)
    next(batches)
    before = backbone[1].running_mean.clone()
    with pytest.raises(ModuleNotReady, match="BatchNorm in train mode"):
        opt.step(loss_fn)
    assert torch.equal(backbone[1].running_mean, before) and accountant.releases == 1
    backbone.eval()  # nothing was written: the run goes on once the backbone is fixed
    next(batches)
    opt.step(loss_fn)
    assert accountant.releases == 2 and torch.equal(backbone[1].running_mean, before)


class Remembers(nn.Module):
    """Keeps the mean of what it saw in a buffer (no type list names it)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("seen", torch.zeros(FEATURES))

    def forward(self, x):
        self.seen.copy_(x.mean(0))
        return x


def test_a_module_outside_the_model_that_writes_its_buffer_is_caught_and_put_back():
    outside, head = Remembers().eval(), nn.Linear(FEATURES, 1)
    opt, loader, accountant = private(head, ZEROTH)
    next(iter(loader))
    with pytest.raises(ModelStateChanged, match=r"outside:Remembers \(outside:Remembers.seen\)"):
        opt.step(lambda xb, yb: (head(outside(xb)).squeeze(-1) - yb) ** 2)
    assert torch.equal(outside.seen, torch.zeros(FEATURES)) and accountant.releases == 1


# -- (b) writes through .data ----------------------------------------------------------------------


class DataEMA(nn.Module):
    """A running mean kept through .data (no version counter moves)."""

    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(FEATURES, 1)
        self.register_buffer("ema", torch.zeros(FEATURES))

    def forward(self, x):
        self.ema.data.mul_(0.9).add_(0.1 * x.detach().mean(0))
        return self.layer(x)


class ActNorm(nn.Module):
    """ActNorm's data-dependent initialisation: the bias set from the first batch through .data."""

    def __init__(self):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(FEATURES))
        self.layer = nn.Linear(FEATURES, 1)
        self.initialised = False

    def forward(self, x):
        if not self.initialised:
            self.loc.data.copy_(-x.detach().mean(0))
            self.initialised = True
        return self.layer(x + self.loc)


@pytest.mark.parametrize("optimizer", [ZEROTH, FIRST])
def test_a_buffer_written_through_data_is_caught_and_put_back(optimizer):
    model = DataEMA().eval()
    opt, loader, accountant = private(model, optimizer)
    next(iter(loader))
    with pytest.raises((ModelStateChanged, RuntimeError)) as refused:
        opt.step(squared(model))
    if optimizer == ZEROTH:  # torch.func may refuse the write itself on the first-order routes
        assert "model (ema)" in str(refused.value)
    assert torch.equal(model.ema, torch.zeros(FEATURES))


@pytest.mark.parametrize("optimizer", [ZEROTH, FIRST])
def test_a_parameter_initialised_from_the_batch_through_data_is_caught_and_poisons(optimizer):
    model = ActNorm().eval()
    opt, loader, accountant = private(model, optimizer)
    batches = iter(loader)
    next(batches)
    with pytest.raises(ModelStateChanged, match=r"(?s)model \(loc\).*set to NaN"):
        opt.step(squared(model))
    assert model.loc.isnan().all()  # read directly, it tells nothing of the batch
    next(batches)
    with pytest.raises(RunPoisoned, match="poisoned"):
        opt.step(squared(model))


def test_the_guard_sees_a_data_write_no_version_counter_sees():
    model = nn.Linear(FEATURES, 1)
    guard = StateGuard(model)
    guard.mark()
    version = model.weight._version
    model.weight.data.add_(1e-6)
    assert model.weight._version == version  # what the guard read before: nothing
    with pytest.raises(ModelStateChanged, match=r"model \(weight\)"):
        guard.check()


@pytest.mark.parametrize("optimizer", [ZEROTH, FIRST])
def test_a_yielded_batch_written_through_data_is_refused_and_charged(optimizer):
    model = nn.Linear(FEATURES, 1).eval()
    opt, loader, accountant = private(model, optimizer)
    xb, yb = next(iter(loader))
    xb.data.copy_(xb.mean(0, keepdim=True).expand_as(xb))  # every row the batch's mean
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match="xb.data.copy_"):
        opt.step(squared(model))
    assert accountant.releases == 1
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    with pytest.raises(ValueError, match="no batch is pending"):
        opt.step(squared(model))


def test_a_batch_written_through_data_inside_the_loss_is_caught():
    model = nn.Linear(FEATURES, 1).eval()
    opt, loader, accountant = private(model, ZEROTH)
    next(iter(loader))

    def loss_fn(xb, yb):
        losses = (model(xb).squeeze(-1) - yb) ** 2
        xb.data.copy_(xb.mean(0, keepdim=True).expand_as(xb))  # the second pass would see the mean
        return losses

    with pytest.raises(ModelStateChanged, match="the batch handed to loss_fn"):
        opt.step(loss_fn)


# -- (c) a caught write poisons the run ------------------------------------------------------------


class WritesOnce(nn.Module):
    """A layer that writes its weight in place with what it saw, at its second call."""

    def __init__(self):
        super().__init__()
        self.layer, self.calls = nn.Linear(FEATURES, 1), 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 3:
            with torch.no_grad():
                self.layer.weight.add_(x.mean(0))
        return self.layer(x)


def test_after_a_caught_parameter_write_every_step_and_save_is_refused():
    model = WritesOnce().eval()
    opt, loader, accountant = private(model, ZEROTH, steps=6)
    errors = []
    for _ in loader:  # the skip-on-error loop of the attack
        try:
            opt.step(squared(model))
        except ModelStateChanged as error:
            errors.append(error)
    assert isinstance(errors[0], ModelStateChanged) and not isinstance(errors[0], RunPoisoned)
    assert len(errors) == 5 and all(isinstance(e, RunPoisoned) for e in errors[1:])
    assert "poisoned" in str(errors[1]) and "layer (layer.weight)" in str(errors[1])
    with pytest.raises(RunPoisoned, match="poisoned"):
        opt.state_dict()
    with pytest.raises(RunPoisoned, match="poisoned"):
        model.state_dict()
    assert accountant.releases == 6  # every drawn batch charged


# -- (d) a step whose loss raises releases all the same --------------------------------------------


def _run(optimizer, raise_at, steps=4):
    """The parameters after each step of a run whose loss raises at step ``raise_at`` (None:
    never)."""
    model = nn.Linear(FEATURES, 1)
    torch.nn.init.zeros_(model.weight), torch.nn.init.zeros_(model.bias)
    seeds = {"seed": 5} if optimizer == ZEROTH else {}  # the public directions, too
    opt, loader, accountant = private(model, optimizer, steps=steps, testing_seed=3, **seeds)
    after, raised = [], []
    for t, _ in enumerate(loader):

        def loss_fn(xb, yb, t=t):
            if t == raise_at:
                raise RuntimeError("a bad batch")
            return (model(xb).squeeze(-1) - yb) ** 2

        try:
            opt.step(loss_fn)
        except RuntimeError as error:
            raised.append(error)
        after.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    return after, raised, accountant.releases


@pytest.mark.parametrize("optimizer", [ZEROTH, FIRST])
def test_a_step_whose_loss_raises_still_moves_the_model_with_noise(optimizer):
    plain, none, releases = _run(optimizer, None)
    after, raised, releases_raising = _run(optimizer, 2)
    assert len(raised) == 1 and "still released" in "".join(raised[0].__notes__)
    assert releases == releases_raising == 4
    assert torch.equal(after[1], plain[1])  # the same run until the raising step
    assert not torch.equal(after[2], after[1])  # the raising step moved the model (noise only)
    assert not torch.equal(after[2], plain[2])  # and not as the step that did not raise
    assert all(torch.isfinite(a).all() for a in after)


@pytest.mark.parametrize("optimizer", [ZEROTH, FIRST])
def test_the_examples_whose_loss_raises_count_zero_and_the_others_count(optimizer):
    """A loss that raises on a bad row: the batch is evaluated example by example, the bad ones
    count 0."""
    X, y = dataset().tensors
    y = y.clone()
    y[:16] = float("nan")  # a quarter of the rows: most batches hold one
    model = nn.Linear(FEATURES, 1)
    opt, loader, accountant = private(
        model, optimizer, data=TensorDataset(X, y), steps=4, testing_seed=0
    )
    stats = []
    opt.register_step_hook(lambda opt, info: stats.append(info.private_stats))

    def loss_fn(xb, yb):
        if torch.isnan(yb).any():
            raise ValueError("a bad label")
        return (model(xb).squeeze(-1) - yb) ** 2

    raised = 0
    for t, (_, yb) in enumerate(loader):
        bad, before = int(torch.isnan(yb).sum()), model.weight.detach().clone()
        if bad:
            raised += 1
            with pytest.raises(ValueError, match="a bad label"):
                opt.step(loss_fn)
            assert not torch.equal(model.weight, before)
        else:
            opt.step(loss_fn)
        assert stats[t].nonfinite == bad  # the bad rows only: the others counted
    assert raised >= 1 and accountant.releases == 4
