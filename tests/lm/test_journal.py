"""The run journal's readers (dpnc.lm.journal): a torn line is skipped, finished zeroth-order steps
are replayed and every other begun step is counted as a release, the kill hook's setting is checked,
and non-finite numbers are written as JSON can hold them. The trainer's own use of the journal
(resume after a kill) is tests/lm/test_resume.py's."""

from __future__ import annotations

import json
import math

import pytest

from dpnc.lm.config import KILL_ENV
from dpnc.lm.journal import jsonable, kill_point_from_env, read_journal, replay_rows
from dpnc.privacy.releases import Gaussian, Release

STEP = Gaussian(1.0, 2.0)


def begin(t: int) -> dict:
    return {"t": t, "event": "begin", "release": STEP.to_dict()}


def end(t: int, released: float | None = 0.5) -> dict:
    return {"t": t, "event": "end", "seed": 100 + t, "released": released}


def test_read_journal_keeps_the_header_apart_and_skips_a_line_torn_by_a_kill(tmp_path):
    path = tmp_path / "journal.jsonl"
    assert read_journal(path) == (None, [])  # no journal yet: nothing to resume
    header = {"event": "run", "config": {"method": "dpzero"}}
    lines = [json.dumps(row) for row in (header, begin(0), end(0), begin(1))]
    path.write_text("\n".join(lines) + '\n\n{"t": 1, "event": "en')
    assert read_journal(path) == (header, [begin(0), end(0), begin(1)])


def test_replay_runs_finished_zeroth_order_steps_and_counts_every_other_begun_step():
    rows = [begin(2), end(2, 0.25), begin(3), end(3, -0.5), begin(4)]
    replayed, recorded = [], []

    def replay(seed, released):
        replayed.append((seed, released))

    counts = replay_rows(rows, 2, zeroth_order=True, replay=replay, record=recorded.append)
    assert counts == (2, 1)  # step 4 began and never ended: it may have released
    assert replayed == [(102, 0.25), (103, -0.5)]
    assert recorded == [STEP, STEP, STEP] and all(isinstance(r, Release) for r in recorded)


def test_replay_skips_the_steps_a_checkpoint_holds_and_replays_no_first_order_step():
    rows = [begin(0), end(0), begin(1), end(1), begin(2), end(2)]
    replayed, recorded = [], []
    counts = replay_rows(
        rows, 1, zeroth_order=False, replay=lambda *a: replayed.append(a), record=recorded.append
    )
    assert counts == (0, 2) and replayed == [] and len(recorded) == 2


def test_a_step_after_a_lost_one_is_not_replayed_the_model_stops_where_the_run_did():
    rows = [begin(0), begin(1), end(1)]  # step 0's 'end' never written, step 1 then ran
    replayed, recorded = [], []
    counts = replay_rows(
        rows, 0, zeroth_order=True, replay=lambda *a: replayed.append(a), record=recorded.append
    )
    assert counts == (0, 2) and replayed == [] and len(recorded) == 2


def test_the_kill_hook_reads_phase_and_step_and_refuses_anything_else(monkeypatch):
    monkeypatch.delenv(KILL_ENV, raising=False)
    assert kill_point_from_env() is None
    monkeypatch.setenv(KILL_ENV, "between:3")
    assert kill_point_from_env() == ("between", 3)
    for bad in ("lunch:3", "between:x", "between"):
        monkeypatch.setenv(KILL_ENV, bad)
        with pytest.raises(ValueError, match=f"{KILL_ENV} must be 'phase:step'"):
            kill_point_from_env()


def test_jsonable_spells_non_finite_numbers_in_nested_values():
    value = {"loss": math.nan, "rates": (math.inf, -math.inf, 1.5), "name": "run", "n": 3}
    assert jsonable(value) == {"loss": "nan", "rates": ["inf", "-inf", 1.5], "name": "run", "n": 3}
    json.dumps(jsonable(value), allow_nan=False)  # strict JSON: no NaN or Infinity tokens
