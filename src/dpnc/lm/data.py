"""Text-classification data for prompt-based fine-tuning: tasks, prompts, labelled datasets.

A :class:`Task` holds a task's classes, label words and prompt template, so the LM-BFF benchmarks
(:mod:`dpnc.lm.lmbff`) and a user's own files (:mod:`dpnc.lm.files`) are prompted alike. The
tasks' templates, the template syntax and where the sources disagree: docs/finetuning.md."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import torch

__all__ = ["TASKS", "Task", "TextDataset", "get_task", "recipe_size"]

_PLACEHOLDER = re.compile(r"\{(\w+)(?:\|(\w+))?\}")
_FILTERS = {
    "drop_punct": lambda s: s[:-1] if s and not s[-1].isalnum() and not s[-1].isspace() else s,
    "drop_last": lambda s: s[:-1],
    "lower_first": lambda s: s[:1].lower() + s[1:],
}
_SINGLE_FIELDS = ("sentence",)
_PAIR_FIELDS = ("sentence1", "sentence2")

DEFAULT_TEMPLATE = "{sentence} It was {label_word}."
DEFAULT_PAIR_TEMPLATE = "{sentence1|drop_punct}? {label_word}, {sentence2|lower_first}"


@dataclass(frozen=True)
class Task:
    """A text-classification task: its labels, the paper's label words, and its prompt template.

    Args:
        name: canonical name ("SST-2", "SST-5", "TREC", "RTE", "SNLI", "MNLI") or a user's file
            name.
        label_names: the raw labels as they appear in the files; class id = index.
        label_words: the word the prompt puts in the label slot for each class.
        pair: whether inputs are sentence pairs (premise, hypothesis).
        template: the prompt, with ``{sentence}`` or ``{sentence1}``/``{sentence2}`` and one
            ``{label_word}`` (filters ``|drop_punct``, ``|drop_last``, ``|lower_first``;
            docs/finetuning.md).

    Raises:
        ValueError: empty or repeated label names, label words not one per class, or a template with
            an unknown placeholder or filter, a missing sentence, or not exactly one
            ``{label_word}``.
    """

    name: str
    label_names: tuple[str, ...]
    label_words: tuple[str, ...]
    pair: bool
    template: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "label_names", tuple(str(x) for x in self.label_names))
        object.__setattr__(self, "label_words", tuple(str(x) for x in self.label_words))
        if len(self.label_names) < 2:
            raise ValueError(f"label_names must hold at least 2 classes; got {self.label_names!r}")
        if len(set(self.label_names)) != len(self.label_names):
            raise ValueError(f"label_names must be distinct; got {self.label_names!r}")
        if len(self.label_words) != len(self.label_names):
            raise ValueError(
                f"label_words must give one word per class ({len(self.label_names)}: {self.label_names!r}); "
                f"got {len(self.label_words)}: {self.label_words!r}"
            )
        fields = _PAIR_FIELDS if self.pair else _SINGLE_FIELDS
        found = _PLACEHOLDER.findall(self.template)
        names = [f for f, _ in found]
        allowed = (*fields, "label_word")
        for field, filt in found:
            if field not in allowed:
                kind = "pair" if self.pair else "single-sentence"
                shown = ", ".join("{" + a + "}" for a in allowed)
                raise ValueError(
                    f"template placeholders must be among {shown} for a {kind} task; "
                    f"got {{{field}}} in {self.template!r}"
                )
            if filt and (field == "label_word" or filt not in _FILTERS):
                raise ValueError(
                    f"template filter must be one of {sorted(_FILTERS)} on a sentence placeholder; "
                    f"got {{{field}|{filt}}} in {self.template!r}"
                )
        if names.count("label_word") != 1:
            raise ValueError(
                f"template must contain exactly one {{label_word}}; got {self.template!r}"
            )
        missing = [f for f in fields if f not in names]
        if missing:
            shown = ", ".join("{" + f + "}" for f in missing)
            raise ValueError(f"template must contain {shown}; got {self.template!r}")
        leftover = _PLACEHOLDER.sub("", self.template)
        if "{" in leftover or "}" in leftover:
            raise ValueError(
                f"template has a malformed placeholder (stray brace); got {self.template!r}"
            )

    @property
    def num_classes(self) -> int:
        return len(self.label_names)

    def parts(self, text: str | tuple[str, str]) -> tuple[str, str]:
        """The filled template split at the label-word slot: ``(before, after)``.

        ``prompt(text, label) == before + label_words[label] + after``. ``before`` keeps its
        trailing space (e.g. ``"<sentence> It was "``), which a causal LM scores as part of the
        label word's first token."""
        values = self._values(text)
        before, _, after = _PLACEHOLDER.sub(
            lambda m: (
                "\0" if m.group(1) == "label_word" else _apply(values[m.group(1)], m.group(2))
            ),
            self.template,
        ).partition("\0")
        return before, after

    def prompt(self, text: str | tuple[str, str], label: int) -> str:
        """The input filled into the template with class ``label``'s label word.

        >>> get_task("SST-2").prompt("a gorgeous film", 1)
        'a gorgeous film It was great.'
        >>> get_task("RTE").prompt(("It rained.", "The ground is wet."), 0)
        'It rained? Yes, the ground is wet.'
        """
        label = int(label)
        if not 0 <= label < self.num_classes:
            raise ValueError(
                f"label must be a class id in [0, {self.num_classes - 1}] for {self.name}; got {label}"
            )
        before, after = self.parts(text)
        return before + self.label_words[label] + after

    def prompts(self, text: str | tuple[str, str]) -> list[str]:
        """``prompt(text, c)`` for every class c, in class order."""
        return [self.prompt(text, c) for c in range(self.num_classes)]

    def input_text(self, text: str | tuple[str, str], mask: str | None = None) -> str:
        """The input part of the prompt without any label word, for embedding an input by itself.

        With ``mask`` (e.g. the tokenizer's ``"<mask>"``) the label slot is filled with it: LM-BFF's
        masked-LM input. Without, the slot is removed together with a ``,``/``:``/``;`` directly
        after it (the label word's own separator) and spaces are tidied: SST-2 ``"<s> It was."``,
        TREC ``"<s>"``, NLI ``"<p>? <h>"``."""
        before, after = self.parts(text)
        if mask is not None:
            return before + mask + after
        return (before.rstrip() + re.sub(r"^[,:;]", "", after)).strip()

    def _values(self, text: str | tuple[str, str]) -> dict[str, str]:
        if self.pair:
            if not (
                isinstance(text, tuple | list)
                and len(text) == 2
                and all(isinstance(t, str) for t in text)
            ):
                raise ValueError(
                    f"{self.name} is a sentence-pair task: text must be a (str, str) pair; got {text!r}"
                )
            return {"sentence1": text[0], "sentence2": text[1]}
        if not isinstance(text, str):
            raise ValueError(
                f"{self.name} is a single-sentence task: text must be a str; got {text!r}"
            )
        return {"sentence": text}


