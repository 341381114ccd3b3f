"""Where a result's declarations come from: the commit of the code that declares its claims,
thresholds and tolerances, and whether it precedes the commit of the rows it judges (a declaration
made after the data is recorded as such, and only a re-run tests a claim whose tolerance
changed)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def declaring_paths(experiment: object) -> list[Path]:
    """The code that declares an experiment's claims, thresholds and tolerances: the claims engine
    and the experiment's own package."""
    package = Path(sys.modules[type(experiment).__module__.rpartition(".")[0]].__file__).parent
    return [Path(__file__).with_name("claims.py"), package]


def _git(args: Sequence[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def declaring_commit(experiment: object) -> dict | None:
    """The last commit that touched the declaring code (:func:`declaring_paths`) and whether that
    code has changes not yet committed (``dirty``: then the declarations are not the committed
    ones); None outside a git work tree. Recorded in ``result.json`` so a test can check that the
    declarations precede the rows (:func:`precedes`)."""
    paths = declaring_paths(experiment)
    cwd = paths[0].parent
    root = _git(["rev-parse", "--show-toplevel"], cwd)
    if root is None:
        return None
    rel = [str(p.resolve().relative_to(Path(root).resolve())) for p in paths]
    commit = _git(["log", "-1", "--format=%H", "--", *rel], Path(root))
    dirty = _git(["status", "--porcelain", "--", *rel], Path(root))
    return {"commit": commit, "paths": rel, "dirty": bool(dirty)}


def precedes(declared: str, rows: str, repo: Path) -> bool:
    """Whether commit ``declared`` is a strict ancestor of commit ``rows`` in the repository at
    ``repo``: the declarations were committed before the rows they judge (the same commit does not
    count)."""
    if declared == rows:
        return False
    done = subprocess.run(
        ["git", "merge-base", "--is-ancestor", declared, rows], cwd=repo, capture_output=True
    )
    if done.returncode not in (0, 1):
        raise ValueError(
            f"git could not compare {declared!r} and {rows!r}: {done.stderr.decode().strip()}"
        )
    return done.returncode == 0


def rows_commit(folder: Path) -> str | None:
    """The commit that first added ``folder/rows.csv``."""
    out = _git(["log", "--diff-filter=A", "--format=%H", "--", "rows.csv"], Path(folder))
    return out.splitlines()[-1] if out else None
