"""``dpnc audit``: the typer command (registered in :mod:`dpnc.cli`). Imports torch only when it
runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

# The names of dpnc.audit.mechanisms.MECHANISMS, listed here so that --help does not import torch
# (tests/audit/test_audit.py checks that the two agree).
MECHANISM_NAMES = (
    "dpzero",
    "dpzero-poisson",
    "dpgd0th",
    "dp-gd",
    "ztc-tree",
    "klt-tree",
    "kl-spider-checkpoint",
    "dpzero-optimizer",
    "dpzero-optimizer-replace-one",
    "dpzero-distributed",
    "dpzero-trainer-step",
    "make-private-dpzero",
    "make-private-dp-sgd",
)
BROKEN_NAMES = ("sigma", "public-batches", "realised-batch", "other-batch", "train-batchnorm")


def audit(
    mechanism: str = typer.Argument(
        None,
        help=f"What to audit: one of {', '.join(MECHANISM_NAMES)} (or give --one-run instead).",
    ),
    one_run: Path = typer.Option(
        None,
        "--one-run",
        help="Print the self-audit of a finished run: the folder where "
        "its SelfAuditResult was saved (self_audit.json).",
    ),
    runs: int = typer.Option(
        2000,
        "--runs",
        "-n",
        help="Runs on each of the two neighbouring datasets (>= 4; half choose the threshold, "
        "half bound ε).",
    ),
    broken: str = typer.Option(
        None,
        "--broken",
        help="Audit a deliberately broken variant: 'sigma' (σ/--sigma-factor, the claim "
        "unchanged), 'public-batches' (batches from a seed the adversary replays), "
        "'realised-batch' (mean over the realised batch size), 'other-batch' (loss_fn on "
        "a fixed other batch), 'train-batchnorm'; each mechanism lists its own. The "
        "audit must report a violation.",
    ),
    sigma_factor: float = typer.Option(
        1.5, "--sigma-factor", help="What --broken sigma divides σ by (> 0)."
    ),
    epsilon: float = typer.Option(
        None,
        "--epsilon",
        help="Target ε the mechanism is calibrated for (> 0; default: "
        "the mechanism's audit target, 2 or 4, 1 for the trees).",
    ),
    delta: float = typer.Option(
        1e-5, "--delta", help="δ of the claim and of the lower bound, in (0, 1)."
    ),
    confidence: float = typer.Option(
        0.95, "--confidence", help="Confidence of the ε lower bound, in (0, 1)."
    ),
    seed: int = typer.Option(
        0,
        "--seed",
        help="Public seed (directions, public generator, seeded batches); "
        "the noise is always secret.",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print one JSON object instead of a summary."
    ),
    out: Path = typer.Option(None, "--out", help="Also write the JSON result to this file."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Empirical ε lower bound of a dpnc mechanism beside its claimed ε.

    Runs the library's own mechanism many times on two neighbouring datasets that differ in an
    adversarial canary, scores each run as an adversary who knows all public randomness, and bounds
    ε from below by a threshold test (threshold from one half of the runs, Clopper–Pearson bound on
    the other). A lower bound above the claim proves the claim false (at the stated confidence);
    below it, the audit found nothing. Example: dpnc audit dpzero-poisson --runs 20000 --json. With
    --one-run FOLDER: the one-run bound a self-audited run saved there (make_private(...,
    audit=SelfAudit(...)); docs/audit.md)."""
    if one_run is not None:
        if mechanism is not None:
            raise typer.BadParameter(
                f"give a MECHANISM or --one-run, not both; got {mechanism!r}",
                param_hint="--one-run",
            )
        from dpnc.self_audit import SelfAuditResult

        try:
            saved = SelfAuditResult.load(one_run)
        except ValueError as err:
            raise typer.BadParameter(str(err), param_hint="--one-run") from None
        typer.echo(json.dumps(saved.to_dict()) if as_json else str(saved))
        return
    if mechanism not in MECHANISM_NAMES:
        raise typer.BadParameter(
            f"must be one of {', '.join(MECHANISM_NAMES)}; got {mechanism!r}",
            param_hint="MECHANISM",
        )
    if runs < 4:
        raise typer.BadParameter(f"must be an integer >= 4; got {runs}", param_hint="--runs")
    if broken is not None and broken not in BROKEN_NAMES:
        raise typer.BadParameter(
            f"must be one of {', '.join(BROKEN_NAMES)}; got {broken!r}", param_hint="--broken"
        )
    if not (math.isfinite(sigma_factor) and sigma_factor > 0):
        raise typer.BadParameter(
            f"must be a finite number > 0; got {sigma_factor!r}", param_hint="--sigma-factor"
        )
    if epsilon is not None and not (math.isfinite(epsilon) and epsilon > 0):
        raise typer.BadParameter(
            f"must be a finite number > 0; got {epsilon!r}", param_hint="--epsilon"
        )
    if not 0 < delta < 1:
        raise typer.BadParameter(f"must be in (0, 1); got {delta!r}", param_hint="--delta")
    if not 0 < confidence < 1:
        raise typer.BadParameter(
            f"must be in (0, 1); got {confidence!r}", param_hint="--confidence"
        )
    if not 0 <= seed < 2**62:
        raise typer.BadParameter(
            f"must be an integer in [0, 2**62); got {seed}", param_hint="--seed"
        )

    from dpnc.audit.core import run_audit
    from dpnc.audit.mechanisms import MECHANISMS

    try:
        instance = MECHANISMS[mechanism](
            epsilon=epsilon, delta=delta, seed=seed, sigma_factor=sigma_factor
        )
        instance.check_broken(broken)
    except ValueError as err:
        raise typer.BadParameter(
            str(err), param_hint="--broken" if "broken" in str(err) else "MECHANISM"
        ) from None
    result = run_audit(instance, runs, broken, confidence=confidence, progress=progress)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(result.to_json() + "\n")
    typer.echo(result.to_json() if as_json else str(result))
