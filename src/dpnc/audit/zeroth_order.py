"""DPZero, DPGD-0th and DP-GD audited through ``Algorithm.run`` (:mod:`dpnc.algorithms.dpzero`) on
the flat tier.

All runs are the rows of one :class:`~dpnc.space.FlatSpace` grid (one call of ``Algorithm.run``: the
real step, sampler, privatisation and noise source, one noise draw per row). Under Poisson sampling
each run must step on its own realised batch, so ``dpzero-poisson`` calls the real step once per
step and realised batch (:meth:`DPZeroPoisson._run`). The model tier is in
:mod:`dpnc.audit.model_tier`."""

from __future__ import annotations

from typing import ClassVar

import torch
from tqdm.auto import tqdm

from dpnc.algorithms import dpzero as dz
from dpnc.audit.base import (
    BIG,
    STATISTICS_FULL_BATCH,
    STATISTICS_POISSON,
    Mechanism,
    chunks,
    ledger_mu,
    ledger_sensitivity,
    merge_scores,
    release_statistics,
    replay_inclusions,
)
from dpnc.estimators import two_point_on_batch
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.clipping import clipped_sum, per_run
from dpnc.privacy.release import release_sum
from dpnc.problems.base import Constants, Objective
from dpnc.sampling import FullBatch, PoissonSampler
from dpnc.space import FlatSpace


