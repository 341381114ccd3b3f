"""DPTrainer's output boundary, tested by neighbouring training sets (the rule, not a list of
leaks).

Two training sets that differ in one row, trained with the same testing seeds (batches, noise, the
step's dropout), must give equal outputs in every channel the Trainer has, except the released
values and what follows from them (the parameters, hence the saved weights and the optimizer's
moments): every file under ``output_dir`` (checkpoints with their ``trainer_state.json``, the final
model, the metrics files that transformers' example scripts write with ``save_metrics``), every INFO
line of the transformers logger, every callback event and ``train()``'s return value. The
neighbours: a long padded row, a row that changes the dataset's length (n is declared), an outlier,
and a row whose loss raises. With a self-audit, the canaries join both sets alike; its result
(``self_audit.json``) is a function of released values and may differ."""

from __future__ import annotations

import logging
import math
import shutil

import pytest
import torch

transformers = pytest.importorskip("transformers")
from torch import nn  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from dpnc.integrations.transformers import DPTrainer, per_example_cross_entropy  # noqa: E402
from dpnc.self_audit import SelfAudit  # noqa: E402
from tests.integrations.test_transformers import arguments, tiny_bert  # noqa: E402

N, SHORT, LONG, STEPS, DELTA, M, BIG = 24, 3, 8, 4, 1e-5, 4, 1e3
# What may differ: the released values' consequences (the weights, Adam's moments of released
# gradients, the self-audit's scores of the released values).
RELEASED_FILES = ("model.safetensors", "optimizer.pt", "self_audit.json")


class Canaried(nn.Module):
    """The tiny BERT and a canary score w·x: a canary row (pad tokens, x = ±e_k) has the loss
    ±BIG·w_k plus terms free of w (what the self-audit needs); the real rows have x = 0."""

    def __init__(self) -> None:
        super().__init__()
        self.bert = tiny_bert()
        self.w = nn.Linear(M, 1, bias=False)
        nn.init.zeros_(self.w.weight)

    def forward(self, input_ids, attention_mask, x, labels=None):
        logits = self.bert(input_ids=input_ids, attention_mask=attention_mask).logits
        out = {"logits": logits, "score": self.w(x).squeeze(-1)}
        if labels is not None:  # the Trainer's evaluation reads a mean loss
            out["loss"] = nn.functional.cross_entropy(logits, labels)
        return out


def canaried_loss(outputs, labels):
    return per_example_cross_entropy(outputs["logits"], labels) + BIG * outputs["score"]


def audit() -> SelfAudit:
    offset = sum(p.numel() for p in Canaried().bert.parameters())  # w's place in parameters()
    return SelfAudit(
        M,
        row=lambda k, sign: {
            "input_ids": [0] * SHORT,
            "label": 0,
            "x": sign
            * nn.functional.one_hot(torch.tensor(k - offset), M).float(),  # k: w's flat index
        },
        coordinates=range(offset, offset + M),
        testing_seed=4,
    )


def rows(neighbour: str | None) -> list[dict]:
    g = torch.Generator().manual_seed(0)
    data = [
        {"input_ids": torch.randint(5, 100, (SHORT,), generator=g).tolist(), "label": i % 2}
        for i in range(N)
    ]
    if neighbour == "long":
        data[0] = {"input_ids": [7] * LONG, "label": 0}
    elif neighbour == "outlier":
        data[0] = {"input_ids": [99] * SHORT, "label": 1 - data[0]["label"]}
    elif neighbour == "added":
        data.append({"input_ids": [11] * SHORT, "label": 1})
    elif neighbour == "raises":
        data[0] = {
            "input_ids": data[0]["input_ids"],
            "label": 7,
        }  # out of range: cross-entropy raises
    return data


def pad(examples: list[dict]) -> dict:
    """A user's padding collate: the batch is as long as its longest row."""
    width = max((len(e["input_ids"]) for e in examples), default=SHORT)
    ids = [e["input_ids"] + [0] * (width - len(e["input_ids"])) for e in examples]
    mask = [[1] * len(e["input_ids"]) + [0] * (width - len(e["input_ids"])) for e in examples]
    return {
        "input_ids": torch.tensor(ids, dtype=torch.long).reshape(len(examples), width),
        "attention_mask": torch.tensor(mask, dtype=torch.long).reshape(len(examples), width),
        "labels": torch.tensor([e["label"] for e in examples], dtype=torch.long),
        "x": torch.stack([e.get("x", torch.zeros(M)) for e in examples]).reshape(len(examples), M),
    }


