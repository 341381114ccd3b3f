"""dpnc: differentially private optimization of nonconvex and nonsmooth objectives."""

__version__ = "0.1.0"
