"""What a fine-tuning run reports: its evaluation on the test split and its ``summary.json``.

:class:`Evaluator` evaluates the classifier on the evaluated test examples (a fixed seeded subset,
in a fixed order, so runs on the same split compare example by example): an :class:`Evaluation`.
:class:`Reporter` turns the run's public facts, its ledger and its last evaluation into the
:class:`Summary` written to ``summary.json``. Neither is handed the training data: the evaluator
holds test rows, the reporter the public inputs the trainer gives it. Everything they report is
public (test-split results, the privacy report, counts fixed by the config, the inputs treated as
public and how the settings were chosen)."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from dpnc.distributed import Group
from dpnc.lm.config import ZO_RECIPES, FinetuneConfig
from dpnc.lm.data import Task, TextDataset, recipe_size
from dpnc.lm.files import describe_data
from dpnc.lm.heads import EncoderClassifier
from dpnc.lm.journal import jsonable
from dpnc.lm.paths import public_path
from dpnc.lm.trainable import Trainable
from dpnc.privacy.accountant import Accountant
from dpnc.privacy.releases import UnsupportedRelease

__all__ = [
    "Evaluation",
    "Evaluator",
    "Reporter",
    "Summary",
    "data_record",
    "eval_set",
    "spent_epsilon",
]


class Evaluation(NamedTuple):
    """A model's results on the evaluated test examples (public: test data only)."""

    accuracy: float
    loss: float  # mean cross-entropy over the examples whose loss is finite
    correct: str  # per example, in the evaluation set's order: "1" right, "0" wrong


@dataclass
class Summary:
    """A run's outcome, as written to ``summary.json``.

    Everything here is public: test-split results (and those of the initial model, ``zero_shot_*``),
    the privacy report, counts fixed by the config, the test file it read and the inputs it treated
    as public (``public_inputs``: n, the classes, B, T, ε, δ, C, …), with how its settings were
    chosen (``recipe_selection``, next to ε), and ``config``: the whole run configuration with its
    defaults filled in (lr, clip C, smoothing λ, B, T, the accountant, the public direction seed —
    never the noise, which has no seed — and the rest). Nothing here is a statistic of the training
    data (no training rows, non-finite counts or time: those go to the private statistics file only,
    with ``log_private_stats``)."""

    task: str
    method: str
    model: str
    head: str
    train: str
    trained_parameters: int
    total_parameters: int
    steps: int
    n: int
    batch_size: int
    test_accuracy: float
    test_loss: float
    test_examples: int
    zero_shot_accuracy: float
    zero_shot_loss: float
    test_correct: (
        str | None
    )  # per test example (evaluation order), "1"/"0": for paired comparisons of runs;
    zero_shot_correct: (
        str | None
    )  # None unless the test split is public (``FinetuneConfig.test_public``)
    relation: str
    sampler: str | None
    data: dict
    device: str
    cached_layers: int
    delta: float
    epsilon_rdp: float | None
    epsilon_pld: float | None
    epsilon_target: float | None
    noise_multiplier: float | None
    releases: int
    private: bool
    recipe_selection: str
    public_inputs: dict
    lost_releases: int
    stopped_early: bool
    world_size: int = 1  # processes of a data-parallel run (the wiring's record)
    self_audit: dict | None = (
        None  # --self-audit M: the one-run bound and its counts (SelfAuditResult), never which
    )
    # canaries were in
    notes: list[str] = field(default_factory=list)
    config: dict = field(
        default_factory=dict
    )  # FinetuneConfig.hyperparameters(), defaults filled in

    def to_json(self) -> str:
        return json.dumps(jsonable(dataclasses.asdict(self)), indent=2)


class Evaluator:
    """A classifier's accuracy, loss and per-example correctness on the evaluated test examples.

    Args:
        classifier: the model, evaluated as it is at each call.
        examples: the evaluated test examples (:func:`eval_set`), all of them.
        part: those this process evaluates: all, or its shard in a data-parallel run.
        cache: the frozen layers of ``part``'s rows, or None.
        batch_size: examples per forward pass.
        group: the data-parallel group whose ranks' parts are gathered, or None.
    """

    def __init__(
        self,
        classifier: EncoderClassifier,
        examples: TextDataset,
        part: TextDataset,
        *,
        cache,
        batch_size: int,
        group: Group | None,
    ) -> None:
        self.classifier, self.examples, self.part = classifier, examples, part
        self.cache, self.batch_size, self.group = cache, batch_size, group

    @torch.no_grad()
    def evaluate(self, dataset: TextDataset | None = None) -> Evaluation:
        """The results on the evaluated test examples, in their fixed order (or on ``dataset``,
        whole, in this process)."""
        ds, cache = (dataset, None) if dataset is not None else (self.part, self.cache)
        preds, losses = self.classifier.evaluate(
            ds.texts, ds.labels, batch_size=self.batch_size, cache=cache
        )
        preds, losses = preds.cpu(), losses.float().cpu()
        labels = ds.labels
        if (
            dataset is None and self.group is not None
        ):  # each rank evaluated its part: gather, in order
            parts = self.group.gather_object((preds, losses))
            preds, losses = torch.cat([p for p, _ in parts]), torch.cat([loss for _, loss in parts])
            labels = self.examples.labels
        finite = torch.isfinite(losses)
        correct = preds == labels
        return Evaluation(
            float(correct.float().mean()),
            float(losses[finite].mean()) if finite.any() else math.nan,
            "".join("1" if c else "0" for c in correct.tolist()),
        )


