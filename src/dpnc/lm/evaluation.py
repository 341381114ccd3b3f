"""What a fine-tuning run reports: its evaluation on the test split and its ``summary.json``.

:class:`Evaluation` is a model's accuracy, loss and per-example correctness on the evaluated test
examples (a fixed seeded subset, in a fixed order, so runs on the same split compare example by
example); :class:`Summary` is the run's outcome as written to ``summary.json``.
:class:`EvaluationMixin` holds the :class:`dpnc.lm.train.Trainer`'s methods that compute them from
its state (config, data, classifier, ledger). Everything they report is public (test-split results,
the privacy report, counts fixed by the config, the inputs treated as public and how the settings
were chosen), except :meth:`EvaluationMixin.private_run_stats`, which goes to the private statistics
file only."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from dpnc.lm.canaries import canary_free_accuracy
from dpnc.lm.config import ZO_RECIPES
from dpnc.lm.data import TextDataset, recipe_size
from dpnc.lm.files import describe_data
from dpnc.lm.journal import jsonable
from dpnc.lm.paths import public_path

__all__ = ["Evaluation", "EvaluationMixin", "Summary"]


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


class EvaluationMixin:
    """The :class:`~dpnc.lm.train.Trainer`'s evaluation and ``summary.json`` (mixed into it; reads
    its state)."""

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

    @torch.no_grad()
    def evaluate(self, dataset: TextDataset | None = None) -> Evaluation:
        """Accuracy, mean cross-entropy and per-example correctness on the test split
        (``eval_examples`` of it: a fixed seeded subset, in a fixed order, so that runs on the same
        test split can be compared example by example)."""
        ds, cache = (dataset, None) if dataset is not None else (self.eval_part, self.test_cache)
        preds, losses = self.classifier.evaluate(
            ds.texts, ds.labels, batch_size=self.config.eval_batch_size, cache=cache
        )
        preds, losses = preds.cpu(), losses.float().cpu()
        labels = ds.labels
        if (
            dataset is None and self.group is not None
        ):  # each rank evaluated its shard: gather, in order
            parts = self.group.gather_object((preds, losses))
            preds, losses = torch.cat([p for p, _ in parts]), torch.cat([loss for _, loss in parts])
            labels = self.eval_set().labels
        finite = torch.isfinite(losses)
        correct = preds == labels
        return Evaluation(
            float(correct.float().mean()),
            float(losses[finite].mean()) if finite.any() else math.nan,
            "".join("1" if c else "0" for c in correct.tolist()),
        )

    def eval_set(self) -> TextDataset:
        """The test examples evaluated: ``eval_examples`` of them, a fixed seeded subset (default
        all)."""
        m = self.config.eval_examples
        if m is None or m >= len(self.test_set):
            return self.test_set
        order = torch.randperm(len(self.test_set), generator=torch.Generator().manual_seed(0))
        return self.test_set.subset(order[:m])

    def data_record(self) -> dict:
        """Which data the run read (files, rows, classes, label words, template): public facts for
        summary.json."""
        c = self.config
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
        record = {**where, **describe_data(self.train_set, self.test_set)}
        if (
            not self.config.test_public
        ):  # a count per class is a statistic of a test file that may be private
            record["test_class_counts"] = None
        return record

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

    def public_inputs(self) -> dict:
        """The inputs this run treated as public (summary.json): none of them is read off the
        training data."""
        c, task = self.config, self.train_set.task
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
            "relation": self.relation,
            "sampler": None if self.sampler is None else c.sampler,
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

    def summary(self, result: Evaluation) -> Summary:
        c = self.config
        report = self.accountant.report(c.delta) if self.accountant.releases else None
        stopped_early = self.step < self.total_steps
        notes = list(self.notes)
        if report is not None:  # (a Poisson-sampled ledger has no ρ: not worth a note here)
            notes += [n for n in report.notes if not n.startswith("rho:")]
        return Summary(
            task=self.train_set.task.name,
            method=c.method,
            model=public_path(c.model),
            head=c.head,
            train=c.train,
            trained_parameters=self.trainable.trained,
            total_parameters=self.trainable.total,
            steps=self.step,
            n=self.n,
            batch_size=c.batch_size,
            test_accuracy=result.accuracy,
            test_loss=result.loss,
            test_examples=len(self.eval_set()),
            zero_shot_accuracy=self.zero_shot.accuracy,
            zero_shot_loss=self.zero_shot.loss,
            test_correct=result.correct if c.test_public else None,
            zero_shot_correct=self.zero_shot.correct if c.test_public else None,
            relation=self.relation,
            sampler=None if self.sampler is None else c.sampler,
            data=self.data_record(),
            device=str(self.device),
            cached_layers=0 if self.train_cache is None else self.train_cache.layers,
            delta=c.delta,
            epsilon_rdp=0.0 if report is None else report.epsilon_rdp,
            epsilon_pld=0.0 if report is None else report.epsilon_pld,
            epsilon_target=c.epsilon if c.private else None,
            noise_multiplier=self.multiplier,
            releases=self.accountant.releases,
            private=self.private,
            recipe_selection=self.recipe_selection(),
            public_inputs=self.public_inputs(),
            lost_releases=self.lost_releases,
            stopped_early=stopped_early,
            world_size=self.world_size,
            notes=notes,
            config=jsonable(c.hyperparameters()),
            self_audit=self.self_audit(result),
        )

    def self_audit(self, result: Evaluation) -> dict | None:
        """The run's one-run audit (``--self-audit M``; None without), with the accuracy cost
        against the canary-free twin run when ``canary_free_run`` names one (public: the bound, its
        counts, test accuracies)."""
        c = self.config
        if self.canaries is None:
            return None
        twin = None if c.canary_free_run is None else canary_free_accuracy(c.canary_free_run, c)
        return self.canaries.result(
            self.classifier,
            delta=c.delta,
            claimed_epsilon=self.epsilon(),
            private=self.private,
            accuracy=result.accuracy,
            canary_free_accuracy=twin,
            batch_size=c.eval_batch_size,
        ).to_dict()

    def private_run_stats(self, wall: float) -> dict:
        """The run's statistics of the training data (private_train_stats.jsonl only): time, rows,
        drops."""
        done = len(self.history)
        return {
            "event": "run",
            "wall_seconds": wall,
            "seconds_per_step": self._train_seconds / done if done else None,
            "nonfinite": self.nonfinite,
            "train_rows": len(self.train_set),
            "dropped_rows": self.train_set.dropped,
        }
