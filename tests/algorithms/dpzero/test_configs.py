"""docs/papers.md, DPZero §5.1, 5.2, 5.4, 5.10, 5.12 for DPZero, DPGD-0th, DP-GD and MeZO (flat
tier)."""

import dataclasses
import math

import numpy as np
import pytest
import torch
from scipy import stats

from dpnc.algorithms.base import Run
from dpnc.algorithms.dpzero import (
    DPGD,
    DPGD0th,
    DPZero,
    MeZO,
    ZerothOrderStats,
    calibrate_noise,
    public_seeds,
)
from dpnc.privacy import Accountant, NoiseSource
from dpnc.privacy.clipping import clip_scalars
from dpnc.privacy.releases import FixedSize, Gaussian, NonPrivate, Poisson, Sampled
from dpnc.problems import Quadratic
from dpnc.problems.base import Objective
from dpnc.sampling import FullBatch, PoissonSampler, ShuffleSampler
from dpnc.space import DIRECTIONS, FlatSpace, ModuleSpace

EPS64 = torch.finfo(torch.float64).eps
EPS32 = torch.finfo(torch.float32).eps
SEED = 11  # a direction seed held fixed


@pytest.fixture(scope="module")
def problem():
    return Quadratic.synthetic(10, "sqrt", n=50, seed=0)


def start(d, seed=0, K=None):
    shape = (d,) if K is None else (K, d)
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def exact_a(problem, x, u, batch=None):
    """a_i = uᵀ∇ℓ_i(x) = uᵀA(x − ξ_i): the two-point difference on a quadratic, without rounding."""
    xi = problem.train if batch is None else problem.train[batch]
    return (problem.a * (x - xi)) @ u


def run(algorithm, problem, x0, T, *, seed, direction="gaussian", callback=None, **kwargs) -> Run:
    """``algorithm.run`` for T steps from the public seed ``seed``; the step logs are kept as
    ``.logs``."""
    logs = []

    def record(t, log):
        logs.append(log)
        if callback is not None:
            callback(t, log)

    result = dataclasses.replace(algorithm, steps=T, direction=direction).run(
        problem, x0, generator=torch.Generator().manual_seed(seed), callback=record, **kwargs
    )
    assert isinstance(result.stats, ZerothOrderStats) and result.stats.steps == T
    result.logs = logs
    return result


def step(
    algorithm,
    problem,
    x0,
    seed=SEED,
    *,
    noise=None,
    accountant=None,
    sampler=None,
    closure=None,
    direction="gaussian",
):
    space = FlatSpace(x0, direction)
    sampler = sampler or FullBatch(problem.n)
    log = algorithm.step(
        space,
        closure(space) if closure else (lambda b: problem.losses_at(space.x, b)),
        seed,
        sampler=sampler,
        noise=noise or NoiseSource.for_testing(0),
        accountant=accountant if accountant is not None else Accountant(),
    )
    return space, log


# --- DPZero §5.1 scalar release -------------------------------------------------------------------


@pytest.mark.parametrize("relation, factor", [("replace-one", 2.0), ("add/remove", 1.0)])
def test_released_scalar_is_the_clipped_mean_plus_gaussian_noise(problem, relation, factor):
    x0 = start(problem.d)
    u = FlatSpace(x0).direction(SEED)
    a = exact_a(problem, x0, u)
    C = float(a.abs().median())  # half of the examples are clipped
    mean = float(clip_scalars(a, C)[0].mean())
    mult, M = 2.0, 2000
    algorithm = DPZero(eta=0.1, lam=1e-2, C=C, noise_multiplier=mult)
    noise, acct = NoiseSource.for_testing(1), Accountant(relation)
    z = np.array(
        [
            float(step(algorithm, problem, x0, noise=noise, accountant=acct)[1].released) - mean
            for _ in range(M)
        ]
    )
    sigma = (
        mult * factor * C / problem.n
    )  # σ = multiplier·Δ, Δ = 2C/n (replace-one), C/n (add/remove)
    assert stats.kstest(z, stats.norm(scale=sigma).cdf).pvalue > 1e-3
    assert abs(z.mean()) <= 6 * sigma / math.sqrt(M)
    assert abs(z.std() - sigma) <= 6 * sigma / math.sqrt(2 * M)
    assert acct.releases == M


def test_per_run_clipping_thresholds_get_per_run_noise(problem):
    K, M, mult = 3, 1000, 1.5
    x0 = start(problem.d).expand(K, -1).clone()
    u = FlatSpace(x0).direction(SEED)
    a = exact_a(problem, x0[0], u)
    C = float(a.abs().median()) * torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    means = torch.stack([clip_scalars(a, float(c))[0].mean() for c in C])
    algorithm = DPZero(
        eta=torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64), lam=1e-2, C=C, noise_multiplier=mult
    )
    noise, acct = NoiseSource.for_testing(2), Accountant()
    z = torch.stack(
        [
            step(algorithm, problem, x0, noise=noise, accountant=acct)[1].released - means
            for _ in range(M)
        ]
    ).numpy()
    assert z.shape == (M, K)
    assert (
        acct.releases == M
    )  # one release per step for the whole grid: the runs share their privacy
    for k in range(K):
        sigma = mult * 2 * float(C[k]) / problem.n
        assert stats.kstest(z[:, k], stats.norm(scale=sigma).cdf).pvalue > 1e-3
        assert abs(z[:, k].std() - sigma) <= 6 * sigma / math.sqrt(2 * M)


