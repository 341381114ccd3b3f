"""Choose `dpnc finetune`'s default recipe for a user's CSV on public data held apart from its check.

``--select``: each candidate of :data:`CANDIDATES` on two held-apart tasks (SST-5 and TREC, 1,500 training rows each,
written as a user's CSV would be), ε = 4, two seeds; the default is the candidate of the highest mean accuracy.
``--check``: the chosen recipe, as ``dpnc finetune`` runs it with no recipe options, on a sentiment CSV of 1,500
SST-2 rows, five seeds; its gain over zero-shot against the declared +5 points (``declaration.json``, committed
before the check ran). Every run is ``dpnc finetune`` as a user types it; its wall time is the user's.
"""

import argparse
import csv
import json
import random
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "default-recipe"
ROWS, EPSILON = 1500, 4.0
CHECK_SEEDS = (1, 2, 3, 4, 5)
CANDIDATES = {
    "dpzero-head": ["--method", "dpzero", "--train", "head"],
    "dp-adamw-head-c10": ["--method", "dp-adamw", "--train", "head"],
    "dp-adamw-head-c0.1": ["--method", "dp-adamw", "--train", "head", "--clip", "0.1"],
    "dp-adamw-head-c0.1-b256": [
        *["--method", "dp-adamw", "--train", "head", "--clip", "0.1"],
        *["--batch-size", "256", "--steps", "300"],
    ],
}
# task → (k-shot folder, delimiter, header, label column first, label names)
TASKS = {
    "sst-5": ("sst-5/k-shot-1k-test/512-13", ",", False, True, "terrible,bad,okay,good,great"),
    "trec": (
        "trec/k-shot-1k-test/512-13",
        ",",
        False,
        True,
        "description,entity,abbreviation,human,location,number",
    ),
    "SST-2": ("SST-2/k-shot-1k-test/512-42", "\t", True, False, "negative,positive"),
}


def read(path: Path, task: str) -> list[tuple[str, str]]:
    _, delimiter, header, label_first, names = TASKS[task]
    rows = list(csv.reader(path.open(newline=""), delimiter=delimiter))[1 if header else 0 :]
    words = names.split(",")
    return [(r[1], words[int(r[0])]) if label_first else (r[0], words[int(r[1])]) for r in rows]


def user_files(data: Path, task: str, folder: Path) -> tuple[Path, Path]:
    """A user's training CSV (1,500 rows of the task's k-shot train + dev, shuffled) and its test CSV."""
    base, ext = data / TASKS[task][0], ".tsv" if TASKS[task][1] == "\t" else ".csv"
    train = read(base / f"train{ext}", task) + read(base / f"dev{ext}", task)
    random.Random(0).shuffle(train)
    paths = folder / f"{task}.csv", folder / f"{task}_test.csv"
    for path, rows in zip(paths, (train[:ROWS], read(base / f"test{ext}", task))):
        with path.open("w", newline="") as f:
            csv.writer(f).writerows([("text", "label"), *rows])
    return paths


