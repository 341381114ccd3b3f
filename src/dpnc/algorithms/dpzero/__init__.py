"""The DPZero paper's family: DPZero, DPGD-0th, DP-GD and MeZO (:mod:`.configs`, on what they share
in :mod:`.family`), their theorems (:mod:`.theory`), and the first-order baseline DP-SGD
(:mod:`.dpsgd`)."""

from dpnc.algorithms.dpzero.configs import DPGD, DPGD0th, DPZero, MeZO
from dpnc.algorithms.dpzero.dpsgd import DPSGD
from dpnc.algorithms.dpzero.family import (
    StepLog,
    ZerothOrderStats,
    finite_pairs,
    practical_parameters,
    practical_step,
    public_seeds,
)
from dpnc.algorithms.dpzero.theory import (
    TheoryParameters,
    calibrate_noise,
    dpgd0th_from_theory,
    dpzero_from_theory,
    paper_claim,
)

__all__ = [
    "DPGD",
    "DPGD0th",
    "DPSGD",
    "DPZero",
    "MeZO",
    "StepLog",
    "TheoryParameters",
    "ZerothOrderStats",
    "calibrate_noise",
    "dpgd0th_from_theory",
    "dpzero_from_theory",
    "finite_pairs",
    "paper_claim",
    "practical_parameters",
    "practical_step",
    "public_seeds",
]
