"""Menart et al. 2024, private nonconvex optimization under the KL condition: the family "menart".

:class:`KLSpider` (Algorithm 1), :class:`ProximalPoint` with :func:`noisy_projected_gd` inside
(Algorithms 2 and 4) and :class:`AdaptiveGD` with private selection (Algorithms 3 and 3+), all
ρ-zCDP through the accountant; their shared parts (queries, guards, ``paper``) are in
:mod:`dpnc.algorithms.menart.common`. See docs/menart.md."""

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
    statistical_inner_steps,
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
    "statistical_inner_steps",
]
