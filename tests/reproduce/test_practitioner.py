"""The practitioner's answer: the committed declaration is the code's, each method's run
configuration is its declared one, and the committed table is what the judge computes again from
the committed rows."""

import json
from pathlib import Path

import pytest

from dpnc_reproduce import practitioner as p

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_declaration_is_the_codes():
    assert json.loads((ROOT / p.OUT / "declaration.json").read_text()) == p.declaration()


@pytest.mark.parametrize("name", list(p.CONFIGS))
def test_each_method_runs_its_declared_configuration(name, tmp_path):
    declared = p.CONFIGS[name]
    config = p.lm_config(name, 123, "data", tmp_path)
    assert (config.train, config.top_k, config.epsilons) == (
        declared["train"],
        declared["top_k"],
        (p.EPSILON,),
    )
    if declared["method"] == "dpzero":
        assert (config.lr, config.steps) == (declared["lr"], 123)
    else:  # the first-order settings, the zeroth-order ones left to the trainer
        assert (config.fo_lr, config.fo_clip, config.fo_steps) == (declared["lr"], p.FO_CLIP, 123)
        assert config.lr is None and config.steps is None


def test_the_committed_table_is_judged_again_from_the_committed_rows():
    table = json.loads((ROOT / p.OUT / "table.json").read_text())
    assert p.judge(ROOT / p.OUT, ROOT / p.DECISIVE) == table
    assert table["table"][p.DPZERO]["minus_dpzero"] is None  # the baseline is not compared
