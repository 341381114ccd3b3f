"""Minimum detectable effects of item 2's design (3 seeds, TREC test split, 500 examples).

Variance model: the committed TREC rows of docs/results/dpzero-lm-tasks (head mode, same seeds and test set).
Run from the repository root:
    .venv/bin/python docs/results/dpzero-headroom/mde.py > docs/results/dpzero-headroom/mde.json
"""
import json

from scipy import stats

from dpnc_reproduce.claims import paired_accuracy_difference, paired_ratio, t95

r = json.load(open("docs/results/dpzero-lm-tasks/result.json"))
rows = [x for x in r["rows"] if x["task"] == "TREC" and x.get("direction", "gaussian") == "gaussian"]


def bits(method, eps=None):
    out = {x["seed"]: [int(c) for c in x["correct"]] for x in rows
           if x["method"] == method and (eps is None or x["epsilon"] == eps)}
    return [out[s] for s in (42, 13, 21)]


zs, mz, d6, d2 = bits("zero-shot"), bits("mezo"), bits("dpzero", 6.0), bits("dpzero", 2.0)
res = {}
for name, a, b in [("MeZO - zero-shot", mz, zs), ("DPZero e6 - zero-shot", d6, zs), ("DPZero e2 - zero-shot", d2, zs),
                   ("MeZO - DPZero e6", mz, d6), ("MeZO - DPZero e2", mz, d2)]:
    iv = paired_accuracy_difference(a, b)
    t = t95(iv.df)
    se = (iv.high - iv.low) / (2 * t)
    res[name] = {"estimate": iv.estimate, "se": se, "df": iv.df, "half_width": t * se,
                 "mde_80": (t + stats.t.ppf(0.80, iv.df)) * se}
x = [[100 * (u - v) for u, v in zip(a, b)] for a, b in zip(d6, zs)]
y = [[100 * (u - v) for u, v in zip(a, b)] for a, b in zip(mz, zs)]
iv = paired_ratio(x, y)
res["share e6"] = {"estimate": iv.estimate, "low": iv.low, "high": iv.high, "df": iv.df,
                   "half_width": (iv.high - iv.low) / 2}
print(json.dumps(res, indent=1))
