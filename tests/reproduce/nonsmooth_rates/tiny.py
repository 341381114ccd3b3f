"""The tiny nonsmooth-rates grid the run, report and experiment tests share: seconds on one core."""

from dpnc_reproduce.nonsmooth_rates import run as exp

TINY = exp.RatesConfig(
    dims=(2, 3),
    epsilons=(4.0,),
    alphas=(0.2,),
    base_d=2,
    base_epsilon=4.0,
    base_alpha=0.2,
    objectives=("radial",),
    nonconvex_dims=(),
    seeds=2,
    n_start=200,
    n_max=400,
    betas=(0.6, 0.8),
    main_beta=0.8,
    n_test=300,
    n_axis=50,
    rim=1,
    certificate_samples=4,
)
