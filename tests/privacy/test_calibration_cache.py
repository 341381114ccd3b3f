"""The on-disk calibration cache (dpnc.privacy.calibrate): shared between processes, never trusted.

A stored multiplier is used only after an accountant call shows that it meets the target and is the
smallest that does (up to a tolerance); an edited file (less noise, or more) is ignored and the
search runs again; PLD's fallback to RDP warns on every answer, stored or not."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dpnc.privacy import calibrate
from dpnc.privacy.calibrate import epsilon_for, noise_multiplier

DELTA = 1e-5
QUESTION = dict(epsilon=2.0, delta=DELTA, sampling_rate=1 / 64, steps=4, accountant="pld")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DPNC_CACHE_DIR", str(tmp_path))
    calibrate._noise_multiplier.cache_clear()
    yield tmp_path / "calibrations"
    calibrate._noise_multiplier.cache_clear()


def _search_refused(*args, **kwargs):
    raise AssertionError("the search ran although a valid answer was stored")


def test_an_answer_is_stored_and_another_process_uses_it_without_searching(cache, monkeypatch):
    m = noise_multiplier(**QUESTION)
    [stored] = cache.glob("*.json")
    entry = json.loads(stored.read_text())
    assert entry["multiplier"] == m and entry["question"][:5] == [2.0, DELTA, 1 / 64, 4, "pld"]
    # Another process (a resumed run, another rank) finds it: the same multiplier, no search.
    code = (
        "import sys; from dpnc.privacy import calibrate as c; c._search = lambda *a: sys.exit(3); "
        f"print(repr(c.noise_multiplier(2.0, {DELTA}, 1 / 64, 4, accountant='pld')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DPNC_CACHE_DIR": str(cache.parent)},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout) == m
    calibrate._noise_multiplier.cache_clear()
    monkeypatch.setattr(calibrate, "_search", _search_refused)
    assert noise_multiplier(**QUESTION) == m


def test_an_edited_answer_that_misses_the_target_is_ignored(cache):
    m = noise_multiplier(**QUESTION)
    [stored] = cache.glob("*.json")
    entry = json.loads(stored.read_text())
    stored.write_text(json.dumps({**entry, "multiplier": m / 2}))  # half the noise: ε far above 2
    assert epsilon_for(m / 2, 1 / 64, 4, DELTA, accountant="pld") > 2.0
    calibrate._noise_multiplier.cache_clear()
    assert noise_multiplier(**QUESTION) == m  # searched again
    assert json.loads(stored.read_text())["multiplier"] == m  # and the file mended


def test_an_edited_answer_with_more_noise_than_the_minimum_is_ignored(cache):
    """A stored σ twice the minimum meets the target and was once used: a run got twice the noise it
    needed."""
    m = noise_multiplier(**QUESTION)
    [stored] = cache.glob("*.json")
    entry = json.loads(stored.read_text())
    stored.write_text(json.dumps({**entry, "multiplier": 2 * m}))
    assert epsilon_for(2 * m, 1 / 64, 4, DELTA, accountant="pld") <= 2.0  # it meets the target
    calibrate._noise_multiplier.cache_clear()
    assert noise_multiplier(**QUESTION) == m  # searched again
    assert json.loads(stored.read_text())["multiplier"] == m


def test_garbage_and_other_questions_in_the_folder_are_ignored(cache):
    cache.mkdir(parents=True)
    m = noise_multiplier(**QUESTION)
    [stored] = cache.glob("*.json")
    stored.write_text("{not json")
    calibrate._noise_multiplier.cache_clear()
    assert noise_multiplier(**QUESTION) == m


def test_the_fallback_to_rdp_warns_on_every_answer_stored_or_not(cache):
    for _ in range(2):
        calibrate._noise_multiplier.cache_clear()
        with pytest.warns(UserWarning, match="calibrated by RDP instead"):
            m = noise_multiplier(1e3, DELTA, 1.0, 1, accountant="pld")
        assert m == noise_multiplier(1e3, DELTA, 1.0, 1, accountant="rdp")
    assert len(list(cache.glob("*.json"))) == 1


def test_off_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("DPNC_CACHE_DIR", "off")
    calibrate._noise_multiplier.cache_clear()
    assert calibrate.cache_dir() is None
    noise_multiplier(**QUESTION)
    monkeypatch.delenv("DPNC_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert calibrate.cache_dir() == tmp_path / "dpnc"
