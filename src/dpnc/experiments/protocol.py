"""The protocol every reproduction follows: tasks, one typed row per task, claims from the rows, a rendering.

An experiment is a small class (:class:`Experiment`) over three frozen dataclasses of its own:

* ``Config``: the grid and the settings, checked by ``validate()`` (called from ``__post_init__``, so a bad value
  fails at construction, before any work), with a ``QUICK`` and a ``FULL`` instance;
* a task: one independent unit of work (hashable and picklable: a frozen dataclass or a tuple of plain values);
* ``Row``: what one task measured, typed; turned into a dict only when it is written. A task that measures
  several points at once (e.g. a batched grid) returns a tuple of rows, which the runner flattens in order.

One runner, :func:`run_experiment`, turns a config into a :class:`Result` (the rows in task order, the claims
computed from them, the wall time and the machine); one writer, :func:`write`, puts every result on disk the same
way: ``rows.csv``, the experiment's extra tables, ``result.json`` (everything, for re-analysis; :func:`read` loads
it back), its figures and ``summary.md`` (a common header, the experiment's setting, the claims table, the
experiment's tables). The command line is generated from the same classes (:func:`dpnc.cli.add_reproduction`):
one option per config field, its help text from the field's ``metadata["help"]``.

Field metadata read here and by the command line: ``help`` (str), ``required`` (the command line needs a
value), ``folder`` (an existing folder, given as a path), ``csv`` (False: a row field kept out of ``rows.csv``,
e.g. a per-step curve; it is still in ``result.json``).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import multiprocessing
import os
import platform
import time
import types
import typing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import partial
from pathlib import Path
from typing import ClassVar, Generic, NamedTuple, TypeVar

C = TypeVar("C")   # the experiment's Config
T = TypeVar("T")   # its task
R = TypeVar("R")   # its Row


class Claim(NamedTuple):
    """One claim of a paper (or of a theory) checked on our rows.

    ``holds``: True, False, or None when the data give no signal either way (an effect inside its interval).
    """

    statement: str
    holds: bool | None
    evidence: str


class Experiment(Generic[C, T, R]):
    """A reproduction. Subclass it, set the class attributes and implement the methods; one instance per module.

    Class attributes:
        name: the command (``dpnc reproduce <name>``) and the default output folder ``runs/<name>``.
        title: the summary's heading.
        sizes: what ``--quick`` and ``--full`` run (the help of ``--full/--quick``).
        claims_heading: the heading of the claims table (the paper's, or a theory's predictions).
        Config: the frozen config dataclass; ``QUICK`` (the default) and ``FULL`` its two instances.
        Row: the frozen row dataclass.
    The command's help is the class docstring.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    sizes: ClassVar[str]
    Config: ClassVar[type]
    QUICK: ClassVar
    FULL: ClassVar
    Row: ClassVar[type]
    claims_heading: ClassVar[str] = "The paper's claims"

    def tasks(self, config: C) -> list[T]:
        """Every task of ``config``, in the order the rows should have; raises ValueError if ``config`` cannot run."""
        raise NotImplementedError

    def cost(self, config: C, task: T) -> float:
        """A relative cost, to start the costliest tasks first."""
        return 1.0

    def isolated(self, config: C) -> bool:
        """Whether each task needs a fresh process of its own (e.g. to measure its own peak memory)."""
        return False

    def bind_output(self, config: C, out: Path) -> C:
        """``config`` for a run whose outputs go to ``out`` (e.g. a folder for per-task files); the command line
        calls it before running."""
        return config

    def run_one(self, config: C, task: T) -> R | tuple[R, ...]:
        """Run one task: a module-level class's method, so that it pickles into a worker process. A row, or a
        tuple of rows for a task that measures several points at once (the runner flattens them in order)."""
        raise NotImplementedError

    def claims(self, rows: Sequence[R], config: C) -> list[Claim]:
        """The claims checked on ``rows``."""
        return []

    def describe(self, result: Result) -> str:
        """Markdown before the claims table: the setting (model, data, constants, privacy, caveats)."""
        return ""

    def render(self, result: Result) -> str:
        """Markdown after the claims table: the tables of numbers, beside the paper's."""
        return ""

    def tables(self, result: Result) -> dict[str, list[dict]]:
        """Extra CSV files besides ``rows.csv``: file name → rows (an empty list writes no file)."""
        return {}

    def plot(self, result: Result, out: Path) -> list[Path]:
        """Write the figures under ``out``; their paths."""
        return []

    def upgrade(self, data: dict) -> dict:
        """A ``result.json`` record written by an older version, in the current format (:func:`read` calls it);
        the default returns it unchanged."""
        return data


