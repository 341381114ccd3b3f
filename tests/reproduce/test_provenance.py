"""Provenance: a claim's declaration must precede the rows that judge it, and a run records the
commit of its declarations."""

from __future__ import annotations

import pytest

from dpnc_reproduce.provenance import declaring_commit, precedes, rows_commit


def test_declarations_must_precede_the_rows_they_judge(tmp_path):

    def git(*args):
        import subprocess

        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp_path,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    git("init", "-q")
    (tmp_path / "claims.py").write_text("TOL = 0.2\n")
    git("add", "claims.py")
    git("commit", "-q", "-m", "declare")
    declared = git("rev-parse", "HEAD")
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / "rows.csv").write_text("x,y\n1,2\n")
    git("add", "res/rows.csv")
    git("commit", "-q", "-m", "rows")
    rows = rows_commit(tmp_path / "res")
    assert rows == git("rev-parse", "HEAD")
    assert precedes(declared, rows, tmp_path) is True
    # a tolerance changed after the rows (as RATE_TOL was): its commit does not precede them
    (tmp_path / "claims.py").write_text("TOL = 0.1\n")
    git("commit", "-q", "-am", "loosen after the data")
    later = git("rev-parse", "HEAD")
    assert precedes(later, rows, tmp_path) is False
    assert precedes(rows, rows, tmp_path) is False  # the same commit is not "before"


def test_a_run_records_the_commit_of_its_declarations():
    from dpnc_reproduce import nonsmooth_rates

    record = declaring_commit(nonsmooth_rates.EXPERIMENT)
    if record is None:
        pytest.skip("not a git work tree")
    assert record["paths"] == ["src/dpnc_reproduce/claims.py", "src/dpnc_reproduce/nonsmooth_rates"]
    assert len(record["commit"]) == 40 and isinstance(record["dirty"], bool)


def test_committed_results_say_whether_their_declarations_came_before_their_rows():
    """Every committed result whose declarations carry a commit (a run's ``declared_commit``, a
    re-judging's record) says truly whether that commit precedes the commit that first added its
    rows: a run must (its declarations precede its rows), a re-judging records ``declared_after``
    exactly when they do not."""
    import json
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    results = sorted((root / "docs" / "results").rglob("result.json"))
    checked = 0
    for path in results:
        rows = rows_commit(path.parent)
        if rows is None:
            continue
        data = json.loads(path.read_text())
        records = [(data["declared_commit"], False)] if data.get("declared_commit") else []
        records += [
            (r["declared_commit"], r["declared_after"])
            for r in data.get("rejudged", ())
            if r.get("declared_commit")
        ]
        for declared, after in records:
            known = (
                subprocess.run(
                    ["git", "cat-file", "-e", f"{declared['commit']}^{{commit}}"],
                    cwd=root,
                    capture_output=True,
                ).returncode
                == 0
            )
            if not known:  # a shallow clone: the history is not here
                continue
            before = precedes(declared["commit"], rows, root)
            assert after == (not before), (path, declared, rows)
            checked += 1
    if checked == 0:
        pytest.skip("no declaring commit with its history in this checkout")
