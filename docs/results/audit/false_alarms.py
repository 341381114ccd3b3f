"""How often `dpnc audit` flags a *correct* mechanism (a false alarm) and catches a broken one, at CI's run counts.

Each line audits one (mechanism, variant) `repeats` times with fresh secret noise and counts the violations.
Run: `nice python docs/results/audit/false_alarms.py > docs/results/audit/false_alarms.md` (tens of minutes).
"""

import time

import torch

from dpnc.audit import run_audit

CASES = [("dpzero", None, 20000, 100), ("dp-gd", None, 20000, 100), ("dpgd0th", None, 20000, 100),
         ("dpzero-optimizer", None, 2000, 10), ("dpzero-optimizer", "sigma", 2000, 10),
         ("make-private-dpzero", None, 300, 10), ("make-private-dp-sgd", None, 300, 10),
         ("dpzero-optimizer", "other-batch", 300, 10), ("dpzero-optimizer", "train-batchnorm", 300, 10),
         ("dpzero-poisson", "realised-batch", 2000, 10)]

if __name__ == "__main__":
    torch.set_num_threads(1)
    print("| mechanism | variant | runs per dataset | flagged / audits | seconds per audit |")
    print("|---|---|---|---|---|")
    for name, broken, runs, repeats in CASES:
        start = time.time()
        flagged = sum(run_audit(name, runs, broken, sigma_factor=1.5).violation for _ in range(repeats))
        print(f"| {name} | {broken or 'correct'} | {runs} | {flagged} / {repeats} | "
              f"{(time.time() - start) / repeats:.1f} |", flush=True)
