"""What the utility reproduction computes: its rows and one task (:func:`run_one`: the reference and
every method on one problem at (ε, n, seed), with the compute-matched DP-SGD beside each paper
method)."""

from __future__ import annotations

import math
import time
import zlib
from dataclasses import dataclass

import torch

from dpnc.certify import goldstein_certificate
from dpnc.privacy import Accountant, Budget, NoiseSource
from dpnc_reproduce.utility.config import Instance, Task, UtilityConfig, instance
from dpnc_reproduce.utility.methods import (
    MATCHED,
    REFERENCE,
    Outcome,
    compute,
    matched_dpsgd,
    methods,
)


@dataclass(frozen=True)
class UtilityRow:
    """One run of one method (or the non-private reference, ε = ∞) on one problem, n and seed.

    ``status``: "ok", or "n/a: why" (the method does not apply, or its theorem admits no run at this
    n). ``excess_risk``: F_train(x) − F_train(x̂); ``test_accuracy``: NaN for regression;
    ``epsilon_spent``: the tightest ε(δ) of the run's accountant (∞ for the reference).
    ``train_loss``: F_train(x); ``start_gap``: F_train(x0) − F_train(x̂), the start's excess (the
    progress margin's yardstick). ``certificate``: the Goldstein certificate
    (:func:`dpnc.certify.goldstein_certificate`, an upper bound on ‖∂F_test(x)‖_radius on the
    held-out set) at the output, ``start_certificate`` the same at x0, ``radius`` twice the O2NC
    method's smoothing (NaN where not computed: smooth problems, methods other than O2NC and their
    compute-matched baselines). A compute-matched baseline's row is named ``matched:<method>``
    (family "matched")."""

    problem: str
    method: str
    family: str
    epsilon: float
    n: int
    seed: int
    status: str
    excess_risk: float
    test_loss: float
    test_accuracy: float
    seconds: float
    evaluations: int
    gradients: int
    epsilon_spent: float
    private: bool
    note: str
    train_loss: float = math.nan
    start_gap: float = math.nan
    certificate: float = math.nan
    start_certificate: float = math.nan
    radius: float = math.nan


def certificate(
    config: UtilityConfig, inst: Instance, x: torch.Tensor, radius: float, seed: int
) -> float:
    """The Goldstein certificate at x of radius ``radius`` on the held-out set (public points: the
    ball's uniform samples and rim pairs from a public generator; no privacy cost)."""
    gen = torch.Generator().manual_seed(1000 * config.seed + seed)
    try:
        return float(
            goldstein_certificate(
                inst.test.gradient,
                x.detach(),
                radius,
                samples=config.certificate_samples,
                rim=config.rim,
                generator=gen,
            ).bound
        )
    except (
        ValueError
    ):  # e.g. a non-finite gradient in the ball: no certificate (NaN), never a crash of the task
        return math.nan


def _measure(
    problem: str,
    method: str,
    family: str,
    epsilon: float,
    seed: int,
    inst: Instance,
    out: Outcome,
    seconds: float,
    config: UtilityConfig | None = None,
) -> UtilityRow:
    ref = float(inst.train.value(inst.reference))
    acc = float(inst.test.accuracy(out.x)) if inst.classification else math.nan
    loss = float(inst.train.value(out.x))
    cert = start = math.nan
    if config is not None and not inst.smooth and math.isfinite(out.radius):
        cert = certificate(config, inst, out.x, out.radius, seed)
        start = certificate(config, inst, inst.x0, out.radius, seed)
    return UtilityRow(
        problem,
        method,
        family,
        epsilon,
        inst.train.n,
        seed,
        "ok",
        loss - ref,
        float(inst.test.value(out.x)),
        acc,
        seconds,
        out.evaluations,
        out.gradients,
        out.epsilon_spent,
        out.private,
        out.note,
        loss,
        float(inst.train.value(inst.x0)) - ref,
        cert,
        start,
        out.radius,
    )


