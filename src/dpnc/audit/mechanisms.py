"""The mechanisms ``dpnc audit`` runs: the library's own steps, samplers, oracles and noise, on neighbouring datasets.

Every mechanism here runs dpnc's real code path — :func:`dpnc.algorithms.dpzero.run` with the real
:class:`~dpnc.sampling.PoissonSampler`, the real ZTC/KLT tree oracles, KL-Spider's
:class:`~dpnc.algorithms.kl.PrivateGradients` query, the :class:`dpnc.optim.DPZero` optimizer — with the
secret :class:`~dpnc.privacy.noise.NoiseSource`, many times on a dataset D that holds a canary and on its
neighbour D′ (the canary replaced by its mirror image under replace-one, removed under add/remove). The
adversary knows all public randomness (direction seeds, the public generator of the single-pass oracles,
the batches of a seeded sampler) and every other example; it sees every released value and scores each run
with the log-likelihood ratio of "in" against "out" (or a monotone function of it).

Canary design: every other example has loss 0, and the canary's loss is linear with a huge slope
(``BIG``), so each of its finite differences is clipped to exactly the bound the sensitivity assumes,
with a sign the adversary computes from the public directions. The released values are then
"canary term + noise" and the canary's effect reaches the recorded sensitivity.

The claimed ε is what the library's own ledger says for the *correct* configuration (one run of it, its
:class:`~dpnc.privacy.accountant.Accountant` report, the tightest of RDP/PLD/zCDP). Broken variants the
audit must catch: ``"sigma"`` runs with a tenth of the noise while the claim stays the correct one;
``"public-batches"`` (subsampled mechanisms) draws the batches with ``PoissonSampler.for_testing(n, B,
seed=s)`` and the adversary, who knows s, replays the sampler to learn the steps that used the canary.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from dpnc.algorithms import dpzero as dz
from dpnc.algorithms import klt, zo_o2nc
from dpnc.algorithms.kl import PrivateGradients, spider_schedule
from dpnc.clipping import clip_scalars
from dpnc.estimators import two_point
from dpnc.optim import DPZero as DPZeroOptimizer
from dpnc.privacy.accountant import Accountant, PrivacyReport
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.tree import leaf_participation, node, nodes_covering
from dpnc.problems.base import Problem
from dpnc.sampling import FullBatch, PoissonSampler
from dpnc.space import FlatSpace, ModuleSpace

BIG = 1e6  # the canary's slope: its differences exceed every clipping bound used here
BROKEN = ("sigma", "public-batches")
SIGMA_FACTOR = 10  # "sigma": the noise std divided by this, the claim unchanged


class Mechanism(ABC):
    """One auditable mechanism: its claim, and the adversary's score of many runs on D and on D′.

    Subclasses set the class attributes and implement :meth:`_claim_report`, :meth:`scores`.

    Args:
        epsilon: the target ε the mechanism is calibrated for (its claim is then read from its ledger).
        delta: the δ of the claim and of the ε lower bound.
        seed: the public seed (directions, the public generator, a seeded sampler); the noise is secret.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    canary: ClassVar[str]
    statistic: ClassVar[str]
    relation: ClassVar[str]
    subsampled: ClassVar[bool] = False

    def __init__(self, *, epsilon: float = 1.0, delta: float = 1e-5, seed: int = 0) -> None:
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
            raise ValueError(f"epsilon must be a finite number > 0; got {epsilon!r}")
        if not (isinstance(delta, (int, float)) and 0 < delta < 1):
            raise ValueError(f"delta must be in (0, 1); got {delta!r}")
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**62:
            raise ValueError(f"seed must be an integer in [0, 2**62); got {seed!r}")
        self.epsilon, self.delta, self.seed = float(epsilon), float(delta), seed
        self.noise = NoiseSource()  # secret: one stream for all runs of this audit

    def check_broken(self, broken: str | None) -> None:
        """Refuse a variant that does not apply, before any run."""
        if broken is None:
            return
        if broken not in BROKEN:
            raise ValueError(f"broken must be one of {BROKEN} or None; got {broken!r}")
        if broken == "public-batches" and not self.subsampled:
            names = [m.name for m in MECHANISMS.values() if m.subsampled]
            raise ValueError(f"broken='public-batches' applies to subsampled mechanisms {names}; "
                             f"{self.name!r} samples no batches")

    def claim(self) -> PrivacyReport:
        """The ledger's report for the correct configuration (one run of it), at ``delta``."""
        return self._claim_report()

    @abstractmethod
    def _claim_report(self) -> PrivacyReport:
        ...

    @abstractmethod
    def scores(self, runs: int, broken: str | None = None, *, progress: bool = False
               ) -> tuple[np.ndarray, np.ndarray]:
        """The adversary's score of ``runs`` runs on D (canary in) and of ``runs`` runs on D′ (out)."""

    def parameters(self) -> dict:
        """The public settings of the audited configuration (for the report)."""
        return {"epsilon_target": self.epsilon, "delta": self.delta, "seed": self.seed}


