"""The model tier audited: ``dpnc.tier.DPZeroOptimizer``, ``dpnc.make_private`` (zeroth and first
order, the latter being :class:`dpnc.tier.DPOptimizer`), and the broken variants the public API
refuses or cannot see. The tiny public model and its canary: docs/audit.md ("What is run")."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset
from tqdm.auto import tqdm

from dpnc.algorithms import dpzero as dz
from dpnc.audit.base import (
    BIG,
    STATISTICS_FULL_BATCH,
    STATISTICS_POISSON,
    Mechanism,
    ledger_mu,
    ledger_sensitivity,
    release_statistics,
    replay_inclusions,
)
from dpnc.distributed import Group
from dpnc.engine import make_private
from dpnc.lm.config import FinetuneConfig
from dpnc.lm.steps import StepRecord, Steps, build_optimizer
from dpnc.privacy.accountant import Accountant
from dpnc.sampling import FullBatch, PoissonSampler
from dpnc.space import ModuleSpace
from dpnc.tier.registry import OPTIMIZERS
from dpnc.tier.zeroth_order import DPZeroOptimizer

BATCHNORM_EPS = 1e-5


def canary_model() -> nn.Module:
    """The audit's public model: BatchNorm1d(1, affine=False) (eval: x/√(1 + ε)) and a 1×1 weight
    equal to 1."""
    model = nn.Sequential(
        nn.BatchNorm1d(1, affine=False, eps=BATCHNORM_EPS), nn.Linear(1, 1, bias=False)
    )
    with torch.no_grad():
        model[1].weight.fill_(1.0)
    return model.eval()


def per_example_loss(model: nn.Module, xb: torch.Tensor) -> torch.Tensor:
    """BIG·model(x) per example: linear in the weight, so a difference is BIG·u·z and a gradient
    BIG·z."""
    return BIG * model(xb).squeeze(-1)


class _ModelTier(Mechanism):
    """Shared: the data, the public model, the adversary's signs and statistics; subclasses run one
    training.

    Every run is its own optimizer on its own copy of :func:`canary_model`, with its own secret
    sampler and the audit's secret noise source. Canary (add/remove): D holds n rows (the public n),
    the canary's feature 1 and every other feature 0 (loss and gradient 0 at every w); D′ is D
    without the canary's row. The canary's clipped difference is C·sign(u_t), its clipped gradient
    +C: each release it enters moves by exactly the ledger's sensitivity C/B, in a direction the
    adversary computes from the public direction seed. The same model in *training* mode is the
    worst case of the ``train-batchnorm`` hole: normalising with the batch's statistics gives each
    of the b − 1 other examples of a batch that holds the canary the feature −1/√(b − 1) (0 without
    the canary), so all are clipped to ∓C and the release moves by (b − 2)·C/B instead of C/B."""

    relation = "add/remove"
    subsampled = True
    statistics = STATISTICS_POISSON
    default_epsilon = 4.0
    n: ClassVar[int] = 100
    B: ClassVar[int] = 80
    T: ClassVar[int] = 5
    C: ClassVar[float] = 1.0
    lam: ClassVar[float] = 1e-3
    lr: ClassVar[float] = 1e-3
    zeroth_order: ClassVar[bool] = True

    #: (n, B, T) for variants whose hole is lost amplification: a small q, where the claim relies on
    #: it most
    small_q: ClassVar[tuple[int, int, int]] = (1000, 10, 5)
    small_q_variants: ClassVar[tuple[str, ...]] = ("other-batch", "public-batches")

    @property
    def q(self) -> float:
        return self.B / self.n

    @property
    def unit(self) -> float:
        return self.C / self.B

    def for_variant(self, broken):
        if broken not in self.small_q_variants:
            return self
        other = type(self)(
            epsilon=self.epsilon, delta=self.delta, seed=self.seed, sigma_factor=self.sigma_factor
        )
        other.n, other.B, other.T = self.small_q
        return other

    def multiplier(self) -> float:
        """σ/Δ calibrated by PLD for the target (ε, δ) after T Poisson steps at q = B/n (computed
        once)."""
        if "_multiplier" not in self.__dict__:
            self._multiplier = dz.calibrate_noise(
                "pld", self.epsilon, self.delta, self.T, self.n, self.B
            )
        return self._multiplier

    def canary_row(self, broken: str | None) -> int:
        """Where the canary sits in D: row 0 (a fixed other batch X[:|batch|] always holds it), or
        for public-batches the row the replayed seeded sampler includes most often."""
        if broken == "public-batches":
            return int(replay_inclusions(self.n, self.B, self.T, self.seed).sum(0).argmax())
        return 0

    def data(self, canary: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        """D (the canary at row ``canary``: n rows) or D′ (``canary`` None: the n − 1 other
        rows)."""
        rows = self.n if canary is not None else self.n - 1
        X, y = torch.zeros(rows, 1), torch.zeros(rows, dtype=torch.long)
        if canary is not None:
            X[canary, 0] = 1.0
        return X, y

    def _sampler(self, broken: str | None, rows: int):
        if broken == "public-batches":
            return PoissonSampler.for_testing(self.n, self.B, seed=self.seed, rows=rows)
        return PoissonSampler(self.n, self.B, rows=rows)

    def signs(self, seeds: list[int | None]) -> np.ndarray:
        """The canary's sign in each release: sign(u_t) replayed from the public seed (zeroth
        order); +1 (first)."""
        if not self.zeroth_order:
            return np.ones(len(seeds))
        cache = self.__dict__.setdefault("_signs", {})
        space = ModuleSpace(canary_model().parameters())
        for s in seeds:
            if s not in cache:
                cache[s] = float(torch.sign(space.direction(s).reshape(-1)[0]))
        return np.array([cache[s] for s in seeds])

    def train(
        self, data, multiplier: float, broken: str | None
    ) -> tuple[np.ndarray, list, Accountant]:
        """One run of T steps on ``data``: (the T released values along the canary's gradient
        coordinate, their public seeds, the ledger)."""
        raise NotImplementedError

    def claim_accountant(self) -> Accountant:
        return self.train(self.data(0), self.multiplier(), None)[2]

    def scores(self, runs, broken=None, *, progress=False):
        self.check_broken(broken)
        m = self.multiplier() / self.noise_factor(broken)
        canary = self.canary_row(broken)
        data = {True: self.data(canary), False: self.data(None)}
        y = {True: [], False: []}
        with tqdm(total=2 * runs, desc=f"audit {self.name}", disable=not progress) as bar:
            for _ in range(runs):
                for present in (True, False):
                    released, seeds, _ = self.train(data[present], m, broken)
                    y[present].append(self.signs(seeds) * released / self.unit)
                    bar.update(1)
        stats = {
            p: self.statistics_of(torch.tensor(np.array(y[p]).T), canary) for p in (True, False)
        }
        return {k: (stats[True][k], stats[False][k]) for k in stats[True]}

    def statistics_of(self, y: torch.Tensor, canary: int) -> dict[str, np.ndarray]:
        """The statistics of runs whose projected releases are y (T, runs): the Poisson set, with
        the inclusions of row ``canary`` replayed from the public seed."""
        known = replay_inclusions(self.n, self.B, self.T, self.seed)[:, canary]
        return release_statistics(y, self.multiplier(), q=self.q, known=known)

    def canary_effect(self) -> dict:
        """Noiseless replays with the seeded sampler: the largest change of one release between D
        and D′."""
        canary = self.canary_row("public-batches")
        c_in, _, _ = self.train(self.data(canary), 0.0, "public-batches")
        c_out, _, _ = self.train(self.data(None), 0.0, "public-batches")
        return {
            "shift": float(np.abs(c_in - c_out).max()),
            "sensitivity": ledger_sensitivity(self.claim_accountant()),
            "mu": None,
            "claimed_mu": None,
        }

    def parameters(self) -> dict:
        return {
            **super().parameters(),
            "n": self.n,
            "B": self.B,
            "T": self.T,
            "C": self.C,
            "lr": self.lr,
            **({"lam": self.lam} if self.zeroth_order else {}),
            "model": "Sequential(BatchNorm1d(1, affine=False), Linear(1, 1, bias=False)), eval mode",
            "noise_multiplier": self.multiplier(),
        }


class DPZeroOptimizerPoisson(_ModelTier):
    name = "dpzero-optimizer"
    summary = (
        "dpnc.tier.DPZeroOptimizer (the optimizer the LM trainer's DPZero step uses) on a tiny model with data=(X, y) "
        "and its own secret PoissonSampler(n, B, rows): optimizer.step(loss_fn), one optimizer per run, "
        "add/remove"
    )
    canary = (
        "row 0 of D has feature 1 (loss BIG·w·z, clipped difference C·sign(u_t)), every other row 0; D′ drops "
        "row 0. other-batch: loss_fn evaluates X[:len(xb)] (a fixed other batch of the drawn size, which holds "
        "the canary whenever the batch is not empty); train-batchnorm: the model's BatchNorm in training mode, "
        "run through the algorithm tier (dpzero.DPZero.step on a ModuleSpace: the optimizer refuses it); "
        "public-batches: the canary at the row the replayed seeded sampler includes most often"
    )
    variants = ("sigma", "public-batches", "other-batch", "train-batchnorm")

    def _group(self):
        """The optimizer's process group (None: this process alone)."""
        return None

    def train(self, data, multiplier, broken):
        X, y = data
        model = canary_model()
        accountant = Accountant(self.relation)
        sampler = self._sampler(broken, len(X))
        if broken == "train-batchnorm":
            return self._train_batchnorm(model.train(), X, multiplier, sampler, accountant)
        opt = DPZeroOptimizer(
            model.parameters(),
            lr=self.lr,
            clip=self.C,
            smoothing=self.lam,
            noise_multiplier=multiplier,
            sampler=sampler,
            accountant=accountant,
            noise=self.noise,
            seed=self.seed,
            model=model,
            data=(X, y),
            group=self._group(),
        )
        released, seeds = np.empty(self.T), []
        opt.register_step_hook(
            lambda _, info: (
                released.__setitem__(info.step, float(info.released)),
                seeds.append(info.seed),
            )
        )
        if broken == "other-batch":  # reads rows other than its arguments: no library can detect it
            loss_fn = lambda xb, yb: per_example_loss(model, X[: len(xb)])  # noqa: E731
        else:
            loss_fn = lambda xb, yb: per_example_loss(model, xb)  # noqa: E731
        for _ in range(self.T):
            opt.step(loss_fn)
        return released, seeds, accountant

    @torch.no_grad()
    def _train_batchnorm(self, model, X, multiplier, sampler, accountant):
        """BROKEN ON PURPOSE: the algorithm tier's DPZero step with a train-mode BatchNorm model
        (bypasses the optimizer's check), the public seeds drawn as the optimizer draws them."""
        algorithm = dz.DPZero(self.lr, self.lam, self.C, multiplier)
        space = ModuleSpace(list(model.parameters()))
        generator = torch.Generator().manual_seed(self.seed)
        released, seeds = np.empty(self.T), []
        for t in range(self.T):
            seed = dz.public_seeds(generator, 1)[0]
            log = algorithm.step(
                space,
                lambda batch: per_example_loss(model, X[batch]),
                seed,
                sampler=sampler,
                noise=self.noise,
                accountant=accountant,
            )
            released[t] = float(log.released)
            seeds.append(seed)
        return released, seeds, accountant


