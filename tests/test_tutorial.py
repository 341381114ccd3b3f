"""Every ```python block of docs/tutorial-own-objective.md runs, top to bottom in one namespace (a tutorial is
read as one session), with the README's block parser (:func:`tests.test_readme._blocks`)."""

from pathlib import Path

from tests.test_readme import LANGUAGES, _blocks, _compile

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "tutorial-own-objective.md"
BLOCKS = _blocks(TUTORIAL)


def test_every_fence_has_a_checked_language():
    assert BLOCKS and all(b.language in LANGUAGES for b in BLOCKS)
    assert [b.language for b in BLOCKS].count("python") >= 5


def test_the_tutorial_runs_as_one_session(tmp_path, monkeypatch, one_thread):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__tutorial__"}
    for block in BLOCKS:
        if block.language == "python":
            exec(_compile(block, TUTORIAL), namespace)
    report, certificate = namespace["report"], namespace["certificate"]
    assert report.private and namespace["o2nc"].report(1e-6).private
    assert certificate.bound >= 0
