"""Re-judge committed results under docs/results/ from their own rows (nothing is re-run) and write this re-judging's
section of REJUDGED.md: every verdict that changed, old → new, with the rule that changed it (earlier re-judgings'
sections are kept below it). Each result.json keeps its old verdicts and declarations (``rejudged``) and each
summary.md shows them (:func:`dpnc_reproduce.protocol.rejudge`).

This re-judging (2 Dec 2026: rate verdicts robust to the constants) touches the rate claims that fit a slope against
a bound of several terms whose O-constants the theorems leave unknown (nonsmooth-rates, nonsmooth-compare, kl-rates:
judged at both ends of the range the terms' constants allow, a verdict only where both agree), KLT's √d improvement
(judged as the papers state it) and dpzero-dimension's slope (its modes selected by the variance model that judges
it): :data:`RESULTS` lists every result it judges, each with its experiment's name in
:data:`dpnc_reproduce.EXPERIMENTS`. The earlier re-judgings (2 Dec 2026: the interval first over dpzero_lm's results;
27 Nov and 25 Nov 2026: every result), with their rules, are in git history and REJUDGED.md. Not here:
``dpzero-headroom/result.json`` (written by ``dpzero-headroom/verdicts.py``), ``audit/`` and ``finetune-defaults/``
(other owners), ``dpzero-synthetic`` and ``utility`` (their rate claims judge one-term bounds: no ratio of constants).

Run from the repository root, once per re-judging (each run adds a record to every result):
``.venv/bin/python docs/results/rejudge.py [--date YYYY-MM-DD]``.
"""

import argparse
import datetime
import re
from pathlib import Path

from dpnc_reproduce import EXPERIMENTS, protocol

HERE = Path(__file__).parent
TITLE = "rate verdicts robust to the constants"  # this re-judging's heading, after its date
HEADER = ("Newest first; each section lists the verdicts its re-judging changed, old → new. Methods are named as in "
          "the registry since 28 Nov 2026 (`ztc` → `zo-o2nc`, `ztc-naive` → `zo-o2nc:naive`, `klt-zo` → `klt`, "
          "`klt-fo` →\n`klt:first-order`, `klt-multipass` → `klt:multi-pass`; each result's notes list its "
          "renaming), here too.")
ENDS = ("a rate claim's bound is a sum of terms whose O-constants the theorem leaves unknown, and over a finite grid "
        "its log-log slope lies anywhere between the terms' own slopes; each such claim is judged at both ends of that "
        "range (until now: at one point of it, every constant 1) and gets a verdict only where both ends agree, else "
        "'depends on the constants' with both ends shown")
RULES = {
    "rates": ENDS,
    "nonsmooth": ENDS + "; KLT's √d improvement judged as the papers state it (an upper bound "
    "Ω(√d) times smaller, not tightness): n_ZTC/n_KLT above 1 in every cell of the d sweep and the slope of "
    "ln(n_ZTC/n_KLT) in ln d ≥ 0 − tol (one-sided), no longer 0.5 ± tol",
    "dimension": "the d-slope's modes (those where MeZO learns) selected by the variance model that "
    "judges the slope and that both were declared with (the seed part, k − 1 df, and the test-example part, m − 1 "
    "df); since the re-judging of 27 Nov 2026 the selection used the two-way ANOVA, which dropped TREC's bias mode",
}
RESULTS = [  # folder, experiment name, rule, the declarations changed (redeclare: marked declared after the rows)
    ("nonsmooth-rates", "nonsmooth-rates", "nonsmooth", True),
    ("nonsmooth-rates/nonconvex-rerun", "nonsmooth-rates", "nonsmooth", True),
    ("nonsmooth-compare", "nonsmooth-compare", "nonsmooth", True),
    ("nonsmooth-compare/larger-n", "nonsmooth-compare", "nonsmooth", True),
    ("kl-rates", "kl-rates", "rates", True),
    ("kl-rates-full", "kl-rates", "rates", True),
    ("kl-rates-full/inner-scale-4", "kl-rates", "rates", True),
    *((f"dpzero-dimension/{f}", "dpzero-dimension", "dimension", False)
      for f in ("cached-modes", "full-forward-modes", "gpu-all-modes", "gpu-clip-grid-T120", "gpu-clip-grid-T90",
                "probe-clip-trec-top2")),
]

def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--date", default=None)
    parser.add_argument("--only", nargs="*", default=None, help="re-judge only these folders (a test run)")
    args = parser.parse_args()
    day = datetime.date.fromisoformat(args.date) if args.date else datetime.date.today()
    lines = [f"## {day.day} {day:%b %Y}: {TITLE}\n",
             f"Every result whose rate claims judge a bound of several terms, KLT's √d improvement or the d-slope, "
             f"re-judged from its own rows by `{Path(__file__).name}` (nothing re-run). Each "
             "result.json keeps the old verdicts and declarations under `rejudged`; each summary.md shows them. "
             "Rules:\n"]
    lines += [f"- **{k}**: {v}" for k, v in RULES.items()]
    lines += ["", "| result | claim | old | new | rule | new numbers |", "|---|---|---|---|---|---|"]
    unchanged, depends = [], []
    for folder, name, rule, redeclare in RESULTS:
        if args.only is not None and folder not in args.only:
            continue
        _, changes = protocol.rejudge(EXPERIMENTS[name], HERE / folder, RULES[rule], date=args.date,
                                      redeclare=redeclare)
        changed = [c for c in changes if c["old"] != c["new"]]
        unchanged.append(f"{folder}: {len(changes) - len(changed)} unchanged")
        lines += [f"| {folder} | {c['new_statement'] or c['statement']} | {c['old']} | {c['new']} | {rule} | "
                  f"{_short(c['new_evidence'])} |" for c in changed]
        depends += [f"{folder}: {c['new_statement']}" for c in changes
                         if c["new"] == "depends on the constants"]
        print(f"{folder}: {len(changed)} changed of {len(changes)}")
    lines += ["", "Unchanged: " + "; ".join(unchanged) + ".", "",
              "Depending on the constants (both ends shown in each claim's evidence): "
              + ("; ".join(depends) or "none") + "."]
    path = HERE / "REJUDGED.md"
    earlier = _earlier_sections(path.read_text() if path.exists() else "")
    path.write_text("# Re-judged verdicts\n\n" + HEADER + "\n\n" + "\n".join(lines) + "\n\n" + earlier)


def _earlier_sections(text: str) -> str:
    """The sections of earlier re-judgings, each under its heading "## <date>: <what>" (this re-judging's own, if any,
    dropped)."""
    text = re.sub(r"^# Re-judged verdicts\n\n.*?\n\n(?=## )", "", text, flags=re.S)
    sections = re.split(r"(?m)^(?=## )", text)
    return "".join(sec for sec in sections if sec.strip() and not sec.split("\n", 1)[0].endswith(f": {TITLE}")) \
        .rstrip() + "\n"


def _short(text: str, limit: int = 300) -> str:
    text = text.replace("|", "/")
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


if __name__ == "__main__":
    main()