def tasks(config: UtilityConfig) -> list[Task]:
    def runs(p, e):
        return (
            p not in config.largest_only
            or not config.largest_only_epsilons
            or e in config.largest_only_epsilons
        )

    return [
        (p, e, n, s)
        for p in config.problems
        for e in config.epsilons
        if runs(p, e)
        for n in config.sizes(p)
        for s in range(config.seeds)
    ]


def cost(config: UtilityConfig, task: Task) -> float:
    # seconds per example of the 12 methods, measured on this machine (relative only: the scheduling
    # order)
    return task[2] * {
        "logistic-digits": 5,
        "relu-cancer": 8,
        "logistic-cancer": 2,
        "l1-regression": 0.5,
    }.get(task[0], 1)


def run_one(config: UtilityConfig, task: Task) -> tuple[UtilityRow, ...]:
    """The reference row and one row per method, on the same data (paired by seed)."""
    problem, epsilon, n, seed = task
    inst = instance(config, problem, n, seed)
    budget = Budget(epsilon, config.dp_delta)
    registry = methods(config)
    ref = Outcome(inst.reference, 0, 0, math.inf, False, "non-private optimum (ε = ∞)")
    rows = [_measure(problem, REFERENCE, "reference", epsilon, seed, inst, ref, 0.0)]
    for name in config.methods:
        method = registry[name]
        gen = torch.Generator().manual_seed(
            zlib.crc32(f"{config.seed}/{problem}/{n}/{seed}/{name}".encode())
        )
        tic = time.perf_counter()
        try:
            out = method.run(config, inst, budget, gen)
        except ValueError as error:  # a theorem with no admissible run at this n, d, ε
            out, why = None, f"n/a: {error}"
        else:
            why = "n/a: not applicable to this problem"
        seconds = time.perf_counter() - tic if method.timed else math.nan
        if out is None:
            nan = math.nan
            rows.append(
                UtilityRow(
                    problem,
                    name,
                    method.family,
                    epsilon,
                    inst.train.n,
                    seed,
                    why[:200],
                    nan,
                    nan,
                    nan,
                    seconds,
                    0,
                    0,
                    nan,
                    False,
                    "",
                )
            )
            continue
        rows.append(
            _measure(problem, name, method.family, epsilon, seed, inst, out, seconds, config)
        )
        if config.matched and method.family == "dpnc":
            try:
                rows.append(_matched(config, inst, budget, problem, epsilon, seed, name, out))
            except ValueError as error:
                nan = math.nan
                rows.append(
                    UtilityRow(
                        problem,
                        MATCHED + name,
                        "matched",
                        epsilon,
                        inst.train.n,
                        seed,
                        f"n/a: {error}"[:200],
                        nan,
                        nan,
                        nan,
                        nan,
                        0,
                        0,
                        nan,
                        False,
                        "",
                    )
                )
    return tuple(rows)


def _matched(config, inst, budget, problem, epsilon, seed, name, out: Outcome) -> UtilityRow:
    """The compute-matched DP-SGD of the paper method ``name`` (:func:`matched_dpsgd`), on the same
    data and seed; certified at the method's radius where the method is certified."""
    cost = compute(out.evaluations, out.gradients)
    algorithm = matched_dpsgd(config, inst, budget, cost)
    public = (
        f"{config.seed}/{problem}/{inst.train.n}/{seed}/m/{name}"  # the matched run's public seed
    )
    gen = torch.Generator().manual_seed(zlib.crc32(public.encode()))
    tic = time.perf_counter()
    run = algorithm.run(
        inst.train, inst.x0, noise=NoiseSource(), accountant=Accountant("add/remove"), generator=gen
    )
    seconds = time.perf_counter() - tic
    spent = run.report(budget.delta)
    matched = Outcome(
        run.output,
        run.stats.evaluations,
        run.stats.gradients,
        spent.epsilon,
        spent.private,
        f"B = {algorithm.batch_size}, T = {algorithm.steps} for {cost:.3g} gradients",
        out.radius,
    )
    return _measure(
        problem, MATCHED + name, "matched", epsilon, seed, inst, matched, seconds, config
    )