@dataclasses.dataclass(frozen=True)
class Result(Generic[C, R]):
    """One run of an experiment: its config, the rows in task order, the claims on them, time and machine."""

    experiment: Experiment
    config: C
    rows: tuple[R, ...]
    claims: tuple[Claim, ...]
    seconds: float
    workers: int | None   # None: not recorded (an older result)
    machine: dict

    def to_json(self) -> dict:
        return {"experiment": self.experiment.name, "config": dataclasses.asdict(self.config),
                "rows": [dataclasses.asdict(r) for r in self.rows], "claims": [c._asdict() for c in self.claims],
                "seconds": self.seconds, "workers": self.workers, "machine": self.machine}


def run_experiment(experiment: Experiment, config, *, progress: bool = True, workers: int = 2) -> Result:
    """Every task of ``config``, ``workers`` at a time (:func:`run_tasks`), and the claims on the rows.

    The tasks are listed (and ``config`` checked by the experiment) before any of them runs. The rows are in task
    order, a task's tuple of rows flattened in place.
    """
    config.validate()
    tasks = experiment.tasks(config)
    load_start = _load_average()
    start = time.perf_counter()
    outputs = run_tasks(partial(experiment.run_one, config), [(t,) for t in tasks],
                        cost=partial(experiment.cost, config), desc=experiment.name, progress=progress,
                        workers=workers, fresh=experiment.isolated(config))
    rows = [row for out in outputs for row in (out if isinstance(out, tuple) else (out,))]
    seconds = time.perf_counter() - start
    return Result(experiment, config, tuple(rows), tuple(experiment.claims(rows, config)), seconds, workers,
                  machine(load_start))


def machine(load_average_start: float | None = None) -> dict:
    """Where a result was computed: CPU count, processor, platform, torch version and threads, load averages."""
    import torch

    return {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
            "platform": platform.platform(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "load_average_start": load_average_start, "load_average_end": _load_average()}


def _load_average() -> float | None:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def run_tasks(run, tasks: Sequence[tuple], *, cost, desc: str, progress: bool = True, workers: int = 2,
              fresh: bool = False) -> list:
    """``[run(*task) for task in tasks]``, ``workers`` processes at a time (one torch thread each), the costliest
    (by ``cost(*task)``) submitted first, with a progress bar; results in the order of ``tasks``.

    ``fresh``: each task in a freshly spawned process of its own (nothing inherited, its own peak memory), even
    with one worker. Otherwise ``workers`` <= 1 runs the tasks in this process.
    ``run`` and ``cost`` must be picklable (module-level functions, or ``functools.partial`` of them).
    """
    import torch
    from tqdm.auto import tqdm

    bar = tqdm(total=len(tasks), desc=desc, disable=not progress)
    try:
        if workers <= 1 and not fresh:
            results = []
            for task in tasks:
                results.append(run(*task))
                bar.update()
            return results
        if fresh:
            context, extra = multiprocessing.get_context("spawn"), {"max_tasks_per_child": 1}
        else:
            context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                                  else "spawn")
            extra = {}
        order = sorted(range(len(tasks)), key=lambda i: -cost(*tasks[i]))
        with ProcessPoolExecutor(max(workers, 1), mp_context=context, initializer=torch.set_num_threads,
                                 initargs=(1,), **extra) as pool:
            futures = {i: pool.submit(run, *tasks[i]) for i in order}
            for future in as_completed(futures.values()):
                future.result()  # surface a failure at once
                bar.update()
            return [futures[i].result() for i in range(len(tasks))]
    finally:
        bar.close()


# --- files ----------------------------------------------------------------------------------------------------


