"""A short private fine-tuning run on the one-layer MiniLM of tests/small_model.py and real SST-2
rows (mechanics, not accuracy), for the trainer's tests, and what they compare between runs."""

from __future__ import annotations

from pathlib import Path

import torch

from dpnc.lm import FinetuneConfig, Trainer
from tests.shared_data import DATA
from tests.small_model import one_layer_minilm


def config(tmp_path: Path, **kwargs) -> FinetuneConfig:
    """Private DPZero, 3 steps at B = 8 on all parameters, into tmp_path/out; kwargs override."""
    defaults = dict(
        epsilon=6.0,
        task="SST-2",
        data_dir=str(DATA),
        method="dpzero",
        steps=3,
        batch_size=8,
        eval_examples=16,
        progress=False,
        out=str(tmp_path / "out"),
        max_length=64,
        train="all",
        eval_every=0,
    )
    defaults["model"] = one_layer_minilm()  # tests/small_model.py: mechanics, not accuracy
    return FinetuneConfig(**{**defaults, **kwargs})


def params(trainer: Trainer) -> list[torch.Tensor]:
    """A copy of the classifier's parameters, to compare after training."""
    return [p.detach().clone() for p in trainer.classifier.parameters()]


def trajectory(records) -> list[tuple]:
    """The public trajectory of step records: (step, direction seed) each."""
    return [(r.step, r.seed) for r in records]
