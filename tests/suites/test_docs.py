"""Every code block of README.md and of the documentation pages (docs/**/*.md) works as written.

* ```python blocks run: each page top to bottom in one namespace (a page is read as one session), in
  a temporary working directory with one torch thread. A block may be skipped only with a stated
  reason, written on the line just above its fence as ``<!-- doc-test: skip: REASON -->`` (e.g. it
  needs a GPU or a file of the user's); prefer making it runnable with tiny settings.
* ```bash blocks: ``dpnc …`` lines are parsed by the real CLI (click's ``make_context``: options,
  arguments, types, ranges and required options are checked; nothing runs); ``make X`` lines name a
  Makefile target; any other line's file arguments exist in the repository.
* ```text blocks (sample output) are not checked. Any other fence fails, so a typo cannot skip a
  block.

Not collected: ``docs/results/``, the committed records that the reproductions wrote (their
summaries and notes stay as the runs left them; the one python fragment there, in
``lm-zero-shot/README.md``, records a measurement that needs the SmolLM2 model and SST-2's test
split)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LANGUAGES = {"python", "bash", "text"}
SKIP = re.compile(r"^<!-- doc-test: skip: (.+?) -->$")


def _pages() -> list[Path]:
    docs = ROOT / "docs"
    return [README] + sorted(p for p in docs.rglob("*.md") if docs / "results" not in p.parents)


PAGES = _pages()


@dataclass(frozen=True)
class Block:
    page: Path
    language: str
    flags: tuple[str, ...]
    code: str
    line: int  # page line of the first line of code (1-based)
    section: str  # the ## heading above it
    skip: str | None  # the stated reason, from <!-- doc-test: skip: REASON --> just above the fence

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a markdown file."""
    lines = path.read_text().splitlines()
    blocks, section, i = [], "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:]
        fence = re.match(r"^```(.*)$", line)
        if fence:
            info = fence.group(1).split()
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            skip = SKIP.match(lines[i - 1]) if i else None
            blocks.append(
                Block(
                    path,
                    info[0] if info else "",
                    tuple(info[1:]),
                    "\n".join(lines[i + 1 : end]) + "\n",
                    i + 2,
                    section,
                    skip.group(1).strip() if skip else None,
                )
            )
            i = end
        i += 1
    return blocks


BLOCKS = [b for page in PAGES for b in _blocks(page)]
PYTHON_PAGES = [p for p in PAGES if any(b.language == "python" for b in _blocks(p))]
BASH = [b for b in BLOCKS if b.language == "bash"]


def _compile(block: Block):
    # Leading newlines make tracebacks point at the page's lines.
    return compile("\n" * (block.line - 1) + block.code, str(block.page), "exec")


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


# --- the pages' shape --------------------------------------------------------------------------


def test_every_fence_has_a_checked_language():
    assert BLOCKS and len(PAGES) >= 10, PAGES
    bad = [(b.where, b.language) for b in BLOCKS if b.language not in LANGUAGES]
    assert not bad, (
        f"fences with an unchecked language (where, language): {bad}; use one of {sorted(LANGUAGES)}"
    )
    assert not any(b.flags for b in BLOCKS if b.language == "python"), [
        b.where for b in BLOCKS if b.flags
    ]


def test_skips_state_a_reason_and_only_python_blocks_skip():
    for b in BLOCKS:
        if b.skip is not None:
            assert b.language == "python" and len(b.skip.split()) >= 3, (b.where, b.skip)
    for (
        page
    ) in PAGES:  # a skip marker must sit right above a fence, or it would silently do nothing
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            if "doc-test:" in line:
                assert (
                    SKIP.match(line) and i + 1 < len(lines) and lines[i + 1].startswith("```python")
                ), (
                    f"{_id(page)}:{i + 1}: write <!-- doc-test: skip: REASON --> on the line above a ```python fence"
                )


def test_the_readme_opens_with_the_quick_starts():
    blocks = _blocks(README)
    assert any(
        b.language == "bash" and "make demo" in b.code and "make test" in b.code for b in blocks
    )
    first = next(b for b in blocks if b.language == "python")
    assert "make_private" in first.section and "dpnc.make_private(" in first.code
    assert len(README.read_text().splitlines()) <= 250, (
        "README.md is the front door: at most 250 lines"
    )
    assert "../shared" not in README.read_text()


def test_links_between_pages_resolve():
    """Relative links of README.md and docs/ point at files that exist (mkdocs --strict checks the
    site's too)."""
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not target.startswith(("http://", "https://", "mailto:")):
                assert (page.parent / target).exists(), f"{_id(page)}: no such file {target}"


# --- python ------------------------------------------------------------------------------------


# What a page's session must have produced, beyond running (the tutorial states its results).
def _tutorial(ns: dict) -> None:
    assert ns["report"].private and ns["o2nc"].report(1e-6).private
    assert ns["certificate"].bound >= 0


