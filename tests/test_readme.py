"""Every code block of README.md works as written.

* ```python blocks run, each in a fresh namespace and a temporary working directory (one torch thread); every one
  of them (a block too slow to run is a block to shrink).
* ```bash blocks: ``dpnc …`` lines are parsed by the real CLI (click's ``make_context``: options, arguments,
  types, ranges and required options are checked; nothing runs); ``make X`` lines name a Makefile target; any
  other line's file arguments exist in the repository.
* ```text blocks (sample output) are not checked. Any other fence fails, so a typo cannot skip a block.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LANGUAGES = {"python", "bash", "text"}


@dataclass(frozen=True)
class Block:
    language: str
    flags: tuple[str, ...]
    code: str
    line: int           # README line of the first line of code (1-based)
    section: str        # the ## heading above it

    @property
    def id(self) -> str:
        return f"L{self.line}-{self.language}-{re.sub(r'[^A-Za-z0-9]+', '-', self.section).strip('-')[:40]}"


def _blocks(path: Path = README) -> list[Block]:
    """The fenced code blocks of a markdown file (README.md by default; the tutorials reuse it)."""
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
            blocks.append(Block(info[0] if info else "", tuple(info[1:]), "\n".join(lines[i + 1:end]) + "\n",
                                i + 2, section))
            i = end
        i += 1
    return blocks


BLOCKS = _blocks()
PYTHON = [b for b in BLOCKS if b.language == "python"]
BASH = [b for b in BLOCKS if b.language == "bash"]


def _compile(block: Block, path: Path = README):
    # Leading newlines make tracebacks point at README lines.
    return compile("\n" * (block.line - 1) + block.code, str(path), "exec")


# --- the README's shape ------------------------------------------------------------------------


def test_every_fence_has_a_checked_language():
    assert BLOCKS, "README.md has no code blocks"
    bad = [(b.line - 1, b.language) for b in BLOCKS if b.language not in LANGUAGES]
    assert not bad, f"fences with an unchecked language (line, language): {bad}; use one of {sorted(LANGUAGES)}"
    assert not any(b.flags for b in PYTHON), [(b.line, b.flags) for b in PYTHON if b.flags]   # every block runs


def test_the_first_python_example_is_the_make_private_quick_start():
    assert BLOCKS[0].language == "bash" and "make demo" in BLOCKS[0].code   # the README opens with make demo/test
    first = PYTHON[0]
    assert "make_private" in first.section and "dpnc.make_private(" in first.code


# --- python ------------------------------------------------------------------------------------


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_python_block_runs(block, tmp_path, monkeypatch, one_thread):
    monkeypatch.chdir(tmp_path)
    exec(_compile(block), {"__name__": "__readme__"})


# --- bash --------------------------------------------------------------------------------------


def _commands(block: Block) -> list[tuple[int, list[str]]]:
    """(README line, argv) per command line: continuations joined, comments dropped."""
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
    return {t for m in re.finditer(r"^([A-Za-z0-9_.\- ]+):(?!=)", text, re.M) for t in m.group(1).split()}


def _parse_cli(argv: list[str]):
    """Parse ``dpnc argv`` down to the leaf command without running it (its click ``make_context``: options,
    arguments, types, ranges, required options). Raises click's usage error on a bad line."""
    from dpnc.cli import app

    command = typer.main.get_command(app)   # typer's click (vendored in typer ≥ 0.20): groups resolve_command
    name, args = "dpnc", list(argv)
    while True:
        ctx = command.make_context(name, list(args))
        if not hasattr(command, "resolve_command"):
            return ctx
        protected = ctx._protected_args if hasattr(ctx, "_protected_args") else ctx.protected_args  # click < 8.2
        rest = [*protected, *ctx.args]
        assert rest, f"dpnc {' '.join(argv)}: no subcommand"
        name, command, args = command.resolve_command(ctx, rest)
        assert command is not None, f"dpnc {' '.join(argv)}: unknown command"


BASH_COMMANDS = [(b, line, argv) for b in BASH for line, argv in _commands(b)]


@pytest.mark.parametrize("block,line,argv", BASH_COMMANDS,
                         ids=[f"L{line}-{' '.join(argv[:3])}" for _, line, argv in BASH_COMMANDS])
def test_bash_line_matches_the_code(block, line, argv, tmp_path, monkeypatch):
    where = f"README.md:{line}: {' '.join(argv)}"
    while "=" in argv[0] and not argv[0].startswith("-"):   # OMP_NUM_THREADS=1 torchrun ...: the environment
        argv = argv[1:]
    if argv[0] == "torchrun":   # torchrun [its options] -m dpnc.cli <command>: the dpnc command must parse
        assert "-m" in argv and argv[argv.index("-m") + 1] == "dpnc.cli", f"{where}: torchrun runs -m dpnc.cli"
        argv = ["dpnc", *argv[argv.index("-m") + 2:]]
    program = argv[0]
    if program in ("dpnc", ".venv/bin/dpnc"):
        args = argv[1:]
        if "..." in args:  # "dpnc finetune ... --resume": the options of the command above it
            earlier = [a for b2, l2, a in BASH_COMMANDS if b2 is block and l2 < line and a[0] == program]
            assert earlier and earlier[-1][1] == args[0], f"{where}: '...' needs the same command just above"
            i = args.index("...")
            args = args[:i] + earlier[-1][2:] + args[i + 1:]
        # Paths are relative to the repository root; give them a sibling ../shared/data like the real checkout's,
        # so that options which must name an existing folder parse without the data being here.
        repo = tmp_path / "repo"
        repo.mkdir()
        (tmp_path / "shared" / "data").mkdir(parents=True)
        monkeypatch.chdir(repo)
        try:
            ctx = _parse_cli(args)
        except Exception as err:
            if not hasattr(err, "format_message"):   # not a usage error: a bug, not a README problem
                raise
            pytest.fail(f"{where}\n  the CLI refuses it: {err.format_message()}")
        assert ctx.command.callback is not None, where
    elif program == "make":
        targets = [a for a in argv[1:] if not a.startswith("-") and "=" not in a]
        missing = set(targets) - _make_targets()
        assert targets and not missing, f"{where}: no Makefile target {sorted(missing)}"
    else:
        paths = [a for a in argv if ("/" in a or a.endswith((".py", ".toml", ".txt"))) and not a.startswith(
            (".venv/", "-", "http"))]
        missing = [p for p in paths if not (ROOT / p).exists()]
        assert not missing, f"{where}: no such file in the repository: {missing}"


def test_bash_blocks_have_commands():
    assert BASH and all(_commands(b) for b in BASH)
    assert any(argv[0] == "dpnc" for _, _, argv in BASH_COMMANDS)
