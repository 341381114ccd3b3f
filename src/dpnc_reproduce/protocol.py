"""The protocol of every reproduction: tasks, a typed row each, claims from the rows, a rendering.

An experiment (:class:`Experiment`) has a ``Config``, a task type and a ``Row``; one runner
(:func:`run_experiment`) and one writer (:func:`write`) serve all, and the command line is
generated from the same classes. See docs/reproducing.md ("One protocol")."""

from __future__ import annotations

import csv
import dataclasses
import datetime
import difflib
import json
import multiprocessing
import os
import platform
import time
import types
import typing
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import ClassVar, Generic, NamedTuple, TypeVar

import torch
from tqdm.auto import tqdm

from dpnc_reproduce.provenance import declaring_commit

C = TypeVar("C")  # the experiment's Config
T = TypeVar("T")  # its task
R = TypeVar("R")  # its Row


class Claim(NamedTuple):
    """One claim of a paper (or of a theory) checked on our rows.

    ``holds``: True, False, or None when the data give no signal either way (an effect inside its
    interval). ``status``: with ``holds`` None, why a claim is not judged at all, when that is not
    "no signal": e.g. "not testable by slope here" (the instance confounds the variable) or
    "underpowered for this design". ``facts``: the numbers the verdict and evidence were read from,
    by name (``{"capped_runs": 15, …}``), which tests assert instead of the evidence's prose; never
    mutated (a claim is a value), empty where none is recorded."""

    statement: str
    holds: bool | None
    evidence: str
    status: str = ""
    facts: Mapping[str, float] = MappingProxyType({})

    def to_json(self) -> dict:
        """The claim as JSON data (its facts a plain dict)."""
        return {**self._asdict(), "facts": dict(self.facts)}


class Declared(NamedTuple):
    """A claim as declared before a run (:meth:`Experiment.declare`): what is claimed, which way,
    against what threshold, by which test. Written into ``result.json`` when the run starts."""

    statement: str
    direction: str  # e.g. "above", "at most", "one-sided: slope ≤ bound + tol", "every part holds"
    threshold: str
    test: str


class Experiment(Generic[C, T, R]):
    """A reproduction. Subclass it, set the class attributes and implement the methods; one instance
    per module.

    Class attributes:
        name: the command (``dpnc reproduce <name>``) and the default output folder ``runs/<name>``.
        title: the summary's heading.
        sizes: what ``--quick`` and ``--full`` run (the help of ``--full/--quick``).
        claims_heading: the heading of the claims table (the paper's, or a theory's predictions).
        Config: the frozen config dataclass; ``QUICK`` (the default) and ``FULL`` its two instances.
        Row: the frozen row dataclass.
        runner: the experiment's run module, whose ``tasks(config)``, ``cost(config, task)`` and
            ``run_one(config, task)`` the methods of the same names call unless a subclass overrides
            them.
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
    runner: ClassVar[types.ModuleType | None] = None

    def tasks(self, config: C) -> list[T]:
        """Every task of ``config``, in the order the rows should have; raises ValueError if
        ``config`` cannot run."""
        if self.runner is None:
            raise NotImplementedError
        return self.runner.tasks(config)

    def cost(self, config: C, task: T) -> float:
        """A relative cost, to start the costliest tasks first."""
        return 1.0 if self.runner is None else self.runner.cost(config, task)

    def isolated(self, config: C) -> bool:
        """Whether each task needs a fresh process of its own (e.g. to measure its own peak
        memory)."""
        return False

    def bind_output(self, config: C, out: Path) -> C:
        """``config`` for a run whose outputs go to ``out`` (e.g. a folder for per-task files); the
        command line calls it before running."""
        return config

    def run_one(self, config: C, task: T) -> R | tuple[R, ...]:
        """Run one task: a module-level class's method, so that it pickles into a worker process. A
        row, or a tuple of rows for a task that measures several points at once (the runner flattens
        them in order)."""
        if self.runner is None:
            raise NotImplementedError
        return self.runner.run_one(config, task)

    def specs(self, config: C) -> Sequence:
        """The claims as objects (:class:`dpnc_reproduce.judging.ClaimSpec`), each declared before
        the run and judged after it: :meth:`declare` and :meth:`claims` read them by default."""
        return []

    def claims(self, rows: Sequence[R], config: C) -> list[Claim]:
        """The claims checked on ``rows``: by default every spec's judged claims, in order."""
        return [claim for spec in self.specs(config) for claim in spec.claims(rows)]

    def declare(self, config: C) -> list[Declared]:
        """The claims :meth:`claims` will judge, declared before any task runs (one per family of
        claims): by default every spec's declaration."""
        return [d for spec in self.specs(config) if (d := spec.declaration()) is not None]

    def describe(self, result: Result) -> str:
        """Markdown before the claims table: the setting (model, data, constants, privacy,
        caveats)."""
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
        """A ``result.json`` record written by an older version, in the current format (:func:`read`
        calls it); the default returns it unchanged."""
        return data


