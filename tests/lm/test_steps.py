"""The parts of a training step (dpnc.lm.steps) on the one-layer MiniLM of tests/small_model.py and
real SST-2 rows: a batch's encoded rows, with or without the frozen-prefix cache, and the clipped
sum of per-example gradients by every route. Whole runs of each method are
tests/lm/test_train.py's."""

from __future__ import annotations

import pytest
import torch

from dpnc.lm import build_classifier
from dpnc.lm.cache import PrefixCache, cacheable_prefix
from dpnc.lm.steps import encode_rows, per_example_clipped_sum
from dpnc.lm.trainable import select_trainable
from tests.shared_data import needs_data
from tests.small_model import one_layer_minilm

pytestmark = needs_data
CPU = torch.device("cpu")


def classifier(task, head: str, mode: str):
    clf = build_classifier(one_layer_minilm(), task, head=head, max_length=32)
    select_trainable(clf, mode, top_k=1)
    return clf


def test_a_batchs_rows_are_the_drawn_examples_with_or_without_the_cache(sst2_64):
    clf = classifier(sst2_64.task, "linear", "head")
    index = torch.tensor([7, 2, 7, 30])  # a row drawn twice is encoded twice
    plain = encode_rows(clf, sst2_64, None, CPU, index)
    cache = PrefixCache(clf, sst2_64.texts, cacheable_prefix(clf))
    cached = encode_rows(clf, sst2_64, cache, CPU, index)
    assert torch.equal(plain["labels"], sst2_64.labels[index]) and torch.equal(
        cached["labels"], plain["labels"]
    )
    with torch.no_grad():
        torch.testing.assert_close(clf(cached), clf(plain), rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("head", "mode", "routes"),
    [("prompt", "top-k", ("vmap", "auto")), ("linear", "head", ("layers", "vmap", "auto"))],
)
def test_every_route_gives_the_loops_clipped_sum(sst2_64, head, mode, routes):
    # In float64 the routes agree to rounding (in float32 this model's own rounding is ~1e-3).
    clf = classifier(sst2_64.task, head, mode).double()
    batch = encode_rows(clf, sst2_64, None, CPU, torch.arange(4))
    clf.zero_grad()
    clf(batch).sum().backward()  # without clipping: the gradient of the summed loss
    params = [p for p in clf.parameters() if p.requires_grad]
    reference = torch.cat([p.grad.reshape(-1) for p in params])
    clf.zero_grad()
    loop = per_example_clipped_sum(clf, batch, 1e12, per_example="loop")
    assert loop.clipped == 0
    assert float((loop.total - reference).norm() / reference.norm()) < 1e-10
    C = 0.5 * float(loop.total.norm()) / 4  # below the mean gradient's norm: some are clipped
    want = per_example_clipped_sum(clf, batch, C, per_example="loop")
    assert 1 <= want.clipped <= 4 and float(want.total.norm()) <= 4 * C * (1 + 1e-9)
    for how in routes:
        got = per_example_clipped_sum(clf, batch, C, per_example=how, microbatch=3)
        assert got.clipped == want.clipped, how
        assert float((got.total - want.total).norm() / want.total.norm()) < 1e-10, how
