"""The GPU check (benchmarks/gpu/) runs here in its tiny CPU configuration, so that it cannot rot
between the rare runs on a GPU: check.py writes its JSON and markdown with every part, and the
payload's parts go through prepare.sh → receive.sh → check.sh (with stand-in model files, no
download) and come back whole."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared_data import DATA

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "benchmarks" / "gpu"


def _check_module():
    spec = importlib.util.spec_from_file_location("gpu_check", GPU / "check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sst2_folder(root: Path, train: int = 1024, test: int = 64) -> Path:
    """A stand-in for SST-2's LM-BFF folder 512-42 (where the real data is not present): short
    labelled phrases."""
    rng = random.Random(0)
    words = {0: ["dull", "awful", "boring", "flat"], 1: ["warm", "funny", "moving", "sharp"]}
    folder = root / "SST-2" / "k-shot-1k-test" / "512-42"
    folder.mkdir(parents=True)
    for name, rows in (("train", train), ("test", test), ("dev", test)):
        lines = ["sentence\tlabel"]
        for i in range(rows):
            label = i % 2
            lines.append(
                f"a {rng.choice(words[label])} film , {rng.choice(words[label])} acting . \t{label}"
            )
        (folder / f"{name}.tsv").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture
def data_dir(tmp_path):
    return DATA if (DATA / "SST-2").is_dir() else _sst2_folder(tmp_path / "data")


@pytest.mark.slow
def test_the_tiny_cpu_check_writes_every_part_to_json_and_markdown(tmp_path, data_dir, one_thread):
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    check = _check_module()
    out = tmp_path / "out"
    code = check.main(["--out", str(out), "--cpu-tiny", "--data-dir", str(data_dir)])
    result = json.loads((out / "check.json").read_text())  # strict JSON (MeZO's ε = ∞ as a string)
    md = (out / "check.md").read_text()
    assert code == 0, result["errors"]
    assert (
        result["schema"] == 1
        and result["config"]["cpu_tiny"]
        and result["device"]["name"].startswith("CPU")
    )
    assert set(result["parts"]) == {"tests", "table3", "finetune"}
    assert all(part["status"] == "ok" and part["seconds"] >= 0 for part in result["parts"].values())
    # The CUDA tests ran through pytest: skipped here, each named.
    tests = result["parts"]["tests"]["tests"]
    assert {t["test"].split("::")[1].split("[")[0] for t in tests} == {
        "test_regeneration_on_gpu_is_bit_identical",
        "test_a_cuda_run_regenerates_directions_on_the_parameters_device",
    }
    assert all(t["outcome"] in ("skipped", "passed") for t in tests)
    # Table 3: every method and the inference baseline at each B, with times and ratios (no CUDA
    # memory on a CPU).
    rows = result["parts"]["table3"]["rows"]
    assert {(r["batch_size"], r["method"]) for r in rows} == {
        (B, m) for B in (2, 4) for m in ("inference (2 forwards)", "mezo", "dpzero", "dp-adamw")
    }
    for r in rows:
        assert r["status"] == "ok" and r["dtype"] == "fp32" and r["timed_steps"] >= 1
        assert 0 < r["step_ms_min"] <= r["step_ms_median"] <= r["step_ms_max"]
        assert r["time_x_inference"] > 0 and r["time_x_mezo"] > 0
        assert r["peak_mib"] is None and r["memory_x_inference"] is None
    trained = {r["trained_parameters"] for r in rows if r["method"] != "inference (2 forwards)"}
    assert trained == {result["model"]["parameters"]}  # --train all: every parameter
    # Fine-tuning: zero-shot, DPZero at ε = 6 and MeZO with the same steps, on the same test
    # examples.
    ft = result["parts"]["finetune"]
    assert ft["zero_shot"]["test_examples"] == 16 and 0 <= ft["zero_shot"]["test_accuracy"] <= 1
    dp, mezo = ft["dpzero"], ft["mezo"]
    assert (
        dp["status"] == mezo["status"] == "ok"
        and dp["steps"] == mezo["steps"] == ft["steps_planned"] == 3
    )
    # calibrated by PLD (finetune's default accountant), so PLD's ε meets the target and RDP's lies
    # above it
    assert (
        dp["private"]
        and 0 < dp["epsilon_pld"] <= 6.0 + 1e-6 <= dp["epsilon_rdp"]
        and dp["relation"] == "add/remove"
    )
    assert mezo["epsilon_rdp"] == "inf" and not mezo["private"]
    assert (
        dp["zero_shot_accuracy"] == mezo["zero_shot_accuracy"] == ft["zero_shot"]["test_accuracy"]
    )
    # The markdown: titled with the device, one section per part, Table 3's rows and the fine-tuning
    # table.
    assert md.startswith(f"# dpnc GPU check: {result['device']['name']}")
    for text in (
        "## tests: ok",
        "## table3: ok",
        "## finetune: ok",
        "| fp32 | 4 | DP-AdamW |",
        "| DPZero ε = 6.0 | 3 |",
        "| MeZO | 3 |",
        "× inference mem",
    ):
        assert text in md, text


def test_a_failing_part_is_recorded_and_the_next_part_still_runs(tmp_path, data_dir, one_thread):
    check = _check_module()
    out = tmp_path / "out"
    code = check.main(
        [
            "--out",
            str(out),
            "--cpu-tiny",
            "--data-dir",
            str(data_dir),
            "--parts",
            "table3,finetune",
            "--causal-model",
            str(tmp_path / "no-such-model"),
            "--budget-seconds",
            "20",
        ]
    )
    result = json.loads((out / "check.json").read_text())
    assert code == 1
    assert (
        result["parts"]["table3"]["status"] == "error"
        and result["parts"]["finetune"]["status"] == "error"
    )
    assert "does not exist" in result["parts"]["table3"]["error"]["message"]
    assert len(result["errors"]) == 2 and "## finetune: error" in (out / "check.md").read_text()


def test_the_payload_goes_through_prepare_receive_and_check_in_parts(tmp_path):
    pytest.importorskip("safetensors")
    import torch
    from safetensors.torch import save_file

    # Stand-ins for the model files (prepare.sh stores the MiniLM weights as float16).
    gguf = tmp_path / "src" / "model.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(os.urandom(300_000))
    pkg = tmp_path / "src" / "fake_minilm"
    (pkg / "model").mkdir(parents=True)
    (pkg / "__init__.py").write_text("X = 1\n")
    save_file(
        {"w": torch.arange(6.0).reshape(2, 3), "ids": torch.arange(3)},
        pkg / "model" / "model.safetensors",
    )
    (pkg / "model" / "config.json").write_text("{}")
    sst2 = (
        _sst2_folder(tmp_path / "src" / "data", train=40, test=10)
        / "SST-2"
        / "k-shot-1k-test"
        / "512-42"
    )
    wheels = tmp_path / "src" / "wheels"
    wheels.mkdir()
    parts = tmp_path / "gpu"
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "DPNC_GGUF": str(gguf),
        "DPNC_MINILM_PKG": str(pkg),
        "DPNC_SST2": str(sst2),
        "DPNC_WHEELS": str(wheels),
        "DPNC_GPU_DIR": str(parts),
        "DPNC_PART_MB": "0.12",
        "DPNC_GPU_STORE": str(tmp_path / "store"),
        "DPNC_GPU_SITE": str(tmp_path / "site"),
        "OUT": str(tmp_path / "out"),
        "DPNC_GPU_LINK_DATA": "0",
    }

    def run(*cmd):
        proc = subprocess.run(
            ["bash", *cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        return proc

    run(str(GPU / "prepare.sh"))
    manifest = json.loads((parts / "p1" / "MANIFEST.json").read_text())
    n = len(manifest["parts"])
    assert n >= 2 and all(p["bytes"] <= 120_000 for p in manifest["parts"])
    for k in range(1, n):  # the device calls before the last: one part each
        assert (
            f"holds parts {list(range(1, k + 1))} of {n}"
            in run(str(GPU / "receive.sh"), str(k)).stdout
        )
    proc = run(str(GPU / "check.sh"), "--cpu-tiny", "--parts", "finetune", "--budget-seconds", "20")
    assert "files unpacked and checked" in proc.stdout
    payload = tmp_path / "store" / "payload"
    assert (payload / "gguf" / "model.gguf").read_bytes() == gguf.read_bytes()
    assert (payload / "data" / "SST-2" / "k-shot-1k-test" / "512-42" / "train.tsv").read_text() == (
        sst2 / "train.tsv"
    ).read_text()
    from safetensors.torch import load_file

    weights = load_file(payload / "site" / "fake_minilm" / "model" / "model.safetensors")
    assert weights["w"].dtype == torch.float16 and weights["ids"].dtype == torch.int64
    assert json.loads((payload / "site" / "fake_minilm" / "model" / "config.json").read_text()) == {
        "torch_dtype": "float32"
    }
    # check.py ran on the unpacked files and reported the stand-in model's failure in its JSON.
    result = json.loads((tmp_path / "out" / "check.json").read_text())
    assert result["config"]["causal_model"].endswith("model.gguf")
    assert result["parts"]["finetune"]["status"] == "error"
    assert (tmp_path / "out" / "check.log").is_file() and (tmp_path / "out" / "check.md").is_file()


def _dimension(out: Path, data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            str(GPU / "dimension.py"),
            "--out",
            str(out),
            "--data-dir",
            str(data_dir),
            "--cpu-tiny",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


@pytest.mark.slow
def test_the_dimension_sweep_runs_each_part_in_its_own_process_and_judges_them_together(
    tmp_path, data_dir
):
    """benchmarks/gpu/dimension.py in its tiny CPU configuration: the part's process runs the
    reproduction, and the merged result holds its rows, the claims declared and judged, and the
    device in the summary."""
    pytest.importorskip("transformers")
    out = tmp_path / "dim"
    proc = _dimension(out, data_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = json.loads((out / "dimension.json").read_text())
    assert log["finished"] == ["SST-2-head"] and not log["stopped_at_budget"] and not log["failed"]
    result = json.loads((out / "result.json").read_text())
    assert result["config"]["device"] == "cpu" and result["declared"] and result["claims"]
    assert {r["method"] for r in result["rows"] if r["phase"] == "test"} == {
        "zero-shot",
        "mezo",
        "dpzero",
    }
    assert all(r["phase"] == "select" or r["steps"] in (0, 6) for r in result["rows"])
    assert "Device: CPU" in (out / "summary.md").read_text()
    assert (out / "parts" / "SST-2-head" / "result.json").is_file()


def test_a_dimension_part_still_running_at_the_budget_is_stopped_and_said_so(tmp_path, data_dir):
    out = tmp_path / "dim"
    proc = _dimension(out, data_dir, "--budget-seconds", "0.5")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    log = json.loads((out / "dimension.json").read_text())
    assert (
        log["stopped_at_budget"] == ["SST-2-head"] and log["finished"] == [] and not log["failed"]
    )
    assert not (out / "result.json").exists()
