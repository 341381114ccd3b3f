"""README.md states verdicts, not hand-copied numbers (issue 27): its generated blocks match docs/results.

Every measured number or verdict of a reproduction in README.md sits between ``<!-- verdicts:begin NAME -->`` and
``<!-- verdicts:end NAME -->`` and is written by ``docs/results/readme_verdicts.py`` from the committed result files.
A result re-judged or re-run without regenerating the README fails here; fix it with

    .venv/bin/python docs/results/readme_verdicts.py --write

The generator uses the standard library only (no torch, no dpnc import, nothing from ../shared): this file runs in
well under a second.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "results" / "readme_verdicts.py"


def _load():
    spec = importlib.util.spec_from_file_location("readme_verdicts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


rv = _load()


def test_readme_blocks_match_the_results():
    diff = rv.check()
    assert not diff, ("README.md drifted from docs/results; run `.venv/bin/python docs/results/readme_verdicts.py "
                      "--write`:\n" + "\n".join(diff[:80]))


def test_every_block_appears_once_with_its_markers():
    text = (ROOT / "README.md").read_text()
    for name in rv.BLOCKS:
        assert text.count(f"<!-- verdicts:begin {name} -->") == 1, name
        assert text.count(f"<!-- verdicts:end {name} -->") == 1, name
    assert set(re.findall(r"<!-- verdicts:begin (\S+) -->", text)) == set(rv.BLOCKS)


def test_every_result_json_is_in_a_block():
    """A new committed result.json must be placed in the README (or the check fails until someone decides where)."""
    results = {str(p.parent.relative_to(SCRIPT.parent)) for p in SCRIPT.parent.rglob("result.json")}
    shown = {part.folder for block in rv.BLOCKS.values() for part in block.parts if isinstance(part, rv.Claims)}
    assert results == shown, {"not in README.md": sorted(results - shown), "gone": sorted(shown - results)}


def test_every_failing_claim_is_shown():
    text = (ROOT / "README.md").read_text()
    for block in rv.BLOCKS.values():
        for part in block.parts:
            if isinstance(part, rv.Claims) and part.show != "tally":
                claims = json.loads((SCRIPT.parent / part.folder / "result.json").read_text())["claims"]
                for c in claims:
                    if c["holds"] is False:
                        assert f"- **fails** — {rv._cell(c['statement'])}" in text, (part.folder, c["statement"])


def test_summary_links_exist():
    text = (ROOT / "README.md").read_text()
    for link in re.findall(r"\]\((docs/results/[^)]+)\)", text):
        assert (ROOT / link).is_file(), link


def _copy(tmp_path: Path) -> Path:
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", readme)
    return readme


def test_a_changed_number_is_drift_and_write_repairs_it(tmp_path):
    readme = _copy(tmp_path)
    text = readme.read_text()
    start = text.index("<!-- verdicts:begin dpzero-lm -->")
    m = re.compile(r"\d+\.\d").search(text, start)
    readme.write_text(text[:m.start()] + "9" + text[m.start() + 1:])   # one hand edit inside a block
    assert rv.check(readme)
    assert rv.main(["--readme", str(readme)]) == 1
    assert rv.main(["--readme", str(readme), "--write"]) == 0
    assert not rv.check(readme) and readme.read_text() == text


def test_a_changed_verdict_is_drift(tmp_path, monkeypatch):
    """A result re-judged (one claim's verdict flipped in result.json) no longer matches the README."""
    original = rv._result

    def flipped(folder):
        result = original(folder)
        if folder == "dpzero-lm":   # a copy: the original is cached
            result = {**result, "claims": [{**result["claims"][0], "holds": False}, *result["claims"][1:]]}
        return result

    monkeypatch.setattr(rv, "_result", flipped)
    assert any("**fails**" in line for line in rv.check() if line.startswith("+"))


def test_a_missing_block_is_refused(tmp_path):
    readme = _copy(tmp_path)
    text = readme.read_text()
    readme.write_text(text.replace("<!-- verdicts:begin audit -->", "").replace("<!-- verdicts:end audit -->", ""))
    with pytest.raises(SystemExit, match="missing"):
        rv.check(readme)


def test_a_pick_matching_no_claim_is_an_error(monkeypatch):
    part = rv.Claims("utility", show="picked", picks=("a claim that no result makes",))
    with pytest.raises(SystemExit, match="no claim contains"):
        rv.render_claims(part)
