"""The nonsmooth-compare reproduction's sizes: every method of :mod:`dpnc_reproduce.nonsmooth_rates`
(whose runs it makes) on its own grid."""

from __future__ import annotations

from dpnc_reproduce.nonsmooth_rates.run import NAMES, RatesConfig

# n doubles from 16 (multi-pass reaches β within a few hundred examples) to 2¹⁵ (the naive oracle's
# theorem asks for about 32 000 at d = 4)
FULL = RatesConfig(
    methods=NAMES,
    dims=(4, 8, 16),
    epsilons=(2.0,),
    alphas=(0.1,),
    nonconvex_dims=(4, 8),
    seeds=10,
    n_start=16,
    n_max=32_768,
)
QUICK = RatesConfig(
    methods=NAMES,
    dims=(4, 8),
    epsilons=(2.0,),
    alphas=(0.1,),
    objectives=("radial",),
    nonconvex_dims=(4,),
    seeds=3,
    n_start=16,
    n_max=8_192,
    betas=(0.55, 0.75),
    main_beta=0.55,
    n_test=4_000,
)
