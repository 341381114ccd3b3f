"""Zhang–Tran–Cutkosky's family: the config, its two oracles and the theorems' calculators (:mod:`.config`)."""

from dpnc.algorithms.ztc.config import (NaiveOracle, VarianceReducedOracle, ZhangTranCutkosky, guarantee, paper_rho,
                                        sensitivities, variance_bound)

__all__ = ["NaiveOracle", "VarianceReducedOracle", "ZhangTranCutkosky", "guarantee", "paper_rho", "sensitivities",
           "variance_bound"]
