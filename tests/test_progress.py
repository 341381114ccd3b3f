"""Progress bars of private runs print counts, never a rate or a time (step times reveal the secret batches)."""

import io
import re

from dpnc.progress import progress


def test_the_bar_prints_no_rate_and_no_time():
    out = io.StringIO()
    for _ in progress(range(30), desc="DPZero", file=out, mininterval=0):
        pass
    text = out.getvalue()
    assert "30/30" in text and "DPZero" in text
    assert not re.search(r"it/s|s/it|\d+:\d\d|\?", text)   # tqdm's rate, elapsed/remaining and unknown-rate marks
