"""On one GPU: the DPZero paper's Table 2 claims where the model has room to learn (every parameter trained,
T in the thousands), and Table 3 at the 1B scale, within about 8 minutes.

Parts (``--parts``), in this order:

* ``table3``: a decoder of 1.1B parameters built from its config with random weights (TinyLlama-1.1B's shape,
  :data:`SCALE`: no download; a byte-level BPE tokenizer trained on SST-2's training sentences) as the causal-LM
  classifier of SST-2 (``--head causal --train all``), in bf16 at B = 16: the step time and peak GPU memory of
  inference (two no-grad forwards), MeZO, DPZero and DP-AdamW (the trainer's first-order route; where B runs out
  of memory, the largest B that fits). The measurement is ``check.py``'s ``table3`` (its README says how it
  measures), written to ``table3-1b/check.json`` and ``check.md``.
* ``claims``: SST-2 and TREC × ``head`` (the linear head on frozen MiniLM features) and ``all`` (all 22.6M MiniLM
  parameters, prompt head) × seeds 42, 13, 21, each (task, mode, seed) a process of its own, all side by side on
  the GPU (a MiniLM step is bound by the CPU's kernel launches, so the 16 cores run them in parallel): zero-shot,
  MeZO, DPZero at ε = 6 and, if the probe leaves time for T ≥ ``--min-steps``, ε = 2 (``dpzero_dimension.run.run_one``
  with the recipes given: no selection phase). Recipes are fixed before the run
  from committed selections (:func:`recipes`): ``head`` from ``TASK_RECIPES`` (dpzero-lm-tasks' held-out choice),
  ``all`` from the clip-grid sweep's held-out choice (docs/results/dpzero-dimension/gpu-clip-grid-T120, C = 200).
  T comes from a probe (MeZO steps of the ``all`` mode alone) and the budget. Each mode's rows are judged by the
  dpzero-lm reproduction's own claims (declared in its code before any run: gains over zero-shot > 0, DPZero ε = 6
  loses ≤ 2.6 points to MeZO, keeps ≥ 0.90 of MeZO's gain, the Table 3 caption on SST-2; power-checked) and written
  as one result per mode (``<mode>/summary.md``, ``result.json``); every run's peak GPU memory is in ``memory.csv``.

Then ``headroom.json`` and ``headroom.md`` (the device, T, Table 3's ratios: DPZero's peak memory / inference's,
DPZero's step time / MeZO's, DP-AdamW's memory / DPZero's; MeZO's gain and the verdicts per mode).

On the device (two calls; benchmarks/gpu/README.md, "Where the model has room to learn"): after
``DPNC_GGUF=none DPNC_DATA="SST-2/k-shot-1k-test trec/k-shot-1k-test" benchmarks/gpu/prepare.sh`` here,

    bash benchmarks/gpu/receive.sh 1                                   # carry [".gpu/p1"], timeout_s 120
    bash benchmarks/gpu/headroom.sh                                    # carry [".gpu/p2"], timeout_s 560

On the CPU: ``python benchmarks/gpu/headroom.py --out OUT --cpu-tiny`` (seconds: ``tests/benchmarks/test_gpu_check.py``).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GPU = Path(__file__).resolve().parent
sys.path.insert(0, str(GPU))
import check  # noqa: E402  (sets the offline environment, imports torch)
import dimension  # noqa: E402  (puts src/ on the path)
import torch  # noqa: E402

from dpnc_reproduce import protocol  # noqa: E402
from dpnc_reproduce.dpzero_dimension.run import FULL, DimConfig, DimRow, DimTask, lm_config, run_one  # noqa: E402
from dpnc_reproduce.dpzero_lm.experiment import EXPERIMENT as LM  # noqa: E402
from dpnc_reproduce.dpzero_lm.run import TASK_RECIPES, LMRow  # noqa: E402

ROOT = GPU.parents[1]
CLIP_GRID = ROOT / "docs" / "results" / "dpzero-dimension" / "gpu-clip-grid-T120" / "recipes.csv"
# TinyLlama-1.1B's shape (1,100,048,384 parameters with a 32,000-token vocabulary); --cpu-tiny keeps check.py's tiny one
SCALE = dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
             num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048, tie_word_embeddings=False)
MERGE_SECONDS = 25.0   # kept at the end for judging and writing


def recipes(task: str, mode: str) -> dict:
    """The committed recipe of (task, mode), {"mezo": {"lr", "clip"}, "dpzero": {"lr", "clip"}}: ``head`` from
    ``TASK_RECIPES`` (chosen on held-out training rows, docs/results/dpzero-lm-tasks/recipe-choice), the other modes
    from the clip-grid sweep's held-out choice (``CLIP_GRID``)."""
    if mode == "head":
        r = TASK_RECIPES[task]
        return {"mezo": {"lr": r["mezo"]["lr"], "clip": None}, "dpzero": {"lr": r["dpzero"]["lr"],
                                                                         "clip": r["dpzero"]["clip"]}}
    with open(CLIP_GRID, newline="") as f:
        chosen = [r for r in csv.DictReader(f) if (r["task"], r["mode"], r["chosen"]) == (task, mode, "True")]
    out = {("mezo" if r["method"] == "mezo" else "dpzero"): {"lr": float(r["lr"]),
                                                             "clip": float(r["clip"]) if r["clip"] else None}
           for r in chosen}
    if set(out) != {"mezo", "dpzero"}:
        raise ValueError(f"{CLIP_GRID.name} has no chosen MeZO and DPZero recipe for {task} {mode}")
    return out


