"""Fixtures shared across the test tree."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

# One torch thread per test process and the processes tests start (set before torch is imported):
# with two, tiny ops wait at OpenMP barriers whenever the cores are busy (measured 30 ms instead of
# 0.3 ms per op on a loaded 2-core machine). `make test` runs several test processes (pytest-xdist)
# instead.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

# One calibration cache for the whole session, its test processes (pytest-xdist workers inherit the
# controller's environment) and the runs they start in subprocesses; never the user's
# (~/.cache/dpnc): a PLD calibration costs seconds, and many tests ask the same question. Entries
# are written atomically (os.replace), so processes may share it; the process that made it removes
# it.
_OWN_CACHE = "DPNC_TEST_CACHE_DIR" not in os.environ
if _OWN_CACHE:
    os.environ["DPNC_TEST_CACHE_DIR"] = tempfile.mkdtemp(prefix="dpnc-test-cache-")
os.environ["DPNC_CACHE_DIR"] = os.environ["DPNC_TEST_CACHE_DIR"]


def pytest_unconfigure(config):
    if _OWN_CACHE:
        shutil.rmtree(os.environ["DPNC_CACHE_DIR"], ignore_errors=True)


@pytest.fixture
def one_thread():
    """One torch thread: two threads on a shared 2-core machine can be 10x slower than one
    (oversubscription)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# The tiers, by where a test lives and what it reads (pyproject's markers say what each holds):
# `make test-fast` runs `unit`, `make test` everything but `slow`.
_TIERS = {
    "lm": ("tests/lm/", "tests/integrations/"),
    "reproduce": (
        "tests/reproduce/",
        "tests/benchmarks/test_gpu_",
        "tests/suites/test_docs",
        "tests/test_docs",
        "tests/test_demo",
    ),
}


def pytest_collection_modifyitems(config, items):
    from tests.shared_data import REASON

    root = str(config.rootpath) + "/"
    for item in items:
        where = str(item.path).removeprefix(root)
        tiers = [tier for tier, starts in _TIERS.items() if where.startswith(starts)]
        if any(REASON in str(m.kwargs.get("reason", "")) for m in item.iter_markers("skipif")):
            tiers.append("data")
        if not tiers and not item.get_closest_marker("slow"):
            tiers.append("unit")
        for tier in tiers:
            item.add_marker(tier)


def pytest_terminal_summary(terminalreporter):
    """Say once, at the end, how many tests the missing real data skipped (tests/shared_data.py), so
    that a clone without ../shared does not pass quietly with the fine-tuning tests unrun."""
    from tests.shared_data import REASON

    skipped = [r for r in terminalreporter.stats.get("skipped", []) if REASON in str(r.longrepr)]
    if skipped:
        terminalreporter.write_sep(
            "=", f"{len(skipped)} tests did not run: {REASON}", yellow=True, bold=True
        )