@dataclasses.dataclass(frozen=True)
class Result(Generic[C, R]):
    """One run of an experiment: its config, the rows in task order, the claims on them, time and
    machine."""

    experiment: Experiment
    config: C
    rows: tuple[R, ...]
    claims: tuple[Claim, ...]
    seconds: float
    workers: int | None  # None: not recorded (an older result)
    machine: dict
    # the claims declared before the run (Declared); after it, if an older result lacked them
    declared: tuple = ()
    # every re-judging, oldest first: {"date", "rule", "changes", "previous"} (:func:`rejudge`)
    rejudged: tuple = ()
    notes: tuple = ()  # lines under the summary's header (kept across re-judgings)
    declared_commit: dict | None = (
        None  # where the declarations were committed (:func:`declaring_commit`)
    )

    def to_json(self) -> dict:
        return {
            "experiment": self.experiment.name,
            "config": dataclasses.asdict(self.config),
            "declared": [d._asdict() for d in self.declared],
            "declared_commit": self.declared_commit,
            "rows": [dataclasses.asdict(r) for r in self.rows],
            "claims": [c.to_json() for c in self.claims],
            "rejudged": list(self.rejudged),
            "notes": list(self.notes),
            "seconds": self.seconds,
            "workers": self.workers,
            "machine": self.machine,
        }


def run_experiment(
    experiment: Experiment,
    config,
    *,
    progress: bool = True,
    workers: int = 2,
    out: Path | None = None,
) -> Result:
    """Every task of ``config``, ``workers`` at a time (:func:`run_tasks`), and the claims on the
    rows.

    The tasks are listed (and ``config`` checked by the experiment) before any of them runs, and the
    claims are declared (:meth:`Experiment.declare`): with ``out``, ``out/result.json`` holds the
    config and the declared claims (``"status": "running"``) before the first task starts. The rows
    are in task order, a task's tuple of rows flattened in place."""
    config.validate()
    tasks = experiment.tasks(config)
    declared = tuple(experiment.declare(config))
    commit = declaring_commit(experiment)
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "result.json").write_text(
            json.dumps(
                {
                    "experiment": experiment.name,
                    "status": "running",
                    "config": dataclasses.asdict(config),
                    "declared": [d._asdict() for d in declared],
                    "declared_commit": commit,
                },
                indent=1,
            )
        )
    load_start = _load_average()
    start = time.perf_counter()
    outputs = run_tasks(
        partial(experiment.run_one, config),
        [(t,) for t in tasks],
        cost=partial(experiment.cost, config),
        desc=experiment.name,
        progress=progress,
        workers=workers,
        fresh=experiment.isolated(config),
    )
    rows = [row for out in outputs for row in (out if isinstance(out, tuple) else (out,))]
    seconds = time.perf_counter() - start
    return Result(
        experiment,
        config,
        tuple(rows),
        tuple(experiment.claims(rows, config)),
        seconds,
        workers,
        machine(load_start),
        declared,
        declared_commit=commit,
    )


def machine(load_average_start: float | None = None) -> dict:
    """Where a result was computed: CPU count, processor, platform, torch version and threads, load
    averages."""
    return {
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_average_start": load_average_start,
        "load_average_end": _load_average(),
    }