class _CanaryGrid(Objective):
    """Row r of the grid is its own dataset: the canary loss sign[r]·BIG·x₀ at index canary[r],
    every other loss 0.

    Only the per-example losses at the rows' points (:meth:`losses_at`, what DPZero and DPGD-0th
    query) and the clipped gradient sum (:meth:`clipped_gradient_sum`, what DP-GD queries: the
    canary's gradient sign·BIG·e₀ clipped to C·sign·e₀) are defined."""

    name = "audit-canary-grid"

    def __init__(self, n: int, d: int, canary: torch.Tensor, sign: torch.Tensor) -> None:
        self.n, self.dim, self.canary, self.sign = n, d, canary, sign
        self.constants = Constants(L0=BIG)

    def _mine(self, index: torch.Tensor, dtype) -> torch.Tensor:
        return (index.unsqueeze(0) == self.canary.unsqueeze(1)).to(dtype)  # (rows, |batch|)

    def losses_at(self, points: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return self._mine(index, points.dtype) * (self.sign * BIG * points[:, 0]).unsqueeze(1)

    def clipped_gradient_sum(self, x: torch.Tensor, C, index: torch.Tensor):
        mine = self._mine(index, x.dtype).sum(1) * (self.sign != 0)  # (rows,) canary sampled
        total = torch.zeros_like(x)
        total[:, 0] = mine * self.sign * torch.as_tensor(C, dtype=x.dtype)
        return (
            total,
            mine / max(len(index), 1),
            self.losses_at(x, index).sum(1) / max(len(index), 1),
        )

    def value(self, points):
        raise NotImplementedError(
            "the audit's canary grid holds one dataset per row: no mean objective"
        )

    gradient = value


class _OwnBatch:
    """The grid's sampler as some of its runs see it: its draw restricted to their own datasets,
    ``batch`` (the same for each of them). Everything else (B, q, its secrecy, the release it
    accounts) is the sampler's."""

    def __init__(self, sampler, batch: torch.Tensor) -> None:
        self.inner, self.batch = sampler, batch

    def sample(self) -> torch.Tensor:
        return self.batch

    def __getattr__(self, name):
        return getattr(self.inner, name)


class RealisedBatchDPZero(dz.DPZero):
    """BROKEN ON PURPOSE (``broken='realised-batch'``): the real step with the fixed B replaced by
    len(batch).

    c_t = Σ_i clip_C(a_i)/max(|batch|, 1) + z_t with z_t ~ N(0, (m·C/B)²) and the ledger entry of
    the correct step: ``DPZero.step`` (alone, no process group) patched as a naive fix would,
    dividing by the number of examples the step received. It reads only what the real step has (the
    sampler and its batch's differences). Under Poisson sampling |batch| is random and depends on
    the data: on a dataset of one example it is 0 or 1, so that example moves the release by C
    instead of the recorded C/B."""

    def step(self, space, closure, seed, *, sampler, noise, accountant):
        diffs = two_point_on_batch(space, closure, seed, self.lam, sampler)
        s = clipped_sum(diffs.a, self.C)
        # len(batch), at least 1: an empty batch releases noise only either way
        realised = max(diffs.examples, 1)
        c = release_sum(
            s.total * sampler.batch_size / realised,  # release_sum divides by B
            self.C,
            sampler=sampler,
            noise=noise,
            accountant=accountant,
            noise_multiplier=self.noise_multiplier,
        )
        space.update_(seed, -per_run(self.eta, c) * c)
        return dz.StepLog(diffs.loss, s.fraction, c, s.nonfinite, diffs.examples)


class _FlatGrid(Mechanism):
    """Runs as rows of one FlatSpace grid; rows share the public direction seeds, each draws its own
    noise."""

    n: ClassVar[int]
    B: ClassVar[int]
    T: ClassVar[int]
    d: ClassVar[int] = 2
    C: ClassVar[float] = 1.0
    lam: ClassVar[float] = 1e-3
    eta: ClassVar[float] = 0.01
    rows: ClassVar[int] = 4096
    algorithm: ClassVar[type] = dz.DPZero
    default_epsilon = 2.0

    @property
    def q(self) -> float:
        return self.B / self.n

    @property
    def unit(self) -> float:
        """Δ of one release: the mean of clip-C terms over the fixed B (2C/B replace-one, C/B
        add/remove)."""
        return (2 if self.relation == "replace-one" else 1) * self.C / self.B

    def multiplier(self) -> float:
        """σ/Δ calibrated by the tight PLD accountant for the target (ε, δ) over T steps (computed
        once)."""
        if "_multiplier" not in self.__dict__:
            self._multiplier = dz.calibrate_noise(
                "pld",
                self.epsilon,
                self.delta,
                self.T,
                self.n,
                None if self.B == self.n else self.B,
            )
        return self._multiplier

    def _sampler(self, broken: str | None):
        if self.B == self.n:
            return FullBatch(self.n)
        if broken == "public-batches":
            return PoissonSampler.for_testing(self.n, self.B, seed=self.seed)
        return PoissonSampler(self.n, self.B)

    def _algorithm(self, multiplier: float, broken: str | None):
        if self.algorithm is dz.DPGD:
            return dz.DPGD(self.eta, self.C, multiplier, steps=self.T)
        if broken == "realised-batch":
            return RealisedBatchDPZero(self.eta, self.lam, self.C, multiplier, steps=self.T)
        return self.algorithm(self.eta, self.lam, self.C, multiplier, steps=self.T)

    def _run(
        self,
        canary: torch.Tensor,
        sign: torch.Tensor,
        multiplier: float,
        sampler,
        bar: tqdm | None = None,
        broken: str | None = None,
    ) -> tuple[torch.Tensor, list[int], Accountant]:
        """One grid: row r's data has the canary loss sign[r]·BIG·x₀ at index canary[r], every other
        loss 0."""
        accountant, logs = Accountant(self.relation), []
        algorithm = self._algorithm(multiplier, broken)
        result = algorithm.run(
            _CanaryGrid(self.n, self.d, canary, sign),
            torch.zeros(len(sign), self.d, dtype=torch.float64),
            noise=self.noise,
            accountant=accountant,
            generator=torch.Generator().manual_seed(self.seed),
            sampler=sampler,
            callback=lambda t, log: (logs.append(log), bar is None or bar.update(1)),
        )
        return (
            torch.stack([log.released for log in logs]),
            result.stats.seeds,
            accountant,
        )  # (T, rows[, d])

    def _directions(self, seeds: list[int]) -> torch.Tensor:
        """u_t of every public seed (T, d), replayed as the adversary does."""
        space = FlatSpace(torch.zeros(self.d, dtype=torch.float64))
        return torch.stack([space.direction(s) for s in seeds])

    def _project(self, released: torch.Tensor, seeds: list[int]) -> torch.Tensor:
        """Each release's component along the canary's (public) direction of effect, in units of Δ:
        (T, rows)."""
        return torch.sign(self._directions(seeds)[:, :1]) * released / self.unit

    def claim_accountant(self) -> Accountant:
        return self._run(
            torch.zeros(1, dtype=torch.long),
            torch.ones(1, dtype=torch.float64),
            self.multiplier(),
            self._sampler(None),
        )[2]

    def parameters(self) -> dict:
        return {
            **super().parameters(),
            "n": self.n,
            "B": self.B,
            "T": self.T,
            "d": self.d,
            "C": self.C,
            "lam": self.lam,
            "eta": self.eta,
            "noise_multiplier": self.multiplier(),
        }


class DPZeroFullBatch(_FlatGrid):
    name = "dpzero"
    summary = (
        "DPZero, full batch (Algorithm 2): dpnc.algorithms.dpzero DPZero.run with FullBatch on a "
        "FlatSpace grid of runs, replace-one"
    )
    canary = (
        "example 0 has loss +BIG·x₀ on D and −BIG·x₀ on D′ (replace-one), every other example loss 0: its "
        "clipped difference is ±C·sign(u_t,0), so every released mean moves by the full 2C/n"
    )
    statistics = STATISTICS_FULL_BATCH
    relation = "replace-one"
    n, B, T = 10, 10, 5

    def scores(self, runs, broken=None, *, progress=False):
        self.check_broken(broken)
        m = self.multiplier() / self.noise_factor(broken)
        parts = []
        sizes = chunks(runs, self.rows // 2)
        with tqdm(
            total=len(sizes) * self.T, desc=f"audit {self.name}", disable=not progress
        ) as bar:
            for k in sizes:
                sign = torch.cat([torch.ones(k), -torch.ones(k)]).double()
                canary = torch.zeros(2 * k, dtype=torch.long)
                released, seeds, _ = self._run(canary, sign, m, self._sampler(broken), bar, broken)
                stats = release_statistics(self._project(released, seeds), m)
                parts.append({key: (v[:k], v[k:]) for key, v in stats.items()})
        return merge_scores(parts)

    def canary_effect(self) -> dict:
        released, _, _ = self._run(
            torch.zeros(2, dtype=torch.long),
            torch.tensor([1.0, -1.0], dtype=torch.float64),
            0.0,
            self._sampler(None),
        )  # noiseless: the means
        shift = (released[:, 0] - released[:, 1]).reshape(self.T, -1)
        claim = self.claim_accountant()
        sigma = self.multiplier() * self.unit
        return {
            "shift": float(shift.norm(dim=1).max()),
            "sensitivity": ledger_sensitivity(claim),
            "mu": float(shift.norm()) / sigma,
            "claimed_mu": ledger_mu(claim),
        }


class DPGD0thFullBatch(DPZeroFullBatch):
    name = "dpgd0th"
    summary = (
        "DPGD-0th, full batch (Algorithm 1): dpnc.algorithms.dpzero DPGD0th.run (vector clipping, "
        "d-dimensional noise) and FullBatch on a FlatSpace grid of runs, replace-one"
    )
    canary = (
        "example 0 has loss +BIG·x₀ on D and −BIG·x₀ on D′, every other example loss 0: its clipped vector "
        "is ±C·sign(u_t,0)·u_t/‖u_t‖, so every released mean moves by the full 2C/n"
    )
    statistics = {
        "llr": "Σ_t ⟨sign(u_t,0)·u_t/‖u_t‖, g_t⟩/Δ: the log-likelihood ratio (up to scale)",
        "max": STATISTICS_FULL_BATCH["max"],
    }
    algorithm = dz.DPGD0th
    d = 4

    def _project(self, released, seeds):
        u = self._directions(seeds)
        e = torch.sign(u[:, :1]) * u / torch.linalg.vector_norm(u, dim=1, keepdim=True)  # (T, d)
        return torch.einsum("td,trd->tr", e, released) / self.unit


class DPGDFullBatch(DPZeroFullBatch):
    name = "dp-gd"
    summary = (
        "DP-GD, first order, full batch (docs/papers.md, DPZero §2.2): dpnc.algorithms.dpzero DPGD.run "
        "(per-example gradient clipping, d-dimensional noise, the objective's clipped_gradient_sum) and FullBatch "
        "on a FlatSpace grid of runs, replace-one"
    )
    canary = (
        "example 0 has gradient +BIG·e₀ on D and −BIG·e₀ on D′ (every other example 0): clipped to ±C·e₀, so "
        "every released mean moves by the full 2C/n along e₀"
    )
    statistics = {
        "llr": "Σ_t g_t,0/Δ: the log-likelihood ratio (up to scale)",
        "max": STATISTICS_FULL_BATCH["max"],
    }
    algorithm = dz.DPGD
    d = 3

    def _project(self, released, seeds):
        return released[..., 0] / self.unit


class DPZeroPoisson(_FlatGrid):
    name = "dpzero-poisson"
    summary = (
        "DPZero with secret Poisson batches (q = B/n, n the public bound): dpnc.algorithms.dpzero DPZero.step "
        "with the real PoissonSampler on a FlatSpace grid of runs, each on its own realised batch, add/remove"
    )
    canary = (
        "in-run r's dataset is the canary alone, loss BIG·x₀ at its own index r; its out-run's dataset is "
        "empty (n stays the public bound: the worst case of add/remove, where a realised batch holds the canary "
        "or nothing). One PoissonSampler draw per step includes each index independently with probability q, "
        "so each run's canary is sampled independently of the others', as with separate samplers: the grid's "
        "runs are independent runs of the real mechanism. Each run steps on its own realised batch (its canary "
        "or nothing), never on the draw's ~B indices. public-batches: every canary sits at the index the "
        "replayed seeded sampler includes most often"
    )
    statistics = STATISTICS_POISSON
    relation = "add/remove"
    subsampled = True
    variants = ("sigma", "public-batches", "realised-batch")
    n, B, T = 1000, 10, 50

    def _run(self, canary, sign, multiplier, sampler, bar=None, broken=None):
        """One grid whose runs each step on their own realised batch, as a run on its own dataset
        would.

        Run r's dataset is the canary alone (sign[r] = 1) at index canary[r] of the sampler's
        numbering, or empty (sign[r] = 0): its batch at step t is the sampler's draw ∩ {canary[r]},
        its one example or nothing. Handing every run the whole draw (~B indices, the other runs'
        canaries at loss 0) would hide whatever the step computes from its batch, len(batch) first.
        So each step calls the real ``step`` once on the runs whose batch holds their example (batch
        [0] of their one-example datasets) and once on the rest (an empty batch), with the public
        seeds ``Algorithm.run`` draws. The ledger is read from a one-run grid (one call a step)."""
        algorithm = self._algorithm(multiplier, broken)
        accountant = Accountant(self.relation)
        sampler.check_relation(accountant.relation)
        seeds = dz.public_seeds(torch.Generator().manual_seed(self.seed), self.T)
        x = torch.zeros(len(sign), self.d, dtype=torch.float64)
        # A run's example is example 0 of its own dataset: its batch is [0] or [].
        first, empty = torch.zeros(1, dtype=torch.long), torch.zeros(0, dtype=torch.long)
        released = []
        for seed in seeds:
            holds = torch.isin(canary, sampler.sample()) & (sign != 0)
            c = torch.zeros(len(sign), dtype=torch.float64)
            for rows, batch in ((holds, first), (~holds, empty)):
                if rows.any():
                    space = FlatSpace(x[rows])
                    own = torch.zeros(int(rows.sum()), dtype=torch.long)
                    problem = _CanaryGrid(self.n, self.d, own, sign[rows])
                    log = algorithm.step(
                        space,
                        algorithm._closure(problem, space),  # the closure Algorithm.run builds
                        seed,
                        sampler=_OwnBatch(sampler, batch),
                        noise=self.noise,
                        accountant=accountant,
                    )
                    x[rows], c[rows] = space.x, log.released
            released.append(c)
            if bar is not None:
                bar.update(1)
        return torch.stack(released), seeds, accountant  # (T, rows)

    def scores(self, runs, broken=None, *, progress=False):
        self.check_broken(broken)
        m = self.multiplier() / self.noise_factor(broken)
        m_claim = self.multiplier()
        known = replay_inclusions(self.n, self.B, self.T, self.seed)
        where = int(known.sum(0).argmax())
        parts = []
        sizes = chunks(
            runs, min(self.n, self.rows // 2)
        )  # secret batches: distinct canary indices in a grid
        with tqdm(
            total=len(sizes) * self.T, desc=f"audit {self.name}", disable=not progress
        ) as bar:
            for k in sizes:
                canary = torch.cat(
                    [
                        torch.arange(k) if broken != "public-batches" else torch.full((k,), where),
                        torch.full((k,), -1),
                    ]
                )
                sign = torch.cat([torch.ones(k), torch.zeros(k)]).double()
                released, seeds, _ = self._run(canary, sign, m, self._sampler(broken), bar, broken)
                y = self._project(released, seeds)  # (T, 2k)
                stats = release_statistics(y, m_claim, q=self.q, known=known[:, where])
                parts.append({key: (v[:k], v[k:]) for key, v in stats.items()})
        return merge_scores(parts)

    def canary_effect(self) -> dict:
        where = int(replay_inclusions(self.n, self.B, self.T, self.seed).sum(0).argmax())
        released, _, _ = self._run(
            torch.tensor([where, -1]),
            torch.tensor([1.0, 0.0], dtype=torch.float64),
            0.0,
            self._sampler("public-batches"),
        )  # noiseless, seeded batches
        shift = released[:, 0] - released[:, 1]
        return {
            "shift": float(shift.abs().max()),
            "sensitivity": ledger_sensitivity(self.claim_accountant()),
            "mu": None,
            "claimed_mu": None,
        }