# --- DPZero §5.2 update direction -----------------------------------------------------------------


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_dpzero_update_is_minus_eta_c_u(problem, direction):
    x0, eta = start(problem.d, seed=4), 0.3
    algorithm = DPZero(eta=eta, lam=1e-3, C=1.0, noise_multiplier=3.0)
    space, log = step(algorithm, problem, x0, direction=direction)
    u = space.direction(SEED)
    delta, expected = space.x - x0, -eta * log.released * u
    assert torch.all((delta - expected).abs() <= 2 * EPS64 * (x0.abs() + expected.abs()))
    cos = float(delta @ u / (torch.linalg.vector_norm(delta) * torch.linalg.vector_norm(u)))
    assert abs(abs(cos) - 1) <= 1e-12


def test_dpzero_update_on_a_model_is_collinear_with_u():
    torch.manual_seed(0)  # test-only model initialisation
    model = torch.nn.Linear(6, 1)
    X = torch.randn(32, 6, generator=torch.Generator().manual_seed(1))
    y = torch.randn(32, generator=torch.Generator().manual_seed(2))
    space = ModuleSpace(model.parameters())
    before = [p.detach().clone() for p in model.parameters()]
    eta, lam = 0.05, 1e-3
    with torch.no_grad():
        log = DPZero(eta=eta, lam=lam, C=1.0, noise_multiplier=1.0).step(
            space,
            lambda b: (model(X[b]).squeeze(-1) - y[b]) ** 2,
            SEED,
            sampler=FullBatch(32),
            noise=NoiseSource.for_testing(3),
            accountant=Accountant(),
        )
    c = float(log.released)
    for p, p0, u in zip(model.parameters(), before, space.directions(SEED)):
        # Four rounded float32 passes (±λ, the restore-and-update): ≤ ε(|p| + (2λ + |αc|)|u|) each.
        tol = 4 * EPS32 * (p0.abs() + (2 * lam + abs(eta * c)) * u.abs())
        assert torch.all((p.detach() - p0 - (-eta * c) * u).abs() <= tol)


def test_dpgd0th_noise_is_isotropic_around_the_clipped_mean_step():
    d, n, M, eta, mult = 200, 20, 100, 0.5, 1.0
    p = Quadratic.synthetic(d, "identity", n=n, seed=1)
    x0 = start(d, seed=2)
    u = FlatSpace(x0).direction(SEED)
    g = exact_a(p, x0, u)[:, None] * u  # g_i = a_i·u
    norms = torch.linalg.vector_norm(g, dim=-1)
    C = float(norms.median())
    g_bar = (g * torch.clamp(C / norms, max=1.0)[:, None]).mean(0)  # (1/n) Σ clip_C(g_i)
    sigma = mult * 2 * C / n
    noise = NoiseSource.for_testing(4)
    algorithm = DPGD0th(eta=eta, lam=1e-2, C=C, noise_multiplier=mult)
    R = torch.stack(
        [
            step(algorithm, p, x0, noise=noise, sampler=FullBatch(n))[0].x - x0 + eta * g_bar
            for _ in range(M)
        ]
    ) / (eta * sigma)
    # Every coordinate is N(0, 1) after scaling by ασ; so is the component along u (no extra noise
    # there).
    assert stats.kstest(R.flatten().numpy(), "norm").pvalue > 1e-3
    along = (R @ u / torch.linalg.vector_norm(u)).numpy()
    assert stats.kstest(along, "norm").pvalue > 1e-3
    # Coordinates are uncorrelated: the empirical covariance of the M draws is ≈ I (off-diagonal SE
    # 1/√M).
    cov = (R.T @ R / M).numpy()
    off = cov[~np.eye(d, dtype=bool)]
    assert abs(off.mean()) <= 6 / math.sqrt(M * d * (d - 1) / 2)


# --- DPZero §5.4 sensitivity ----------------------------------------------------------------------


ADVERSARIES = [
    (math.nan, 0.0),
    (math.inf, 0.0),
    (0.0, -math.inf),
    (math.inf, math.inf),
    (math.nan, math.nan),
    (1e308, -1e308),
    (1e300, -1e300),
    (-1e300, 1e300),
    (0.0, 0.0),
    (5.0, 5.0),
    (-7.0, 3.0),
]


def adversarial(problem, j, plus, minus):
    """A closure factory: example j's losses (a dataset index) replaced by (plus, minus) at x ± λu.

    The closure gets the batch the sampler drew; if example j is not in it, nothing changes.
    """

    def factory(space):
        calls = []

        def closure(batch):
            losses = problem.losses_at(space.x, batch).clone()
            value = plus if not calls else minus
            calls.append(1)
            losses[batch == j] = value
            return losses

        return closure

    return factory


