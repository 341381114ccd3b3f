"""``dpnc predict``: a file or output of an unknown format is a usage error naming its option before
any model loads, and the text columns default to those the run trained on."""

import json

import pytest

from dpnc.cli import app
from dpnc.cli.predict import _run_columns
from dpnc.lm import classifiers
from tests.cli.usage import assert_usage_error, runner


@pytest.mark.parametrize(
    "file, out, option, message",
    [
        (
            "texts.txt",
            None,
            "--file",
            "file must end in .csv, .tsv, .jsonl or .json; got 'texts.txt'",
        ),
        ("texts.csv", "labels.txt", "--out", "out must end in .csv or .jsonl; got 'labels.txt'"),
    ],
)
def test_an_unknown_format_is_a_usage_error_before_the_model_loads(
    file, out, option, message, tmp_path, monkeypatch
):
    def load(*args, **kwargs):
        raise AssertionError("the model loaded before the input was validated")

    monkeypatch.setattr(classifiers, "load_classifier", load)
    (tmp_path / "model").mkdir()
    (tmp_path / file).write_text("text\nfine\n")
    args = ["predict", "--model", str(tmp_path / "model"), "--file", str(tmp_path / file)]
    result = runner.invoke(app, args + ([] if out is None else ["--out", str(tmp_path / out)]))
    assert_usage_error(result, option)
    assert message in result.output


def test_the_text_columns_default_to_the_runs_own(tmp_path):
    run, model = tmp_path / "run", tmp_path / "run" / "model"
    model.mkdir(parents=True)
    assert _run_columns(model) == ("text", None)  # no summary.json: the default column
    data = {"text_column": "premise", "text_pair_column": "hypothesis"}
    (run / "summary.json").write_text(json.dumps({"data": data}))
    assert _run_columns(model) == ("premise", "hypothesis")  # beside model/
    assert _run_columns(run) == ("premise", "hypothesis")  # the run folder itself
    (run / "summary.json").write_text(json.dumps({"data": {"text_column": 0}}))
    assert _run_columns(run) == ("text", None)  # a column by position is not a name
