"""The torch.optim-style zeroth-order optimizers (dpnc.tier.zeroth_order) on a small real model."""

import copy
import io
import math
import pickle

import pytest
import torch
from torch import nn

from dpnc.privacy import Accountant, NoiseSource
from dpnc.privacy.releases import FixedSize, Sampled
from dpnc.sampling import FullBatch, PoissonSampler, ShuffleSampler
from dpnc.tier.base import validate_model
from dpnc.tier.zeroth_order import DPZeroOptimizer, MeZOOptimizer
from tests.toys import snapshot, tanh_mlp

N, FEATURES = 128, 4


EPS32 = torch.finfo(torch.float32).eps


def data():
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(N, FEATURES, generator=gen)
    w = torch.tensor([1.0, -2.0, 0.5, 1.5])
    y = torch.sin(X @ w) + 0.5 * X[:, 0]
    return X, y


def make_model(seed=0):
    return tanh_mlp(FEATURES, 16, seed=seed).eval()


def per_example(model, X, y):
    return (model(X).squeeze(-1) - y) ** 2


def rows_of(xb):
    """The indices of a batch's rows in data() (its rows are distinct): what the sampler drew."""
    return torch.cdist(xb, data()[0]).argmin(1)


def dpzero(net, **kwargs):
    defaults = dict(
        lr=1e-2,
        clip=1.0,
        smoothing=1e-3,
        noise_multiplier=1.0,
        sampler=FullBatch(N),
        accountant=Accountant(),
        noise=NoiseSource.for_testing(0),
        seed=1,
        model=net,
        data=data(),
    )
    return DPZeroOptimizer(net.parameters(), **{**defaults, **kwargs})


def mezo(net, **kwargs):
    defaults = dict(lr=1e-2, smoothing=1e-3, sampler=FullBatch(N), seed=1, model=net, data=data())
    return MeZOOptimizer(net.parameters(), **{**defaults, **kwargs})


def test_mezo_decreases_the_loss():
    X, y = data()
    model = make_model()
    opt = mezo(model, lr=5e-2)
    with torch.no_grad():
        initial = float(per_example(model, X, y).mean())
    losses = [float(opt.step(lambda xb, yb: per_example(model, xb, yb))) for _ in range(150)]
    with torch.no_grad():
        final = float(per_example(model, X, y).mean())
    assert final < 0.7 * initial
    # step() returns the loss at x (the mean of the ± evaluations), as torch.optim does.
    assert losses[0] == pytest.approx(initial, rel=1e-3)
    assert opt.steps == 150 and len(opt.state) == 0  # no per-parameter optimizer state


def test_dpzero_changes_the_parameters_and_records_one_release_per_step():
    X, y = data()
    model = make_model()
    acct = Accountant()
    opt = dpzero(model, accountant=acct)
    before = snapshot(model)
    for t in range(5):
        loss = opt.step(lambda xb, yb: per_example(model, xb, yb))
        assert acct.releases == t + 1
        assert math.isfinite(float(loss))
    assert any(not torch.equal(p, p0) for p, p0 in zip(model.parameters(), before))
    release = acct.ledger[0].release
    assert len(acct.ledger) == 1 and release.noise_multiplier == pytest.approx(1.0)
    assert release.sensitivity == pytest.approx(2 * 1.0 / N)  # real units: Δ = 2C/B (C = 1)
    assert not acct.secret  # the test noise says so
    report = acct.report(1e-5)
    assert report.releases == 5 and not report.private and math.isfinite(report.epsilon)


def test_mezo_records_one_non_private_release_per_step():
    X, y = data()
    model = make_model()
    opt = mezo(model)
    for _ in range(3):
        opt.step(lambda xb, yb: per_example(model, xb, yb))
    assert opt.accountant.releases == 3 and opt.accountant.report(1e-5).epsilon == math.inf


def test_frozen_parameters_are_left_alone():
    X, y = data()
    model = make_model()
    model[0].weight.requires_grad_(False)
    frozen = model[0].weight.detach().clone()
    opt = dpzero(model)
    for _ in range(3):
        opt.step(lambda xb, yb: per_example(model, xb, yb))
    assert torch.equal(model[0].weight, frozen)
    assert not torch.equal(model[2].weight, snapshot(make_model())[2])