def test_one_example_moves_the_pre_noise_mean_by_at_most_2C_over_n(problem):
    x0 = start(problem.d, seed=5)
    a = exact_a(problem, x0, FlatSpace(x0).direction(SEED))
    C = float(a.abs().median()) / 2
    j = int(a.argmin())  # a_j = −C after clipping: the worst case is +C
    algorithm = DPZero(eta=0.1, lam=1e-2, C=C, noise_multiplier=0.0)  # c is the pre-noise mean
    base = float(step(algorithm, problem, x0)[1].released)
    changes = []
    for plus, minus in ADVERSARIES:
        _, log = step(algorithm, problem, x0, closure=adversarial(problem, j, plus, minus))
        assert math.isfinite(float(log.released))
        changes.append(abs(float(log.released) - base))
    bound = 2 * C / problem.n
    assert max(changes) <= bound * (1 + 1e-12)
    assert max(changes) >= bound * (
        1 - 1e-9
    )  # the bound is attained (the test can see a larger one)


def test_minibatch_sensitivity_uses_the_batch_size(problem):
    x0 = start(problem.d, seed=6)
    B = 10
    a_all = exact_a(problem, x0, FlatSpace(x0).direction(SEED))
    C = float(a_all.abs().median()) / 2
    algorithm = DPZero(eta=0.1, lam=1e-2, C=C, noise_multiplier=0.0)
    # Replace-one on a fixed-size batch: ≤ 2C/B. Seeded samplers give both runs the same batch.
    shuffle = lambda: ShuffleSampler.for_testing(problem.n, B, seed=0)
    batch = shuffle().sample()
    base = float(step(algorithm, problem, x0, sampler=shuffle())[1].released)
    worst = 0.0
    for plus, minus in ADVERSARIES:
        for j in batch.tolist():
            log = step(
                algorithm,
                problem,
                x0,
                sampler=shuffle(),
                closure=adversarial(problem, j, plus, minus),
            )[1]
            worst = max(worst, abs(float(log.released) - base))
    assert 2 * C / B * (1 - 1e-9) <= worst <= 2 * C / B * (1 + 1e-12)
    # Add/remove on a Poisson batch: ≤ C/B. With the fixed denominator B, an absent example is
    # exactly an example whose difference a_j is 0, so the neighbour without example j is "a_j = 0".
    poisson = lambda: PoissonSampler.for_testing(problem.n, B, seed=2)
    batch = poisson().sample()
    j = int(batch[0])
    absent = float(
        step(algorithm, problem, x0, sampler=poisson(), closure=adversarial(problem, j, 0.0, 0.0))[
            1
        ].released
    )
    worst = 0.0
    for plus, minus in ADVERSARIES:
        log = step(
            algorithm, problem, x0, sampler=poisson(), closure=adversarial(problem, j, plus, minus)
        )[1]
        worst = max(worst, abs(float(log.released) - absent))
    assert len(batch) != B  # the realised size differs from B, and the bound still holds
    assert C / B * (1 - 1e-9) <= worst <= C / B * (1 + 1e-12)


def test_dpgd_poisson_sensitivity_uses_the_fixed_batch_size():
    """DP-GD with Poisson batches used to divide by the realised batch size, so adding
    one example moved the pre-noise mean by 0.25 against a recorded C/B = 0.1. Real add/remove here:
    the neighbour's clipped sum runs over the same draw without the canary (index n)."""
    n, B, C = 40, 10, 1.0
    p = Quadratic.synthetic(5, "identity", n=n + 1, seed=3)  # example n is the canary
    x0 = start(5, seed=1) * 10  # every gradient is clipped to C
    released = {}
    for name, drop in (("with", False), ("without", True)):
        sampler = PoissonSampler.for_testing(n + 1, B, seed=1)
        clipped_sum = (
            (lambda x, C, b: p.clipped_gradient_sum(x, C, b[b != n]))
            if drop
            else p.clipped_gradient_sum
        )
        space = FlatSpace(x0)
        DPGD(eta=1.0, C=C, noise_multiplier=0.0).step(
            space,
            clipped_sum,
            sampler=sampler,
            noise=NoiseSource.for_testing(0),
            accountant=Accountant("add/remove"),
        )
        released[name] = x0 - space.x
    batch = PoissonSampler.for_testing(n + 1, B, seed=1).sample()
    assert n in batch.tolist() and len(batch) != B
    change = float(torch.linalg.vector_norm(released["with"] - released["without"]))
    assert change == pytest.approx(C / B, rel=1e-9)  # the canary's clipped gradient over B


def test_mezo_skips_an_empty_batch(problem):
    sampler_seed = next(
        s for s in range(100) if len(PoissonSampler.for_testing(problem.n, 1, seed=s).sample()) == 0
    )
    x0 = start(problem.d)
    space, log = step(
        MeZO(eta=0.1, lam=1e-2),
        problem,
        x0,
        sampler=PoissonSampler.for_testing(problem.n, 1, seed=sampler_seed),
    )
    assert float(log.released) == 0.0 and torch.equal(space.x, x0)


