"""What a fine-tuning run shows while and after it trains: a plot and, on request, TensorBoard —
public values only.

Both read the rows of ``metrics.jsonl`` (:meth:`dpnc.lm.journal.RunFiles.metric`): test-split
accuracy and loss at each evaluation (step 0 is the untrained model), and ε spent after each step.
Nothing here sees the training data.

TensorBoard stamps every event with a wall time; the time between two events reflects the secret
batches in between (their sizes, or a long example in them), so every scalar — step, evaluation or
resume — is written with the time the writer was opened, before training (``metrics.jsonl`` lines
carry no time either). The event file's name holds that same opening time. The run's
hyper-parameters (its configuration: public inputs) go to TensorBoard's HPARAMS tab when the writer
closes, with the last evaluation's test accuracy and loss as its metrics, at that same time."""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["TensorBoard", "hparams_of", "plot_training"]


def pyplot():
    """matplotlib's pyplot on the Agg backend (files, no display), imported on first use (a second
    or two)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_training(rows: list[dict], path: str | Path, *, title: str = "") -> Path:
    """Test loss, test accuracy (the step-0 value dashed: the untrained model) and ε against steps,
    in one figure."""
    plt = pyplot()
    evals = sorted((r for r in rows if r.get("event") == "eval"), key=lambda r: r["step"])
    steps = [r for r in rows if r.get("event") == "step"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, key, label in (
        (axes[0], "loss", "test loss (cross-entropy)"),
        (axes[1], "accuracy", "test accuracy"),
    ):
        ax.plot([r["step"] for r in evals], [r[key] for r in evals], marker="o", ms=3)
        if evals and evals[0]["step"] == 0:
            ax.axhline(evals[0][key], ls="--", color="grey", lw=1, label="untrained (zero-shot)")
            ax.legend(loc="best", fontsize=8)
        ax.set(xlabel="step", ylabel=label)
    eps = [(r["step"], r["epsilon"]) for r in steps if r.get("epsilon") is not None]
    finite = [(s, e) for s, e in eps if e != float("inf")]
    if finite:
        axes[2].plot(*zip(*finite))
    else:
        axes[2].text(
            0.5,
            0.5,
            "ε = ∞ (not private)" if eps else "no steps",
            ha="center",
            va="center",
            transform=axes[2].transAxes,
        )
    axes[2].set(xlabel="step", ylabel="ε spent")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


class TensorBoard:
    """Writes each public metrics row as scalars ``<event>/<key>``, and ``hparams`` (the run's
    configuration) with the last evaluation's results as the HPARAMS tab's metrics when closed
    (needs the ``tensorboard`` package)."""

    def __init__(self, folder: str | Path, hparams: dict | None = None) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ValueError(
                "report_to='tensorboard' needs the tensorboard package: pip install tensorboard"
            ) from None
        self.writer = SummaryWriter(str(folder))
        self.start = time.time()
        self.hparams = {} if hparams is None else hparams_of(hparams)
        self.last_eval: dict = {}

    def write(self, row: dict) -> None:
        if row.get("event") == "eval":
            self.last_eval = row
        for key, value in row.items():
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if number and key not in (
                "event",
                "step",
                "seed",
            ):  # every event at the opening time (module doc)
                self.writer.add_scalar(
                    f"{row['event']}/{key}",
                    value,
                    global_step=row.get("step", 0),
                    walltime=self.start,
                )

    def close(self) -> None:
        if (
            self.hparams
        ):  # SummaryWriter.add_hparams, at the opening time and into this run's own event file
            from torch.utils.tensorboard.summary import hparams

            metrics = {
                f"hparam/{k}": float(self.last_eval[k])
                for k in ("accuracy", "loss")
                if isinstance(self.last_eval.get(k), (int, float))
            }
            for summary in hparams(self.hparams, metrics):
                self.writer.file_writer.add_summary(summary, walltime=self.start)
            for tag, value in metrics.items():
                self.writer.add_scalar(
                    tag, value, global_step=self.last_eval.get("step", 0), walltime=self.start
                )
        self.writer.close()


def hparams_of(config: dict) -> dict:
    """``config`` as TensorBoard hyper-parameters: numbers, strings and booleans as they are; None
    as ``"None"``; anything else as its text."""
    return {k: v if isinstance(v, (bool, int, float, str)) else str(v) for k, v in config.items()}
