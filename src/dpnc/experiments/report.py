"""What every experiment writes the same way: CSV tables and log-log slopes."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path


def write_csv(path: Path, rows: Sequence[dict]) -> Path:
    """Rows of equal keys as a CSV file with a header."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log y against log x (inf if some y is not finite and positive)."""
    if not all(math.isfinite(y) and y > 0 for y in ys):
        return math.inf
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)
