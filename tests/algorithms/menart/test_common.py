"""Menart et al.'s algorithms under adversarial data: realised sensitivity ≤ the ledger's.

The paper assumes that f is L0-Lipschitz (and L1-smooth) wherever the iterates go; an adversary does
not oblige. Here the data break the declared constants on purpose — examples far outside the
declared domain that pull the iterates out of the region, and a neighbour whose gradient or
curvature exceeds the declared bound inside it — and every private query is recomputed on the
neighbouring datasets at the same inputs (the same history of released values, as in the composition
argument). The change of the pre-noise value must never exceed the sensitivity that the ledger was
charged for."""

from __future__ import annotations

import math

import pytest
import torch

from dpnc.algorithms import menart as kl
from dpnc.algorithms.menart import common as kl_common
from dpnc.privacy import NoiseSource
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.releases import Gaussian
from dpnc.problems.kl import KLObjective, LeastSquares
from tests.algorithms.menart import adaptive, proximal, spider

F64 = torch.float64
N, DIM = 40, 2


class Springs(KLObjective):
    """f(w; (x, s)) = (s/2)‖w − x‖² with constants *declared* for the domain ‖x‖ ≤ 1, s ∈ (0, 1] on
    the unit ball: L0 = 2 (‖s(w − x)‖ ≤ ‖w‖ + ‖x‖), L1 = 1. The data given may break the domain (the
    adversary's examples). ``explicit=False`` hides the per-example gradients, like a
    sufficient-statistics objective: nothing can be clipped, and the bounds then rest on the domain
    and the region alone."""

    name = "springs"

    def __init__(
        self, x, s, *, explicit: bool = True, kappa: float = 2.0, weak_convexity: float = 0.1
    ) -> None:
        self.x, self.s, self._explicit = x, s, explicit
        self.n, self.dim = x.shape
        self._declare(
            L0=2.0,
            L1=1.0,
            weak_convexity=weak_convexity,
            gamma=1.0,
            kappa=kappa,
            center=torch.zeros(self.dim, dtype=F64),
            radius=1.0,
            F_star=0.0,
        )
        self.w_star = None

    def with_example(self, x0, s0) -> Springs:
        """The neighbouring dataset: example 0 replaced by (x0, s0)."""
        x, s = self.x.clone(), self.s.clone()
        x[0], s[0] = torch.as_tensor(x0, dtype=F64), s0
        c = self.constants
        return Springs(
            x, s, explicit=self._explicit, kappa=c.kappa, weak_convexity=c.weak_convexity
        )

    def _value(self, points):
        return 0.5 * (self.s * ((points[:, None, :] - self.x) ** 2).sum(-1)).mean(-1)

    def _example_gradients(self, points):
        return self.s[:, None] * (points[:, None, :] - self.x)

    def _gradient(self, points):
        return self._example_gradients(points).mean(-2)


def adversarial(*, explicit: bool = True, **declared) -> tuple[Springs, list[Springs]]:
    """A dataset whose examples 1..n−1 sit at 10·e1, far outside the domain (they pull any
    unprojected iterate out of the region, where even in-domain examples have gradients ‖w‖ > L0),
    and its neighbours, example 0 replaced.

    With per-example gradients (``explicit``), example 0 sits at 30·e1 and its replacements are the
    worst the clipping must absorb: a point at −30·e1 (gradients ≈ 30 ≫ L0 and opposite: the clipped
    change is ≈ 2L0, the replace-one bound itself), an anti-spring s = −100 (differences −100(w′ −
    w), opposite to every step and ≫ L1‖w′ − w‖) and an in-domain example. Without them (nothing can
    be clipped, so the bound rests on the domain), example 0 is the in-domain (0, s = 0.1) and its
    replacement (0, s = 1): their gradients differ by 0.9‖w‖, within 2L0 only inside the region."""
    x = torch.zeros(N, DIM, dtype=F64)
    x[1:, 0] = 10.0
    s = torch.ones(N, dtype=F64)
    if explicit:
        x[0, 0] = 30.0
    else:
        s[0] = 0.1
    f = Springs(x, s, explicit=explicit, **declared)
    neighbours = [f.with_example([0.0, 0.0], 1.0)]
    if explicit:
        neighbours += [f.with_example([-30.0, 0.0], 1.0), f.with_example([0.0, 0.0], -100.0)]
    return f, neighbours


