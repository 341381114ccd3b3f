"""The audited tree oracles (Zhang–Tran–Cutkosky, Kornowski–Liu–Talwar) and KL-Spider's checkpoint.

Each runs the library's own oracle object or query (the real estimators, clipping, tree mechanism
and ledger); see docs/audit.md ("What is run")."""

from __future__ import annotations

import dataclasses
import math
from abc import abstractmethod
from typing import ClassVar

import numpy as np
import torch
from tqdm.auto import tqdm

from dpnc.algorithms import klt, ztc
from dpnc.algorithms.base import Setting
from dpnc.algorithms.klt import KornowskiLiuTalwar
from dpnc.algorithms.menart import PrivateGradients, spider_schedule
from dpnc.algorithms.ztc import ZhangTranCutkosky
from dpnc.audit.base import BIG, Mechanism, ledger_mu, ledger_sensitivity
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.budget import Budget, epsilon_to_rho
from dpnc.privacy.tree import leaf_participation, node, nodes_covering
from dpnc.problems.base import Constants, Problem


class _CanaryProblem(Problem):
    """f(x, z) = z·BIG·x₀ for z ∈ {+1, −1, 0}: one canary (z = ±1) among zero-loss examples.

    The declared Lipschitz constant (1) is *violated* by the canary: the oracles' clipping of every
    finite difference to what an L-Lipschitz f allows is what keeps the sensitivity, and the audit
    checks it."""

    name = "audit-canary"

    def loss(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return BIG * z.unsqueeze(1) * x[..., 0]


def node_matrix(period: int) -> torch.Tensor:
    """A[t−1, b−1] = 1 if the node with right end b is in NODE(t): the Σ releases are prefix sums +
    A·(node noise)."""
    A = torch.zeros(period, period, dtype=torch.float64)
    for t in range(1, period + 1):
        for _, b in node(t):
            A[t - 1, b - 1] = 1.0
    return A


class _TreeOracle(Mechanism):
    """One period of a tree oracle at w₀; the canary in the term of largest participation ×
    sensitivity².

    Each run is one period of the library's own oracle object (the real estimators, clipping,
    :class:`~dpnc.privacy.tree.TreeMechanism` and ledger), queried at the fixed point w₀: a legal
    query sequence (no move exceeds 2D), and the adversary's choice.

    The adversary learns the noiseless running sums on D and D′ by replaying the oracle with the
    public generator (reading the oracle's running sum g of a replay run: what anyone with the
    public seed computes), recovers the i.i.d. node values from the prefix releases (NODE(t) is
    public) and scores with the Gaussian log-likelihood ratio in node space."""

    statistics = {
        "llr": (
            "Σ_b ⟨ΔN_b, N_b − M̄_b⟩ in node space: N = A⁻¹Y recovers the i.i.d. node values from the Σ prefix "
            "releases Y (A[t, b] = 1 for the nodes of NODE(t)), ΔN and M̄ are the same map of the replayed "
            "noiseless sums' difference and midpoint: the exact log-likelihood ratio (up to σ²)"
        ),
        "max": "max_b |⟨ΔN_b, N_b − M̄_b⟩|/‖ΔN_b‖ over the nodes the canary moves: the largest node release",
    }
    relation = "replace-one"
    d: ClassVar[int] = 2

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._cache: dict = {}

    def parameters_for(self, broken: str | None):
        """The oracle's parameters (σ divided by SIGMA_FACTOR for ``broken='sigma'``), computed
        once."""
        if broken not in self._cache:
            self._cache[broken] = self._parameters(broken)
        return self._cache[broken]

    @abstractmethod
    def _parameters(self, broken: str | None): ...

    @abstractmethod
    def _oracle(self, problem: Problem, p, accountant: Accountant): ...

    @abstractmethod
    def canary_index(self) -> tuple[int, int]:
        """(data index of the canary, its leaf in the period)."""

    @abstractmethod
    def _sigma(self, p) -> float: ...

    @property
    @abstractmethod
    def period(self) -> int: ...

    def _problem(self, sign: float, p) -> Problem:
        z = torch.zeros(p.samples, dtype=torch.float64)
        z[self.canary_index()[0]] = sign
        return _CanaryProblem((z,), self.d, 1.0)

    def _run(self, problem, p) -> tuple[torch.Tensor, torch.Tensor, Accountant]:
        """The Σ releases of one period at w₀ (Σ, d), the noiseless running sums (the oracle's g),
        the ledger."""
        accountant = Accountant(self.relation)
        oracle = self._oracle(problem, p, accountant)
        w0 = torch.zeros(self.d, dtype=torch.float64)
        released, sums = [], []
        for t in range(1, self.period + 1):
            released.append(oracle(t, w0))
            sums.append(oracle.g.clone())
        return torch.stack(released), torch.stack(sums), accountant

    def _node_shift(self, p) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """A⁻¹, the node-space shift A⁻¹(M_D − M_D′), its midpoint, and the two problems (replay of
        D and D′)."""
        problems = {True: self._problem(1.0, p), False: self._problem(-1.0, p)}
        means = {k: self._run(problem, p)[1] for k, problem in problems.items()}
        A_inv = torch.linalg.inv(node_matrix(self.period))
        return (
            A_inv,
            A_inv @ (means[True] - means[False]),
            A_inv @ (means[True] + means[False]) / 2,
            problems,
        )

    def claim_accountant(self) -> Accountant:
        p = self.parameters_for(None)
        return self._run(self._problem(1.0, p), p)[2]

    def scores(self, runs, broken=None, *, progress=False):
        self.check_broken(broken)
        p = self.parameters_for(broken)
        A_inv, shift, mid, problems = self._node_shift(p)
        norms = shift.norm(dim=1)
        moved = norms > 1e-12 * float(norms.max())
        scores = {key: {True: [], False: []} for key in self.statistics}
        with tqdm(total=2 * runs, desc=f"audit {self.name}", disable=not progress) as bar:
            for _ in range(runs):
                for present, problem in problems.items():
                    per_node = (shift * (A_inv @ self._run(problem, p)[0] - mid)).sum(1)
                    scores["llr"][present].append(float(per_node.sum()))
                    scores["max"][present].append(
                        float((per_node[moved] / norms[moved]).abs().max())
                    )
                    bar.update(1)
        return {key: (np.array(v[True]), np.array(v[False])) for key, v in scores.items()}

    def canary_effect(self) -> dict:
        p = self.parameters_for(None)
        _, shift, _, _ = self._node_shift(p)
        claim = self.claim_accountant()
        return {
            "shift": float(shift.norm(dim=1).max()),
            "sensitivity": ledger_sensitivity(claim),
            "mu": float(shift.norm()) / self._sigma(p),
            "claimed_mu": ledger_mu(claim),
        }


class ZTCTree(_TreeOracle):
    name = "ztc-tree"
    summary = (
        "Zhang–Tran–Cutkosky's private variance-reduced oracle (Algorithms 4–5): ztc.VarianceReducedOracle, "
        "GRAD anchor on B1, DIFF increments on B2, tree noise, one period of T steps, replace-one"
    )
    canary = (
        "the first anchor example has f = +BIG·x₀ on D and −BIG·x₀ on D′ (every other example f = 0); GRAD "
        "clips its difference to 2Lδ, so with m = 1 direction its term is ±dL·u and the anchor moves by "
        "s₁ = 2dL/B1 (= s₂ with B1 = T·B2/2) in all ⌊log₂T⌋ + 1 nodes of leaf 1"
    )
    T, B1, B2, smoothing = 4, 2, 1, 0.1

    @property
    def period(self) -> int:
        return self.T

    def _parameters(self, broken):
        p = ZhangTranCutkosky.variance_reduced(
            d=self.d,
            L=1.0,
            smoothing=self.smoothing,
            rho=ztc.paper_rho(self.epsilon, self.delta),
            period=self.T,
            epochs=1,
            B1=self.B1,
            B2=self.B2,
            m=1,
        )
        return dataclasses.replace(p, sigma=p.sigma / self.sigma_factor) if broken == "sigma" else p

    def _sigma(self, p) -> float:
        return p.sigma

    def _oracle(self, problem, p, accountant):
        return ztc.VarianceReducedOracle(
            problem,
            p,
            noise=self.noise,
            accountant=accountant,
            generator=torch.Generator().manual_seed(self.seed),
        )

    def canary_index(self):
        return 0, 1

    def parameters(self):
        p = self.parameters_for(None)
        return {
            **super().parameters(),
            "d": self.d,
            "L": 1.0,
            "T": p.period,
            "B1": p.B1,
            "B2": p.B2,
            "m": p.m,
            "smoothing_delta": p.smoothing,
            "sigma": p.sigma,
            "sensitivity": max(ztc.sensitivities(self.d, 1.0, p.period, p.B1, p.B2)),
        }


class KLTTree(_TreeOracle):
    name = "klt-tree"
    summary = (
        "Kornowski–Liu–Talwar's single-pass zeroth-order oracle (Algorithm 3, safe mode): klt.ZerothOrderOracle "
        "with per-example clipping and tree noise, parameters from KornowskiLiuTalwar.from_theory (Thm 3.1), "
        "one period of Σ steps, replace-one"
    )
    canary = (
        "the example of the term with the largest participation × sensitivity² (here the first anchor example, "
        "as s_a ≥ s_v) has f = +BIG·x₀ on D and −BIG·x₀ on D′, every other f = 0; its estimate is clipped to the "
        "safe-mode radius, so the term moves by exactly the recorded sensitivity"
    )
    n_data, L, Phi, alpha = 20, 1.0, 0.1, 0.5

    def _parameters(self, broken):
        p = KornowskiLiuTalwar.from_theory(
            Setting(Constants(L0=self.L), self.n_data, self.d, gap=self.Phi),
            Budget(self.epsilon, self.delta),
            smoothing=self.alpha,
            oracle="zeroth-order",
            m=1,
        )
        if broken == "sigma":
            p = dataclasses.replace(
                p,
                sigma_anchor=p.sigma_anchor / self.sigma_factor,
                sigma_increment=p.sigma_increment / self.sigma_factor,
            )
        return p

    def _sigma(self, p) -> float:
        return p.sigma_anchor

    @property
    def period(self) -> int:
        return self.parameters_for(None).period

    def _oracle(self, problem, p, accountant):
        return klt.ZerothOrderOracle(
            problem,
            p,
            noise=self.noise,
            accountant=accountant,
            generator=torch.Generator().manual_seed(self.seed),
        )

    def canary_index(self):
        p = self.parameters_for(None)
        anchor = leaf_participation(p.period) * p.s_anchor**2
        increment = len(nodes_covering(2, p.period)) * p.s_increment**2 if p.period >= 2 else 0.0
        return (0, 1) if anchor >= increment else (p.B1, 2)

    def parameters(self):
        p = self.parameters_for(None)
        return {
            **super().parameters(),
            "n": self.n_data,
            "d": self.d,
            "L": self.L,
            "Phi": self.Phi,
            "alpha": self.alpha,
            "Sigma": p.period,
            "B1": p.B1,
            "B2": p.B2,
            "m": p.m,
            "sigma": p.sigma_anchor,
            "s_anchor": p.s_anchor,
            "s_increment": p.s_increment,
            "canary_leaf": self.canary_index()[1],
        }


class _CanaryObjective:
    """F(w) = (1/n) Σ f(w; x_i) with ∇f = sign·BIG·e₀ for the canary (example 0) and 0 for every
    other example.

    Declares L0 = 1, which the canary violates: the query's per-example clipping keeps the
    sensitivity."""

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
    """The real :class:`~dpnc.algorithms.menart.PrivateGradients` query and release with the σ̂ of
    the real schedule; the runs are the rows of one release call (the query is deterministic; the
    release adds independent noise to every row)."""

    name = "kl-spider-checkpoint"
    summary = (
        "KL-Spider's checkpoint (Menart et al., Algorithm 1, first round) as kl_spider issues it: the "
        "full-batch gradient query of kl.PrivateGradients (per-example clipping to L0, the default) released "
        "with the first round's σ̂ of kl.spider_schedule, replace-one; all runs are rows of one release call"
    )
    canary = (
        "example 0 has gradient +BIG·e₀ on D and −BIG·e₀ on D′ (every other example 0), clipped to ±L0·e₀: "
        "the mean moves by the full 2L0/n"
    )
    statistics = {
        "llr": "⟨μ_D − μ_D′, y − (μ_D + μ_D′)/2⟩ for the release y and the deterministic noiseless means μ: "
        "the log-likelihood ratio of the one Gaussian release (the most powerful test at every σ)"
    }
    relation = "replace-one"
    n, d, L0, L1, gamma, kappa, beta = 100, 2, 1.0, 1.0, 1.0, 1.5, 0.05

    def _schedule(self, rho: float):
        return spider_schedule(
            n=self.n,
            d=self.d,
            rho=rho,
            beta=self.beta,
            gamma=self.gamma,
            kappa=self.kappa,
            L0=self.L0,
            L1=self.L1,
            F0=(self.gamma * self.L0) ** self.kappa,
            relation=self.relation,
        )

    def rho(self) -> float:
        """The run's total ρ, set so that the first checkpoint's share (ρ/(2K), or ρ/K without
        differences) is the zCDP budget of the target (ε, δ) (K depends on ρ: a fixed point)."""
        target = epsilon_to_rho(self.epsilon, self.delta)
        rho = target
        for _ in range(100):
            sched = self._schedule(rho)
            share = 1 / (2 * sched.K) if sched.rounds[0].T > 1 else 1 / sched.K
            rho, previous = target / share, rho
            if math.isclose(rho, previous, rel_tol=1e-12):
                break
        return rho

    def sigma_hat(self) -> float:
        return self._schedule(self.rho()).rounds[0].sigma_hat

    def _release(self, sign: float, runs: int, sigma: float, accountant: Accountant):
        queries = PrivateGradients(
            _CanaryObjective(self.n, self.d, sign), noise=self.noise, accountant=accountant
        )
        total = queries.gradient_sum(torch.zeros(self.d, dtype=torch.float64), self.L0)
        return queries.release(total.expand(runs, self.d).clone(), self.L0, sigma), total / self.n

    def claim_accountant(self) -> Accountant:
        accountant = Accountant(self.relation)
        self._release(1.0, 1, self.sigma_hat(), accountant)
        return accountant

    def scores(self, runs, broken=None, *, progress=False):
        self.check_broken(broken)
        sigma = self.sigma_hat() / self.noise_factor(broken)
        (y_in, mean_in), (y_out, mean_out) = (
            self._release(s, runs, sigma, Accountant(self.relation)) for s in (1.0, -1.0)
        )
        shift, mid = mean_in - mean_out, (mean_in + mean_out) / 2
        return {"llr": (((y_in - mid) @ shift).numpy(), ((y_out - mid) @ shift).numpy())}

    def canary_effect(self) -> dict:
        claim = self.claim_accountant()
        (_, mean_in), (_, mean_out) = (
            self._release(s, 1, self.sigma_hat(), Accountant(self.relation)) for s in (1.0, -1.0)
        )
        shift = float((mean_in - mean_out).norm())
        return {
            "shift": shift,
            "sensitivity": ledger_sensitivity(claim),
            "mu": shift / self.sigma_hat(),
            "claimed_mu": ledger_mu(claim),
        }

    def parameters(self):
        sched = self._schedule(self.rho())
        return {
            **super().parameters(),
            "n": self.n,
            "d": self.d,
            "L0": self.L0,
            "L1": self.L1,
            "gamma": self.gamma,
            "kappa": self.kappa,
            "rho_total": self.rho(),
            "rounds": sched.K,
            "sigma_hat": sched.rounds[0].sigma_hat,
            "clips": PrivateGradients(
                _CanaryObjective(self.n, self.d, 1.0),
                noise=self.noise,
                accountant=Accountant(self.relation),
            ).clips,
        }
