"""Kornowski–Liu–Talwar's family: the config and its three oracles (:mod:`.config`), the theorems
(:mod:`.theory`)."""

from dpnc.algorithms.klt import theory
from dpnc.algorithms.klt.config import (
    FirstOrderOracle,
    KornowskiLiuTalwar,
    MultiPassOracle,
    ZerothOrderOracle,
)

__all__ = [
    "FirstOrderOracle",
    "KornowskiLiuTalwar",
    "MultiPassOracle",
    "ZerothOrderOracle",
    "theory",
]
