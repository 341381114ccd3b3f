"""The audit's power: which σ/k it detects at CI's run counts; the CI cases' bounds and times.

``nice python -m dpnc.audit.power --out docs/results/audit`` writes power.json and summary.md. The
true ε of σ/k is its own ledger's, so true/claimed is exact; "detected": some statistic's held-out
lower bound exceeds the claimed ε(δ) at its δ (95 % family-wise confidence). See docs/audit.md."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from dpnc.audit.core import run_audit, summary_markdown
from dpnc.audit.mechanisms import MECHANISMS

POWER = {
    "dpzero": (20000, (1.1, 1.25, 1.5, 2.0)),
    "dpzero-poisson": (20000, (1.1, 1.25, 1.5, 2.0)),
    "dpzero-optimizer": (2000, (1.25, 1.5, 2.0)),
}


def true_epsilon(name: str, factor: float) -> float:
    """The ledger's ε at the nominal δ of the mechanism run with σ/factor (what σ/factor really
    spends)."""
    mechanism = MECHANISMS[name]()
    m = mechanism.multiplier() / factor
    if hasattr(mechanism, "train"):
        accountant = mechanism.train(mechanism.data(0), m, None)[2]
    else:
        accountant = mechanism._run(
            torch.zeros(1, dtype=torch.long),
            torch.ones(1, dtype=torch.float64),
            m,
            mechanism._sampler(None),
        )[2]
    return accountant.report(mechanism.delta).epsilon


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs/results/audit"))
    parser.add_argument(
        "--ci", action="store_true", help="also run every CI case (tests/audit/test_audit.py)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, (runs, factors) in POWER.items():
        for k in factors:
            start = time.perf_counter()
            result = run_audit(name, runs, "sigma", sigma_factor=k)
            row = {
                "mechanism": name,
                "runs": runs,
                "sigma_factor": k,
                "claimed_epsilon": result.claimed_epsilon,
                "true_epsilon": true_epsilon(name, k),
                "detected": result.violation,
                "statistic": result.statistic,
                "audit_delta": result.audit_delta,
                "claimed_epsilon_at_audit_delta": result.claimed_epsilon_at_audit_delta,
                "epsilon_lower_bound": result.epsilon_lower_bound,
                "seconds": time.perf_counter() - start,
            }
            row["ratio"] = row["true_epsilon"] / row["claimed_epsilon"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    results = []
    if args.ci:
        import importlib.util

        spec = importlib.util.spec_from_file_location("t", Path("tests/audit/test_audit.py"))
        cases = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cases)
        for name, broken, runs, factor in cases.CASES:
            result = run_audit(name, runs, broken, sigma_factor=factor)
            results.append(result.to_dict())
            print(name, broken, result.violation, f"{result.seconds:.1f}s", flush=True)
    (args.out / "power.json").write_text(
        json.dumps({"power": rows, "ci": results}, indent=2) + "\n"
    )
    lines = [
        "# dpnc audit: measured power and CI cases",
        "",
        f"Produced by `nice python -m dpnc.audit.power --out {args.out}{' --ci' if args.ci else ''}` on 2 shared "
        "CPU cores, one torch thread; 95 % family-wise confidence; secret noise (a rerun draws new numbers).",
        "",
        "## Power: σ/k detected?",
        "",
        "| mechanism | runs per dataset | k | claimed ε (δ = 1e-5) | true ε of σ/k | true/claimed | detected | "
        "decisive statistic | δ | claimed ε(δ) | ε(δ) ≥ | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['mechanism']} | {r['runs']} | {r['sigma_factor']:g} | {r['claimed_epsilon']:.3f} | "
            f"{r['true_epsilon']:.3f} | {r['ratio']:.2f} | {'**yes**' if r['detected'] else 'no'} | "
            f"{r['statistic']} | {r['audit_delta']:g} | {r['claimed_epsilon_at_audit_delta']:.3f} | "
            f"{r['epsilon_lower_bound']:.3f} | {r['seconds']:.0f} |"
        )
    if results:
        lines += ["", "## The CI cases (tests/audit/test_audit.py)", "", summary_markdown(results)]
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
