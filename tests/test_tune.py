"""dpnc.tune: private tuning by random stopping (Papernot & Steinke 2022) on a toy problem and its
contract."""

import dataclasses
import math
import re

import numpy as np
import pytest
import torch

from dpnc import tune
from dpnc.algorithms.dpzero import DPGD
from dpnc.privacy import Accountant, Gaussian, NoiseSource, RandomStopping, mean_sensitivity
from dpnc.problems import Quadratic

DELTA = 1e-5
PROBLEM = Quadratic.synthetic(5, "identity", n=500, seed=0)
T, C, NM, BOUND = 10, 5.0, 2.0, 20.0  # DP-GD steps, clip, noise multiplier; score clipping bound
ETAS = (0.001, 0.5)  # a bad step size (no progress in T steps) and a good one


def dpgd_candidate(eta, calls=None):
    def run(acct, noise):
        if calls is not None:
            calls.append(eta)
        r = DPGD(eta=eta, C=C, noise_multiplier=NM, steps=T).run(
            PROBLEM,
            torch.zeros(PROBLEM.d, dtype=torch.float64),
            noise=noise,
            accountant=acct,
            generator=torch.Generator().manual_seed(0),
        )
        score = tune.private_score(
            PROBLEM.losses_at(r.output),
            bound=BOUND,
            noise_multiplier=NM,
            noise=noise,
            accountant=acct,
        )
        return r, score

    return run


def dpgd_cost():
    cost = Accountant()
    d = mean_sensitivity(C, PROBLEM.n, "replace-one")
    cost.record(Gaussian(d, NM * d), T)
    cost.record(tune.score_release(n=PROBLEM.n, bound=BOUND, noise_multiplier=NM, accountant=cost))
    return cost


def constant(value, calls=None, spend=1):
    """A candidate that spends ``spend`` unit Gaussians (σ = 5) and scores ``value``."""

    def run(acct, noise):
        if calls is not None:
            calls.append(value)
        acct.record(Gaussian(1.0, 5.0, secret=noise.secret), spend)
        return f"run {value}", value

    return run


def unit_cost(count=1):
    cost = Accountant()
    cost.record(Gaussian(1.0, 5.0), count)
    return cost


def test_tuning_picks_the_good_step_size_with_high_probability():
    # K ~ geometric(γ = 0.1), two candidates: the good one is never tried with probability
    # E[2^{-K}] = γ/(1 + γ) = 0.091; the score noise (σ = 2·2·20/500 = 0.16) is small beside the gap
    # F(bad) − F(good) ≈ 2.5, so when tried it wins. Over 50 seeds: ≥ 40 picks of the good one
    # (P[Bin(50, 0.091) ≥ 11] ≈ 0.006), and every tuning that tried it picked it.
    cost, wins, tried_and_lost = dpgd_cost(), 0, 0
    values = {
        eta: float(PROBLEM.value(dpgd_candidate(eta)(Accountant(), NoiseSource())[0].output))
        for eta in ETAS
    }
    assert values[0.5] < values[0.001] - 2.0
    for seed in range(50):
        calls = []
        tuned = tune.random_stopping(
            [dpgd_candidate(eta, calls) for eta in ETAS],
            costs=cost,
            eta=1.0,
            gamma=0.1,
            noise=NoiseSource.for_testing(seed),
            accountant=Accountant(),
        )
        good = tuned.index == 1
        wins += good
        tried_and_lost += (0.5 in calls) and not good
        assert tuned.result.algorithm.eta == ETAS[tuned.index]
    assert wins >= 40, wins
    assert tried_and_lost == 0


def test_tuned_epsilon_exceeds_one_run_by_a_constant_and_is_recorded_once():
    cost = dpgd_cost()
    acct = Accountant()
    tuned = tune.random_stopping(
        [dpgd_candidate(eta) for eta in ETAS],
        costs=cost,
        eta=1.0,
        gamma=0.1,
        noise=NoiseSource(),
        accountant=acct,
    )
    assert len(acct.ledger) == 1 and isinstance(acct.ledger[0].release, RandomStopping)
    assert acct.ledger[0].release.candidates == (tune._ledger(cost),) * 2
    one, tuned_eps = cost.epsilon(DELTA), tuned.report(DELTA).epsilon_rdp
    assert (
        one < tuned_eps < 2 * one
    )  # 8.55 → 13.7 here; E[K] = 10 runs composed would cost far more
    ten = Accountant()
    for _ in range(10):
        ten.extend(cost)
    assert tuned_eps < ten.epsilon(DELTA)
    assert tuned.report(DELTA).private


def test_output_holds_only_private_quantities():
    tuned = tune.random_stopping(
        [constant(1.0), constant(2.0)],
        costs=unit_cost(),
        eta=0.0,
        gamma=0.05,
        noise=NoiseSource(),
        accountant=Accountant(),
    )
    assert {f.name for f in dataclasses.fields(tuned)} == {"index", "result", "score", "accountant"}
    value = (1.0, 2.0)[tuned.index]  # the winner among those tried (which were tried is secret)
    assert tuned.score == value and tuned.result == f"run {value}"


def test_secret_draws_differ_between_tunings_with_the_same_public_seed():
    torch.manual_seed(0)
    np.random.seed(0)
    sequences = []
    for _ in range(3):
        calls = []
        torch.manual_seed(0)  # a public seed must not fix K or the draws
        tune.random_stopping(
            [constant(float(v), calls) for v in range(4)],
            costs=unit_cost(),
            eta=1.0,
            gamma=0.1,
            noise=NoiseSource(),
            accountant=Accountant(),
        )
        sequences.append(tuple(calls))
    # Equal K has probability Σ P[K=k]² = γ/(2 − γ) ≈ 0.05, and equal draws then 4^{−K}: three equal
    # ≈ 1e-4.
    assert len(set(sequences)) > 1