class Audit:
    """Every private query of a run, recomputed on each neighbouring dataset at the same inputs."""

    def __init__(self) -> None:
        self.neighbours: list[KLObjective] = []
        self.records: list[
            tuple[str, float, float]
        ] = []  # (query kind, realised change, claimed sensitivity)

    def compare(self, queries, kind: str, query, value: torch.Tensor, bound: float) -> None:
        """``value`` is the query's pre-noise sum (released divided by n): the realised change of
        the mean is ‖Δsum‖/n."""
        original = queries.objective
        try:
            for other in self.neighbours:
                queries.objective = other
                realised = float(torch.linalg.vector_norm(query() - value)) / queries.n
                self.records.append((kind, realised, queries.sensitivity(bound)))
        finally:
            queries.objective = original

    def worst(self, kind: str | None = None) -> float:
        """max realised / claimed over every query (of ``kind``, if given) and neighbour."""
        return max(realised / claimed for k, realised, claimed in self.records if kind in (None, k))

    def check(self, *, sharp: bool) -> None:
        """Realised ≤ claimed for every query; ``sharp``: the claim is attained (≥ 99 %) for every
        kind of query, so the audit would catch a sensitivity understated by any factor, not only a
        gross one."""
        assert self.worst() <= 1 + 1e-9, self.worst()
        if sharp:
            assert all(self.worst(kind) > 0.99 for kind in self.kinds()), {
                k: self.worst(k) for k in self.kinds()
            }

    def kinds(self) -> set[str]:
        return {kind for kind, _, _ in self.records}

    def claimed(self) -> set[float]:
        return {claimed for _, _, claimed in self.records}


@pytest.fixture
def audit(monkeypatch) -> Audit:
    """Replaces the algorithms' private queries by ones that also recompute every pre-noise value on
    ``audit.neighbours`` (the algorithms build their queries through ``kl_common.open_queries``)."""
    log = Audit()
    Base = kl_common.PrivateGradients

    class Audited(Base):
        def gradient_sum(self, w, bound):
            value = super().gradient_sum(w, bound)
            log.compare(self, "gradient", lambda: Base.gradient_sum(self, w, bound), value, bound)
            return value

        def difference_sum(self, w_new, w, bound):
            value = super().difference_sum(w_new, w, bound)
            log.compare(
                self, "difference", lambda: Base.difference_sum(self, w_new, w, bound), value, bound
            )
            return value

    monkeypatch.setattr(kl_common, "PrivateGradients", Audited)
    return log


def gaussian_sensitivities(result) -> set[float]:
    return {
        e.release.sensitivity for e in result.accountant.ledger if isinstance(e.release, Gaussian)
    }


START = torch.tensor([-0.5, 0.3], dtype=F64)


# --- finding 4: every algorithm keeps its declared bounds, by default -----------------------------


@pytest.mark.parametrize("explicit", [True, False], ids=["clipped", "projected"])
def test_kl_spider_realised_sensitivity_is_within_the_ledger(audit, explicit):
    f, audit.neighbours = adversarial(explicit=explicit, kappa=1.5)
    r = spider(f, rho=1e6, w0=START, noise=NoiseSource.for_testing(0))
    assert audit.kinds() == {
        "gradient",
        "difference",
    }  # checkpoints and SPIDER differences both audited
    audit.check(sharp=explicit)
    assert audit.claimed() <= gaussian_sensitivities(r)
    assert float(r.stats.iterates.norm(dim=1).max()) <= f.constants.region.radius * (1 + 1e-12)


@pytest.mark.parametrize("explicit", [True, False], ids=["clipped", "projected"])
def test_proximal_point_realised_sensitivity_is_within_the_ledger(audit, explicit):
    f, audit.neighbours = adversarial(explicit=explicit)
    r = proximal(f, rho=1.0, w0=START, max_inner_iters=20, noise=NoiseSource.for_testing(1))
    assert (
        r.stats.inner_radius > 5 * f.constants.region.radius
    )  # the prox ball L0/(2L̃1) alone would leave the region
    audit.check(sharp=explicit)
    assert audit.claimed() <= gaussian_sensitivities(r)
    assert r.stats.inner_max_region_distance <= f.constants.region.radius * (1 + 1e-12)


