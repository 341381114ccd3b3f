"""make_private's outputs, tested by neighbouring training sets, with and without the self-audit.

An ordinary user loop (a padding collate, a skip-on-error ``try``) trains on two training sets that
differ in one row, with the same testing seeds. Everything the run hands out must be equal but the
released values and what follows from them (the parameters, Adam's moments, the self-audit's
scores): the ledger, the optimizer's ``state_dict`` (its tensors aside), every step hook's public
fields, every log line at INFO, the loader's length, the number of steps the loop took, and torch's
global generator (which dropout draws from)."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

import dpnc
from dpnc.self_audit import SelfAudit

N, M, STEPS, B, DELTA, VOCAB = 24, 6, 6, 4, 1e-5, 50


class Bag(nn.Module):
    """out = w·x + v·Σ_t e(id_t): features for the canaries, a padded id sequence for the rows."""

    def __init__(self, dropout: float) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.w = nn.Linear(M, 1, bias=False)  # first in parameters(): the canaries' coordinates
        self.e = nn.Embedding(VOCAB, 4, padding_idx=0)
        self.v = nn.Sequential(nn.Dropout(dropout), nn.Linear(4, 1))

    def forward(self, x, ids):
        return (self.w(x) + self.v(self.e(ids).sum(1))).squeeze(-1)


def rows(neighbour: str | None) -> list[dict]:
    g = torch.Generator().manual_seed(0)
    data = [
        {"x": torch.zeros(M), "ids": torch.randint(1, VOCAB, (3,), generator=g)} for _ in range(N)
    ]
    if neighbour == "long":
        data[0] = {"x": torch.zeros(M), "ids": torch.full((12,), 5)}
    elif neighbour == "outlier":
        data[0] = {"x": torch.full((M,), 1e3), "ids": torch.full((3,), VOCAB - 1)}
    elif neighbour == "added":
        data.append({"x": torch.zeros(M), "ids": torch.full((3,), 2)})
    elif neighbour == "raises":
        data[0] = {
            "x": torch.zeros(M),
            "ids": torch.full((3,), VOCAB + 7),
        }  # IndexError in the embedding
    return data


def canary(k: int, sign: int) -> dict:
    return {
        "x": sign * nn.functional.one_hot(torch.tensor(k), M).float(),
        "ids": torch.zeros(3, dtype=torch.long),
    }


def pad(examples: list[dict]) -> dict:
    width = max((len(e["ids"]) for e in examples), default=3)
    ids = torch.zeros(len(examples), width, dtype=torch.long)
    for i, e in enumerate(examples):
        ids[i, : len(e["ids"])] = e["ids"]
    x = torch.stack([e["x"] for e in examples]) if examples else torch.zeros(0, M)
    return {"x": x, "ids": ids}


class InfoLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}")


def run(method: str, neighbour: str | None, audited: bool) -> dict:
    model = Bag(dropout=0.0 if method == "dpzero" else 0.5)
    model.train(method != "dpzero")
    audit = SelfAudit(M, row=canary, coordinates=range(M), testing_seed=5) if audited else None
    info, root = InfoLines(), logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(info)
    try:
        torch.manual_seed(
            123
        )  # the user's own seeding: the run must not move the generator by the data
        optimizer, loader, accountant = dpnc.make_private(
            model,
            data=rows(neighbour),
            n=N + 1,  # a public bound: the added row fits under it
            optimizer=method,
            target_epsilon=2.0,
            delta=DELTA,
            steps=STEPS,
            batch_size=B,
            lr=0.05,
            clip=1.0,
            collate_fn=pad,
            accountant="rdp",
            testing_seed=1,
            audit=audit,
            **({"seed": 2} if method == "dpzero" else {}),
        )
        hooks: list = []
        optimizer.register_step_hook(
            lambda opt, s: hooks.append((s.step, s.seed, s.release, tuple(s.released.shape)))
        )
        taken = 0
        for _ in loader:
            try:
                optimizer.step(lambda batch: model(batch["x"], batch["ids"]))
            except IndexError:  # the user's skip-on-error loop
                pass
            taken += 1
    finally:
        root.removeHandler(info)
        root.setLevel(level)
    state = optimizer.state_dict()
    return {
        "ledger": accountant.to_json(),
        "epsilon": accountant.epsilon(DELTA),
        "state": repr(_untensored(state)),
        "hooks": hooks,
        "info": info.lines,
        "loader": len(loader),
        "taken": taken,
        "global generator": torch.random.get_rng_state(),
    }


def _untensored(tree):
    """The state with every tensor replaced by its shape and dtype (the values follow from released
    ones)."""
    if isinstance(tree, dict):
        return {k: _untensored(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_untensored(v) for v in tree)
    if isinstance(tree, torch.Tensor) and tree.is_floating_point():
        return ("tensor", tuple(tree.shape), tree.dtype)
    return tree


def differences(a: dict, b: dict) -> list[str]:
    found = [k for k in a if k != "global generator" and a[k] != b[k]]
    if not torch.equal(a["global generator"], b["global generator"]):
        found.append("global generator")
    return found


@pytest.mark.parametrize("audited", [False, True], ids=["plain", "self-audit"])
@pytest.mark.parametrize("method", ["dpzero", "dp-sgd"])
@pytest.mark.parametrize("neighbour", ["long", "added", "outlier", "raises"])
def test_neighbouring_training_sets_give_equal_outputs_but_the_released_values(
    method, neighbour, audited
):
    base, other = run(method, None, audited), run(method, neighbour, audited)
    assert differences(base, other) == []
    assert base["taken"] == STEPS and len(base["hooks"]) == STEPS
