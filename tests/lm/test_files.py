"""Tests of dpnc.lm.files: a user's own CSV / TSV / JSONL files, each refusal, label
canonicalisation, label words, and a sentiment CSV built from the real SST-5 files
(tests/lm/sentiment_csv.py) counted against the source."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from dpnc.lm.files import (
    canonical_label,
    describe_data,
    load_file,
    load_user_data,
    parse_label_words,
)
from dpnc.lm.lmbff import load_task
from tests.lm.sentiment_csv import write_sentiment_csv
from tests.shared_data import DATA, needs_data

SEEDS = (13, 21, 42, 87, 100)


# ---------------------------------------------------------------------------------------------------------------
# load_file on small files


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_load_file_csv_with_header_names(tmp_path):
    path = _write(
        tmp_path / "reviews.csv", 'text,stars\n"good, really good  ",pos\nbad,neg\n\nfine,pos\n'
    )
    ds = load_file(path, text_column="text", label_column="stars")
    assert ds.texts == ["good, really good", "bad", "fine"]
    assert ds.task.label_names == ("neg", "pos") and ds.task.label_words == ("neg", "pos")
    assert ds.labels.tolist() == [1, 0, 1]
    assert ds.task.name == "reviews.csv" and ds.source == str(path)
    assert ds.task.prompt(ds.texts[1], 0) == "bad It was neg."


def test_load_file_csv_int_columns_without_header(tmp_path):
    path = _write(tmp_path / "t.csv", '10,"what, exactly ?"\n2,who\n10,where\n')
    ds = load_file(
        path,
        text_column=1,
        label_column=0,
        label_words=["Two", "Ten"],
        template="{label_word}: {sentence}",
    )
    assert ds.task.label_names == ("2", "10")  # numeric order, not "10" < "2"
    assert ds.texts == ["what, exactly ?", "who", "where"] and ds.labels.tolist() == [1, 0, 1]
    assert ds.task.prompt("who", 0) == "Two: who"
    with_header = load_file(path, text_column=1, label_column=0, header=True)
    assert with_header.texts == ["who", "where"]


def test_load_file_tsv_pairs_without_quote_processing(tmp_path):
    path = _write(
        tmp_path / "nli.tsv",
        'id\tpremise\thypothesis\tlabel\r\n1\tHe said "hi.\tHe spoke.\tyes\r\n'
        "2\tA cat sat\tA dog sat.\tno\textra\tno\r\n",
    )
    ds = load_file(
        path,
        text_column="premise",
        text_pair_column="hypothesis",
        label_column="label",
        label_names=["yes", "no"],
        label_words=["Yes", "No"],
    )
    assert ds.texts == [('He said "hi.', "He spoke."), ("A cat sat", "A dog sat.")]
    assert ds.labels.tolist() == [0, 1]  # the header's last column is each row's last field
    assert ds.task.pair and ds.task.prompt(ds.texts[1], 1) == "A cat sat? No, a dog sat."
    by_position = load_file(path, text_column=1, text_pair_column=2, label_column=-1, header=True)
    assert by_position.texts == ds.texts and by_position.task.label_names == ("no", "yes")


def test_load_file_jsonl_objects_and_arrays(tmp_path):
    objs = _write(
        tmp_path / "d.jsonl",
        "\n".join(
            json.dumps(r)
            for r in [{"s": " nice ", "y": 1}, {"s": "awful", "y": 0}, {"s": "meh", "y": 1}]
        )
        + "\n",
    )
    ds = load_file(objs, text_column="s", label_column="y", label_words=["terrible", "great"])
    assert ds.texts == ["nice", "awful", "meh"] and ds.labels.tolist() == [1, 0, 1]
    assert ds.task.label_names == ("0", "1") and ds.task.prompt("nice", 1) == "nice It was great."
    arrays = _write(tmp_path / "a.json", '["x", "p"]\n["y", "q"]\n')
    assert load_file(arrays, text_column=0, label_column=1).texts == ["x", "y"]
    with pytest.raises(ValueError, match="columns must be key names"):
        load_file(objs, text_column=0, label_column="y")
    with pytest.raises(
        ValueError, match=r"column 'text' is missing in d.jsonl line 1; keys there: \['s', 'y'\]"
    ):
        load_file(objs, text_column="text", label_column="y")
    with pytest.raises(ValueError, match="line 2 is not valid JSON"):
        load_file(
            _write(tmp_path / "bad.jsonl", '{"s": "a", "y": 1}\n{oops\n'),
            text_column="s",
            label_column="y",
        )


def test_load_file_delimiter_and_unknown_extension(tmp_path):
    path = _write(tmp_path / "d.txt", "a;0\nb;1\n")
    assert load_file(path, text_column=0, label_column=1, delimiter=";").texts == ["a", "b"]
    with pytest.raises(
        ValueError, match=r"must end in \.csv, \.tsv, \.jsonl or \.json, or give a delimiter"
    ):
        load_file(path, text_column=0, label_column=1)
    semi = _write(tmp_path / "d.csv", 'x;y\n"a;b";0\nc;1\n')
    assert load_file(semi, text_column="x", label_column="y", delimiter=";").texts == ["a;b", "c"]


def test_load_file_errors(tmp_path):
    good = _write(tmp_path / "g.csv", "text,label\na,0\nb,1\n")
    missing = r"column 'sentence' is not in the header of g.csv; columns: \['text', 'label'\]"
    with pytest.raises(ValueError, match=missing):
        load_file(good, text_column="sentence", label_column="label")
    with pytest.raises(
        ValueError,
        match=r"labels of g.csv must be among \['0', '2'\]; found '1' \(first at line 3\)",
    ):
        load_file(good, text_column="text", label_column="label", label_names=["0", "2"])
    with pytest.raises(ValueError, match="one word per class"):
        load_file(good, text_column="text", label_column="label", label_words=["only"])
    with pytest.raises(ValueError, match="g.csv line 2 has 2 fields, too few for text column 5"):
        load_file(good, text_column=5, label_column=1, header=True)
    with pytest.raises(ValueError, match="is a name, but g.csv has no header row"):
        load_file(good, text_column="text", label_column=1, header=False)
    with pytest.raises(ValueError, match="is empty"):
        load_file(_write(tmp_path / "e.csv", ""), text_column="text", label_column="label")
    with pytest.raises(ValueError, match="holds no data rows"):
        load_file(
            _write(tmp_path / "h.tsv", "text\tlabel\n"), text_column="text", label_column="label"
        )
    with pytest.raises(ValueError, match="holds no data rows"):
        load_file(_write(tmp_path / "e.jsonl", "\n\n"), text_column="s", label_column="y")
    with pytest.raises(ValueError, match="at least 2 distinct labels"):
        load_file(_write(tmp_path / "one.csv", "a,0\nb,0\n"), text_column=0, label_column=1)
    with pytest.raises(FileNotFoundError, match="is not a file"):
        load_file(tmp_path / "missing.csv", text_column=0, label_column=1)


@needs_data
def test_load_file_reads_the_full_source_files():
    """README: GLUE SST-2 train (label first, CRLF) holds every k-shot train/dev row; SST-5 and TREC
    original sizes."""
    glue = load_file(DATA / "SST-2/glue/train.tsv", text_column="sentence", label_column="label")
    assert len(glue) == 67349 and glue.class_counts() == {"0": 29780, "1": 37569}
    assert not any(t.endswith("\r") for t in glue.texts)
    pool = {}
    for t, y in zip(glue.texts, glue.labels.tolist()):
        pool.setdefault(t, set()).add(y)
    assert sum(len(ys) > 1 for ys in pool.values()) == 5  # five phrases carry both labels in GLUE
    for seed in SEEDS:
        for split in ("train", "dev"):
            ds = load_task("SST-2", DATA, split, seed=seed)
            assert all(y in pool.get(t, ()) for t, y in zip(ds.texts, ds.labels.tolist()))
    sizes = {
        split: len(load_file(DATA / f"sst-5/original/{split}.tsv", text_column=1, label_column=0))
        for split in ("train", "dev", "test")
    }
    assert sizes == {"train": 8544, "dev": 1101, "test": 2210}
    trec = load_file(DATA / "trec/original/train.csv", text_column=1, label_column=0)
    assert len(trec) == 5452 and trec.class_counts()["2"] == 86
    assert (
        load_file(DATA / "trec/original/test.csv", text_column=1, label_column=0).texts
        == load_task("TREC", DATA, "test").texts
    )


# ---------------------------------------------------------------------------------------------------------------
# load_user_data: formats


ROWS = [
    ('a "quoted", comma-laden review', "positive"),
    ("plain and dull", "negative"),
    ("  padded  ", "positive"),
    ("semi;colon", "negative"),
]


def _csv(path: Path, header: tuple, rows: list) -> Path:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _jsonl(path: Path, records: list) -> Path:
    return _write(path, "".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl"])
def test_round_trip_each_format(tmp_path, fmt):
    """The same rows written in each format read back as the same texts and labels (texts
    stripped)."""
    paths = []
    for split in ("train", "test"):
        path = tmp_path / f"{split}.{fmt}"
        if fmt == "csv":
            _csv(path, ("review", "sentiment"), ROWS)
        elif fmt == "tsv":
            _write(path, "review\tsentiment\n" + "".join(f"{t}\t{y}\n" for t, y in ROWS))
        else:
            _jsonl(path, [{"review": t, "sentiment": y} for t, y in ROWS])
        paths.append(path)
    train, test = load_user_data(*paths, text_column="review", label_column="sentiment")
    for ds, path in zip((train, test), paths):
        assert ds.texts == [t.strip() for t, _ in ROWS]
        assert [ds.task.label_names[y] for y in ds.labels.tolist()] == [y for _, y in ROWS]
        assert ds.source == str(path) and ds.origin["format"] == fmt
    assert train.task is test.task and train.task.name == f"train.{fmt}"
    assert train.task.label_names == ("negative", "positive") == train.task.label_words
    assert train.task.prompt(train.texts[1], 1) == "plain and dull It was positive."


def test_pairs_and_template(tmp_path):
    train = _csv(
        tmp_path / "nli.csv",
        ("p", "h", "y"),
        [("It rained.", "The ground is wet.", "yes"), ("A cat sat", "A dog sat.", "no")],
    )
    test = _csv(tmp_path / "nli_test.csv", ("p", "h", "y"), [("He ran.", "He moved.", "yes")])
    tr, te = load_user_data(
        train,
        test,
        text_column="p",
        text_pair_column="h",
        label_column="y",
        label_words="yes=Yes,no=No",
    )
    assert tr.texts == [("It rained.", "The ground is wet."), ("A cat sat", "A dog sat.")]
    assert tr.task.pair and tr.task.label_names == ("yes", "no") and tr.labels.tolist() == [0, 1]
    assert te.task.prompt(te.texts[0], 0) == "He ran? Yes, he moved."
    _, te = load_user_data(
        train,
        test,
        text_column="p",
        text_pair_column="h",
        label_column="y",
        template="{sentence2} / {sentence1} => {label_word}",
    )
    assert (
        te.task.prompt(te.texts[0], te.task.label_names.index("yes"))
        == "He moved. / He ran. => yes"
    )
    with pytest.raises(ValueError, match="exactly one"):
        load_user_data(
            train,
            test,
            text_column="p",
            text_pair_column="h",
            label_column="y",
            template="{sentence1} {sentence2}",
        )


def test_integer_columns_without_header_and_missing_files(tmp_path):
    train = _write(tmp_path / "t.csv", "0,awful\n1,fine\n1,good\n")
    tr, te = load_user_data(train, train, text_column=1, label_column=0)
    assert (
        tr.texts == ["awful", "fine", "good"] and tr.labels.tolist() == [0, 1, 1] and len(te) == 3
    )
    with pytest.raises(FileNotFoundError, match="is not a file"):
        load_user_data(train, tmp_path / "nope.csv", text_column=1, label_column=0)
    with pytest.raises(ValueError, match=r"must end in \.csv"):
        load_user_data(_write(tmp_path / "t.txt", "a,0\n"), train, text_column=1, label_column=0)
    arrays = _write(tmp_path / "a.jsonl", '["awful", 0]\n["fine", 1]\n["good"]\n')
    with pytest.raises(
        ValueError, match=r"a.jsonl line 3 has 1 fields, fewer than the first row's 2: \['good'\]"
    ):
        load_user_data(arrays, train, text_column=0, label_column=-1)
    short = _write(tmp_path / "s.csv", "0,awful\n1\n")
    with pytest.raises(
        ValueError, match=r"s.csv line 2 has 1 fields, fewer than the first row's 2"
    ):
        load_user_data(short, train, text_column=1, label_column=0)


def test_test_set_may_lack_a_class_and_keeps_train_class_ids(tmp_path):
    train = _csv(
        tmp_path / "tr.csv", ("x", "y"), [("a", "b_class"), ("b", "a_class"), ("c", "c_class")]
    )
    test = _csv(tmp_path / "te.csv", ("x", "y"), [("d", "c_class"), ("e", "c_class")])
    tr, te = load_user_data(train, test, text_column="x", label_column="y")
    assert tr.task.label_names == ("a_class", "b_class", "c_class")
    assert te.labels.tolist() == [2, 2] and te.class_counts() == {
        "a_class": 0,
        "b_class": 0,
        "c_class": 2,
    }


# ---------------------------------------------------------------------------------------------------------------
# Labels: numbers that are equal are one label


@pytest.mark.parametrize(
    "value, label",
    [
        ("1", "1"),
        ("1.0", "1"),
        (" 1 ", "1"),
        (1, "1"),
        (1.0, "1"),
        ("+1", "1"),
        ("01", "1"),
        ("1e0", "1"),
        ("-0", "0"),
        ("0.0", "0"),
        ("0.5", "0.5"),
        ("0.50", "0.5"),
        (0.5, "0.5"),
        (".5", "0.5"),
        ("-2.25", "-2.25"),
        ("1e40", "1e+40"),
        ("1" + "0" * 40, "1e+40"),
        ("12345678901234567890123", "12345678901234567890123"),
        ("positive ", "positive"),
        ("Positive", "Positive"),
        ("1.0.0", "1.0.0"),
        ("nan", "nan"),
        ("1e400", "1e400"),
    ],
)
def test_canonical_label(value, label):
    assert canonical_label(value) == label


def test_equal_numbers_merge_into_one_label(tmp_path):
    train = _write(tmp_path / "tr.csv", "text,label\na,1\nb,1.0\nc, 1 \nd,0\ne,0.0\nf,+1\n")
    test = _jsonl(
        tmp_path / "te.jsonl",
        [{"t": "g", "y": 1}, {"t": "h", "y": 1.0}, {"t": "i", "y": "0"}, {"t": "j", "y": 0.0}],
    )
    tr, _ = load_user_data(train, train, text_column="text", label_column="label")
    assert tr.task.label_names == ("0", "1") and tr.labels.tolist() == [1, 1, 1, 0, 0, 1]
    assert tr.class_counts() == {"0": 2, "1": 4}
    # the JSON test file against a CSV train file: JSON numbers and strings merge with the CSV's
    # text labels
    jtrain = _jsonl(tmp_path / "tr.jsonl", [{"t": "a", "y": "1.0"}, {"t": "b", "y": 0}])
    tr, te = load_user_data(jtrain, test, text_column="t", label_column="y")
    assert tr.task.label_names == ("0", "1") and te.labels.tolist() == [1, 1, 0, 0]


def test_numeric_labels_sort_numerically(tmp_path):
    train = _write(tmp_path / "tr.csv", "t,y\na,10\nb,2\nc,0.5\nd,-1\n")
    tr, _ = load_user_data(train, train, text_column="t", label_column="y")
    assert tr.task.label_names == ("-1", "0.5", "2", "10") and tr.labels.tolist() == [3, 2, 1, 0]
    mixed = _write(tmp_path / "m.csv", "t,y\na,10\nb,2\nc,two\n")
    tr, _ = load_user_data(mixed, mixed, text_column="t", label_column="y")
    assert tr.task.label_names == ("10", "2", "two")  # not all numbers: text order


# ---------------------------------------------------------------------------------------------------------------
# Label words


def test_parse_label_words():
    assert parse_label_words(None) is None
    assert parse_label_words("negative=terrible, positive = great") == {
        "negative": "terrible",
        "positive": "great",
    }
    assert list(parse_label_words("positive=great,negative=terrible")) == ["positive", "negative"]
    assert parse_label_words({1: "great", 0.0: "terrible"}) == {"1": "great", "0": "terrible"}
    assert parse_label_words("1.0=great,0=not so good") == {"1": "great", "0": "not so good"}


@pytest.mark.parametrize(
    "spec, message",
    [
        ("negative", r"'label=word' pairs .*got the item 'negative'"),
        ("negative=terrible,", r"got the item ''"),
        ("", r"got the item ''"),
        ("=terrible,b=x", r"a label and a word in every pair; got ''='terrible'"),
        ("a=,b=x", r"a label and a word in every pair; got 'a'=''"),
        ("1=great,1.0=fine", r"gives label '1' twice"),
        ("a=same,b=same", r"must be distinct; labels 'a' and 'b' both get 'same'"),
        ({}, r"at least one label=word pair"),
        (["terrible", "great"], r"must be None, a mapping"),
    ],
)
def test_parse_label_words_refusals(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_label_words(spec)


def test_label_words_fix_class_order_and_must_match_the_train_labels(tmp_path):
    train = _write(
        tmp_path / "reviews.csv", "text,label\nbad,negative\ngood,positive\nmeh,negative\n"
    )
    tr, te = load_user_data(
        train,
        train,
        text_column="text",
        label_column="label",
        label_words="positive=great,negative=terrible",
    )
    assert tr.task.label_names == ("positive", "negative") and tr.task.label_words == (
        "great",
        "terrible",
    )
    assert tr.labels.tolist() == [1, 0, 1] and tr.task.prompt("good", 0) == "good It was great."
    with pytest.raises(
        ValueError, match=r"word for every label of reviews.csv; missing: \['positive'\]"
    ):
        load_user_data(
            train, train, text_column="text", label_column="label", label_words="negative=terrible"
        )
    with pytest.raises(
        ValueError, match=r"reviews.csv does not hold: \['neutral'\]; its labels: \['negative', "
    ):
        load_user_data(
            train,
            train,
            text_column="text",
            label_column="label",
            label_words={"negative": "terrible", "positive": "great", "neutral": "okay"},
        )
    numeric = _write(tmp_path / "n.csv", "t,y\na,0\nb,1\n")
    tr, _ = load_user_data(
        numeric, numeric, text_column="t", label_column="y", label_words="1.0=great,0.0=terrible"
    )
    assert tr.task.label_names == ("1", "0") and tr.labels.tolist() == [1, 0]


# ---------------------------------------------------------------------------------------------------------------
# Refusals: each names the file and the line


GOOD = "text,label\na,x\nb,y\n"


@pytest.mark.parametrize(
    "name, content, message",
    [
        (
            "r.jsonl",
            '{"t": "a", "y": "x"}\n{"t": "b"}\n',
            r"label column 'y' is missing in r.jsonl line 2",
        ),
        (
            "r.jsonl",
            '{"t": "a", "y": "x"}\n\n{"t": "b", "y": null}\n',
            r"label column 'y' is empty \(JSON null\) in r.jsonl line 3",
        ),
        (
            "r.jsonl",
            '{"t": "a", "y": "x"}\n{"t": "b", "y": " "}\n',
            r"label column 'y' is empty in r.jsonl line 2",
        ),
        ("r.csv", "t,y\na,x\nb,\nc,y\n", r"label column 'y' is empty in r.csv line 3"),
        ("r.csv", 't,y\na,x\nb,""\n', r"label column 'y' is empty in r.csv line 3"),
        ("r.tsv", "t\ty\na\tx\nb\t \n", r"label column 'y' is empty in r.tsv line 3"),
        (
            "r.csv",
            "t,y\na,x\nb\n",
            r"r.csv line 3 has 1 fields, fewer than the header's 2: \['b'\]",
        ),
        (
            "r.tsv",
            "t\tz\ty\na\t0\tx\nb\tx\n",
            r"r.tsv line 3 has 2 fields, fewer than the header's 3",
        ),
        (
            "r.csv",
            "t,y\na,x\ngreat, really,y\n",
            r"r.csv line 3 has 3 fields, more than the header's 2 \(quote a field",
        ),
        ("r.csv", "t,y\na,x\n,y\n", r"text column 't' is empty in r.csv line 3"),
        (
            "r.csv",
            't,y\n"two\nlines",x\n  ,y\n',
            r"text column 't' is empty in r.csv line 4",
        ),  # a record's first line
        (
            "r.jsonl",
            '{"t": "a", "y": "x"}\n{"t": "", "y": "y"}\n',
            r"text column 't' is empty in r.jsonl line 2",
        ),
        (
            "r.jsonl",
            '{"t": "a", "y": "x"}\n{"t": ["b"], "y": "y"}\n',
            r"text column 't' in r.jsonl line 2 must be text",
        ),
    ],
)
def test_refused_rows_name_file_and_line(tmp_path, name, content, message):
    bad = _write(tmp_path / name, content)
    good = _write(
        tmp_path / "good.csv", "t,y\na,x\nb,y\n"
    )  # columns by name: any format pairs with any
    with pytest.raises(ValueError, match=message):
        load_user_data(bad, good, text_column="t", label_column="y")
    with pytest.raises(ValueError, match=message):  # the same refusal in the test file
        load_user_data(good, bad, text_column="t", label_column="y")


def test_empty_pair_text_is_refused(tmp_path):
    path = _write(tmp_path / "p.tsv", "p\th\ty\nA.\tB.\tyes\nC.\t\tno\n")
    with pytest.raises(ValueError, match=r"text pair column 'h' is empty in p.tsv line 3"):
        load_user_data(path, path, text_column="p", text_pair_column="h", label_column="y")


def test_bytes_that_are_not_utf8_are_refused_with_their_line(tmp_path):
    lines = [b"review,sentiment"] + [
        f"review {i},{'positive' if i % 2 else 'negative'}".encode() for i in range(2, 20)
    ]
    lines[16] = "caf\u00e9 cr\u00e8me,positive".encode(
        "latin-1"
    )  # line 17, written by a latin-1 editor
    bad = tmp_path / "reviews.csv"
    bad.write_bytes(b"\n".join(lines) + b"\n")
    good = _write(tmp_path / "good.csv", "review,sentiment\nfine,positive\nawful,negative\n")
    message = (
        r"reviews.csv line 17 is not valid UTF-8: invalid continuation byte at byte 4 of the line, "
        r"near b'caf\\xe9"
    )
    with pytest.raises(ValueError, match=message):
        load_user_data(bad, good, text_column="review", label_column="sentiment")
    with pytest.raises(ValueError, match=message):
        load_user_data(good, bad, text_column="review", label_column="sentiment")
    bom = (
        tmp_path / "bom.csv"
    )  # a byte-order mark (Excel's "CSV UTF-8") is not an error, nor part of the header
    bom.write_bytes(
        b"\xef\xbb\xbfreview,sentiment\n" + "na\u00efve,positive\nbad,negative\n".encode()
    )
    tr, _ = load_user_data(bom, good, text_column="review", label_column="sentiment")
    assert tr.texts == ["na\u00efve", "bad"]


def test_a_single_class_training_set_is_refused(tmp_path):
    train = _write(
        tmp_path / "reviews.csv",
        "review,sentiment\ngood,positive\ngreat, positive\nfine,positive \n",
    )
    with pytest.raises(
        ValueError,
        match=r"^the training set must hold at least 2 classes; reviews.csv has only "
        r"'positive' \(3 rows\)$",
    ):
        load_user_data(train, train, text_column="review", label_column="sentiment")


def test_unknown_test_labels_are_named_with_their_first_line(tmp_path):
    train = _write(tmp_path / "train.csv", "t,y\na,negative\nb,positive\n")
    test = _write(
        tmp_path / "test.csv", "t,y\na,negative\nb,neutral\nc,mixed\nd,neutral\ne,positive\n"
    )
    message = (
        r"labels of test.csv must be among \['negative', 'positive'\] \(the classes of train.csv\); "
        r"found 'neutral' \(first at line 3\), 'mixed' \(first at line 4\)$"
    )
    with pytest.raises(ValueError, match=message):
        load_user_data(train, test, text_column="t", label_column="y")
    many = _write(tmp_path / "many.csv", "t,y\n" + "".join(f"x,l{i}\n" for i in range(12)))
    with pytest.raises(ValueError, match=r"'l9' \(first at line 11\) and 2 more$"):
        load_user_data(train, many, text_column="t", label_column="y")


def test_bad_columns_are_refused(tmp_path):
    path = _write(tmp_path / "g.csv", GOOD)
    with pytest.raises(
        ValueError,
        match=r"column 'review' is not in the header of g.csv; columns: \['text', 'label'",
    ):
        load_user_data(path, path, text_column="review", label_column="label")
    with pytest.raises(ValueError, match="columns must be header names"):
        load_user_data(path, path, text_column=True, label_column="label")


# ---------------------------------------------------------------------------------------------------------------
# describe_data


def test_describe_data_records_the_run_data(tmp_path):
    train = _write(tmp_path / "tr.csv", "review,sentiment,id\ngood,pos,1\nbad,neg,2\nok,pos,3\n")
    test = _write(tmp_path / "te.csv", "review,sentiment,id\nfine,pos,4\n")
    tr, te = load_user_data(
        train,
        test,
        text_column="review",
        label_column="sentiment",
        label_words={"neg": "terrible", "pos": "great"},
        template="{label_word}! {sentence}",
    )
    record = describe_data(tr, te)
    assert record == {
        "train_file": "tr.csv",  # by base name: the full path tells whose machine it is
        "test_file": "te.csv",
        "format": "csv",
        "test_rows": 1,  # the training split's rows and class counts are private: not recorded
        "test_class_counts": {"neg": 0, "pos": 1},
        "label_names": ["neg", "pos"],
        "label_words": ["terrible", "great"],
        "template": "{label_word}! {sentence}",
        "pair": False,
        "text_column": "review",
        "text_pair_column": None,
        "label_column": "sentiment",
    }
    assert json.loads(json.dumps(record)) == record
    assert (
        describe_data(tr.subset([0, 2]), te) == record
    )  # a subset keeps its origin; its size is not recorded
    other, _ = load_user_data(train, test, text_column="review", label_column="sentiment")
    with pytest.raises(ValueError, match="must share one task"):
        describe_data(tr, other)


@needs_data
def test_describe_data_of_an_lm_bff_split():
    record = describe_data(
        load_task("RTE", DATA, "train", seed=13), load_task("RTE", DATA, "test", seed=13)
    )
    assert record["test_rows"] == 277 and "rows" not in record  # the training rows are not recorded
    assert record["test_class_counts"] == {"entailment": 146, "not_entailment": 131}
    assert (
        record["format"],
        record["text_column"],
        record["text_pair_column"],
        record["label_column"],
    ) == ("tsv", "sentence1", "sentence2", -1)
    assert record["label_words"] == ["Yes", "No"] and record["pair"]


# ---------------------------------------------------------------------------------------------------------------
# A sentiment CSV built from the real SST-5 files


def _count_sst5(path: Path) -> Counter:
    """Independently of the helper: (text, sentiment) per binary row of an SST-5 original TSV."""
    counts = Counter()
    with path.open(encoding="utf-8") as f:
        for line in f:
            label, text = line.rstrip("\n").split("\t")
            if label != "2":
                text = text.strip().replace("-lrb-", "(").replace("-rrb-", ")")
                counts[text, "negative" if int(label) < 2 else "positive"] += 1
    return counts


@needs_data
def test_sentiment_csv_from_sst5(tmp_path):
    src = DATA / "sst-5" / "original"
    train_path, test_path = write_sentiment_csv(src, tmp_path, train_rows=1000, seed=0)
    assert train_path.read_text(encoding="utf-8").startswith("review,sentiment\n")
    tr, te = load_user_data(
        train_path,
        test_path,
        text_column="review",
        label_column="sentiment",
        label_words="negative=terrible,positive=great",
    )
    assert tr.task.label_names == ("negative", "positive") and tr.task.label_words == (
        "terrible",
        "great",
    )
    assert len(tr) == 1000 and tr.class_counts() == {"negative": 500, "positive": 500}
    expected_test = _count_sst5(src / "test.tsv")
    by_class = Counter()
    for (_, sentiment), n in expected_test.items():
        by_class[sentiment] += n
    assert by_class == {"negative": 912, "positive": 909}  # SST-2's test set: 1821 sentences
    assert len(te) == 1821 and te.class_counts() == dict(by_class)
    got_test = Counter(zip(te.texts, (te.task.label_names[y] for y in te.labels.tolist())))
    assert (
        got_test == expected_test
    )  # every sentence survives the CSV quoting (4544 train lines hold commas)
    source_train = _count_sst5(src / "train.tsv")
    got_train = Counter(zip(tr.texts, (tr.task.label_names[y] for y in tr.labels.tolist())))
    assert all(source_train[key] >= n for key, n in got_train.items())
    assert any("," in t for t in tr.texts) and any("(" in t for t in te.texts)
    # seeded: the same seed writes the same bytes, another seed another sample
    again = write_sentiment_csv(src, tmp_path / "again", train_rows=1000, seed=0)
    other = write_sentiment_csv(src, tmp_path / "other", train_rows=1000, seed=1)
    assert again[0].read_bytes() == train_path.read_bytes() != other[0].read_bytes()
    assert other[1].read_bytes() == test_path.read_bytes()
    with pytest.raises(ValueError, match=r"train_rows must be an even int in \[2, 6620\]"):
        write_sentiment_csv(src, tmp_path / "odd", train_rows=999)


# ---------------------------------------------------------------------------------------------------------------
# A private run's training file: declared classes, the domain rule (rows dropped, never refused)


def test_declared_classes_never_come_from_the_training_file(tmp_path):
    # Before: the classes were the training file's labels (one "neutral" row made a third class),
    # and label_words that did not cover a training label refused the file: both decided by one
    # private row.
    train = _write(tmp_path / "tr.csv", "text,label\ngood,pos\nbad,neg\nso-so,neutral\n")
    test = _write(tmp_path / "te.csv", "text,label\nfine,pos\nawful,neg\n")
    kwargs = dict(text_column="text", label_column="label", declared=True, test_public=True)
    by_test, _ = load_user_data(train, test, **kwargs)
    by_words, _ = load_user_data(
        train, test, label_words="neg=terrible,pos=great,other=odd", **kwargs
    )
    by_list, te = load_user_data(train, test, labels="pos,neg", **kwargs)
    assert by_test.task.label_names == ("neg", "pos")  # a public test file's labels, sorted
    # a private test file's labels are not public either: classes declared, or refused
    with pytest.raises(ValueError, match="classes of a private run must be declared"):
        load_user_data(train, test, **{**kwargs, "test_public": False})
    with pytest.raises(ValueError, match="classes of a private run must be declared"):
        load_user_data(train, None, **kwargs)
    assert by_words.task.label_names == (
        "neg",
        "pos",
        "other",
    )  # declared: a class no training row holds is kept
    assert by_list.task.label_names == ("pos", "neg") and by_list.labels.tolist() == [0, 1]
    assert te.task is by_list.task and te.labels.tolist() == [0, 1]
    assert (
        by_test.texts == ["good", "bad"] and by_test.dropped == 1
    )  # the "neutral" row is dropped, counted
    with pytest.raises(
        ValueError, match=r"labels must name the classes of label_words, in the same order"
    ):
        load_user_data(
            train, test, labels="pos,neg", label_words="neg=terrible,pos=great", **kwargs
        )
    with pytest.raises(
        ValueError,
        match=r"labels of te.csv must be among \['pos', 'other'\] \(the classes of "
        r"labels\); found 'neg'",
    ):
        load_user_data(
            train, test, labels="pos,other", **kwargs
        )  # the public test file is still read strictly


def test_the_domain_rule_drops_rows_a_plain_read_refuses(tmp_path):
    # Each of these rows is refused (ValueError naming its line) when the file is read for a
    # non-private run; a private run's training file drops them instead, so no refusal depends on
    # one row.
    bad_rows = {
        "empty text": ",pos\n",
        "empty label": "meh,\n",
        "too few fields": "lonely\n",
        "too many fields": "a,b,pos\n",
        "unknown label": "hmm,maybe\n",
    }
    test = _write(tmp_path / "te.csv", "text,label\nfine,pos\nawful,neg\n")
    for what, row in bad_rows.items():
        train = _write(tmp_path / "tr.csv", "text,label\ngood,pos\n" + row + "bad,neg\n")
        if what != "unknown label":  # (a non-private read takes its classes from the training file)
            with pytest.raises(ValueError, match="tr.csv line 3"):
                load_user_data(train, test, text_column="text", label_column="label")
        tr, _ = load_user_data(
            train, test, text_column="text", label_column="label", declared=True, test_public=True
        )
        assert (tr.texts, tr.labels.tolist(), tr.dropped) == (["good", "bad"], [1, 0], 1), what
    # JSON lines: a line that is not JSON, a missing key, a null and a nested value are dropped;
    # bytes that are not UTF-8 become U+FFFD (the row is kept); a file left with no row gives an
    # empty training set, not a refusal.
    jsonl = tmp_path / "tr.jsonl"
    jsonl.write_bytes(
        b'{"text": "good", "label": "pos"}\nnot json\n{"text": "x"}\n{"text": null, "label": "neg"}\n'
        b'{"text": ["a"], "label": "neg"}\n{"text": "caf\xe9", "label": "neg"}\n'
    )
    test_jsonl = _write(
        tmp_path / "te.jsonl", '{"text": "fine", "label": "pos"}\n{"text": "bad", "label": "neg"}\n'
    )
    tr, _ = load_user_data(
        jsonl, test_jsonl, text_column="text", label_column="label", declared=True, test_public=True
    )
    assert (tr.texts, tr.labels.tolist(), tr.dropped) == (["good", "caf\ufffd"], [1, 0], 4)
    empty = _write(tmp_path / "empty.csv", "text,label\n")
    tr, _ = load_user_data(
        empty, test, text_column="text", label_column="label", declared=True, test_public=True
    )
    assert len(tr) == 0 and tr.dropped == 0
    # What is decided by the file's structure, not by a row, is still refused: a header without the
    # column.
    reviews = _write(tmp_path / "reviews.csv", "review,label\nfine,pos\nawful,neg\n")
    with pytest.raises(ValueError, match=r"column 'review' is not in the header of tr.csv"):
        load_user_data(
            train,
            reviews,
            text_column="review",
            label_column="label",
            declared=True,
            test_public=True,
        )


def test_without_a_header_no_row_sets_the_rule_for_the_others(tmp_path):
    # Before: rows were held to the first row's width, so one odd first row dropped every other row
    # (or, as a first line that is not JSON, raised TypeError): one row decided the rest. Now each
    # row is judged alone.
    body = "".join(f"sentence {i},{i % 2}\n" for i in range(6))
    test = _write(tmp_path / "te.csv", "fine,1\nawful,0\n")
    for first, kept in (("", 6), ("a canary,1,x\n", 7), ("lonely\n", 6)):
        train = _write(tmp_path / "tr.csv", first + body)
        tr, _ = load_user_data(
            train, test, text_column=0, label_column=1, declared=True, test_public=True
        )
        assert (len(tr), tr.dropped) == (kept, 7 - kept if first else 0), first
    train = _write(tmp_path / "tr.csv", "a canary,1,x\n" + body)
    with pytest.raises(
        ValueError, match="tr.csv line 2 has 2 fields, fewer than the first row's 3"
    ):
        load_user_data(
            train, test, text_column=0, label_column=1
        )  # a non-private read still uses that width
    arrays = "".join(json.dumps([f"s {i}", str(i % 2)]) + "\n" for i in range(6))
    test_jsonl = _write(tmp_path / "te.jsonl", '["fine", "1"]\n["awful", "0"]\n')
    for first, dropped in (('["canary", "1", "x"]\n', 0), ("not json\n", 1)):
        tr, _ = load_user_data(
            _write(tmp_path / "tr.jsonl", first + arrays),
            test_jsonl,
            text_column=0,
            label_column=1,
            declared=True,
            test_public=True,
        )
        assert (len(tr), tr.dropped) == (6 + 1 - dropped, dropped), first


def test_a_row_that_cannot_be_read_is_dropped_not_refused_and_a_long_field_is_one_record(tmp_path):
    # Each of these raised past the domain rule before (csv.Error, a JSON integer over Python's 4300
    # digits, JSON nested past Python's recursion limit, decimal.InvalidOperation from a label's
    # exponent): a refusal decided by one row. A field over csv's size limit is read whole now:
    # catching csv's error instead had left the reader inside a quoted field that spans lines, so
    # the rest of that field became records of its own (a review found one replaced record turning
    # into 3 records, 1 of them kept).
    test = _write(tmp_path / "te.csv", "text,label\nfine,1\nawful,0\n")
    body = "".join(f"sentence {i},{i % 2}\n" for i in range(4))
    long_field = (
        '"' + "x" * 150_000 + "\nwhat,1\n" + "y" * 150_000 + '",1\n'
    )  # one record over three lines
    for what, row, kept in (
        ("a quoted field of 300k characters over 3 lines", long_field, 5),
        ("a label's huge exponent", "odd,0e-99999999999999999999\n", 4),
    ):
        train = _write(tmp_path / "tr.csv", "text,label\n" + row + body)
        tr, _ = load_user_data(
            train, test, text_column="text", label_column="label", declared=True, test_public=True
        )
        assert (len(tr), tr.dropped) == (kept, 5 - kept), what
        if kept == 5:
            assert (
                len(tr.texts[0]) == 300_008 and csv.field_size_limit() == 131072
            )  # one text; the limit restored
            assert (
                load_user_data(train, test, text_column="text", label_column="label")[0].texts
                == tr.texts
            )
    jsonl = _write(
        tmp_path / "tr.jsonl",
        '{"text": "odd", "label": '
        + "9" * 5000
        + "}\n"
        + '{"text": "deep", "label": '
        + "[" * 100_000
        + "]" * 100_000
        + "}\n"
        + "".join(json.dumps({"text": f"s {i}", "label": i % 2}) + "\n" for i in range(4)),
    )
    test_jsonl = _write(
        tmp_path / "te.jsonl", '{"text": "fine", "label": 1}\n{"text": "bad", "label": 0}\n'
    )
    tr, _ = load_user_data(
        jsonl, test_jsonl, text_column="text", label_column="label", declared=True, test_public=True
    )
    assert (len(tr), tr.dropped) == (4, 2)
    assert (
        canonical_label("0e-99999999999999999999") == "0e-99999999999999999999"
    )  # kept as text, not raised
