"""Fixtures shared across the test tree."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
import torch

# One calibration cache for the whole session and its subprocesses, never the user's (~/.cache/dpnc): a PLD
# calibration costs seconds, and many tests (and the runs they start in subprocesses) ask the same question.
os.environ["DPNC_CACHE_DIR"] = tempfile.mkdtemp(prefix="dpnc-test-cache-")


def pytest_unconfigure(config):
    shutil.rmtree(os.environ["DPNC_CACHE_DIR"], ignore_errors=True)


@pytest.fixture
def one_thread():
    """One torch thread: two threads on a shared 2-core machine can be 10x slower than one (oversubscription)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def pytest_terminal_summary(terminalreporter):
    """Say once, at the end, how many tests the missing real data skipped (tests/shared_data.py), so that a clone
    without ../shared does not pass quietly with the fine-tuning tests unrun."""
    from tests.shared_data import REASON

    skipped = [r for r in terminalreporter.stats.get("skipped", []) if REASON in str(r.longrepr)]
    if skipped:
        terminalreporter.write_sep("=", f"{len(skipped)} tests did not run: {REASON}", yellow=True, bold=True)
