"""The declared decisive run: its design, the σ = 0 noise source, resuming, and its declared
MDEs."""

from __future__ import annotations

import json
import math

import torch

from dpnc_reproduce import dpzero_decisive as dd


def test_twenty_seeds_unique_and_balanced():
    seeds = dd.seeds()
    assert len(seeds) == 20 and len({s for s, _ in seeds}) == 20
    assert [f for _, f in seeds[:5]] == list(
        dd.FOLDERS
    )  # every folder before a second training seed


def test_the_clip_only_noise_is_zero_and_not_secret():
    noise = dd.NoNoise.for_testing(1)
    assert not noise.secret and torch.all(noise.gaussian((3, 2), 5.0) == 0)
    assert noise.uniform(4).shape == (4,)  # batches are still drawn


def test_a_restart_skips_the_rows_done(tmp_path):
    (tmp_path / dd.ROWS).write_text(json.dumps({"seed": 130, "label": "mezo"}) + "\n")
    assert dd._done(tmp_path) == {(130, "mezo")}


def test_the_declaration_matches_the_judging_models():
    dec = json.loads((dd.HEADROOM.parents[2] / "dpzero-decisive" / "declaration.json").read_text())
    assert [c["threshold"] for c in dec["claims"]] == [2.6, 0.9]
    power = dd.mdes()
    assert [c["declared_mde"] for c in dec["claims"]] == [
        power["drop"]["mde"],
        power["share"]["mde"],
    ]


def test_the_trend_declaration_matches_the_judging_models():
    dec = json.loads((dd.HEADROOM.parents[2] / "dpzero-trend" / "declaration.json").read_text())
    assert dec["design"]["steps"] == 600 and dec["design"]["seeds"] == [130, 210, 420, 870, 1000]
    power = dd.mdes(k=dd.TREND_SEEDS)
    share, grows, drop = (c["declared_mde"] for c in dec["claims"])
    assert share == power["share"]["mde"] and drop == power["drop"]["mde"]
    assert grows == math.sqrt(2) * share