@pytest.mark.parametrize("explicit", [True, False], ids=["clipped", "projected"])
@pytest.mark.parametrize("select", [False, True], ids=["last", "select"])
def test_adaptive_gd_realised_sensitivity_is_within_the_filter(audit, explicit, select):
    """Adaptive GD's filter charges ρ_t = √ρ/n + L0²dℓ/(n²N_t²), i.e. Δ = 2L0/n per release
    (calibrated, replace-one), and the selection's score −‖∇F(w_t)‖ has Δ = 2L0/n as well."""
    f, audit.neighbours = adversarial(explicit=explicit)
    r = adaptive(f, rho=1.0, w0=START, select=select, noise=NoiseSource.for_testing(2))
    assert r.stats.steps >= 3
    audit.check(sharp=explicit)
    assert audit.claimed() == {2 * f.constants.L0 / f.n}
    assert float(r.stats.iterates.norm(dim=1).max()) <= f.constants.region.radius * (1 + 1e-12)


def test_queries_refuse_a_point_outside_the_region_when_they_cannot_clip():
    """Defence in depth for pluggable inner solvers: without clipping, a query outside the region
    (where the bound need not hold) is refused before anything is released; with clipping it is
    harmless and allowed."""

    def wandering(queries, center, **kwargs):
        queries.gradient(center + torch.tensor([5.0, 0.0], dtype=F64), kwargs["L0"])
        raise AssertionError("the query outside the region went through")

    f, _ = adversarial(explicit=False)
    accountant = Accountant()
    with pytest.raises(RuntimeError, match="an inner solver must keep its iterates in the region"):
        proximal(
            f,
            rho=1.0,
            w0=START,
            inner=wandering,
            noise=NoiseSource.for_testing(8),
            accountant=accountant,
        )
    assert accountant.releases == 0
    with pytest.raises(AssertionError, match="went through"):
        proximal(
            adversarial()[0], rho=1.0, w0=START, inner=wandering, noise=NoiseSource.for_testing(8)
        )


def test_selection_clips_iterates_it_is_given_outside_the_region(audit):
    f, audit.neighbours = adversarial()
    iterates = torch.tensor(
        [[0.0, 0.0], [5.0, 0.0], [-8.0, 3.0]], dtype=F64
    )  # public, but outside the region
    kl.select_stationary(
        f,
        iterates,
        rho=1.0,
        L0=f.constants.L0,
        noise=NoiseSource.for_testing(3),
        accountant=Accountant(),
    )
    assert len(audit.records) == 3 * len(iterates)
    audit.check(sharp=True)


def test_selection_refuses_iterates_outside_the_region_when_it_cannot_clip():
    f, _ = adversarial(explicit=False)
    noise = Untouchable()
    with pytest.raises(ValueError, match="iterates must lie in the region"):
        kl.select_stationary(
            f,
            torch.tensor([[0.0, 0.0], [5.0, 0.0]], dtype=F64),
            rho=1.0,
            L0=f.constants.L0,
            noise=noise,
            accountant=Accountant(),
        )


def test_start_outside_the_region_is_refused_up_front():
    f, _ = adversarial()
    for run in (spider, proximal, adaptive):
        with pytest.raises(ValueError, match="x0 must lie in the region"):
            run(f, rho=1.0, w0=torch.tensor([3.0, 0.0], dtype=F64), noise=Untouchable())


@pytest.mark.parametrize("run", [spider, proximal, adaptive])
def test_turning_the_guards_off_is_reported_as_not_guaranteed(run):
    f, _ = adversarial(kappa=1.5 if run is spider else 2.0)
    args = dict(rho=1.0, w0=START, noise=NoiseSource.for_testing(4))
    if run is proximal:
        args["max_inner_iters"] = 5
    guarded = run(f, **args)
    assert guarded.stats.sensitivity == "clipped"
    report = guarded.report(1e-6)
    assert not any("not guaranteed" in note for note in report.notes)
    for off in (dict(clip=False), dict(clip=False, project=False)):
        r = run(f, **args, **off)
        assert r.stats.sensitivity == "not guaranteed"
        report = r.report(1e-6)
        assert not report.private and not r.private
        assert any("sensitivity is not guaranteed" in note for note in report.notes)