def _apply(value: str, filt: str | None) -> str:
    return _FILTERS[filt](value) if filt else value


_NLI_TEMPLATE = DEFAULT_PAIR_TEMPLATE
TASKS: dict[str, Task] = {
    "SST-2": Task("SST-2", ("0", "1"), ("terrible", "great"), False, DEFAULT_TEMPLATE),
    "SST-5": Task(
        "SST-5",
        ("0", "1", "2", "3", "4"),
        ("terrible", "bad", "okay", "good", "great"),
        False,
        DEFAULT_TEMPLATE,
    ),
    "TREC": Task(
        "TREC",
        ("0", "1", "2", "3", "4", "5"),
        ("Description", "Entity", "Expression", "Human", "Location", "Number"),
        False,
        "{label_word}: {sentence}",
    ),
    "RTE": Task("RTE", ("entailment", "not_entailment"), ("Yes", "No"), True, _NLI_TEMPLATE),
    "SNLI": Task(
        "SNLI",
        ("entailment", "neutral", "contradiction"),
        ("Yes", "Maybe", "No"),
        True,
        _NLI_TEMPLATE,
    ),
    "MNLI": Task(
        "MNLI",
        ("entailment", "neutral", "contradiction"),
        ("Yes", "Maybe", "No"),
        True,
        _NLI_TEMPLATE,
    ),
}


