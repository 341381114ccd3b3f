"""Frozen layers computed once: the cached output of the encoder's frozen prefix for every example.

Under ``--train top-k`` or ``head`` (:mod:`dpnc.lm.trainable`) every forward pass of a
zeroth-order step, at x + λu and at x − λu, on every batch, would recompute the same frozen layers;
with the cache a step runs only the trained ones. Why caching is not a release: docs/finetuning.md,
"What is trained"."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.nn.utils.rnn import pad_sequence
from tqdm.auto import tqdm

from dpnc.lm.heads import EncoderClassifier
from dpnc.lm.trainable import backbone_layers, frozen_prefix_layers

__all__ = ["PrefixCache", "cacheable_prefix"]


def cacheable_prefix(classifier) -> int:
    """Frozen backbone layers of ``classifier`` that a :class:`PrefixCache` can compute once (0:
    none).

    Needs a BERT-family encoder (``.embeddings``, ``.encoder.layer``: see
    ``EncoderClassifier.run_layers``) and inputs that do not depend on the class (the prompt head's
    ``"filled"`` mode embeds one prompt per class)."""
    encoder = getattr(classifier, "encoder", None)
    if (
        not isinstance(classifier, EncoderClassifier)
        or getattr(classifier, "mode", "label") == "filled"
    ):
        return 0
    if not (hasattr(encoder, "embeddings") and hasattr(getattr(encoder, "encoder", None), "layer")):
        return 0
    return frozen_prefix_layers(classifier) or 0


class PrefixCache:
    """The output of ``classifier``'s first ``layers`` encoder layers for each of ``texts``, each
    computed once.

    A row is, for ``top-k``, the hidden states after the first L − k layers, (tokens, hidden),
    trimmed to the example's own length (a step runs the top k layers, the pooling and the head);
    for ``head``, the finished sentence embedding, (hidden,) (a step runs only the head). Rows are
    kept in memory, never logged, saved or checkpointed.

    Rows are computed when first asked for (the examples of a batch that are not cached yet, in one
    forward pass), or all at once by :meth:`fill`: a short run pays only for the examples it
    touches.

    Args:
        classifier: an :class:`~dpnc.lm.heads.EncoderClassifier` whose encoder's embeddings and
            first ``layers`` layers are frozen (``requires_grad=False``; checked).
        texts: the examples (str, or (str, str) pairs), in dataset order; ``batch(index)`` refers to
            them.
        layers: the frozen prefix, 1 ≤ layers ≤ the encoder's layers (all: the sentence embedding is
            cached).
        batch_size: examples per forward pass while filling the cache.

    Also converts the prompt head's label prompts, so that they too run only the layers above.
    """

    def __init__(self, classifier, texts: Sequence, layers: int, *, batch_size: int = 64) -> None:
        n_layers = len(backbone_layers(classifier.encoder))
        if not (isinstance(layers, int) and 1 <= layers <= n_layers):
            raise ValueError(f"layers must be an integer in [1, {n_layers}]; got {layers!r}")
        self.layers, self.whole, self.batch_size = layers, layers == n_layers, batch_size
        self.texts = list(texts)
        self.rows: list[torch.Tensor | None] = [None] * len(self.texts)
        self.attach(classifier)

    def fill(self, progress: bool = False) -> PrefixCache:
        """Compute every row not cached yet (with a progress bar if asked)."""
        self._ensure(range(len(self.rows)), progress=progress)
        return self

    def _ensure(self, index, progress: bool = False) -> None:
        """Compute the rows of ``index`` not cached yet, ``batch_size`` examples per forward
        pass."""
        missing = [i for i in dict.fromkeys(index) if self.rows[i] is None]
        chunks = range(0, len(missing), self.batch_size)
        if progress:
            chunks = tqdm(
                chunks, desc=f"caching {self.layers} frozen layers", unit="batch", leave=False
            )
        clf = self.classifier
        for start in chunks:
            part = missing[start : start + self.batch_size]
            for i, row in zip(
                part, self._rows(clf.tokenize([clf.input_text(self.texts[i]) for i in part]))
            ):
                self.rows[i] = row

    def attach(self, classifier) -> PrefixCache:
        """Make ``classifier`` read this cache's rows: its label prompts go through the same frozen
        prefix, and a cached ``hidden`` resumes at layer ``layers``. ``classifier`` must have the
        frozen weights the cache was computed with (e.g. a fresh copy of the same model, for a sweep
        over settings that share the cache)."""
        if cacheable_prefix(classifier) < self.layers:
            raise ValueError(
                f"the classifier's first {self.layers} layers must be frozen to read this cache; "
                f"cacheable prefix: {cacheable_prefix(classifier)} layers"
            )
        self.classifier = classifier
        if hasattr(classifier, "label_inputs") and "input_ids" in classifier.label_inputs:
            classifier.label_inputs = self._stack(self._rows(classifier.label_inputs))
        classifier.cached_layers = self.layers  # where the classifier resumes on a cached "hidden"
        return self

    def __len__(self) -> int:
        return len(self.rows)

    @torch.no_grad()
    def _rows(self, inputs: dict) -> list[torch.Tensor]:
        """One cached row per example: its embedding, or its hidden states trimmed to its real
        tokens."""
        clf = self.classifier
        inputs = clf.on_device(inputs)  # tokenized on the CPU; the rows live where the model runs
        mask = inputs["attention_mask"]
        if self.whole:
            return list(clf.embed(inputs))
        hidden = clf.run_layers(inputs["input_ids"], mask, 0, self.layers)
        return [h[m.bool()] for h, m in zip(hidden, mask)]

    def _stack(self, rows: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        if self.whole:
            return {"embedding": torch.stack(rows)}
        hidden = pad_sequence(
            rows, batch_first=True
        )  # zeros after each row's end: masked out below
        lengths = torch.tensor([len(r) for r in rows], device=hidden.device)
        mask = (torch.arange(hidden.shape[1], device=hidden.device) < lengths[:, None]).long()
        return {"hidden": hidden, "attention_mask": mask}

    def batch(self, index, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        """The classifier's batch for the examples ``index`` (ints or a 1-D tensor) with their class
        ``labels``: what ``classifier.encode(texts[index], labels)`` gives, with the frozen prefix
        already applied."""
        index = torch.as_tensor(index, dtype=torch.long).reshape(-1).tolist()
        labels = torch.as_tensor(labels, dtype=torch.long).reshape(-1)
        if len(labels) != len(index):
            raise ValueError(
                f"labels must have one entry per index ({len(index)}); got {len(labels)}"
            )
        self._ensure(index)
        if not index:
            return {
                "input_ids": torch.zeros(0, 1, dtype=torch.long),
                "attention_mask": torch.zeros(0, 1, dtype=torch.long),
                "labels": labels,
            }
        return {**self._stack([self.rows[i] for i in index]), "labels": labels}
