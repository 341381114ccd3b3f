"""dpnc.integrations.transformers: the Hugging Face Trainer trains a tiny BERT privately on dpnc's
contracts.

A tiny ``BertForSequenceClassification`` (random weights, from a ``BertConfig``) and a map-style
dataset of dict rows, as a tokenised ``datasets.Dataset`` hands them out (the Trainer takes any
map-style dataset of dicts; a real ``datasets.Dataset`` of SST-2 text is
tests/integrations/test_datasets.py's). Each run asserts: the batches came from dpnc's loader (a
secret Poisson sampler wired by make_private), the ledger holds one release per step, ε in the
Trainer's logs is the ledger's, the logs hold only public values, and the parameters moved."""

from __future__ import annotations

import math

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import BertConfig, BertForSequenceClassification, TrainingArguments  # noqa: E402

from dpnc.integrations.transformers import PUBLIC_LOGS, DPTrainer  # noqa: E402

N, LENGTH, STEPS, DELTA = 48, 8, 4, 1e-5
# a batch is empty with probability (1 - 1/N)^N ≈ 0.36; every private test shares one calibration (ε, δ, q, T)
B = 1


class Rows(torch.utils.data.Dataset):
    """Tokenised rows as ``datasets`` gives them: lists of token ids, a mask, an integer label, a
    text column."""

    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(5, 100, (n, LENGTH), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict:
        return {
            "input_ids": self.ids[i].tolist(),
            "attention_mask": [1] * LENGTH,
            "label": int(self.labels[i]),
            "sentence": "not a model input",
        }


def tiny_bert() -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=100,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=LENGTH,
        num_labels=2,
        attn_implementation="eager",
    )
    return BertForSequenceClassification(config).eval()


def arguments(tmp_path, **overrides) -> TrainingArguments:
    options = dict(
        output_dir=str(tmp_path),
        max_steps=STEPS,
        per_device_train_batch_size=B,
        learning_rate=1e-2,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=0,
    )
    return TrainingArguments(**{**options, **overrides})


@pytest.mark.parametrize("method,clip", [("dpzero", 5.0), ("dp-adamw", 1.0), ("dp-sgd", 1.0)])
def test_trains_privately_with_the_ledgers_epsilon_in_its_logs(tmp_path, method, clip):
    model = tiny_bert()
    before = [p.detach().clone() for p in model.parameters()]
    trainer = DPTrainer(
        model,
        arguments(tmp_path),
        train_dataset=Rows(N),
        n=N,
        optimizer=method,
        target_epsilon=3.0,
        delta=DELTA,
        clip=clip,
    )
    loader = trainer.get_train_dataloader()
    assert (
        loader is trainer._loader and type(loader.batch_sampler).__name__ == "PoissonBatchSampler"
    )
    assert trainer.dp_optimizer.wiring.n == N and trainer.dp_optimizer.wiring.steps == STEPS

    trainer.train()

    assert trainer.accountant.releases == STEPS == trainer.state.global_step
    logged = [entry for entry in trainer.state.log_history if "epsilon" in entry]
    assert len(logged) == STEPS + 1  # one per step (logging_steps=1) and the final summary
    assert logged[-1]["epsilon"] == trainer.accountant.epsilon(DELTA)
    assert 0 < logged[0]["epsilon"] < logged[-2]["epsilon"] == logged[-1]["epsilon"] <= 3.0 + 1e-9
    for entry in trainer.state.log_history:
        assert set(entry) <= PUBLIC_LOGS, entry  # no loss, no run time, no token or flop count
    assert any("loss" in entry for entry in trainer.private_log_history)  # the owner's
    moved = [not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters())]
    assert sum(moved) >= 2


@pytest.mark.parametrize("method,clip", [("dpzero", 5.0), ("dp-adamw", 1.0)])
def test_the_schedulers_lr_is_the_one_dpnc_steps_with(tmp_path, method, clip):
    trainer = DPTrainer(
        tiny_bert(),
        arguments(tmp_path, lr_scheduler_type="linear"),
        train_dataset=Rows(N),
        n=N,
        optimizer=method,
        target_epsilon=3.0,
        delta=DELTA,
        clip=clip,
    )
    stepping = getattr(
        trainer.dp_optimizer, "optimizer", trainer.dp_optimizer
    )  # AdamW inside DP-AdamW
    seen = []
    trainer.dp_optimizer.register_step_hook(
        lambda opt, info: seen.append(stepping.param_groups[0]["lr"])
    )
    trainer.train()
    # linear decay from 1e-2 to 0 over 4 steps: dpnc's step used the Trainer's schedule
    assert seen == pytest.approx([1e-2, 7.5e-3, 5e-3, 2.5e-3])


