"""Sample complexity of private nonsmooth optimization, measured: the n that ZTC and KLT need to reach β.

Neither paper has experiments; their theorems are sample complexities (docs/papers.md, ZTC §3,
Thm 4.9; KLT §3, v2 Thm 3.1), with ρ the paper's ρ(ε, δ_DP) and Φ = F(x₀) − inf F:

    ZTC (variance-reduced, Thm 4.9):  n ≍ (Φ + Lα)·d·L²/(αβ³) + (Φ + Lα)·d^{3/2}·L/(ραβ²)
    KLT (single-pass ZO, Thm 3.1):    n ≍ Φ·L²·√d/(αβ³) + Φ·L·d/(εαβ²)

for E‖∂F(x_out)‖_{2α} ≤ β. This experiment measures n(β) on an instance where every quantity in them is exact:
:class:`~dpnc.problems.radial.RadialDistance` (per-example L = 1 exactly in every d; the population Goldstein
norm in closed form), ``radial`` (convex, q = 0) and ``radial-nonconvex`` (15 % of the examples repelling).
The same measurement takes ZTC's naive oracle and KLT's first-order and multi-pass oracles too (their n in
:func:`theory_n`, their settings as data in :data:`~dpnc_reproduce.nonsmooth_rates.run.METHODS`, each named by its
registry name: ``zo-o2nc``, ``klt``, ``zo-o2nc:naive``, ``klt:first-order``, ``klt:multi-pass``);
:mod:`dpnc_reproduce.nonsmooth_compare` runs all five and judges the papers' comparisons between them
(:data:`COMPARISONS`).

Per run (a method, an objective, d, ε, α, a seed and a sample size n): the method's theorem parameters for n
(KLT with the m that gives it ZTC's number of function evaluations: equal evaluations), one pass over n fresh
examples, and at the end the **expected** population norm Ē = (1/K)Σ_k ‖∂F(w̄^k)‖_{2α} over the K block averages
the output is drawn from uniformly (the expectation the theorems bound, computed exactly instead of one draw's
lottery, which made earlier certificates bimodal), plus a held-out certificate of the drawn output (uniform + rim
points, with the concentration term) beside its closed-form value.

Per seed, n doubles from ``n_start`` until Ē ≤ min β (or n > ``n_max``); n(β) is where Ē(n) crosses β, linear in
log n between the two grid points around the first crossing (none: not reached by ``n_max``). Seeds vary the data
(pool, start direction, test set) and the algorithm's public randomness; the privacy noise is secret. Exponents:
log n(β) against log d (ε, α fixed), log ε, log α and log β, fitted per seed, their mean and 95 % t interval over
the seeds (:func:`dpnc_reproduce.claims.slope_interval`), beside the theorem's exponent over the same grid (the
log-log slope of its bound above with constants 1), judged one-sided as an upper bound in the direction of the
variable's regime (:func:`dpnc_reproduce.claims.rate_within_bound`: as d grows, or as ε and β shrink, n(β) grows no
faster than the theorem's n over the same points, up to the tolerance of the logs the theorem drops over that grid;
α is reported but not judged: the instance's target region grows with α). A seed whose n(β) is censored at a point (not
reached by n_max: [n_max, ∞); reached at the first n: [1, n_start]) is kept as censored
(:class:`dpnc_reproduce.claims.Censored`), counted, and above the declared fraction leaves no verdict.
"""

from dpnc_reproduce.nonsmooth_rates.experiment import EXPERIMENT, NonsmoothRates
from dpnc_reproduce.nonsmooth_rates.run import FULL, QUICK, RateRow, RatesConfig

__all__ = ["EXPERIMENT", "NonsmoothRates", "FULL", "QUICK", "RateRow", "RatesConfig"]