@pytest.mark.parametrize("make", [mezo, dpzero])
def test_lr_is_read_from_param_groups_every_step(make):
    X, y = data()
    closure = lambda m: lambda xb, yb: per_example(m, xb, yb)
    kwargs = {} if make is mezo else {"noise_multiplier": 0.0, "clip": math.inf}
    a, b = make_model(), make_model()
    opt_a, opt_b = make(a, **kwargs), make(b, **kwargs)
    sched = torch.optim.lr_scheduler.LambdaLR(opt_b, lambda t: 1.0 if t == 0 else 0.25)
    opt_a.step(closure(a))
    opt_b.step(closure(b))
    sched.step()
    assert opt_b.param_groups[0]["lr"] == pytest.approx(0.25 * opt_a.param_groups[0]["lr"])
    mid_a, mid_b = snapshot(a), snapshot(b)
    assert all(torch.equal(p, q) for p, q in zip(mid_a, mid_b))  # same first step (same seeds, lr)
    opt_a.step(closure(a))
    opt_b.step(closure(b))
    for pa, pb, m in zip(a.parameters(), b.parameters(), mid_a):
        da, db = pa.detach() - m, pb.detach() - m
        # Same x, same direction seed: the second move is exactly a quarter (up to float32
        # rounding).
        assert torch.allclose(db, 0.25 * da, rtol=0, atol=1e-6 * (1 + float(m.abs().max())))
        assert float(da.abs().max()) > 1e-4
    # Setting the group's lr by hand takes effect too.
    opt_b.param_groups[0]["lr"] = 1e-12
    before = snapshot(b)
    opt_b.step(closure(b))
    assert all(torch.allclose(p, q, rtol=0, atol=1e-6) for p, q in zip(b.parameters(), before))


@pytest.mark.parametrize("make", [mezo, dpzero])
def test_a_warmup_schedule_starting_at_lr_zero_works(make):
    """torch.optim accepts lr = 0 (linear warmup starts there); a step with lr 0 must not move x."""
    X, y = data()
    model = make_model()
    opt = make(model)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: t / 10)  # lr = 0 at the first step
    before = snapshot(model)
    opt.step(lambda xb, yb: per_example(model, xb, yb))
    assert all(torch.allclose(p, q, rtol=0, atol=1e-6) for p, q in zip(model.parameters(), before))
    sched.step()
    opt.step(lambda xb, yb: per_example(model, xb, yb))
    assert any(not torch.equal(p, q) for p, q in zip(model.parameters(), before))


def record_seeds(opt):
    seeds, original = [], opt.space.update_

    def spy(seed, coeff):
        seeds.append(seed)
        return original(seed, coeff)

    opt.space.update_ = spy
    return seeds


@pytest.mark.parametrize("make", [mezo, dpzero])
def test_state_dict_resumes_the_public_direction_seeds(make):
    X, y = data()
    model = make_model()
    opt = make(model, seed=123)
    for _ in range(3):
        opt.step(lambda xb, yb: per_example(model, xb, yb))
    saved_params = copy.deepcopy(model.state_dict())
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)  # a checkpoint can be written (nothing secret refuses)
    seeds_a = record_seeds(opt)
    for _ in range(4):
        opt.step(lambda xb, yb: per_example(model, xb, yb))

    resumed_model = make_model(seed=99)
    resumed_model.load_state_dict(saved_params)
    kwargs = {} if make is mezo else {"noise": NoiseSource.for_testing(0)}
    resumed = make(resumed_model, seed=7, **kwargs)
    buffer.seek(0)
    resumed.load_state_dict(torch.load(buffer, weights_only=False))
    assert resumed.steps == 3 and resumed.seed == 123
    seeds_b = record_seeds(resumed)
    for _ in range(4):
        resumed.step(lambda xb, yb: per_example(resumed_model, xb, yb))
    assert seeds_b == seeds_a and len(set(seeds_a)) == 4
    if make is mezo:  # no noise: the resumed trajectory is the original one, bit for bit
        assert all(
            torch.equal(p, q) for p, q in zip(model.parameters(), resumed_model.parameters())
        )


def contains_noise_source(obj, seen=None):
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return False
    seen.add(id(obj))
    if isinstance(obj, NoiseSource):
        return True
    if isinstance(obj, dict):
        return any(
            contains_noise_source(k, seen) or contains_noise_source(v, seen) for k, v in obj.items()
        )
    if isinstance(obj, (list, tuple, set)):
        return any(contains_noise_source(v, seen) for v in obj)
    return False


