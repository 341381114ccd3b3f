"""The mechanisms ``dpnc audit`` runs, by name (:data:`MECHANISMS`; :mod:`dpnc.audit.base` has what
they share): the flat tier (:mod:`~dpnc.audit.zeroth_order`), the tree oracles and KL-Spider's
checkpoint (:mod:`~dpnc.audit.oracles`), the model tier (:mod:`~dpnc.audit.model_tier`).
What each runs, its relation and its canary: docs/audit.md ("What is run")."""

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
