"""Every private nonsmooth method of the two papers, measured the same way: the samples n each needs to reach β.

The four methods of Kornowski–Liu–Talwar and Zhang–Tran–Cutkosky's two oracles,

* ``zo-o2nc``: ZTC's O2NC with the private variance-reduced oracle and tree (Theorem 4.9);
* ``zo-o2nc:naive``: ZTC's naive oracle (Algorithm 6, Appendix E), the baseline its Theorem 4.9 improves on;
* ``klt``: KLT's single-pass zeroth-order oracle (Algorithm 3, Theorem 3.1);
* ``klt:first-order``: KLT's single-pass first-order oracle (Algorithm 5, Theorem 6.1);
* ``klt:multi-pass``: KLT's multi-pass (ERM) zeroth-order oracle (Algorithm 4, Theorem 4.1), T capped,

run on the radial objectives of :mod:`dpnc_reproduce.nonsmooth_rates` (per-example L = 1 exactly, the
population Goldstein norm in closed form, seeds varying the data and the algorithm), with its measurement: per seed,
n doubles until the expected population ‖∂F‖_2α over the output draw reaches β, and n(β) is read off. Claims:
each method's exponent of n(β) in d and β against its theorem's, and the papers' comparisons as paired (same data,
same seed) log₂ ratios of n(β) (:data:`~dpnc_reproduce.nonsmooth_rates.report.COMPARISONS`): variance-reduced against
naive and KLT against ZTC at equal function evaluations, first-order against zeroth-order, multi-pass against single
pass. It is ``nonsmooth-rates`` with every method, a d sweep only and its own name and sizes.
"""

from dpnc_reproduce.nonsmooth_compare.experiment import EXPERIMENT, NonsmoothCompare
from dpnc_reproduce.nonsmooth_compare.run import FULL, QUICK

__all__ = ["EXPERIMENT", "NonsmoothCompare", "FULL", "QUICK"]