CHECKS = {"docs/tutorial-own-objective.md": _tutorial}


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=[_id(p) for p in PYTHON_PAGES])
def test_python_blocks_run(page, tmp_path, monkeypatch, one_thread):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    for block in _blocks(page):
        if block.language == "python" and block.skip is None:
            exec(_compile(block), namespace)
    CHECKS.get(_id(page), lambda ns: None)(namespace)


# --- bash --------------------------------------------------------------------------------------


def _commands(block: Block) -> list[tuple[int, list[str]]]:
    """(page line, argv) per command line: continuations joined, comments dropped."""
    commands, pending, start = [], "", 0
    for offset, line in enumerate(block.code.splitlines()):
        if not pending:
            start = block.line + offset
        pending += line
        if pending.rstrip().endswith("\\"):
            pending = pending.rstrip()[:-1] + " "
            continue
        argv = shlex.split(pending, comments=True)
        if argv:
            commands.append((start, argv))
        pending = ""
    return commands


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {
        t
        for m in re.finditer(r"^([A-Za-z0-9_.\- ]+):(?!=)", text, re.M)
        for t in m.group(1).split()
    }


def _parse_cli(argv: list[str]):
    """Parse ``dpnc argv`` down to the leaf command without running it (its click ``make_context``:
    options, arguments, types, ranges, required options). Raises click's usage error on a bad
    line."""
    from dpnc.cli import app

    command = typer.main.get_command(
        app
    )  # typer's click (vendored in typer ≥ 0.20): groups resolve_command
    name, args = "dpnc", list(argv)
    while True:
        ctx = command.make_context(name, list(args))
        if not hasattr(command, "resolve_command"):
            return ctx
        protected = (
            ctx._protected_args if hasattr(ctx, "_protected_args") else ctx.protected_args
        )  # click < 8.2
        rest = [*protected, *ctx.args]
        assert rest, f"dpnc {' '.join(argv)}: no subcommand"
        name, command, args = command.resolve_command(ctx, rest)
        assert command is not None, f"dpnc {' '.join(argv)}: unknown command"


BASH_COMMANDS = [(b, line, argv) for b in BASH for line, argv in _commands(b)]


@pytest.mark.parametrize(
    "block,line,argv",
    BASH_COMMANDS,
    ids=[f"{_id(b.page)}:{line}-{' '.join(argv[:3])}" for b, line, argv in BASH_COMMANDS],
)
def test_bash_line_matches_the_code(block, line, argv, tmp_path, monkeypatch):
    where = f"{_id(block.page)}:{line}: {' '.join(argv)}"
    while "=" in argv[0] and not argv[0].startswith(
        "-"
    ):  # OMP_NUM_THREADS=1 torchrun ...: the environment
        argv = argv[1:]
    if (
        argv[0] == "torchrun"
    ):  # torchrun [its options] -m dpnc.cli <command>: the dpnc command must parse
        assert "-m" in argv and argv[argv.index("-m") + 1] == "dpnc.cli", (
            f"{where}: torchrun runs -m dpnc.cli"
        )
        argv = ["dpnc", *argv[argv.index("-m") + 2 :]]
    program = argv[0]
    if program in ("dpnc", ".venv/bin/dpnc"):
        args = argv[1:]
        if "..." in args:  # "dpnc finetune ... --resume": the options of the command above it
            earlier = [
                a for b2, l2, a in BASH_COMMANDS if b2 is block and l2 < line and a[0] == program
            ]
            assert earlier and earlier[-1][1] == args[0], (
                f"{where}: '...' needs the same command just above"
            )
            i = args.index("...")
            args = args[:i] + earlier[-1][2:] + args[i + 1 :]
        # Paths are relative to the repository root; the folder a --data-dir names is the user's
        # (the LM-BFF splits they generated), so make it, and options which must name an existing
        # folder parse without data.
        repo = tmp_path / "repo"
        repo.mkdir()
        for i, a in enumerate(args[:-1]):
            if a == "--data-dir":
                (repo / args[i + 1]).mkdir(parents=True, exist_ok=True)
        monkeypatch.chdir(repo)
        try:
            ctx = _parse_cli(args)
        except Exception as err:
            if not hasattr(err, "format_message"):  # not a usage error: a bug, not a docs problem
                raise
            pytest.fail(f"{where}\n  the CLI refuses it: {err.format_message()}")
        assert ctx.command.callback is not None, where
    elif program == "make":
        targets = [a for a in argv[1:] if not a.startswith("-") and "=" not in a]
        missing = set(targets) - _make_targets()
        assert targets and not missing, f"{where}: no Makefile target {sorted(missing)}"
    else:
        paths = [
            a
            for a in argv
            if ("/" in a or a.endswith((".py", ".toml", ".txt")))
            and not a.startswith((".venv/", "-", "http"))
        ]
        missing = [p for p in paths if not (ROOT / p).exists()]
        assert not missing, f"{where}: no such file in the repository: {missing}"


def test_bash_blocks_have_commands():
    assert BASH and all(_commands(b) for b in BASH)
    assert any(argv[0] == "dpnc" for _, _, argv in BASH_COMMANDS)
