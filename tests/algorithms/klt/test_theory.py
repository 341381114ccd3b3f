"""Kornowski–Liu–Talwar's theorems as calculators (docs/papers.md, KLT §6): the v2 radius and rate
against v1's, the sample bound inverting the rate, and the first-order oracle's fewer directions."""

import itertools

import pytest

from dpnc.algorithms.klt import theory as klt_theory


@pytest.mark.parametrize("n_steps, d", itertools.product((10, 10_000), (1, 4, 100)))
def test_v2_radius_adds_a_fourth_term_below_the_first(n_steps, d):
    kw = dict(n_steps=n_steps, d=d, L=1.0, Phi=2.0, alpha=0.3, epsilon=1.0)
    T = n_steps
    first = (kw["Phi"] ** 2 * kw["alpha"] / T**2) ** (1 / 3)
    fourth = first / d ** (1 / 6)
    assert fourth <= first
    assert klt_theory.single_pass_radius(**kw) <= klt_theory.single_pass_radius(
        **kw, schedule="v1-legacy"
    )
    assert klt_theory.single_pass_radius(**kw) <= fourth * (1 + 1e-12)


@pytest.mark.parametrize("d", (1, 4, 64))
def test_v2_bound_is_at_least_v1s_and_the_sample_bound_inverts(d):
    kw = dict(d=d, L=1.0, Phi=1.0, alpha=0.1, epsilon=1.0)
    v1 = klt_theory.rate("zeroth-order", n=5000, schedule="v1-legacy", **kw)
    assert klt_theory.rate("zeroth-order", n=5000, **kw) >= v1
    for beta in (0.01, 0.1, 1.0):
        n = klt_theory.samples_needed("zeroth-order", beta=beta, **kw)
        # Each of the two terms of n caps its own term of the rate at β; AM-GM caps the third at
        # 4^{-1/5}β.
        assert 0.7 * beta <= klt_theory.rate("zeroth-order", n=n, **kw) <= 3 * beta
        n = klt_theory.samples_needed("multi-pass", beta=beta, **kw)
        assert klt_theory.rate("multi-pass", n=n, **kw) == pytest.approx(beta)


@pytest.mark.parametrize("d", (2, 10, 100))
def test_first_order_needs_d_squared_fewer_directions(d):
    kw = dict(d=d, alpha=0.1, D=1e-3, B1=50, B2=1, delta=1e-6)
    zo, fo = (
        klt_theory.paper_directions("zeroth-order", **kw),
        klt_theory.paper_directions("first-order", **kw),
    )
    assert fo <= zo / d**2 + 1
