"""Re-judge committed results under docs/results/ from their own rows (nothing is re-run) and write this issue's
section of REJUDGED.md: every verdict that changed, old → new, with the rule that changed it (earlier issues'
sections are kept below it). Each result.json keeps its old verdicts and declarations (``rejudged``) and each
summary.md shows them (:func:`dpnc_reproduce.protocol.rejudge`).

This re-judging (interval first) touches only the claims dpzero_lm judges: :data:`RESULTS` lists every result it
judges (issue 41's re-judging of every result, with its rules, is in git history and REJUDGED.md). Not here:
``dpzero-headroom/result.json`` (written by ``dpzero-headroom/verdicts.py``, its "underpowered" declared before its
runs, for intervals that straddle), ``audit/`` and ``finetune-defaults/`` (other owners).

Run from the repository root, once per re-judging (each run adds a record to every result):
``.venv/bin/python docs/results/rejudge.py [--date YYYY-MM-DD]``.
"""

import argparse
import re
from pathlib import Path

from dpnc_reproduce import dpzero_lm, protocol

HERE = Path(__file__).parent
ISSUE = 52
HEADER = ("Newest first; each section lists the verdicts its re-judging changed, old → new. Methods are named as in "
          "the registry since issue 43 (`ztc` → `zo-o2nc`, `ztc-naive` → `zo-o2nc:naive`, `klt-zo` → `klt`, `klt-fo` "
          "→\n`klt:first-order`, `klt-multipass` → `klt:multi-pass`; each result's notes list its renaming), here "
          "too.")
INTERVAL_FIRST = ("the interval decides first: a claim whose 95 % interval lies beyond its threshold holds or fails "
                  "whatever the design's power (a rejection at the 5 % level stands); 'underpowered for this design' "
                  "only for an interval that straddles the threshold AND a design declared so before the data (its "
                  "MDE by the judging variance model); the post-hoc MDE of issue 41 (computed after the run from its "
                  "own spread) stays in the evidence as information; the thresholds and declarations are unchanged")
RULES = {"lm": f"issue {ISSUE}: " + INTERVAL_FIRST}
RESULTS = [  # folder, experiment, rule: every result judged by dpzero_lm's claims (the only ones the rule touches)
    ("dpzero-lm", dpzero_lm.EXPERIMENT, "lm"), ("dpzero-lm-sst5", dpzero_lm.EXPERIMENT, "lm"),
    ("dpzero-lm-quick", dpzero_lm.EXPERIMENT, "lm"), ("dpzero-lm-tasks", dpzero_lm.EXPERIMENT, "lm"),
    ("dpzero-lm-tasks/table-5-sst5", dpzero_lm.EXPERIMENT, "lm"),
    ("dpzero-lm-tasks/tables-3-5", dpzero_lm.EXPERIMENT, "lm"),
    ("dpzero-headroom/table2-trec-top2", dpzero_lm.EXPERIMENT, "lm"),
]
REDECLARE = False  # issue 41 changed thresholds and declarations (redeclare=True); this rule changes neither


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--date", default=None)
    parser.add_argument("--only", nargs="*", default=None, help="re-judge only these folders (a test run)")
    args = parser.parse_args()
    lines = [f"## Issue {ISSUE}\n",
             f"Every result that dpzero_lm's claims judge, re-judged from its own rows by `{Path(__file__).name}` "
             "(nothing re-run). Each "
             "result.json keeps the old verdicts and declarations under `rejudged`; each summary.md shows them. "
             "Rules:\n"]
    lines += [f"- **{k}**: {v}" for k, v in RULES.items()]
    lines += ["", "| result | claim | old | new | rule | new numbers |", "|---|---|---|---|---|---|"]
    unchanged, underpowered = [], []
    for folder, experiment, rule in RESULTS:
        if args.only is not None and folder not in args.only:
            continue
        _, changes = protocol.rejudge(experiment, HERE / folder, RULES[rule], date=args.date,
                                      redeclare=REDECLARE)
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
    path.write_text("# Re-judged verdicts\n\n" + HEADER + "\n\n" + "\n".join(lines) + "\n\n" + earlier)


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
