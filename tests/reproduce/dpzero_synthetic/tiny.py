"""The tiny dpzero-synthetic grid the run and experiment tests share: seconds on one core."""

from dpnc_reproduce.dpzero_synthetic import run as exp

TINY = exp.SyntheticConfig(
    dims=(10, 40), steps=(10, 40), stepsizes=(0.01, 0.1, 1.0), clips=(1.0, 10.0), n=500
)
