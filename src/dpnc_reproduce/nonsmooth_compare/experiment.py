"""The nonsmooth-compare reproduction for :func:`dpnc_reproduce.protocol.run_experiment`: the
nonsmooth-rates experiment on the sizes of :mod:`.run`."""

from __future__ import annotations

from dpnc_reproduce.nonsmooth_compare.run import FULL, QUICK
from dpnc_reproduce.nonsmooth_rates.experiment import NonsmoothRates


class NonsmoothCompare(NonsmoothRates):
    """ZTC (variance-reduced, naive) and KLT (single-pass ZO and first-order, multi-pass) on the
    radial objectives: n(β) per method, its exponents in d and β, and the papers' comparisons,
    paired per seed."""

    name = "nonsmooth-compare"
    title = (
        "Private nonsmooth optimization: every method's measured n(β) (ZTC variance-reduced and naive; KLT ZO, "
        "first-order, multi-pass)"
    )
    sizes = (
        "--quick (default): d ∈ {4, 8}, n ≤ 8 192, 3 seeds, radial (about a minute); --full: d ∈ {4, 8, 16}, "
        "n ≤ 32 768, 10 seeds, radial and radial-nonconvex (about 40 min on 2 cores)."
    )
    claims_heading = "Claims (theorems' exponents, the papers' comparisons, certificate)"
    QUICK, FULL = QUICK, FULL


EXPERIMENT = NonsmoothCompare()