def test_mezo_counts_an_example_non_finite_at_one_point_as_zero_at_both(problem):
    """Example 0's loss is NaN at x + λu only (and example 1's +inf at x − λu only): each counts as
    a_i = 0, so c_t is the sum of the other examples' a_i over the whole batch, finite, and both are
    counted as non-finite."""
    x0 = start(problem.d)
    calls = []

    def closure(space):
        def losses(batch):
            values = problem.losses_at(space.x, batch).clone()
            calls.append(len(calls))
            values[0 if len(calls) == 1 else 1] = math.nan if len(calls) == 1 else math.inf
            return values

        return losses

    _, clean = step(MeZO(eta=0.1, lam=1e-3), problem, x0)
    space, log = step(MeZO(eta=0.1, lam=1e-3), problem, x0, closure=closure)
    a = exact_a(problem, x0, FlatSpace(x0).direction(SEED))
    expected = float(a[2:].sum()) / problem.n
    assert math.isfinite(float(log.released)) and int(log.nonfinite) == 2
    assert float(log.released) == pytest.approx(expected, rel=1e-4)
    assert float(log.released) != pytest.approx(float(clean.released), rel=1e-6)


def test_an_empty_poisson_batch_releases_noise_only(problem):
    sampler_seed = next(
        s for s in range(100) if len(PoissonSampler.for_testing(problem.n, 1, seed=s).sample()) == 0
    )
    called = []
    closure = lambda space: lambda b: called.append(b) or problem.losses_at(space.x, b)
    x0 = start(problem.d)
    acct = Accountant("add/remove")
    space, log = step(
        DPZero(eta=0.1, lam=1e-2, C=1.0, noise_multiplier=1.0),
        problem,
        x0,
        closure=closure,
        sampler=PoissonSampler.for_testing(problem.n, 1, seed=sampler_seed),
        noise=NoiseSource.for_testing(4),
        accountant=acct,
    )
    assert called == [] and acct.releases == 1
    z = NoiseSource.for_testing(4).gaussian_scalar(1.0 * 1.0 / 1)  # σ = multiplier·C/B
    assert float(log.released) == pytest.approx(z, rel=1e-12) and z != 0


def test_dpgd0th_sensitivity_is_2C_over_n_in_l2(problem):
    x0, eta = start(problem.d, seed=7), 0.5
    u = FlatSpace(x0).direction(SEED)
    C = float(exact_a(problem, x0, u).abs().median()) * float(torch.linalg.vector_norm(u)) / 2
    algorithm = DPGD0th(eta=eta, lam=1e-2, C=C, noise_multiplier=0.0)
    base = (x0 - step(algorithm, problem, x0)[0].x) / eta
    for plus, minus in ADVERSARIES:
        space, log = step(algorithm, problem, x0, closure=adversarial(problem, 3, plus, minus))
        g = (x0 - space.x) / eta
        assert torch.all(torch.isfinite(g))
        assert float(torch.linalg.vector_norm(g - base)) <= 2 * C / problem.n * (1 + 1e-9)


# --- DPZero §5.10 noise independence --------------------------------------------------------------


def test_noise_varies_under_a_fixed_public_seed(problem):
    x0 = start(problem.d)
    algorithm = DPZero(eta=0.1, lam=1e-2, C=1.0, noise_multiplier=1.0)
    released = {
        float(step(algorithm, problem, x0, noise=NoiseSource())[1].released) for _ in range(5)
    }
    assert len(released) == 5
    # Whole runs with the same public seed: same directions and batches, different noise.
    runs = [
        run(
            algorithm,
            problem,
            x0,
            5,
            seed=3,
            sampler=FullBatch(problem.n),
            noise=NoiseSource(),
            accountant=Accountant(),
        )
        for _ in range(2)
    ]
    assert runs[0].stats.seeds == runs[1].stats.seeds
    assert not torch.equal(runs[0].output, runs[1].output)
    assert runs[0].accountant.secret and runs[0].report(1e-5).private


def test_noise_is_not_a_function_of_the_public_seed(problem):
    """With the same test NoiseSource, z_t is the same whatever the direction seed: it depends on
    the noise stream only (the published code's z_t is torch.manual_seed(s_t); torch.randn(1), a
    function of s_t)."""
    x0, C, mult = start(problem.d), 0.5, 1.0
    algorithm = DPZero(eta=0.1, lam=1e-2, C=C, noise_multiplier=mult)
    sigma = mult * 2 * C / problem.n
    seeds = [1, 2, 3, 2**40 + 7]
    z = []
    for s in seeds:
        mean = clip_scalars(exact_a(problem, x0, FlatSpace(x0).direction(s)), C)[0].mean()
        released = step(algorithm, problem, x0, s, noise=NoiseSource.for_testing(9))[1].released
        z.append(float(released - mean))
    assert np.allclose(z, z[0], rtol=0, atol=1e-12 * sigma + 1e-15) and z[0] != 0
    repo = [
        float(torch.randn(1, generator=torch.Generator().manual_seed(s))) * sigma for s in seeds
    ]
    assert len(set(np.round(repo, 12))) == len(seeds)  # the published recipe would vary with s_t
    assert not np.allclose(z, repo, rtol=0, atol=1e-9)


