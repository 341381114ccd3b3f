"""``dpnc predict``: label texts with a fine-tuned model."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import typer

from dpnc.cli.base import app


@app.command()
def predict(
    model: Path = typer.Option(
        ...,
        "--model",
        exists=True,
        help="A fine-tuned model: a dpnc finetune run folder (--out) or its model/ folder.",
    ),
    file: Path = typer.Option(
        ...,
        "--file",
        exists=True,
        dir_okay=False,
        help="The texts: CSV or TSV with a header row, or JSON lines (.jsonl: one object "
        "per line).",
    ),
    text_column: str = typer.Option(
        None,
        "--text-column",
        help="Column (or JSON key) of the text (default: the run's own, from its summary.json; "
        'else "text").',
    ),
    text_pair_column: str = typer.Option(
        None,
        "--text-pair-column",
        help="Column of the second text, for a sentence-pair model (default: the run's own).",
    ),
    out: Path = typer.Option(
        None,
        "--out",
        dir_okay=False,
        help="Where to write the predictions: .csv (default: printed as CSV) or .jsonl. "
        "Every input column is kept, then label (predicted_label where the input has a "
        "label column) and each class's probability.",
    ),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Texts per forward pass."),
    base_model: Path = typer.Option(
        None,
        "--base-model",
        help="The base model's folder (or .gguf file), for a head-only or LoRA model whose base is "
        "not an installed model package (its dpnc_head.json names the base by package name or "
        "folder name only).",
    ),
) -> None:
    """Label texts with a fine-tuned model: one row per text with its predicted label and every
    class's probability.

    CSV out: the text column(s), label, then p_<label> for each class (in the model's class order).
    JSON lines out: {"text": ..., "label": ..., "probabilities": {label: p, ...}}. The model is read
    offline by dpnc.lm.load_classifier (a head-only run loads the base model it refers to: an
    installed model package by its name, or the folder --base-model gives; a LoRA run its peft
    adapters on that base). The text column(s) default to those the run trained on (its
    summary.json, beside model/), the classes are the model's own. Example: dpnc predict --model
    runs/tickets --file new_tickets.csv --out predictions.csv"""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from dpnc.lm.classifiers import load_classifier
    from dpnc.lm.files import check_width
    from dpnc.lm.rows import read_field, read_rows

    fmt = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}.get(
        file.suffix.lower()
    )
    if fmt is None:
        raise ValueError(f"file must end in .csv, .tsv, .jsonl or .json; got {file.name!r}")
    if out is not None and out.suffix.lower() not in (".csv", ".jsonl"):
        raise ValueError(f"out must end in .csv or .jsonl; got {out.name!r}")
    if text_column is None:
        text_column, run_pair = _run_columns(model)
        text_pair_column = text_pair_column if text_pair_column is not None else run_pair
    rows, columns, width = read_rows(file, fmt, None, True)
    texts = []
    for line, row in rows:
        if (
            fmt == "csv" and width is not None and len(row) > width
        ):  # a comma outside quotes: its fields shifted
            check_width(row, width, None, fmt, file, line)
        text = read_field(row, columns, text_column, file, line, "text column")
        texts.append(
            text
            if text_pair_column is None
            else (text, read_field(row, columns, text_pair_column, file, line, "text pair column"))
        )
    classifier = load_classifier(model, base_model=base_model)
    names = list(classifier.task.label_names)
    probs = classifier.predict_proba(texts, batch_size=batch_size)
    labels = [names[i] for i in probs.argmax(-1).tolist()] if len(texts) else []
    # Every input column is kept beside the prediction (an id column, say); the label's column is
    # "label", or "predicted_label" where the input has a "label" column of its own.
    header = sorted(columns, key=lambda name: columns[name] % width) if width else []
    records = [
        dict(zip(header, [*row, *[""] * (width - len(row))][:width]))
        if isinstance(row, list) and header
        else dict(row)
        if isinstance(row, dict)
        else {str(i): v for i, v in enumerate(row)}
        for _, row in rows
    ]
    keys = list(dict.fromkeys(k for record in records for k in record))
    name = "predicted_label" if "label" in keys else "label"
    if out is not None and out.suffix.lower() == ".jsonl":
        lines = [
            json.dumps({**record, name: label, "probabilities": dict(zip(names, p))})
            for record, label, p in zip(records, labels, probs.tolist())
        ]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(line + "\n" for line in lines))
    else:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([*keys, name, *(f"p_{n}" for n in names)])
        for record, label, p in zip(records, labels, probs.tolist()):
            cells = [
                v if isinstance(v, str) else json.dumps(v)
                for v in (record.get(k, "") for k in keys)
            ]
            writer.writerow([*cells, label, *(f"{x:.6g}" for x in p)])
        if out is None:
            typer.echo(buffer.getvalue(), nl=False)
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(buffer.getvalue())
    if out is not None:
        typer.echo(f"wrote {len(texts)} predictions ({', '.join(names)}) to {out}", err=True)


def _run_columns(model: Path) -> tuple[str, str | None]:
    """The text column (and pair column) of the run whose model this is: its summary.json's, in the
    run folder or beside model/; ``("text", None)`` where there is none (or it names columns by
    position)."""
    for summary in (model / "summary.json", model.parent / "summary.json"):
        if summary.is_file():
            data = json.loads(summary.read_text()).get("data") or {}
            text, pair = data.get("text_column"), data.get("text_pair_column")
            if isinstance(text, str):
                return text, pair if isinstance(pair, str) else None
    return "text", None