def write_csv(path: Path, rows: Sequence[dict]) -> Path:
    """Rows of equal keys as a CSV file with a header."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def csv_record(row) -> dict:
    """A typed row as a CSV record: its fields but those marked ``metadata={"csv": False}``."""
    return {f.name: getattr(row, f.name) for f in dataclasses.fields(row) if f.metadata.get("csv", True)}


def verdict(holds: bool | None) -> str:
    return "no signal" if holds is None else "yes" if holds else "**no**"


def claims_table(claims: Sequence[Claim]) -> str:
    """The claims as the markdown table every summary shows (a sentence saying so when there are none)."""
    if not claims:
        return "No claim can be checked on these runs."
    lines = ["| claim | holds here | our numbers |", "|---|---|---|"]
    lines += [f"| {c.statement} | {verdict(c.holds)} | {c.evidence} |" for c in claims]
    return "\n".join(lines)


def summary(result: Result, command: str, note: str = "") -> str:
    """``summary.md``: heading, command, run time and machine, ``note`` if any, the setting, the claims, the
    tables."""
    m = result.machine
    load = ("" if m.get("load_average_start") is None else
            f"; load average {m['load_average_start']:.1f} at the start and {m['load_average_end']:.1f} at the end")
    hardware = (f"{m['cpus']} CPU cores ({m['processor']}; {m['platform']}), torch {m['torch']}{load}" if m else
                "not recorded (a result written before the machine was recorded)")
    parts = [f"# {result.experiment.title}\n",
             f"Command: `{command}`  ",
             f"Run time: {result.seconds / 60:.1f} min, {len(result.rows)} runs"
             + (f", {result.workers} at a time.  " if result.workers is not None else ".  "),
             f"Hardware: {hardware}.  "]
    if note:
        parts.append(f"{note}  ")
    describe = result.experiment.describe(result)
    parts += [describe.rstrip("\n") + "\n" if describe else "", f"## {result.experiment.claims_heading}\n",
              claims_table(result.claims), "", result.experiment.render(result)]
    return "\n".join(parts).rstrip("\n") + "\n"


def write(result: Result, out: Path, command: str, note: str = "") -> list[Path]:
    """``rows.csv``, the experiment's extra tables, ``result.json``, its figures and ``summary.md`` (with ``note``
    under its header) under ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [write_csv(out / "rows.csv", [csv_record(r) for r in result.rows])] if result.rows else []
    for name, table in result.experiment.tables(result).items():
        if table:
            paths.append(write_csv(out / name, table))
    (out / "result.json").write_text(json.dumps({**result.to_json(), "command": command}, indent=1))
    paths.append(out / "result.json")
    paths += result.experiment.plot(result, out)
    (out / "summary.md").write_text(summary(result, command, note))
    return paths + [out / "summary.md"]


def read(experiment: Experiment, path: Path) -> Result:
    """A :class:`Result` back from the ``result.json`` that :func:`write` wrote (lists back to tuples).

    Older files load too: a file written before this protocol (no ``experiment``, ``claims``, ``workers`` or
    ``machine``: those come back as the experiment's name, no claims, None and {}), and rows or configs without a
    field added since with a default (:func:`from_record`); the experiment's :meth:`Experiment.upgrade` brings
    anything else to the current format first.
    """
    data = experiment.upgrade(json.loads(Path(path).read_text()))
    if data.get("experiment", experiment.name) != experiment.name:
        raise ValueError(f"{path} holds a {data['experiment']!r} result, not {experiment.name!r}")
    return Result(experiment, from_record(experiment.Config, data["config"]),
                  tuple(from_record(experiment.Row, r) for r in data["rows"]),
                  tuple(Claim(**c) for c in data.get("claims", ())), data["seconds"], data.get("workers"),
                  data.get("machine", {}))


def rejudge(experiment: Experiment, folder: Path, note: str, command: str | None = None) -> list[Path]:
    """Judge the claims of the result under ``folder`` again on its stored rows (nothing is re-run) and write the
    result back there (:func:`write`), ``note`` (e.g. "re-judged from the committed rows on <date>") under the
    summary's header. ``command``: the run's command when the file lacks it."""
    folder = Path(folder)
    data = json.loads((folder / "result.json").read_text())
    old = read(experiment, folder / "result.json")
    result = dataclasses.replace(old, claims=tuple(experiment.claims(old.rows, old.config)))
    return write(result, folder, data.get("command") or command or "(not recorded)", note=note)


def from_record(cls: type, record: dict):
    """An instance of the dataclass ``cls`` from a JSON record: tuple-typed fields from lists; a field the record
    lacks takes its default (a field added since the record was written)."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in record and (f.default is not dataclasses.MISSING
                                     or f.default_factory is not dataclasses.MISSING):
            continue
        value = record[f.name]
        if isinstance(value, list) and tuple in _origins(hints[f.name]):
            value = tuple(value)
        values[f.name] = value
    return cls(**values)


def _origins(hint) -> set:
    """The outer types of a hint: {tuple} for ``tuple[int, ...]``, {tuple, NoneType} for ``tuple[...] | None``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return {o for arg in typing.get_args(hint) for o in _origins(arg)}
    return {origin or hint}

