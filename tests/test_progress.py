"""Progress bars of private runs print counts, never a rate or a time (step times reveal the secret
batches)."""

import io
import re

from dpnc.progress import progress


def test_the_bar_prints_no_rate_and_no_time():
    out = io.StringIO()
    for _ in progress(range(30), desc="DPZero", file=out, mininterval=0):
        pass
    text = out.getvalue()
    assert "30/30" in text and "DPZero" in text
    assert not re.search(
        r"it/s|s/it|\d+:\d\d|\?", text
    )  # tqdm's rate, elapsed/remaining and unknown-rate marks


def test_a_bar_written_to_a_file_prints_a_line_every_twentieth_of_the_run_not_every_step():
    # Not on a terminal, every refresh used to be a new line: 5000 steps wrote 5000 lines to a log.
    out = io.StringIO()  # not a terminal
    for _ in progress(range(1000), desc="DPZero", file=out):
        pass
    refreshes = out.getvalue().count("\r") + out.getvalue().count("\n")
    assert 1000 / 50 <= refreshes <= 1000 / 50 + 5 and "1000/1000" in out.getvalue()
