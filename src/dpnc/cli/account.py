"""``dpnc account``: ε of T Gaussian releases, or σ/Δ for a target ε."""

from __future__ import annotations

import json
import time
import warnings

import typer

from dpnc.cli.base import DEFAULT_ACCOUNTANT, AccountantOrBoth, Relation, app


@app.command()
def account(
    steps: int = typer.Option(
        ..., "--steps", "-T", min=1, help="Number of noisy releases (steps) T."
    ),
    delta: float = typer.Option(1e-5, "--delta", help="Target δ, in (0, 1)."),
    sampling_rate: float = typer.Option(
        1.0,
        "--sampling-rate",
        "-q",
        help="Poisson sampling rate q = B/n of each step, in (0, 1]; 1 means full batch.",
    ),
    noise_multiplier: float = typer.Option(
        None,
        "--noise-multiplier",
        "--sigma",
        help="Noise multiplier σ/Δ (noise std over sensitivity). Give this to get ε.",
    ),
    epsilon: float = typer.Option(
        None, "--epsilon", help="Target ε. Give this (instead of --noise-multiplier) to get σ/Δ."
    ),
    accountant: AccountantOrBoth = typer.Option(
        DEFAULT_ACCOUNTANT,
        "--accountant",
        help="pld: privacy-loss distributions (tight, seconds; the default everywhere: make_private and finetune "
        "calibrate with it); rdp: Rényi DP (fast, looser); both: a row each.",
    ),
    relation: Relation = typer.Option(
        "add/remove",
        "--relation",
        help="Neighbouring datasets: add/remove one point, or replace one (Δ is then the "
        "replace-one sensitivity; RDP supports Poisson sampling only under add/remove).",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print one JSON object instead of a table: the inputs (steps, sampling_rate, "
        "delta, relation, and the given noise_multiplier or epsilon) and "
        '"accountants": {name: {noise_multiplier, epsilon, seconds, unsupported}}.',
    ),
) -> None:
    """ε spent by T Gaussian releases with noise multiplier σ/Δ, or σ/Δ for a target ε.

    Each of the T steps adds N(0, σ²) noise to a query of sensitivity Δ computed on a Poisson
    sample of rate q. Example: dpnc account -T 10000 -q 0.0625 --delta 1e-5 --epsilon 2
    """
    from dpnc.privacy.calibrate import epsilon_for
    from dpnc.privacy.calibrate import noise_multiplier as calibrate_multiplier
    from dpnc.privacy.releases import UnsupportedRelease

    if (noise_multiplier is None) == (epsilon is None):
        raise typer.BadParameter("give exactly one of --noise-multiplier and --epsilon")
    methods = ["rdp", "pld"] if accountant == "both" else [accountant]
    rows, notes = [], []
    for method in methods:
        start = time.perf_counter()
        mult, eps, unsupported = noise_multiplier, None, None
        try:  # bad input raises ValueError (a usage error) before any accounting
            with warnings.catch_warnings(
                record=True
            ) as caught:  # PLD's fall-back to RDP: said below the table
                warnings.simplefilter("always")
                if epsilon is not None:
                    mult = calibrate_multiplier(
                        epsilon, delta, sampling_rate, steps, accountant=method, relation=relation
                    )
                eps = epsilon_for(
                    mult, sampling_rate, steps, delta, accountant=method, relation=relation
                )
        except (
            UnsupportedRelease
        ) as err:  # e.g. RDP of a Poisson-subsampled Gaussian under replace-one
            unsupported = str(err)
        notes += [f"{method}: {w.message}" for w in caught if issubclass(w.category, UserWarning)]
        rows.append(
            {
                "accountant": method,
                "noise_multiplier": mult,
                "sampling_rate": sampling_rate,
                "steps": steps,
                "delta": delta,
                "epsilon": eps,
                "relation": relation,
                "seconds": time.perf_counter() - start,
                "unsupported": unsupported,
            }
        )
    if (
        all(r["unsupported"] for r in rows) and not notes
    ):  # (a note: PLD fell back, the multiplier is RDP's)
        raise typer.BadParameter("; ".join(r["unsupported"] for r in rows))
    if as_json:
        per = {
            r["accountant"]: {
                k: r[k] for k in ("noise_multiplier", "epsilon", "seconds", "unsupported")
            }
            for r in rows
        }
        typer.echo(
            json.dumps(
                {
                    "steps": steps,
                    "sampling_rate": sampling_rate,
                    "delta": delta,
                    "relation": relation,
                    "given": {"noise_multiplier": noise_multiplier, "epsilon": epsilon},
                    "accountants": per,
                }
            )
        )
        return

    def fmt(value, spec):
        return "n/a" if value is None else format(value, spec)

    header = f"{'accountant':<10} {'σ/Δ':>10} {'q':>9} {'T':>8} {'δ':>9} {'ε':>10} {'time':>7}"
    typer.echo(f"relation: {relation}")
    typer.echo(header)
    typer.echo("-" * len(header))
    for r in rows:
        typer.echo(
            f"{r['accountant']:<10} {fmt(r['noise_multiplier'], '.4f'):>10} {r['sampling_rate']:>9.4g} "
            f"{r['steps']:>8d} {r['delta']:>9.2g} {fmt(r['epsilon'], '.4f'):>10} {r['seconds']:>6.2f}s"
        )
    for r in rows:
        if r["unsupported"]:
            typer.echo(f"{r['accountant']}: n/a: {r['unsupported']}")
    for note in notes:
        typer.echo(f"note: {note}")