# --- DPZero, DPGD-0th: a grid of runs on a flat space ------------------------------------------------


class _FlatGrid(Mechanism):
    """Runs as rows of one :class:`FlatSpace` grid: one call of :func:`dpnc.algorithms.dpzero.run` runs them all.

    Rows share the public direction seeds and draw independent noise (the mechanism draws one noise value
    per row). ``rows`` rows per call at most.
    """

    n: int
    B: int
    T: int
    d: int = 2
    C: float = 1.0
    lam: float = 1e-3
    eta: float = 0.01
    rows: int = 4096
    algorithm: ClassVar[type] = dz.DPZero

    @property
    def q(self) -> float:
        return self.B / self.n

    def multiplier(self) -> float:
        """σ/Δ calibrated by the tight PLD accountant for the target (ε, δ) over T steps."""
        return dz.calibrate_noise("pld", self.epsilon, self.delta, self.T, self.n,
                                  None if self.B == self.n else self.B)

    def _sampler(self, broken: str | None):
        if self.B == self.n:
            return FullBatch(self.n)
        if broken == "public-batches":
            return PoissonSampler.for_testing(self.n, self.B, seed=self.seed)
        return PoissonSampler(self.n, self.B)

    def _run(self, canary: torch.Tensor, sign: torch.Tensor, multiplier: float, sampler,
             bar: tqdm | None = None) -> tuple[torch.Tensor, list[int], Accountant]:
        """One grid: row r's dataset has the canary BIG·x₀·sign[r] at index canary[r] (sign 0: no canary)."""
        rows = len(sign)
        space = FlatSpace(torch.zeros(rows, self.d, dtype=torch.float64))

        def losses(x: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
            mine = (batch.unsqueeze(0) == canary.unsqueeze(1)).to(x.dtype)         # (rows, |batch|)
            return mine * (sign * BIG * x[:, 0]).unsqueeze(1)

        accountant = Accountant(self.relation)
        algorithm = self.algorithm(self.eta, self.lam, self.C, multiplier)
        callback = None if bar is None else (lambda t, log: bar.update(1))
        result = dz.run(algorithm, space, losses, self.T, seed=self.seed, sampler=sampler, noise=self.noise,
                        accountant=accountant, callback=callback)
        released = torch.stack([log.released for log in result.logs])              # (T, rows[, d])
        return released, result.seeds, accountant

    def _claim_report(self) -> PrivacyReport:
        _, _, accountant = self._run(torch.zeros(1, dtype=torch.long), torch.ones(1), self.multiplier(),
                                     self._sampler(None))
        return accountant.report(self.delta)

    def _directions(self, seeds: list[int]) -> torch.Tensor:
        """u_t of every public seed (T, d): what the adversary replays."""
        space = FlatSpace(torch.zeros(self.d, dtype=torch.float64))
        return torch.stack([space.direction(s) for s in seeds])

    def parameters(self) -> dict:
        return {**super().parameters(), "n": self.n, "B": self.B, "T": self.T, "d": self.d, "C": self.C,
                "lam": self.lam, "eta": self.eta, "noise_multiplier": self.multiplier()}


class DPZeroFullBatch(_FlatGrid):
    name = "dpzero"
    summary = ("DPZero, full batch (Algorithm 2): dpnc.algorithms.dpzero.run with DPZero and FullBatch on a "
               "FlatSpace grid of runs, replace-one")
    canary = ("example 0 has loss +BIG·x₀ on D and −BIG·x₀ on D′ (replace-one), every other example loss 0: its "
              "clipped difference is ±C·sign(u_t,0), so the released mean moves by the full 2C/n")
    statistic = "Σ_t sign(u_t,0)·c_t / (2C/n): the log-likelihood ratio of T Gaussian releases (up to scale)"
    relation = "replace-one"
    n, B, T = 10, 10, 20

    def scores(self, runs, broken=None, *, progress=False):
        self.check_broken(broken)
        m = self.multiplier() / (SIGMA_FACTOR if broken == "sigma" else 1)
        out_in, out_out = [], []
        chunks = _chunks(runs, self.rows // 2)
        with tqdm(total=len(chunks) * self.T, desc=f"audit {self.name}", disable=not progress) as bar:
            for k in chunks:
                sign = torch.cat([torch.ones(k), -torch.ones(k)]).double()
                released, seeds, _ = self._run(torch.zeros(2 * k, dtype=torch.long), sign, m,
                                               self._sampler(broken), bar)
                s = torch.sign(self._directions(seeds)[:, 0])                        # (T,)
                score = (s.unsqueeze(1) * released).sum(0) / (2 * self.C / self.n)
                out_in.append(score[:k])
                out_out.append(score[k:])
        return _numpy(out_in), _numpy(out_out)


class DPGD0thFullBatch(DPZeroFullBatch):
    name = "dpgd0th"
    summary = ("DPGD-0th, full batch (Algorithm 1): dpnc.algorithms.dpzero.run with DPGD0th (vector clipping, "
               "d-dimensional noise) and FullBatch on a FlatSpace grid of runs, replace-one")
    canary = ("example 0 has loss +BIG·x₀ on D and −BIG·x₀ on D′, every other example loss 0: its clipped "
              "vector is ±C·sign(u_t,0)·u_t/‖u_t‖, so the released mean moves by the full 2C/n")
    statistic = "Σ_t ⟨sign(u_t,0)·u_t/‖u_t‖, g_t⟩ / (2C/n): the log-likelihood ratio (up to scale)"
    algorithm = dz.DPGD0th
    d = 4

    def scores(self, runs, broken=None, *, progress=False):
        self.check_broken(broken)
        m = self.multiplier() / (SIGMA_FACTOR if broken == "sigma" else 1)
        out_in, out_out = [], []
        chunks = _chunks(runs, self.rows // 2)
        with tqdm(total=len(chunks) * self.T, desc=f"audit {self.name}", disable=not progress) as bar:
            for k in chunks:
                sign = torch.cat([torch.ones(k), -torch.ones(k)]).double()
                released, seeds, _ = self._run(torch.zeros(2 * k, dtype=torch.long), sign, m,
                                               self._sampler(broken), bar)          # (T, 2k, d)
                u = self._directions(seeds)
                e = torch.sign(u[:, :1]) * u / torch.linalg.vector_norm(u, dim=1, keepdim=True)
                score = torch.einsum("td,trd->r", e, released) / (2 * self.C / self.n)
                out_in.append(score[:k])
                out_out.append(score[k:])
        return _numpy(out_in), _numpy(out_out)


class DPZeroPoisson(_FlatGrid):
    name = "dpzero-poisson"
    summary = ("DPZero with secret Poisson batches (q = B/n): dpnc.algorithms.dpzero.run with DPZero and the "
               "real PoissonSampler on a FlatSpace grid of runs, add/remove")
    canary = ("in-run r holds a canary with loss BIG·x₀ at its own index r (every other example, and every "
              "out-run's data, loss 0); one PoissonSampler draw per step then includes each run's canary "
              "independently with probability q, as separate samplers would, so the grid's runs are independent "
              "runs of the real mechanism. public-batches: every canary sits at the index the replayed seeded "
              "sampler includes most often")
    statistic = ("secret batches: Σ_t log(1 − q + q·exp((y_t − ½)/m²)), y_t = sign(u_t,0)·c_t/(C/B), m the "
                 "run's σ/Δ (the exact log-likelihood ratio); public batches: Σ_{t ∋ canary} (y_t − ½)/m²")
    relation = "add/remove"
    subsampled = True
    n, B, T = 500, 5, 500

    def scores(self, runs, broken=None, *, progress=False):
        self.check_broken(broken)
        m = self.multiplier() / (SIGMA_FACTOR if broken == "sigma" else 1)
        known = _replay_inclusions(self.n, self.B, self.T, self.seed) if broken == "public-batches" else None
        per_chunk = self.n if known is None else self.rows // 2  # secret: distinct canary indices per grid
        out_in, out_out = [], []
        chunks = _chunks(runs, min(per_chunk, self.rows // 2))
        with tqdm(total=len(chunks) * self.T, desc=f"audit {self.name}", disable=not progress) as bar:
            for k in chunks:
                if known is None:
                    canary = torch.cat([torch.arange(k), torch.full((k,), -1)])
                else:
                    canary = torch.full((2 * k,), int(known.sum(0).argmax()))
                sign = torch.cat([torch.ones(k), torch.zeros(k)]).double()
                released, seeds, _ = self._run(canary, sign, m, self._sampler(broken), bar)
                s = torch.sign(self._directions(seeds)[:, 0])
                y = s.unsqueeze(1) * released / (self.C / self.B)                      # (T, 2k)
                if known is None:
                    llr = torch.logaddexp(torch.tensor(math.log1p(-self.q), dtype=y.dtype),
                                          math.log(self.q) + (y - 0.5) / m**2)
                else:
                    llr = known[:, int(canary[0])].unsqueeze(1) * (y - 0.5) / m**2
                score = llr.sum(0)
                out_in.append(score[:k])
                out_out.append(score[k:])
        return _numpy(out_in), _numpy(out_out)


def _replay_inclusions(n: int, B: int, T: int, seed: int) -> torch.Tensor:
    """(T, n) 0/1: which examples the seeded sampler's T batches hold, replayed as the adversary would."""
    sampler = PoissonSampler.for_testing(n, B, seed=seed)
    included = torch.zeros(T, n, dtype=torch.float64)
    for t in range(T):
        included[t, sampler.sample()] = 1.0
    return included


# --- the LM optimizer: dpnc.optim.DPZero on a tiny model, one run at a time ----------------------------


class DPZeroOptimizerPoisson(Mechanism):
    name = "dpzero-optimizer"
    summary = ("dpnc.optim.DPZero (the LM trainer's optimizer) on a tiny model — a linear classification head "
               "on 8 frozen features, float32 — with its own secret PoissonSampler, one optimizer per run, "
               "add/remove")
    canary = ("the canary's features are BIG·e₀ with label 1 and the per-example loss is the negative logit "
              "margin, so its loss is linear in the head's weights (its clipped difference ±C has a sign the "
              "adversary computes at the public initial weights from the public direction seed); every other "
              "example has zero features, loss 0; D′ drops the canary. public-batches: the canary sits at the "
              "index the replayed seeded sampler includes most often")
    statistic = DPZeroPoisson.statistic
    relation = "add/remove"
    subsampled = True
    n, B, T, features = 5000, 150, 10, 8
    C, lam, lr = 1.0, 1e-3, 0.01

    @property
    def q(self) -> float:
        return self.B / self.n

    def multiplier(self) -> float:
        return dz.calibrate_noise("pld", self.epsilon, self.delta, self.T, self.n, self.B)

    def _model(self) -> nn.Module:
        model = nn.Linear(self.features, 2, bias=False)
        with torch.no_grad():  # public initial weights, from the public seed (never torch's global generator)
            model.weight.copy_(torch.randn(model.weight.shape, generator=torch.Generator().manual_seed(self.seed)))
        return model.eval()

    def _data(self, canary: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        X, y = torch.zeros(self.n, self.features), torch.zeros(self.n, dtype=torch.long)
        if canary is not None:
            X[canary, 0], y[canary] = BIG, 1
        return X, y

    def _optimizer(self, model, multiplier, sampler, accountant):
        return DPZeroOptimizer(model.parameters(), lr=self.lr, clip=self.C, smoothing=self.lam,
                               noise_multiplier=multiplier, sampler=sampler, accountant=accountant,
                               noise=self.noise, seed=self.seed, model=model)

    def _run(self, template: nn.Module, data, multiplier: float, sampler, *, keep_weights: bool = False
             ) -> tuple[np.ndarray, Accountant, list]:
        """One run of T optimizer steps: the released scalars c_t (and the weights after each step if asked)."""
        X, y = data
        model = copy.deepcopy(template)
        accountant = Accountant(self.relation)
        opt = self._optimizer(model, multiplier, sampler, accountant)

        def closure(batch: torch.Tensor) -> torch.Tensor:
            logits = model(X[batch])
            mine = logits.gather(1, y[batch].unsqueeze(1)).squeeze(1)
            other = logits.gather(1, (1 - y[batch]).unsqueeze(1)).squeeze(1)
            return -(mine - other)                                 # per-example negative margin

        released, weights = np.empty(self.T), []
        for t in range(self.T):
            opt.step(closure)
            released[t] = float(opt.last_log.released)
            if keep_weights:
                weights.append(model.weight.detach().clone())
        return released, accountant, weights

    @torch.no_grad()
    def _canary_terms(self, template: nn.Module, canary: int) -> np.ndarray:
        """clip_C of the canary's difference along each replayed public direction (its loss is linear in θ)."""
        X, y = self._data(canary)
        model = copy.deepcopy(template)
        space = ModuleSpace(model.parameters())
        generator = torch.Generator().manual_seed(self.seed)  # the optimizer draws one seed per step from it
        terms = []
        def loss() -> torch.Tensor:  # the canary's negative margin, as the closure computes it
            logits = model(X[canary:canary + 1])
            return -(logits[:, y[canary]] - logits[:, 1 - y[canary]])

        for _ in range(self.T):
            seed = dz.public_seeds(generator, 1)[0]
            diff = two_point(space, loss, seed, self.lam)
            space.restore_()
            terms.append(float(clip_scalars(diff.a.double(), self.C)[0]))
        return np.array(terms)

    def _check_replay(self, template: nn.Module, released: np.ndarray, weights: list) -> None:
        """The adversary's replayed directions must be the ones the optimizer moved along (θ₁ − θ₀ = −lr·c₀·u₀)."""
        space = ModuleSpace(copy.deepcopy(template).parameters())
        seed = dz.public_seeds(torch.Generator().manual_seed(self.seed), 1)[0]
        u = space.direction(seed).reshape(template.weight.shape)
        step = (weights[0] - template.weight.detach()).double()
        expected = -self.lr * released[0] * u.double()
        if float((step - expected).norm()) > 1e-3 * float(expected.norm()) + 1e-6:
            raise RuntimeError("the audit's replay of the optimizer's public direction seeds does not match its "
                               "update; dpnc.optim changed how it draws seeds, and the audit must follow")

    def _claim_report(self) -> PrivacyReport:
        _, accountant, _ = self._run(self._model(), self._data(0), self.multiplier(), PoissonSampler(self.n, self.B))
        return accountant.report(self.delta)

    def scores(self, runs, broken=None, *, progress=False):
        self.check_broken(broken)
        m = self.multiplier() / (SIGMA_FACTOR if broken == "sigma" else 1)
        known = _replay_inclusions(self.n, self.B, self.T, self.seed) if broken == "public-batches" else None
        canary = 0 if known is None else int(known.sum(0).argmax())
        template = self._model()
        y_scale = self.C / self.B
        signs = np.sign(self._canary_terms(template, canary))
        data = {True: self._data(canary), False: self._data(None)}
        scores = {True: [], False: []}
        with tqdm(total=2 * runs, desc=f"audit {self.name}", disable=not progress) as bar:
            for i in range(runs):
                for present in (True, False):
                    sampler = (PoissonSampler.for_testing(self.n, self.B, seed=self.seed) if known is not None
                               else PoissonSampler(self.n, self.B))
                    released, _, weights = self._run(template, data[present], m, sampler, keep_weights=i == 0)
                    if i == 0 and present:
                        self._check_replay(template, released, weights)
                    y = signs * released / y_scale
                    if known is None:
                        llr = np.logaddexp(math.log1p(-self.q), math.log(self.q) + (y - 0.5) / m**2)
                    else:
                        llr = known[:, canary].numpy() * (y - 0.5) / m**2
                    scores[present].append(float(llr.sum()))
                    bar.update(1)
        return np.array(scores[True]), np.array(scores[False])

    def parameters(self) -> dict:
        return {**super().parameters(), "n": self.n, "B": self.B, "T": self.T, "C": self.C, "lam": self.lam,
                "lr": self.lr, "model": f"Linear({self.features}, 2, bias=False)",
                "noise_multiplier": self.multiplier()}


# --- tree oracles (Zhang–Tran–Cutkosky, Kornowski–Liu–Talwar): one period, one run at a time ----------


class _CanaryProblem(Problem):
    """f(x, z) = z·BIG·x₀ for z ∈ {+1, −1, 0}: one canary (z = ±1) among zero-loss examples.

    The declared Lipschitz constant L is *violated* by the canary: the oracles' clipping of every finite
    difference to what an L-Lipschitz f allows is what keeps the sensitivity, and the audit checks it.
    """

    name = "audit-canary"

    def loss(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return BIG * z.unsqueeze(1) * x[..., 0]


class _TreeOracle(Mechanism):
    """One period of a tree oracle queried at a fixed point w₀ (a legal query sequence: no move exceeds 2D).

    The canary sits in the term (anchor at leaf 1, or the first increment at leaf 2) that maximises
    participation × sensitivity²; the adversary learns the noiseless running sums on D and D′ by replaying
    the oracle with the public generator, recovers the node values from the prefix releases (NODE(t) is
    public) and scores with the Gaussian log-likelihood ratio in node space.
    """

    statistic = ("Σ_b ⟨ΔN_b, N_b − M̄_b⟩ in node space: N = A⁻¹Y recovers the i.i.d. node values from the Σ "
                 "prefix releases Y (A[t, b] = 1 for the nodes of NODE(t)), ΔN and M̄ the same map of the "
                 "replayed noiseless sums' difference and midpoint: the exact log-likelihood ratio (up to σ²)")
    relation = "replace-one"
    d: int = 2

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._cache: dict = {}

    @abstractmethod
    def _parameters(self, broken: str | None):
        """The oracle's parameters (σ divided by SIGMA_FACTOR for ``broken='sigma'``)."""

    @abstractmethod
    def _oracle(self, problem: Problem, p, accountant: Accountant):
        ...

    @abstractmethod
    def _canary_index(self) -> tuple[int, int]:
        """(data index of the canary, its leaf in the period)."""

    @property
    @abstractmethod
    def period(self) -> int:
        ...

    def _problem(self, sign: float, p) -> Problem:
        z = torch.zeros(p.samples, dtype=torch.float64)
        z[self._canary_index()[0]] = sign
        return _CanaryProblem((z,), self.d, 1.0)

    def _run(self, problem, p, accountant=None) -> tuple[torch.Tensor, torch.Tensor, Accountant]:
        """The Σ releases of one period at w₀ (Σ, d), and the noiseless running sums (the oracle's g)."""
        accountant = Accountant(self.relation) if accountant is None else accountant
        oracle = self._oracle(problem, p, accountant)
        w0 = torch.zeros(self.d, dtype=torch.float64)
        released, sums = [], []
        for t in range(1, self.period + 1):
            released.append(oracle(t, w0))
            sums.append(oracle.g.clone())
        return torch.stack(released), torch.stack(sums), accountant

    def _claim_report(self) -> PrivacyReport:
        p = self._parameters(None)
        return self._run(self._problem(1.0, p), p)[2].report(self.delta)

    def scores(self, runs, broken=None, *, progress=False):
        self.check_broken(broken)
        p = self._parameters(broken)
        problems = {True: self._problem(1.0, p), False: self._problem(-1.0, p)}
        means = {k: self._run(problem, p)[1] for k, problem in problems.items()}    # replay: noiseless sums
        A_inv = torch.linalg.inv(_node_matrix(self.period))
        shift = A_inv @ (means[True] - means[False])
        mid = A_inv @ (means[True] + means[False]) / 2
        scores = {True: [], False: []}
        with tqdm(total=2 * runs, desc=f"audit {self.name}", disable=not progress) as bar:
            for _ in range(runs):
                for present, problem in problems.items():
                    released = self._run(problem, p)[0]
                    scores[present].append(float((shift * (A_inv @ released - mid)).sum()))
                    bar.update(1)
        return np.array(scores[True]), np.array(scores[False])


def _node_matrix(period: int) -> torch.Tensor:
    """A[t−1, b−1] = 1 if the node with right end b is in NODE(t): releases = prefix sums + A·(node noise)."""
    A = torch.zeros(period, period, dtype=torch.float64)
    for t in range(1, period + 1):
        for _, b in node(t):
            A[t - 1, b - 1] = 1.0
    return A


class ZTCTree(_TreeOracle):
    name = "ztc-tree"
    summary = ("Zhang–Tran–Cutkosky's private variance-reduced oracle (Algorithms 4–5): "
               "zo_o2nc.VarianceReducedOracle, GRAD anchor on B1, DIFF increments on B2, tree noise, "
               "one period of T steps, replace-one")
    canary = ("the first anchor example has f = +BIG·x₀ on D and −BIG·x₀ on D′ (every other example f = 0); "
              "GRAD clips its difference to 2Lδ, so with m = 1 direction its term is ±dL·u and the anchor moves by "
              "s₁ = 2dL/B1 (= s₂ with B1 = T·B2/2), in all ⌊log₂T⌋ + 1 nodes of leaf 1")
    T, B1, B2, smoothing = 4, 2, 1, 0.1

    @property
    def period(self) -> int:
        return self.T

    def _parameters(self, broken):
        p = zo_o2nc.variance_reduced_parameters(d=self.d, L=1.0, delta=self.smoothing,
                                                rho=zo_o2nc.paper_rho(self.epsilon, self.delta), T=self.T, K=1,
                                                B1=self.B1, B2=self.B2, m=1)
        return dataclasses.replace(p, sigma=p.sigma / SIGMA_FACTOR) if broken == "sigma" else p

    def _oracle(self, problem, p, accountant):
        return zo_o2nc.VarianceReducedOracle(problem, p, noise=self.noise, accountant=accountant,
                                             generator=torch.Generator().manual_seed(self.seed))

    def _canary_index(self):
        return 0, 1

    def parameters(self):
        p = self._parameters(None)
        return {**super().parameters(), "d": self.d, "L": 1.0, "T": p.T, "B1": p.B1, "B2": p.B2, "m": p.m,
                "smoothing_delta": p.delta, "sigma": p.sigma,
                "sensitivity": max(zo_o2nc.sensitivities(self.d, 1.0, p.T, p.B1, p.B2))}


class KLTTree(_TreeOracle):
    name = "klt-tree"
    summary = ("Kornowski–Liu–Talwar's single-pass zeroth-order oracle (Algorithm 3, safe mode): "
               "klt.ZerothOrderOracle with per-example clipping and tree noise, parameters from "
               "klt.single_pass_parameters (Theorem 3.1), one period of Σ steps, replace-one")
    canary = ("the example of the term with the largest participation × sensitivity² (here the first anchor "
              "example) has f = +BIG·x₀ on D and −BIG·x₀ on D′, every other f = 0; its estimate is clipped to "
              "the safe-mode radius, so the term moves by exactly the recorded sensitivity")
    n_data, L, Phi, alpha = 20, 1.0, 0.1, 0.5

    def _parameters(self, broken):
        if broken not in self._cache:
            self._cache[broken] = self._compute_parameters(broken)
        return self._cache[broken]

    def _compute_parameters(self, broken):
        p = klt.single_pass_parameters("zeroth-order", n=self.n_data, d=self.d, L=self.L, Phi=self.Phi,
                                       alpha=self.alpha, epsilon=self.epsilon, dp_delta=self.delta, m=1)
        if broken == "sigma":
            p = dataclasses.replace(p, sigma_anchor=p.sigma_anchor / SIGMA_FACTOR,
                                    sigma_increment=p.sigma_increment / SIGMA_FACTOR)
        return p

    @property
    def period(self) -> int:
        return self._parameters(None).Sigma

    def _oracle(self, problem, p, accountant):
        return klt.ZerothOrderOracle(problem, p, noise=self.noise, accountant=accountant,
                                     generator=torch.Generator().manual_seed(self.seed))

    def _canary_index(self):
        p = self._parameters(None)
        anchor = leaf_participation(p.Sigma) * p.s_anchor**2
        increment = len(nodes_covering(2, p.Sigma)) * p.s_increment**2 if p.Sigma >= 2 else 0.0
        return (0, 1) if anchor >= increment else (p.B1, 2)

    def parameters(self):
        p = self._parameters(None)
        return {**super().parameters(), "n": self.n_data, "d": self.d, "L": self.L, "Phi": self.Phi,
                "alpha": self.alpha, "Sigma": p.Sigma, "B1": p.B1, "B2": p.B2, "m": p.m, "sigma": p.sigma_anchor,
                "s_anchor": p.s_anchor, "s_increment": p.s_increment, "canary_leaf": self._canary_index()[1]}


# --- KL-Spider's checkpoint (Menart et al., Algorithm 1) ---------------------------------------------


class _CanaryObjective:
    """F(w) = (1/n) Σ f(w; x_i) with ∇f = sign·BIG·e₀ for the canary (example 0) and 0 for every other example.

    Declares L0 = 1, which the canary violates: the query's per-example clipping keeps the sensitivity.
    """

    name = "audit-canary"

    def __init__(self, n: int, d: int, sign: float) -> None:
        self.n, self.dim, self.sign = n, d, sign

    def example_gradients(self, w: torch.Tensor) -> torch.Tensor:
        g = torch.zeros(self.n, self.dim, dtype=torch.float64)
        g[0, 0] = self.sign * BIG
        return g

    def gradient(self, w: torch.Tensor) -> torch.Tensor:
        return self.example_gradients(w).mean(0)


class KLSpiderCheckpoint(Mechanism):
    name = "kl-spider-checkpoint"
    summary = ("KL-Spider's checkpoint (Menart et al., Algorithm 1, first round): the full-batch gradient query "
               "of kl.PrivateGradients (per-example clipping to L0) released with the first round's σ̂ of "
               "kl.spider_schedule, replace-one; all runs are rows of one release call")
    canary = ("example 0 has gradient +BIG·e₀ on D and −BIG·e₀ on D′ (every other example 0), clipped to ±L0·e₀: "
              "the mean moves by the full 2L0/n")
    statistic = "⟨μ_D − μ_D′, y⟩ for the released y and the (public, deterministic) noiseless means μ: the LLR"
    relation = "replace-one"
    n, d, L0, L1, gamma, kappa, beta = 100, 2, 1.0, 1.0, 1.0, 1.5, 0.05
    clip = True

    def _schedule(self):
        # ρ chosen so that the checkpoint's own budget gives about the target ε (a first round spends ρ/(2K) on it)
        rho = self._rho()
        return spider_schedule(n=self.n, d=self.d, rho=rho, beta=self.beta, gamma=self.gamma, kappa=self.kappa,
                               L0=self.L0, L1=self.L1, F0=(self.gamma * self.L0) ** self.kappa,
                               relation=self.relation)

    def _rho(self) -> float:
        from dpnc.privacy.budget import epsilon_to_rho

        target = epsilon_to_rho(self.epsilon, self.delta)
        rho = target
        for _ in range(50):  # fixed point: ρ_total such that the checkpoint's share is the target's ρ
            sched = spider_schedule(n=self.n, d=self.d, rho=rho, beta=self.beta, gamma=self.gamma, kappa=self.kappa,
                                    L0=self.L0, L1=self.L1, F0=(self.gamma * self.L0) ** self.kappa,
                                    relation=self.relation)
            share = 1 / (2 * sched.K) if sched.rounds[0].T > 1 else 1 / sched.K
            new = target / share
            if abs(new - rho) <= 1e-12 * rho:
                break
            rho = new
        return rho

    def _release(self, sign: float, runs: int, sigma: float, accountant: Accountant):
        queries = PrivateGradients(_CanaryObjective(self.n, self.d, sign), noise=self.noise, accountant=accountant,
                                   clip=self.clip)
        mean = queries.gradient(torch.zeros(self.d, dtype=torch.float64), self.L0)
        return queries.release(mean.expand(runs, self.d).clone(), self.L0, sigma), mean

    def _claim_report(self) -> PrivacyReport:
        accountant = Accountant(self.relation)
        self._release(1.0, 1, self._schedule().rounds[0].sigma_hat, accountant)
        return accountant.report(self.delta)

    def scores(self, runs, broken=None, *, progress=False):
        self.check_broken(broken)
        sigma = self._schedule().rounds[0].sigma_hat / (SIGMA_FACTOR if broken == "sigma" else 1)
        released, means = {}, {}
        for present, sign in ((True, 1.0), (False, -1.0)):
            released[present], means[present] = self._release(sign, runs, sigma, Accountant(self.relation))
        shift, mid = means[True] - means[False], (means[True] + means[False]) / 2
        return ((released[True] - mid) @ shift).numpy(), ((released[False] - mid) @ shift).numpy()

    def parameters(self):
        sched = self._schedule()
        return {**super().parameters(), "n": self.n, "d": self.d, "L0": self.L0, "L1": self.L1, "gamma": self.gamma,
                "kappa": self.kappa, "rho_total": self._rho(), "rounds": sched.K,
                "sigma_hat": sched.rounds[0].sigma_hat, "clip": self.clip}


# --- registry ------------------------------------------------------------------------------------------


MECHANISMS: dict[str, type[Mechanism]] = {m.name: m for m in (
    DPZeroFullBatch, DPZeroPoisson, DPGD0thFullBatch, ZTCTree, KLTTree, KLSpiderCheckpoint, DPZeroOptimizerPoisson)}


def _chunks(total: int, size: int) -> list[int]:
    return [min(size, total - start) for start in range(0, total, size)]


def _numpy(parts: list[torch.Tensor]) -> np.ndarray:
    return torch.cat(parts).numpy()