def test_without_per_example_gradients_the_bounds_rest_on_the_declared_region():
    """No per-example gradients, nothing to clip: the objective's own constants on its region, with
    every iterate projected there, are the guarantee; a config built for other constants is refused
    before any release."""
    f, _ = adversarial(explicit=False)
    r = adaptive(f, rho=1.0, w0=START, noise=NoiseSource.for_testing(5))
    assert r.stats.sensitivity == "declared"
    assert any("declared" in note and "region" in note for note in r.report(1e-6).notes)
    assert f.constants.L0 != 1.0
    with pytest.raises(ValueError, match=r"built for other public constants.*L0 = 1\.0"):
        adaptive(f, rho=1.0, w0=START, L0=1.0, noise=Untouchable())


def test_projection_onto_the_region_and_prox_ball_is_the_exact_projection():
    """Algorithm 4's feasible set here is the region ∩ B_R(c): the projection lands in both balls,
    moves nothing already inside, and is at least as close as every one of 20000 feasible points
    sampled near it."""
    gen = torch.Generator().manual_seed(0)
    for _ in range(30):
        d = int(torch.randint(1, 4, (), generator=gen))
        c1, c2 = torch.randn(d, generator=gen, dtype=F64), torch.randn(d, generator=gen, dtype=F64)
        r1, r2 = (
            0.5 + torch.rand((), generator=gen).item(),
            0.5 + torch.rand((), generator=gen).item(),
        )
        if float((c1 - c2).norm()) >= r1 + r2:
            continue
        p = 3 * torch.randn(d, generator=gen, dtype=F64)
        x = kl.project_two_balls(p, c1, r1, c2, r2)
        assert float((x - c1).norm()) <= r1 * (1 + 1e-12) and float((x - c2).norm()) <= r2 * (
            1 + 1e-12
        )
        cloud = x + 0.3 * torch.randn(20_000, d, generator=gen, dtype=F64)
        feasible = cloud[((cloud - c1).norm(dim=1) <= r1) & ((cloud - c2).norm(dim=1) <= r2)]
        assert float((p - x).norm()) <= float((feasible - p).norm(dim=1).min()) + 1e-12
        inside = kl.project_two_balls(x, c1, r1, c2, r2)
        assert torch.allclose(inside, x, atol=1e-15)


# --- finding 3: public constants give the same schedule on neighbouring datasets ------------------


def test_neighbouring_least_squares_datasets_get_the_same_spider_schedule():
    """The audit's case: one replaced row used to move KL-Spider from 11,417 to 1,140,951 rounds."""
    base = LeastSquares.generate(4, 400, seed=1)
    A, b = base.A.clone(), base.b.clone()
    A[0], b[0] = (
        torch.linalg.eigh(base.H)[1][:, 0],
        -1.4,
    )  # the weakest direction, an extreme target
    public = dict(row_bound=1.0, target_bound=1.4, radius=2.0, mu=0.2)
    runs = [
        spider(LeastSquares(A_, b_, **public), rho=1.0, noise=NoiseSource.for_testing(6))
        for A_, b_ in ((base.A, base.b), (A, b))
    ]
    assert runs[0].stats.schedule == runs[1].stats.schedule
    assert runs[0].stats.schedule.K > 0


# --- finding 8 (adaptive GD part): checks before the run ------------------------------------------


class Untouchable:
    """A noise source that fails the test if anything draws from it: a refusal must come before any
    release."""

    secret = False

    def __getattr__(self, name):
        raise AssertionError(f"noise drawn ({name}) before the arguments were checked")


def test_adaptive_gd_with_selection_refuses_an_unsupported_relation_before_the_run():
    f, _ = adversarial()
    with pytest.raises(
        ValueError, match=r"relation must be one of \['replace-one'\] for select=True"
    ):
        adaptive(f, rho=1.0, w0=START, select=True, relation="add/remove", noise=Untouchable())
    with pytest.raises(
        ValueError, match=r"relation must be one of \['replace-one'\] for the selection"
    ):
        kl.select_stationary(
            f,
            START[None],
            rho=1.0,
            L0=f.constants.L0,
            noise=Untouchable(),
            accountant=Accountant("add/remove"),
        )
    # without selection, add/remove is supported (the filter is zCDP under either relation)
    r = adaptive(f, rho=1.0, w0=START, relation="add/remove", noise=NoiseSource.for_testing(7))
    assert r.accountant.rho() == pytest.approx(1.0)
    assert math.isfinite(r.report(1e-6).epsilon)