def test_seeded_test_noise_is_marked_not_private_and_global_rng_untouched(problem):
    x0 = start(problem.d)
    algorithm = DPZero(eta=0.1, lam=1e-2, C=1.0, noise_multiplier=1.0)
    outs = []
    for global_seed in (0, 1):
        torch.manual_seed(global_seed)
        state = torch.get_rng_state()
        result = run(
            algorithm,
            problem,
            x0,
            5,
            seed=4,
            sampler=FullBatch(problem.n),
            noise=NoiseSource.for_testing(5),
            accountant=Accountant(),
        )
        assert torch.equal(
            torch.get_rng_state(), state
        )  # the library never draws from torch's global RNG
        outs.append(result)
    assert torch.equal(
        outs[0].output, outs[1].output
    )  # so the global seed does not change the noise
    acct = outs[0].accountant
    assert not acct.secret and all(not e.release.secret for e in acct.ledger)
    report = outs[0].report(1e-5)
    assert not report.private and any("NOT PRIVATE" in n for n in report.notes)


# --- DPZero §5.12 degenerate cases ----------------------------------------------------------------


def zo_sgd_reference(losses, x0, T, seed, eta, lam, sampler, direction):
    """Plain ZO-SGD: evaluate at x ± λu, step x − η·c·u, with u = FlatSpace.direction(seed)."""
    gen = torch.Generator().manual_seed(seed)
    seeds = public_seeds(gen, T)
    directions = FlatSpace(x0, direction)
    x, cs = x0.clone(), []
    for s in seeds:
        batch = sampler.sample()
        u = directions.direction(s)
        c = (losses(x + lam * u, batch).mean(-1) - losses(x - lam * u, batch).mean(-1)) / (2 * lam)
        x = x - (eta * c) * u
        cs.append(c)
    return x, cs, seeds


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("minibatch", [False, True])
def test_mezo_is_bit_identical_to_plain_zo_sgd(problem, direction, minibatch):
    T, eta, lam = 25, 0.05, 1e-3
    sampler = (
        (lambda: ShuffleSampler.for_testing(problem.n, 8, seed=3))
        if minibatch
        else (lambda: FullBatch(problem.n))
    )
    x0 = start(problem.d, seed=8)
    result = run(
        MeZO(eta=eta, lam=lam),
        problem,
        x0,
        T,
        direction=direction,
        seed=21,
        sampler=sampler(),
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
    )
    x_ref, cs, seeds = zo_sgd_reference(
        problem.losses_at, x0, T, 21, eta, lam, sampler(), direction
    )
    assert result.stats.seeds == seeds
    assert all(torch.equal(log.released, c) for log, c in zip(result.logs, cs))
    assert torch.equal(result.output, x_ref)
    assert float(problem.value(result.output)) < float(problem.value(x0))


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_dpzero_without_noise_or_clipping_is_mezo(problem, direction):
    T, eta, lam = 25, 0.05, 1e-3
    x0 = start(problem.d, seed=9)
    kwargs = dict(seed=22, noise=NoiseSource.for_testing(0))
    mezo = run(
        MeZO(eta=eta, lam=lam),
        problem,
        x0,
        T,
        direction=direction,
        accountant=Accountant(),
        sampler=ShuffleSampler.for_testing(problem.n, 8, seed=1),
        **kwargs,
    )
    dpzero = run(
        DPZero(eta=eta, lam=lam, C=math.inf, noise_multiplier=0.0),
        problem,
        x0,
        T,
        direction=direction,
        accountant=Accountant(),
        sampler=ShuffleSampler.for_testing(problem.n, 8, seed=1),
        **kwargs,
    )
    for a, b in zip(mezo.logs, dpzero.logs):
        assert float(a.released) == pytest.approx(float(b.released), rel=1e-9, abs=1e-12)
    assert torch.allclose(mezo.output, dpzero.output, rtol=1e-10, atol=1e-12)
    assert all(float(log.clipped_fraction) == 0.0 for log in dpzero.logs)


def test_dpgd_without_noise_or_clipping_is_gradient_descent(problem):
    x0, eta = start(problem.d, seed=10), 0.2
    space = FlatSpace(x0)
    DPGD(eta=eta, C=math.inf, noise_multiplier=0.0).step(
        space,
        problem.clipped_gradient_sum,
        sampler=FullBatch(problem.n),
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
    )
    assert torch.allclose(space.x, x0 - eta * problem.gradient(x0), rtol=1e-12, atol=1e-14)


def test_a_grid_of_runs_equals_the_runs_alone(problem):
    K, T = 3, 15
    x0 = start(problem.d, seed=12)
    eta = torch.tensor([0.02, 0.05, 0.1], dtype=torch.float64)
    C = torch.tensor([0.5, 1.0, math.inf], dtype=torch.float64)
    kwargs = dict(seed=5, sampler=FullBatch(problem.n), noise=NoiseSource.for_testing(0))
    grid = run(
        DPZero(eta=eta, lam=1e-3, C=C, noise_multiplier=0.0),
        problem,
        x0.expand(K, -1).clone(),
        T,
        accountant=Accountant(),
        **kwargs,
    )
    for k in range(K):
        alone = run(
            DPZero(eta=float(eta[k]), lam=1e-3, C=float(C[k]), noise_multiplier=0.0),
            problem,
            x0,
            T,
            accountant=Accountant(),
            **kwargs,
        )
        assert torch.allclose(grid.output[k], alone.output, rtol=1e-10, atol=1e-12)
    assert (
        0 < float(grid.logs[0].clipped_fraction[0]) and float(grid.logs[0].clipped_fraction[2]) == 0
    )