class Events(TrainerCallback):
    """Every callback event with the public values it carries."""

    def __init__(self) -> None:
        self.seen: list = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.seen.append(("log", dict(logs or {})))

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self.seen.append(("evaluate", dict(metrics or {})))

    def on_step_end(self, args, state, control, **kwargs):
        self.seen.append(("step", state.global_step, state.total_flos, state.num_input_tokens_seen))

    def on_save(self, args, state, control, **kwargs):
        self.seen.append(("save", state.global_step, state.best_metric))


class InfoLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def run(root, method: str, neighbour: str | None, audited: bool = False) -> dict:
    """Train on ``rows(neighbour)`` into ``root/run`` (the same folder for every run); every output
    channel."""
    out = root / "run"
    model = Canaried() if audited else tiny_bert()
    if method != "dpzero":
        model.train()  # first order: dropout is active, drawn from the step's secret seed
    events, info = Events(), InfoLines()
    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(info)
    try:
        trainer = DPTrainer(
            model,
            arguments(
                out,
                max_steps=STEPS,
                per_device_train_batch_size=4,
                save_strategy="steps",
                save_steps=2,
                eval_strategy="steps",
                eval_steps=2,
                disable_tqdm=True,
            ),
            train_dataset=rows(neighbour),
            eval_dataset=rows(None)[:8],
            data_collator=pad,
            callbacks=[events],
            n=N + 1,  # a public bound: the added row fits under it
            optimizer=method,
            target_epsilon=2.0,
            delta=DELTA,
            clip=1.0,
            testing_seed=3,
            **({"audit": audit(), "per_example_loss": canaried_loss} if audited else {}),
        )
        output = trainer.train()
        trainer.save_model()
        trainer.save_metrics("train", output.metrics)  # the example scripts' ending
        trainer.save_state()
        generator = torch.random.get_rng_state()
    finally:
        logger.removeHandler(info)
        logger.setLevel(level)
    files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    shutil.rmtree(out)
    return {
        "files": files,
        "info": info.lines,
        "events": events.seen,
        "returned": repr(output),  # NaN's repr is equal to itself
        "training loss": output.training_loss,
        "global generator": generator,
    }


def differences(a: dict, b: dict) -> list[str]:
    found = [f"{channel}" for channel in ("info", "events", "returned") if a[channel] != b[channel]]
    if not torch.equal(a["global generator"], b["global generator"]):
        found.append("torch's global generator")
    names = a["files"].keys() | b["files"].keys()
    found += [
        f"file {name}"
        for name in sorted(names)
        if a["files"].get(name) != b["files"].get(name) and not name.endswith(RELEASED_FILES)
    ]
    return found


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("neighbours")


SETUPS = {
    "dpzero": ("dpzero", False),
    "dp-adamw": ("dp-adamw", False),
    "audited": ("dp-adamw", True),
}


@pytest.fixture(scope="module")
def base(root):
    return {name: run(root, *setup[:1], None, setup[1]) for name, setup in SETUPS.items()}


@pytest.mark.parametrize("neighbour", ["long", "added", "outlier", "raises"])
@pytest.mark.parametrize("setup", list(SETUPS))
def test_neighbouring_training_sets_give_equal_outputs_but_the_released_values(
    root, base, setup, neighbour
):
    method, audited = SETUPS[setup]
    other = run(root, method, neighbour, audited)
    assert differences(base[setup], other) == []
    assert ("self_audit.json" in other["files"]) == audited
    assert "rng_state.pth" not in " ".join(other["files"])
    assert any(f.endswith("model.safetensors") for f in other["files"])
    assert math.isnan(
        other["training loss"]
    )  # the loss is the owner's: DPTrainer.private_log_history


def test_the_comparison_sees_what_the_boundary_holds_back(base):
    """The channels compared carry the data when the boundary is opened (the test can fail)."""
    leaky = dict(base["dpzero"])
    leaky["info"] = [*leaky["info"][:-1], "  Num examples = 25"]
    leaky["files"] = {**leaky["files"], "train_results.json": b'{"train_loss": 0.7}'}
    assert differences(base["dpzero"], leaky) == ["info", "file train_results.json"]
