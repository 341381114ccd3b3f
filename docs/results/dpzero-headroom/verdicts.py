"""The declared claims of summary.md (item 2), judged on the rows of table2-trec-top2/result.json (the reproduction's
own result) with dpnc_reproduce.claims (95 % t intervals paired by test example and seed; Fieller for the share).

Writes result.json in the claims format the docs pages read (statement, holds, evidence, status, facts): a claim
declared undecidable before its run keeps that status ("underpowered for this design", with its declared MDE) only
while its interval straddles the threshold (the interval decides first; tests/reproduce/test_interval_first.py);
the SST-2 caption claim's MDE comes from mde_sst2_caption.json (declared without a run).
Run from the repository root:
    .venv/bin/python docs/results/dpzero-headroom/verdicts.py > docs/results/dpzero-headroom/result.json
"""
import json
import sys
from pathlib import Path

from dpnc_reproduce.claims import below, exceeds, paired_accuracy_difference, paired_ratio

HERE = Path(__file__).parent
result = json.load(open(sys.argv[1] if len(sys.argv) > 1 else HERE / "table2-trec-top2" / "result.json"))
mde = json.load(open(HERE / "mde.json"))
sst2 = json.load(open(HERE / "mde_sst2_caption.json"))
rows = [x for x in result["rows"] if x.get("direction", "gaussian") == "gaussian" and x["task"] == "TREC"]
# the seeds whose four runs (zero-shot, MeZO, DPZero at ε = 6 and 2) all exist, in run order
runs = {(x["seed"], x["method"], x["epsilon"]) for x in rows}
seeds = [s for s in dict.fromkeys(x["seed"] for x in rows)
         if {(s, "zero-shot", None), (s, "mezo", None), (s, "dpzero", 6.0), (s, "dpzero", 2.0)} <= runs]


def bits(method, eps=None):
    out = {x["seed"]: [int(c) for c in x["correct"]] for x in rows
           if x["method"] == method and (eps is None or x["epsilon"] == eps)}
    return [out[s] for s in seeds]


def points(iv):
    return (f"{iv.estimate:+.1f} [{iv.low:+.1f}, {iv.high:+.1f}] points (95 % t interval, Welch–Satterthwaite df "
            f"{iv.df:.1f}, {iv.seeds} seeds, {iv.note})")


def read(iv, threshold, holds):
    """The numbers a claim is read from (its facts): the interval, the threshold, what the interval alone says."""
    return {"estimate": iv.estimate, "low": iv.low, "high": iv.high, "seeds": iv.seeds, "threshold": threshold,
            "interval_holds": float("nan") if holds is None else float(holds)}


def share(iv):
    return f"{iv.estimate:.2f} [{iv.low:.2f}, {iv.high:.2f}] (95 % Fieller, df {iv.df:.1f}, {iv.seeds} seeds)"


def gain(d):
    return [[100 * (u - v) for u, v in zip(p, q)] for p, q in zip(d, zs)]


zs, mz, d6, d2 = bits("zero-shot"), bits("mezo"), bits("dpzero", 6.0), bits("dpzero", 2.0)
claims = []
for text, a, b, key in [("MeZO beats zero-shot", mz, zs, "MeZO - zero-shot"),
                        ("DPZero at ε = 6 beats zero-shot", d6, zs, "DPZero e6 - zero-shot"),
                        ("DPZero at ε = 2 beats zero-shot", d2, zs, "DPZero e2 - zero-shot")]:
    iv = paired_accuracy_difference(a, b)
    claims.append({"statement": f"TREC, top-2: {text} (Table 2; gain > 0 points)", "holds": exceeds(iv, 0.0),
                   "evidence": f"{points(iv)}; declared MDE {mde[key]['mde_80']:.1f} points", "status": "",
                   "facts": read(iv, 0.0, exceeds(iv, 0.0)) | {"declared_mde": mde[key]["mde_80"]}})
iv = paired_accuracy_difference(mz, d6)
claims.append({"statement": "TREC, top-2: DPZero at ε = 6 loses at most 2.6 points to MeZO (Table 2's largest drop)",
               "holds": None, "evidence": f"{points(iv)} (MeZO − DPZero ε=6; verdict of the interval alone: "
               f"{ {True: 'holds', False: 'fails', None: 'no signal'}[below(iv, 2.6)] })",
               "status": f"underpowered for this design (declared before the runs: MDE "
                         f"{mde['MeZO - DPZero e6']['mde_80']:.1f} points, the seed part with 2 df)",
               "facts": read(iv, 2.6, below(iv, 2.6)) | {"declared_mde": mde["MeZO - DPZero e6"]["mde_80"]}})
r6, r2 = (paired_ratio(gain(d), gain(mz)) for d in (d6, d2))
claims.append({"statement": "TREC, top-2: DPZero at ε = 6 keeps at least 0.90 of MeZO's gain over zero-shot",
               "holds": None, "evidence": f"{share(r6)}; at ε = 2 (a measurement): {share(r2)}",
               "status": "underpowered for this design (declared before the runs: Fieller half-width ≈ 0.6 at the "
                         "expected 15-point gain)", "facts": read(r6, 0.9, exceeds(r6, 0.9))})
tost = {k.split(",")[0]: v["designs"]["k=3, m=872"]["mde_tost_80"] for k, v in sst2.items()}
need = {k.split(",")[0]: v["seeds_needed_m872"] for k, v in sst2.items()}
iv = paired_accuracy_difference(mz, d2)
claims.append({"statement": "SST-2: DPZero at ε = 2 is within 1 point of MeZO (the Table 3 caption)", "holds": None,
               "evidence": "not run: with 3 seeds and the 872 test sentences the TOST MDE is "
               + ", ".join(f"{v:.1f} ({k})" for k, v in tost.items()) + " points, above the 1-point margin; "
               + ", ".join(f"{v} ({k})" for k, v in need.items()) + " seeds would be needed (mde_sst2_caption.json); "
               f"on TREC top-2, as a measurement: MeZO − DPZero ε=2 {points(iv)}",
               "status": "underpowered for this design (declared without a run)", "facts": {"not_run": 1}})
private = next(c for c in result["claims"] if "(ε, δ)-DP" in c["statement"])
claims.append({"statement": "every private run is (ε, δ)-DP by its own ledger (RDP and PLD ≤ the target)",
               "holds": private["holds"], "evidence": private["evidence"], "status": "",
               "facts": private.get("facts", {})})
accuracy = {name: [100 * sum(v) / len(v) for v in b]
            for name, b in (("zero-shot", zs), ("mezo", mz), ("dpzero-eps6", d6), ("dpzero-eps2", d2))}
print(json.dumps({"experiment": "dpzero-headroom: the declared Table 2/3 claims, TREC top-2, T = 200",
                  "seeds": seeds, "test_examples": len(zs[0]), "accuracy": accuracy, "claims": claims,
                  "command": f"{result['command']}; python docs/results/dpzero-headroom/verdicts.py",
                  "seconds": result["seconds"]}, indent=1, ensure_ascii=False))