def eval_set(test: TextDataset, examples: int | None) -> TextDataset:
    """The test examples evaluated: ``examples`` of ``test``, a fixed seeded subset (None: all)."""
    if examples is None or examples >= len(test):
        return test
    order = torch.randperm(len(test), generator=torch.Generator().manual_seed(0))
    return test.subset(order[:examples])


def spent_epsilon(ledger: Accountant, delta: float, method: str) -> float:
    """ε of ``ledger`` at ``delta`` by ``method`` (0 before any release, ∞ for non-private
    methods)."""
    if not ledger.releases:
        return 0.0
    try:
        return ledger.epsilon(delta, method)
    except UnsupportedRelease:
        if method != "pld":
            raise
        # PLD cannot represent the loss of a huge budget (calibration fell back to RDP and said
        # so): RDP's ε, also an upper bound; summary.json's report shows PLD as n/a with the reason
        return ledger.epsilon(delta, "rdp")


def data_record(config: FinetuneConfig, train: TextDataset, test: TextDataset) -> dict:
    """Which data the run read (files, rows, classes, label words, template): public facts for
    summary.json."""
    c = config
    where = (
        {"train_file": public_path(c.train_file), "test_file": public_path(c.test_file)}
        if c.train_file is not None
        else {
            "task": c.task,
            "data_dir": public_path(c.data_dir),
            "data_seed": c.data_seed,
            "k": c.k,
        }
    )
    record = {**where, **describe_data(train, test)}
    if not c.test_public:  # a count per class is a statistic of a test file that may be private
        record["test_class_counts"] = None
    return record