def _load_average() -> float | None:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def run_tasks(
    run,
    tasks: Sequence[tuple],
    *,
    cost,
    desc: str,
    progress: bool = True,
    workers: int = 2,
    fresh: bool = False,
) -> list:
    """``[run(*task) for task in tasks]``, ``workers`` processes at a time (one torch thread each),
    the costliest (by ``cost(*task)``) submitted first, with a progress bar; results in the order of
    ``tasks``.

    ``fresh``: each task in a freshly spawned process of its own (nothing inherited, its own peak
    memory), even with one worker. Otherwise ``workers`` <= 1 runs the tasks in this process.
    ``run`` and ``cost`` must be picklable (module-level functions, or ``functools.partial`` of
    them)."""
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
            context = multiprocessing.get_context(
                "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            )
            extra = {}
        order = sorted(range(len(tasks)), key=lambda i: -cost(*tasks[i]))
        with ProcessPoolExecutor(
            max(workers, 1),
            mp_context=context,
            initializer=torch.set_num_threads,
            initargs=(1,),
            **extra,
        ) as pool:
            futures = {i: pool.submit(run, *tasks[i]) for i in order}
            for future in as_completed(futures.values()):
                future.result()  # surface a failure at once
                bar.update()
            return [futures[i].result() for i in range(len(tasks))]
    finally:
        bar.close()


# --- files ----------------------------------------------------------------------------------------


def write_csv(path: Path, rows: Sequence[dict]) -> Path:
    """Rows of equal keys as a CSV file with a header."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def csv_record(row) -> dict:
    """A typed row as a CSV record: its fields but those marked ``metadata={"csv": False}``."""
    return {
        f.name: getattr(row, f.name) for f in dataclasses.fields(row) if f.metadata.get("csv", True)
    }


def verdict(holds: bool | None, status: str = "") -> str:
    """yes, **no** or no signal, by the interval; a claim left unjudged shows its reason instead,
    and a straddling interval stays "no signal" whatever the design's power (the power is its
    reason, after a colon)."""
    if holds is None and status.startswith("underpowered"):
        return f"no signal: {status}"
    if holds is None and status:
        return status
    return "no signal" if holds is None else "yes" if holds else "**no**"


def claims_table(claims: Sequence[Claim], before: dict[str, str] | None = None) -> str:
    """The claims as the markdown table every summary shows (a sentence saying so when there are
    none). ``before``: statement → the verdict before the last re-judging, shown beside a verdict
    that changed."""
    if not claims:
        return "No claim can be checked on these runs."
    before = before or {}
    lines = ["| claim | holds here | our numbers |", "|---|---|---|"]
    lines += [
        f"| {c.statement} | {verdict(c.holds, c.status)}"
        + (f" (was {before[c.statement]} before re-judging)" if c.statement in before else "")
        + f" | {c.evidence} |"
        for c in claims
    ]
    return "\n".join(lines)


def declared_table(declared: Sequence[Declared]) -> str:
    lines = ["| claim | direction | threshold | test |", "|---|---|---|---|"]
    return "\n".join(
        lines + [f"| {d.statement} | {d.direction} | {d.threshold} | {d.test} |" for d in declared]
    )


def rejudged_section(rejudged: Sequence[dict]) -> str:
    """Every re-judging: its date and rule, and each verdict it changed, old → new (nothing silently
    replaced)."""
    parts = ["## Re-judged (old verdicts kept in result.json)\n"]
    for r in rejudged:
        parts.append(f"{r['date']}: {r['rule']}\n")
        changed = [c for c in r["changes"] if c["old"] != c["new"]]
        if not changed:
            parts.append("No verdict changed.\n")
            continue
        parts += ["| claim | before | now | old numbers |", "|---|---|---|---|"]
        parts += [
            f"| {c['statement']} | {c['old']} | {c['new']} | {c['old_evidence']} |" for c in changed
        ]
        parts.append("")
    return "\n".join(parts)


def summary(result: Result, command: str, note: str = "") -> str:
    """``summary.md``: heading, command, run time and machine, ``note`` if any, the setting, the
    claims, the tables."""
    m = result.machine
    load = (
        ""
        if m.get("load_average_start") is None
        else f"; load average {m['load_average_start']:.1f} at the start and {m['load_average_end']:.1f} at the end"
    )
    hardware = (
        f"{m['cpus']} CPU cores ({m['processor']}; {m['platform']}), torch {m['torch']}{load}"
        if m
        else "not recorded (a result written before the machine was recorded)"
    )
    parts = [
        f"# {result.experiment.title}\n",
        f"Command: `{command}`  ",
        f"Run time: {result.seconds / 60:.1f} min, {len(result.rows)} runs"
        + (f", {result.workers} at a time.  " if result.workers is not None else ".  "),
        f"Hardware: {hardware}.  ",
    ]
    parts += [f"{line}  " for line in (*result.notes, note) if line]
    describe = result.experiment.describe(result)
    before = (
        {
            c["new_statement"]: c["old"]
            for c in result.rejudged[-1]["changes"]
            if c["old"] != c["new"] and c["new_statement"]
        }
        if result.rejudged
        else {}
    )
    parts += [
        describe.rstrip("\n") + "\n" if describe else "",
        f"## {result.experiment.claims_heading}\n",
        claims_table(result.claims, before),
        "",
    ]
    if result.declared:
        parts += [
            "Declared before the run"
            if not any(r.get("declared_after") for r in result.rejudged)
            else "Declared (at re-judging, after the run)",
            "",
            declared_table(result.declared),
            "",
        ]
    if result.rejudged:
        parts += [rejudged_section(result.rejudged), ""]
    parts.append(result.experiment.render(result))
    return "\n".join(parts).rstrip("\n") + "\n"


def write(result: Result, out: Path, command: str, note: str = "") -> list[Path]:
    """``rows.csv``, the experiment's extra tables, ``result.json``, its figures and ``summary.md``
    (with ``note`` under its header) under ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = (
        [write_csv(out / "rows.csv", [csv_record(r) for r in result.rows])] if result.rows else []
    )
    for name, table in result.experiment.tables(result).items():
        if table:
            paths.append(write_csv(out / name, table))
    (out / "result.json").write_text(json.dumps({**result.to_json(), "command": command}, indent=1))
    paths.append(out / "result.json")
    paths += result.experiment.plot(result, out)
    (out / "summary.md").write_text(summary(result, command, note))
    return paths + [out / "summary.md"]


