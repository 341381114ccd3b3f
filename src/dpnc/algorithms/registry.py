"""Every algorithm dpnc implements, by name: one line per algorithm class.

Consumers (the reproductions, the contract test) read this instead of knowing each family; a new
paper is one folder under :mod:`dpnc.algorithms`, one line here and one contract case
(``tests/suites/contract/``)."""

from __future__ import annotations

from dpnc.algorithms.base import Algorithm
from dpnc.algorithms.dpzero import DPGD, DPSGD, DPGD0th, DPZero, MeZO
from dpnc.algorithms.klt import KornowskiLiuTalwar
from dpnc.algorithms.menart import AdaptiveGD, KLSpider, ProximalPoint
from dpnc.algorithms.ztc import ZhangTranCutkosky

ALGORITHMS: dict[str, type[Algorithm]] = {
    cls.name: cls
    for cls in (
        DPZero,
        DPGD0th,
        DPGD,
        MeZO,
        DPSGD,  # Zhang et al. (DPZero) and the first-order baseline
        ZhangTranCutkosky,  # Zhang–Tran–Cutkosky (both oracles)
        KornowskiLiuTalwar,  # Kornowski–Liu–Talwar (three oracles, both schedules)
        KLSpider,
        ProximalPoint,
        AdaptiveGD,  # Menart et al.
    )
}

FAMILIES: dict[str, list[str]] = {}
for _name, _cls in ALGORITHMS.items():
    FAMILIES.setdefault(_cls.family, []).append(_name)

__all__ = ["ALGORITHMS", "FAMILIES"]