def test_a_private_grids_report_says_its_epsilon_is_each_runs(problem):
    # The ledger of a grid holds one run's releases (the K runs share σ): its ε covers one run's
    # output, and the report says so, since the returned output holds all K.
    K, x0 = 3, start(problem.d, seed=12)
    kwargs = dict(
        seed=5,
        sampler=FullBatch(problem.n),
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
    )
    grid = run(
        DPZero(
            eta=torch.full((K,), 0.05, dtype=torch.float64), lam=1e-3, C=1.0, noise_multiplier=2.0
        ),
        problem,
        x0.expand(K, -1).clone(),
        4,
        **kwargs,
    )
    assert grid.accountant.releases == 4 and any(
        "a grid of 3 runs" in note for note in grid.report(1e-5).notes
    )
    kwargs["accountant"] = Accountant()
    alone = run(DPZero(eta=0.05, lam=1e-3, C=1.0, noise_multiplier=2.0), problem, x0, 4, **kwargs)
    assert not any("grid" in note for note in alone.report(1e-5).notes)


# --- accounting, non-finite values, bad hyper-parameters ------------------------------------------


def algorithms(problem):
    return {
        "DPZero": DPZero(eta=0.05, lam=1e-3, C=1.0, noise_multiplier=2.0),
        "DPZero-noiseless": DPZero(eta=0.05, lam=1e-3, C=1.0, noise_multiplier=0.0),
        "DPZero-discrete": DPZero(eta=0.05, lam=1e-3, C=1.0, noise_multiplier=2.0, discrete=True),
        "MeZO": MeZO(eta=0.05, lam=1e-3),
        "DPGD0th": DPGD0th(eta=0.05, lam=1e-3, C=1.0, noise_multiplier=2.0),
        "DPGD": DPGD(eta=0.05, C=1.0, noise_multiplier=2.0),
    }


@pytest.mark.parametrize(
    "name", ["DPZero", "DPZero-noiseless", "DPZero-discrete", "MeZO", "DPGD0th", "DPGD"]
)
def test_one_release_per_step(problem, name):
    T = 6
    algorithm = algorithms(problem)[name]
    acct = Accountant()
    steps = []
    result = run(
        algorithm,
        problem,
        start(problem.d),
        T,
        seed=1,
        sampler=FullBatch(problem.n),
        noise=NoiseSource.for_testing(0),
        accountant=acct,
        callback=lambda t, log: steps.append((t, acct.releases)),
    )
    assert steps == [(t, t + 1) for t in range(T)]
    assert acct.releases == T and len(result.logs) == T and len(acct.ledger) == 1
    release = acct.ledger[0].release
    if name in ("DPZero", "DPGD0th", "DPGD"):
        # Δ = 2/n per unit of C (the noise is scaled by C), σ/Δ = the multiplier.
        # In real units: Δ = 2C/n with C = 1, σ/Δ = the multiplier.
        assert isinstance(release, Gaussian) and release.sensitivity == pytest.approx(2 / problem.n)
        assert release.sigma / release.sensitivity == pytest.approx(2.0)
    if name in ("MeZO", "DPZero-noiseless"):
        assert isinstance(release, NonPrivate)  # a data-dependent value released without noise
        assert not result.private and not result.report(1e-5).private


def test_sampled_releases_carry_the_sampler(problem):
    algorithm = DPZero(eta=0.05, lam=1e-3, C=1.0, noise_multiplier=2.0)
    for sampler, relation, kind in (
        (PoissonSampler(problem.n, 10), "add/remove", Poisson),
        (ShuffleSampler(problem.n, 10), "replace-one", FixedSize),
    ):
        acct = Accountant(relation)
        run(
            algorithm,
            problem,
            start(problem.d),
            4,
            seed=0,
            sampler=sampler,
            noise=NoiseSource.for_testing(0),
            accountant=acct,
        )
        release = acct.ledger[0].release
        assert (
            acct.releases == 4
            and isinstance(release, Sampled)
            and isinstance(release.sampling, kind)
        )
        assert release.mechanism.sigma / release.mechanism.sensitivity == pytest.approx(2.0)
        assert release.mechanism.sensitivity == pytest.approx(
            (1 if relation == "add/remove" else 2) * 1.0 / 10
        )


def test_mezo_report_is_not_private(problem):
    result = run(
        MeZO(eta=0.05, lam=1e-3),
        problem,
        start(problem.d),
        5,
        seed=0,
        sampler=FullBatch(problem.n),
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
    )
    report = result.report(1e-5)
    assert report.releases == 5
    assert (
        report.epsilon == math.inf
        and report.epsilon_rdp == math.inf
        and report.epsilon_pld == math.inf
    )