def read(experiment: Experiment, path: Path) -> Result:
    """A :class:`Result` back from the ``result.json`` that :func:`write` wrote (lists back to
    tuples).

    Older files load too: a file written before this protocol (no ``experiment``, ``claims``,
    ``workers`` or ``machine``: those come back as the experiment's name, no claims, None and {}),
    and rows or configs without a field added since with a default (:func:`from_record`); the
    experiment's :meth:`Experiment.upgrade` brings anything else to the current format first."""
    data = experiment.upgrade(json.loads(Path(path).read_text()))
    if data.get("experiment", experiment.name) != experiment.name:
        raise ValueError(f"{path} holds a {data['experiment']!r} result, not {experiment.name!r}")
    return Result(
        experiment,
        from_record(experiment.Config, data["config"]),
        tuple(from_record(experiment.Row, r) for r in data["rows"]),
        tuple(Claim(**c) for c in data.get("claims", ())),
        data["seconds"],
        data.get("workers"),
        data.get("machine", {}),
        tuple(Declared(**d) for d in data.get("declared", ())),
        tuple(data.get("rejudged", ())),
        tuple(data.get("notes", ())),
        data.get("declared_commit"),
    )


def rejudge(
    experiment: Experiment,
    folder: Path,
    rule: str,
    command: str | None = None,
    date: str | None = None,
    redeclare: bool = False,
) -> tuple[list[Path], list[dict]]:
    """Judge the claims of the result under ``folder`` again on its stored rows (nothing is re-run)
    and write the result back there (:func:`write`). The old verdicts stay: ``result.json`` gains a
    ``rejudged`` record (the date, ``rule`` — what changed in the judging —, each claim's old and
    new verdict and evidence, and the old claims), and ``summary.md`` shows each changed verdict
    beside its old one and a table of every change. A result without declared claims gets them from
    :meth:`Experiment.declare`, marked as declared after the run. The summary's note lines are kept
    (read from an older summary.md where result.json lacks them). ``command``: the run's command
    when the file lacks it. ``redeclare``: the judging's declarations changed (thresholds,
    tolerances, regimes): the result takes the experiment's current ones, marked as declared after
    the run, and the record keeps the declaring commit and the old declarations. Returns the paths
    written and the changes."""
    folder = Path(folder)
    data = json.loads((folder / "result.json").read_text())
    old = read(experiment, folder / "result.json")
    new_claims = tuple(experiment.claims(old.rows, old.config))
    record = _record(
        old.claims, new_claims, rule, date, declared_after=redeclare or not old.declared
    )
    if redeclare:
        record |= {
            "declared_commit": declaring_commit(experiment),
            "previous_declared": [d._asdict() for d in old.declared],
        }
    changes = record["changes"]
    notes = old.notes or tuple(_summary_notes(folder / "summary.md", old))
    declared = (
        tuple(experiment.declare(old.config)) if redeclare or not old.declared else old.declared
    )
    result = dataclasses.replace(
        old, claims=new_claims, declared=declared, rejudged=(*old.rejudged, record), notes=notes
    )
    return write(result, folder, data.get("command") or command or "(not recorded)"), changes


