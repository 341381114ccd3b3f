"""Where the tests find the real text data: the DPZero paper's few-shot splits (SST-2, SST-5, TREC,
RTE, SNLI, MNLI), in ``../shared/data`` beside the clone (the CI machine has it there) or wherever
``DPNC_TEST_DATA`` points.

A user's clone usually has neither: the tests that need the data then skip, and the session's
summary says how many skipped and why (``tests/conftest.py``), rather than leaving it to a line per
test. docs/finetuning.md ("The LM-BFF tasks") says how to make the splits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("DPNC_TEST_DATA") or ROOT.parent / "shared" / "data")
REASON = f"real text data not found at {DATA} (set DPNC_TEST_DATA to the few-shot splits' folder)"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=REASON)
