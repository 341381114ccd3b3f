"""Re-judge every committed result under docs/results/ from its own rows (nothing is re-run) and write REJUDGED.md:
every verdict that changed, old → new, with the rule that changed it. Each result.json keeps its old verdicts
(``rejudged``) and each summary.md shows them (:func:`dpnc_reproduce.protocol.rejudge`).

Not here: ``audit/`` and ``finetune-defaults/`` (other owners), ``finetune-user-data/`` (a `dpnc finetune` run, no
claims). The joined longer-T view of dpzero-synthetic is rewritten by ``dpzero-synthetic/longer_T.py``.

Run from the repository root: ``.venv/bin/python docs/results/rejudge.py [--date YYYY-MM-DD]``.
"""

import argparse
from pathlib import Path

from dpnc_reproduce import (dpzero_lm, dpzero_synthetic, kl_rates, nonsmooth_compare, nonsmooth_rates, protocol,
                              utility)

HERE = Path(__file__).parent
WELCH = ("t intervals with Welch–Satterthwaite degrees of freedom wherever a part is estimated from seeds, and one "
         "seed gives no verdict")
RULES = {
    "lm": "issue 27: accuracy differences on a t interval at the Welch–Satterthwaite df of their seed and test-set "
          "parts (was the normal 1.96); one seed gives no verdict (was: seed variance taken as 0); the paper's "
          "'close to MeZO' judged on every task run against its largest drop at ε = 6, 2.6 points (was: SST-2 only, "
          "≤ 2)",
    "synthetic": "issue 27: Table 1's rates in d judged one-sided as upper bounds, slope ≤ half the bound's slope + "
                 "0.1 (was: 'the interval contains the exponent and is at most ±0.5 wide, or lies within ±0.15'); "
                 + WELCH,
    "kl": "issue 27: rates judged one-sided, slope ≤ the bound's own slope over the same points + 0.1 (was: 'equals "
          "the theorem's exponent' two-sided with ±0.15 and any interval up to ±0.5 wide); the proximal point's rate "
          "also needs its inner-steps check from the same rows; " + WELCH,
    "nonsmooth": "issue 27: exponents of n(β) judged one-sided, ≤ the theorem's over the same points + 0.1 (was: "
                 "two-sided with ±0.15 and ±0.5); censored seeds kept as censored ([n_max, ∞), [1, n_start]) instead "
                 "of dropping them and the sweep points where fewer than half reached β, no verdict above 20 % "
                 "censored; a paired comparison with one side censored enters as a censored ratio (was: at n_max)",
    "utility": "issue 27: the claims engine's new statistics (" + WELCH + "); the paired t intervals are unchanged",
}
RESULTS = [  # folder, experiment, rule
    ("dpzero-lm", dpzero_lm.EXPERIMENT, "lm"), ("dpzero-lm-sst5", dpzero_lm.EXPERIMENT, "lm"),
    ("dpzero-lm-quick", dpzero_lm.EXPERIMENT, "lm"),
    ("dpzero-synthetic", dpzero_synthetic.EXPERIMENT, "synthetic"),
    ("dpzero-synthetic/probe-T10240", dpzero_synthetic.EXPERIMENT, "synthetic"),
    ("dpzero-synthetic/probe-longer", dpzero_synthetic.EXPERIMENT, "synthetic"),
    ("dpzero-synthetic/probe-high-rank", dpzero_synthetic.EXPERIMENT, "synthetic"),
    ("kl-rates", kl_rates.EXPERIMENT, "kl"), ("kl-rates-full", kl_rates.EXPERIMENT, "kl"),
    ("kl-rates-full/inner-scale-4", kl_rates.EXPERIMENT, "kl"),
    ("nonsmooth-rates", nonsmooth_rates.EXPERIMENT, "nonsmooth"),
    ("nonsmooth-compare", nonsmooth_compare.EXPERIMENT, "nonsmooth"),
    ("utility", utility.EXPERIMENT, "utility"),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--date", default=None)
    date = parser.parse_args().date
    lines = ["# Re-judged verdicts (issue 27)\n",
             f"Every committed result re-judged from its own rows by `{Path(__file__).name}` (nothing re-run). Each "
             "result.json keeps the old verdicts under `rejudged`; each summary.md shows them. Rules:\n"]
    lines += [f"- **{k}**: {v}" for k, v in RULES.items()]
    lines += ["", "| result | claim | old | new | rule | new numbers |", "|---|---|---|---|---|---|"]
    unchanged = []
    for folder, experiment, rule in RESULTS:
        _, changes = protocol.rejudge(experiment, HERE / folder, RULES[rule], date=date)
        changed = [c for c in changes if c["old"] != c["new"]]
        unchanged.append(f"{folder}: {len(changes) - len(changed)} unchanged")
        lines += [f"| {folder} | {c['new_statement'] or c['statement']} | {c['old']} | {c['new']} | {rule} | "
                  f"{_short(c['new_evidence'])} |" for c in changed]
        print(f"{folder}: {len(changed)} changed of {len(changes)}")
    lines += ["", "Unchanged: " + "; ".join(unchanged) + "."]
    (HERE / "REJUDGED.md").write_text("\n".join(lines) + "\n")


def _short(text: str, limit: int = 300) -> str:
    text = text.replace("|", "/")
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


if __name__ == "__main__":
    main()
