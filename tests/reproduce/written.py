"""A check the experiment tests share: what :func:`dpnc_reproduce.protocol.write` put on disk is the
result."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

from dpnc_reproduce import protocol


def assert_written(result: protocol.Result, out: Path, command: str, files: set[str]) -> str:
    """Write ``result`` under ``out``: exactly ``files`` (besides rows.csv, result.json,
    summary.md); rows.csv holds every row, every column, as the run made it; result.json the whole
    result (compared as JSON text, NaN-safe) and reads back as it was; summary.md starts with the
    command. Returns the summary."""
    paths = protocol.write(result, out, command)
    assert {p.name for p in paths} == {"rows.csv", "result.json", "summary.md", *files}
    with (out / "rows.csv").open() as f:
        assert list(csv.DictReader(f)) == [
            {k: "" if v is None else str(v) for k, v in dataclasses.asdict(r).items()}
            for r in result.rows
        ]
    assert json.dumps(json.loads((out / "result.json").read_text())) == json.dumps(
        {**result.to_json(), "command": command}
    )
    again = protocol.read(result.experiment, out / "result.json")
    assert again.config == result.config and json.dumps(again.to_json()) == json.dumps(
        result.to_json()
    )
    summary = (out / "summary.md").read_text()
    assert f"Command: `{command}`" in summary
    return summary
