"""A Hugging Face ``Trainer`` that trains privately with dpnc: :class:`DPTrainer`.

The DPZero and MeZO reference code are both ``transformers.Trainer`` forks; :class:`DPTrainer` keeps
the Trainer's arguments, callbacks, logging, evaluation and saving, and hands the private part (the
batches, the step, the ledger) to :func:`dpnc.make_private`. See docs/integrations.md."""

from __future__ import annotations

import copy
import inspect
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset
from transformers import Trainer, TrainingArguments
from transformers.trainer_utils import PredictionOutput, TrainOutput

from dpnc.engine import make_private
from dpnc.options import option_names
from dpnc.self_audit import SelfAudit, SelfAuditResult
from dpnc.tier.registry import names, spec

__all__ = [
    "DPTrainer",
    "per_example_cross_entropy",
]

# The optimizer options DPTrainer reads from the TrainingArguments instead of an argument of their
# name.
SPELLED = {
    "lr": "args.learning_rate (the Trainer's scheduler edits it)",
    "optimizer_kwargs": "args.weight_decay (and for dp-adamw adam_beta1, adam_beta2, adam_epsilon)",
}
PUBLIC_LOGS = frozenset({"epsilon", "delta", "learning_rate", "epoch", "step"})
_LABELS = ("labels", "label", "label_ids")  # the names data collators give the targets
# Metric names the Trainer gives run times and speeds: never public, whatever the data.
_TIMING = ("_runtime", "_per_second", "_preparation_time", "_compilation_time")


def per_example_cross_entropy(outputs: Any, labels: torch.Tensor) -> torch.Tensor:
    """ℓ_i = cross-entropy of example i's logits (shape (b, classes)) against its label: one loss
    per example.

    Sequence classification (``...ForSequenceClassification``). For another head, pass
    ``per_example_loss``."""
    logits = outputs.logits if hasattr(outputs, "logits") else outputs
    if logits.ndim != 2:
        raise ValueError(
            f"per_example_cross_entropy takes logits of shape (batch, classes); got {tuple(logits.shape)}"
            ": pass DPTrainer(per_example_loss=fn), fn(outputs, labels) returning one loss per example"
        )
    return F.cross_entropy(logits, labels, reduction="none")


class _ReleasedInTrainingStep(torch.optim.Optimizer):
    """What the Trainer's loop steps after :meth:`DPTrainer.training_step`: nothing, as the release
    was made there.

    ``param_groups`` and ``state`` are dpnc's optimizer's, so the Trainer's scheduler edits the
    ``lr`` its step reads. ``step()`` checks that exactly one dpnc step was taken since the last one
    (a loop that stepped without a release, or released twice, is a bug to be loud about)."""

    def __init__(self, private: torch.optim.Optimizer) -> None:
        super().__init__(
            private.param_groups, private.defaults
        )  # torch's hooks, patched step for schedulers
        self.private = private
        self.released = 0
        self._share()

    def _share(self) -> None:
        self.param_groups, self.state, self.defaults = (
            self.private.param_groups,
            self.private.state,
            self.private.defaults,
        )

    def step(self, closure: Callable | None = None) -> None:  # type: ignore[override]
        if closure is not None or self.released != 1:
            raise RuntimeError(
                f"the Trainer stepped its optimizer after {self.released} dpnc steps (expected 1, "
                "made in DPTrainer.training_step); DPTrainer's training loop was changed"
            )
        self.released = 0

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.private.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        return self.private.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        # accelerate round-trips the state through the device at prepare(); dpnc's own extra (step
        # count, the public direction generator's CPU state) stays on the CPU
        extra = state_dict.get("dpnc")
        if isinstance(extra, Mapping):
            state_dict = {
                **state_dict,
                "dpnc": {
                    k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in extra.items()
                },
            }
        self.private.load_state_dict(state_dict)
        self._share()  # torch's load_state_dict builds new param_groups


