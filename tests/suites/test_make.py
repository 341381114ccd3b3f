"""``make setup`` and ``make demo`` as a new user's machine runs them (``make -n``: printed, never
run).

torch comes from PyPI where PyPI's wheel is the CPU build, else from PyTorch's CPU index where the
machine reaches it (``CPU_INDEX_REACHED``; CI's machines reach PyPI's mirror alone), else PyPI
(``TORCH_INDEX`` overrides); ``make demo`` installs the base package only; ``make setup`` (test,
docs, lint) every extra."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def dry_run(tmp_path: Path, target: str, system: str = "Linux", machine: str = "x86_64", *args):
    """The commands ``make -n target`` prints on a machine whose ``uname`` says ``system`` and
    ``machine``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    uname = bin_dir / "uname"
    uname.write_text(f'#!/bin/sh\n[ "$1" = -m ] && echo {machine} || echo {system}\n')
    uname.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("TORCH_INDEX", None)
    venv = tmp_path / "venv"
    out = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={venv}", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in out.splitlines() if "pip" in line]


def torch_line(lines: list[str]) -> str:
    (line,) = [line for line in lines if "install torch==" in line]
    return line


@pytest.mark.parametrize(
    "system, machine, reached, index",
    [
        ("Linux", "x86_64", "yes", CPU_INDEX),  # PyPI's wheel is the CUDA build: several GB
        ("Linux", "x86_64", "", None),  # the CPU index out of reach (a mirror of PyPI alone)
        ("Linux", "aarch64", "yes", None),  # PyPI's wheels are CPU-only here
        ("Darwin", "arm64", "yes", None),
        ("MINGW64_NT-10.0", "x86_64", "yes", None),  # Windows (Git Bash)
    ],
)
def test_torch_comes_from_pypi_where_it_is_cpu_only_else_from_the_cpu_index(
    tmp_path, system, machine, reached, index
):
    line = torch_line(dry_run(tmp_path, "setup", system, machine, f"CPU_INDEX_REACHED={reached}"))
    assert (f"--index-url {index}" in line) if index else ("--index-url" not in line)


def test_the_torch_index_is_the_users_to_override(tmp_path):
    assert "--index-url" not in torch_line(
        dry_run(tmp_path, "setup", "Linux", "x86_64", "TORCH_INDEX=")
    )
    cuda = "https://download.pytorch.org/whl/cu126"
    line = torch_line(dry_run(tmp_path, "setup", "Darwin", "arm64", f"TORCH_INDEX={cuda}"))
    assert line.endswith(f"--index-url {cuda}")


def test_the_demo_installs_the_base_package_and_setup_every_extra(tmp_path):
    demo = dry_run(tmp_path, "demo")
    assert [line.split("install ", 1)[1] for line in demo[1:]] == ["-c constraints.txt -e ."]
    setup = dry_run(tmp_path, "setup")
    assert any('-e ".[lm,causal,tensorboard,test,docs]"' in line for line in setup)
    # where a full setup exists (a superset), the demo installs nothing more
    (tmp_path / "venv").mkdir()
    for stamp in (".base", ".installed"):
        (tmp_path / "venv" / stamp).touch()
    assert dry_run(tmp_path, "demo") == [] and dry_run(tmp_path, "test") == []
