"""The declared claims of summary.md (item 2), judged on the rows of table2-trec-top2/reproduction-result.json
(the reproduction's result.json, renamed: a result.json must sit in a docs page's verdicts block) with
dpnc_reproduce.claims (95 % t intervals paired by test example and seed; Fieller for the share).
Run from the repository root:
    .venv/bin/python docs/results/dpzero-headroom/verdicts.py > docs/results/dpzero-headroom/verdicts.json
"""
import json
import sys
from pathlib import Path

from dpnc_reproduce.claims import below, exceeds, paired_accuracy_difference, paired_ratio, within

HERE = Path(__file__).parent
result = json.load(open(sys.argv[1] if len(sys.argv) > 1 else HERE / "table2-trec-top2" / "reproduction-result.json"))
rows = [x for x in result["rows"] if x.get("direction", "gaussian") == "gaussian" and x["task"] == "TREC"]
# the seeds whose four runs (zero-shot, MeZO, DPZero at ε = 6 and 2) all exist, in run order
runs = {(x["seed"], x["method"], x["epsilon"]) for x in rows}
seeds = [s for s in dict.fromkeys(x["seed"] for x in rows)
         if {(s, "zero-shot", None), (s, "mezo", None), (s, "dpzero", 6.0), (s, "dpzero", 2.0)} <= runs]


def bits(method, eps=None):
    out = {x["seed"]: [int(c) for c in x["correct"]] for x in rows
           if x["method"] == method and (eps is None or x["epsilon"] == eps)}
    return [out[s] for s in seeds]


zs, mz, d6, d2 = bits("zero-shot"), bits("mezo"), bits("dpzero", 6.0), bits("dpzero", 2.0)


def show(iv):
    return {"estimate": iv.estimate, "low": iv.low, "high": iv.high, "df": iv.df, "seeds": iv.seeds, "note": iv.note}


out = {"seeds": seeds, "test_examples": len(zs[0]),
       "accuracy": {name: [100 * sum(v) / len(v) for v in b] for name, b in
                    (("zero-shot", zs), ("mezo", mz), ("dpzero-eps6", d6), ("dpzero-eps2", d2))},
       "claims": {}}
for key, a, b, judge in [("1 MeZO - zero-shot > 0", mz, zs, lambda iv: exceeds(iv, 0.0)),
                         ("2 DPZero e6 - zero-shot > 0", d6, zs, lambda iv: exceeds(iv, 0.0)),
                         ("3 DPZero e2 - zero-shot > 0", d2, zs, lambda iv: exceeds(iv, 0.0)),
                         ("4 MeZO - DPZero e6 < 2.6 (declared undecidable)", mz, d6, lambda iv: below(iv, 2.6)),
                         ("6 |MeZO - DPZero e2| < 1 (declared: not run on SST-2; TREC as a measurement)", mz, d2,
                          lambda iv: within(iv, 0.0, 1.0))]:
    iv = paired_accuracy_difference(a, b)
    out["claims"][key] = {**show(iv), "verdict": judge(iv)}
for eps, d in ((6, d6), (2, d2)):
    x = [[100 * (u - v) for u, v in zip(p, q)] for p, q in zip(d, zs)]
    y = [[100 * (u - v) for u, v in zip(p, q)] for p, q in zip(mz, zs)]
    iv = paired_ratio(x, y)
    key = f"5 share of MeZO's gain kept by DPZero e{eps} > 0.90" + (" (declared undecidable)" if eps == 6 else
                                                                    " (measurement)")
    out["claims"][key] = {**show(iv), "verdict": exceeds(iv, 0.90)}
print(json.dumps(out, indent=1, default=str))
