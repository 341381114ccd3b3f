"""Every private nonsmooth method of both papers, measured alike: the n each needs to reach β.

ZTC's variance-reduced and naive oracles and KLT's single-pass zeroth-order, first-order and
multi-pass oracles, named by their registry names, on :mod:`dpnc_reproduce.nonsmooth_rates`' radial
objectives and measurement (a d sweep only), with the papers' comparisons paired per seed. See
docs/klt.md ("Reproduction: every nonsmooth method measured alike")."""

from dpnc_reproduce.nonsmooth_compare.experiment import EXPERIMENT, NonsmoothCompare
from dpnc_reproduce.nonsmooth_compare.run import FULL, QUICK

__all__ = ["EXPERIMENT", "NonsmoothCompare", "FULL", "QUICK"]
