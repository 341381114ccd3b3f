"""What a run reports (dpnc.lm.evaluation): the evaluated test examples, the evaluation of a
classifier on them (the one-layer MiniLM of tests/small_model.py on real SST-2 test rows), the ε
spent and the public record of the data. Whole runs' summaries are tests/lm/test_train.py's."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from dpnc.lm import FinetuneConfig, build_classifier, load_task
from dpnc.lm.cache import PrefixCache, cacheable_prefix
from dpnc.lm.evaluation import Evaluator, data_record, eval_set, spent_epsilon
from dpnc.lm.trainable import select_trainable
from dpnc.privacy import Accountant
from dpnc.privacy.releases import Gaussian, NonPrivate
from tests.shared_data import DATA, needs_data
from tests.small_model import one_layer_minilm


@needs_data
def test_the_evaluated_examples_are_one_fixed_subset_or_all(sst2_test):
    first, again = eval_set(sst2_test, 40), eval_set(sst2_test, 40)
    assert len(first) == 40 and first.texts == again.texts
    assert set(first.texts) <= set(sst2_test.texts) and first.texts != sst2_test.texts[:40]
    assert eval_set(sst2_test, None) is sst2_test is eval_set(sst2_test, len(sst2_test))


@needs_data
def test_an_evaluation_is_the_classifiers_accuracy_loss_and_per_example_results(sst2_test):
    examples = eval_set(sst2_test, 12)
    clf = build_classifier(one_layer_minilm(), examples.task, head="linear", max_length=32)
    select_trainable(clf, "head")
    with torch.no_grad():  # one batch: other paddings than the evaluator's batches of 5
        logits = clf.logits(clf.encode(examples.texts, examples.labels))
    right = logits.argmax(-1) == examples.labels
    plain = Evaluator(clf, examples, examples, cache=None, batch_size=5, group=None).evaluate()
    cache = PrefixCache(clf, examples.texts, cacheable_prefix(clf)).fill()
    cached = Evaluator(clf, examples, examples, cache=cache, batch_size=5, group=None).evaluate()
    for got in (plain, cached):
        assert got.correct == "".join("1" if r else "0" for r in right.tolist())
        assert got.accuracy == pytest.approx(float(right.float().mean()), abs=1e-12)
        assert got.loss == pytest.approx(float(F.cross_entropy(logits, examples.labels)), abs=1e-5)
    whole = Evaluator(clf, examples, examples.subset([0]), cache=None, batch_size=5, group=None)
    assert whole.evaluate(examples).correct == plain.correct  # a dataset given: all of it


def test_epsilon_is_zero_before_any_release_and_infinite_after_a_noiseless_one():
    ledger = Accountant("add/remove")
    assert spent_epsilon(ledger, 1e-5, "rdp") == spent_epsilon(ledger, 1e-5, "pld") == 0.0
    ledger.record(Gaussian(1.0, 4.0), 10)
    rdp = spent_epsilon(ledger, 1e-5, "rdp")
    assert 0 < rdp == ledger.epsilon(1e-5, "rdp") and math.isfinite(rdp)
    assert 0 < spent_epsilon(ledger, 1e-5, "pld") <= rdp  # PLD: the tighter bound
    ledger.record(NonPrivate())
    assert spent_epsilon(ledger, 1e-5, "rdp") == math.inf


@needs_data
def test_the_data_record_names_files_publicly_and_counts_a_test_split_only_if_it_is_public(
    sst2_test,
):
    train = load_task("SST-2", DATA, "train")
    config = FinetuneConfig(epsilon=4, data_dir=str(DATA))  # a benchmark's test split: public
    record = data_record(config, train, sst2_test)
    assert (record["task"], record["data_dir"], record["test_rows"]) == ("SST-2", DATA.name, 872)
    assert record["test_class_counts"] == sst2_test.class_counts()
    assert str(DATA) not in str(record)
    private = FinetuneConfig(epsilon=4, data_dir=str(DATA), test_public=False)
    assert data_record(private, train, sst2_test)["test_class_counts"] is None
