"""Shared by the language-model tests: offline Hugging Face, one torch thread."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(autouse=True)
def one_thread():
    # Two threads on a shared 2-core machine can be 10x slower than one (oversubscription).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