# --- Table 3 at scale ---------------------------------------------------------------------------------------

def table3_at_scale(args: argparse.Namespace, deadline: float) -> dict:
    """check.py's table3 on the random 1.1B decoder (``--cpu-tiny``: its tiny Llama); its part, with the ratios."""
    out = args.out / "table3-1b"
    cargs = check.parse(["--out", str(out), "--data-dir", str(args.data_dir), "--parts", "table3", "--device",
                         args.device, "--dtypes", args.scale_dtype, "--batch-sizes", str(args.scale_batch),
                         "--max-length", str(args.max_length)] + (["--cpu-tiny"] if args.cpu_tiny else []))
    device = torch.device(args.device)
    data = {"_start": check.now(), "schema": check.SCHEMA, "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "device": check.environment(device), "config": vars(cargs) | {"out": str(out)},
            "parts": {"table3": {"status": "running"}}, "errors": []}
    report = check.Report(out, data)
    ctx = check.Context(cargs, report)
    folder = Path(tempfile.mkdtemp(prefix="dpnc-decoder-"))
    t0 = check.now()
    check.make_tiny_causal_lm(folder, list(ctx.data()[0].texts), args.device, **({} if args.cpu_tiny else SCALE))
    data["model_build_seconds"] = round(check.now() - t0, 2)
    cargs.causal_model = str(folder)
    data["config"]["causal_model"] = f"random {'tiny' if args.cpu_tiny else '1.1B'} Llama built from its config"
    part = data["parts"]["table3"]
    try:
        check.table3(ctx, deadline)
        part["status"] = "ok" if all(r.get("status") == "ok" for r in part["rows"]) else "partial"
    except Exception as error:   # noqa: BLE001 - recorded; the claims part still runs
        part.update(status="error", error=check.error_record(error))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    part["seconds"] = round(check.now() - t0, 2)
    report.write()
    return {"status": part["status"], "model": data.get("model", {}), "rows": part.get("rows", []),
            "ratios": scale_ratios(part.get("rows", []))}


def scale_ratios(rows: list[dict]) -> dict:
    """The issue's three ratios at the largest B where both sides were measured (None where a side is missing).
    DP-AdamW that ran out of memory at B is compared at the largest B that fits with DPZero at B: a lower bound."""
    ok = {(r["batch_size"], r["method"]): r for r in rows if r.get("status") == "ok"}

    def ratio(a: str, b: str, key: str):
        for B in sorted({B for B, _ in ok}, reverse=True):
            below = ok.get((B, a), {}).get("largest_fit_below")
            other = ok.get((below or B, b))
            if (B, a) in ok and other and ok[(B, a)][key] and other[key]:
                bound = {"lower_bound": f"DP-AdamW at B = {B} (B = {below} ran out of memory)"} if below else {}
                return {"batch_size": below or B, "value": ok[(B, a)][key] / other[key], **bound}
        return None

    return {"dpzero_memory_over_inference": ratio("dpzero", check.INFERENCE, "peak_mib"),
            "dpzero_time_over_mezo": ratio("dpzero", "mezo", "step_ms_median"),
            "dp_adamw_memory_over_dpzero": ratio("dp-adamw", "dpzero", "peak_mib")}