def test_state_dict_holds_no_noise_source():
    X, y = data()
    model = make_model()
    opt = dpzero(model, noise=NoiseSource())
    opt.step(lambda xb, yb: per_example(model, xb, yb))
    state = opt.state_dict()
    assert not contains_noise_source(state)
    pickle.dumps(
        state
    )  # a NoiseSource refuses to be pickled, so this would raise if one were inside
    assert set(state["dpnc"]) == {"steps", "seed", "generator"}


def test_validate_model_lists_every_problem():
    model = nn.Sequential(
        nn.Linear(4, 8), nn.Dropout(0.1), nn.BatchNorm1d(8), nn.Dropout(0.0), nn.Linear(8, 1)
    )
    model.train()
    problems = validate_model(model)
    assert len(problems) == 2
    assert any(p.startswith("1:") and "dropout" in p and "0.1" in p for p in problems)
    assert any(p.startswith("2:") and "BatchNorm" in p for p in problems)
    for make in (mezo, dpzero):
        with pytest.raises(ValueError, match=r"(?s)model is not ready.*1: dropout.*2: BatchNorm"):
            make(model)
    model.eval()
    assert validate_model(model) == []
    make_ok = dpzero(model)
    assert make_ok.steps == 0
    lone = nn.Dropout(0.5).train()
    assert validate_model(lone) == ["model: dropout (p=0.5) is active; call model.eval()"]
    # a transformer's dozen dropouts: one line, not one a module
    many = nn.Sequential(*[nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1)) for _ in range(6)])
    (line,) = validate_model(many.train())
    assert (
        line.startswith("0.1: dropout (p=0.1), also 1.1 (p=0.1)") and "and 2 more is active" in line
    )


def test_a_closure_with_nan_for_some_examples_does_not_crash():
    X, y = data()
    model = make_model()
    opt = dpzero(model)
    infos = []
    opt.register_step_hook(lambda opt, info: infos.append(info))

    def closure(xb, yb):
        losses = per_example(model, xb, yb).clone()
        losses[[3, 17]] = math.nan
        losses[40] = math.inf
        return losses

    for _ in range(3):
        opt.step(closure)
        assert infos[-1].private_stats.nonfinite == 3
    assert all(torch.all(torch.isfinite(p)) for p in model.parameters())
    assert opt.accountant.releases == 3


def test_bad_arguments():
    model = make_model()
    with pytest.raises(ValueError, match="loss_fn must be a callable"):
        dpzero(model).step(None)
    groups = [{"params": [model[0].weight]}, {"params": [model[2].weight]}]
    with pytest.raises(ValueError, match="one parameter group"):
        DPZeroOptimizer(
            groups,
            lr=1e-2,
            clip=1.0,
            noise_multiplier=1.0,
            sampler=FullBatch(N),
            accountant=Accountant(),
            model=model,
            data=data(),
        )
    with pytest.raises(ValueError, match="model must be the torch.nn.Module"):
        dpzero(model, model=None)
    with pytest.raises(ValueError, match="direction must be one of"):
        mezo(model, direction="uniform")


BAD_OPTIMIZER_ARGS = [
    (dpzero, {"lr": -1.0}, r"\blr\b"),
    (dpzero, {"clip": 0.0}, r"\bclip\b"),
    (dpzero, {"clip": math.inf}, r"\bclip\b"),  # finite clip needed when noise_multiplier > 0
    (dpzero, {"smoothing": 0.0}, r"\bsmoothing\b"),
    (dpzero, {"noise_multiplier": -1.0}, r"\bnoise_multiplier\b"),
    (mezo, {"lr": -1.0}, r"\blr\b"),
    (mezo, {"smoothing": -1e-3}, r"\bsmoothing\b"),
]


@pytest.mark.parametrize(
    "make, kwargs, name",
    BAD_OPTIMIZER_ARGS,
    ids=[f"{m.__name__}-{next(iter(k))}" for m, k, _ in BAD_OPTIMIZER_ARGS],
)
def test_bad_hyper_parameters_name_the_optimizer_argument(make, kwargs, name):
    """The message names the argument the user passed (``lr``, not the algorithm's ``eta``)."""
    with pytest.raises(ValueError, match=name):
        make(make_model(), **kwargs)