class _MakePrivate(_ModelTier):
    optimizer: ClassVar[
        str
    ]  # a name of the model tier's registry; its order there says which canary path runs
    variants = ("sigma",)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.zeroth_order = OPTIMIZERS[cls.optimizer].order == 0

    def train(self, data, multiplier, broken):

        X, y = data
        model = canary_model()
        options = dict(
            data=TensorDataset(X, y),
            n=self.n,
            optimizer=self.optimizer,
            steps=self.T,
            batch_size=self.B,
            lr=self.lr,
            clip=self.C,
        )
        if self.zeroth_order:
            options.update(smoothing=self.lam, seed=self.seed)
        if multiplier == self.multiplier() and broken != "public-batches":
            options.update(
                target_epsilon=self.epsilon, delta=self.delta
            )  # the public path: calibrated by PLD
        else:  # σ/k (broken) or the noiseless replay of canary_effect
            options.update(
                noise_multiplier=multiplier,
                testing_seed=self.seed if broken == "public-batches" else None,
            )
        opt, loader, accountant = make_private(model, **options)
        released, seeds = [], []
        opt.register_step_hook(
            lambda _, info: (
                released.append(float(info.released.reshape(-1)[0])),
                seeds.append(info.seed),
            )
        )
        for _batch in loader:
            opt.step(lambda xb, yb: per_example_loss(model, xb))
        return np.array(released), seeds, accountant


