"""Golden outputs of every algorithm family, recorded before the API refactor (one contract per
algorithm).

Each ``case_<name>()`` is a short *call* of the public API on a tiny seeded configuration and
returns a flat ``dict[str, float | list[float]]``. After a refactor, rewrite the calls (new
signatures); the numbers stored in ``outputs.json`` must not change (``tests/suites/test_golden.py``
compares them to abs 1e-12 + rel 1e-12).

Determinism: privacy noise from ``NoiseSource.for_testing(seed)``, subsampled batches from
``PoissonSampler.for_testing`` / ``ShuffleSampler.for_testing``, public randomness from fixed
``torch.Generator().manual_seed(...)``, float64, one torch thread. Every case is therefore "not
private" (``secret`` = 0.0) by construction. ε is the accountant's RDP ε at δ = 1e-5 (inf where no
noise).

Regenerate (only on purpose, on the code the goldens describe): ``python -m tests.suites.golden.cases
    --write``.

Findings while recording (current code, before the refactor): every algorithm family could be made
deterministic through its public API. ``make_private`` seeds both its Poisson sampler and its noise
from the one ``testing_seed`` (noise = ``testing_seed + 1``), and ``kl.adaptive_gd(select=True)``
passes its own ``noise`` on to ``select_stationary``; neither creates a secret ``NoiseSource`` when
a seeded one is given."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import TensorDataset

import dpnc
from dpnc.algorithms import menart as kl
from dpnc.algorithms.base import Setting
from dpnc.algorithms.dpzero import DPGD, DPGD0th, DPZero, MeZO
from dpnc.algorithms.klt import KornowskiLiuTalwar
from dpnc.algorithms.ztc import ZhangTranCutkosky
from dpnc.privacy import Accountant, NoiseSource
from dpnc.privacy.budget import ZCDP, Budget
from dpnc.problems import Quadratic
from dpnc.problems import kl as klp
from dpnc.problems.base import Constants
from dpnc.problems.nonsmooth import L1Regression
from dpnc.sampling import FullBatch, PoissonSampler, ShuffleSampler
from dpnc.tier import zeroth_order as optim

DELTA = 1e-5
OUTPUTS = Path(__file__).with_name("outputs.json")
Value = float | list[float]


# --- helpers (flatten results; no algorithm logic here) -------------------------------------------


def _floats(t) -> list[float]:
    return [float(v) for v in torch.as_tensor(t, dtype=torch.float64).flatten()]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _privacy(acct: Accountant) -> dict[str, Value]:
    return {
        "epsilon_rdp": float(acct.epsilon(DELTA, "rdp")),
        "releases": float(acct.releases),
        "secret": float(acct.secret),
    }


def _quadratic() -> Quadratic:
    return Quadratic.synthetic(6, "sqrt", n=40, seed=0)


def _x0(d: int, K: int | None = None) -> torch.Tensor:
    return torch.randn((d,) if K is None else (K, d), generator=_gen(0), dtype=torch.float64)


def _dpzero_result(run, logs, problem: Quadratic) -> dict[str, Value]:
    """The output point, per-step logs (collected by the run's callback), final train loss and the
    ledger."""
    out = {
        "x": _floats(run.output),
        "seeds": [float(s) for s in run.stats.seeds],
        "loss": _floats(
            torch.stack([log.loss.mean(-1) if log.loss.ndim else log.loss for log in logs])
        ),
        "released": _floats(torch.stack([log.released for log in logs])),
        "clipped_fraction": _floats(torch.stack([log.clipped_fraction for log in logs])),
        "final_train_loss": _floats(problem.value(run.output)),
    }
    return {**out, **_privacy(run.accountant)}


# --- algorithms/dpzero.py: Algorithm.run(...) on the synthetic quadratic --------------------------


def _run(algorithm, sampler, *, T=8, K=None, relation="replace-one", direction="gaussian"):
    problem, logs = _quadratic(), []
    algorithm = dataclasses.replace(algorithm, steps=T, direction=direction)
    run = algorithm.run(
        problem,
        _x0(problem.d, K),
        noise=NoiseSource.for_testing(1),
        accountant=Accountant(relation),
        generator=_gen(3),
        sampler=sampler,
        callback=lambda t, log: logs.append(log),
    )
    return _dpzero_result(run, logs, problem)


def case_dpzero_fullbatch():
    return _run(DPZero(eta=0.1, lam=1e-3, C=1.0, noise_multiplier=1.0), FullBatch(40))


def case_dpzero_fullbatch_sphere():
    return _run(
        DPZero(eta=0.1, lam=1e-3, C=1.0, noise_multiplier=1.0), FullBatch(40), direction="sphere"
    )


def case_dpzero_discrete():
    return _run(
        DPZero(eta=0.1, lam=1e-3, C=1.0, noise_multiplier=1.0, discrete=True), FullBatch(40)
    )


def case_dpzero_poisson():
    return _run(
        DPZero(eta=0.1, lam=1e-3, C=1.0, noise_multiplier=1.0),
        PoissonSampler.for_testing(40, 8, seed=2),
        relation="add/remove",
    )


def case_dpzero_shuffle():
    return _run(
        DPZero(eta=0.1, lam=1e-3, C=1.0, noise_multiplier=1.0),
        ShuffleSampler.for_testing(40, 8, seed=2),
    )


def case_dpzero_grid():
    """K = 2 runs sharing their directions: per-run step size and clipping threshold."""
    algorithm = DPZero(
        eta=torch.tensor([0.1, 0.05], dtype=torch.float64),
        lam=1e-3,
        C=torch.tensor([0.5, 2.0], dtype=torch.float64),
        noise_multiplier=1.0,
    )
    return _run(algorithm, FullBatch(40), K=2)


def case_mezo_fullbatch():
    return _run(MeZO(eta=0.1, lam=1e-3), FullBatch(40))


def case_mezo_poisson():
    return _run(
        MeZO(eta=0.1, lam=1e-3), PoissonSampler.for_testing(40, 8, seed=2), relation="add/remove"
    )


def case_dpgd0th_fullbatch():
    return _run(DPGD0th(eta=0.1, lam=1e-3, C=1.0, noise_multiplier=1.0), FullBatch(40))


def case_dpgd0th_poisson():
    return _run(
        DPGD0th(eta=0.1, lam=1e-3, C=1.0, noise_multiplier=1.0),
        PoissonSampler.for_testing(40, 8, seed=2),
        relation="add/remove",
    )


def case_dpgd_fullbatch():
    return _run(DPGD(eta=0.1, C=1.0, noise_multiplier=1.0), FullBatch(40))


def case_dpgd_poisson():
    return _run(
        DPGD(eta=0.1, C=1.0, noise_multiplier=1.0),
        PoissonSampler.for_testing(40, 8, seed=2),
        relation="add/remove",
    )


# --- optim.py and engine.py: the optimizers on a tiny float64 nn.Linear ---------------------------


def _linear_data(n: int):
    X = torch.randn(n, 4, generator=_gen(0), dtype=torch.float64)
    return X, X @ torch.tensor([1.0, -2.0, 0.5, 1.5], dtype=torch.float64)


def _linear_model() -> nn.Module:
    model = nn.Linear(4, 1, dtype=torch.float64)
    with torch.no_grad():  # a seeded generator, not torch's global RNG
        model.weight.copy_(torch.randn(1, 4, generator=_gen(1), dtype=torch.float64))
        model.bias.copy_(torch.randn(1, generator=_gen(2), dtype=torch.float64))
    return model.eval()


def _per_example(out, y):
    return (out.squeeze(-1) - y) ** 2


def _model_result(model, losses, acct) -> dict[str, Value]:
    return {
        "params": _floats(torch.cat([p.detach().flatten() for p in model.parameters()])),
        "losses": [float(v) for v in losses],
        **_privacy(acct),
    }


def case_optim_dpzero_poisson():
    X, y = _linear_data(32)
    model, acct = _linear_model(), Accountant("add/remove")
    opt = optim.DPZeroOptimizer(
        model.parameters(),
        lr=0.05,
        clip=2.0,
        smoothing=1e-3,
        noise_multiplier=1.0,
        sampler=PoissonSampler.for_testing(32, 8, seed=2),
        accountant=acct,
        noise=NoiseSource.for_testing(1),
        seed=3,
        model=model,
        data=(X, y),
    )
    losses = [opt.step(lambda xb, yb: _per_example(model(xb), yb)) for _ in range(6)]
    return _model_result(model, losses, acct)


def case_optim_dpzero_fullbatch():
    X, y = _linear_data(32)
    model, acct = _linear_model(), Accountant()
    opt = optim.DPZeroOptimizer(
        model.parameters(),
        lr=0.05,
        clip=2.0,
        smoothing=1e-3,
        noise_multiplier=1.0,
        sampler=FullBatch(32),
        accountant=acct,
        noise=NoiseSource.for_testing(1),
        seed=3,
        direction="sphere",
        model=model,
        data=(X, y),
    )
    losses = [opt.step(lambda xb, yb: _per_example(model(xb), yb)) for _ in range(6)]
    return _model_result(model, losses, acct)


def case_optim_mezo_shuffle():
    X, y = _linear_data(32)
    model, acct = _linear_model(), Accountant()
    opt = optim.MeZOOptimizer(
        model.parameters(),
        lr=0.05,
        smoothing=1e-3,
        sampler=ShuffleSampler.for_testing(32, 8, seed=2),
        accountant=acct,
        seed=3,
        model=model,
        data=(X, y),
    )
    losses = [opt.step(lambda xb, yb: _per_example(model(xb), yb)) for _ in range(6)]
    return _model_result(model, losses, acct)


def _make_private(optimizer: str, **kwargs):
    X, y = _linear_data(16)
    model = _linear_model()
    # batch_size = n (rate 1) and a small ε: calibrating by PLD at q < 1 or larger ε takes 1-10 s
    opt, loader, acct = dpnc.make_private(
        model,
        data=TensorDataset(X, y),
        n=16,
        optimizer=optimizer,
        steps=6,
        batch_size=16,
        lr=0.05,
        seed=3,
        testing_seed=4,
        **kwargs,
    )
    losses = []
    for _ in loader:
        losses.append(opt.step(lambda xb, yb: _per_example(model(xb), yb)))
    out = _model_result(model, losses, acct)
    out["noise_multiplier"] = float(opt.param_groups[0].get("noise_multiplier", 0.0))
    return out


def case_make_private_dpzero():
    return _make_private("dpzero", target_epsilon=0.5, delta=DELTA, clip=2.0)


def case_make_private_mezo():
    return _make_private("mezo")


# --- algorithms/zo_o2nc.py: Zhang–Tran–Cutkosky on L1 regression ----------------------------------


def _o2nc_result(run) -> dict[str, Value]:
    stats = run.stats
    return {
        "output": _floats(run.output),
        "x_last": _floats(run.last),
        "block_averages": _floats(run.trace.block_averages),
        "output_block": float(stats.output_block),
        "steps": float(stats.steps),
        "max_increment": float(stats.max_increment),
        "max_move": float(stats.max_move),
        "samples_used": float(stats.samples_used),
        "evaluations": float(stats.evaluations),
        "clipped": float(stats.clipped),
        "beyond_radius": float(stats.beyond_radius),
        **_privacy(run.accountant),
    }


def _zo_o2nc(oracle: str):
    problem = L1Regression.synthetic(200, 3, seed=0)
    config = ZhangTranCutkosky.from_theory(
        Setting(Constants(L0=1.0), 200, 3, gap=1.0),
        ZCDP.from_rdp_rho(1.0),
        smoothing=0.2,
        oracle=oracle,
    )
    run = config.run(
        problem,
        torch.zeros(3, dtype=torch.float64),
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
        generator=_gen(0),
    )
    return {
        **_o2nc_result(run),
        "T": float(config.period),
        "K": float(config.epochs),
        "sigma": config.sigma,
        "eta": config.eta,
    }


def case_zo_o2nc_variance_reduced():
    return _zo_o2nc("variance-reduced")


def case_zo_o2nc_naive():
    return _zo_o2nc("naive")


# --- algorithms/klt.py: Kornowski–Liu–Talwar oracles ----------------------------------------------


def _klt(oracle: str, n: int, **kwargs):
    problem = L1Regression.synthetic(n, 3, seed=0)
    config = KornowskiLiuTalwar.from_theory(
        Setting(Constants(L0=1.0), n, 3, gap=1.0),
        Budget(2.0, 1e-6),
        smoothing=0.1,
        oracle=oracle,
        **kwargs,
    )
    run = config.run(
        problem,
        torch.ones(3, dtype=torch.float64),
        noise=NoiseSource.for_testing(1),
        accountant=Accountant("replace-one"),
        generator=_gen(5),
    )
    return {
        **_o2nc_result(run),
        "T": float(config.steps),
        "M": float(config.block),
        "sigma_anchor": config.sigma_anchor,
        "sigma_increment": config.sigma_increment,
        "eta": config.eta,
    }


def case_klt_zeroth_order():
    return _klt("zeroth-order", 600, m=3)


def case_klt_first_order():
    return _klt("first-order", 600, m=3)


def case_klt_multi_pass():
    return _klt("multi-pass", 200, max_steps=20, m=2)


# --- algorithms/kl.py: Menart et al. on KL objectives ---------------------------------------------


def _kl_result(run, *keys: str) -> dict[str, Value]:
    iterates = run.stats.iterates
    out = {
        "w": _floats(run.output),
        "iterates_count": float(iterates.shape[0]),
        "iterates_last": _floats(iterates[-3:]),
        "rho_spent": float(run.accountant.rho()),
        **_privacy(run.accountant),
    }
    for key in keys:
        v = getattr(run.stats, {"T": "rounds"}.get(key, key))
        out[key] = [float(x) for x in v] if isinstance(v, (list, tuple)) else float(v)
    return out


def case_kl_spider_least_squares():
    f = klp.LeastSquares.generate(3, 200, seed=0)
    run = kl.KLSpider.of(Setting.of(f), rho=1.0).run(
        f,
        None,
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
        generator=torch.Generator(),
    )
    return _kl_result(run, "updates", "rounds_stopped_early", "F0", "bound", "queries")


def case_kl_spider_power_growth():
    """Data-free, so n = 10⁶ is cheap; the run takes 76 steps (the least-squares case above stops
    every round)."""
    f = klp.PowerGrowth(1.5, 2, n=10**6)
    run = kl.KLSpider.of(Setting.of(f), rho=1.0).run(
        f,
        f.w_star + 0.6,
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
        generator=torch.Generator(),
    )
    return _kl_result(run, "updates", "rounds_stopped_early", "F0", "bound", "queries")


def case_kl_proximal_point():
    f = klp.PowerGrowth(3.0, 2, n=200, radius=1.0)
    run = kl.ProximalPoint.of(Setting.of(f), rho=1.0, beta=0.1, max_inner_iters=30).run(
        f,
        torch.tensor([0.5, -0.3], dtype=torch.float64),
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
        generator=torch.Generator(),
    )
    return _kl_result(run, "T", "inner_steps", "inner_max_distance", "queries")


def case_kl_adaptive_gd():
    f = klp.SinePL.generate(4, 500, seed=1, radius=2.0)
    run = kl.AdaptiveGD.of(Setting.of(f), rho=1.0).run(
        f,
        torch.full((4,), 0.5, dtype=torch.float64),
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
        generator=torch.Generator(),
    )
    return _kl_result(run, "ell", "sigma_hat", "sigmas", "charges", "filter", "steps", "queries")


def case_kl_adaptive_gd_select():
    f = klp.SinePL.generate(4, 500, seed=1, radius=2.0)
    run = kl.AdaptiveGD.of(Setting.of(f), rho=1.0, select=True).run(
        f,
        torch.full((4,), 0.5, dtype=torch.float64),
        noise=NoiseSource.for_testing(0),
        accountant=Accountant(),
        generator=torch.Generator(),
    )
    return _kl_result(run, "sigmas", "charges", "steps", "selected")


def case_kl_select_stationary():
    f = klp.Quadratic(2, n=40)
    iterates = torch.stack(
        [f.w_star + t * torch.tensor([0.05, 0.0], dtype=torch.float64) for t in range(6)]
    )
    noise, acct = NoiseSource.for_testing(11), Accountant()
    draws = [
        kl.select_stationary(f, iterates, rho=0.04, L0=f.constants.L0, noise=noise, accountant=acct)
        for _ in range(20)
    ]
    return {"selected": [float(i) for i in draws], "rho": float(acct.rho()), **_privacy(acct)}


CASES = {
    name.removeprefix("case_"): fn
    for name, fn in sorted(globals().items())
    if name.startswith("case_") and callable(fn)
}


def compute(name: str) -> dict[str, Value]:
    """One case's output, computed with one torch thread (fixed reduction order)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return CASES[name]()
    finally:
        torch.set_num_threads(threads)


def main(argv: list[str]) -> None:
    results, times = {}, {}
    for name in CASES:
        start = time.perf_counter()
        results[name] = compute(name)
        times[name] = time.perf_counter() - start
        print(f"{name:36s} {times[name]:6.2f} s", file=sys.stderr)
    if "--write" in argv:
        OUTPUTS.write_text(json.dumps(results, sort_keys=True, indent=1) + "\n")
        print(f"wrote {OUTPUTS}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
