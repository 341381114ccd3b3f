"""The tasks of dpnc.lm.data (labels, label words, prompt templates) and TextDataset, on the real
LM-BFF rows and on small ones. Reading the task folders is tests/lm/test_lmbff.py's."""

from __future__ import annotations

import pytest
import torch

from dpnc.lm.data import TASKS, Task, TextDataset, get_task
from dpnc.lm.lmbff import load_task
from tests.shared_data import DATA, needs_data

PROMPTS = {
    "SST-2": (
        "with outtakes in which most of the characters forget their lines and just utter ` uhhh , ' which is better "
        "than most of the writing in the movie It was terrible.",
        0,
    ),
    "SST-5": (
        "more of the same from taiwanese auteur tsai ming-liang , which is good news to anyone who 's fallen under "
        "the sweet , melancholy spell of this unique director 's previous films . It was good.",
        3,
    ),
    "TREC": ("Location: What city is served by Tempelhol Airport ?", 4),
    "RTE": (
        "In 2003, Yunus brought the microcredit revolution to the streets of Bangladesh to support more than 50,000 "
        "beggars, whom the Grameen Bank respectfully calls Struggling Members? Yes, yunus supported more than 50,000 "
        "Struggling Members.",
        0,
    ),
    "SNLI": (
        "A group of young boys in blue swimming suits attempt to jump into a pool to their swimming instructors? No, "
        "the boys are playing in the grass.",
        2,
    ),
    "MNLI": ("That's all right? Yes, that's fine.", 0),
}


@needs_data
@pytest.mark.parametrize("task", list(PROMPTS))
def test_prompt_of_first_training_example(task):
    ds = load_task(task, DATA, "train", seed=42)
    expected, label = PROMPTS[task]
    assert int(ds.labels[0]) == label
    assert ds.task.prompt(ds.texts[0], label) == expected
    assert ds.prompts(label)[0] == expected


def test_task_table_matches_the_papers():
    assert list(TASKS) == ["SST-2", "SST-5", "TREC", "RTE", "SNLI", "MNLI"]
    assert TASKS["SST-2"].label_words == ("terrible", "great")
    assert TASKS["SST-5"].label_words == ("terrible", "bad", "okay", "good", "great")
    assert TASKS["TREC"].label_words == (
        "Description",
        "Entity",
        "Expression",
        "Human",
        "Location",
        "Number",
    )
    assert TASKS["RTE"].label_names == ("entailment", "not_entailment")
    assert TASKS["RTE"].label_words == ("Yes", "No")
    for name in ("SNLI", "MNLI"):
        assert TASKS[name].label_names == ("entailment", "neutral", "contradiction")
        assert TASKS[name].label_words == ("Yes", "Maybe", "No")
    assert [t.pair for t in TASKS.values()] == [False, False, False, True, True, True]


def test_prompts_input_text_and_parts():
    sst2, trec, rte = TASKS["SST-2"], TASKS["TREC"], TASKS["RTE"]
    assert sst2.prompt("a gorgeous film", 1) == "a gorgeous film It was great."
    assert TASKS["SST-5"].prompts("ok") == [
        f"ok It was {w}." for w in ("terrible", "bad", "okay", "good", "great")
    ]
    assert trec.prompt("Who wrote Hamlet ?", 3) == "Human: Who wrote Hamlet ?"
    assert (
        rte.prompt(("It rained.", "The ground is wet."), 1) == "It rained? No, the ground is wet."
    )
    assert sst2.parts("a film") == ("a film It was ", ".")
    assert rte.parts(("It rained.", "The ground is wet.")) == (
        "It rained? ",
        ", the ground is wet.",
    )
    assert sst2.input_text("a film , really") == "a film , really It was."
    assert trec.input_text("Who wrote Hamlet ?") == "Who wrote Hamlet ?"
    assert rte.input_text(("It rained.", "The ground is wet.")) == "It rained? the ground is wet."
    assert sst2.input_text("a film", mask="<mask>") == "a film It was <mask>."
    assert trec.input_text("Who ?", mask="<mask>") == "<mask>: Who ?"
    for task, text in ((sst2, "x y"), (trec, "Who ?"), (rte, ("A b.", "C d."))):
        before, after = task.parts(text)
        assert all(
            task.prompt(text, c) == before + w + after for c, w in enumerate(task.label_words)
        )


