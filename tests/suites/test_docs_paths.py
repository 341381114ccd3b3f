"""No absolute path of a machine in the published documentation: docs/ (pages, results, their
commands) and the README name files relative to the repository (../shared/data, docs/results/...),
an installed model by its package and the GPU machine's output folder as $OUT. Temporary folders
(/tmp/...), the scratch arguments a user types in an example, are the one exception."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# an absolute path under a machine's own folders, not part of a URL or of a relative path
# (…/x/work/…)
MACHINE = re.compile(
    r"(?<![\w.:/~$-])/(?:work|home|root|Users|mnt|opt|srv|scratch|private|var/folders)/\S*"
)
BINARY = {".png", ".jpg", ".jpeg", ".gif", ".pdf", ".gz", ".zip", ".pt", ".safetensors"}


def _published() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "docs", "README.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / f for f in out if Path(f).suffix not in BINARY and (ROOT / f).is_file()]


def test_no_absolute_machine_path_in_docs_or_readme():
    found = []
    for path in _published():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for i, line in enumerate(text.splitlines(), 1):
            found += [f"{path.relative_to(ROOT)}:{i}: {m}" for m in MACHINE.findall(line)]
    assert not found, "absolute machine paths:\n" + "\n".join(found[:40])


def test_the_pattern_finds_machine_paths_and_spares_the_rest():
    for bad in (
        "--data-dir /work/shared/data",
        "'/home/u/x'",
        "`/root/out`",
        "/opt/torch/.venv/lib",
    ):
        assert MACHINE.search(bad), bad
    for ok in (
        "--runs-dir /tmp/dim/runs",
        "https://x.org/home/page",
        "../shared/data",
        "docs/results/a/b",
        "$OUT/dimension",
    ):
        assert not MACHINE.search(ok), ok
