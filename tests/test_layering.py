"""The layering of the two packages: dpnc (the library) never imports dpnc_reproduce (its client) when loaded;
``dpnc reproduce`` loads the reproductions on first use. Inside dpnc_reproduce, no function-local import hides a
circle, and no module is over 500 lines."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
# Function-local imports that stay in dpnc_reproduce, and why: matplotlib's backend is chosen when a figure is drawn
# (importing a report must not switch a user's backend); opacus is an optional dependency (the lm extra).
LOCAL_OK = ("matplotlib", "opacus")


@pytest.mark.parametrize("module", ["dpnc", "dpnc.cli", "dpnc.demo"])
def test_importing_the_library_does_not_import_the_reproductions(module):
    code = (f"import json, sys, {module}; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('dpnc_reproduce'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(SRC)}, cwd=SRC.parent)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def _imports(path: Path):
    """(module imported, whether at module level) for every import statement of ``path``."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((a.name, id(node) in top) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module, id(node) in top


def test_the_library_imports_the_reproductions_only_inside_the_cli_commands():
    offenders = [(str(p.relative_to(SRC)), m) for p in (SRC / "dpnc").rglob("*.py") for m, top in _imports(p)
                 if m.split(".")[0] == "dpnc_reproduce" and (top or p.name != "cli.py")]
    assert offenders == []


def test_the_reproductions_have_no_function_local_imports_and_no_module_over_500_lines():
    files = sorted((SRC / "dpnc_reproduce").rglob("*.py"))
    local = [(str(p.relative_to(SRC)), m) for p in files for m, top in _imports(p)
             if not top and m.split(".")[0] not in LOCAL_OK]
    assert local == []
    assert [str(p.relative_to(SRC)) for p in files if len(p.read_text().splitlines()) > 500] == []
