"""Shared by the language-model tests: offline Hugging Face, one torch thread."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every LM test runs on one torch thread (tests/conftest.py)."""
