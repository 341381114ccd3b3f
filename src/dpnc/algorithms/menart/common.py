"""What Menart et al.'s algorithms share: gradient queries, guards, the run's setting and stats.

Every noisy gradient is a clipped full-batch mean released through :class:`PrivateGradients`; the
guards (``clip``, ``project``), the resolved constants and ``paper`` are stated on
:class:`KLConfig`. See docs/menart.md."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import torch

from dpnc.algorithms.base import Algorithm, Run, Setting, Stats, zcdp
from dpnc.checks import check_positive, check_probability
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.clipping import clipped_sum
from dpnc.privacy.noise import NoiseSource
from dpnc.privacy.release import mean_release, release_sum
from dpnc.privacy.releases import mean_sensitivity
from dpnc.problems.base import Region
from dpnc.sampling import FullBatch

FAMILY = "menart"
CLIPPED, DECLARED, NOT_GUARANTEED = "clipped", "declared", "not guaranteed"  # stats.sensitivity


@dataclass(frozen=True)
class AnalysisConstants:
    """The analysis' numerical constants (Menart et al. §2, §6.11), overridable for practice; theory
    uses the defaults.

    Attributes:
        descent: 64 in c = 1 + F0^a/(64γ²L1) and K (Lemma 9's descent per step is
            Φ̂^{2/κ}/(64γ²L1)).
        step: 4 in the step length r_k = Φ̂^{1/κ}/(4γL1).
        stop: 7/8 in Algorithm 1's stopping threshold (7/8γ)·Φ̂^{1/κ}.
        floor: Cf in Φfloor; None means 48 in the corrected form (so Lemma 2 holds with ceil'd T_k)
            and the paper's 32 with ``paper=True``.
        prox: 32 in Algorithm 2's T = ⌈(1 + 32γ²L̃1F0^{(κ−2)/κ})·bracket⌉.
        precision: ζ, read by KL-Spider's practical schedule only
            (:func:`~dpnc.algorithms.menart.spider.practical_schedule`): each round's gradient
            error, at the noise's expected norm, is at most Φ̂_k^{1/κ}/(ζγ) (Lemma 2's bound with ζ
            = 8, there w.p. ≥ 1 − β).
    """

    descent: float = 64.0
    step: float = 4.0
    stop: float = 7 / 8
    floor: float | None = None
    prox: float = 32.0
    precision: float = 8.0

    def __post_init__(self) -> None:
        check_positive(
            descent=self.descent,
            step=self.step,
            stop=self.stop,
            prox=self.prox,
            precision=self.precision,
        )
        if self.floor is not None:
            check_positive(floor=self.floor)

    def floor_constant(self, paper: bool) -> float:
        if self.floor is not None:
            return self.floor
        return 32.0 if paper else 48.0


@dataclass
class KLStats(Stats):
    """What every run of the family reports, beyond :class:`~dpnc.algorithms.base.Stats`.

    Attributes:
        rounds: outer iterations (KL-Spider's K, the proximal point method's T; 0 for adaptive GD).
        queries: noisy releases issued (drawn), scalars included.
        sensitivity: what guarantees the ledger's sensitivities: :data:`CLIPPED`, :data:`DECLARED`
            or :data:`NOT_GUARANTEED`.
        F0: the bound on F(x0) − F* the schedule used (None where the algorithm needs none).
        iterates: every iterate x_0, x_1, … (rows), including the ones not released; not compared.
    """

    rounds: int = 0
    queries: int = 0
    sensitivity: str = ""
    F0: float | None = None
    iterates: torch.Tensor | None = field(default=None, compare=False, repr=False)


# --- private queries: the only place where data meet noise ----------------------------------------


class PrivateGradients:
    """Noisy full-batch gradient queries on an objective, every release recorded in ``accountant``.

    A query of per-example bound G has the sensitivity
    :func:`~dpnc.privacy.releases.mean_sensitivity` (G): 2G/n under replace-one, G/n under
    add/remove. With ``clip`` and an objective that gives per-example gradients,
    :meth:`gradient_sum` and :meth:`difference_sum` clip every per-example vector to G (non-finite
    ones zeroed first), so the bound holds whatever the data (``clips`` is True). Otherwise they
    return n·∇F and the bound rests on the objective's declared constants, which hold only on its
    region: given a ``region``, every query point must lie in it, and a query outside raises (the
    algorithms project their iterates there, so only a faulty inner solver can trip this; refusing
    is better than a release whose sensitivity is unbounded). :meth:`release` adds the noise through
    :func:`~dpnc.privacy.release.release_sum`."""

    def __init__(
        self,
        objective,
        *,
        noise: NoiseSource,
        accountant: Accountant,
        clip: bool = True,
        region: Region | None = None,
    ) -> None:
        self.objective, self.noise, self.accountant, self.region = (
            objective,
            noise,
            accountant,
            region,
        )
        self.clips = (
            bool(clip)
            and objective.example_gradients(torch.zeros(objective.dim, dtype=torch.float64))
            is not None
        )
        self.n = int(objective.n)
        self.sampler = FullBatch(self.n)  # the fixed denominator n and the plain Gaussian release
        self.nonfinite = self.clipped = self.queries = self.gradients = 0

    def sensitivity(self, bound: float) -> float:
        """Δ of a query of per-example bound ``bound``, in the ledger's arithmetic (release_sum's
        unit × bound)."""
        return mean_sensitivity(1.0, self.n, self.accountant.relation) * bound

    def gradient_sum(self, w: torch.Tensor, bound: float) -> torch.Tensor:
        """Σ_i clip_bound(∇f(w; x_i)) (no noise), or n·∇F(w) without per-example gradients."""
        self._check(w)
        f = self.objective
        self.gradients += self.n
        return self._sum(lambda: f.example_gradients(w), lambda: f.gradient(w), bound)

    def difference_sum(self, w_new: torch.Tensor, w: torch.Tensor, bound: float) -> torch.Tensor:
        """Σ_i clip_bound(∇f(w_new; x_i) − ∇f(w; x_i)) (no noise), or n·(∇F(w_new) − ∇F(w))."""
        self._check(w_new)
        self._check(w)
        f = self.objective
        self.gradients += 2 * self.n
        return self._sum(
            lambda: f.example_gradients(w_new) - f.example_gradients(w),
            lambda: f.gradient(w_new) - f.gradient(w),
            bound,
        )

    def gradient(self, w: torch.Tensor, bound: float) -> torch.Tensor:
        """The exact clipped mean (1/n)·:meth:`gradient_sum` (not released: for scores and
        checks)."""
        return self.gradient_sum(w, bound) / self.n

    def release(
        self,
        total: torch.Tensor,
        bound: float,
        sigma: float,
        *,
        accountant: Accountant | None = None,
        noise=None,
    ) -> torch.Tensor:
        """total/n + N(0, σ²I) for a sum of per-example terms bounded by ``bound`` (a vector or a
        0-d tensor), through :func:`~dpnc.privacy.release.release_sum`, recorded in ``accountant``
        (default: the queries' own); ``noise`` overrides the queries' source (rows of one bulk draw
        of it: Algorithm 4)."""
        self.queries += 1
        return release_sum(
            total,
            bound,
            sampler=self.sampler,
            noise=self.noise if noise is None else noise,
            accountant=self.accountant if accountant is None else accountant,
            noise_multiplier=sigma / self.sensitivity(bound),
        )

    def charge(self, bound: float, sigma: float, count: int) -> None:
        """Record ``count`` releases that were scheduled but not issued (nothing is drawn), because
        a data-dependent stopping rule skipped them: the stopping time is a function of the released
        values, so the guarantee is the full schedule's, and the ledger states that data-independent
        bound rather than the realised count. The record is the one :meth:`release` would make (Δ in
        real units, σ)."""
        release = mean_release(
            bound,
            sigma / self.sensitivity(bound),
            sampler=self.sampler,
            accountant=self.accountant,
            noise=self.noise,
        )  # the one builder of a mean's ledger entry (release_sum's)
        self.accountant.record(release, count)

    def _check(self, w: torch.Tensor) -> None:
        if not self.clips and self.region is not None and not self.region.contains(w):
            raise RuntimeError(
                f"a query at distance {self.region.distance(w):.6g} from the region's centre "
                f"(radius {self.region.radius:.6g}), where the declared bounds need not hold: "
                "an inner solver must keep its iterates in the region it is given"
            )

    def _sum(self, per_example, full, bound: float) -> torch.Tensor:
        if self.clips:
            summed = clipped_sum(per_example(), bound, vector=True)
            self.nonfinite += int(summed.nonfinite)
            self.clipped += int(summed.clipped)
            return summed.total
        mean = full()
        if not bool(
            torch.isfinite(mean).all()
        ):  # only reachable when the assumptions fail; counted
            self.nonfinite += 1
            mean = torch.zeros_like(mean)
        return mean * self.n


def open_queries(
    objective,
    *,
    noise: NoiseSource,
    accountant: Accountant,
    clip: bool,
    region: Region | None = None,
) -> PrivateGradients:
    """The queries every algorithm of the family releases through (one place, so that audits can
    wrap them)."""
    return PrivateGradients(objective, noise=noise, accountant=accountant, clip=clip, region=region)


# --- projections ----------------------------------------------------------------------------------


def project_ball(p: torch.Tensor, c: torch.Tensor, r: float) -> torch.Tensor:
    """The Euclidean projection of p onto B_r(c)."""
    return Region(c, r).project(p)


def project_two_balls(
    p: torch.Tensor, c1: torch.Tensor, r1: float, c2: torch.Tensor, r2: float
) -> torch.Tensor:
    """The Euclidean projection of p onto B_r1(c1) ∩ B_r2(c2), assumed non-empty (exact, in closed
    form).

    If the projection onto one ball lies in the other, it is the answer (it is optimal for a
    superset). Otherwise the answer lies on both spheres (by the KKT conditions: on one sphere only,
    strictly inside the other ball, it would be that ball's projection), i.e. on their intersection,
    the (d−2)-sphere of centre m = c1 + t·e and radius h = √(r1² − t²) in the plane ⟂ e = (c2 −
    c1)/D, t = (D² + r1² − r2²)/(2D): its nearest point to p is m + h·v/‖v‖, v the part of p − m
    orthogonal to e."""
    for (ca, ra), (cb, rb) in (((c1, r1), (c2, r2)), ((c2, r2), (c1, r1))):
        x = project_ball(p, ca, ra)
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


def step(w: torch.Tensor, region: Region | None) -> torch.Tensor:
    """The next iterate, projected onto the region when projecting."""
    return w if region is None else region.project(w)


# --- the configs' common part and the setting of a run --------------------------------------------


@dataclass(frozen=True)
class KLConfig(Algorithm):
    """The fields every config of the family has (each config adds its own; all are checked at
    construction).

    Attributes:
        rho: the zCDP budget ρ > 0.  beta: the failure probability β ∈ (0, 1).
        L0: the per-example Lipschitz bound the releases are charged for: the objective's declared
            L0 (keyword; each config also holds the other public constants it reads,
            :attr:`constant_fields`).
        paper: the paper's printed noise levels instead of the calibrated ones (below).
        clip, project: the guards (below).

    **Guards** (on by default; the paper has neither, it assumes the constants hold wherever the
    iterates go). The ledger charges every query for a sensitivity computed from the declared L0
    (and L1), so those bounds must hold for every example at every query point, whatever the data.
    ``clip=True`` clips per-example gradients to L0 and KL-Spider's per-example differences to
    L1·r_k ≥ L1‖w_{t+1} − w_t‖ (non-finite ones zeroed first): the sensitivity then holds for any
    data, a no-op under the assumptions. ``project=True`` keeps every iterate (and every inner
    iterate of Algorithm 4) in the objective's region (``objective.constants.region``), where its
    constants are declared; x0 must lie there. An objective without per-example gradients
    (data-free, sufficient statistics) cannot be clipped; its bounds then rest on its own constants,
    declared for every example of its data domain on its region, which is why the iterates are
    projected there. A run says which holds in ``stats.sensitivity``: :data:`CLIPPED`,
    :data:`DECLARED` (no per-example gradients; projected onto the region) or :data:`NOT_GUARANTEED`
    (``clip=False``, or neither guard applies); in the last case the run is marked not private
    (``Run.private``) and its report says why.

    **Constants** are resolved when a config is built (:meth:`of` reads them from a
    :class:`~dpnc.algorithms.base.Setting`): a run never reads them off the objective, and refuses
    an objective whose declared constants do not imply them (a tighter bound, another κ:
    :meth:`~dpnc.algorithms.base.Algorithm.check_problem`), so the ledger's sensitivities, the
    schedule and the claim rest on bounds the objective gives.

    **paper** (Menart et al. §1.2). ``False`` (default): every release's σ is calibrated from its
    true sensitivity under the accountant's neighbouring relation and its share of ρ, so the run
    spends exactly ρ. ``True``: the printed noise levels; the accountant then reports their true
    cost."""

    family = FAMILY
    constant_fields = ("L0",)

    rho: float
    beta: float = 0.05
    paper: bool = False
    clip: bool = True
    project: bool = True
    L0: float = field(kw_only=True)

    @classmethod
    def of(cls, setting: Setting, **fields) -> KLConfig:
        """The config of ``fields``, each public constant it holds (:attr:`constant_fields`) read
        from ``setting`` unless given, and F0 (where the class has it) from ``setting.gap``, else
        (γL0)^κ (Menart et al. §1.1)."""
        resolved = {
            name: getattr(setting.constants, name)
            for name in cls.constant_fields
            if name not in fields
        }
        if "F0" in {f.name for f in dataclasses.fields(cls)} and "F0" not in fields:
            given = {**resolved, **fields}
            resolved["F0"] = gap_or_default(
                setting, given.get("gamma"), given.get("kappa"), given.get("L0")
            )
        return cls(**resolved, **fields)

    def claim(self) -> str:
        """ "ρ-zCDP" and what gives it (:meth:`claim_basis`): the family's one form of the
        statement."""
        return f"ρ = {self.rho:g}-zCDP {self.claim_basis()}"

    def claim_basis(self) -> str:
        """The theorem or rule behind the guarantee, e.g. "(Lemma 8)"."""
        raise NotImplementedError


def budget_rho(budget) -> float:
    """The family's one budget conversion: the zCDP ρ of ``budget`` (a ZCDP as is; an (ε, δ) Budget
    by the optimal conversion, the largest ρ whose zCDP guarantee implies it)."""
    return zcdp(budget).rho


def gap_or_default(
    setting: Setting, gamma: float | None, kappa: float | None, L0: float | None
) -> float | None:
    """F0: the setting's gap where given, else (γL0)^κ (Menart et al. §1.1) where the constants give
    it."""
    if setting.gap is not None:
        return float(setting.gap)
    return None if None in (gamma, kappa, L0) else (gamma * L0) ** kappa


def check_config(config, *optional: str, required: tuple[str, ...] = ()) -> None:
    """The fields every config of the family has (rho, beta, its flags), its public constants
    (:attr:`~KLConfig.constant_fields`) and ``required`` fields (each a finite number > 0) and its
    ``optional`` fields (the same unless None: the paper's value)."""
    check_positive(
        rho=config.rho, **config.built_for(), **{name: getattr(config, name) for name in required}
    )
    check_probability(beta=config.beta)  # the failure probability
    for name in ("paper", "clip", "project", "strict", "select"):
        if not isinstance(getattr(config, name, False), bool):
            raise ValueError(f"{name} must be True or False; got {getattr(config, name)!r}")
    for name in optional:
        if getattr(config, name) is not None:
            check_positive(**{name: getattr(config, name)})
    if getattr(config, "kappa", None) is not None and config.kappa < 1:
        raise ValueError(f"kappa must be >= 1; got {config.kappa!r}")


@dataclass(frozen=True)
class RunSetting:
    """What a run reads: n, d and the start point from the objective, L0 from the config (which the
    objective declares: checked), the region where the constants hold."""

    n: int
    d: int
    w0: torch.Tensor
    L0: float
    region: Region | None


def require(constants, *names: str) -> None:
    """The public constants a ``practical`` setting's rules read, each a finite number > 0 (else a
    clear error)."""
    for name in names:
        value = getattr(constants, name, None)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(
                f"constants.{name} must be a finite number > 0 (a public constant the practical "
                f"rules read); got {value!r}"
            )


def region_of(objective) -> Region:
    """The objective's region, where its constants hold (refused when it declares none)."""
    region = objective.constants.region
    if region is None:
        raise ValueError(
            f"project must be False for an objective without a region, where its constants hold; "
            f"got project=True for {getattr(objective, 'name', objective)!r}"
        )
    return Region(torch.as_tensor(region.center, dtype=torch.float64), float(region.radius))


def setting(config, objective, x0) -> RunSetting:
    """n, d, the start point (zeros if None; in the region when projecting), L0 and the region, once
    the objective is checked to declare the constants the config holds (before any query)."""
    config.check_problem(objective)
    d = int(objective.dim)
    w0 = (
        torch.zeros(d, dtype=torch.float64)
        if x0 is None
        else torch.as_tensor(x0, dtype=torch.float64).clone()
    )
    if w0.shape != (d,):
        raise ValueError(f"x0 must have shape ({d},); got {tuple(w0.shape)}")
    region = region_of(objective) if config.project else None
    if region is not None and not region.contains(w0):
        raise ValueError(
            f"x0 must lie in the region where the constants hold (distance <= radius = "
            f"{region.radius:.6g} from its centre); got distance {region.distance(w0):.6g}"
        )
    return RunSetting(int(objective.n), d, w0, float(config.L0), region)


def guarantee(
    queries: PrivateGradients, s: RunSetting, clip: bool, **used: float
) -> tuple[str, str]:
    """Which guard bounds the per-example quantities (:class:`KLConfig`), and the report's note
    saying so.

    ``used`` are the bounds the ledger was charged for (L0, and L1 for KL-Spider's differences): the
    objective's declared constants (:func:`setting` checked it); without clipping they hold on its
    region only."""
    bounds = ", ".join(f"{k} = {v:.6g}" for k, v in used.items())
    if queries.clips:
        return (
            CLIPPED,
            f"sensitivity: per-example gradients (and differences) clipped to the declared {bounds}",
        )
    if not clip:
        reason = "clip=False"
    elif s.region is None:
        reason = "no per-example gradients to clip and project=False"
    else:
        reason = ""
    if reason:
        return NOT_GUARANTEED, (
            f"the sensitivity is not guaranteed ({reason}): the ledger's ε holds only if every "
            f"per-example gradient is within {bounds} wherever the iterates went"
        )
    return DECLARED, (
        f"sensitivity: no per-example gradients to clip; it rests on the objective's declared {bounds}, "
        f"valid for its data domain on its region (radius {s.region.radius:.6g}), onto which every "
        "iterate is projected"
    )


def finish(
    config,
    *,
    output: torch.Tensor,
    iterates: list[torch.Tensor] | torch.Tensor,
    accountant: Accountant,
    stats: KLStats,
    queries: PrivateGradients,
    notes: list[str],
) -> Run:
    """The :class:`~dpnc.algorithms.base.Run`: stats completed from the queries; not private when
    the sensitivity is not guaranteed."""
    stats.iterates = iterates if isinstance(iterates, torch.Tensor) else torch.stack(iterates)
    stats.queries, stats.nonfinite, stats.clipped = (
        queries.queries,
        queries.nonfinite,
        queries.clipped,
    )
    stats.gradients = queries.gradients
    return Run(
        config,
        output,
        stats.iterates[-1].clone(),
        accountant,
        stats,
        private=stats.sensitivity != NOT_GUARANTEED,
        notes=notes,
    )