def test_minibatch_optimizer_run():
    X, y = data()
    model = make_model()
    acct = Accountant()
    opt = dpzero(
        model,
        sampler=ShuffleSampler(N, 16),
        accountant=acct,
        noise_multiplier=0.5,
        clip=2.0,
        noise=NoiseSource(),
    )
    seen = []
    for _ in range(4):
        opt.step(lambda xb, yb: seen.append(rows_of(xb)) or per_example(model, xb, yb))
    release = acct.ledger[0].release
    assert (
        acct.releases == 4
        and isinstance(release, Sampled)
        and isinstance(release.sampling, FixedSize)
    )
    # The optimizer drew the batches itself (both passes of a step see the same one), secretly.
    assert [len(b) for b in seen] == [16] * 8 and all(
        torch.equal(seen[i], seen[i + 1]) for i in range(0, 8, 2)
    )
    assert acct.secret and acct.report(1e-5).private


# --- the batch is the sampler's, secret, and the closure must answer for exactly it ---------


def test_subsampled_batches_do_not_follow_any_public_seed():
    """Finding 1: batches came from a public generator, so an adversary knew when a target was
    sampled. Two optimizers with the same public seed (and the same test noise) now draw different
    batches."""
    X, y = data()
    batches = []
    for _ in range(2):
        model, seen = make_model(), []
        opt = dpzero(
            model, sampler=PoissonSampler(N, 8), accountant=Accountant("add/remove"), seed=1
        )
        for _ in range(3):
            opt.step(
                lambda xb, yb, seen=seen, model=model: (
                    seen.append(rows_of(xb)) or per_example(model, xb, yb)
                )
            )
        batches.append(seen[::2])
    assert not all(torch.equal(a, b) for a, b in zip(*batches))
    # No public state of the optimizer holds the sampler's stream; the sampler cannot be
    # checkpointed.
    assert "sampler" not in str(opt.state_dict()["dpnc"])
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(opt.sampler)


def test_seeded_batches_mark_the_report_not_private():
    X, y = data()
    model = make_model()
    acct = Accountant("add/remove")
    opt = dpzero(
        model,
        sampler=PoissonSampler.for_testing(N, 8, seed=0),
        accountant=acct,
        noise=NoiseSource(),
    )
    opt.step(lambda xb, yb: per_example(model, xb, yb))
    assert not acct.secret and not acct.report(1e-5).private


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda xb, yb, X, y, model: per_example(model, X, y), "shape"),  # the whole dataset
        (lambda xb, yb, X, y, model: per_example(model, xb, yb).mean(), "shape"),  # a 0-d mean
        (
            lambda xb, yb, X, y, model: per_example(model, X[: len(xb) + 1], y[: len(xb) + 1]),
            "shape",
        ),  # another batch
        (lambda xb, yb, X, y, model: float(per_example(model, xb, yb).sum()), "per-example losses"),
    ],
)
def test_the_closure_contract_is_checked_every_step(bad, message):
    """Finding 7: a closure returning the whole dataset's losses while the sampler says Poisson q =
    0.01 (true ε ≈ 92 against 1.21 recorded), or a 0-d mean, was accepted silently."""
    X, y = data()
    model = make_model()
    before = snapshot(model)
    opt = dpzero(model, sampler=PoissonSampler(N, 8), accountant=Accountant("add/remove"))
    with pytest.raises(ValueError, match=message):
        opt.step(lambda xb, yb: bad(xb, yb, X, y, model))
    # The loss saw the drawn batch: the step released all the same (each example alone, every one
    # refused, so noise only) and moved the model as any step does, so the model does not tell which
    # steps failed.
    assert opt.accountant.releases == 1
    assert not all(torch.equal(p, q) for p, q in zip(snapshot(model), before))


def test_a_sampler_the_accountant_cannot_interpret_is_refused_at_construction():
    """Finding 8: ShuffleSampler with an add/remove accountant raised after perturbing the model."""
    model = make_model()
    before = snapshot(model)
    with pytest.raises(ValueError, match="ShuffleSampler releases are accounted under relation"):
        dpzero(model, sampler=ShuffleSampler(N, 8), accountant=Accountant("add/remove"))
    assert all(torch.equal(p, q) for p, q in zip(snapshot(model), before))
