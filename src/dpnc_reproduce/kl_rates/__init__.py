"""Menart et al. under the KL condition: excess risk against n√ρ/√d for every algorithm and several κ.

The paper is theory only (docs/papers.md, Menart et al. §4); this is its first experiment. On objectives with a known
(γ, κ)-KL constant (:mod:`dpnc.problems.kl`) it runs, for a grid of n√ρ and d, several seeds each,

* ``kl-spider``: Algorithm 1 (Theorem 1), κ ∈ [1, 2], predicted excess ∝ (n√ρ/√d)^{−κ};
* ``adaptive-gd``: Algorithm 3 (Theorem 4), κ ∈ [1, 2] unknown to it, predicted
  (√d/(n√ρ))^{2κ/(4−κ)} + (1/(n√ρ))^{κ/2}: the first term rules while d ≳ n√ρ, the second beyond;
* ``adaptive-gd+select``: Algorithm 3+ (Theorem 5), the same run at ρ' = 8ρ/9 plus the exponential-mechanism
  selection (ε = √ρ', bounded range ρ'/8), so the whole release spends ρ; Theorem 5 bounds ‖∇F‖ of the output;
* ``proximal-point``: Algorithm 2 (Theorem 2) with noisy projected GD inside, κ ≥ 2, d = 1, predicted
  (n√ρ)^{−κ}; its inner solves run :func:`~dpnc.algorithms.menart.proximal.statistical_inner_steps` steps (times
  ``inner_scale``), which grow like (n√ρ)² so that the inner optimisation error stays below the statistical term
  at every n√ρ (Theorem 9's own n²ρ·log² steps are out of reach). A check at one n (``inner_check_n``) runs
  ``inner_check_factor`` times as many inner steps: if the excess does not move, the steps are not what limits
  the rate (the rule keeps the same ratio of the two errors at every n).

Every run records F(w) − F*, ‖∇F(w)‖, updates and gradient queries, ρ spent (from the accountant), ε at δ
(zCDP conversion), what guarantees the sensitivity (``"declared"`` here: data-free objectives have no per-example
gradients to clip, so every iterate is projected onto the region where L0 is declared) and the largest distance of
an iterate from the region's centre (inner iterates for the proximal point method), wall time, the theorem's
bound at the run's constants and the class lower bound.
n and ρ enter these algorithms only through n√ρ (the objectives are data-free: n copies of one example), so
n√ρ is varied through n at ρ = 1, and a small ρ sweep at fixed n checks that the runs depend on n√ρ alone.
Log-log slopes of the excess against x = n√ρ/√d are fitted per seed and per (algorithm, objective, d, regime)
over the points where the theorem's bound is below F0 (above it, the theorem promises nothing); each theorem's
rate is judged one-sided, as the upper bound it is, on the 95 % t interval over the seeds: the slope is at most the
bound's own slope over the same points plus the tolerance of the logs that bound drops over those points
(:func:`dpnc_reproduce.claims.rate_within_bound`, x → ∞; :func:`dpnc_reproduce.kl_rates.report.tolerance`), with a
reason measured on the rows where it does not hold.

Run it with :func:`dpnc_reproduce.protocol.run_experiment` (``EXPERIMENT``, a config) and write it with
:func:`dpnc_reproduce.protocol.write`; the summary, the figures and ``slopes.csv`` are built by
:mod:`dpnc_reproduce.kl_rates.report` (the config, tasks and runs: :mod:`dpnc_reproduce.kl_rates.run`).
"""

from dpnc_reproduce.kl_rates.experiment import EXPERIMENT, KLRates
from dpnc_reproduce.kl_rates.run import FULL, QUICK, KLRatesConfig, KLRow, KLTask

__all__ = ["EXPERIMENT", "KLRates", "FULL", "QUICK", "KLRatesConfig", "KLRow", "KLTask"]