def finetune(train: Path, test: Path, task: str, options: list[str], seed: int, out: Path) -> dict:
    command = [
        *[sys.executable, "-m", "dpnc.cli", "finetune", "--train-file", str(train)],
        *["--test-file", str(test), "--test-file-public", "--labels", TASKS[task][4]],
        *["--text-column", "text", "--label-column", "label"],
        *["--n", str(ROWS), "--epsilon", str(EPSILON), "--seed", str(seed), "--out", str(out)],
        *["--no-progress", *options],
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    s = json.loads((out / "summary.json").read_text())
    return {
        "accuracy": s["test_accuracy"],
        "zero_shot": s["zero_shot_accuracy"],
        "correct": s["test_correct"],
        "zero_shot_correct": s["zero_shot_correct"],
        "epsilon": s["epsilon_pld"],
        "steps": s["steps"],
        "seconds": seconds,
    }


def select(data: Path, work: Path, task: str, seeds: list[int]) -> None:
    """Every candidate on one held-apart task, appending to selection.jsonl."""
    train, test = user_files(data, task, work)
    with (OUT / "selection.jsonl").open("a") as f:
        for name, options in CANDIDATES.items():
            for seed in seeds:
                row = finetune(train, test, task, options, seed, work / f"{task}-{name}-{seed}")
                f.write(json.dumps({"task": task, "candidate": name, "seed": seed, **row}) + "\n")
                f.flush()
                print(task, name, seed, f"{row['accuracy']:.3f}", f"{row['seconds']:.0f} s")


def gain(rows: list[dict]):
    """Trained − zero-shot accuracy (points) over the rows' seeds, paired by test question."""
    from dpnc_reproduce.claims import from_bits, paired_accuracy_difference

    trained = [from_bits(r["correct"]) for r in rows]
    return paired_accuracy_difference(trained, [from_bits(r["zero_shot_correct"]) for r in rows])


def predicted_se(
    rows: list[dict], seeds: int = len(CHECK_SEEDS), m: int = 872
) -> tuple[float, float]:
    """The check's standard error and degrees of freedom, predicted by the two-way model that will judge it:
    its variance components estimated on a selection task's seeds × questions table, taken to the check's k
    seeds and m questions (Var = σ²_S/k + σ²_E/m + σ²_e/(km), Welch–Satterthwaite df)."""
    from dpnc_reproduce.claims import from_bits
    from dpnc_reproduce.variance import two_way_components

    table = [
        [
            100.0 * (a - b)
            for a, b in zip(from_bits(r["correct"]), from_bits(r["zero_shot_correct"]))
        ]
        for r in rows
    ]
    s, e, r = two_way_components(table)
    k = seeds
    terms = [(r + m * s, k - 1, 1.0), (r + k * e, m - 1, 1.0), (r, (k - 1) * (m - 1), -1.0)]
    total = sum(sign * ms for ms, _, sign in terms)
    return (total / (k * m)) ** 0.5, total**2 / sum(ms * ms / df for ms, df, _ in terms)


def declare() -> None:
    """The chosen recipe (highest mean selection accuracy) and the check's claim with its power, from the
    selection rows alone: written before the check runs."""
    from dpnc_reproduce.claims import Interval
    from dpnc_reproduce.variance import minimum_detectable_effect

    rows = [json.loads(line) for line in (OUT / "selection.jsonl").read_text().splitlines()]
    tasks = ("sst-5", "trec")

    def accuracy(name: str, task: str) -> float:
        values = [r["accuracy"] for r in rows if r["candidate"] == name and r["task"] == task]
        return sum(values) / len(values)

    # each task counts once, whatever its number of seeds
    mean = {name: sum(accuracy(name, t) for t in tasks) / len(tasks) for name in CANDIDATES}
    chosen = max(mean, key=mean.get)
    ours = [r for r in rows if r["candidate"] == chosen]
    gains = {task: gain([r for r in ours if r["task"] == task]) for task in tasks}
    se, df = predicted_se([r for r in ours if r["task"] == "sst-5"])
    expected = sum(g.estimate for g in gains.values()) / len(gains)
    mde = minimum_detectable_effect(
        Interval(expected, -1, 1, len(CHECK_SEEDS), df=df, se=se), one_sided=True
    )
    declaration = {
        "chosen": chosen,
        "options": CANDIDATES[chosen],
        "selection_mean_accuracy": mean,
        "selection_gain": {t: str(g) for t, g in gains.items()},
        "claim": "the default recipe's test accuracy exceeds zero-shot's by more than 5 points",
        "threshold": 5.0,
        "expected_gain": expected,
        "predicted_se": se,
        "predicted_df": df,
        "minimum_detectable_effect": mde,
        "powered": expected - 5.0 >= mde,
        "design": f"SST-2, {ROWS} training rows, 872 test questions, seeds {list(CHECK_SEEDS)}, ε = {EPSILON}",
        "statistic": "paired_accuracy_difference: two-way ANOVA over seeds × questions, t at Satterthwaite df",
    }
    (OUT / "declaration.json").write_text(json.dumps(declaration, indent=1) + "\n")
    print(json.dumps(declaration, indent=1))


def check(data: Path, work: Path) -> None:
    """The chosen recipe as `dpnc finetune`'s default (no method or recipe options) on the SST-2 CSV."""
    train, test = user_files(data, "SST-2", work)
    with (OUT / "check.jsonl").open("a") as f:
        for seed in CHECK_SEEDS:
            row = finetune(train, test, "SST-2", [], seed, work / f"check-{seed}")
            f.write(json.dumps({"seed": seed, **row}) + "\n")
            print(
                seed,
                f"{row['zero_shot']:.3f} → {row['accuracy']:.3f}",
                f"{row['seconds']:.0f} s",
                flush=True,
            )


def judge() -> None:
    from dpnc_reproduce.claims import exceeds

    declared = json.loads((OUT / "declaration.json").read_text())
    rows = [json.loads(line) for line in (OUT / "check.jsonl").read_text().splitlines()]
    interval = gain(rows)
    holds = exceeds(interval, declared["threshold"])
    verdict = {True: "holds", False: "fails"}.get(
        holds, "underpowered for this design" if not declared["powered"] else "no signal"
    )
    result = {
        "claim": declared["claim"],
        "gain_points": str(interval),
        "verdict": verdict,
        "zero_shot": rows[0]["zero_shot"],
        "accuracy": [r["accuracy"] for r in rows],
        "epsilon": [r["epsilon"] for r in rows],
        "seconds": [r["seconds"] for r in rows],
    }
    (OUT / "check.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, help="the data folder (for --select, --check)")
    parser.add_argument(
        "--work", type=Path, default=Path("runs/default-recipe"), help="scratch folder"
    )
    parser.add_argument(
        "--select", choices=("sst-5", "trec"), help="run the candidates on this task"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--declare", action="store_true")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--judge", action="store_true")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.select:
        select(args.data_dir, args.work, args.select, args.seeds)
    if args.declare:
        declare()
    if args.check:
        check(args.data_dir, args.work)
    if args.judge:
        judge()


if __name__ == "__main__":
    main()
