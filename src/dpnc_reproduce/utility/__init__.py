"""Useful on a user's own problem? Each paper's algorithm against DP-GD / DP-SGD baselines at equal (ε, δ).

``dpnc reproduce utility`` runs, on problems whose constants are **public** (declared from the data domain and
the loss, never read off the private data),

* ``least-squares``: synthetic least squares (:class:`~dpnc.problems.kl.LeastSquares`, d = 7, the balanced design of
  ``LeastSquares.generate``: rows ±q_{i mod d} on the unit sphere, label noise 0.05; domain ‖a‖ ≤ 1, |b| ≤ 1.2, region
  radius 2, μ = ⌊n/d⌋/n from the design: PL with public γ, L0, L1; x̂ its exact minimiser);
* ``logistic-cancer``: binary logistic regression on scikit-learn's breast-cancer data, ``logistic-digits``:
  10-class logistic regression on its 8×8 digits (:class:`~dpnc.problems.logistic.LogisticRegression`: public
  per-example features, a small ridge λ so that the PL constants are public too);
* ``relu-cancer``: a one-hidden-layer ReLU network with hinge loss on the same public breast-cancer features
  (:class:`~dpnc.problems.networks.TwoLayerReLU`: nonsmooth, nonconvex, L0 on a ball);
* ``l1-regression``: synthetic least absolute deviations (nonsmooth, convex, L0 = 1);
* ``max-affine``: synthetic max of affine pieces, f(x) = max_j ⟨A_j, x⟩ + c_j
  (:class:`~dpnc.problems.nonsmooth.MaxOfAffine`, d = 10, 4 pieces, rows on the unit sphere: nonsmooth, convex,
  L0 = 1; start ‖x0‖ = 1, Φ = 2 from a declared ‖x*‖ ≤ 1; x̂ its exact minimiser, a linear program),

every method of :data:`METHODS` (the baselines, and the paper methods under their registry names, with their
constructors and options as data in :data:`~dpnc_reproduce.utility.methods.PAPER_METHODS`) for
ε ∈ ``epsilons``, n ∈ ``samples`` (real data: capped at the training pool) and ``seeds`` seeds (the data split or
draw and the noise change with the seed). Rows: the excess empirical risk F(x) − F(x̂) against the non-private
optimum x̂ of the same training set (the ε = ∞ reference row; for the network, the best of a long non-private
run, so the excess may dip below 0), test loss and accuracy, wall time, function evaluations and gradients, and
the ε the accountant says was spent. Claims and tables: :mod:`dpnc_reproduce.utility.report`.

**Parameters.** The baselines use hand-set, documented defaults (:func:`dpgd`, :func:`dpsgd`); ``dp-gd-tuned``
and ``dp-sgd-tuned`` tune the baselines' step size privately (:func:`tuned`: random stopping, the tuning charged
to the same ε); DPZero and the papers' methods use their families' ``practical(...)`` settings, untuned (the
``*:theory`` methods, e.g. ``klt:theory``: the theorems' ``from_theory``). Wrapping a factory in a private
tuner (:func:`tuned`) is a one-line change in :func:`methods`.

**What ``--full`` trims to finish in about half an hour on 2 cores** (measured per task, one ε and seed, the 12
methods: least squares ≈ 17 s at n = 10⁴ and ≈ 45–110 s at n = 2·10⁴; digits ≈ 95 s with m = d = 650 directions,
≈ 26 s with m = 128): n ∈ {100, 1000, 10000} (two decades for the synthetic problems; the real ones capped at their
pools), the digits problem at its whole pool only (n = 1438; ``largest_only``), and ZTC's and KLT's zeroth-order
oracles with m = min(d, 128) directions (``zo_directions``; binds on digits, d = 650, and the network, d = 257). No
method's privacy changes: m only sets how many directions average each estimate (the clip radius follows m).
"""

from dpnc_reproduce.utility.config import FULL, QUICK, UtilityConfig
from dpnc_reproduce.utility.experiment import EXPERIMENT, Utility
from dpnc_reproduce.utility.run import UtilityRow

__all__ = ["FULL", "QUICK", "UtilityConfig", "EXPERIMENT", "Utility", "UtilityRow"]