def _key(name: str) -> str:
    return re.sub(r"[-_\s]", "", name).lower()


def recipe_size(name: str, k: int) -> int:
    """The public training-set size of a task's k-shot recipe: k examples per class × classes (a
    public bound where a class has fewer than k examples, as TREC's Expression)."""
    return k * get_task(name).num_classes


def get_task(name: str) -> Task:
    """The task called ``name``, case-insensitively and ignoring ``-``/``_`` ("sst-2", "SST2",
    "trec")."""
    for task_name, task in TASKS.items():
        if _key(task_name) == _key(str(name)):
            return task
    raise ValueError(f"task must be one of {list(TASKS)} (case-insensitive); got {name!r}")


@dataclass
class TextDataset:
    """Labelled texts of one task, read from one file.

    Attributes:
        task: the task (labels, label words, template).
        texts: one ``str`` per example, or a ``(str, str)`` pair for pair tasks; surrounding
            whitespace stripped.
        labels: class ids, ``torch.long`` of shape (n,).
        source: the path of the file the rows came from.
        origin: how the rows were read (format, columns; the LM-BFF task, split, seed, k), for a
            run's record (``dpnc.lm.files.describe_data``); kept by ``subset``.
        dropped: rows of the file left out by the domain rule of a private run's training file (a
            label outside the declared classes, an empty text, a row that cannot be read:
            :mod:`dpnc.lm.files`). A statistic of the private data: written only to the private
            statistics, never to a public file.
        dropped_labels: of those, the rows dropped for a label outside the declared classes, by
            label (``{"positive": 400}``): read only by the owner's checks
            (:mod:`dpnc.lm.owner_checks`), never published.
    """

    task: Task
    texts: list
    labels: torch.Tensor
    source: str
    origin: dict = dataclasses.field(default_factory=dict)
    dropped: int = 0
    dropped_labels: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.labels = torch.as_tensor(self.labels, dtype=torch.long).reshape(-1)
        if len(self.texts) != len(self.labels):
            raise ValueError(
                f"texts and labels must have the same length; got {len(self.texts)} and {len(self.labels)}"
            )

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i: int) -> tuple[str | tuple[str, str], int]:
        return self.texts[i], int(self.labels[i])

    def subset(self, index) -> TextDataset:
        """The examples at ``index``: a slice, a sequence or tensor of ints, or a boolean mask."""
        if isinstance(index, slice):
            return TextDataset(
                self.task, self.texts[index], self.labels[index], self.source, self.origin
            )
        idx = torch.as_tensor(index)
        if idx.dtype == torch.bool:
            if idx.shape != (len(self),):
                raise ValueError(
                    f"a boolean index must have shape ({len(self)},); got {tuple(idx.shape)}"
                )
            idx = idx.nonzero().reshape(-1)
        idx = idx.to(torch.long).reshape(-1)
        if len(idx) and not (-len(self) <= int(idx.min()) and int(idx.max()) < len(self)):
            raise IndexError(f"index out of range for a dataset of {len(self)} examples")
        texts = [self.texts[i] for i in idx.tolist()]
        return TextDataset(self.task, texts, self.labels[idx].clone(), self.source, self.origin)

    def class_counts(self) -> dict[str, int]:
        """Examples per class, keyed by label name in class order (classes with no example give
        0)."""
        counts = torch.bincount(self.labels, minlength=self.task.num_classes).tolist()
        return dict(zip(self.task.label_names, counts))

    def prompts(self, label: int) -> list[str]:
        """Every example's prompt filled with class ``label``'s label word."""
        return [self.task.prompt(t, label) for t in self.texts]
