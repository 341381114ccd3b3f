"""Online-to-nonconvex conversion (O2NC; Cutkosky, Mehta & Orabona 2023) with projected OGD.

The form used by Zhang–Tran–Cutkosky (Algorithm 3) and Kornowski–Liu–Talwar (Algorithm 2). An online
learner plays increments Δ_t in the ball ‖Δ‖ ≤ D; the iterate moves by Δ_t, and the oracle is queried
at a uniformly random point of the segment, w_t = x_t + s_t·Δ_t, so that F(x_{t+1}) − F(x_t) =
E_s⟨∇F(w_t), Δ_t⟩ and the learner's regret on the linear losses ⟨g̃_t, ·⟩ bounds the progress. The
output is the average of the w_t over a uniformly chosen block of consecutive steps: every w_t of a
block of length M lies within M·D of the block average, so small gradients along a block certify
Goldstein stationarity of its average.

One driver serves both papers (spec seed000 §2 A3; seed002_003 §2.2):

* Zhang–Tran–Cutkosky: ``block=T`` and ``reset_each_block=True`` (K epochs of T steps, the learner
  restarts with Δ = 0 each epoch, D = δ/T);
* Kornowski–Liu–Talwar: ``block=M`` and ``reset_each_block=False`` (the learner never resets; the
  trailing steps that do not fill a block are not averaged).

The driver is public post-processing: it sees only the oracle's (already private) outputs, and its
randomness (s_t, the output block) comes from a public generator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

Oracle = Callable[[int, torch.Tensor], torch.Tensor]  # (t, w_t) -> g̃_t, t = 1, 2, …


def project_ball(v: torch.Tensor, radius: float) -> torch.Tensor:
    """Π_D(v) = v·min(1, D/‖v‖), the Euclidean projection onto the ball of radius D."""
    norm = float(torch.linalg.vector_norm(v))
    return v if norm <= radius else v * (radius / norm)


class ProjectedOGD:
    """Projected online gradient descent on {‖Δ‖ ≤ D}: Δ ← Π_D(Δ − η·g), starting from Δ = 0.

    Regret D·G·√T against any ‖u‖ ≤ D after T rounds with η = D/(G√T) and E‖g‖² ≤ G².
    """

    def __init__(self, dim: int, D: float, eta: float, dtype: torch.dtype = torch.float64) -> None:
        _check_positive("D", D)
        _check_positive("eta", eta, allow_zero=True)
        self.D, self.eta = float(D), float(eta)
        self.dim, self.dtype = dim, dtype
        self.reset()

    def reset(self) -> None:
        """Restart: Δ = 0."""
        self.delta = torch.zeros(self.dim, dtype=self.dtype)

    def update(self, g: torch.Tensor) -> None:
        """Feed the linear loss ⟨g, ·⟩."""
        self.delta = project_ball(self.delta - self.eta * g, self.D)


@dataclass
class O2NCResult:
    """The output and what a user (or a certificate) needs to judge it.

    Attributes:
        output: w̄ of the chosen block, shape (d,).
        output_block: its index k (0-based) among the completed blocks.
        block_averages: (K, d), w̄^k of every completed block.
        x: the last iterate x_{steps+1}.
        steps: oracle queries made.
        points: (K, block, d) every w_t of every completed block if ``keep_points``, else None.
        max_increment: the largest ‖Δ_t‖ played (≤ D).
        max_move: the largest ‖w_{t+1} − w_t‖ inside a block (≤ 2D).
    """

    output: torch.Tensor
    output_block: int
    block_averages: torch.Tensor
    x: torch.Tensor
    steps: int
    points: torch.Tensor | None
    max_increment: float
    max_move: float

    @property
    def output_points(self) -> torch.Tensor | None:
        """The w_t averaged into the output (each within block·D of it), for a certificate."""
        return None if self.points is None else self.points[self.output_block]


def o2nc(oracle: Oracle, x0: torch.Tensor, *, D: float, eta: float, steps: int, block: int,
         reset_each_block: bool, generator: torch.Generator, keep_points: bool = False,
         progress: bool = False, on_step: Callable[[int, torch.Tensor, torch.Tensor], None] | None = None,
         ) -> O2NCResult:
    """Run O2NC with projected OGD for ``steps`` oracle queries (ZTC Algorithm 3 / KLT Algorithm 2).

    Per step t: w_t = x_t + s_t·Δ_t with s_t ~ U[0, 1]; x_{t+1} = x_t + Δ_t; g̃_t = oracle(t, w_t);
    Δ_{t+1} = Π_D(Δ_t − η·g̃_t). With ``reset_each_block`` the learner restarts (Δ = 0) at the first
    step of each block. Returns the average of w over a uniformly chosen completed block.

    ``on_step(t, w_t, g̃_t)`` is called after every query (logging; it must not change its arguments).
    """
    if x0.ndim != 1:
        raise ValueError(f"x0 must be a vector (d,); got shape {tuple(x0.shape)}")
    for name, value in (("steps", steps), ("block", block)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    if block > steps:
        raise ValueError(f"block must be <= steps={steps} so that at least one block completes; got {block}")
    learner = ProjectedOGD(x0.shape[0], D, eta, dtype=x0.dtype)
    x = x0.clone()
    blocks = steps // block
    averages = torch.zeros(blocks, x0.shape[0], dtype=x0.dtype)
    points = torch.zeros(blocks, block, x0.shape[0], dtype=x0.dtype) if keep_points else None
    max_increment = max_move = 0.0
    w_prev = None
    for t in tqdm(range(1, steps + 1), desc="O2NC", disable=not progress, leave=False):
        k, i = divmod(t - 1, block)
        if i == 0:
            w_prev = None
            if reset_each_block:
                learner.reset()
        s = float(torch.rand((), generator=generator, dtype=x0.dtype))
        w = x + s * learner.delta
        x = x + learner.delta
        g = oracle(t, w)
        learner.update(g)
        max_increment = max(max_increment, float(torch.linalg.vector_norm(learner.delta)))
        if w_prev is not None:
            max_move = max(max_move, float(torch.linalg.vector_norm(w - w_prev)))
        w_prev = w
        if k < blocks:
            averages[k] += w / block
            if points is not None:
                points[k, i] = w
        if on_step is not None:
            on_step(t, w, g)
    chosen = int(torch.randint(blocks, (), generator=generator))
    return O2NCResult(output=averages[chosen].clone(), output_block=chosen, block_averages=averages, x=x,
                      steps=steps, points=points, max_increment=max_increment, max_move=max_move)


def _check_positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and value < float("inf")
    if not ok or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be a finite number {'>= 0' if allow_zero else '> 0'}; got {value!r}")