class MakePrivateDPZero(_MakePrivate):
    name = "make-private-dpzero"
    summary = (
        "dpnc.make_private(model, data=TensorDataset(X, y), n, optimizer='dpzero', target_epsilon, delta, "
        "steps, batch_size, lr, clip): its loader of secret Poisson batches and optimizer.step(loss_fn), one "
        "make_private per run, add/remove (σ/k: noise_multiplier given instead of the target)"
    )
    canary = DPZeroOptimizerPoisson.canary.split(". other-batch")[0]
    optimizer = "dpzero"


class MakePrivateDPSGD(_MakePrivate):
    name = "make-private-dp-sgd"
    summary = (
        "dpnc.make_private(..., optimizer='dp-sgd'): dpnc.tier.DPOptimizer wrapping torch.optim.SGD "
        "(per-example gradients by vmap, clipping, one noisy mean gradient per step), its loader of secret "
        "Poisson batches, one make_private per run, add/remove; released: the noisy mean gradient"
    )
    canary = (
        "row 0 of D has feature 1: its gradient BIG·z is clipped to +C (every other row: gradient 0); D′ drops "
        "row 0. Each release it enters moves by C/B along the weight's coordinate"
    )
    optimizer = "dp-sgd"


class _OneProcessGroup:
    """Within: a gloo process group of world size 1 (file rendezvous), unless one is initialised
    already."""

    def __enter__(self):
        import tempfile

        import torch.distributed as dist

        self.owner = not dist.is_initialized()
        if self.owner:
            self.folder = tempfile.TemporaryDirectory()
            dist.init_process_group(
                "gloo", init_method=f"file://{self.folder.name}/rendezvous", rank=0, world_size=1
            )
        return self

    def __exit__(self, *exc):
        from dpnc.distributed import shutdown

        if self.owner:
            shutdown()  # once gloo has let go of the group's tensors (dpnc.distributed._HANDED)
            self.folder.cleanup()