# --- the claims ---------------------------------------------------------------------------------------------

def part_config(args: argparse.Namespace, steps: int, epsilons: tuple, task: str, mode: str) -> DimConfig:
    return dataclasses.replace(FULL, data_dir=str(args.data_dir), tasks=(task,), modes=(mode,),
                               seeds=tuple(args.seeds), epsilons=epsilons, steps=steps, batch_size=args.batch_size,
                               device=args.device, eval_examples=args.eval_examples, max_length=args.max_length)


def run_part(args: argparse.Namespace) -> None:
    """One (task, mode) with its fixed recipe (this process is one part): rows.json under --out."""
    config = protocol.from_record(DimConfig, json.loads(args.config.read_text()))
    rows = run_one(config, DimTask(config.tasks[0], config.modes[0]), recipes(config.tasks[0], config.modes[0]))
    (args.out / "rows.json").write_text(json.dumps([dataclasses.asdict(r) for r in rows]))


def plan(args: argparse.Namespace, left: float) -> tuple[int, tuple, dict]:
    """T and the ε to run: from --steps, or from a probe of the costliest mode and the time left; ε = 2 only if
    T stays ≥ --min-steps with it. Where even ε = 6 alone leaves T under --min-steps, T is what fits (≥ 100)."""
    if args.steps:
        return args.steps, tuple(args.epsilons), {}
    per_step = dimension.probe(args)
    for epsilons in (tuple(args.epsilons), tuple(args.epsilons[:1])):
        runs = 1 + len(epsilons)   # MeZO and DPZero at each ε, one after the other in a (task, mode, seed) part
        steps = int(args.fill * (left - 10) / (runs * per_step * args.share)) // 100 * 100
        if steps >= args.min_steps:
            break
    steps = min(args.max_steps, max(100, steps))
    return steps, epsilons, {"probe_seconds_per_step": per_step, "runs_per_part": runs}


def claims(args: argparse.Namespace, deadline: float) -> dict:
    start = check.now()
    steps, epsilons, probe = plan(args, deadline - check.now() - MERGE_SECONDS)
    print(f"headroom claims: T = {steps}, ε = {epsilons} ({probe})", flush=True)
    procs = {}
    for task, mode, seed in ((t, m, s) for t in args.tasks for m in args.modes for s in args.seeds):
        out = args.out / "parts" / f"{task}-{mode}-{seed}"
        out.mkdir(parents=True, exist_ok=True)
        config = dataclasses.replace(part_config(args, steps, epsilons, task, mode), seeds=(seed,))
        (out / "config.json").write_text(json.dumps(dataclasses.asdict(config)))
        cmd = [sys.executable, __file__, "part", "--config", str(out / "config.json"), "--out", str(out)]
        procs[out] = subprocess.Popen(cmd, stdout=(out / "part.log").open("w"), stderr=subprocess.STDOUT)
    while any(p.poll() is None for p in procs.values()) and check.now() < deadline - MERGE_SECONDS:
        time.sleep(1)
    stopped = [out.name for out, p in procs.items() if p.poll() is None]
    for p in procs.values():
        if p.poll() is None:
            p.kill()
    done = [out for out, p in procs.items() if p.wait() == 0 and (out / "rows.json").is_file()]
    rows = [protocol.from_record(DimRow, r) for out in done for r in json.loads((out / "rows.json").read_text())]
    log = {"steps": steps, "epsilons": list(epsilons), **probe, "finished": [o.name for o in done],
           "stopped_at_budget": stopped, "failed": [o.name for o in procs if o not in done and o.name not in stopped],
           "recipes": {f"{t} {m}": recipes(t, m) for t in args.tasks for m in args.modes}, "modes": {}}
    protocol.write_csv(args.out / "memory.csv", [
        {"task": r.task, "mode": r.mode, "seed": r.seed, "method": r.method, "epsilon": r.epsilon, "steps": r.steps,
         "accuracy": r.accuracy, "peak_gpu_mib": r.run_peak_gpu_mib, "peak_rss_mib": r.run_peak_rss_mib}
        for r in rows])
    for mode in args.modes:
        mine = tuple(LMRow(**{f.name: getattr(r, f.name) for f in dataclasses.fields(LMRow)})
                     for r in rows if r.mode == mode)
        if not mine:
            continue
        config = dataclasses.replace(lm_config(part_config(args, steps, epsilons, args.tasks[0], mode), mode,
                                               None, None), tasks=tuple(dict.fromkeys(r.task for r in mine)))
        result = protocol.Result(LM, config, mine, tuple(LM.claims(mine, config)), check.now() - start, len(done),
                                 protocol.machine(), tuple(LM.declare(config)))
        note = run_note(args, mode, steps, config.tasks, stopped)
        protocol.write(result, args.out / mode, "bash benchmarks/gpu/headroom.sh " + " ".join(args.argv), note)
        log["modes"][mode] = {"gains": gains(mine), "claims": [c._asdict() for c in result.claims]}
    return log


