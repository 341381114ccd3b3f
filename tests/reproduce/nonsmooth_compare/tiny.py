"""The tiny nonsmooth-compare grid (every method, two dimensions, two seeds) its experiment test runs
and nonsmooth-rates' comparison-claim tests judge."""

import dataclasses

from dpnc_reproduce import nonsmooth_compare as exp

TINY = dataclasses.replace(
    exp.QUICK,
    dims=(2, 3),
    nonconvex_dims=(),
    base_d=2,
    base_epsilon=4.0,
    epsilons=(4.0,),
    alphas=(0.2,),
    base_alpha=0.2,
    seeds=2,
    n_start=50,
    n_max=200,
    betas=(0.6, 0.8),
    main_beta=0.8,
    n_test=300,
    n_axis=50,
    rim=1,
    certificate_samples=4,
    multipass_max_steps=20,
)
