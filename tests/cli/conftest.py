"""The command-line tests' fixtures."""

import pytest

from dpnc.lm import train as lm_train
from dpnc_reproduce import protocol


@pytest.fixture
def no_work(monkeypatch):
    """Every run the CLI could start fails the test: bad input must be refused before any work."""

    def started(*args, **kwargs):
        raise AssertionError("the run started before the input was validated")

    for module in (protocol,):  # the runner of every reproduction
        monkeypatch.setattr(module, "run_experiment", started)
    monkeypatch.setattr(lm_train, "finetune", started)
