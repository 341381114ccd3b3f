"""DPZero paper, synthetic experiment: Figures 1–3 and Table 4 (docs/papers.md, DPZero §4.1).

Quadratics with Hessians of effective rank d, √d and log d; DPZero, DPGD-0th and DP-GD, full batch,
(ε, δ) = (2, 10⁻⁶) with the paper's advanced-composition noise σ = 4C√(2T log(e + ε/δ))/(nε); each
point is the grid point of T, step size and C that is best on the *training* metric (the test metric there is
reported, with the test floor: the best test value over the grid, which a test-chosen point would report).
``seeds`` repeats the whole grid with other data, other public directions and fresh secret noise; the claims are
judged on intervals over those seeds (:mod:`dpnc_reproduce.claims`), so one seed gives every comparison and
slope "no signal". A task is one (Hessian, d, method, T): its whole (step size × C) grid runs as one batched
tensor computation, a FlatSpace of shape (K, d) whose K runs share their public directions and each draw their
own secret noise, and yields K rows. The zeroth-order methods step on the quadratic's closed-form directional
derivatives (one pass over the data per step, shared by the K runs); DP-GD's per-example clipping costs two
(K × d)·(d × n) products a step, so it may have a grid of its own (``first_order_*``), and the r = d and r = √d
Hessians may stop at a smaller d (``high_rank_max_d``) than r = log d. The output of a run is its
last iterate (the paper does not say which iterate it evaluates; DPZero §7.7).

Run it with :func:`dpnc_reproduce.protocol.run_experiment` (``EXPERIMENT``, a config) and write it with
:func:`dpnc_reproduce.protocol.write`.
"""

from dpnc_reproduce.dpzero_synthetic.experiment import EXPERIMENT, DPZeroSynthetic
from dpnc_reproduce.dpzero_synthetic.run import (
    FULL,
    QUICK,
    SyntheticConfig,
    SyntheticRow,
    SyntheticTask,
)

__all__ = [
    "EXPERIMENT",
    "DPZeroSynthetic",
    "FULL",
    "QUICK",
    "SyntheticConfig",
    "SyntheticRow",
    "SyntheticTask",
]
