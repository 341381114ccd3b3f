"""Zhang–Tran–Cutkosky's family: the config and its two oracles (:mod:`.config`), the theorems'
calculators, sample complexity and cost (:mod:`.theory`)."""

from dpnc.algorithms.ztc.config import NaiveOracle, VarianceReducedOracle, ZhangTranCutkosky
from dpnc.algorithms.ztc.theory import (
    evaluations,
    guarantee,
    paper_rho,
    samples_needed,
    sensitivities,
    variance_bound,
)

__all__ = [
    "NaiveOracle",
    "VarianceReducedOracle",
    "ZhangTranCutkosky",
    "evaluations",
    "guarantee",
    "paper_rho",
    "samples_needed",
    "sensitivities",
    "variance_bound",
]
