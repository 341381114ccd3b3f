"""Re-render committed results from their own result.json: nothing is re-run and no claim is re-judged.

Each result is read through its experiment's ``upgrade`` (:func:`dpnc_reproduce.protocol.read`) and written back
(:func:`dpnc_reproduce.protocol.write`): rows.csv, the extra tables, result.json, the figures and summary.md. The
stored claims, declarations, re-judging records and notes are kept as they are (an upgrade may rename what they name
and adds a note saying so). Used for issue 43's method names (the registry's): the reproductions below.

Run from the repository root: ``.venv/bin/python docs/results/rerender.py [--only FOLDER ...]``.
"""

import argparse
import json
from pathlib import Path

from dpnc_reproduce import nonsmooth_compare, nonsmooth_rates, protocol, utility

HERE = Path(__file__).parent
RESULTS = [("nonsmooth-rates", nonsmooth_rates.EXPERIMENT),
           ("nonsmooth-rates/nonconvex-rerun", nonsmooth_rates.EXPERIMENT),
           ("nonsmooth-compare", nonsmooth_compare.EXPERIMENT),
           ("nonsmooth-compare/larger-n", nonsmooth_compare.EXPERIMENT),
           ("utility", utility.EXPERIMENT)]


def rerender(experiment, folder: Path) -> list[Path]:
    """Write the result under ``folder`` again from its result.json (upgraded to the current format)."""
    data = experiment.upgrade(json.loads((folder / "result.json").read_text()))
    result = protocol.read(experiment, folder / "result.json")
    return protocol.write(result, folder, data.get("command") or "(not recorded)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", default=None, help="re-render only these folders")
    args = parser.parse_args()
    for folder, experiment in RESULTS:
        if args.only is None or folder in args.only:
            paths = rerender(experiment, HERE / folder)
            print(f"{folder}: {len(paths)} files written")


if __name__ == "__main__":
    main()