def supersede(
    experiment: Experiment,
    folder: Path,
    previous: dict,
    rule: str,
    *,
    date: str | None = None,
    notes: tuple = (),
) -> list[Path]:
    """Keep the verdicts of the result a new run replaced: ``previous`` (the old ``result.json``, as
    a dict) gives a re-judging record in the new result under ``folder``, after the old result's own
    re-judgings. Only an old claim with the very same statement is paired with a new one (a re-run's
    claims may be new in kind); every other old claim reads "removed", with its old verdict and
    evidence, and the new claims that pair with none read "new claim". ``notes``: lines added under
    the summary's header (e.g. how the grid was trimmed)."""
    folder = Path(folder)
    data = json.loads((folder / "result.json").read_text())
    result = read(experiment, folder / "result.json")
    old = tuple(Claim(**c) for c in previous.get("claims", ()))
    record = {
        **_record(old, result.claims, rule, date, declared_after=False, similar=False),
        "previous_command": previous.get("command"),
        "previous_seconds": previous.get("seconds"),
    }
    result = dataclasses.replace(
        result, rejudged=(*previous.get("rejudged", ()), record), notes=(*result.notes, *notes)
    )
    return write(result, folder, data["command"])


def _record(
    old: Sequence[Claim],
    new: Sequence[Claim],
    rule: str,
    date: str | None,
    *,
    declared_after: bool,
    similar: bool = True,
) -> dict:
    """One re-judging record: its date and rule, each old claim's pairing (:func:`match_claims`),
    the old claims."""
    return {
        "date": date or datetime.date.today().isoformat(),
        "rule": rule,
        "changes": match_claims(old, new, similar=similar),
        "declared_after": declared_after,
        "previous": [c.to_json() for c in old],
    }


def match_claims(old: Sequence[Claim], new: Sequence[Claim], *, similar: bool = True) -> list[dict]:
    """Pair old and new claims (same statement first, then, with ``similar``, the most similar
    statement, at least half alike); each pair as {statement (the old one), new_statement, old, new,
    old_evidence, new_evidence}; an old claim without a new one reads "removed", a new one without
    an old one "new claim"."""
    pairs, left = {}, list(range(len(new)))
    for i, o in enumerate(old):
        j = next((j for j in left if new[j].statement == o.statement), None)
        if j is not None:
            pairs[i] = j
            left.remove(j)
    scored = (
        sorted(
            (
                (difflib.SequenceMatcher(None, old[i].statement, new[j].statement).ratio(), i, j)
                for i in range(len(old))
                if i not in pairs
                for j in left
            ),
            reverse=True,
        )
        if similar
        else []
    )
    for ratio, i, j in scored:
        if ratio >= 0.5 and i not in pairs and j in left:
            pairs[i] = j
            left.remove(j)
    out = [
        {
            "statement": o.statement,
            "new_statement": new[pairs[i]].statement if i in pairs else None,
            "old": verdict(o.holds, o.status),
            "new": verdict(new[pairs[i]].holds, new[pairs[i]].status) if i in pairs else "removed",
            "old_evidence": o.evidence,
            "new_evidence": new[pairs[i]].evidence if i in pairs else "",
        }
        for i, o in enumerate(old)
    ]
    return out + [
        {
            "statement": new[j].statement,
            "new_statement": new[j].statement,
            "old": "new claim",
            "new": verdict(new[j].holds, new[j].status),
            "old_evidence": "",
            "new_evidence": new[j].evidence,
        }
        for j in left
    ]


def _summary_notes(path: Path, result: Result) -> list[str]:
    """The note lines of an older summary.md: between its "Hardware:" line and the experiment's
    setting."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    start = next((i + 1 for i, line in enumerate(lines) if line.startswith("Hardware:")), None)
    if start is None:
        return []
    first = next(
        (line for line in result.experiment.describe(result).splitlines() if line.strip()), None
    )
    stop = next(
        (
            i
            for i in range(start, len(lines))
            if lines[i].startswith("## ")
            or (first is not None and lines[i].strip() == first.strip())
        ),
        len(lines),
    )
    return [line.rstrip() for line in lines[start:stop] if line.strip()]


def from_record(cls: type, record: dict):
    """An instance of the dataclass ``cls`` from a JSON record: tuple-typed fields from lists; a
    field the record lacks takes its default (a field added since the record was written)."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in record and (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        ):
            continue
        value = record[f.name]
        if isinstance(value, list) and tuple in _origins(hints[f.name]):
            value = tuple(value)
        values[f.name] = value
    return cls(**values)


def _origins(hint) -> set:
    """The outer types of a hint: {tuple} for ``tuple[int, ...]``, {tuple, NoneType} for
    ``tuple[...] | None``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return {o for arg in typing.get_args(hint) for o in _origins(arg)}
    return {origin or hint}
