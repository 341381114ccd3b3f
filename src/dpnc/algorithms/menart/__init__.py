"""Menart, Ullah, Arora, Bassily, Guzmán, "Differentially private non-convex optimization under the KL condition
with optimal rates" (docs/papers.md, Menart et al.): the family ``"menart"``.

Four algorithms for F(w) = (1/n) Σ_i f(w; x_i) under the (γ, κ)-Kurdyka–Łojasiewicz condition
F(w) − F* ≤ γ^κ ‖∇F(w)‖^κ, all ρ-zCDP through the :class:`~dpnc.privacy.accountant.Accountant`, each a frozen
:class:`~dpnc.algorithms.base.Algorithm` config with ``from_theory`` and ``run(problem, x0, *, noise,
accountant) -> Run``:

* :class:`KLSpider` (Algorithm 1, Theorem 1; κ ∈ [1, 2], smooth): :mod:`dpnc.algorithms.menart.spider`.
* :class:`ProximalPoint` (Algorithm 2, Theorem 2; κ ≥ 2, weakly convex, not smooth) with
  :func:`noisy_projected_gd` (Algorithm 4, Theorem 9) inside: :mod:`dpnc.algorithms.menart.proximal`.
* :class:`AdaptiveGD` (Algorithm 3, Theorem 4; γ and κ unknown), with ``select=True`` Algorithm 3+
  (Theorem 5, :func:`select_stationary`): :mod:`dpnc.algorithms.menart.adaptive`.

Each also has ``practical(constants, *, rho, n, **options)``: documented rules that make progress at realistic
n and d where the theorems' constants do not (KL-Spider's :func:`practical_schedule`; adaptive GD's step, relative
noise and norm budget; the proximal point method's rounds and inner cap), with the same exact accounting (ρ) and
without the theorems' utility guarantees.

The private gradient queries (every release through :func:`~dpnc.privacy.release.release_sum`), the guards
(``clip``, ``project``), ``paper`` and the sensitivity statuses are in :mod:`dpnc.algorithms.menart.common`. The
objectives (:mod:`dpnc.problems.kl`) give their public constants in ``objective.constants`` (L0, L1,
weak_convexity, gamma, kappa, region); a config holds the ones it reads as fields, resolved when it is built
(``from_theory``, ``practical``, or ``KLSpider.of(Setting.of(f), rho=…)``), and its run refuses an objective whose
declared constants do not imply them (a looser bound is fine; a tighter one, or another κ, is refused).

Example::

    import torch
    from dpnc.algorithms.base import Setting
    from dpnc.algorithms.menart import KLSpider
    from dpnc.privacy import Accountant, NoiseSource
    from dpnc.privacy.budget import ZCDP
    from dpnc.problems.kl import PowerGrowth

    f = PowerGrowth(1.5, 10, n=10**6)
    run = KLSpider.from_theory(Setting.of(f), ZCDP(1.0)).run(f, f.w_star + 0.1, noise=NoiseSource(),
                                                         accountant=Accountant(), generator=torch.Generator())
    run.output, run.stats.updates, run.report(1e-6).epsilon
"""

from dpnc.algorithms.menart.adaptive import (
    AdaptiveGD,
    AdaptiveStats,
    check_selection,
    select_stationary,
)
from dpnc.algorithms.menart.common import (
    CLIPPED,
    DECLARED,
    NOT_GUARANTEED,
    AnalysisConstants,
    KLStats,
    PrivateGradients,
    project_two_balls,
)
from dpnc.algorithms.menart.proximal import (
    InnerResult,
    InnerSolver,
    ProximalPoint,
    ProximalStats,
    noisy_projected_gd,
    proximal_point_bound,
    proximal_point_rounds,
)
from dpnc.algorithms.menart.spider import (
    PRACTICAL,
    KLSpider,
    Round,
    SpiderSchedule,
    SpiderStats,
    practical_schedule,
    spider_schedule,
)

__all__ = [
    "CLIPPED",
    "DECLARED",
    "NOT_GUARANTEED",
    "PRACTICAL",
    "AdaptiveGD",
    "AdaptiveStats",
    "AnalysisConstants",
    "InnerResult",
    "InnerSolver",
    "KLSpider",
    "KLStats",
    "PrivateGradients",
    "ProximalPoint",
    "ProximalStats",
    "Round",
    "SpiderSchedule",
    "SpiderStats",
    "check_selection",
    "noisy_projected_gd",
    "practical_schedule",
    "project_two_balls",
    "proximal_point_bound",
    "proximal_point_rounds",
    "select_stationary",
    "spider_schedule",
]
