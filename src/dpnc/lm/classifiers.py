"""Building and loading a classifier: a head of :mod:`dpnc.lm.heads` on a local sentence encoder, or a causal LM
classifier of :mod:`dpnc.lm.causal` (``head="causal"``).

:func:`build_classifier` puts a new head on a model folder; :func:`load_classifier` reads back what
:meth:`~dpnc.lm.heads.EncoderClassifier.save_pretrained` wrote, of either kind. transformers is imported only when a
model is loaded.
"""

from __future__ import annotations

from pathlib import Path

import torch

from dpnc.lm.causal import build_causal_classifier, load_causal_classifier
from dpnc.lm.data import Task
from dpnc.lm.heads import HEAD_FILE, HEADS, EncoderClassifier, LinearHead, PromptHead

__all__ = ["build_classifier", "load_classifier"]


def _load_encoder(model: str | Path):
    from transformers import AutoModel, AutoTokenizer

    path = Path(model)
    if not path.exists():
        raise FileNotFoundError(f"model must be a local folder with a Hugging Face encoder (no downloads); "
                                f"{str(path)!r} does not exist")
    tokenizer = AutoTokenizer.from_pretrained(path)
    encoder = AutoModel.from_pretrained(path, attn_implementation="eager")
    if getattr(encoder, "pooler", None) is not None:
        encoder.pooler = None   # unused (mean pooling): it would only add untrained dimensions to every step
    return encoder.eval(), tokenizer


def build_classifier(model: str | Path, task: Task, *, head: str = "prompt", mode: str | None = None,
                     max_length: int = 128, init: str = "prompts", generator: torch.Generator | None = None,
                     freeze_embeddings: bool = False) -> EncoderClassifier:
    """A head on the encoder in the local folder ``model``, in eval mode (no dropout: spec §7.12); ``head="causal"``:
    a :class:`dpnc.lm.causal.CausalLMClassifier` on the causal LM ``model`` (a folder or ``.gguf`` file).

    ``freeze_embeddings`` leaves the input (word) embeddings out of training (``requires_grad=False``).
    """
    if head not in HEADS:
        raise ValueError(f"head must be one of {HEADS}; got {head!r}")
    if head == "causal":
        return build_causal_classifier(task, model, max_length=max_length)
    encoder, tokenizer = _load_encoder(model)
    if head == "prompt":
        clf = PromptHead(encoder, tokenizer, task, mode=mode, max_length=max_length)
    else:
        clf = LinearHead(encoder, tokenizer, task, init=init, max_length=max_length, generator=generator)
    if freeze_embeddings:
        encoder.get_input_embeddings().requires_grad_(False)
    return clf.eval()


def load_classifier(path: str | Path) -> EncoderClassifier:
    """A classifier saved by :meth:`EncoderClassifier.save_pretrained`."""
    path = Path(path)
    saved = torch.load(path / HEAD_FILE, weights_only=True)
    config = saved["config"]
    if config["kind"] == "causal":
        return load_causal_classifier(path)
    task = Task(config["task"]["name"], tuple(config["task"]["label_names"]), tuple(config["task"]["label_words"]),
                config["task"]["pair"], config["task"]["template"])
    encoder, tokenizer = _load_encoder(path)
    if config["kind"] == "prompt":
        clf = PromptHead(encoder, tokenizer, task, mode=config["mode"], max_length=config["max_length"])
    else:
        clf = LinearHead(encoder, tokenizer, task, max_length=config["max_length"])
    result = clf.load_state_dict(saved["state"], strict=False)
    if result.unexpected_keys or any(not k.startswith("encoder.") for k in result.missing_keys):
        raise ValueError(f"{path / HEAD_FILE} does not fit a {config['kind']} head: missing "
                         f"{[k for k in result.missing_keys if not k.startswith('encoder.')]}, "
                         f"unexpected {result.unexpected_keys}")
    return clf.eval()
