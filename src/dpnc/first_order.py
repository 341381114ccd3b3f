"""The old path of the first-order private optimizer (:mod:`dpnc.tier.first_order`): kept so that code written
against ``dpnc.first_order`` still runs. New code imports :mod:`dpnc.tier`."""

from dpnc.tier.first_order import (
    PER_EXAMPLE,
    ClippedSum,
    DPOptimizer,
    clipped_gradient_sum,
    route_clipped_sum,
)

__all__ = ["PER_EXAMPLE", "ClippedSum", "DPOptimizer", "clipped_gradient_sum", "route_clipped_sum"]
