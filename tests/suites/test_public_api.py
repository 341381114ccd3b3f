"""The public API is the modules of :data:`dpnc.PUBLIC_MODULES`, each with a complete ``__all__``.

What users read and copy imports only from them: the python code blocks of README.md and
docs/**/*.md, the client package ``dpnc_reproduce`` and the scripts under docs/results/. Each
``import dpnc…`` names a public module, each ``from dpnc… import X`` takes X from its ``__all__`` (or
X is a public module itself), and so does each attribute read off a public module (``dpnc.tier.X``,
``tune.X`` after ``from dpnc import tune``). Each public module's ``__all__`` names exist, and every
function or class it defines without a leading underscore is in it."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import textwrap
from pathlib import Path

import pytest

import dpnc

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = set(dpnc.PUBLIC_MODULES)
FENCE = re.compile(r"^([ \t]*)```python[^\n]*\n(.*?)^\1```", re.M | re.S)


def python_blocks(markdown: str) -> str:
    """The page's python code blocks, each on its page lines (the rest blank): errors cite the page."""
    lines = [""] * len(markdown.splitlines())
    for m in FENCE.finditer(markdown):
        first = markdown.count("\n", 0, m.start(2))
        code = textwrap.dedent(m.group(2)).splitlines()
        lines[first : first + len(code)] = code
    return "\n".join(lines) + "\n"


def _sources() -> dict[str, str]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    scripts = sorted((ROOT / "src" / "dpnc_reproduce").rglob("*.py"))
    scripts += sorted((ROOT / "docs" / "results").rglob("*.py"))
    found = {str(p.relative_to(ROOT)): python_blocks(p.read_text()) for p in pages}
    found |= {str(p.relative_to(ROOT)): p.read_text() for p in scripts}
    return {where: code for where, code in found.items() if re.search(r"\bdpnc\b", code)}


def _exports(module: str) -> set[str]:
    """``module.__all__``: read from the source where it is a literal, so that checking the docs
    does not import an optional dependency (transformers); else from the module."""
    tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]:
            try:
                return set(ast.literal_eval(node.value))
            except ValueError:
                break
    return set(importlib.import_module(module).__all__)


def _load(module: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:  # an optional extra (the lm extra's transformers)
        if e.name.split(".")[0] == "dpnc":
            raise
        pytest.skip(f"{module} needs {e.name}, not installed")


def _offers(module: str, name: str) -> bool:
    return f"{module}.{name}" in PUBLIC or name in _exports(module)


def _chain(node: ast.Attribute) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None when it does not start at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return [node.id, *parts] if isinstance(node, ast.Name) else None


def violations(code: str) -> list[str]:
    """What ``code`` takes from dpnc outside the public API, one line each."""
    found, bound = [], {}  # bound: a local name -> the public module it holds
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] != "dpnc":
                    continue
                if a.name not in PUBLIC:
                    found.append(f"line {node.lineno}: import {a.name} (not a public module)")
                elif a.asname:
                    bound[a.asname] = a.name
                else:
                    bound["dpnc"] = "dpnc"
        elif isinstance(node, ast.ImportFrom) and not node.level:
            module = node.module or ""
            if module.split(".")[0] != "dpnc":
                continue
            if module not in PUBLIC:
                found.append(f"line {node.lineno}: from {module} (not a public module)")
                continue
            for a in node.names:
                if not _offers(module, a.name):
                    found.append(f"line {node.lineno}: {a.name} is not in {module}.__all__")
                elif f"{module}.{a.name}" in PUBLIC:
                    bound[a.asname or a.name] = f"{module}.{a.name}"
    for node in ast.walk(tree):  # attributes read off a public module: dpnc.tier.DPZeroOptimizer
        chain = _chain(node) if isinstance(node, ast.Attribute) else None
        if not chain or chain[0] not in bound or not isinstance(node.ctx, ast.Load):
            continue
        module, rest = bound[chain[0]], chain[1:]
        while rest and f"{module}.{rest[0]}" in PUBLIC:
            module, rest = f"{module}.{rest[0]}", rest[1:]
        if rest and rest[0] not in _exports(module):
            found.append(f"line {node.lineno}: {rest[0]} is not in {module}.__all__")
    return sorted(set(found))


SOURCES = _sources()


@pytest.mark.parametrize("where", sorted(SOURCES))
def test_users_import_only_the_public_api(where):
    assert violations(SOURCES[where]) == []


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_name_of_all_exists(module):
    loaded = _load(module)
    assert len(loaded.__all__) == len(set(loaded.__all__))
    assert [name for name in loaded.__all__ if not hasattr(loaded, name)] == []


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_public_definition_is_in_all(module):
    loaded = _load(module)
    tree = ast.parse(Path(loaded.__file__).read_text())
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    defined = [n.name for n in tree.body if isinstance(n, kinds) and not n.name.startswith("_")]
    assert [name for name in defined if name not in loaded.__all__] == []


def test_the_check_catches_what_it_guards():
    assert (
        violations("from dpnc.privacy import Accountant\nimport dpnc\ndpnc.tier.DPZeroOptimizer")
        == []
    )
    assert violations("from dpnc import tune\ntune.random_stopping") == []
    assert violations("from dpnc.privacy.budget import Budget") == [
        "line 1: from dpnc.privacy.budget (not a public module)"
    ]
    assert violations("import dpnc.lm.train") == [
        "line 1: import dpnc.lm.train (not a public module)"
    ]
    assert violations("from dpnc.privacy import accountant") == [
        "line 1: accountant is not in dpnc.privacy.__all__"
    ]
    assert violations("import dpnc\ndpnc.privacy.budget.Budget(1.0, 1e-5)") == [
        "line 2: budget is not in dpnc.privacy.__all__"
    ]
    assert violations("from dpnc import tune\ntune._declared") == [
        "line 2: _declared is not in dpnc.tune.__all__"
    ]
    assert python_blocks("```python\nx = 1\n```\n```bash\ny\n```") == "\nx = 1\n\n\n\n\n"
    assert python_blocks("- a\n\n  ```python\n  x = 1\n  ```").splitlines()[3] == "x = 1"
