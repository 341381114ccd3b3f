"""DP-SGD on the functional tier: one Poisson-sampled release per step, ε within the target, secret
batches."""

import math

import pytest
import torch

from dpnc.algorithms.base import Setting
from dpnc.algorithms.dpzero.dpsgd import DPSGD
from dpnc.privacy import Accountant, NoiseSource
from dpnc.privacy.budget import Budget
from dpnc.privacy.releases import Gaussian, Poisson, Sampled
from dpnc.problems import LogisticRegression, unit_features
from dpnc.sampling import FullBatch, PoissonSampler


@pytest.fixture(scope="module")
def problem():
    gen = torch.Generator().manual_seed(0)
    a = unit_features(torch.randn(200, 4, generator=gen, dtype=torch.float64))
    y = (a[:, 0] > 0).long()
    return LogisticRegression(a, y, classes=2, l2=0.01)


def test_from_theory_spends_at_most_the_target_and_records_every_step(problem):
    config = DPSGD.from_theory(Setting.of(problem), Budget(2.0, 1e-5), epochs=2)
    assert config.batch_size == round(math.sqrt(200)) and config.steps == math.ceil(
        2 * 200 / config.batch_size
    )
    accountant = Accountant("add/remove")
    run = config.run(
        problem,
        torch.zeros(problem.dim, dtype=torch.float64),
        noise=NoiseSource(),
        accountant=accountant,
        generator=torch.Generator(),
    )
    assert len(accountant.ledger) == 1 and accountant.ledger[0].count == config.steps
    release = accountant.ledger[0].release
    assert isinstance(release, Sampled) and isinstance(release.sampling, Poisson)
    assert release.sampling.q == pytest.approx(config.batch_size / problem.n)
    Delta = config.C / config.batch_size  # add/remove sensitivity of the mean
    assert isinstance(
        release.mechanism, Gaussian
    ) and release.mechanism.sensitivity == pytest.approx(Delta)
    assert release.mechanism.sigma == pytest.approx(config.noise_multiplier * Delta)
    report = run.report(1e-5)
    assert report.private and report.epsilon_rdp <= 2.0 * (1 + 1e-6)
    assert run.stats.steps == config.steps and run.stats.gradients > 0
    assert problem.constants.region.contains(run.output)


def test_sampler_is_secret(problem):
    config = DPSGD(eta=0.1, C=1.0, noise_multiplier=1.0, steps=3, batch_size=20)
    sampler = config.sampler(problem.n)
    assert isinstance(sampler, PoissonSampler) and sampler.secret
    assert sampler is not config.sampler(problem.n)  # a fresh secret stream per run
    full = DPSGD(eta=0.1, C=1.0, noise_multiplier=1.0, steps=3, batch_size=problem.n)
    assert isinstance(full.sampler(problem.n), FullBatch)


def test_seeded_batches_mark_the_run_not_private(problem):
    config = DPSGD(eta=0.1, C=1.0, noise_multiplier=1.0, steps=3, batch_size=20)
    run = config.run(
        problem,
        torch.zeros(problem.dim, dtype=torch.float64),
        noise=NoiseSource(),
        accountant=Accountant("add/remove"),
        sampler=PoissonSampler.for_testing(problem.n, 20, seed=1),
        generator=torch.Generator(),
    )
    assert not run.report(1e-5).private


def test_no_noise_huge_clip_is_plain_gradient_descent(problem):
    """σ = 0, C = ∞, B = n: x_{t+1} = Π(x_t − η∇F(x_t)) exactly; the ledger says not private."""
    config = DPSGD(eta=0.5, C=math.inf, noise_multiplier=0.0, steps=4, batch_size=problem.n)
    run = config.run(
        problem,
        torch.zeros(problem.dim, dtype=torch.float64),
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
        generator=torch.Generator(),
    )
    x = torch.zeros(problem.dim, dtype=torch.float64)
    for _ in range(4):
        x = problem.constants.region.project(x - 0.5 * problem.gradient(x))
    assert torch.allclose(run.output, x, atol=1e-12)
    assert not run.report(1e-5).private and not run.private


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(eta=0.0), "eta"),
        (dict(C=-1.0), "C"),
        (dict(noise_multiplier=-1.0), "noise_multiplier"),
        (dict(steps=0), "steps"),
        (dict(batch_size=0), "batch_size"),
        (dict(C=math.inf), "C"),
    ],
)
def test_bad_hyper_parameters_are_refused(kwargs, message):
    good = dict(eta=0.1, C=1.0, noise_multiplier=1.0, steps=3, batch_size=5)
    with pytest.raises(ValueError, match=message):
        DPSGD(**{**good, **kwargs})
