"""The kl-rates experiment's figures: ``fig_excess.png`` and ``fig_grad_norm.png`` (the claims and
tables are in :mod:`dpnc_reproduce.kl_rates.report`)."""

from __future__ import annotations

from pathlib import Path

from dpnc_reproduce.kl_rates.report import _quartiles, medians
from dpnc_reproduce.kl_rates.run import ADAPTIVE, ALGORITHMS, OBJECTIVES, KLRow
from dpnc_reproduce.protocol import Result


def plot(result: Result, out: Path) -> list[Path]:
    """``fig_excess.png`` (rows: algorithms; columns: objectives) and ``fig_grad_norm.png``
    (adaptive GD, last iterate vs selected) under ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, cfg = result.rows, result.config
    paths = []
    algorithms = [a for a in ALGORITHMS if any(r.algorithm == a for r in rows)]
    names = [o for o in OBJECTIVES if any(r.objective == o for r in rows)]
    fig, axes = plt.subplots(
        len(algorithms),
        len(names),
        figsize=(4.3 * len(names), 3.5 * len(algorithms)),
        squeeze=False,
    )
    for i, a in enumerate(algorithms):
        for j, o in enumerate(names):
            ax = axes[i][j]
            mine = [r for r in rows if r.algorithm == a and r.objective == o]
            if not mine:
                ax.axis("off")
                continue
            dims = sorted({r.d for r in mine if r.sweep == "n"})
            for c, d in enumerate(dims):
                _draw(ax, [r for r in mine if r.d == d and r.sweep == "n"], f"C{c}", f"d = {d}")
            swept = [r for r in mine if r.sweep == "rho"]
            if swept:
                xs, ys = zip(*medians(swept, "excess", ("algorithm",), "x")[(a,)])
                ax.plot(xs, ys, "kx", markersize=8, label=f"ρ sweep, d = {swept[0].d}")
            ax.set(
                xscale="log",
                yscale="log",
                xlabel="n√ρ/√d",
                ylabel="F(w) − F*",
                title=f"{a}: {o} (κ = {OBJECTIVES[o][0]:g})",
            )
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6)
    fig.suptitle(
        f"median excess over {cfg.seeds} seeds (band: quartiles); dashed: the theorem's bound; "
        "dotted: the class lower bound (constants and logs dropped)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out / "fig_excess.png", dpi=100)
    plt.close(fig)
    paths.append(out / "fig_excess.png")
    adaptive = [r for r in rows if r.algorithm in ADAPTIVE and r.sweep == "n"]
    if adaptive:
        names = [o for o in OBJECTIVES if any(r.objective == o for r in adaptive)]
        fig, axes = plt.subplots(1, len(names), figsize=(4.6 * len(names), 3.8), squeeze=False)
        for ax, o in zip(axes[0], names):
            for c, d in enumerate(sorted({r.d for r in adaptive if r.objective == o})):
                for a, style in zip(ADAPTIVE, ("-", "--")):
                    series = medians(
                        [r for r in adaptive if r.objective == o and r.d == d and r.algorithm == a],
                        "grad_norm",
                        ("d",),
                        "x",
                    ).get((d,))
                    if series:
                        ax.plot(
                            *zip(*series),
                            color=f"C{c}",
                            linestyle=style,
                            marker="o",
                            markersize=3,
                            label=f"{a}, d = {d}",
                        )
            ax.set(xscale="log", yscale="log", xlabel="n√ρ/√d", ylabel="‖∇F(w_out)‖", title=f"{o}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6)
        fig.suptitle(
            "median gradient norm of the output: last iterate (solid) vs privately selected (dashed)",
            fontsize=10,
        )
        fig.tight_layout()
        fig.savefig(out / "fig_grad_norm.png", dpi=100)
        plt.close(fig)
        paths.append(out / "fig_grad_norm.png")
    return paths


def _draw(ax, rows: list[KLRow], color: str, label: str) -> None:
    by_x: dict[float, list[KLRow]] = {}
    for r in rows:
        by_x.setdefault(r.x, []).append(r)
    xs = sorted(by_x)
    q = [_quartiles([r.excess for r in by_x[x]]) for x in xs]
    ax.plot(xs, [m for _, m, _ in q], color=color, marker="o", markersize=3, label=label)
    ax.fill_between(xs, [lo for lo, _, _ in q], [hi for _, _, hi in q], color=color, alpha=0.2)
    ax.plot(xs, [by_x[x][0].bound for x in xs], color=color, linestyle="--", linewidth=1)
    lbs = [(x, by_x[x][0].lower_bound) for x in xs if by_x[x][0].lower_bound is not None]
    if lbs:
        ax.plot(*zip(*lbs), color=color, linestyle=":", linewidth=1)
