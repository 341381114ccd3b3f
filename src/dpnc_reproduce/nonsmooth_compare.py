"""Every private nonsmooth method of the two papers, measured the same way: the samples n each needs to reach β.

The four methods of Kornowski–Liu–Talwar and Zhang–Tran–Cutkosky's two oracles,

* ``ztc``: ZTC's O2NC with the private variance-reduced oracle and tree (Theorem 4.9);
* ``ztc-naive``: ZTC's naive oracle (Algorithm 6, Appendix E), the baseline its Theorem 4.9 improves on;
* ``klt-zo``: KLT's single-pass zeroth-order oracle (Algorithm 3, Theorem 3.1);
* ``klt-fo``: KLT's single-pass first-order oracle (Algorithm 5, Theorem 6.1);
* ``klt-multipass``: KLT's multi-pass (ERM) zeroth-order oracle (Algorithm 4, Theorem 4.1), T capped,

run on the radial objectives of :mod:`dpnc_reproduce.nonsmooth_rates` (per-example L = 1 exactly, the
population Goldstein norm in closed form, seeds varying the data and the algorithm), with its measurement: per seed,
n doubles until the expected population ‖∂F‖_2α over the output draw reaches β, and n(β) is read off. Claims:
each method's exponent of n(β) in d and β against its theorem's, and the papers' comparisons as paired (same data,
same seed) log₂ ratios of n(β) (:data:`~dpnc_reproduce.nonsmooth_rates.COMPARISONS`): variance-reduced against
naive and KLT against ZTC at equal function evaluations, first-order against zeroth-order, multi-pass against single
pass. It is ``nonsmooth-rates`` with every method, a d sweep only and its own name and sizes.
"""

from __future__ import annotations

from dpnc_reproduce.nonsmooth_rates import METHODS, NonsmoothRates, RatesConfig

# n doubles from 16 (multi-pass reaches β within a few hundred examples) to 2¹⁵ (the naive oracle's theorem asks
# for about 32 000 at d = 4)
FULL = RatesConfig(methods=METHODS, dims=(4, 8, 16), epsilons=(2.0,), alphas=(0.1,), nonconvex_dims=(4, 8), seeds=10,
                   n_start=16, n_max=32_768)
QUICK = RatesConfig(methods=METHODS, dims=(4, 8), epsilons=(2.0,), alphas=(0.1,), objectives=("radial",),
                    nonconvex_dims=(4,), seeds=3, n_start=16, n_max=8_192, betas=(0.55, 0.75), main_beta=0.55,
                    n_test=4_000)


class NonsmoothCompare(NonsmoothRates):
    """ZTC (variance-reduced, naive) and KLT (single-pass ZO and first-order, multi-pass) on the radial objectives:
    n(β) per method, its exponents in d and β, and the papers' comparisons, paired per seed."""

    name = "nonsmooth-compare"
    title = "Private nonsmooth optimization: every method's measured n(β) (ZTC variance-reduced and naive; KLT ZO, " \
            "first-order, multi-pass)"
    sizes = ("--quick (default): d ∈ {4, 8}, n ≤ 8 192, 3 seeds, radial (about a minute); --full: d ∈ {4, 8, 16}, "
             "n ≤ 32 768, 10 seeds, radial and radial-nonconvex (about 40 min on 2 cores).")
    claims_heading = "Claims (theorems' exponents, the papers' comparisons, certificate)"
    QUICK, FULL = QUICK, FULL


EXPERIMENT = NonsmoothCompare()