class Reporter:
    """A run's :class:`Summary`, from public facts only.

    Args:
        config: the run's settings.
        task: the classes and their label words (the task's or declared: public).
        n: the public number of training examples (that of q = B/n, σ and the ledger).
        multiplier: σ/Δ, or None for a non-private method.
        sampler: the config's sampler kind, or None when the run draws no batches (zero-shot).
        trainable: what is trained (the parameter counts).
        device: where the model runs.
        cached_layers: the frozen layers cached (0 without a cache).
        test_examples: how many test examples are evaluated.
        zero_shot: the untrained model's evaluation.
        private: whether the run's ε holds (a private method, secret noise and batches).
        world_size: the run's processes.
    """

    def __init__(
        self,
        config: FinetuneConfig,
        *,
        task: Task,
        n: int,
        multiplier: float | None,
        sampler: str | None,
        trainable: Trainable,
        device: torch.device,
        cached_layers: int,
        test_examples: int,
        zero_shot: Evaluation,
        private: bool,
        world_size: int,
    ) -> None:
        self.config, self.task, self.n, self.multiplier = config, task, n, multiplier
        self.sampler, self.trainable, self.device = sampler, trainable, device
        self.cached_layers, self.test_examples = cached_layers, test_examples
        self.zero_shot, self.private, self.world_size = zero_shot, private, world_size

    def summary(
        self,
        result: Evaluation,
        *,
        data: dict,
        ledger: Accountant,
        step: int,
        lost_releases: int,
        notes: list[str],
        self_audit: dict | None,
    ) -> Summary:
        """The summary after ``step`` steps: ``result`` (the last evaluation), ``data``
        (:func:`data_record`), the privacy report of ``ledger``, the run's notes and its
        self-audit (or None)."""
        c = self.config
        report = ledger.report(c.delta) if ledger.releases else None
        notes = list(notes)
        if report is not None:  # (a Poisson-sampled ledger has no ρ: not worth a note here)
            notes += [n for n in report.notes if not n.startswith("rho:")]
        return Summary(
            task=self.task.name,
            method=c.method,
            model=public_path(c.model),
            head=c.head,
            train=c.train,
            trained_parameters=self.trainable.trained,
            total_parameters=self.trainable.total,
            steps=step,
            n=self.n,
            batch_size=c.batch_size,
            test_accuracy=result.accuracy,
            test_loss=result.loss,
            test_examples=self.test_examples,
            zero_shot_accuracy=self.zero_shot.accuracy,
            zero_shot_loss=self.zero_shot.loss,
            test_correct=result.correct if c.test_public else None,
            zero_shot_correct=self.zero_shot.correct if c.test_public else None,
            relation=c.relation,
            sampler=self.sampler,
            data=data,
            device=str(self.device),
            cached_layers=self.cached_layers,
            delta=c.delta,
            epsilon_rdp=0.0 if report is None else report.epsilon_rdp,
            epsilon_pld=0.0 if report is None else report.epsilon_pld,
            epsilon_target=c.epsilon if c.private else None,
            noise_multiplier=self.multiplier,
            releases=ledger.releases,
            private=self.private,
            recipe_selection=self.recipe_selection(),
            public_inputs=self.public_inputs(),
            lost_releases=lost_releases,
            stopped_early=step < c.steps,
            world_size=self.world_size,
            notes=notes,
            config=jsonable(c.hyperparameters()),
            self_audit=self_audit,
        )

    def public_inputs(self) -> dict:
        """The inputs this run treated as public (summary.json): none of them is read off the
        training data."""
        c, task = self.config, self.task
        classes = (
            "the task's"
            if c.train_file is None
            else "label_words"
            if c.label_words is not None
            else "labels"
            if c.labels is not None
            else "the test file's labels"
            if c.private
            else "the training file's labels (a non-private method)"
        )
        zeroth = c.zeroth_order
        return {
            "n": self.n,
            "n_rule": self._n_rule(),
            "label_names": list(task.label_names),
            "label_words": list(task.label_words),
            "classes_from": classes,
            "batch_size": c.batch_size,
            "steps": c.steps,
            "epsilon": c.epsilon if c.private else None,
            "delta": c.delta,
            "clip": c.clip,
            "noise_multiplier": self.multiplier,
            "lr": c.lr,
            "smoothing": c.smoothing if zeroth else None,
            "relation": c.relation,
            "sampler": self.sampler,
            "accountant": c.accountant,
            "max_length": c.max_length,
            "seed": c.seed,
            "test_split": self.test_split_rule(),
        }

    def recipe_selection(self) -> str:
        """How the run's settings were chosen, stated next to ε: the config's statement, else the
        trainer's."""
        c = self.config
        if c.recipe_selection is not None:
            return c.recipe_selection
        if not c.private:
            return "not private (no ε)"
        head = ZO_RECIPES["head"]
        if (
            c.train_file is None
            and c.task == "SST-2"
            and c.train == "head"
            and c.zeroth_order
            and all(getattr(c, k) == v for k, v in head.items())
        ):
            return (
                "non-private choice on training data; ε excludes it: the head recipe (lr, C, B, λ, T) was "
                "chosen by the sweep in docs/results/finetune-defaults on SST-2's test split, beside non-private "
                "MeZO runs on SST-2's training data"
            )
        return (
            "declared by the caller; ε covers this run's releases, not how its settings were chosen (a choice "
            "made on the same training data is not covered: tune privately with dpnc.tune)"
        )

    def test_split_rule(self) -> str:
        """Whether the test split is public, and so what summary.json publishes of it."""
        c = self.config
        if c.test_public:
            return (
                "public (the built-in task's test split): per-example results and class counts published"
                if c.test_file is None
                else "declared public (--test-file-public): per-example results and "
                "class counts published"
            )
        return (
            "not declared public (a user's test file may be private data; --test-file-public declares it "
            "public): only aggregate accuracy and loss are published, no per-example results or class counts; "
            "they too are un-noised statistics of the test data, outside ε"
        )

    def _n_rule(self) -> str:
        """How ``n`` was set, for ``summary.json``'s public inputs."""
        c = self.config
        if c.self_audit:
            return (
                f"declared n = {c.n} plus the self-audit's M = {c.self_audit} canaries: a public bound (n plus "
                "the canaries drawn in would publish their number)"
            )
        if c.relation == "replace-one":
            return "the training rows' number: public under replace-one (neighbours have the same size)"
        if c.n is None:
            return "the training rows' number: a non-private method, no privacy claim"
        if c.train_file is None and c.n == recipe_size(c.task, c.k):
            return (
                "the task's public recipe: k examples per class × classes (or declared equal to it)"
            )
        return "declared (--n): the public number of training examples, or a public bound"
