"""The mechanisms ``dpnc audit`` runs, by name (see :mod:`dpnc.audit.base` for what they share).

===================== ========================================================================================
``dpzero``            DPZero full batch, ``DPZero(...).run`` on a grid of runs (replace-one)
``dpzero-poisson``    DPZero with the real secret ``PoissonSampler``, one grid (add/remove)
``dpgd0th``           DPGD-0th full batch, d-dimensional noise (replace-one)
``ztc-tree``          Zhang–Tran–Cutkosky ``VarianceReducedOracle``, one tree period (replace-one)
``klt-tree``          Kornowski–Liu–Talwar ``ZerothOrderOracle``, safe mode, one tree period (replace-one)
``kl-spider-checkpoint`` KL-Spider's first checkpoint: ``PrivateGradients`` query + release (replace-one)
``dpzero-optimizer``  ``dpnc.optim.DPZero`` on a tiny model with a secret Poisson sampler (add/remove)
===================== ========================================================================================
"""

from __future__ import annotations

from dpnc.audit.base import BIG, BROKEN, SIGMA_FACTOR, Mechanism
from dpnc.audit.oracles import KLSpiderCheckpoint, KLTTree, ZTCTree
from dpnc.audit.model_tier import DPZeroOptimizerPoisson, MakePrivateDPSGD, MakePrivateDPZero
from dpnc.audit.zeroth_order import DPGD0thFullBatch, DPGDFullBatch, DPZeroFullBatch, DPZeroPoisson

MECHANISMS: dict[str, type[Mechanism]] = {m.name: m for m in (
    DPZeroFullBatch, DPZeroPoisson, DPGD0thFullBatch, DPGDFullBatch, ZTCTree, KLTTree, KLSpiderCheckpoint,
    DPZeroOptimizerPoisson, MakePrivateDPZero, MakePrivateDPSGD)}

__all__ = ["BIG", "BROKEN", "MECHANISMS", "SIGMA_FACTOR", "Mechanism", "DPGD0thFullBatch", "DPGDFullBatch",
           "DPZeroFullBatch", "DPZeroOptimizerPoisson", "DPZeroPoisson", "KLSpiderCheckpoint", "KLTTree",
           "MakePrivateDPSGD", "MakePrivateDPZero", "ZTCTree"]
