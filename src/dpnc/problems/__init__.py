"""Objectives with known facts, as per-example losses usable by every algorithm."""

from dpnc.problems.quadratic import HESSIANS, Quadratic

__all__ = ["HESSIANS", "Quadratic"]
