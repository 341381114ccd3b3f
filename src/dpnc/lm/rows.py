"""Reading the rows of a text file: CSV, TSV or JSON lines, with or without a header row.

Shared by the LM-BFF task folders (:func:`dpnc.lm.lmbff.load_task`) and a user's own files
(:mod:`dpnc.lm.files`): :func:`read_rows` splits a file into numbered rows and maps its header,
:func:`read_field` takes one column's value from a row. Every error names the file and the line, so
that a user can open and fix it."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

__all__ = ["read_field", "read_rows"]


def read_rows(
    path: Path, fmt: str, delimiter: str | None, header: bool, *, lenient: bool = False
) -> tuple[list[tuple[int, list]], dict, int | None]:
    """Rows as ``(line number, fields)`` (blank lines skipped), the header's ``{name: position}``
    and its width.

    ``fmt`` is ``"csv"`` (the ``csv`` module's quoting; a record's line is the line it starts on),
    ``"tsv"`` (split on ``delimiter``, default tab, no quote processing) or ``"jsonl"`` (one JSON
    value per line). A header row, when there is one, maps each name to its position, except its
    last name, which maps to ``-1`` (each row's last field, as GLUE's NLI files with a variable
    number of annotator labels need). The width (the header's number of fields) is None without a
    header.

    ``lenient`` (a private training file, whose rows must never decide a refusal): bytes that are
    not UTF-8 become U+FFFD; a blank record, a line that is not JSON (or nested too deep for Python)
    and a CSV record the ``csv`` module refuses become the row None (outside the domain, dropped and
    counted by the caller), so the rows returned are all of the file's records after its header, one
    per record (what a replace-one neighbour keeps); a file with no data rows gives none.

    Raises:
        ValueError: bytes that are not UTF-8 (naming the line), a line that is not JSON or not CSV,
            or no data rows (unless ``lenient``); a file with no header row when one is expected.
    """
    raw = path.read_bytes().decode("utf-8-sig", errors="replace") if lenient else _decode(path)
    if fmt == "jsonl":
        rows = []
        for line, text in enumerate(_lines(raw), start=1):
            if not text.strip():
                if lenient:
                    rows.append((line, None))  # a blank record: counted as a row outside the domain
                continue
            try:
                rows.append((line, json.loads(text)))
            except (
                ValueError,
                RecursionError,
            ) as err:  # not JSON, a number over 4300 digits, or nested too deep
                if not lenient:
                    raise ValueError(f"{path.name} line {line} is not valid JSON: {err}") from None
                rows.append((line, None))  # outside the domain: the caller drops and counts it
        if not rows and not lenient:
            raise ValueError(f"{str(path)!r} holds no data rows")
        return rows, {}, None
    if fmt == "csv":
        rows = _csv_records(raw, delimiter or ",", path, lenient)
    else:
        sep = delimiter or "\t"
        rows = [(i, t.rstrip("\r").split(sep)) for i, t in enumerate(_lines(raw), start=1)]
    blank = [r is not None and not any(f.strip() for f in r) for _, r in rows]
    if header:  # the first row that is not blank
        start = blank.index(False) if False in blank else len(rows)
        rows, blank = rows[start:], blank[start:]
    # A blank record is skipped, or in a private file kept as None: one of the file's records,
    # outside the domain.
    rows = [
        (line, None) if b else (line, r) for (line, r), b in zip(rows, blank) if lenient or not b
    ]
    columns, width = {}, None
    if header:
        if not rows:
            raise ValueError(f"{str(path)!r} is empty (no header row)")
        if (
            rows[0][1] is None
        ):  # the file's structure, not a data row: refused even in a private file
            raise ValueError(f"{path.name}'s header row (line {rows[0][0]}) cannot be read as CSV")
        names = [f.strip() for f in rows[0][1]]
        width = len(names)
        columns = {name: i for i, name in enumerate(names)}
        columns[
            names[-1]
        ] = -1  # the header's last column is each row's last field (GLUE NLI files)
        rows = rows[1:]
    if not rows and not lenient:
        raise ValueError(f"{str(path)!r} holds no data rows")
    return rows, columns, width


def _csv_records(
    raw: str, delimiter: str, path: Path, lenient: bool
) -> list[tuple[int, list | None]]:
    """The CSV records of ``raw`` with the line each starts on. No field is too long: csv's size
    limit is lifted to the file's length while it reads (a field over the limit would stop the
    reader inside it, and the rest of the field would be read as records of its own). A record csv
    still refuses is None (``lenient``) or refused."""
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, len(raw) + 1))
    try:
        reader = csv.reader(io.StringIO(raw, newline=""), delimiter=delimiter)
        rows, start = [], 1
        while True:
            try:
                record = next(reader)
            except StopIteration:
                break
            except csv.Error as err:
                if not lenient:
                    raise ValueError(
                        f"{path.name} line {start} cannot be read as CSV: {err}"
                    ) from None
                record = None  # outside the domain: the caller drops and counts it
            rows.append((start, record))
            start = reader.line_num + 1
        return rows
    finally:
        csv.field_size_limit(limit)


def _lines(raw: str) -> list[str]:
    """The file's lines; the newline that ends the last line starts no line of its own."""
    lines = raw.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _decode(path: Path) -> str:
    """The file's text (a UTF-8 byte-order mark dropped); bad bytes are reported with their line.

    A UTF-8 multi-byte sequence never contains the newline byte, so decoding line by line finds the
    line whose bytes are wrong, which a user can open and fix (Python's own message gives only a
    byte offset in the file)."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as whole:
        for number, line in enumerate(data.split(b"\n"), start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as err:
                near = line[max(err.start - 20, 0) : err.end + 20]
                raise ValueError(
                    f"{path.name} line {number} is not valid UTF-8: {err.reason} at byte {err.start + 1} of the "
                    f"line, near {near!r}; save the file as UTF-8"
                ) from None
        raise ValueError(f"{path.name} is not valid UTF-8: {whole}") from None


def read_field(
    row, columns: dict, column: str | int, path: Path, line: int, what: str = "column"
) -> str:
    """The value of ``column`` in one row, as stripped text (numbers as ``str``); ``what`` names the
    column's role.

    Raises:
        ValueError: naming the file and line: a name column on JSON arrays or without a header, an
            integer column on JSON objects, an absent key, a JSON null, a row with too few fields,
            or a nested JSON value.
    """
    if isinstance(row, dict):
        if isinstance(column, int):
            raise ValueError(
                f"{path.name} has JSON objects: columns must be key names; got {column!r}"
            )
        if column not in row:
            raise ValueError(
                f"{what} {column!r} is missing in {path.name} line {line}; keys there: {list(row)}"
            )
        value = row[column]
    elif isinstance(row, list):
        if isinstance(column, str):
            if not columns:
                raise ValueError(f"column {column!r} is a name, but {path.name} has no header row")
            if column not in columns:
                raise ValueError(
                    f"column {column!r} is not in the header of {path.name}; columns: {list(columns)}"
                )
            pos = columns[column]
        else:
            pos = column
        if not -len(row) <= pos < len(row):
            raise ValueError(
                f"{path.name} line {line} has {len(row)} fields, too few for {what} {column!r}: {row!r}"[
                    :300
                ]
            )
        value = row[pos]
    else:
        raise ValueError(
            f"{path.name} line {line} must be a JSON object or array; got {row!r}"[:300]
        )
    if value is None:
        raise ValueError(f"{what} {column!r} is empty (JSON null) in {path.name} line {line}")
    if isinstance(value, dict | list):
        raise ValueError(
            f"{what} {column!r} in {path.name} line {line} must be text or a number; got {value!r}"
        )
    return str(value).strip()