def run_note(args: argparse.Namespace, mode: str, steps: int, tasks, stopped: list[str]) -> str:
    """The line under a mode's summary header: the device, how the parts ran, T and the fixed recipes."""
    fixed = "; ".join(f"{t}: MeZO lr {r['mezo']['lr']:g}, DPZero lr {r['dpzero']['lr']:g}, C {r['dpzero']['clip']:g}"
                      for t, r in ((t, recipes(t, mode)) for t in tasks))
    return (f"Device: {dimension.gpu_name(args.device)}; benchmarks/gpu/headroom.py, mode {mode}: each (task, seed) a "
            f"process of its own beside the others; T = {steps}; recipes fixed before the run from committed "
            f"selections (no selection on this device): {fixed}"
            + (f". Stopped at the budget and left out: {', '.join(stopped)}" if stopped else "") + ".")


def gains(rows) -> dict:
    """Per task and method: the mean test accuracy (%) over seeds and its gain over zero-shot (points)."""
    out: dict = {}
    for task in dict.fromkeys(r.task for r in rows):
        acc: dict[str, list[float]] = {}
        for r in rows:
            if r.task == task:
                key = r.method if r.epsilon is None else f"{r.method} ε={r.epsilon:g}"
                acc.setdefault(key, []).append(r.accuracy)
        zero = statistics.fmean(acc.get("zero-shot", [float("nan")]))
        out[task] = {k: {"accuracy": statistics.fmean(v), "gain": statistics.fmean(v) - zero, "seeds": len(v)}
                     for k, v in acc.items()}
    return out


# --- the report ---------------------------------------------------------------------------------------------

