"""The r = log d cells of the main run joined with the longer-T probes (``probe-*/``): the train-chosen point over the
union of their grids (same data, directions seeds and repeats), the claims re-judged, written to ``longer-T.md``.

Run from the repository root: ``.venv/bin/python docs/results/dpzero-synthetic/longer_T.py``.
"""

from pathlib import Path

from dpnc.experiments import dpzero_synthetic as exp
from dpnc.experiments import protocol

HERE = Path(__file__).parent
PROBES = sorted(p for p in HERE.glob("probe-*") if (p / "result.json").exists())


def main() -> None:
    results = [protocol.read(exp.EXPERIMENT, f / "result.json") for f in (HERE, *PROBES)]
    methods = [m for m in exp.METHODS if any(r.method == m for res in results[1:] for r in res.rows)]
    rows = [r for res in results for r in res.rows if r.hessian == "inverse" and r.method in methods]
    lines = ["# DPZero synthetic, r = log d: the main run joined with the longer-T probes\n",
             "Rows: " + ", ".join(f"`{f.relative_to(HERE.parent.parent.parent)}/rows.csv` ({res.seconds / 60:.1f} min)"
                                  for f, res in zip((HERE, *PROBES), results))
             + f"; r = log d only, methods {methods}. Written by `{Path(__file__).name}`. Commands:\n"]
    lines += [f"- `{_command(f)}`" for f in (HERE, *PROBES)]
    lines += ["", "| claim | holds here | our numbers |", "|---|---|---|"]
    lines += [f"| {c.statement} | {protocol.verdict(c.holds)} | {c.evidence} |"
              for c in exp.paper_claims(exp.selected(rows))]
    best = exp.best_over_grid(rows)
    lines += ["", "| d | " + " | ".join(f"{m}: train ‖∇F_S‖ | {m}: test ‖∇F‖ (floor)" for m in methods) + " |",
              "|---|" + "---|---|" * len(methods)]
    lines += [f"| {d} | " + " | ".join(f"{best[('inverse', d, m)]['train_grad_norm']:.4g} | "
                                       f"{best[('inverse', d, m)]['test_grad_norm']:.4g} "
                                       f"({best[('inverse', d, m)]['test_floor']:.4g})" for m in methods) + " |"
              for d in sorted({k[1] for k in best})]
    train = {}
    for r in rows:   # the best train ‖∇F_S‖ at each T (over step size and C), mean over repeats
        k = (r.d, r.method, r.T, r.seed)
        train[k] = min(train.get(k, float("inf")), r.train_grad_norm)
    lines += ["", "Best train ‖∇F_S‖ at each T (over step size and C; mean over the repeats):\n",
              "| method | d | " + " | ".join(f"T = {T}" for T in sorted({k[2] for k in train})) + " |",
              "|---|---|" + "---|" * len({k[2] for k in train})]
    for m in methods:
        for d in sorted({k[0] for k in train}):
            cells = []
            for T in sorted({k[2] for k in train}):
                v = [train[(d, m, T, s)] for s in sorted({k[3] for k in train}) if (d, m, T, s) in train]
                cells.append(f"{sum(v) / len(v):.4g}" if v else "")
            lines.append(f"| {m} | {d} | " + " | ".join(cells) + " |")
    at = exp.edges(rows)
    lines += ["", "Train-chosen T per repeat: " + "; ".join(
        f"{m}, d = {d}: " + ", ".join(str(r.T) for k, (r, _) in sorted(at.items()) if k[1:3] == (d, m))
        for m in methods for d in sorted({k[1] for k in at}))]
    (HERE / "longer-T.md").write_text("\n".join(lines) + "\n")


def _command(folder: Path) -> str:
    import json

    return json.loads((folder / "result.json").read_text()).get("command", "(not recorded)")


if __name__ == "__main__":
    main()
