"""Re-judge every committed result under docs/results/ from its own rows (nothing is re-run) and write this issue's
section of REJUDGED.md: every verdict that changed, old → new, with the rule that changed it (earlier issues'
sections are kept below it). Each result.json keeps its old verdicts and declarations (``rejudged``) and each
summary.md shows them (:func:`dpnc_reproduce.protocol.rejudge`).

Not here: ``audit/`` and ``finetune-defaults/`` (other owners), ``finetune-user-data/`` (a `dpnc finetune` run, no
claims). The joined longer-T view of dpzero-synthetic is rewritten by ``dpzero-synthetic/longer_T.py``.

Run from the repository root, once per re-judging (each run adds a record to every result):
``.venv/bin/python docs/results/rejudge.py [--date YYYY-MM-DD]``.
"""

import argparse
import re
from pathlib import Path

from dpnc_reproduce import (dpzero_dimension, dpzero_lm, dpzero_synthetic, kl_rates, nonsmooth_compare,
                             nonsmooth_rates, protocol, utility)

HERE = Path(__file__).parent
WELCH = ("t intervals with Welch–Satterthwaite degrees of freedom wherever a part is estimated from seeds, and one "
         "seed gives no verdict")
ISSUE = 41
AFTER = ("declared at this re-judging, after the rows were measured (result.json: declared_after, with the declaring "
         "commit); a claim whose tolerance or threshold changed is tested honestly only by a re-run")
LM = ("Table 2's lower bounds '> 0' with the paper's gains beside (the '> 5' and '> 3' points for SST-2 came after "
      "SST-2 was measured); the Table 3 caption's 'ε = 2 within 1 point of MeZO' added; Table 3's cost claims only "
      "with every parameter trained ('not testable here' in head mode); Table 5 paired by seed and test example, "
      "reported as 'no difference detectable at this resolution (±h)' unless a difference is detected; paired "
      "differences by a two-way random-effects ANOVA (the seed + example sum counted their interaction twice); a "
      "claim whose paper value lies nearer its threshold than this design detects (80 % power, one-sided 5 %) reads "
      "'underpowered for this design', its interval's reading kept in the evidence; " + AFTER)