def markdown(log: dict) -> str:
    lines = [f"# DPZero where the model has room to learn: {log['device']}", "",
             f"{log['started']}; {log['seconds']:.0f} s in all; `{' '.join(log['argv'])}`."]
    t3 = log.get("table3")
    if t3:
        model = t3.get("model", {})
        lines += ["", f"## Table 3 at scale: {t3['status']}", "",
                  f"{model.get('parameters', 0):,} parameters ({model.get('class', '?')}, random weights, causal "
                  "head on SST-2, every parameter trained); `table3-1b/check.md` has every row.", "",
                  "| B | method | ms / step | peak MiB | × 2 forwards (time) | × inference (memory) |",
                  "|---|---|---|---|---|---|"]
        for r in t3["rows"]:
            if r.get("status") == "ok":
                lines.append(f"| {r['batch_size']} | {check.LABELS[r['method']]} | {r['step_ms_median']:.1f} | "
                             f"{check._f(r['peak_mib'], '.0f')} | {check._f(r.get('time_x_inference'), '.2f')} | "
                             f"{check._f(r.get('memory_x_inference'), '.2f')} |")
            else:
                lines.append(f"| {r['batch_size']} | {check.LABELS[r['method']]} | {r.get('status')} | | | |")
        lines += [""] + [f"- {name.replace('_', ' ')}: " + ("not measured" if v is None else
                                                            f"{v['value']:.2f} (B = {v['batch_size']})")
                         for name, v in t3["ratios"].items()]
    c = log.get("claims")
    if c:
        lines += ["", f"## Table 2 claims: T = {c['steps']}, ε = {c['epsilons']}", "",
                  f"Finished: {c['finished']}; stopped at the budget: {c['stopped_at_budget']}; failed: {c['failed']}."]
        for mode, m in c["modes"].items():
            lines += ["", f"### `{mode}` ([summary]({mode}/summary.md))", "",
                      "| task | method | accuracy (%) | gain over zero-shot | seeds |", "|---|---|---|---|---|"]
            lines += [f"| {t} | {k} | {v['accuracy']:.1f} | {v['gain']:+.1f} | {v['seeds']} |"
                      for t, per in m["gains"].items() for k, v in per.items()]
            lines += [""] + [f"- {protocol.verdict(x['holds'], x.get('status', ''))} — {x['statement']}: "
                             f"{x['evidence'][:300]}" for x in m["claims"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.command == "part":
        run_part(args)
        return 0
    start = check.now()
    deadline = start + args.budget_seconds
    args.out.mkdir(parents=True, exist_ok=True)
    log = {"device": dimension.gpu_name(args.device), "torch": torch.__version__, "argv": args.argv,
           "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}

    def write() -> None:
        log["seconds"] = check.now() - start
        (args.out / "headroom.json").write_text(json.dumps(log, indent=1, default=str))
        (args.out / "headroom.md").write_text(markdown(log))

    print(f"headroom.py on {log['device']}: parts {args.parts}, budget {args.budget_seconds:.0f} s", flush=True)
    if "table3" in args.parts:
        limit = min(start + args.table3_seconds, deadline - (args.claims_min_seconds if "claims" in args.parts else 0))
        log["table3"] = table3_at_scale(args, limit)
        write()
    if "claims" in args.parts:
        log["claims"] = claims(args, deadline)
    write()
    print((args.out / "headroom.md").read_text(), flush=True)
    c = log.get("claims", {})
    return 0 if not (c.get("stopped_at_budget") or c.get("failed")) and log.get("table3", {}).get(
        "status", "ok") == "ok" else 2


def parse(argv: list[str] | None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", nargs="?", default="run", choices=("run", "part"), help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data", help="LM-BFF data folder")
    p.add_argument("--parts", type=lambda s: s.split(","), default=["table3", "claims"])
    p.add_argument("--tasks", type=lambda s: s.split(","), default=["SST-2", "TREC"])
    p.add_argument("--modes", type=lambda s: s.split(","), default=["head", "all"])
    p.add_argument("--seeds", type=lambda s: [int(v) for v in s.split(",")], default=[42, 13, 21])
    p.add_argument("--epsilons", type=lambda s: [float(v) for v in s.split(",")], default=[6.0, 2.0],
                   help="the first always; the others only if T stays >= --min-steps with them")
    p.add_argument("--batch-size", type=int, default=64, help="B (the paper's 64)")
    p.add_argument("--eval-examples", type=int, default=None, help="test examples (default: the whole test split)")
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--steps", type=int, help="T of every run (default: from the probe and the budget)")
    p.add_argument("--min-steps", type=int, default=1000)
    p.add_argument("--max-steps", type=int, default=10000)
    p.add_argument("--probe-steps", type=int, default=12)
    p.add_argument("--fill", type=float, default=0.7, help="part of the time left the slowest part is planned to use")
    p.add_argument("--share", type=float, default=2.5,
                   help="assumed slow-down of a part when all run at once (the dimension sweep's H200 run: about 3 "
                        "with 6 full-forward parts; a part still running at the budget is lost)")
    p.add_argument("--budget-seconds", type=float, default=480.0, help="the whole run")
    p.add_argument("--table3-seconds", type=float, default=100.0, help="at most this for Table 3 (model build too)")
    p.add_argument("--claims-min-seconds", type=float, default=300.0, help="kept for the claims after Table 3")
    p.add_argument("--scale-batch", type=int, default=16, help="Table 3's B at scale")
    p.add_argument("--scale-dtype", default="bf16")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--cpu-tiny", action="store_true", help="CPU smoke run: SST-2, head, one seed, T = 4")
    p.add_argument("--config", type=Path, help=argparse.SUPPRESS)   # a part's DimConfig, written by the run
    args = p.parse_args(argv)
    if args.cpu_tiny:
        args.device, args.tasks, args.modes, args.seeds, args.epsilons = "cpu", ["SST-2"], ["head"], [42], [6.0]
        args.batch_size, args.eval_examples, args.max_length, args.scale_dtype, args.scale_batch = 8, 16, 32, "fp32", 4
        args.steps = args.steps or 4
        args.budget_seconds = min(args.budget_seconds, 240.0)
        args.claims_min_seconds = min(args.claims_min_seconds, 60.0)
        torch.set_num_threads(1)
    args.argv = argv
    return args


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
