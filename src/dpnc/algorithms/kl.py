"""Menart, Ullah, Arora, Bassily, Guzmán, "Differentially private non-convex optimization under the KL condition
with optimal rates" (spec seed004).

Four algorithms for F(w) = (1/n) Σ_i f(w; x_i) under the (γ, κ)-Kurdyka–Łojasiewicz condition
F(w) − F* ≤ γ^κ ‖∇F(w)‖^κ, all ρ-zCDP through the :class:`~dpnc.privacy.accountant.Accountant`:

* :func:`kl_spider` (Algorithm 1, Theorem 1; κ ∈ [1, 2], smooth): rounds that open with a noisy checkpoint
  gradient and follow it with variance-reduced noisy differences (SPIDER), normalised steps of a fixed
  length r_k, and an adaptive stop once the estimate is small.
* :func:`proximal_point` (Algorithm 2, Theorem 2; κ ≥ 2, weakly convex, not smooth): T private proximal
  steps, each solving F + L̃1‖· − w_{t−1}‖² with a pluggable inner solver, by default
  :func:`noisy_projected_gd` (Algorithm 4, Theorem 9).
* :func:`adaptive_gd` (Algorithm 3, Theorem 4; γ and κ unknown): gradient descent whose noise is
  proportional to a noisy gradient norm, halted by a privacy filter (fully adaptive composition).
  ``select=True`` adds Algorithm 3+ (Theorem 5): an iterate chosen by the exponential mechanism on
  −‖∇F(w_t)‖ (:func:`select_stationary`).

Privacy modes (spec §1.2). ``"calibrated"`` (default): every release's σ is set by
:func:`~dpnc.privacy.calibrate.zcdp_gaussian_sigma` from its true sensitivity under the chosen neighbouring
relation and its share of ρ, so the run spends exactly ρ (Alg 1: ρ/2 on checkpoints, ρ/2 on differences;
Alg 3: at most ρ by the strict filter). ``"paper"``: the printed noise levels; the accountant then reports
their true cost (Alg 1 spends up to 2.125ρ under replace-one, Lemma 8 claims ρ). Corrections taken from the
spec ([R]): ceil'd K and T_k, the loop bound t < T_k, restart from the last iterate, Cf = 48 when calibrated,
scalar norm noise and the safe charge in Alg 3, the exponent (2−κ)/κ in T_k.

Guards (on by default; the paper has neither, it assumes the constants hold wherever the iterates go). The
ledger charges every query for a sensitivity computed from the declared L0 (and L1), so those bounds must hold
for every example at every query point, whatever the data:

* ``clip=True`` clips per-example gradients to L0 and KL-Spider's per-example differences to L1·r_k ≥
  L1‖w_{t+1} − w_t‖ (non-finite ones zeroed first): the sensitivity then holds for any data. A no-op under the
  assumptions.
* ``project=True`` keeps every iterate (and every inner iterate of Algorithm 4) in the objective's region
  B_radius(center), where its constants are declared; w0 must lie there.

An objective without per-example gradients (data-free, sufficient statistics) cannot be clipped; its bounds
then rest on its own constants, declared for every example of its data domain on its region, which is why the
iterates are projected there. A result says which holds in ``stats["sensitivity"]``: ``"clipped"``,
``"declared"`` (no per-example gradients; projected onto the region, constants no smaller than the objective's)
or ``"not guaranteed"`` (``clip=False``, or neither guard applies); in the last case its report says so and
is marked not private. Audited in ``tests/algorithms/test_kl_privacy.py`` against adversarial data.

Objectives (``dpnc.problems.kl``) give ``n``, ``dim``, ``gradient(w)`` (the full-batch mean) and optionally
``example_gradients(w)``, their region (``center``, ``radius``) and their constants (``L0``, ``L1``,
``weak_convexity``, ``gamma``, ``kappa``), which every function here takes as defaults; explicit arguments
override them. All of them are public inputs: the schedules and noise levels are functions of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from dpnc.clipping import clip_vectors, zero_nonfinite_rows
from dpnc.privacy.accountant import Accountant, PrivacyReport
from dpnc.privacy.budget import check_rho
from dpnc.privacy.calibrate import zcdp_gaussian_sigma
from dpnc.privacy.mechanisms import exponential_mechanism, gaussian_mechanism
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.releases import ExponentialMechanism, Gaussian, Relation, ZCDPMechanism, mean_sensitivity

MODES = ("calibrated", "paper")
CLIPPED, DECLARED, NOT_GUARANTEED = "clipped", "declared", "not guaranteed"  # stats["sensitivity"]


@dataclass(frozen=True)
class Constants:
    """The analysis' numerical constants (spec §2, §6.11), overridable for practice; theory uses the defaults.

    Attributes:
        descent: 64 in c = 1 + F0^a/(64γ²L1) and K (Lemma 9's descent per step is Φ̂^{2/κ}/(64γ²L1)).
        step: 4 in the step length r_k = Φ̂^{1/κ}/(4γL1).
        stop: 7/8 in Alg 1's stopping threshold (7/8γ)·Φ̂^{1/κ}.
        floor: Cf in Φfloor; None means 48 when calibrated (so Lemma 2 holds with ceil'd T_k) and the
            paper's 32 in paper mode.
        prox: 32 in Alg 2's T = ⌈(1 + 32γ²L̃1F0^{(κ−2)/κ})·bracket⌉.
    """

    descent: float = 64.0
    step: float = 4.0
    stop: float = 7 / 8
    floor: float | None = None
    prox: float = 32.0

    def floor_constant(self, mode: str) -> float:
        if self.floor is not None:
            return self.floor
        return 48.0 if mode == "calibrated" else 32.0


@dataclass
class Result:
    """A run: the output, every iterate, the privacy ledger and the schedule facts.

    Attributes:
        algorithm: which algorithm ran.
        w: the output point.
        iterates: every iterate w_0, w_1, … (rows), including the ones not released.
        accountant: the ledger of every release (zCDP; ``rho`` answers what was spent).
        rho: the zCDP budget asked for.
        mode: ``"calibrated"`` or ``"paper"``.
        stats: the algorithm's schedule and counters (rounds, steps, noise levels, …).
    """

    algorithm: str
    w: torch.Tensor
    iterates: torch.Tensor
    accountant: Accountant
    rho: float
    mode: str
    stats: dict = field(default_factory=dict)

    @property
    def rho_spent(self) -> float:
        return self.accountant.rho()

    @property
    def private(self) -> bool:
        """Secret noise, and a sensitivity that the guards guarantee (``stats["sensitivity"]``)."""
        return self.accountant.secret and self.stats.get("sensitivity") != NOT_GUARANTEED

    def report(self, delta: float) -> PrivacyReport:
        """ρ and (ε, δ) by every accountant that applies, with the run's own privacy notes; marked not private
        when the sensitivity the ledger assumes is not guaranteed."""
        report = self.accountant.report(delta)
        report.notes.extend(self.stats.get("privacy_notes", ()))
        report.private = report.private and self.private
        return report


# --- private queries: the only place where data meet noise --------------------------------------------


class PrivateGradients:
    """Noisy full-batch gradient queries on an objective, every release recorded in ``accountant``.

    A query's sensitivity is :func:`~dpnc.privacy.releases.mean_sensitivity` of its per-example bound
    (replace-one 2G/n, add/remove G/n). With ``clip`` and an objective that gives per-example gradients, the
    per-example vectors are clipped to that bound (non-finite ones zeroed first), so the bound holds whatever the
    data (``clips`` is True). Otherwise the bound rests on the objective's declared constants, which hold only on
    its region: given a ``region``, every query point must lie in it, and a query outside raises (the algorithms
    project their iterates there, so only a faulty inner solver can trip this; refusing is better than a release
    whose sensitivity is unbounded).
    """

    def __init__(self, objective, *, noise: NoiseSource, accountant: Accountant, clip: bool = True,
                 region: Region | None = None) -> None:
        self.objective, self.noise, self.accountant, self.region = objective, noise, accountant, region
        self.clips = bool(clip) and objective.example_gradients(_zeros(objective)) is not None
        self.n = int(objective.n)
        self.nonfinite = 0
        self.queries = 0

    def sensitivity(self, bound: float) -> float:
        return mean_sensitivity(bound, self.n, self.accountant.relation)

    def gradient(self, w: torch.Tensor, bound: float) -> torch.Tensor:
        """∇F(w) (no noise), per-example clipped to ``bound`` when clipping."""
        self._check(w)
        return self._mean(lambda: self.objective.example_gradients(w), lambda: self.objective.gradient(w), bound)

    def difference(self, w_new: torch.Tensor, w: torch.Tensor, bound: float) -> torch.Tensor:
        """∇F(w_new) − ∇F(w) (no noise), per-example differences clipped to ``bound`` when clipping."""
        self._check(w_new)
        self._check(w)
        f = self.objective
        return self._mean(lambda: f.example_gradients(w_new) - f.example_gradients(w),
                          lambda: f.gradient(w_new) - f.gradient(w), bound)

    def release(self, value: torch.Tensor | float, bound: float, sigma: float, *,
                record: bool = True) -> torch.Tensor | float:
        """value + N(0, σ²I) for a query of per-example bound ``bound``; recorded unless ``record=False``
        (the caller then accounts for it otherwise, e.g. by a privacy filter)."""
        noisy, release = gaussian_mechanism(value, Gaussian(self.sensitivity(bound), sigma), self.noise)
        if record:
            self.accountant.record(release)
        self.queries += 1
        return noisy

    def charge(self, bound: float, sigma: float, count: int) -> None:
        """Record ``count`` releases that were scheduled but not issued, because a data-dependent stopping rule
        skipped them: the stopping time is itself a function of the full run's outputs, so the guarantee is the
        full schedule's and skipping saves nothing."""
        self.accountant.record(Gaussian(self.sensitivity(bound), sigma, secret=self.noise.secret), count)

    def noise_for(self, count: int, shape: tuple[int, ...], bound: float, sigma: float) -> torch.Tensor:
        """The noise of ``count`` future releases of a query of per-example bound ``bound``, drawn and recorded
        at once (``count`` rows); adding row s to the s-th query value is that query's Gaussian release.

        For long loops of equal releases (Algorithm 4), where one draw and one ledger entry save the per-step
        overhead; the releases are recorded now, so an early exit would only over-count.
        """
        zeros = torch.zeros((count, *shape), dtype=torch.float64)
        noise, release = gaussian_mechanism(zeros, Gaussian(self.sensitivity(bound), sigma), self.noise)
        self.accountant.record(release, count)
        self.queries += count
        return noise

    def _check(self, w: torch.Tensor) -> None:
        if not self.clips and self.region is not None and not self.region.contains(w):
            raise RuntimeError(f"a query at distance {self.region.distance(w):.6g} from the region's centre "
                               f"(radius {self.region.radius:.6g}), where the declared bounds need not hold: "
                               "an inner solver must keep its iterates in the region it is given")

    def _mean(self, per_example, full, bound: float) -> torch.Tensor:
        if self.clips:
            g, bad = zero_nonfinite_rows(per_example())
            self.nonfinite += int(bad.sum())
            return clip_vectors(g, bound)[0].mean(0)
        mean = full()
        if not bool(torch.isfinite(mean).all()):  # only reachable when the assumptions fail; counted
            self.nonfinite += 1
            mean = torch.zeros_like(mean)
        return mean


@dataclass(frozen=True)
class Region:
    """The ball B_radius(center) where an objective declares its constants; iterates are projected onto it."""

    center: torch.Tensor
    radius: float

    @classmethod
    def of(cls, objective) -> Region:
        center, radius = getattr(objective, "center", None), getattr(objective, "radius", None)
        if center is None or radius is None:
            raise ValueError(f"project must be False for an objective without a region (center, radius), where "
                             f"its constants hold; got project=True for {getattr(objective, 'name', objective)!r}")
        return cls(torch.as_tensor(center, dtype=torch.float64), float(radius))

    def distance(self, w: torch.Tensor) -> float:
        return float(torch.linalg.vector_norm(w - self.center))

    def contains(self, w: torch.Tensor) -> bool:
        return self.distance(w) <= self.radius * (1 + 1e-9)

    def project(self, w: torch.Tensor) -> torch.Tensor:
        return _project_ball(w, self.center, self.radius)


def _project_ball(p: torch.Tensor, c: torch.Tensor, r: float) -> torch.Tensor:
    offset = p - c
    distance = float(torch.linalg.vector_norm(offset))
    return p if distance <= r else c + offset * (r / distance)


def project_two_balls(p: torch.Tensor, c1: torch.Tensor, r1: float, c2: torch.Tensor, r2: float) -> torch.Tensor:
    """The Euclidean projection of p onto B_r1(c1) ∩ B_r2(c2), assumed non-empty (exact, in closed form).

    If the projection onto one ball lies in the other, it is the answer (it is optimal for a superset).
    Otherwise the answer lies on both spheres (by the KKT conditions: on one sphere only, strictly inside the
    other ball, it would be that ball's projection), i.e. on their intersection, the (d−2)-sphere of centre
    m = c1 + t·e and radius h = √(r1² − t²) in the plane ⟂ e = (c2 − c1)/D, t = (D² + r1² − r2²)/(2D): its
    nearest point to p is m + h·v/‖v‖, v the part of p − m orthogonal to e.
    """
    for (ca, ra), (cb, rb) in (((c1, r1), (c2, r2)), ((c2, r2), (c1, r1))):
        x = _project_ball(p, ca, ra)
        if float(torch.linalg.vector_norm(x - cb)) <= rb * (1 + 1e-12):
            return x
    e = c2 - c1
    D = float(torch.linalg.vector_norm(e))
    e = e / D
    t = (D * D + r1 * r1 - r2 * r2) / (2 * D)
    m = c1 + t * e
    h = math.sqrt(max(r1 * r1 - t * t, 0.0))
    v = (p - m) - ((p - m) @ e) * e
    norm = float(torch.linalg.vector_norm(v))
    if norm == 0:  # p on the axis: every point of the rim is nearest; take one
        v = torch.zeros_like(e)
        v[int(torch.argmin(e.abs()))] = 1.0
        v = v - (v @ e) * e
        norm = float(torch.linalg.vector_norm(v))
        if norm == 0:  # d = 1: the rim is the point m
            return m
    return m + (h / norm) * v


def _zeros(objective) -> torch.Tensor:
    return torch.zeros(objective.dim, dtype=torch.float64)


@dataclass(frozen=True)
class _Setting:
    """The constants of a run, resolved from the arguments and the objective, validated."""

    n: int
    d: int
    rho: float
    beta: float
    w0: torch.Tensor
    L0: float
    mode: str
    clip: bool
    region: Region | None


def _constant(objective, name: str, value, *, required: bool = True):
    value = getattr(objective, name, None) if value is None else value
    if value is None:
        if required:
            raise ValueError(f"{name} is needed: pass {name}=… or use an objective that states it")
        return None
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return float(value)


def _setting(objective, rho, beta, w0, L0, mode, relation, noise, accountant, clip, project):
    rho = check_rho(rho)
    if rho == 0:
        raise ValueError("rho must be > 0")
    if not (isinstance(beta, (int, float)) and 0 < beta < 1):
        raise ValueError(f"beta (the failure probability) must be in (0, 1); got {beta!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
    d = int(objective.dim)
    w0 = _zeros(objective) if w0 is None else torch.as_tensor(w0, dtype=torch.float64).clone()
    if w0.shape != (d,):
        raise ValueError(f"w0 must have shape ({d},); got {tuple(w0.shape)}")
    region = Region.of(objective) if project else None
    if region is not None and not region.contains(w0):
        raise ValueError(f"w0 must lie in the region where the constants hold (distance <= radius = "
                         f"{region.radius:.6g} from its centre); got distance {region.distance(w0):.6g}")
    if accountant is None:
        accountant = Accountant(relation)
    elif Relation.parse(relation) is not accountant.relation:
        raise ValueError(f"relation {relation!r} differs from the accountant's {accountant.relation.value!r}")
    setting = _Setting(int(objective.n), d, rho, float(beta), w0, _constant(objective, "L0", L0), mode, bool(clip),
                       region)
    return setting, (NoiseSource() if noise is None else noise), accountant


def _guarantee(queries: PrivateGradients, s: _Setting, objective, **used: float) -> tuple[str, str]:
    """Which guard bounds the per-example quantities (module docstring), and the report's note saying so.

    ``used`` are the bounds the ledger was charged for (L0, and L1 for KL-Spider's differences); without
    clipping they hold only if they are no smaller than the objective's own constants, on its region.
    """
    bounds = ", ".join(f"{k} = {v:.6g}" for k, v in used.items())
    if queries.clips:
        return CLIPPED, f"sensitivity: per-example gradients (and differences) clipped to the declared {bounds}"
    if not s.clip:
        reason = "clip=False"
    elif s.region is None:
        reason = "no per-example gradients to clip and project=False"
    else:
        smaller = [k for k, v in used.items() if getattr(objective, k, None) is None or v < getattr(objective, k)]
        reason = (f"no per-example gradients to clip and {', '.join(smaller)} below the objective's own"
                  if smaller else "")
    if reason:
        return NOT_GUARANTEED, (f"the sensitivity is not guaranteed ({reason}): the ledger's ε holds only if every "
                                f"per-example gradient is within {bounds} wherever the iterates went")
    return DECLARED, (f"sensitivity: no per-example gradients to clip; it rests on the objective's declared {bounds}, "
                      f"valid for its data domain on its region (radius {s.region.radius:.6g}), onto which every "
                      "iterate is projected")


def _kl_constants(objective, gamma, kappa, F0, L0):
    gamma = _constant(objective, "gamma", gamma)
    kappa = _constant(objective, "kappa", kappa)
    if kappa < 1:
        raise ValueError(f"kappa must be >= 1; got {kappa}")
    F0 = (gamma * L0) ** kappa if F0 is None else _constant(objective, "F0", F0)
    return gamma, kappa, F0


def _bracket(s: _Setting, gamma: float, kappa: float, F0: float) -> float:
    """log F0 + κ·log(n√ρ/(γL0√d)): how many factors of e the target accuracy lies below F0."""
    return math.log(F0) + kappa * math.log(s.n * math.sqrt(s.rho) / (gamma * s.L0 * math.sqrt(s.d)))


# --- Algorithm 1: KL-Spider -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    """Round k of KL-Spider: potential Φ̂_k, length T_k, step length r_k, checkpoint and difference noise."""

    Phi: float
    T: int
    r: float
    sigma_hat: float
    sigma: float


@dataclass(frozen=True)
class SpiderSchedule:
    """Everything Algorithm 1 fixes before it reads the data (Φ̂_k does not depend on the data)."""

    a: float
    c: float
    bracket: float
    K: int
    beta_prime: float
    Phi_floor: float
    rounds: tuple[Round, ...]

    @property
    def radius(self) -> float:
        """Σ_k T_k·r_k: no iterate leaves this ball around w0 (each step has length exactly r_k)."""
        return sum(r.T * r.r for r in self.rounds)


def spider_schedule(*, n: int, d: int, rho: float, beta: float, gamma: float, kappa: float, L0: float,
                    L1: float, F0: float, mode: str = "calibrated", relation: Relation | str = "replace-one",
                    constants: Constants = Constants()) -> SpiderSchedule:
    """Algorithm 1's schedule (spec §2.1): c, K, β′, Φfloor and (Φ̂_k, T_k, r_k, σ̂_k, σ_k) for every round.

    Calibrated: each round spends ρ/K, ρ/(2K) on its checkpoint (the mean of L0-bounded gradients) and
    ρ/(2K) on its at most T_k − 1 differences (per-example norm ≤ L1·r_k; the round's last step issues none),
    and a round without differences (T_k = 1, always when κ = 2) gives its checkpoint all of ρ/K. This
    tightens the spec's ρ/(2K·T_k) per difference (which leaves ρ/2 unused when κ = 2); every σ is no larger,
    so Lemma 2 still holds with Cf = 48. Paper mode: the printed σ̂ = L0√K/(n√ρ) and
    σ_k = Φ̂_k^{1/κ}√(T_kK)/(γn√ρ). A bracket ≤ 0 means the target accuracy is already ≥ F0: K = 0, no round.
    """
    if not 1 <= kappa <= 2:
        raise ValueError(f"KL-Spider needs kappa in [1, 2]; got {kappa}")
    a = (2 - kappa) / kappa
    c = 1 + F0**a / (constants.descent * gamma**2 * L1)
    nsr = n * math.sqrt(rho)
    bracket = math.log(F0) + kappa * math.log(nsr / (gamma * L0 * math.sqrt(d)))
    if bracket <= 0:
        return SpiderSchedule(a, c, bracket, 0, beta, F0, ())
    K = math.ceil((1 + constants.descent * gamma**2 * L1 / F0**a) * bracket)
    beta_prime = (beta / K) * (gamma * L0 * math.sqrt(K * d) / (nsr * F0 ** (1 / kappa))) ** (2 - kappa)
    Cf = constants.floor_constant(mode)
    Phi_floor = min((Cf * gamma * L0 * math.sqrt(K * d * math.log(1 / beta_prime)) / nsr) ** kappa, F0)
    rounds, Phi = [], F0
    for _ in range(K):
        Phi = max(Phi / c, Phi_floor)
        T = math.ceil((F0 / Phi) ** a - 1e-12)  # guard: (F0/Φ)^0 = 1 must not ceil to 2 by rounding
        r = Phi ** (1 / kappa) / (constants.step * gamma * L1)
        if mode == "calibrated":
            checkpoint_share = 1 / (2 * K) if T > 1 else 1 / K
            sigma_hat = zcdp_gaussian_sigma(mean_sensitivity(L0, n, relation), rho * checkpoint_share)
            sigma = (zcdp_gaussian_sigma(mean_sensitivity(L1 * r, n, relation), rho / (2 * K * (T - 1)))
                     if T > 1 else math.inf)
        else:
            sigma_hat = L0 * math.sqrt(K) / nsr
            sigma = Phi ** (1 / kappa) * math.sqrt(T * K) / (gamma * nsr)
        rounds.append(Round(Phi, T, r, sigma_hat, sigma))
    return SpiderSchedule(a, c, bracket, K, beta_prime, Phi_floor, tuple(rounds))


def kl_spider(objective, *, rho: float, beta: float = 0.05, w0=None, gamma: float | None = None,
              kappa: float | None = None, L0: float | None = None, L1: float | None = None,
              F0: float | None = None, mode: str = "calibrated", relation: Relation | str = "replace-one",
              clip: bool = True, project: bool = True, constants: Constants = Constants(),
              noise: NoiseSource | None = None, accountant: Accountant | None = None) -> Result:
    """Algorithm 1 (KL-Spider), Theorem 1: w.p. ≥ 1 − β, F(w_out) − F* ≤ Φfloor = Õ((γL0√(dK)/(n√ρ))^κ).

    Each round k opens with a checkpoint g = ∇F(w) + N(0, σ̂²I), then while t < T_k and
    ‖g‖ ≥ (7/8γ)Φ̂_k^{1/κ} steps w ← w − r_k·g/‖g‖ and updates g by the noisy difference
    ∇F(w_new) − ∇F(w) + N(0, σ_k²I) (skipped after the round's last step). The stop test reads only
    released values, so the output is post-processing of the full schedule's releases, and the ledger charges
    the full schedule (exactly ρ when calibrated) whether or not a round stops early: a realised, data-dependent
    count of releases would not be a guarantee. F0 defaults to (γL0)^κ.

    Correction (issue 13): the paper's iterates may wander up to Σ_k T_k·r_k from w0, beyond the region where
    L0 and L1 are declared; ``project`` puts every step back onto the region (projection is non-expansive, so a
    step stays ≤ r_k and a difference's per-example bound L1·r_k still holds) and ``clip`` clips the checkpoint's
    per-example gradients to L0 and the differences' to L1·r_k (module docstring).
    """
    s, noise, accountant = _setting(objective, rho, beta, w0, L0, mode, relation, noise, accountant, clip, project)
    gamma, kappa, F0 = _kl_constants(objective, gamma, kappa, F0, s.L0)
    L1 = _constant(objective, "L1", L1)
    sched = spider_schedule(n=s.n, d=s.d, rho=s.rho, beta=s.beta, gamma=gamma, kappa=kappa, L0=s.L0, L1=L1,
                            F0=F0, mode=mode, relation=accountant.relation, constants=constants)
    queries = PrivateGradients(objective, noise=noise, accountant=accountant, clip=clip, region=s.region)
    guarantee, note = _guarantee(queries, s, objective, L0=s.L0, L1=L1)
    w, iterates, updates, stopped_by_norm = s.w0.clone(), [s.w0.clone()], [], 0
    for rnd in sched.rounds:
        g = queries.release(queries.gradient(w, s.L0), s.L0, rnd.sigma_hat)
        threshold = constants.stop / gamma * rnd.Phi ** (1 / kappa)
        t = 0
        while t < rnd.T and float(g.norm()) >= threshold:
            w_new = _step(w - rnd.r * g / g.norm(), s.region)
            if t + 1 < rnd.T:
                bound = L1 * rnd.r  # per-example ‖∇f(w_new) − ∇f(w)‖ ≤ L1‖w_new − w‖ ≤ L1·r_k
                g = g + queries.release(queries.difference(w_new, w, bound), bound, rnd.sigma)
            w, t = w_new, t + 1
            iterates.append(w.clone())
        if t < rnd.T:  # stopped by the norm test after t differences of the scheduled T_k − 1
            stopped_by_norm += 1
            if rnd.T - 1 - t > 0:
                queries.charge(L1 * rnd.r, rnd.sigma, rnd.T - 1 - t)
        updates.append(t)
    stats = {"schedule": sched, "updates": updates, "rounds_stopped_early": stopped_by_norm,
             "F0": F0, "bound": sched.Phi_floor, "queries": queries.queries, "nonfinite": queries.nonfinite,
             "sensitivity": guarantee, "privacy_notes": [note]}
    return Result("kl-spider", w, torch.stack(iterates), accountant, s.rho, mode, stats)


def _step(w: torch.Tensor, region: Region | None) -> torch.Tensor:
    """The next iterate, projected onto the region when projecting."""
    return w if region is None else region.project(w)


# --- Algorithm 2 + 4: private proximal point with noisy projected GD -----------------------------------


@dataclass
class InnerResult:
    """What an inner solver returns: its output, its number of gradient queries, its largest ‖u − c‖ and (if it
    reports it) its largest distance from the centre of the region ``queries.region``."""

    w: torch.Tensor
    steps: int
    max_distance: float
    max_region_distance: float = math.nan


InnerSolver = Callable[..., InnerResult]


def noisy_projected_gd(queries: PrivateGradients, center: torch.Tensor, *, rho: float, beta: float, L0: float,
                       weak_convexity: float, mode: str = "calibrated",
                       max_iters: int | None = None) -> InnerResult:
    """Algorithm 4 (Theorem 9): noisy projected GD with averaging on F̃(u) = F(u) + L̃1‖u − c‖², ρ-zCDP.

    T_A = max(2, ⌈n²ρ log²(2/β)/d⌉) (capped by ``max_iters``, which costs utility, never privacy: σ is set
    for the T_A actually run); steps 1/(L̃1·s) on ∇F(u_s) + 2L̃1(u_s − c) + N(0, σ²I), projection onto the
    ball of radius R = L0/(2L̃1) around c (which holds the minimiser of F̃), output Σ_s s·u_s / Σ_s s.
    Calibrated σ spends ρ over the T_A − 1 queries exactly; the paper's σ² = 4L0²T_A/(n²ρ) spends ≤ ρ/2.

    Correction (issue 13): R is typically far larger than the region where L0 is declared (10.7 against 1 for
    ‖w‖^1.5 at the default L̃1), so with ``queries.region`` set the projection is onto the region ∩ B_R(c)
    (:func:`project_two_balls`; c lies in the region). Algorithm 4's analysis holds on any convex feasible set
    containing c; the minimiser of F̃ over it replaces the unconstrained one.
    """
    n, d = queries.n, center.shape[0]
    T_A = max(2, math.ceil(n**2 * rho * math.log(2 / beta) ** 2 / d))
    if max_iters is not None:
        T_A = min(T_A, max(2, int(max_iters)))
    if mode == "calibrated":
        sigma = zcdp_gaussian_sigma(queries.sensitivity(L0), rho / (T_A - 1))
    else:
        sigma = math.sqrt(4 * L0**2 * T_A / (n**2 * rho))
    R = L0 / (2 * weak_convexity)
    region = queries.region

    def project(v: torch.Tensor) -> torch.Tensor:  # onto B_R(c), intersected with the region if there is one
        if region is None:
            return _project_ball(v, center, R)
        return project_two_balls(v, region.center, region.radius, center, R)

    u = center.clone()
    weighted, max_distance = u.clone(), 0.0  # Σ_s s·u_s, starting with s = 1
    max_region_distance = math.nan if region is None else region.distance(u)
    noise = queries.noise_for(T_A - 1, (d,), L0, sigma)
    for s in range(1, T_A):
        g = queries.gradient(u, L0) + noise[s - 1] + 2 * weak_convexity * (u - center)
        u = project(u - g / (weak_convexity * s))
        max_distance = max(max_distance, float((u - center).norm()))
        if region is not None:
            max_region_distance = max(max_region_distance, region.distance(u))
        weighted += (s + 1) * u
    return InnerResult(weighted * 2 / (T_A * (T_A + 1)), T_A - 1, max_distance, max_region_distance)


def proximal_point_rounds(*, n: int, d: int, rho: float, gamma: float, kappa: float, L0: float,
                          weak_convexity: float, F0: float, constants: Constants = Constants()) -> int:
    """Algorithm 2's T = max(1, ⌈(1 + 32γ²L̃1F0^{(κ−2)/κ})·(log F0 + κ log(n√ρ/(γL0√d)))⌉)."""
    bracket = math.log(F0) + kappa * math.log(n * math.sqrt(rho) / (gamma * L0 * math.sqrt(d)))
    factor = 1 + constants.prox * gamma**2 * weak_convexity * F0 ** ((kappa - 2) / kappa)
    return max(1, math.ceil(factor * bracket))


def proximal_point_bound(*, n: int, d: int, rho: float, beta: float, gamma: float, kappa: float, L0: float,
                         weak_convexity: float, F0: float, constants: Constants = Constants()) -> float:
    """Theorem 2's bound (γL0√(T·d·log(n²log²(1/β′)/(dβ′)))/(n√ρ))^κ, β′ = β/T, with its O-constant set to 1."""
    T = proximal_point_rounds(n=n, d=d, rho=rho, gamma=gamma, kappa=kappa, L0=L0, weak_convexity=weak_convexity,
                              F0=F0, constants=constants)
    beta_p = beta / T
    log_term = math.log(n**2 * math.log(1 / beta_p) ** 2 / (d * beta_p))
    return (gamma * L0 * math.sqrt(T * d * log_term) / (n * math.sqrt(rho))) ** kappa


def proximal_point(objective, *, rho: float, beta: float = 0.05, w0=None, gamma: float | None = None,
                   kappa: float | None = None, L0: float | None = None, weak_convexity: float | None = None,
                   F0: float | None = None, mode: str = "calibrated", relation: Relation | str = "replace-one",
                   clip: bool = True, project: bool = True, inner: InnerSolver = noisy_projected_gd,
                   max_inner_iters: int | None = None, constants: Constants = Constants(),
                   noise: NoiseSource | None = None, accountant: Accountant | None = None) -> Result:
    """Algorithm 2 (private proximal point), Theorem 2: F(w_T) − F* = Õ((γL0√(dT)/(n√ρ))^κ) for κ ≥ 2.

    w_t = inner(F + L̃1‖· − w_{t−1}‖², ρ/T, β/T), t = 1..T; the proximal term is data-free, so privacy is
    T·(ρ/T) = ρ by composition. ``inner`` is any solver with :func:`noisy_projected_gd`'s signature that
    releases only through the given :class:`PrivateGradients`, and keeps its query points in
    ``queries.region`` when that is set (the queries refuse points outside it unless they clip); its cost is
    about n²ρ·log²/d gradient queries per call, hence ``max_inner_iters``. ``clip`` and ``project``: module
    docstring; with ``project`` the inner iterates stay in the region, hence so do their averages w_t.
    """
    s, noise, accountant = _setting(objective, rho, beta, w0, L0, mode, relation, noise, accountant, clip, project)
    gamma, kappa, F0 = _kl_constants(objective, gamma, kappa, F0, s.L0)
    if kappa < 2:
        raise ValueError(f"the proximal point method is analysed for kappa >= 2; got {kappa}")
    weak_convexity = _constant(objective, "weak_convexity", weak_convexity)
    T = proximal_point_rounds(n=s.n, d=s.d, rho=s.rho, gamma=gamma, kappa=kappa, L0=s.L0,
                              weak_convexity=weak_convexity, F0=F0, constants=constants)
    queries = PrivateGradients(objective, noise=noise, accountant=accountant, clip=clip, region=s.region)
    guarantee, note = _guarantee(queries, s, objective, L0=s.L0)
    w, iterates, inner_steps, max_distance, region_distances = s.w0.clone(), [s.w0.clone()], [], 0.0, []
    for _ in range(T):
        out = inner(queries, w, rho=s.rho / T, beta=s.beta / T, L0=s.L0, weak_convexity=weak_convexity,
                    mode=mode, max_iters=max_inner_iters)
        w = out.w
        iterates.append(w.clone())
        inner_steps.append(out.steps)
        max_distance = max(max_distance, out.max_distance)
        region_distances.append(out.max_region_distance)
    stats = {"T": T, "inner_steps": inner_steps, "inner_radius": s.L0 / (2 * weak_convexity),
             "inner_max_distance": max_distance,
             "inner_max_region_distance": max(region_distances) if region_distances else math.nan,  # nan: unreported
             "sensitivity": guarantee, "privacy_notes": [note], "F0": F0, "queries": queries.queries,
             "nonfinite": queries.nonfinite}
    return Result("proximal-point", w, torch.stack(iterates), accountant, s.rho, mode, stats)


# --- Algorithm 3 (+ selection): adaptive noisy GD -----------------------------------------------------


def adaptive_gd(objective, *, rho: float, beta: float = 0.05, w0=None, L0: float | None = None,
                L1: float | None = None, mode: str = "calibrated", relation: Relation | str = "replace-one",
                strict: bool = True, select: bool = False, clip: bool = True, project: bool = True,
                noise: NoiseSource | None = None, accountant: Accountant | None = None) -> Result:
    """Algorithm 3 (adaptive noisy GD), Theorem 4; with ``select``, Algorithm 3+ (Theorem 5).

    Each step releases N_t = ‖∇F(w)‖ + N(0, σ̂²) (a scalar), then g = ∇F(w) + N(0, σ_t²I) with
    σ_t = max(N_t/√(dℓ), σmin), and steps w ← w − g/(2L1); ℓ = log(n√ρ/β), σ̂ = L0/(√n·ρ^{1/4}),
    σmin = 2L0/(n√ρ). The step is charged ρ_t = √ρ/n + (L0²dℓ/(n²N_t²) if σ_t > σmin else ρ/2) (spec §2.3's
    safe form) and the loop runs while the charges so far are ≤ ρ/2 (``strict``: ≤ ρ/2 − √ρ/n), so a floored
    step is the last one. These charges are the paper's convention (Δ = √2·L0/n); calibrated mode scales every
    σ by the relation's Δ·n/(√2L0) (√2 under replace-one) so that the charges are the true costs.

    The σ's depend on earlier outputs, so the run is accounted by a privacy filter (fully adaptive
    composition, Whitehouse–Ramdas–Rogers–Wu 2022): the ledger holds one zCDP entry of the filter's bound
    (ρ when strict, ρ + √ρ/n otherwise; twice that in paper mode under replace-one), not the realised charges.
    Selection adds the exponential mechanism with ε = √ρ on the utility −‖∇F(w_t)‖ (sensitivity L0/n in the
    paper's convention), accounted as bounded range (ε²/8, the paper charges ε²/2).

    ``clip`` and ``project``: module docstring (the paper assumes L0 wherever w − g/(2L1) lands). Every argument,
    the selection's included, is checked before the first query.
    """
    s, noise, accountant = _setting(objective, rho, beta, w0, L0, mode, relation, noise, accountant, clip, project)
    # every step's releases are record=False: the filter's bound is recorded once, after the loop
    queries = PrivateGradients(objective, noise=noise, accountant=accountant, clip=clip, region=s.region)
    if select:
        _check_selection(accountant.relation, "select=True")
        if s.region is None and not queries.clips:
            raise ValueError("project must be True for select=True without clipping: the selection's scores are "
                             "bounded only on the region, so it would refuse the iterates after the run; got False")
    L1 = _constant(objective, "L1", L1)
    n, d, rho = s.n, s.d, s.rho
    ell = math.log(n * math.sqrt(rho) / beta)
    if ell <= 0:
        raise ValueError(f"adaptive GD needs n·√ρ > β (ℓ = log(n√ρ/β) > 0); got ℓ = {ell:.3g}")
    eta = 1 / (2 * L1)
    paper_delta = math.sqrt(2) * s.L0 / n  # the sensitivity the paper's charges assume
    true_delta = mean_sensitivity(s.L0, n, accountant.relation)
    scale = true_delta / paper_delta if mode == "calibrated" else 1.0
    cost_ratio = (true_delta / (paper_delta * scale)) ** 2  # true cost / charge, per release
    sigma_hat = scale * s.L0 / (math.sqrt(n) * rho**0.25)
    sigma_min = 2 * s.L0 / (n * math.sqrt(rho))
    limit = rho / 2 - (math.sqrt(rho) / n if strict else 0.0)
    if limit < 0:
        raise ValueError(f"strict mode needs ρ/2 ≥ √ρ/n, i.e. n·√ρ ≥ 2; got n·√ρ = {n * math.sqrt(rho):.3g}")
    guarantee, note = _guarantee(queries, s, objective, L0=s.L0)
    w, iterates, charges, sigmas, floored = s.w0.clone(), [s.w0.clone()], [], [], False
    while sum(charges) <= limit:
        grad = queries.gradient(w, s.L0)
        N = queries.release(float(grad.norm()), s.L0, sigma_hat, record=False)
        sigma_paper = max(N / math.sqrt(d * ell), sigma_min) if N > 0 else sigma_min
        floored = sigma_paper <= sigma_min
        g = queries.release(grad, s.L0, scale * sigma_paper, record=False)
        w = _step(w - eta * g, s.region)
        iterates.append(w.clone())
        sigmas.append(scale * sigma_paper)
        charges.append(math.sqrt(rho) / n + (rho / 2 if floored else s.L0**2 * d * ell / (n**2 * N**2)))
    filter_bound = cost_ratio * (rho if strict else rho + math.sqrt(rho) / n)
    accountant.record(ZCDPMechanism(filter_bound, secret=noise.secret))
    notes = [f"adaptive noise: accounted by a zCDP privacy filter of {filter_bound:.6g} "
             f"(fully adaptive composition; {len(charges)} steps; PLD does not apply)", note]
    iterates_t = torch.stack(iterates)
    stats = {"eta": eta, "ell": ell, "sigma_hat": sigma_hat, "sigma_min": scale * sigma_min, "sigmas": sigmas,
             "charges": charges, "charged": sum(charges), "last_floored": floored, "filter": filter_bound,
             "steps": len(charges), "queries": queries.queries, "nonfinite": queries.nonfinite,
             "sensitivity": guarantee, "privacy_notes": notes}
    output = w
    if select:
        index = select_stationary(objective, iterates_t, rho=rho, L0=s.L0, mode=mode, clip=clip, noise=noise,
                                  accountant=accountant)
        output = iterates_t[index].clone()
        stats["selected"] = index
    return Result("adaptive-gd" + ("+select" if select else ""), output, iterates_t, accountant, rho, mode, stats)


def select_stationary(objective, iterates: torch.Tensor, *, rho: float, L0: float | None = None,
                      mode: str = "calibrated", clip: bool = True, noise: NoiseSource | None = None,
                      accountant: Accountant) -> int:
    """Theorem 5's private selection: t* with P(t) ∝ exp(−ε‖∇F(w_t)‖/(2Δ)), ε = √ρ.

    Δ is the utility's sensitivity: calibrated, the relation's (2L0/n replace-one, L0/n add/remove), so the
    selection is √ρ-DP; ``"paper"`` uses L0/n, and the ledger records the ε that this really gives
    (2√ρ under replace-one). The scores are ‖·‖ of per-example gradients clipped to L0 (``clip``); without
    per-example gradients to clip, every iterate must lie in the objective's region, where L0 is declared.

    Raises:
        ValueError: before any score is computed, for a bad mode, an accountant whose relation the exponential
            mechanism's release does not support, or iterates outside the region when nothing can be clipped.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
    _check_selection(accountant.relation, "the selection")
    L0 = _constant(objective, "L0", L0)
    noise = NoiseSource() if noise is None else noise
    queries = PrivateGradients(objective, noise=noise, accountant=accountant, clip=clip)
    if not queries.clips:
        region = Region.of(objective)
        outside = [t for t, w in enumerate(iterates) if not region.contains(w)]
        if outside:
            raise ValueError(f"iterates must lie in the region (radius {region.radius:.6g}) when their gradients "
                             f"cannot be clipped; got {len(outside)} outside, the first at index {outside[0]}")
        queries.region = region
    norms = torch.stack([queries.gradient(w, L0).norm() for w in iterates])
    true_delta = queries.sensitivity(L0)
    used_delta = true_delta if mode == "calibrated" else L0 / queries.n
    epsilon = math.sqrt(check_rho(rho))
    index, release = exponential_mechanism(-norms, sensitivity=used_delta, epsilon=epsilon, noise=noise)
    accountant.record(replace(release, epsilon=epsilon * true_delta / used_delta))
    return index


def _check_selection(relation: Relation, what: str) -> None:
    """The exponential mechanism's release must be accountable under ``relation``: checked before any run.

    Mathematically the selection is ε-DP and ε-bounded-range (ε²/8-zCDP) under add/remove as well, with score
    sensitivity L0/n; the refusal follows :class:`~dpnc.privacy.releases.ExponentialMechanism`, whose
    accounting (binary randomized response) dpnc states for replace-one only, and lifts when that does.
    """
    supported = ExponentialMechanism.RDP_RELATIONS | ExponentialMechanism.PLD_RELATIONS
    if relation not in supported:
        raise ValueError(f"relation must be one of {sorted(r.value for r in supported)} for {what}: the accountant "
                         f"interprets the exponential mechanism only there; got {relation.value!r}")
