"""Every audit test runs on one torch thread: the audits run thousands of tiny steps, which two
threads on a shared machine slow down many times over (tests/conftest.py's ``one_thread``)."""

import pytest


@pytest.fixture(autouse=True)
def _audit_on_one_thread(one_thread):
    yield