def nonfinite_closure(problem):
    def factory(space):
        calls = []

        def closure(batch):
            losses = problem.losses_at(space.x, batch).clone()
            if not calls:
                losses[..., 3] = math.nan
            else:
                losses[..., 5] = math.inf
            calls.append(1)
            return losses

        return closure

    return factory


@pytest.mark.parametrize("name", ["DPZero", "DPZero-noiseless", "MeZO", "DPGD0th"])
@pytest.mark.parametrize("K", [None, 2])
def test_nonfinite_losses_are_counted_and_do_not_crash(problem, name, K):
    algorithm = algorithms(problem)[name]
    x0 = start(problem.d, K=K)
    space, log = step(algorithm, problem, x0, closure=nonfinite_closure(problem))
    expected = torch.full(() if K is None else (K,), 2)
    assert torch.equal(log.nonfinite, expected)
    if name != "MeZO":  # MeZO has no clipping: its batch mean is non-finite by definition
        assert torch.all(torch.isfinite(space.x)) and torch.all(torch.isfinite(log.released))


BAD = [
    (DPZero, dict(eta=-1, lam=1e-3, C=1.0, noise_multiplier=1.0), r"^eta must be .*>= 0; got -1$"),
    (DPZero, dict(eta=math.nan, lam=1e-3, C=1.0, noise_multiplier=1.0), r"^eta must be"),
    (DPZero, dict(eta=math.inf, lam=1e-3, C=1.0, noise_multiplier=1.0), r"^eta must be finite"),
    (
        DPZero,
        dict(eta=torch.tensor([0.1, -0.1]), lam=1e-3, C=1.0, noise_multiplier=1.0),
        r"^eta must be",
    ),
    (DPZero, dict(eta=0.1, lam=0.0, C=1.0, noise_multiplier=1.0), r"^lam must be .*> 0; got 0.0$"),
    (DPZero, dict(eta=0.1, lam=-1e-3, C=1.0, noise_multiplier=1.0), r"^lam must be"),
    (DPZero, dict(eta=0.1, lam=1e-3, C=0.0, noise_multiplier=1.0), r"^C must be"),
    (DPZero, dict(eta=0.1, lam=1e-3, C=-2.0, noise_multiplier=1.0), r"^C must be .*; got -2.0$"),
    (DPZero, dict(eta=0.1, lam=1e-3, C=math.nan, noise_multiplier=1.0), r"^C must be"),
    (
        DPZero,
        dict(eta=0.1, lam=1e-3, C=math.inf, noise_multiplier=1.0),
        r"^C must be finite when noise",
    ),
    (
        DPZero,
        dict(eta=0.1, lam=1e-3, C=torch.tensor([1.0, 0.0]), noise_multiplier=1.0),
        r"^C must be",
    ),
    (
        DPZero,
        dict(eta=0.1, lam=1e-3, C=1.0, noise_multiplier=-1.0),
        r"^noise_multiplier must be .*>= 0",
    ),
    (
        DPZero,
        dict(eta=0.1, lam=1e-3, C=1.0, noise_multiplier=math.inf),
        r"^noise_multiplier must be finite",
    ),
    (MeZO, dict(eta=-1, lam=1e-3), r"^eta must be"),
    (MeZO, dict(eta=0.1, lam=0), r"^lam must be"),
    (DPGD0th, dict(eta=-1, lam=1e-3, C=1.0, noise_multiplier=1.0), r"^eta must be"),
    (DPGD0th, dict(eta=0.1, lam=1e-3, C=-1.0, noise_multiplier=1.0), r"^C must be"),
    (DPGD, dict(eta=0.1, C=1.0, noise_multiplier=-0.5), r"^noise_multiplier must be"),
    (DPGD, dict(eta=-0.5, C=1.0, noise_multiplier=1.0), r"^eta must be"),
    (
        DPZero,
        dict(eta=0.1, lam=1e-3, C=1.0, noise_multiplier=1.0, steps=0),
        r"^steps must be an integer >= 1",
    ),
    (MeZO, dict(eta=0.1, lam=1e-3, steps=2.0), r"^steps must be an integer >= 1"),
    (
        DPGD0th,
        dict(eta=0.1, lam=1e-3, C=1.0, noise_multiplier=1.0, direction="uniform"),
        r"^direction must be one of",
    ),
    (DPGD, dict(eta=0.1, C=1.0, noise_multiplier=1.0, paper=1), r"^paper must be a bool"),
    (
        DPZero,
        dict(eta=0.1, lam=1e-3, C=1.0, noise_multiplier=1.0, discrete="yes"),
        r"^discrete must be a bool",
    ),
]