def test_a_seeded_source_replays_and_is_marked_not_private():
    runs = []
    for _ in range(2):
        calls, acct = [], Accountant()
        tune.random_stopping(
            [constant(float(v), calls) for v in range(4)],
            costs=unit_cost(),
            eta=1.0,
            gamma=0.1,
            noise=NoiseSource.for_testing(7),
            accountant=acct,
        )
        runs.append(tuple(calls))
        assert not acct.secret and not acct.report(DELTA).private
    assert runs[0] == runs[1]


def test_the_best_tried_run_wins_by_the_score_direction_and_nan_is_worst():
    for minimize in (True, False):
        for _ in range(20):
            calls = []
            grid = [constant(3.0, calls), constant(math.nan, calls), constant(1.0, calls)]
            tuned = tune.random_stopping(
                grid,
                costs=unit_cost(),
                eta=1.0,
                gamma=0.3,
                noise=NoiseSource(),
                accountant=Accountant(),
                minimize=minimize,
            )
            tried = [v for v in calls if not math.isnan(v)]
            if not tried:  # only NaN tried: it is the output
                assert math.isnan(tuned.score) and tuned.index == 1
            else:
                assert tuned.score == (min(tried) if minimize else max(tried))
                assert tuned.index == {3.0: 0, 1.0: 2}[tuned.score]


def test_a_run_that_spends_more_than_declared_is_refused_and_counted():
    acct = Accountant()
    with pytest.raises(ValueError, match="spent more than its declared cost") as refused:
        tune.random_stopping(
            [constant(1.0, spend=3)],
            costs=unit_cost(2),
            eta=1.0,
            gamma=0.5,
            noise=NoiseSource(),
            accountant=acct,
        )
    # The refusal does not name the secret candidate drawn (before: "candidate 0 ... costs[0]").
    assert not re.search(r"\d", str(refused.value)), str(refused.value)
    kinds = [type(e.release).__name__ for e in acct.ledger]
    assert kinds == ["Gaussian", "RandomStopping"]  # the overspending run, then the tuning itself


def test_a_failing_candidate_still_leaves_the_tuning_in_the_ledger():
    def broken(acct, noise):
        acct.record(Gaussian(1.0, 5.0))
        raise RuntimeError("diverged")

    acct = Accountant()
    with pytest.raises(RuntimeError):
        tune.random_stopping(
            [broken], costs=unit_cost(), eta=1.0, gamma=0.5, noise=NoiseSource(), accountant=acct
        )
    assert [type(e.release).__name__ for e in acct.ledger] == ["RandomStopping"]


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(candidates=[]), "candidates must be a non-empty sequence of callables"),
        (dict(candidates=[1.0]), "candidates must be a non-empty sequence of callables"),
        (dict(costs=[unit_cost()]), r"costs must be one Accountant or one per candidate \(2\)"),
        (dict(costs=Accountant("add/remove")), "costs must be under the accountant's relation"),
        (dict(eta=-2.0), "eta must be a finite number > -1"),
        (dict(gamma=1.5), r"gamma must be in the open interval \(0, 1\)"),
        (dict(noise=None), "noise must be a NoiseSource"),
    ],
)
def test_bad_arguments_fail_before_anything_runs(kwargs, message):
    calls = []
    args = (
        dict(
            candidates=[constant(1.0, calls), constant(2.0, calls)],
            costs=unit_cost(),
            eta=1.0,
            gamma=0.1,
            noise=NoiseSource(),
            accountant=Accountant(),
        )
        | kwargs
    )
    with pytest.raises(ValueError, match=message):
        tune.random_stopping(**args)
    assert calls == []


def test_noise_multiplier_puts_the_whole_tuning_within_the_budget():
    """tune.noise_multiplier: the returned σ/Δ makes random stopping over 3 candidates (each T DP-GD
    steps and a score at that σ/Δ) (ε, δ)-DP by the accountant, and 2 % less noise would not (the
    search's 1 % bracket); it needs more noise than a single run at the same ε, and more candidates
    need no more (Theorem 2 is independent of the grid size)."""

    def cost(m):
        acct = Accountant()
        d = mean_sensitivity(C, PROBLEM.n, "replace-one")
        acct.record(Gaussian(d, m * d), T)
        acct.record(
            tune.score_release(n=PROBLEM.n, bound=BOUND, noise_multiplier=m, accountant=acct)
        )
        return acct

    def tuned_epsilon(m, candidates=3):
        acct = Accountant()
        ledger = tuple((e.release, e.composed_count) for e in cost(m).ledger)
        acct.record(RandomStopping((ledger,) * candidates, 1.0, 0.25))
        return acct.epsilon(DELTA, "rdp")

    for epsilon in (1.0, 4.0):
        m = tune.noise_multiplier(
            cost, candidates=3, eta=1.0, gamma=0.25, epsilon=epsilon, delta=DELTA
        )
        assert tuned_epsilon(m) <= epsilon < tuned_epsilon(m / 1.02)
        assert (
            cost(m).epsilon(DELTA, "rdp") < epsilon
        )  # one run alone spends less: the tuning costs noise
        assert tune.noise_multiplier(
            cost, candidates=30, eta=1.0, gamma=0.25, epsilon=epsilon, delta=DELTA
        ) == pytest.approx(m)
    with pytest.raises(ValueError, match="candidates must be an integer >= 1"):
        tune.noise_multiplier(cost, candidates=0, eta=1.0, gamma=0.25, epsilon=1.0, delta=DELTA)
