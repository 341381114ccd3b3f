"""What a run shows (dpnc.lm.report): the training plot from metrics rows, and TensorBoard scalars
all stamped with the writer's opening time, so no event dates a step, with the configuration as
hyper-parameters."""

from __future__ import annotations

import math

import pytest

from dpnc.lm.report import TensorBoard, hparams_of, plot_training

ROWS = [
    {"event": "eval", "step": 0, "accuracy": 0.5, "loss": 0.7},
    {"event": "step", "step": 1, "loss": 0.69, "epsilon": 0.4, "seed": 11},
    {"event": "step", "step": 2, "loss": 0.66, "epsilon": 0.6, "seed": 12},
    {"event": "eval", "step": 2, "accuracy": 0.75, "loss": 0.6},
]


@pytest.mark.parametrize(
    "rows", [ROWS, [{**r, "epsilon": math.inf} if r["event"] == "step" else r for r in ROWS], []]
)
def test_the_plot_is_a_png_whether_epsilon_is_finite_infinite_or_absent(tmp_path, rows):
    path = plot_training(rows, tmp_path / "figures" / "training.png", title="SST-2")
    assert path.read_bytes().startswith(b"\x89PNG")


def test_tensorboard_stamps_every_scalar_with_its_opening_time_and_records_the_hparams(tmp_path):
    loader = pytest.importorskip("tensorboard.backend.event_processing.event_file_loader")
    board = TensorBoard(tmp_path, {"lr": 0.01, "method": "dpzero", "model": None, "full": True})
    for row in ROWS:
        board.write(row)
    board.close()
    (path,) = tmp_path.glob("events.out.tfevents.*")
    scalars, times, plugins = {}, set(), set()
    for event in loader.EventFileLoader(str(path)).Load():
        for value in event.summary.value:
            times.add(event.wall_time)
            plugins.add(value.metadata.plugin_data.plugin_name)
            if value.HasField("simple_value"):
                scalars[value.tag, event.step] = value.simple_value
            elif value.tensor.float_val:  # this writer's scalars: one-number tensors
                scalars[value.tag, event.step] = value.tensor.float_val[0]
    assert times == {board.start}  # one wall time: the opening, before training
    assert "hparams" in plugins
    assert scalars[("step/epsilon", 2)] == pytest.approx(0.6)
    assert scalars[("eval/accuracy", 2)] == scalars[("hparam/accuracy", 2)] == 0.75
    assert not [tag for tag, _ in scalars if tag.endswith(("/seed", "/step", "/event"))]


def test_hparams_keep_plain_values_and_write_anything_else_as_text():
    got = hparams_of({"lr": 0.01, "steps": 3, "full": False, "model": None, "sizes": (1, 2)})
    assert got == {"lr": 0.01, "steps": 3, "full": False, "model": "None", "sizes": "(1, 2)"}
