"""The experiment protocol on a toy experiment: runner, writer, claims table, reading back,
generated command."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from dataclasses import dataclass, field

import pytest
from typer.testing import CliRunner

from dpnc import cli
from dpnc_reproduce import protocol
from dpnc_reproduce.common import INTEGER, POSITIVE, check_axis, check_value
from dpnc_reproduce.protocol import Claim, Experiment

runner = CliRunner(env={"COLUMNS": "250"})


@dataclass(frozen=True)
class ToyConfig:
    data_dir: str | None = field(
        default=None, metadata={"help": "A folder.", "required": True, "folder": True}
    )
    sizes: tuple[int, ...] = field(default=(1, 2, 3), metadata={"help": "Sizes n."})
    scales: tuple[float, ...] = field(default=(1.0,), metadata={"help": "Scales."})
    seeds: int = field(default=2, metadata={"help": "Seeds per size."})
    offset: float = 0.5
    label: str | None = None
    fresh: bool = field(default=False, metadata={"help": "A fresh process per task."})

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        check_axis("sizes", self.sizes, INTEGER)
        check_axis("scales", self.scales, POSITIVE)
        check_value("seeds", self.seeds, INTEGER)


@dataclass(frozen=True)
class ToyRow:
    n: int
    seed: int
    value: float
    pid: int
    trace: tuple[float, ...] = field(default=(), metadata={"csv": False})


class Toy(Experiment[ToyConfig, tuple, ToyRow]):
    """A toy: value = n · scale + seed + offset."""

    name = "toy"
    title = "A toy experiment"
    sizes = "--quick: n ≤ 3; --full: n ≤ 4, three seeds."
    Config, QUICK, FULL, Row = (
        ToyConfig,
        ToyConfig(),
        ToyConfig(sizes=(1, 2, 3, 4), seeds=3),
        ToyRow,
    )

    def tasks(self, config):
        return [(n, s) for n in config.sizes for s in range(config.seeds)]

    def cost(self, config, task):
        return task[0]

    def isolated(self, config):
        return config.fresh

    def run_one(self, config, task):
        n, seed = task
        return ToyRow(
            n,
            seed,
            n * config.scales[0] + seed + config.offset,
            os.getpid(),
            (float(n), float(seed)),
        )

    def claims(self, rows, config):
        grows = all(
            a.value < b.value for a, b in zip(rows, rows[1:]) if a.seed == b.seed and a.n < b.n
        )
        return [
            Claim("the value grows with n", grows, f"{len(rows)} rows"),
            Claim(
                "the value is negative",
                False,
                f"min {min(r.value for r in rows):g}",
                facts={"min": min(r.value for r in rows)},
            ),
            Claim("the value is lucky", None, "no test for luck"),
        ]

    def describe(self, result):
        return f"Setting: offset {result.config.offset:g}."

    def render(self, result):
        return "## Values\n\n" + "\n".join(
            f"- n={r.n}, seed={r.seed}: {r.value:g}" for r in result.rows
        )

    def tables(self, result):
        return {"sizes.csv": [{"n": n} for n in result.config.sizes], "empty.csv": []}

    def plot(self, result, out):
        (out / "fig.txt").write_text("a figure")
        return [out / "fig.txt"]

    def declare(self, config):
        return [
            protocol.Declared(
                "the value grows with n", "above", "the previous n's value", "every pair"
            )
        ]


TOY = Toy()


def test_claims_are_declared_when_the_run_starts(tmp_path, monkeypatch):
    seen = {}

    def spy(run, tasks, **kwargs):  # what result.json holds when the first task starts
        seen.update(json.loads((tmp_path / "result.json").read_text()))
        return [run(*t) for t in tasks]

    monkeypatch.setattr(protocol, "run_tasks", spy)
    result = protocol.run_experiment(TOY, TOY.QUICK, progress=False, workers=1, out=tmp_path)
    assert seen["status"] == "running" and seen["declared"] == [
        d._asdict() for d in TOY.declare(TOY.QUICK)
    ]
    assert "rows" not in seen and result.declared == tuple(TOY.declare(TOY.QUICK))
    protocol.write(result, tmp_path, "dpnc reproduce toy")
    assert json.loads((tmp_path / "result.json").read_text())["declared"] == seen["declared"]
    assert "Declared before the run" in (tmp_path / "summary.md").read_text()


def test_rejudging_keeps_the_old_verdict_beside_the_new(tmp_path, monkeypatch):
    result = protocol.run_experiment(TOY, TOY.QUICK, progress=False, workers=1)
    protocol.write(result, tmp_path, "dpnc reproduce toy", note="A note under the header.")
    monkeypatch.setattr(
        Toy,
        "claims",
        lambda self, rows, config: [
            Claim("the value grows with n (strictly)", None, "a new rule"),
            Claim("the value is negative", False, "same"),
        ],
    )
    _, changes = protocol.rejudge(TOY, tmp_path, "a stricter rule for growth", date="2026-02-02")
    assert changes[0] == {
        "statement": "the value grows with n",
        "new_statement": "the value grows with n (strictly)",
        "old": "yes",
        "new": "no signal",
        "old_evidence": "6 rows",
        "new_evidence": "a new rule",
    }
    assert changes[1]["old"] == changes[1]["new"] == "**no**" and changes[2]["new"] == "removed"
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["rejudged"][0]["rule"] == "a stricter rule for growth"
    assert [c["statement"] for c in saved["rejudged"][0]["previous"]] == [
        c.statement for c in result.claims
    ]
    summary = (tmp_path / "summary.md").read_text()
    assert (
        "| the value grows with n (strictly) | no signal (was yes before re-judging) | a new rule |"
        in summary
    )
    assert (
        "| the value grows with n | yes | no signal | 6 rows |" in summary
    )  # the table of changes
    assert "A note under the header.  " in summary  # kept across the re-judging


def test_the_runner_returns_typed_rows_in_task_order_and_the_claims():
    result = protocol.run_experiment(TOY, TOY.QUICK, progress=False, workers=1)
    assert [(r.n, r.seed) for r in result.rows] == TOY.tasks(TOY.QUICK)
    assert all(
        isinstance(r, ToyRow) and r.value == r.n + r.seed + 0.5 and r.pid == os.getpid()
        for r in result.rows
    )
    assert [c.holds for c in result.claims] == [True, False, None]
    assert result.config is TOY.QUICK and result.workers == 1 and result.seconds >= 0
    assert {
        "cpus",
        "platform",
        "torch",
        "threads",
        "load_average_start",
        "load_average_end",
    } <= set(result.machine)


def test_the_runner_spreads_tasks_over_processes_with_results_in_task_order():
    config = dataclasses.replace(TOY.QUICK, sizes=(3, 1, 2))
    serial = protocol.run_experiment(TOY, config, progress=False, workers=1)
    pooled = protocol.run_experiment(TOY, config, progress=False, workers=2)
    assert [dataclasses.replace(r, pid=0) for r in pooled.rows] == [
        dataclasses.replace(r, pid=0) for r in serial.rows
    ]
    assert os.getpid() not in {r.pid for r in pooled.rows}


class Batched(Toy):
    """A task that measures several points at once (a batched grid) returns a tuple of rows."""

    def run_one(self, config, task):
        n, seed = task
        return tuple(
            ToyRow(n, seed, n * scale + seed + config.offset, os.getpid())
            for scale in config.scales
        )


@pytest.mark.parametrize("workers", [1, 2])
def test_the_runner_flattens_a_task_s_tuple_of_rows_in_task_order(workers):
    config = dataclasses.replace(TOY.QUICK, sizes=(3, 1), scales=(1.0, 10.0))
    result = protocol.run_experiment(Batched(), config, progress=False, workers=workers)
    assert all(isinstance(r, ToyRow) for r in result.rows)
    assert [(r.n, r.seed, r.value) for r in result.rows] == [
        (n, s, n * scale + s + 0.5) for n, s in Batched().tasks(config) for scale in (1.0, 10.0)
    ]
    assert result.claims[0].evidence == "8 rows"  # the claims see the flattened rows


@pytest.mark.slow
def test_isolated_tasks_each_get_a_fresh_process():
    """Even with one worker: each task in a spawned process of its own (its own peak memory)."""
    config = dataclasses.replace(TOY.QUICK, sizes=(1,), fresh=True)
    result = protocol.run_experiment(TOY, config, progress=False, workers=1)
    pids = [r.pid for r in result.rows]
    assert len(set(pids)) == len(pids) == 2 and os.getpid() not in pids


def test_the_runner_validates_before_listing_tasks():
    class Listing(Toy):
        def tasks(self, config):
            raise AssertionError("listed")

    bad = dataclasses.replace(TOY.QUICK)
    object.__setattr__(bad, "seeds", 0)  # a config mutated past its checks is still refused
    with pytest.raises(ValueError, match="seeds must be an integer >= 1; got 0"):
        protocol.run_experiment(Listing(), bad, progress=False, workers=1)


def test_the_writer_writes_every_file_and_the_common_summary(tmp_path):
    result = protocol.run_experiment(TOY, TOY.QUICK, progress=False, workers=1)
    paths = protocol.write(result, tmp_path / "out", "dpnc reproduce toy --test")
    assert [p.name for p in paths] == [
        "rows.csv",
        "sizes.csv",
        "result.json",
        "fig.txt",
        "summary.md",
    ]
    with (tmp_path / "out" / "rows.csv").open() as f:
        records = list(csv.DictReader(f))
    assert list(records[0]) == ["n", "seed", "value", "pid"]  # trace is kept out of the CSV ...
    assert [(int(r["n"]), float(r["value"])) for r in records] == [
        (r.n, r.value) for r in result.rows
    ]
    data = json.loads((tmp_path / "out" / "result.json").read_text())
    assert (
        data["rows"][0]["trace"] == [1.0, 0.0] and data["command"] == "dpnc reproduce toy --test"
    )  # ... not JSON
    assert data["claims"][1] == {
        "statement": "the value is negative",
        "holds": False,
        "evidence": "min 1.5",
        "status": "",
        "facts": {"min": 1.5},
    }
    assert data["claims"][0]["facts"] == {}
    assert protocol.read(TOY, tmp_path / "out" / "result.json") == result
    assert not (tmp_path / "out" / "empty.csv").exists()
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert summary == protocol.summary(result, "dpnc reproduce toy --test")
    lines = summary.splitlines()
    assert lines[0] == "# A toy experiment" and lines[2] == "Command: `dpnc reproduce toy --test`  "
    assert lines[3].startswith("Run time: ") and "6 runs, 1 at a time" in lines[3]
    assert lines[4].startswith("Hardware: ") and "Setting: offset 0.5." in lines
    claims = (
        summary.split("## The paper's claims\n")[1]
        .split("Declared before the run")[0]
        .strip()
        .splitlines()
    )
    assert claims == [
        "| claim | holds here | our numbers |",
        "|---|---|---|",
        "| the value grows with n | yes | 6 rows |",
        "| the value is negative | **no** | min 1.5 |",
        "| the value is lucky | no signal | no test for luck |",
    ]
    assert (
        summary.index("Setting:")
        < summary.index("## The paper's claims")
        < summary.index("## Values")
    )


def test_read_refuses_another_experiments_result(tmp_path):
    result = protocol.run_experiment(TOY, TOY.QUICK, progress=False, workers=1)
    protocol.write(result, tmp_path, "test")

    class Other(Toy):
        name = "other"

    with pytest.raises(ValueError, match="holds a 'toy' result, not 'other'"):
        protocol.read(Other(), tmp_path / "result.json")


def test_from_record_turns_lists_back_into_tuples():
    config = protocol.from_record(
        ToyConfig, {**dataclasses.asdict(TOY.QUICK), "sizes": [4, 5], "scales": [2.0]}
    )
    assert config.sizes == (4, 5) and config.scales == (2.0,) and config.label is None


# --- the generated command ------------------------------------------------------------------------


@pytest.fixture
def app():
    root = cli._Typer(add_completion=False)
    group = cli._Typer()
    root.add_typer(group, name="reproduce")
    cli.add_reproduction(group, TOY)
    return root


def test_the_command_applies_overrides_to_quick_or_full(app, tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "reproduce",
            "toy",
            "--data-dir",
            str(tmp_path),
            "--out",
            str(out),
            "--workers",
            "1",
            "--sizes",
            "4, 5",
            "--scales",
            "2",
            "--seeds",
            "1",
            "--offset",
            "0",
            "--label",
            "x",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads((out / "result.json").read_text())
    assert data["config"] == {
        **dataclasses.asdict(TOY.QUICK),
        "data_dir": str(tmp_path),
        "sizes": [4, 5],
        "scales": [2.0],
        "seeds": 1,
        "offset": 0.0,
        "label": "x",
    }
    assert [r["value"] for r in data["rows"]] == [8.0, 10.0] and data["workers"] == 1
    assert (
        out / "summary.md"
    ).read_text() in result.output and f"wrote {out / 'rows.csv'}" in result.output
    full = runner.invoke(
        app,
        [
            "reproduce",
            "toy",
            "--full",
            "--data-dir",
            str(tmp_path),
            "--out",
            str(out),
            "--workers",
            "1",
            "--scales",
            "1",
        ],
    )
    assert full.exit_code == 0, full.output
    data = json.loads((out / "result.json").read_text())
    assert (
        data["config"]["sizes"] == [1, 2, 3, 4]
        and data["config"]["seeds"] == 3
        and len(data["rows"]) == 12
    )


def test_the_command_parses_bools_and_empty_tuples(app, tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(
        protocol, "run_experiment", lambda e, config, **kw: seen.append(config) or 1 / 0
    )
    runner.invoke(app, ["reproduce", "toy", "--data-dir", str(tmp_path), "--fresh"])
    runner.invoke(app, ["reproduce", "toy", "--data-dir", str(tmp_path), "--no-fresh"])
    assert [c.fresh for c in seen] == [True, False]
    empty = runner.invoke(app, ["reproduce", "toy", "--data-dir", str(tmp_path), "--sizes", ""])
    assert empty.exit_code == 2 and "sizes must be non-empty; got ()" in empty.output


@pytest.mark.parametrize(
    "args, option, message",
    [
        (["--sizes", "0"], "--sizes", "sizes must be an integer >= 1; got 0"),
        (["--sizes", "1,x"], "--sizes", "sizes must be comma-separated int values; got '1,x'"),
        (["--sizes", "1.5"], "--sizes", "comma-separated int values"),
        (["--scales", "nan"], "--scales", "scales must be a finite number > 0; got nan"),
        (["--seeds", "0"], "--seeds", "seeds must be an integer >= 1; got 0"),
        (["--seeds", "x"], "--seeds", "valid integer"),
        (["--workers", "0"], "--workers", "greater than or equal to 1"),
    ],
    ids=repr,
)
def test_bad_input_is_a_usage_error_before_any_work(
    app, tmp_path, monkeypatch, args, option, message
):
    monkeypatch.setattr(protocol, "run_experiment", lambda *a, **k: pytest.fail("the run started"))
    result = runner.invoke(
        app,
        ["reproduce", "toy", "--data-dir", str(tmp_path), "--out", str(tmp_path / "out"), *args],
    )
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert option in result.output and message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_required_and_folder_fields(app, tmp_path):
    missing = runner.invoke(app, ["reproduce", "toy"])
    assert missing.exit_code == 2 and "Missing option '--data-dir'" in missing.output
    absent = runner.invoke(app, ["reproduce", "toy", "--data-dir", str(tmp_path / "nope")])
    assert (
        absent.exit_code == 2
        and "--data-dir" in absent.output
        and "does not exist" in absent.output
    )


def test_help_lists_every_field_with_its_help_and_values(app):
    result = runner.invoke(app, ["reproduce", "toy", "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for option in (
        "--full",
        "--quick",
        "--out",
        "--workers",
        "--data-dir",
        "--sizes",
        "--scales",
        "--seeds",
        "--offset",
        "--label",
        "--fresh",
        "--no-fresh",
    ):
        assert option in text
    assert (
        "Sizes n. (quick: 1,2,3; full: 1,2,3,4)" in text
        and "Seeds per size. (quick: 2; full: 3)" in text
    )
    assert "Scales. (default: 1)" in text and "A toy: value = n · scale + seed + offset." in text
    assert "runs/toy" in text and TOY.sizes in text


def test_a_config_field_the_command_cannot_host_is_refused():
    @dataclass(frozen=True)
    class Clash(ToyConfig):
        out: str = "x"

    @dataclass(frozen=True)
    class Unhostable(ToyConfig):
        weights: dict = field(default_factory=dict)

    for config, error in (
        (Clash, "may not be named"),
        (Unhostable, "no command-line option for type"),
    ):
        toy = type("T", (Toy,), {"Config": config, "QUICK": config(), "FULL": config()})()
        with pytest.raises((ValueError, TypeError), match=error):
            cli.add_reproduction(cli._Typer(), toy)


def test_claim_is_a_plain_record():
    claim = Claim("s", None, "e")  # built like the tuples the older experiments return
    statement, holds, evidence, status, facts = claim
    assert (statement, holds, evidence, status, facts) == (
        "s",
        None,
        "e",
        "",
        {},
    ) and claim.to_json() == {
        "statement": "s",
        "holds": None,
        "evidence": "e",
        "status": "",
        "facts": {},
    }
    older = Claim(
        **{"statement": "s", "holds": True, "evidence": "e"}
    )  # an older result.json reads
    assert older.status == "" and older.facts == {}
    assert Claim("s", True, "e", facts={"runs": 15}).to_json()["facts"] == {"runs": 15}
    assert protocol.verdict(True) == "yes" and protocol.verdict(False) == "**no**"
    assert protocol.verdict(None) == "no signal"
    # a claim not judged for another reason than no signal says so
    assert protocol.verdict(None, "not testable by slope here") == "not testable by slope here"
    assert (
        protocol.verdict(False, "not testable by slope here") == "**no**"
    )  # a verdict is never hidden
    table = protocol.claims_table([Claim("s", None, "e", "underpowered for this design")])
    assert "| s | no signal: underpowered for this design | e |" in table  # the interval decides
    assert protocol.claims_table([]) == "No claim can be checked on these runs."


def test_reproduce_lists_the_generated_command():
    result = runner.invoke(cli.app, ["reproduce", "--help"])
    assert "dpzero-lm" in result.output and "dpzero-synthetic" in result.output


def test_an_older_result_loads_and_is_rejudged_from_its_rows(tmp_path):
    """A result.json written before the protocol (no experiment, claims, workers, machine; a row
    without a field added since with a default) loads, and :func:`protocol.rejudge` writes it back
    with the current claims and a note, re-running nothing."""
    rows = [
        {"n": n, "seed": s, "value": n + s + 0.5, "pid": 1} for n in (1, 2, 3) for s in range(2)
    ]  # no trace
    config = {k: v for k, v in dataclasses.asdict(TOY.QUICK).items() if k != "label"}  # no label
    (tmp_path / "result.json").write_text(
        json.dumps({"config": config, "rows": rows, "seconds": 60.0})
    )
    old = protocol.read(TOY, tmp_path / "result.json")
    assert old.claims == () and old.workers is None and old.machine == {}
    assert old.rows[0] == ToyRow(1, 0, 1.5, 1) and old.config == TOY.QUICK
    _, changes = protocol.rejudge(
        TOY, tmp_path, "the claims' first judging", "dpnc reproduce toy --old", date="2026-01-01"
    )
    assert [c["old"] for c in changes] == ["new claim"] * 3
    again = protocol.read(TOY, tmp_path / "result.json")
    assert again.rows == old.rows and [c.holds for c in again.claims] == [True, False, None]
    assert again.declared == tuple(TOY.declare(TOY.QUICK)) and again.rejudged[0]["declared_after"]
    summary = (tmp_path / "summary.md").read_text().splitlines()
    assert summary[2] == "Command: `dpnc reproduce toy --old`  " and summary[3].endswith(
        "6 runs.  "
    )
    assert summary[4].startswith("Hardware: not recorded")
    assert (
        "2026-01-01: the claims' first judging" in summary
        and "Declared (at re-judging, after the run)" in summary
    )
    with pytest.raises(KeyError):  # a field without a default is still required
        protocol.from_record(ToyRow, {"n": 1, "seed": 0, "value": 1.0})
