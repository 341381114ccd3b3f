"""The mechanisms ``dpnc audit`` runs, by name (see :mod:`dpnc.audit.base` for what they share).

================================ ===============================================================================
``dpzero``                       DPZero full batch, ``DPZero(...).run`` on a grid of runs (replace-one)
``dpzero-poisson``               DPZero with the real secret ``PoissonSampler``, one grid (add/remove)
``dpgd0th``                      DPGD-0th full batch, d-dimensional noise (replace-one)
``dp-gd``                        DP-GD full batch, first order (replace-one)
``ztc-tree``                     Zhang–Tran–Cutkosky ``VarianceReducedOracle``, one tree period (replace-one)
``klt-tree``                     Kornowski–Liu–Talwar ``ZerothOrderOracle``, safe mode, one tree period (replace-one)
``kl-spider-checkpoint``         KL-Spider's first checkpoint: ``PrivateGradients`` query + release (replace-one)
``dpzero-optimizer``             ``dpnc.tier.DPZero`` on a tiny model with a secret Poisson sampler (add/remove)
``dpzero-optimizer-replace-one`` ``dpnc.tier.DPZero``, full batch, replace-one
``dpzero-distributed``           the data-parallel step (``group=Group()``) on a one-process gloo group (add/remove)
``dpzero-trainer-step``          the fine-tuning trainer's DPZero step (``lm.steps``) on the tiny model (add/remove)
``make-private-dpzero``          ``dpnc.make_private(optimizer="dpzero")``: its loader and optimizer (add/remove)
``make-private-dp-sgd``          ``dpnc.make_private(optimizer="dp-sgd")``: ``DPOptimizer`` (add/remove)
================================ ===============================================================================
"""

from __future__ import annotations

from dpnc.audit.base import BIG, BROKEN, SIGMA_FACTOR, Mechanism
from dpnc.audit.model_tier import (
    DPZeroDistributed,
    DPZeroOptimizerPoisson,
    DPZeroOptimizerReplaceOne,
    DPZeroTrainerStep,
    MakePrivateDPSGD,
    MakePrivateDPZero,
)
from dpnc.audit.oracles import KLSpiderCheckpoint, KLTTree, ZTCTree
from dpnc.audit.zeroth_order import DPGD0thFullBatch, DPGDFullBatch, DPZeroFullBatch, DPZeroPoisson

MECHANISMS: dict[str, type[Mechanism]] = {
    m.name: m
    for m in (
        DPZeroFullBatch,
        DPZeroPoisson,
        DPGD0thFullBatch,
        DPGDFullBatch,
        ZTCTree,
        KLTTree,
        KLSpiderCheckpoint,
        DPZeroOptimizerPoisson,
        DPZeroOptimizerReplaceOne,
        DPZeroDistributed,
        DPZeroTrainerStep,
        MakePrivateDPZero,
        MakePrivateDPSGD,
    )
}

__all__ = [
    "BIG",
    "BROKEN",
    "MECHANISMS",
    "SIGMA_FACTOR",
    "Mechanism",
    "DPGD0thFullBatch",
    "DPGDFullBatch",
    "DPZeroDistributed",
    "DPZeroFullBatch",
    "DPZeroOptimizerPoisson",
    "DPZeroOptimizerReplaceOne",
    "DPZeroPoisson",
    "DPZeroTrainerStep",
    "KLSpiderCheckpoint",
    "KLTTree",
    "MakePrivateDPSGD",
    "MakePrivateDPZero",
    "ZTCTree",
]
