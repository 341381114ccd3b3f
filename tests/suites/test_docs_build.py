"""The documentation site builds with ``mkdocs build --strict``: CI runs ``make test``, so this test
is CI's docs build. Strict mode turns every warning into a failure: a broken link between pages, a
missing anchor, a docstring cross-reference mkdocstrings cannot resolve, a page missing from the nav
that the nav names.

Skipped only where mkdocs is not installed (the ``docs`` extra; ``make test`` installs it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
    reason="mkdocs and mkdocstrings are not installed (pip install -e '.[docs]'; make test has them)",
)
def test_the_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    site = tmp_path / "site"
    for page in ("index.html", "getting-started.html", "dpzero.html", "api/engine.html"):
        assert (site / page).is_file(), page
    api = (site / "api" / "engine.html").read_text()
    assert (
        "make_private" in api and "target_epsilon" in api
    )  # the API page comes from the docstrings
    check_the_built_site(site)


ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`")
HREF = re.compile(r'(?:href|src)="([^"]*)"')
SCRIPT = re.compile(r'<script[^>]*\bsrc="([^"]*)"')


def check_the_built_site(site: Path) -> None:
    """The site as a person opens it, from disk or over HTTP.

    No literal Sphinx role (``:class:`X```) or literal-block marker (``loop::``) in any page's text;
    every link between pages names a file (``page.html``), never a folder (opened from disk, a
    folder shows a directory listing), and the file exists; search works without a server or network
    (its index as a script, the Worker shim for file:// from the site, no script from elsewhere);
    each paper page shows its committed figures."""
    pages = sorted(
        p for p in site.rglob("*.html") if p.name != "404.html"
    )  # (a server's page: absolute links)
    assert len(pages) > 20
    roles, folders, missing, external, no_shim = [], [], [], [], []
    for page in pages:
        html = page.read_text()
        scripts = SCRIPT.findall(html)
        external += [
            f"{page.relative_to(site)} → {s}" for s in scripts if re.match(r"^(?:[a-z]+:)?//", s)
        ]
        if not any(s.endswith("javascripts/iframe-worker/shim.js") for s in scripts):
            no_shim.append(str(page.relative_to(site)))
        text = re.sub(r"<[^>]+>", "", html)
        if ROLE.search(text) or re.search(r"\w::\s*$", text, re.MULTILINE):
            roles.append(str(page.relative_to(site)))
        for link in HREF.findall(html):
            if re.match(r"^(?:[a-z]+:|#|//)", link) or not link:
                continue
            path = link.split("#")[0].split("?")[0]
            if not path:
                continue
            if path.endswith("/") or (page.parent / path).is_dir():
                folders.append(f"{page.relative_to(site)} → {link}")
            elif not (page.parent / path).exists():
                missing.append(f"{page.relative_to(site)} → {link}")
    assert roles == [], f"literal reST roles or '::' in {roles}"
    assert folders == [], f"directory-style links: {folders[:10]}"
    assert missing == [], f"links to files that are not in the site: {missing[:10]}"
    # offline: a CDN's script (the offline plugin's own default for the shim) fails without network,
    # and without the shim search from disk never starts
    assert external == [], f"scripts from elsewhere: {external[:10]}"
    assert no_shim == [], f"pages without the file:// Worker shim: {no_shim[:10]}"
    # the offline plugin's index as a script, loadable from file:// (a fetch of the JSON is refused
    # there)
    index = (site / "search" / "search_index.js").read_text()
    assert index.startswith("var __index = ")
    assert len(json.loads(index.removeprefix("var __index = "))["docs"]) > 100
    for paper in ("dpzero", "ztc", "klt", "menart"):
        images = [
            src
            for src in HREF.findall((site / f"{paper}.html").read_text())
            if src.endswith(".png")
        ]
        assert images and all((site / src).is_file() for src in images), (paper, images)
