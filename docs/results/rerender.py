"""Re-render committed results from their own result.json: nothing is re-run and no claim is re-judged.

Each result is read through its experiment's ``upgrade`` (:func:`dpnc_reproduce.protocol.read`) and written back
(:func:`dpnc_reproduce.protocol.write`): rows.csv, the extra tables, result.json, the figures and summary.md. The
stored claims, declarations, re-judging records and notes are kept as they are (an upgrade may rename what they name
and adds a note saying so). Used for the registry's method names of 28 Nov 2026: the results in :data:`RESULTS`,
each with its experiment's name in :data:`dpnc_reproduce.EXPERIMENTS`.

``--facts`` (2 Dec 2026): each stored claim without ``facts`` takes them from the same claim judged again on the stored
rows (same statement, same verdict and status; the verdicts are not touched: a claim whose fresh judging differs
keeps no facts and is listed), for the results in :data:`FACTS`.

Run from the repository root: ``.venv/bin/python docs/results/rerender.py [--only FOLDER ...]``.
"""

import argparse
import dataclasses
import json
from pathlib import Path

from dpnc_reproduce import EXPERIMENTS, protocol

HERE = Path(__file__).parent
RESULTS = [("nonsmooth-rates", "nonsmooth-rates"),  # folder, experiment name
           ("nonsmooth-rates/nonconvex-rerun", "nonsmooth-rates"),
           ("nonsmooth-compare", "nonsmooth-compare"),
           ("nonsmooth-compare/larger-n", "nonsmooth-compare"),
           ("utility", "utility")]
FACTS = [("utility", "utility"), ("dpzero-synthetic", "dpzero-synthetic"),
         ("dpzero-synthetic/probe-T10240", "dpzero-synthetic"),
         ("dpzero-synthetic/probe-high-rank", "dpzero-synthetic"),
         ("dpzero-synthetic/probe-longer", "dpzero-synthetic"),
         ("dpzero-lm-tasks/tables-3-5", "dpzero-lm")]


def add_facts(experiment, folder: Path) -> tuple[int, list[str]]:
    """Give each stored claim without facts those of its fresh judging on the stored rows (same statement, verdict
    and status); the result written back. Returns how many claims gained facts and the statements left without."""
    data = experiment.upgrade(json.loads((folder / "result.json").read_text()))
    result = protocol.read(experiment, folder / "result.json")
    fresh = {c.statement: c for c in experiment.claims(result.rows, result.config)}
    claims, added, left = [], 0, []
    for c in result.claims:
        f = fresh.get(c.statement)
        if not c.facts and f is not None and (f.holds, f.status) == (c.holds, c.status) and f.facts:
            c, added = c._replace(facts=f.facts), added + 1
        elif not c.facts:
            left.append(c.statement)
        claims.append(c)
    result = dataclasses.replace(result, claims=tuple(claims))
    protocol.write(result, folder, data.get("command") or "(not recorded)")
    return added, left


def rerender(experiment, folder: Path) -> list[Path]:
    """Write the result under ``folder`` again from its result.json (upgraded to the current format)."""
    data = experiment.upgrade(json.loads((folder / "result.json").read_text()))
    result = protocol.read(experiment, folder / "result.json")
    return protocol.write(result, folder, data.get("command") or "(not recorded)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", default=None, help="re-render only these folders")
    parser.add_argument("--facts", action="store_true", help="add the claims' facts (FACTS), verdicts untouched")
    args = parser.parse_args()
    if args.facts:
        for folder, name in FACTS:
            if args.only is None or folder in args.only:
                added, left = add_facts(EXPERIMENTS[name], HERE / folder)
                print(f"{folder}: {added} claims gained facts; without: {left}")
        return
    for folder, name in RESULTS:
        if args.only is None or folder in args.only:
            paths = rerender(EXPERIMENTS[name], HERE / folder)
            print(f"{folder}: {len(paths)} files written")


if __name__ == "__main__":
    main()
