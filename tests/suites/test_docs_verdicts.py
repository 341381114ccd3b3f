"""The documentation pages state verdicts, not hand-copied numbers: their generated blocks match
docs/results.

Every measured number or verdict of a reproduction on a page under docs/ (the per-paper pages, the
fine-tuning guide, the practical settings, the audit) sits between ``<!-- verdicts:begin NAME -->``
and ``<!-- verdicts:end NAME -->`` and is written by ``docs/results/readme_verdicts.py`` from the
committed result files (``PAGES`` says which page holds which block). A result re-judged or re-run
without regenerating the pages fails here; fix it with

    .venv/bin/python docs/results/readme_verdicts.py --write

The generator uses the standard library only (no torch, no dpnc import, nothing from ../shared):
this file runs in well under a second."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "results" / "readme_verdicts.py"


def _load():
    spec = importlib.util.spec_from_file_location("readme_verdicts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


rv = _load()
PAGES = sorted(set(rv.PAGES.values()))


def _text(page: str, root: Path = ROOT) -> str:
    return (root / page).read_text()


def test_the_pages_match_the_results():
    diff = rv.check()
    assert not diff, (
        "the pages drifted from docs/results; run `.venv/bin/python docs/results/readme_verdicts.py "
        "--write`:\n" + "\n".join(diff[:80])
    )


def test_every_block_appears_once_on_its_page_and_nowhere_else():
    assert set(rv.PAGES) == set(rv.BLOCKS)
    for page in [*PAGES, "README.md"]:
        text = _text(page)
        here = {n for n, p in rv.PAGES.items() if p == page}
        for name in here:
            assert text.count(f"<!-- verdicts:begin {name} -->") == 1, (page, name)
            assert text.count(f"<!-- verdicts:end {name} -->") == 1, (page, name)
        assert set(re.findall(r"<!-- verdicts:begin (\S+) -->", text)) == here, page


def test_every_result_json_is_in_a_block():
    """A new committed result.json must be placed on a page (or the check fails until someone
    decides where)."""
    results = {str(p.parent.relative_to(SCRIPT.parent)) for p in SCRIPT.parent.rglob("result.json")}
    shown = {
        part.folder
        for block in rv.BLOCKS.values()
        for part in block.parts
        if isinstance(part, rv.Claims)
    }
    assert results == shown, {
        "not on a page": sorted(results - shown),
        "gone": sorted(shown - results),
    }


def test_every_failing_claim_is_shown():
    for name, block in rv.BLOCKS.items():
        text = _text(rv.PAGES[name])
        for part in block.parts:
            if isinstance(part, rv.Claims) and part.show != "tally":
                claims = json.loads((SCRIPT.parent / part.folder / "result.json").read_text())[
                    "claims"
                ]
                for c in claims:
                    if c["holds"] is False:
                        assert f"- **fails** — {rv._cell(c['statement'])}" in text, (
                            part.folder,
                            c["statement"],
                        )


def test_summary_links_exist():
    for page in PAGES:
        for link in re.findall(r"\]\((results/[^)]+)\)", _text(page)):
            assert (ROOT / page).parent.joinpath(link).is_file(), (page, link)


def _copy(tmp_path: Path) -> Path:
    for page in PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / page, tmp_path / page)
    return tmp_path


def test_a_changed_number_is_drift_and_write_repairs_it(tmp_path):
    root = _copy(tmp_path)
    page = root / rv.PAGES["dpzero-lm"]
    text = page.read_text()
    start = text.index("<!-- verdicts:begin dpzero-lm -->")
    m = re.compile(r"\d+\.\d").search(text, start)
    page.write_text(text[: m.start()] + "9" + text[m.start() + 1 :])  # one hand edit inside a block
    assert rv.check(root)
    assert rv.main(["--root", str(root)]) == 1
    assert rv.main(["--root", str(root), "--write"]) == 0
    assert not rv.check(root) and page.read_text() == text


def test_a_changed_verdict_is_drift(tmp_path, monkeypatch):
    """A result re-judged (one claim's verdict flipped in result.json) no longer matches its
    page."""
    original = rv._result

    def flipped(folder):
        result = original(folder)
        if folder == "dpzero-lm":  # a copy: the original is cached
            result = {
                **result,
                "claims": [{**result["claims"][0], "holds": False}, *result["claims"][1:]],
            }
        return result

    monkeypatch.setattr(rv, "_result", flipped)
    assert any("**fails**" in line for line in rv.check() if line.startswith("+"))


def test_a_missing_block_is_refused(tmp_path):
    root = _copy(tmp_path)
    page = root / rv.PAGES["audit"]
    text = page.read_text()
    page.write_text(
        text.replace("<!-- verdicts:begin audit -->", "").replace("<!-- verdicts:end audit -->", "")
    )
    with pytest.raises(SystemExit, match="missing"):
        rv.check(root)


def test_a_block_on_the_wrong_page_is_refused():
    text = "<!-- verdicts:begin audit -->\n<!-- verdicts:end audit -->"
    with pytest.raises(SystemExit, match="belongs on docs/audit.md"):
        rv.regenerate(text, page="docs/dpzero.md")


def test_a_pick_matching_no_claim_is_an_error(monkeypatch):
    part = rv.Claims("utility", show="picked", picks=("a claim that no result makes",))
    with pytest.raises(SystemExit, match="no claim contains"):
        rv.render_claims(part)


def test_readme_states_the_decisive_tally():
    """README's DPZero line gives the declared claims' tally of docs/results/dpzero-decisive."""
    tally = rv._tally(rv._result("dpzero-decisive")["claims"])
    readme = " ".join(_text("README.md").split())
    assert f"declared before it ran: {tally}" in readme
