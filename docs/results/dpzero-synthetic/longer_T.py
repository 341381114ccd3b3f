"""The cells of the main run that the longer-T probes (``probe-*/``) revisit, joined with them: the train-chosen point
over the union of their grids (same data, directions seeds and repeats), the claims re-judged, written to
``longer-T.md``. A (Hessian, method) enters when some probe ran it.

Run from the repository root: ``.venv/bin/python docs/results/dpzero-synthetic/longer_T.py``.
"""

from pathlib import Path

from dpnc.problems import HESSIANS
from dpnc_reproduce import protocol
from dpnc_reproduce.dpzero_synthetic import report
from dpnc_reproduce.dpzero_synthetic.experiment import EXPERIMENT
from dpnc_reproduce.dpzero_synthetic.run import METHODS

HERE = Path(__file__).parent
PROBES = sorted(p for p in HERE.glob("probe-*") if (p / "result.json").exists())


def main() -> None:
    results = [protocol.read(EXPERIMENT, f / "result.json") for f in (HERE, *PROBES)]
    probed = {(r.hessian, r.method) for res in results[1:] for r in res.rows}
    rows = [r for res in results for r in res.rows if (r.hessian, r.method) in probed]
    hessians = [h for h in HESSIANS if any(k[0] == h for k in probed)]
    methods = [m for m in METHODS if any(k[1] == m for k in probed)]
    lines = ["# DPZero synthetic: the main run joined with the longer-T probes\n",
             "Rows: " + ", ".join(f"`{f.relative_to(HERE.parent.parent.parent)}/rows.csv` ({res.seconds / 60:.1f} min)"
                                  for f, res in zip((HERE, *PROBES), results))
             + "; the (Hessian, method) cells some probe ran: " + "; ".join(
                 f"{report.RANK_LABEL[h]}: {', '.join(m for m in methods if (h, m) in probed)}" for h in hessians)
             + f". Written by `{Path(__file__).name}`. Commands:\n"]
    lines += [f"- `{_command(f)}`" for f in (HERE, *PROBES)]
    lines += ["", "| claim | holds here | our numbers |", "|---|---|---|"]
    lines += [f"| {c.statement} | {protocol.verdict(c.holds)} | {c.evidence} |"
              for c in report.paper_claims(report.selected(rows), report.edges(rows))]
    best = report.best_over_grid(rows)
    train = {}
    for r in rows:   # the best train ‖∇F_S‖ at each T (over step size and C), mean over repeats
        k = (r.hessian, r.d, r.method, r.T, r.seed)
        train[k] = min(train.get(k, float("inf")), r.train_grad_norm)
    at = report.edges(rows)
    for h in hessians:
        mine = [m for m in methods if (h, m) in probed]
        dims = sorted({k[1] for k in best if k[0] == h})
        steps = sorted({k[3] for k in train if k[0] == h})
        lines += ["", f"## {report.RANK_LABEL[h]}\n",
                  "| d | " + " | ".join(f"{m}: train ‖∇F_S‖ | {m}: test ‖∇F‖ (floor)" for m in mine) + " |",
                  "|---|" + "---|---|" * len(mine)]
        lines += [f"| {d} | " + " | ".join(f"{best[(h, d, m)]['train_grad_norm']:.4g} | "
                                           f"{best[(h, d, m)]['test_grad_norm']:.4g} "
                                           f"({best[(h, d, m)]['test_floor']:.4g})" for m in mine) + " |"
                  for d in dims]
        lines += ["", "Best train ‖∇F_S‖ at each T (over step size and C; mean over the repeats):\n",
                  "| method | d | " + " | ".join(f"T = {T}" for T in steps) + " |", "|---|---|" + "---|" * len(steps)]
        for m in mine:
            for d in dims:
                cells = []
                for T in steps:
                    v = [v for k, v in train.items() if k[:4] == (h, d, m, T)]
                    cells.append(f"{sum(v) / len(v):.4g}" if v else "")
                lines.append(f"| {m} | {d} | " + " | ".join(cells) + " |")
        lines += ["", "Train-chosen T per repeat: " + "; ".join(
            f"{m}, d = {d}: " + ", ".join(str(r.T) for k, (r, _) in sorted(at.items()) if k[:3] == (h, d, m))
            for m in mine for d in dims)]
    (HERE / "longer-T.md").write_text("\n".join(lines) + "\n")


def _command(folder: Path) -> str:
    import json

    return json.loads((folder / "result.json").read_text()).get("command", "(not recorded)")


if __name__ == "__main__":
    main()
