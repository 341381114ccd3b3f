"""The tiny kl-rates grid and constructed rows (rates over x per seed, inner-check arms) the tests
and the snapshots share."""

import dataclasses
import math

from dpnc_reproduce import protocol
from dpnc_reproduce.kl_rates import claims as kl_claims
from dpnc_reproduce.kl_rates import run as exp

TINY = exp.KLRatesConfig(
    objectives=("quadratic", "power-1.5"),
    dims=(1, 4),
    nsrs=(1e4, 1e5, 1e6),
    high_dims=(400,),
    high_nsrs=(1e2, 1e3, 1e4),
    prox_objectives=("power-3",),
    prox_samples=(50, 100),
    max_inner_iters=20,
    rhos=(0.01,),
    rho_sweep_n=10**6,
    rho_sweep_dim=4,
    seeds=2,
    inner_check_n=50,
    inner_check_seeds=2,
)


def spider_rows(excess, seeds: int = 3, algorithm: str = "proximal-point") -> list:
    """Constructed n-sweep rows of one (algorithm, power-1.5, d = 1): excess(x, seed) at x = 10^4 …
    10^8."""
    return [
        exp.KLRow(
            algorithm=algorithm,
            objective="power-1.5",
            kappa=1.5,
            gamma=1 / 3,
            L0=3.0,
            d=1,
            n=int(x),
            rho=1.0,
            nsr=x,
            x=x,
            sweep="n",
            seed=s,
            excess=excess(x, s),
            grad_norm=0.1,
            F0=1.0,
            start_excess=0.7,
            bound=1.0 * x**-1.4,
            bound_dim_term=None,
            bound_noise_term=None,
            regime="κ/2" if algorithm in exp.ADAPTIVE else "κ",
            grad_bound=None,
            lower_bound=None,
            steps=1,
            queries=1,
            rho_spent=1.0,
            epsilon=7.8,
            private=True,
            sensitivity="declared",
            region_distance=0.9,
            radius=1.0,
            seconds=0.0,
        )
        for x in (1e4, 1e5, 1e6, 1e7, 1e8)
        for s in range(seeds)
    ]


def rate_claim(rows) -> protocol.Claim:
    (claim,) = [
        c
        for c in kl_claims.check_claims(rows)
        if "falls no slower than the theorem's upper bound" in c.statement
    ]
    assert "[" in claim.evidence  # the interval is printed
    if claim.status:  # KL-Spider: judged on its explicit bound, the slope rule's reading kept
        assert "the slope rule alone:" in claim.evidence and claim.holds is None
    else:
        assert ("Reason:" in claim.evidence) == (
            claim.holds is not True
        )  # a reason wherever it does not hold
    return claim


def rate_verdict(rows) -> bool | None:
    return rate_claim(rows).holds


def check_rows(ratio: float, seeds: int = 12) -> list:
    """Constructed inner-check rows at κ = 3: the 16× arm's excess is ``ratio`` times the 1× arm's
    (with seed noise); an optimisation-limited excess would fall 16^1.5 = 64×, the claim's midpoint
    is 8×."""
    base = spider_rows(
        lambda x, s: 1e-4 * (1 + 0.3 * math.sin(s)), seeds=seeds, algorithm="proximal-point"
    )
    return [
        dataclasses.replace(
            r,
            sweep="inner",
            kappa=3.0,
            inner_factor=f,
            inner_steps=int(10 * f),
            inner_rule=int(10 * f),
            excess=r.excess * (ratio if f > 1 else 1.0) * (1 + 0.2 * math.cos(3 * r.seed + f)),
        )
        for r in base
        if r.x == 1e4
        for f in (1.0, 16.0)
    ]