def test_the_callers_training_arguments_are_left_as_they_were(tmp_path):
    """The Trainer's batch-level clipping is off in DPTrainer's own copy (dpnc clips each example);
    before, it wrote max_grad_norm = 0 into the caller's TrainingArguments, which a plain Trainer
    built next then used."""
    args = arguments(tmp_path, max_grad_norm=1.0)
    trainer = DPTrainer(
        tiny_bert(),
        args,
        train_dataset=Rows(N),
        n=N,
        optimizer="dp-adamw",
        target_epsilon=3.0,
        delta=DELTA,
        clip=1.0,
    )
    assert args.max_grad_norm == 1.0 and trainer.args.max_grad_norm == 0.0
    assert trainer.args is not args


def test_mezo_logs_infinite_epsilon(tmp_path):
    trainer = DPTrainer(
        tiny_bert(), arguments(tmp_path, max_steps=2), train_dataset=Rows(N), n=N, optimizer="mezo"
    )
    trainer.train()
    assert trainer.accountant.releases == 2
    assert all(math.isinf(e["epsilon"]) for e in trainer.state.log_history)


@pytest.mark.parametrize(
    "override,message",
    [
        ({"gradient_accumulation_steps": 2}, "gradient_accumulation_steps must be 1"),
        ({"max_steps": -1}, "max_steps must be set"),
        ({"auto_find_batch_size": True}, "auto_find_batch_size must be False"),
        ({"include_num_input_tokens_seen": "all"}, "include_num_input_tokens_seen must be 'no'"),
        ({"fp16": True}, "mixed precision must be off"),
    ],
)
def test_refuses_what_breaks_the_contract(tmp_path, override, message):
    with pytest.raises(ValueError, match=message):
        DPTrainer(
            tiny_bert(),
            arguments(tmp_path, **override),
            train_dataset=Rows(N),
            n=N,
            optimizer="dpzero",
            target_epsilon=3.0,
            delta=DELTA,
            clip=5.0,
        )


def test_refuses_a_name_not_in_the_registry_a_train_mode_model_for_zeroth_order_and_a_resumed_run(
    tmp_path,
):
    with pytest.raises(ValueError, match="optimizer must be one of"):
        DPTrainer(
            tiny_bert(), arguments(tmp_path), train_dataset=Rows(N), n=N, optimizer="adamw"
        )  # not private
    with pytest.raises(ValueError, match="model is not ready"):
        DPTrainer(
            tiny_bert().train(),
            arguments(tmp_path),
            train_dataset=Rows(N),
            n=N,
            optimizer="dpzero",
            target_epsilon=3.0,
            delta=DELTA,
            clip=5.0,
        )
    trainer = DPTrainer(
        tiny_bert(),
        arguments(tmp_path),
        train_dataset=Rows(N),
        n=N,
        optimizer="dpzero",
        target_epsilon=3.0,
        delta=DELTA,
        clip=5.0,
    )
    with pytest.raises(ValueError, match="resume_from_checkpoint must be None"):
        trainer.train(resume_from_checkpoint=str(tmp_path))
    assert trainer.accountant.releases == 0


@pytest.mark.parametrize("method,clip", [("dpzero", 5.0), ("dp-adamw", 1.0)])
def test_an_empty_poisson_batch_is_a_step_too(tmp_path, method, clip):
    from transformers import default_data_collator

    sizes = []

    def collate(
        rows,
    ):  # the Trainer's collator, counting what dpnc's loader hands it (not the empty batches)
        sizes.append(len(rows))
        return default_data_collator(rows)

    # seeded (not private) to be sure of an empty batch among the four
    trainer = DPTrainer(
        tiny_bert(),
        arguments(tmp_path),
        train_dataset=Rows(N),
        n=N,
        optimizer=method,
        target_epsilon=3.0,
        delta=DELTA,
        clip=clip,
        data_collator=collate,
        testing_seed=3,
    )
    trainer.train()
    assert (
        len(sizes) - 1 < STEPS
    )  # the first call built the empty-batch template; at least one batch was empty
    assert trainer.accountant.releases == STEPS == trainer.state.global_step
    assert trainer.state.log_history[-1]["epsilon"] == trainer.accountant.epsilon(DELTA)