class DPZeroDistributed(DPZeroOptimizerPoisson):
    name = "dpzero-distributed"
    summary = (
        "the data-parallel DPZero step (dpnc.algorithms.dpzero.DPZero.step with group=Group(): rank 0's "
        "secret batch (carried by the previous step's all_reduce), rank 0's noise and ledger entry, its noise "
        "added to its part of the sum, which one all_reduce makes the released scalar) through "
        "dpnc.tier.DPZeroOptimizer(group=Group()) on a gloo process group of one process, add/remove. One process: "
        "the collectives and the source's release path run; the split across ranks does not (the 2-process "
        "tests in tests/test_distributed.py check that it equals one process)"
    )
    canary = DPZeroOptimizerPoisson.canary.split(". other-batch")[0]
    variants = ("sigma",)

    def _group(self):

        return Group()

    def scores(self, runs, broken=None, *, progress=False):
        with _OneProcessGroup():
            return super().scores(runs, broken, progress=progress)

    def claim_accountant(self) -> Accountant:
        with _OneProcessGroup():
            return super().claim_accountant()

    def canary_effect(self) -> dict:
        with _OneProcessGroup():
            return super().canary_effect()


class _Classifier(nn.Module):
    """The trainer's classifier interface on the audit's model: an encoded batch (a dict) in,
    per-example losses out."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return per_example_loss(self.model, batch["x"])


class DPZeroTrainerStep(DPZeroOptimizerPoisson):
    name = "dpzero-trainer-step"
    summary = (
        "the fine-tuning trainer's DPZero step: dpnc.lm.steps.build_optimizer (the optimizer fetching each "
        "secret Poisson batch through the trainer's encoder) and Steps.run, with a FinetuneConfig, on the "
        "audit's tiny model behind the classifier interface (an encoded batch in, per-example losses out), "
        "add/remove. The transformer itself is not run (each audit run is a training run)"
    )
    canary = DPZeroOptimizerPoisson.canary.split(". other-batch")[0]
    variants = ("sigma",)

    def train(self, data, multiplier, broken):

        X, y = data
        classifier = _Classifier(canary_model())
        accountant = Accountant(self.relation)
        sampler = self._sampler(broken, len(X))
        config = FinetuneConfig(
            task="SST-2",
            method="dpzero",
            steps=self.T,
            batch_size=self.B,
            n=self.n,
            lr=self.lr,
            clip=self.C,
            smoothing=self.lam,
            seed=self.seed,
            epsilon=self.epsilon,
            delta=self.delta,
        )

        def encode(index: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"x": X[index], "labels": y[index]}

        optimizer = build_optimizer(
            config,
            classifier,
            sampler,
            encode=encode,
            accountant=accountant,
            noise=self.noise,
            multiplier=multiplier,
            n=self.n,
        )
        steps = Steps(
            config,
            classifier,
            optimizer,
            sampler,
            accountant,
            encode,
            lambda phase: None,
            lambda note: None,
        )
        released, seeds = np.empty(self.T), []
        for t in range(self.T):
            record = steps.run(StepRecord(t))
            released[t] = record.released
            seeds.append(record.seed)
        return released, seeds, accountant


class DPZeroOptimizerReplaceOne(DPZeroOptimizerPoisson):
    name = "dpzero-optimizer-replace-one"
    summary = (
        "dpnc.tier.DPZeroOptimizer with FullBatch(n) and Accountant('replace-one') on the tiny model: "
        "optimizer.step(loss_fn), one optimizer per run"
    )
    canary = (
        "row 0 has feature +1 on D and −1 on D′ (its mirror image: replace-one), every other row 0: its "
        "clipped difference is ±C·sign(u_t), so every released mean moves by the full 2C/n"
    )
    relation = "replace-one"
    subsampled = False
    statistics = STATISTICS_FULL_BATCH
    variants = ("sigma",)
    n, B, T = 10, 10, 5

    @property
    def unit(self) -> float:
        return (
            2 * self.C / self.n
        )  # the replace-one sensitivity of a full-batch mean: a release is N(±½·Δ, σ²)

    def data(self, canary):
        X, y = torch.zeros(self.n, 1), torch.zeros(self.n, dtype=torch.long)
        X[0, 0] = 1.0 if canary is not None else -1.0
        return X, y

    def _sampler(self, broken, rows):
        return FullBatch(rows)

    def statistics_of(self, y, canary):
        """The full-batch set (Σ_t y_t, the LLR at every σ; the largest release)."""
        return release_statistics(y, self.multiplier())

    def canary_effect(self) -> dict:
        c_in, _, _ = self.train(self.data(0), 0.0, None)
        c_out, _, _ = self.train(self.data(None), 0.0, None)
        shift = np.abs(c_in - c_out)
        claim = self.claim_accountant()
        return {
            "shift": float(shift.max()),
            "sensitivity": ledger_sensitivity(claim),
            "mu": float(np.linalg.norm(shift)) / (self.multiplier() * self.unit),
            "claimed_mu": ledger_mu(claim),
        }


__all__ = [
    "DPZeroDistributed",
    "DPZeroOptimizerPoisson",
    "DPZeroOptimizerReplaceOne",
    "DPZeroTrainerStep",
    "MakePrivateDPSGD",
    "MakePrivateDPZero",
    "canary_model",
    "per_example_loss",
]
