"""What a fine-tuning run shows while and after it trains: a plot and, on request, TensorBoard — public values only.

Both read the rows of ``metrics.jsonl`` (:meth:`dpnc.lm.journal.RunFiles.metric`): test-split accuracy and loss at
each evaluation (step 0 is the untrained model), and ε spent after each step. Nothing here sees the training data.

TensorBoard stamps every event with a wall time; the time between two events reflects the secret batches in between
(their sizes, or a long example in them), so every scalar — step, evaluation or resume — is written with the time
the writer was opened, before training (``metrics.jsonl`` lines carry no time either). The event file's name holds
that same opening time.
"""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["TensorBoard", "plot_training"]


def plot_training(rows: list[dict], path: str | Path, *, title: str = "") -> Path:
    """Test loss, test accuracy (the step-0 value dashed: the untrained model) and ε against steps, in one figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    evals = sorted((r for r in rows if r.get("event") == "eval"), key=lambda r: r["step"])
    steps = [r for r in rows if r.get("event") == "step"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, key, label in ((axes[0], "loss", "test loss (cross-entropy)"), (axes[1], "accuracy", "test accuracy")):
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
        axes[2].text(0.5, 0.5, "ε = ∞ (not private)" if eps else "no steps", ha="center", va="center",
                     transform=axes[2].transAxes)
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
    """Writes each public metrics row as scalars ``<event>/<key>`` (needs the ``tensorboard`` package)."""

    def __init__(self, folder: str | Path) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ValueError("report_to='tensorboard' needs the tensorboard package: pip install tensorboard") from None
        self.writer = SummaryWriter(str(folder))
        self.start = time.time()

    def write(self, row: dict) -> None:
        for key, value in row.items():
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if number and key not in ("event", "step", "seed"):   # every event at the opening time (module doc)
                self.writer.add_scalar(f"{row['event']}/{key}", value, global_step=row.get("step", 0),
                                       walltime=self.start)

    def close(self) -> None:
        self.writer.close()