@pytest.mark.parametrize(
    "cls, kwargs, message", BAD, ids=[f"{c.__name__}-{m[1:12]}" for c, _, m in BAD]
)
def test_bad_hyper_parameters_name_the_argument(cls, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cls(**kwargs)


def test_bad_run_arguments(problem):
    algorithm = DPZero(eta=0.1, lam=1e-3, C=1.0, noise_multiplier=1.0)
    for T in (0, -1, 2.5):  # refused when the config is built, before any data is touched
        with pytest.raises(ValueError, match=r"^steps must be an integer >= 1"):
            run(
                algorithm,
                problem,
                start(problem.d),
                T,
                seed=0,
                sampler=FullBatch(problem.n),
                noise=NoiseSource.for_testing(0),
                accountant=Accountant(),
            )
    with pytest.raises(ValueError, match=r"^accounting must be one of"):
        calibrate_noise("moments", 1.0, 1e-5, 10, 100)
    with pytest.raises(ValueError, match="discrete=True supports one full-batch (scalar )?run"):
        step(
            DPZero(eta=0.1, lam=1e-3, C=1.0, noise_multiplier=1.0, discrete=True),
            problem,
            start(problem.d),
            sampler=PoissonSampler(problem.n, 10),
            accountant=Accountant("add/remove"),
        )


def test_discrete_noise_is_on_the_grid_with_the_calibrated_spread(problem):
    """discrete=True: c_t − round(mean) is an exact discrete Gaussian on the grid Δ/1000, std ≈
    σ."""
    x0 = start(problem.d)
    C, mult, M = 1.0, 2.0, 1500
    delta_s = 2 * C / problem.n  # replace-one sensitivity of the mean
    grid = delta_s / 1000
    source = NoiseSource.for_testing(5)
    released = []
    for _ in range(M):
        acct = Accountant()
        _, log = step(
            DPZero(eta=0.1, lam=1e-3, C=C, noise_multiplier=mult, discrete=True),
            problem,
            x0,
            noise=source,
            accountant=acct,
        )
        released.append(float(log.released))
        assert type(acct.ledger[0].release).__name__ == "DiscreteGaussian" and not acct.secret
    units = np.array(released) / grid
    assert np.allclose(units, np.round(units), atol=1e-6)  # on the grid
    z = (np.array(released) - np.mean(released)) / (mult * delta_s)
    assert stats.kstest(z, "norm").pvalue > 1e-3


# --- the contract: output rule, the objective protocol --------------------------------------------


def test_paper_output_is_the_random_iterate_x_tau(problem):
    """paper=True returns x_τ, τ ~ Unif{0..T−1} from the public generator (Algorithms 1–2); last is
    x_T."""
    T, eta, lam, x0 = 12, 0.05, 1e-3, start(problem.d, seed=13)
    result = run(
        MeZO(eta=eta, lam=lam, paper=True),
        problem,
        x0,
        T,
        seed=7,
        sampler=FullBatch(problem.n),
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
    )
    gen = torch.Generator().manual_seed(7)
    seeds = public_seeds(gen, T)
    tau = int(torch.randint(T, (1,), generator=gen))
    x, iterates = x0.clone(), []
    for s in seeds:
        iterates.append(x)
        u = FlatSpace(x0).direction(s)
        c = (problem.losses_at(x + lam * u).mean(-1) - problem.losses_at(x - lam * u).mean(-1)) / (
            2 * lam
        )
        x = x - eta * c * u
    assert result.stats.tau == tau and 0 < tau < T - 1
    assert torch.allclose(result.output, iterates[tau], rtol=1e-12, atol=1e-12)
    assert torch.allclose(result.last, x, rtol=1e-12, atol=1e-12) and not torch.allclose(
        result.output, x
    )
    default = run(
        MeZO(eta=eta, lam=lam),
        problem,
        x0,
        T,
        seed=7,
        sampler=FullBatch(problem.n),
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
    )
    assert default.stats.tau is None and torch.equal(default.output, default.last)


class _NoClosedForm(Objective):
    """The quadratic seen through the Objective interface only (its optional closed forms left at
    None)."""

    def __init__(self, quadratic):
        self.q, self.n, self.dim = quadratic, quadratic.n, quadratic.dim

    def value(self, points):
        return self.q.value(points)

    def gradient(self, points):
        return self.q.gradient(points)

    def losses_at(self, points, index):
        return self.q.losses_at(points, index)

    def gradients(self, x, index):
        return self.q.gradients(x, index)


@pytest.mark.parametrize("K", [None, 3])
def test_dpgd_through_per_example_gradients_equals_the_closed_form(problem, K):
    x0 = start(problem.d, seed=14, K=K)
    C = 0.5 if K is None else torch.tensor([0.2, 1.0, math.inf], dtype=torch.float64)
    algorithm = DPGD(eta=0.1, C=C, noise_multiplier=0.0)
    kwargs = dict(seed=0, sampler=FullBatch(problem.n), noise=NoiseSource.for_testing(0))
    closed = run(algorithm, problem, x0, 4, accountant=Accountant(), **kwargs)
    generic = run(algorithm, _NoClosedForm(problem), x0, 4, accountant=Accountant(), **kwargs)
    assert torch.allclose(generic.output, closed.output, rtol=1e-12, atol=1e-13)
    for a, b in zip(closed.logs, generic.logs):
        assert torch.allclose(a.clipped_fraction, b.clipped_fraction) and torch.allclose(
            a.loss, b.loss, rtol=1e-12
        )
    assert closed.stats.gradients == 4 * problem.n * (1 if K is None else K)
