"""Log-log fits: the slope tolerance is what the dropped logarithms add over the grid."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpnc_reproduce.loglog import GROWS, SHRINKS, dropped_log_tolerance, loglog_fit


def test_tolerance_is_what_the_dropped_logs_add_to_the_slope_over_the_grid():
    ns = [10.0**k for k in range(3, 10)]
    tol = dropped_log_tolerance(ns, [(ns, 1.0)], regime=GROWS, formula="ln n")
    ref = np.polyfit(np.log(ns), np.log(np.log(ns)), 1)[0]  # least-squares slope of ln ln n on ln n
    assert tol.value == pytest.approx(ref) and 0.05 < tol.value < 0.14 and "ln n" in tol.formula
    # exactly the shift the dropped factor makes in a fitted slope: y = n^-1 (ln n)^2 fits at −1 +
    # 2·tol
    ys = [n**-1.0 * math.log(n) ** 2 for n in ns]
    assert loglog_fit(ns, ys) == pytest.approx(-1.0 + 2 * tol.value)
    assert dropped_log_tolerance(ns, [(ns, 2.0)], regime=GROWS, formula="").value == pytest.approx(
        2 * ref
    )
    # the grid decides: ln d over d ∈ {4..64} adds far more than ln n over 10³..10⁹
    ds = [4.0, 8.0, 16.0, 32.0, 64.0]
    assert (
        dropped_log_tolerance(ds, [(ds, 1.0)], regime=GROWS, formula="").value
        == pytest.approx(np.polyfit(np.log(ds), np.log(np.log(ds)), 1)[0])
        == pytest.approx(0.3907, abs=1e-4)
    )
    # x → 0: a log of N(ε) ∝ 1/ε grows as ε shrinks, a steeper slope: a tolerance on the steep side
    eps = [0.5, 2.0, 8.0]
    N = [1000 / e for e in eps]
    shrink = dropped_log_tolerance(eps, [(N, 1.0)], regime=SHRINKS, formula="ln N")
    assert (
        shrink.value == pytest.approx(-np.polyfit(np.log(eps), np.log(np.log(N)), 1)[0])
        and shrink.value > 0
    )
    # a dropped factor pointing away from the violating side makes no tolerance
    assert dropped_log_tolerance(eps, [(N, 1.0)], regime=GROWS, formula="").value == 0.0
    with pytest.raises(ValueError, match="> 1"):
        dropped_log_tolerance(eps, [([0.5, 2.0, 3.0], 1.0)], regime=GROWS, formula="")
