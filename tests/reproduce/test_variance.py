"""The variance tools (Satterthwaite's degrees of freedom, the two-way components, the detectable
effect) against hand formulas and numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpnc_reproduce import claims
from dpnc_reproduce.variance import (
    minimum_detectable_effect,
    powered,
    satterthwaite_df,
    t95,
    two_way_mean_variance,
)


def test_satterthwaite_df_against_hand_formula():
    parts = [(4.0, 2), (1.0, 9), (0.5, 999)]
    assert satterthwaite_df(parts) == pytest.approx(5.5**2 / (16 / 2 + 1 / 9 + 0.25 / 999))
    assert satterthwaite_df([(2.0, 3)]) == pytest.approx(3)  # one part: its own df
    assert satterthwaite_df([(0.0, 2), (1.0, 7)]) == pytest.approx(7)  # a zero part adds nothing
    assert satterthwaite_df([(1.0, math.inf)]) == math.inf
    assert t95(math.inf) == pytest.approx(stats.norm.ppf(0.975))
    assert t95(3.9) == pytest.approx(stats.t.ppf(0.975, 3.9))
    with pytest.raises(ValueError, match="df > 0"):
        satterthwaite_df([(1.0, 0)])


def test_minimum_detectable_effect_detects_its_effect_with_the_stated_power():
    """Simulated seeds with a known effect: at an effect equal to the design's MDE (k = 10, σ = 1,
    one-sided at 5 %, 80 % power) the claim "effect > 0" holds in about 80 % of designs — the
    noncentral t's exact power — and at a quarter of it far less often."""
    rng = np.random.default_rng(7)
    k, sigma, sims = 10, 1.0, 4000
    sample = rng.normal(0.0, sigma, k)
    design = claims.mean_interval(
        list(sample)
    )  # an interval records the standard error it was built from
    assert design.se == pytest.approx(np.std(sample, ddof=1) / math.sqrt(k)) and design.df == k - 1
    template = claims.Interval(0.0, -1.0, 1.0, k, df=k - 1, se=sigma / math.sqrt(k))
    mde = minimum_detectable_effect(template, one_sided=True)
    assert mde == pytest.approx(
        (stats.t.ppf(0.95, k - 1) + stats.t.ppf(0.8, k - 1)) * sigma / math.sqrt(k)
    )
    exact = stats.nct.sf(
        stats.t.ppf(0.95, k - 1), k - 1, mde / (sigma / math.sqrt(k))
    )  # the test's true power

    def rate(effect):  # a one-sided test at 5 %: the 90 % two-sided interval's low end above 0
        hits = 0
        for _ in range(sims):
            x = rng.normal(effect, sigma, k)
            hits += x.mean() - stats.t.ppf(0.95, k - 1) * x.std(ddof=1) / math.sqrt(k) > 0
        return hits / sims

    at_mde = rate(mde)
    assert abs(at_mde - exact) < 4 * math.sqrt(exact * (1 - exact) / sims) and 0.75 < exact < 0.85
    assert rate(mde / 4) < 0.3
    # powered(): the paper's distance to the threshold against the design's MDE
    assert powered(template, 0.9, 0.0, one_sided=True) == (True, pytest.approx(mde))
    assert powered(template, 0.1, 0.0, one_sided=True)[0] is False
    assert minimum_detectable_effect(claims.mean_interval([1.0])) == math.inf  # one seed: no design


def _anova_reference(d):
    """The two-way random-effects estimate of Var(grand mean), by numpy from the sums of squares (no
    truncation)."""
    d = np.asarray(d, dtype=float)
    k, m = d.shape
    total = ((d - d.mean()) ** 2).sum()
    ss_s = m * ((d.mean(axis=1) - d.mean()) ** 2).sum()
    ss_e = k * ((d.mean(axis=0) - d.mean()) ** 2).sum()
    ms_r = (total - ss_s - ss_e) / ((k - 1) * (m - 1))
    return (ss_s / (k - 1) + ss_e / (m - 1) - ms_r) / (k * m)


def test_two_way_variance_against_known_components_and_numpy():
    """Simulated seeds × examples with known components σ_S, σ_E, σ_e: the ANOVA estimate of
    Var(grand mean) is unbiased for σ²_S/k + σ²_E/m + σ²_e/(km) (the old two-part sum is biased up
    by σ²_e/(km)), equals an independent numpy computation, and its t interval covers the true mean
    about 95 % of the time."""
    rng = np.random.default_rng(3)
    k, m, sd_s, sd_e, sd_r = 5, 40, 0.5, 1.0, 3.0
    truth = sd_s**2 / k + sd_e**2 / m + sd_r**2 / (k * m)
    estimates, old, covered, sims = [], [], 0, 3000
    for _ in range(sims):
        d = (
            rng.normal(0, sd_s, (k, 1)) + rng.normal(0, sd_e, (1, m)) + rng.normal(0, sd_r, (k, m))
        ) + 2.0
        var, df = two_way_mean_variance(d.tolist())
        estimates.append(var)
        old.append(d.mean(axis=1).var(ddof=1) / k + d.mean(axis=0).var(ddof=1) / m)
        covered += abs(d.mean() - 2.0) <= t95(df) * math.sqrt(var)
    se_of_mean = np.std(estimates) / math.sqrt(sims)
    assert (
        abs(np.mean(estimates) - truth) < 4 * se_of_mean + 0.02 * truth
    )  # truncation at 0 adds a little
    assert np.mean(old) - truth == pytest.approx(
        sd_r**2 / (k * m), rel=0.1
    )  # the interaction counted twice
    assert abs(covered / sims - 0.95) < 4 * math.sqrt(0.95 * 0.05 / sims)
    # no component truncated: exactly the numpy reference
    d = (
        rng.normal(0, 2.0, (4, 1)) + rng.normal(0, 2.0, (1, 30)) + rng.normal(0, 0.5, (4, 30))
    ).tolist()
    assert two_way_mean_variance(d)[0] == pytest.approx(_anova_reference(d))
    # the paired accuracy difference uses it (0/1 correctness, in points)
    a = (rng.random((3, 200)) < 0.7).astype(int).tolist()
    b = (rng.random((3, 200)) < 0.6).astype(int).tolist()
    iv = claims.paired_accuracy_difference(a, b)
    var, df = two_way_mean_variance((100 * (np.array(a) - np.array(b))).tolist())
    assert iv.se == pytest.approx(math.sqrt(var)) and iv.df == pytest.approx(df)
    assert iv.estimate == pytest.approx(100 * (np.mean(a) - np.mean(b)))