def test_a_batch_not_drawn_by_dpnc_is_refused(tmp_path):
    from transformers import default_data_collator

    trainer = DPTrainer(
        tiny_bert(),
        arguments(tmp_path),
        train_dataset=Rows(N),
        n=N,
        optimizer="dpzero",
        target_epsilon=3.0,
        delta=DELTA,
        clip=5.0,
    )
    trainer.create_optimizer()
    own = default_data_collator([Rows(N)[i] for i in range(4)])
    with pytest.raises(ValueError, match="no batch is pending"):
        trainer.training_step(trainer.model, own)
    drawn = next(iter(trainer.get_train_dataloader()))
    with pytest.raises(ValueError, match="inputs must be the batch the loader just yielded"):
        trainer.training_step(
            trainer.model, {k: v.clone() for k, v in drawn.items()}
        )  # a copy is not the batch
    assert trainer.accountant.releases == 0
    trainer.training_step(trainer.model, drawn)
    assert trainer.accountant.releases == 1


class _Canaried(torch.nn.Module):
    """A linear model on a feature column "x" whose m weights are the canaries' own coordinates (as
    in tests/test_self_audit.py): the real rows have x = 0, so each release is noise plus the
    canaries drawn in."""

    def __init__(self, m: int) -> None:
        super().__init__()
        self.w = torch.nn.Linear(m, 1, bias=False)
        torch.nn.init.zeros_(self.w.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w(x)


@pytest.mark.parametrize("loss", ["correct", "reads-dataset"])
def test_the_self_audit_runs_through_make_privates_code(tmp_path, loss):
    """A correct run stays below its claim; a per-example loss that reads the whole dataset is
    flagged in one run (seeded noise, batches and canaries: tests only)."""
    from dpnc.self_audit import SelfAudit, SelfAuditResult

    m, n, steps, batch, big = 500, 100, 30, 50, 1e4
    model = _Canaried(m)
    rows = [{"x": torch.zeros(m), "label": 0} for _ in range(n)]
    audit = SelfAudit(
        m,
        row=lambda k, sign: {
            "x": sign * torch.nn.functional.one_hot(torch.tensor(k), m).float(),
            "label": 0,
        },
        coordinates=range(m),
        testing_seed=0,
    )
    everything = None

    def per_example(outputs, labels):
        losses = big * outputs.squeeze(-1)
        if loss == "reads-dataset":  # BROKEN ON PURPOSE: a term of every example, canaries included
            losses = losses + big * model(everything).squeeze(-1).mean()
        return losses

    trainer = DPTrainer(
        model,
        arguments(
            tmp_path,
            max_steps=steps,
            per_device_train_batch_size=batch,
            learning_rate=1e-3,
            logging_steps=steps,
        ),
        train_dataset=rows,
        n=n,
        optimizer="dp-sgd",
        target_epsilon=1.0,
        delta=DELTA,
        clip=1.0,
        per_example_loss=per_example,
        accountant="rdp",
        testing_seed=1,
        audit=audit,
    )
    everything = torch.stack([row["x"] for row in trainer._loader.dataset])
    assert (
        len(trainer._loader.dataset) > n and trainer.dp_optimizer.wiring.n == n + m
    )  # the canaries drawn in
    trainer.train()
    result = trainer.self_audit()
    assert SelfAuditResult.load(tmp_path) == result and result.claimed_epsilon == pytest.approx(
        1.0, rel=1e-2
    )
    assert result.flagged == (loss == "reads-dataset") and not result.private


@pytest.mark.parametrize("method,clip", [("dp-adamw", 1.0), ("dpzero", 5.0)])
def test_a_batch_encoding_from_the_collator_trains(tmp_path, method, clip):
    """Hugging Face's collators return a ``BatchEncoding`` (a Mapping, not a dict), which torch.func
    cannot map over: dpnc's loader yields it as a plain dict."""
    from transformers import BatchEncoding, default_data_collator

    model = tiny_bert()
    trainer = DPTrainer(
        model if method == "dpzero" else model.train(),
        arguments(tmp_path, per_device_train_batch_size=8),
        train_dataset=Rows(N),
        data_collator=lambda rows: BatchEncoding(default_data_collator(rows)),
        n=N,
        optimizer=method,
        target_epsilon=3.0,
        delta=DELTA,
        clip=clip,
    )
    before = [p.detach().clone() for p in model.parameters()]
    trainer.train()
    assert trainer.accountant.releases == STEPS
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_a_dict_of_evaluation_sets_is_evaluated_set_by_set_and_stays_private(tmp_path):
    trainer = DPTrainer(
        tiny_bert(),
        arguments(tmp_path),
        train_dataset=Rows(N),
        eval_dataset={"a": Rows(8), "b": Rows(16)},
        n=N,
        optimizer="dpzero",
        target_epsilon=3.0,
        delta=DELTA,
        clip=5.0,
    )
    metrics = trainer.evaluate()
    assert {"eval_a_loss", "eval_b_loss"} <= set(metrics)  # the caller's
    for entry in trainer.state.log_history:  # without eval_public, no evaluation metric is logged
        assert set(entry) <= PUBLIC_LOGS, entry
