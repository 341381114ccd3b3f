"""Reading rows and fields of a text file (dpnc.lm.rows): line numbers a user can open, the header's
last name as each row's last field, a private file's unreadable records kept as None rather than
refused, and errors that name the file and line. The files' meaning (labels, pairs) is
tests/lm/test_files.py's and tests/lm/test_data.py's."""

from __future__ import annotations

import pytest

from dpnc.lm.rows import read_field, read_rows
from tests.shared_data import DATA, needs_data


@needs_data
def test_a_header_maps_its_last_name_to_each_rows_last_field_on_snli():
    path = DATA / "SNLI/k-shot-1k-test/512-42/dev.tsv"
    rows, columns, width = read_rows(path, "tsv", None, header=True)
    names = path.read_text(encoding="utf-8").split("\n")[0].split("\t")
    assert width == len(names) and columns["gold_label"] == -1 == columns[names[-1].strip()]
    assert columns["sentence1"] == names.index("sentence1")
    assert len({len(fields) for _, fields in rows}) > 1  # annotator labels vary in number
    for line, fields in rows[:50]:
        assert read_field(fields, columns, "gold_label", path, line) == fields[-1].strip()
    assert rows[0][0] == 2  # line 1 is the header


def test_a_csv_records_line_is_the_line_it_starts_on_and_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "notes.csv"
    path.write_text('\ufefftext,label\n"two\nlines",a\n\n,\nplain,b\n', encoding="utf-8")
    rows, columns, width = read_rows(path, "csv", None, header=True)
    assert columns == {"text": 0, "label": -1} and width == 2  # the byte-order mark dropped
    assert rows == [(2, ["two\nlines", "a"]), (6, ["plain", "b"])]
    lenient, _, _ = read_rows(path, "csv", None, header=True, lenient=True)
    assert lenient == [(2, ["two\nlines", "a"]), (4, None), (5, None), (6, ["plain", "b"])]


def test_a_private_file_keeps_unreadable_records_as_none_where_a_public_one_is_refused(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_bytes(b'{"text": "fine"}\n{"text": "caf\xe9"}\n{not json\n')
    with pytest.raises(ValueError, match="notes.jsonl line 2 is not valid UTF-8"):
        read_rows(path, "jsonl", None, header=False)
    rows, columns, width = read_rows(path, "jsonl", None, header=False, lenient=True)
    assert rows == [(1, {"text": "fine"}), (2, {"text": "caf\ufffd"}), (3, None)]
    assert (columns, width) == ({}, None)
    path.write_text('{"text": "fine"}\n{not json\n')
    with pytest.raises(ValueError, match="notes.jsonl line 2 is not valid JSON"):
        read_rows(path, "jsonl", None, header=False)


def test_files_without_rows_are_refused_unless_private(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("text,label\n\n")
    with pytest.raises(ValueError, match="holds no data rows"):
        read_rows(path, "csv", None, header=True)
    assert read_rows(path, "csv", None, header=True, lenient=True) == (
        [(2, None)],
        {"text": 0, "label": -1},
        2,
    )
    path.write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        read_rows(path, "csv", None, header=True, lenient=True)


@pytest.mark.parametrize(
    ("row", "columns", "column", "message"),
    [
        ({"text": "a"}, {}, 0, "has JSON objects: columns must be key names"),
        ({"text": "a"}, {}, "label", "label 'label' is missing in f.jsonl line 7"),
        ({"label": None}, {}, "label", r"is empty \(JSON null\) in f.jsonl line 7"),
        ({"label": [1]}, {}, "label", "must be text or a number"),
        (["a"], {}, "label", "is a name, but f.jsonl has no header row"),
        (["a"], {"text": 0}, "label", "is not in the header"),
        (["a"], {}, 2, "line 7 has 1 fields, too few for label 2"),
        ("a", {}, 0, "must be a JSON object or array"),
    ],
)
def test_a_field_that_cannot_be_read_is_refused_naming_the_file_and_line(
    tmp_path, row, columns, column, message
):
    with pytest.raises(ValueError, match=message):
        read_field(row, columns, column, tmp_path / "f.jsonl", 7, what="label")


def test_a_field_is_stripped_text_and_numbers_become_text(tmp_path):
    assert read_field({"label": 3}, {}, "label", tmp_path / "f.jsonl", 1) == "3"
    assert read_field([" a ", "b"], {"text": 0}, "text", tmp_path / "f.csv", 1) == "a"
