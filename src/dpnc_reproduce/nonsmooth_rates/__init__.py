"""Sample complexity of private nonsmooth optimization, measured: the n ZTC and KLT need to reach β.

Neither paper has experiments; their theorems are sample complexities (:func:`~.report.theory_n`).
This measures n(β) on :class:`~dpnc.problems.radial.RadialDistance`, where every quantity in them is
exact, and judges each exponent one-sided in its variable's regime. See docs/ztc.md ("Reproduction:
nonsmooth rates"); :mod:`dpnc_reproduce.nonsmooth_compare` runs every method."""

from dpnc_reproduce.nonsmooth_rates.experiment import EXPERIMENT, NonsmoothRates
from dpnc_reproduce.nonsmooth_rates.run import FULL, QUICK, RateRow, RatesConfig

__all__ = ["EXPERIMENT", "NonsmoothRates", "FULL", "QUICK", "RateRow", "RatesConfig"]