def test_premise_filters():
    """drop_punct (default) drops only punctuation; drop_last is LM-BFF's unconditional
    *sent-_0*."""
    rte = TASKS["RTE"]
    assert (
        rte.prompt(("That's all right", "That's fine."), 0) == "That's all right? Yes, that's fine."
    )
    assert rte.prompt(("Is it?", "Yes."), 0) == "Is it? Yes, yes."
    lmbff = Task(
        "x",
        ("a", "b"),
        ("Yes", "No"),
        True,
        "{sentence1|drop_last}? {label_word}, {sentence2|lower_first}",
    )
    assert (
        lmbff.prompt(("That's all right", "That's fine."), 0)
        == "That's all righ? Yes, that's fine."
    )
    assert (
        lmbff.prompt(("That's all right.", "That's fine."), 1)
        == "That's all right? No, that's fine."
    )


def test_prompt_rejects_bad_input():
    with pytest.raises(ValueError, match=r"label must be a class id in \[0, 1\] for SST-2; got 2"):
        TASKS["SST-2"].prompt("x", 2)
    with pytest.raises(ValueError, match="sentence-pair task"):
        TASKS["RTE"].prompt("only one", 0)
    with pytest.raises(ValueError, match="single-sentence task"):
        TASKS["SST-2"].prompt(("a", "b"), 0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"label_names": ("a",)}, "at least 2 classes"),
        ({"label_names": ("a", "a")}, "distinct"),
        ({"label_words": ("x",)}, "one word per class"),
        ({"template": "{sentence} It was."}, r"exactly one \{label_word\}"),
        ({"template": "{label_word} {label_word} {sentence}"}, r"exactly one \{label_word\}"),
        ({"template": "It was {label_word}."}, r"must contain \{sentence\}"),
        ({"template": "{sentence1} {label_word}"}, r"must be among \{sentence\}, \{label_word\}"),
        ({"template": "{sentence|shout} {label_word}"}, "filter must be one of"),
        ({"template": "{sentence} {label_word} {"}, "stray brace"),
    ],
)
def test_task_validation(kwargs, message):
    args = {
        "name": "t",
        "label_names": ("a", "b"),
        "label_words": ("x", "y"),
        "pair": False,
        "template": "{sentence} {label_word}",
    } | kwargs
    with pytest.raises(ValueError, match=message):
        Task(**args)


def test_get_task_is_case_insensitive():
    for alias in ("sst-2", "SST2", "sst_2", "Sst-2"):
        assert get_task(alias) is TASKS["SST-2"]
    assert get_task("sst-5") is TASKS["SST-5"] and get_task("trec") is TASKS["TREC"]
    assert get_task("mnli") is TASKS["MNLI"]
    with pytest.raises(
        ValueError, match=r"task must be one of \['SST-2', 'SST-5', 'TREC', 'RTE', 'SNLI', 'MNLI'\]"
    ):
        get_task("CoLA")


def test_dataset_subset_and_counts():
    ds = TextDataset(TASKS["SST-2"], ["a", "b", "c", "d"], torch.tensor([0, 1, 1, 1]), "mem")
    assert len(ds) == 4 and ds[1] == ("b", 1)
    assert ds.class_counts() == {"0": 1, "1": 3}
    sub = ds.subset([3, 0])
    assert (
        sub.texts == ["d", "a"]
        and sub.labels.tolist() == [1, 0]
        and sub.source == "mem"
        and sub.task is ds.task
    )
    assert ds.subset(slice(1, 3)).texts == ["b", "c"]
    assert ds.subset(torch.tensor([True, False, False, True])).texts == ["a", "d"]
    assert ds.subset(torch.tensor([2])).class_counts() == {"0": 0, "1": 1}
    assert len(ds.subset([])) == 0
    with pytest.raises(IndexError):
        ds.subset([4])
    with pytest.raises(ValueError, match="same length"):
        TextDataset(TASKS["SST-2"], ["a"], torch.tensor([0, 1]), "mem")
