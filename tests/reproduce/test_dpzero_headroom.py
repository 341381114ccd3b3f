"""The CPU headroom pilot's bookkeeping: a --run cell parses into its method and typed values, and
the summary rewrites rows.jsonl into one row per run and one curve point per evaluated step."""

import csv
import json

from dpnc_reproduce.dpzero_headroom import ROWS, _parse_run, summarize


def test_a_run_cell_parses_into_its_method_and_typed_values():
    assert _parse_run("mezo:lr=1e-4,steps=200,batch_size=16,clip=0.5") == (
        "mezo",
        {"lr": 1e-4, "steps": 200, "batch_size": 16, "clip": 0.5},
    )
    method, cell = _parse_run("zero-shot")
    assert (method, cell) == ("zero-shot", {})
    assert isinstance(_parse_run("adamw:eval_every=50")[1]["eval_every"], int)


def _row(method, lr, curve, zero_shot=0.5, model="model"):
    return dict(
        task="SST-2",
        model=model,
        mode="top-1",
        method=method,
        lr=lr,
        zero_shot=zero_shot,
        accuracy=curve[-1][1],
        curve=curve,
    )


def test_the_summary_keeps_one_point_a_step_and_names_the_offline_minilm(tmp_path):
    rows = [
        _row("zero-shot", 0.0, [[0, 0.5, 0.7]]),
        # a resumed run evaluated step 10 twice: the later point is the one kept
        _row("mezo", 1e-4, [[0, 0.5, 0.7], [10, 0.55, 0.6], [10, 0.6, 0.55], [20, 0.7, 0.5]]),
    ]
    (tmp_path / ROWS).write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    summary = summarize(tmp_path)
    assert [r["model"] for r in summary] == ["all-MiniLM-L6-v2"] * 2
    with (tmp_path / "rows.csv").open() as f:
        table = list(csv.DictReader(f))
    assert [(r["method"], r["accuracy"]) for r in table] == [("zero-shot", "0.5"), ("mezo", "0.7")]
    with (tmp_path / "curves.csv").open() as f:
        curve = [(r["method"], r["step"], r["accuracy"]) for r in csv.DictReader(f)]
    assert curve == [
        ("zero-shot", "0", "0.5"),
        ("mezo", "0", "0.5"),
        ("mezo", "10", "0.6"),
        ("mezo", "20", "0.7"),
    ]
    assert (tmp_path / "fig_curves.png").is_file()
