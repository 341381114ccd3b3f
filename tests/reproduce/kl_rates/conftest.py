"""The tiny kl-rates run, made once for every test module here that reads it (seconds)."""

import pytest

from dpnc_reproduce import protocol
from dpnc_reproduce.kl_rates.experiment import EXPERIMENT
from tests.reproduce.kl_rates.rows import TINY


@pytest.fixture(scope="package")
def tiny() -> protocol.Result:
    return protocol.run_experiment(EXPERIMENT, TINY, progress=False, workers=1)