class DPTrainer(Trainer):
    """A ``transformers.Trainer`` whose training is private: dpnc's batches, step, ledger and ε (see
    the module).

    Args:
        model: a local Hugging Face model (or any ``nn.Module`` whose forward takes the collated
            columns as keyword arguments). Zeroth order: in eval mode (``model.eval()``: no active
            dropout), as make_private requires.
        args: the ``TrainingArguments``. Read: ``max_steps`` (T, required),
            ``per_device_train_batch_size`` (the expected batch size B), ``learning_rate`` (lr,
            scheduled by the Trainer's scheduler), and for DP-AdamW ``weight_decay``,
            ``adam_beta1``, ``adam_beta2``, ``adam_epsilon``.
        train_dataset: a map-style dataset of dict rows (a ``datasets.Dataset`` or a torch
            ``Dataset``), collated by ``data_collator`` (the Trainer's default:
            ``default_data_collator``, or padding with a tokenizer).
        n: the public number of training examples (or a public bound): q = B / n; never read off the
            data.
        optimizer: a name of ``dpnc.make_private``'s registry: ``"dpzero"``, ``"mezo"`` (not
            private: leave ``target_epsilon``, ``delta`` and ``clip`` unset), ``"dp-adamw"``,
            ``"dp-sgd"``.
        target_epsilon, delta: the (ε, δ) to spend in ``max_steps`` steps (private optimizers).
        per_example_loss: ``fn(outputs, labels) -> losses`` of shape (b,);
            :func:`per_example_cross_entropy` if None.
        accountant, testing_seed, audit: as in :func:`dpnc.make_private`.
        eval_public: the evaluation set is public (declared by its owner): its metrics may reach
            logs, callbacks, reporters, ``trainer_state.json`` and model selection. Otherwise they
            stay in :attr:`private_log_history` (and in what :meth:`evaluate` returns to its
            caller).
        **kwargs: the optimizer's options by name, as :func:`dpnc.make_private` takes them
            (``clip``, the clipping threshold C of the private optimizers; ``smoothing``,
            ``direction``, ``seed``, ``cache_directions``; ``per_example``, ``microbatch``:
            :mod:`dpnc.options`), but ``lr`` and ``optimizer_kwargs``, read from ``args``
            (:data:`SPELLED`); and the Trainer's other arguments (``eval_dataset``,
            ``data_collator``, ``processing_class``, ``callbacks``, ``compute_metrics``, …).

    Attributes:
        accountant: the run's ledger (:class:`dpnc.privacy.accountant.Accountant`).
        dp_optimizer: dpnc's optimizer (its ``wiring`` attribute records n, q, σ, T).
        private_log_history: every log with its private values (loss, run times): the data owner's,
            not published.
    """

    def __init__(
        self,
        model: nn.Module,
        args: TrainingArguments,
        train_dataset: Dataset,
        *,
        n: int,
        optimizer: str = "dpzero",
        target_epsilon: float | None = None,
        delta: float | None = None,
        per_example_loss: Callable[[Any, torch.Tensor], torch.Tensor] | None = None,
        accountant: str = "pld",
        testing_seed: int | None = None,
        audit: SelfAudit | None = None,
        eval_public: bool = False,
        **kwargs: Any,
    ) -> None:
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in option_names()}  # make_private's
        for key, where in SPELLED.items():
            if key in options:
                raise ValueError(f"{key} must be left out: DPTrainer reads it from {where}")
        _refuse_unsupported(args, kwargs, eval_public)
        if not isinstance(optimizer, str):
            raise ValueError(
                f"optimizer must be a name of dpnc's registry {list(names('make_private'))}; got "
                f"{optimizer!r}"
            )
        name = optimizer.lower()
        entry = spec(name, "make_private")  # ValueError naming the registry's choices
        args = copy.copy(args)  # the caller's arguments stay as they were
        args.max_grad_norm = 0.0  # the Trainer's batch-level clipping: dpnc clips each example
        super().__init__(model=model, args=args, train_dataset=train_dataset, **kwargs)
        if entry.order == 1:  # the TrainingArguments of the torch optimizer dpnc wraps
            adam = (
                {"betas": (args.adam_beta1, args.adam_beta2), "eps": args.adam_epsilon}
                if name == "dp-adamw"
                else {}
            )
            options["optimizer_kwargs"] = {"weight_decay": args.weight_decay, **adam}
        train_dataset, collate = self._model_columns(train_dataset)
        self.dp_optimizer, self._loader, self.accountant = make_private(
            self.model,
            data=train_dataset,
            n=n,
            optimizer=optimizer,
            target_epsilon=target_epsilon,
            delta=delta,
            steps=args.max_steps,
            batch_size=args.per_device_train_batch_size,
            lr=args.learning_rate,
            accountant=accountant,
            collate_fn=collate,
            testing_seed=testing_seed,
            audit=audit,
            **options,
        )
        self.delta, self.audit, self.eval_public = delta, audit, eval_public
        self.per_example_loss = per_example_loss or per_example_cross_entropy
        self.private_log_history: list[dict] = []
        forward = inspect.signature(self.model.forward).parameters
        takes_any = any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in forward.values()
        )  # e.g. a PEFT wrapper
        self._accepts = (
            (lambda k: k not in _LABELS)
            if takes_any
            else (lambda k: k in forward and k not in _LABELS)
        )
        self._epsilon = (
            -1,
            math.inf,
        )  # (releases, ε) of the last answer: the ledger is asked once per new release

    def _model_columns(self, train_dataset: Dataset) -> tuple[Dataset, Callable[[list], Any]]:
        """The training set and collator with the columns the model does not take left out, as the
        Trainer's own loader has them (``remove_unused_columns``): a text column would otherwise
        reach a padding collator.

        A ``datasets.Dataset`` loses the columns by name (its schema: no row is read). The collator
        drops them from each row it is handed: the rows of any other dataset, and a self-audit's
        canaries, which join the data inside make_private."""
        # imported already wherever such a dataset was built; dpnc does not need the package
        hf_datasets = sys.modules.get("datasets")
        if hf_datasets is not None and isinstance(train_dataset, hf_datasets.Dataset):
            train_dataset = self._remove_unused_columns(train_dataset, "training")
        return train_dataset, self._get_collator_with_removed_columns(
            self.data_collator, "training"
        )

    # --- the Trainer's hooks ----------------------------------------------------------------------

    def get_train_dataloader(self) -> DataLoader:
        """dpnc's loader: the secret Poisson batches the noise was calibrated for (``max_steps`` in
        all)."""
        return self._loader

    def create_optimizer(self, model: nn.Module | None = None) -> torch.optim.Optimizer:
        """What the Trainer steps: a no-op over dpnc's optimizer, whose step :meth:`training_step`
        takes."""
        if self.optimizer is None:
            self.optimizer = _ReleasedInTrainingStep(self.dp_optimizer)
        return self.optimizer

    def training_step(
        self, model: nn.Module, inputs: dict, num_items_in_batch: Any = None
    ) -> torch.Tensor:
        """One private step on ``inputs``, the batch dpnc's loader just yielded; returns its mean
        loss (private)."""
        device = self.args.device

        def loss_fn(
            batch: Mapping,
        ) -> torch.Tensor:  # per example: dpnc may hand it one example at a time
            labels = next((batch[k] for k in _LABELS if k in batch), None)
            if labels is None:
                raise ValueError(
                    f"a batch must hold the labels under one of {list(_LABELS)}; got {list(batch)}"
                )
            features = {k: v.to(device) for k, v in batch.items() if self._accepts(k)}
            return self.per_example_loss(self.model(**features), labels.to(device))

        try:
            loss = self.dp_optimizer.step(loss_fn, inputs)
        except Exception as error:
            if not getattr(error, "dpnc_released", False):
                raise
            # The step released and moved the model as any step does; stopping here would show in
            # the outputs which batch held the row. The owner is told on the terminal only.
            print(
                f"dpnc (owner only): step {self.state.global_step + 1}: {error!r}", file=sys.stderr
            )
            self.private_log_history.append(
                {"step": self.state.global_step + 1, "error": repr(error)}
            )
            loss = math.nan
        self.optimizer_facing().released += 1
        return torch.as_tensor(float(loss), device=device)

    def floating_point_ops(self, inputs: dict) -> int:
        """0: the Trainer's count grows with the realised (secret) batch sizes, and it is saved with
        checkpoints."""
        return 0

    def public(self, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """The run's output boundary: the allow-listed part of ``metrics``, with ε and δ of the
        ledger.

        Public: :data:`PUBLIC_LOGS` (released or declared values) and, with ``eval_public``, the
        evaluation metrics (``eval_*``: functions of the released model and a public set), never a
        run time."""

        def allowed(key: str) -> bool:
            evaluation = self.eval_public and key.startswith("eval_") and not key.endswith(_TIMING)
            return key in PUBLIC_LOGS or evaluation

        public = {k: v for k, v in metrics.items() if allowed(k)}
        public["epsilon"] = self.epsilon()
        if self.delta is not None:
            public["delta"] = self.delta
        return public

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Log the public part of ``logs`` (:meth:`public`); all of it goes to
        :attr:`private_log_history`."""
        self.private_log_history.append({**logs, "step": self.state.global_step})
        super().log(self.public(logs))  # no start_time: no speed metrics

    def num_examples(self, dataloader: DataLoader) -> int:
        """The declared n for dpnc's loader (the Trainer logs it); an evaluation set's own length
        otherwise."""
        if dataloader is self._loader:
            return self.dp_optimizer.wiring.n
        return super().num_examples(dataloader)

    def evaluate(
        self,
        eval_dataset: Dataset | None = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> dict[str, float]:
        """The Trainer's evaluation; its metrics reach logs and callbacks only through
        :meth:`public`.

        Returns every metric to the caller (the data owner). Without ``eval_public`` the logs and
        callbacks get ε and δ only, and the training loop's model selection sees nothing. A dict of
        evaluation sets is evaluated set by set, each metric prefixed by its name, as the Trainer
        does."""
        sets = eval_dataset if eval_dataset is not None else self.eval_dataset
        if isinstance(sets, dict):
            return {
                key: value
                for name, data in sets.items()
                for key, value in self.evaluate(
                    data, ignore_keys, f"{metric_key_prefix}_{name}"
                ).items()
            }
        output = self.evaluation_loop(
            self.get_eval_dataloader(eval_dataset),
            description="Evaluation",
            prediction_loss_only=True if self.compute_metrics is None else None,
            ignore_keys=ignore_keys,
            metric_key_prefix=metric_key_prefix,
        )
        self.log(output.metrics)
        public = self.public(output.metrics)
        self.control = self.callback_handler.on_evaluate(
            self.args, self.state, self.control, public
        )
        return output.metrics

    def predict(
        self,
        test_dataset: Dataset,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "test",
    ) -> PredictionOutput:
        """The Trainer's prediction; the callbacks' ``on_predict`` (reporters such as W&B log it)
        gets the metrics through :meth:`public` only, so a predicted set's loss and accuracy reach
        them under the ``eval`` prefix with ``eval_public`` alone. Returns every metric (no run
        times) to the caller."""
        output = self.evaluation_loop(
            self.get_test_dataloader(test_dataset),
            description="Prediction",
            ignore_keys=ignore_keys,
            metric_key_prefix=metric_key_prefix,
        )
        self.control = self.callback_handler.on_predict(
            self.args, self.state, self.control, self.public(output.metrics)
        )
        return PredictionOutput(output.predictions, output.label_ids, output.metrics)

    def _evaluate(
        self, trial: Any, ignore_keys_for_eval: list[str] | None, *args: Any, **kwargs: Any
    ):
        # the training loop's evaluation: what it returns picks the best model and feeds HP search
        return self.public(super()._evaluate(trial, ignore_keys_for_eval, *args, **kwargs))

    def _save_rng_state(self, output_dir: str) -> None:
        """Saves nothing: a resumed run is refused, and the generators' states are no output of the
        run."""

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs: Any):
        """The Trainer's ``train``; resuming is refused: a checkpoint does not hold the ledger, so ε
        would restart."""
        if resume_from_checkpoint:
            raise ValueError(
                "resume_from_checkpoint must be None: a checkpoint holds no privacy ledger, so a resumed "
                "run would report only the ε of its own steps"
            )
        output = super().train(**kwargs)
        if (
            self.audit is not None and self.is_world_process_zero()
        ):  # `dpnc audit --one-run output_dir` prints it
            self.self_audit().save(self.args.output_dir)
        self.private_log_history.append({"train_output": output})
        return TrainOutput(output.global_step, math.nan, self.public(output.metrics))

    def self_audit(self, **measured: float) -> SelfAuditResult:
        """The run's one-run audit (``audit=``): ``audit.result(**measured)`` (``accuracy``,
        ``canary_free_accuracy``: the accuracy cost, :func:`dpnc.self_audit.accuracy_cost`).
        ValueError without an audit."""
        if self.audit is None:
            raise ValueError(
                "this DPTrainer has no self-audit: pass DPTrainer(..., audit=SelfAudit(m, row=..., "
                "coordinates=...))"
            )
        return self.audit.result(**measured)

    # --- privacy ----------------------------------------------------------------------------------

    def epsilon(self) -> float:
        """ε(δ) of the releases so far, by the ledger (``accountant.epsilon(delta)``); ∞ for a
        non-private run."""
        if self.delta is None:
            return math.inf
        releases = self.accountant.releases
        if self._epsilon[0] != releases:
            self._epsilon = (releases, self.accountant.epsilon(self.delta))
        return self._epsilon[1]

    def optimizer_facing(self) -> _ReleasedInTrainingStep:
        """The no-op the Trainer steps (under accelerate's wrapper, if any)."""
        facing = self.optimizer
        while not isinstance(facing, _ReleasedInTrainingStep):
            facing = facing.optimizer
        return facing


def _refuse_unsupported(args: TrainingArguments, kwargs: dict, eval_public: bool) -> None:
    """ValueError, naming the setting and why, for what would break dpnc's contract."""
    if not isinstance(args, TrainingArguments):
        raise ValueError(
            f"args must be a transformers.TrainingArguments; got {type(args).__name__}"
        )
    selects = args.load_best_model_at_end or args.metric_for_best_model is not None
    plateau = str(args.lr_scheduler_type).endswith("reduce_lr_on_plateau")
    rules = [
        (
            (selects or plateau) and not eval_public,
            "load_best_model_at_end, metric_for_best_model and a reduce_lr_on_plateau schedule read the "
            "evaluation metrics into the published model or its learning rate: pass eval_public=True if "
            "the evaluation set is public, or leave them unset",
        ),
        (
            args.max_steps is None or args.max_steps <= 0,
            "max_steps must be set (> 0): the noise is calibrated for that many steps",
        ),
        (
            args.gradient_accumulation_steps != 1,
            "gradient_accumulation_steps must be 1: each batch is one release",
        ),
        (
            args.n_gpu > 1 or args.world_size > 1,
            "a DataParallel or distributed Trainer is not supported (its gradient "
            "all-reduce would bypass dpnc's step); run on one device, or use dpnc.make_private under torchrun",
        ),
        (
            args.fp16 or args.bf16,
            "fp16/bf16 mixed precision must be off: loss scaling acts on gradients dpnc forms "
            "itself",
        ),
        (bool(args.deepspeed) or bool(args.fsdp), "DeepSpeed and FSDP are not supported"),
        (
            args.auto_find_batch_size,
            "auto_find_batch_size must be False: the batch size sets q, fixed before the run",
        ),
        (
            args.include_num_input_tokens_seen not in ("no", False),
            "include_num_input_tokens_seen must be 'no': the "
            "token count of the secret batches is not a released value",
        ),
        (
            "optimizers" in kwargs or "optimizer_cls_and_kwargs" in kwargs,
            "optimizers must be left out: pass optimizer= a name of dpnc's registry",
        ),
        (
            "model_init" in kwargs,
            "model_init must be left out: the privacy run is wired to one model",
        ),
    ]
    for broken, message in rules:
        if broken:
            raise ValueError(message)
