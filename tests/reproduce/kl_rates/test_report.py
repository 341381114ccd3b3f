"""kl-rates' report: the slopes are fitted beside the predictions, and adaptive GD's tolerance is
what its dropped logarithms add over the grid."""

import math

import numpy as np
import pytest

from dpnc_reproduce.kl_rates import report
from tests.reproduce.kl_rates.rows import TINY, rate_verdict, spider_rows


def test_slopes_are_fitted_beside_the_predictions(tiny):
    rows = report.slopes(tiny.rows)
    spider = [s for s in rows if s["algorithm"] == "kl-spider"]
    assert {(s["objective"], s["d"]) for s in spider} == {
        (o, d) for o in TINY.objectives for d in TINY.dims
    }
    for s in rows:
        assert s["points"] >= 2 and s["x_min"] < s["x_max"]
        assert math.isfinite(s["slope"]) and math.isfinite(s["bound_slope"])
        assert s["predicted"] == pytest.approx(report.predicted(s["regime"], s["kappa"]))
    for s in spider:
        assert s["predicted"] == -s["kappa"] and s["slope"] < -0.5  # the excess falls with n√ρ
    assert any(s["algorithm"] == "proximal-point" and s["predicted"] == -3.0 for s in rows)
    assert any(s["algorithm"] == "adaptive-gd" and s["regime"] == "κ/2" for s in rows)


def test_adaptive_gd_tolerance_is_its_dropped_logs_over_the_grid():
    # Thm 4 drops ℓ = ln(n√ρ/β): in the κ/2 regime its term carries ℓ^{κ/2}; the tolerance is that
    # factor's least-squares slope over the grid (n√ρ = x√d), computed here with numpy
    xs, d, kappa = [1e4, 1e5, 1e6, 1e7, 1e8], 100, 1.0
    ell = np.log(np.array(xs) * math.sqrt(d) / report.BETA)
    expected = kappa / 2 * np.polyfit(np.log(xs), np.log(ell), 1)[0]
    tol = report.tolerance("adaptive-gd", "κ/2", kappa, d, xs)
    assert tol.value == pytest.approx(expected) and 0 < tol.value < 0.1
    # an excess falling 0.03 slower than its x^-1.4 bound holds within that tolerance, not without
    # it
    rows = spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.37, algorithm="adaptive-gd")
    assert rate_verdict(rows) is True
    assert (
        rate_verdict(spider_rows(lambda x, s: (1 + 0.05 * s) * x**-1.37)) is False
    )  # proximal: tolerance 0