RULES = {
    "lm": "issue 41: " + LM,
    "dimension": "issue 41: the d-slope named the project's own claim (the paper never varies d); paired differences "
                 "by a two-way random-effects ANOVA; " + AFTER,
    "synthetic": "issue 41: the rate tolerance derived from the logs Table 1 drops in d (none: it keeps DPZero's "
                 "log d; tolerance 0, was 0.1 for every grid, set after these rows); " + AFTER,
    "kl": "issue 41: KL-Spider's rates judged on its explicit bound (excess ≤ Φfloor), its slope claims reported "
          "unjudged; each other rate's tolerance derived from the logs its bound drops over that grid (the proximal "
          "point's bound keeps them: 0; adaptive GD's ℓ = ln(n√ρ/β) and p_max: κ/2·slope(ln ℓ) or "
          "κ/(4−κ)·slope(ln ℓp_max)); was 0.1 for every grid, set after these rows; " + AFTER,
    "nonsmooth": "issue 41: exponents judged in their variable's regime — d → ∞: slope ≤ bound + tol; ε, β → 0: slope "
                 "≥ bound − tol (a steeper slope violates n ≤ C·N); α 'not testable by slope here' (the target region "
                 "grows with α); tol = what (ln N)^p (ZTC ½, naive and KLT 1) adds to the slope over that grid (was "
                 "0.1 in the x → ∞ direction for every variable); KLT's √d improvement as the slope of ln(n_ZTC/n_KLT) "
                 "in ln d against 0.5; " + AFTER,
    "utility": "issue 41: the claims engine's changes (none of its claims uses a rate or a paired LM difference); "
               + AFTER,
}
RESULTS = [  # folder, experiment, rule
    ("dpzero-lm", dpzero_lm.EXPERIMENT, "lm"), ("dpzero-lm-sst5", dpzero_lm.EXPERIMENT, "lm"),
    ("dpzero-lm-quick", dpzero_lm.EXPERIMENT, "lm"), ("dpzero-lm-tasks", dpzero_lm.EXPERIMENT, "lm"),
    ("dpzero-lm-tasks/table-5-sst5", dpzero_lm.EXPERIMENT, "lm"),
    ("dpzero-lm-tasks/tables-3-5", dpzero_lm.EXPERIMENT, "lm"),
    ("dpzero-dimension/cached-modes", dpzero_dimension.EXPERIMENT, "dimension"),
    ("dpzero-dimension/full-forward-modes", dpzero_dimension.EXPERIMENT, "dimension"),
    ("dpzero-dimension/gpu-all-modes", dpzero_dimension.EXPERIMENT, "dimension"),
    ("dpzero-dimension/gpu-clip-grid-T120", dpzero_dimension.EXPERIMENT, "dimension"),
    ("dpzero-dimension/gpu-clip-grid-T90", dpzero_dimension.EXPERIMENT, "dimension"),
    ("dpzero-dimension/probe-clip-trec-top2", dpzero_dimension.EXPERIMENT, "dimension"),
    ("dpzero-synthetic", dpzero_synthetic.EXPERIMENT, "synthetic"),
    ("dpzero-synthetic/probe-T10240", dpzero_synthetic.EXPERIMENT, "synthetic"),
    ("dpzero-synthetic/probe-longer", dpzero_synthetic.EXPERIMENT, "synthetic"),
    ("dpzero-synthetic/probe-high-rank", dpzero_synthetic.EXPERIMENT, "synthetic"),
    ("kl-rates", kl_rates.EXPERIMENT, "kl"), ("kl-rates-full", kl_rates.EXPERIMENT, "kl"),
    ("kl-rates-full/inner-scale-4", kl_rates.EXPERIMENT, "kl"),
    ("nonsmooth-rates", nonsmooth_rates.EXPERIMENT, "nonsmooth"),
    ("nonsmooth-rates/nonconvex-rerun", nonsmooth_rates.EXPERIMENT, "nonsmooth"),
    ("nonsmooth-compare", nonsmooth_compare.EXPERIMENT, "nonsmooth"),
    ("nonsmooth-compare/larger-n", nonsmooth_compare.EXPERIMENT, "nonsmooth"),
    ("utility", utility.EXPERIMENT, "utility"),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--date", default=None)
    parser.add_argument("--only", nargs="*", default=None, help="re-judge only these folders (a test run)")
    args = parser.parse_args()
    lines = [f"## Issue {ISSUE}\n",
             f"Every committed result re-judged from its own rows by `{Path(__file__).name}` (nothing re-run). Each "
             "result.json keeps the old verdicts and declarations under `rejudged`; each summary.md shows them. "
             "Rules:\n"]
    lines += [f"- **{k}**: {v}" for k, v in RULES.items()]
    lines += ["", "| result | claim | old | new | rule | new numbers |", "|---|---|---|---|---|---|"]
    unchanged, underpowered = [], []
    for folder, experiment, rule in RESULTS:
        if args.only is not None and folder not in args.only:
            continue
        _, changes = protocol.rejudge(experiment, HERE / folder, RULES[rule], date=args.date, redeclare=True)
        changed = [c for c in changes if c["old"] != c["new"]]
        unchanged.append(f"{folder}: {len(changes) - len(changed)} unchanged")
        lines += [f"| {folder} | {c['new_statement'] or c['statement']} | {c['old']} | {c['new']} | {rule} | "
                  f"{_short(c['new_evidence'])} |" for c in changed]
        underpowered += [f"{folder}: {c['new_statement']}" for c in changes
                         if c["new"] == "underpowered for this design"]
        print(f"{folder}: {len(changed)} changed of {len(changes)}")
    lines += ["", "Unchanged: " + "; ".join(unchanged) + ".", "",
              "Declared underpowered for this design (not judged): " + ("; ".join(underpowered) or "none") + "."]
    path = HERE / "REJUDGED.md"
    earlier = _earlier_sections(path.read_text() if path.exists() else "")
    path.write_text("# Re-judged verdicts\n\nNewest first; each section lists the verdicts its re-judging changed, old "
                    "→ new.\n\n" + "\n".join(lines) + "\n\n" + earlier)


def _earlier_sections(text: str) -> str:
    """The sections of earlier re-judgings (this issue's own, if any, dropped); the first file's single heading
    "# Re-judged verdicts (issue N)" becomes its section "## Issue N"."""
    text = re.sub(r"^# Re-judged verdicts \(issue (\d+)\)\n", r"## Issue \1\n", text)
    text = re.sub(r"^# Re-judged verdicts\n\n.*?\n\n(?=## )", "", text, flags=re.S)
    sections = re.split(r"(?m)^(?=## Issue \d+\n)", text)
    return "".join(sec for sec in sections if sec.strip() and not sec.startswith(f"## Issue {ISSUE}\n")).rstrip() \
        + "\n"


def _short(text: str, limit: int = 300) -> str:
    text = text.replace("|", "/")
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


if __name__ == "__main__":
    main()
