"""Classification heads on a Hugging Face sentence encoder: a zero-shot prompt head and a linear
head.

Both expose the one thing the optimizers need, ``model(batch)`` = the per-example cross-entropy,
so the same model serves zeroth-order steps and per-example clipping. What each head scores and
how the label words enter: docs/finetuning.md, "Heads"."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from dpnc.lm.data import Task
from dpnc.lm.paths import public_path

__all__ = [
    "HEADS",
    "PROMPT_MODES",
    "EncoderClassifier",
    "LinearHead",
    "PromptHead",
    "label_prompts",
    "read_head",
]

HEADS = (
    "prompt",
    "linear",
    "causal",
)  # causal: a causal LM scoring the label words (dpnc.lm.causal)
PROMPT_MODES = ("label", "filled")
HEAD_FILE = "dpnc_head.safetensors"  # the head's tensors; its configuration is HEAD_CONFIG
HEAD_CONFIG = "dpnc_head.json"
LEGACY_HEAD_FILE = (
    "dpnc_head.pt"  # config and tensors in one torch file (folders saved before safetensors)
)
INITIAL_SCALE = 20.0  # sentence-transformers' similarity scale (MultipleNegativesRankingLoss)


def label_prompts(task: Task) -> list[str]:
    """The input-independent prompt of every class: the template around an empty input (SST-2: "It
    was great.").

    For pair tasks, whose template needs both sentences, the label word alone.
    """
    if task.pair:
        return list(task.label_words)
    return [" ".join(task.prompt("", c).split()) for c in range(task.num_classes)]


class EncoderClassifier(nn.Module):
    """Base: an encoder, its tokenizer and a task; subclasses define :meth:`logits`.

    A text is embedded as the attention-masked mean of the encoder's last hidden states,
    L2-normalised (sentence-transformers style). ``model(batch)`` is the per-example cross-entropy,
    shape (b,), ``reduction="none"``: the closure of :class:`dpnc.tier.DPZeroOptimizer` /
    :class:`dpnc.tier.MeZOOptimizer`, and what per-example clipping differentiates.

    A *batch* is a dict of tensors with a leading dimension b (``encode`` builds it), so that it can
    be sliced, and vmapped over, example by example.

    Args:
        encoder: a Hugging Face encoder returning ``last_hidden_state`` (e.g.
            ``AutoModel.from_pretrained``).
        tokenizer: its tokenizer.
        task: the task (labels, label words, template).
        max_length: tokens per sequence (longer inputs are truncated); ≥ 8.
    """

    kind = "base"

    def __init__(self, encoder: nn.Module, tokenizer, task: Task, *, max_length: int = 128) -> None:
        super().__init__()
        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 8:
            raise ValueError(f"max_length must be an integer >= 8; got {max_length!r}")
        self.encoder, self.tokenizer, self.task, self.max_length = (
            encoder,
            tokenizer,
            task,
            max_length,
        )
        # Set by per-example gradient code: pass a 4-D additive mask, which vmap can batch (HF's 2-D
        # mask handling branches on the mask's values).
        self.additive_mask = False
        self.cached_layers = (
            0  # set by a dpnc.lm.cache.PrefixCache: the layers its "hidden" inputs have passed
        )
        self.base_model: str | None = (
            None  # the folder (or .gguf file) the encoder was loaded from, when known
        )

    @property
    def device(self) -> torch.device:
        """Where the classifier's weights are (its first parameter or buffer; the CPU if it has
        none)."""
        for t in self.parameters():
            return t.device
        for t in self.buffers():
            return t.device
        return torch.device("cpu")

    def on_device(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` with its tensors on :attr:`device` (those already there unchanged): ``encode``
        and ``tokenize`` build batches on the CPU, while the model may be on a GPU."""
        device = self.device
        return {
            k: v.to(device) if isinstance(v, torch.Tensor) and v.device != device else v
            for k, v in batch.items()
        }

    # --- text → tensors ------------------------------------------------------------------------

    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        enc = self.tokenizer(
            list(texts),
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    def encode(self, texts: list, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """The batch of ``texts`` (str, or (str, str) pairs) with their class ids (default all
        0)."""
        texts = list(texts)
        labels = self.labels_for(texts, labels)
        inputs = (
            self.tokenize([self.input_text(t) for t in texts])
            if texts
            else {
                "input_ids": torch.zeros(0, 1, dtype=torch.long),
                "attention_mask": torch.zeros(0, 1, dtype=torch.long),
            }
        )
        return {**inputs, "labels": labels}

    @staticmethod
    def labels_for(texts: list, labels) -> torch.Tensor:
        """``labels`` as class ids, one per text (all 0 when None): every head's ``encode`` checks
        them here."""
        labels = (
            torch.zeros(len(texts), dtype=torch.long)
            if labels is None
            else torch.as_tensor(labels).long()
        )
        if len(labels) != len(texts):
            raise ValueError(
                f"labels must have one entry per text ({len(texts)}); got {len(labels)}"
            )
        return labels

    def input_text(self, text) -> str:
        """What is embedded as the input x."""
        return text if isinstance(text, str) else " ".join(text)

    # --- tensors → embeddings → losses ---------------------------------------------------------

    def embed(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Attention-masked mean of the last hidden states, L2-normalised: (b, hidden).

        ``inputs`` holds ``input_ids`` and ``attention_mask`` (the whole encoder runs), or a frozen
        prefix's cached output (:mod:`dpnc.lm.cache`): ``hidden`` after the first ``start`` layers
        with its ``attention_mask`` (only the layers above run), or the finished ``embedding``."""
        inputs = self.on_device(inputs)  # e.g. the label prompts, tokenized on the CPU
        if "embedding" in inputs:
            return inputs["embedding"]
        mask = inputs["attention_mask"]
        if "hidden" in inputs:
            hidden = self.run_layers(inputs["hidden"], mask, self.cached_layers)
        else:
            encoder_mask, ids, extra = mask, inputs["input_ids"], {}
            if self.additive_mask:
                additive = (1.0 - mask.to(torch.float32)) * torch.finfo(torch.float32).min
                encoder_mask = additive[:, None, None, :]
                # batch-shaped position (and token type) ids: BERT's default (1, L) buffers make its
                # position embedding one row shared by every example, which the per-layer route
                # cannot split (same values)
                embeddings = getattr(self.encoder, "embeddings", None)
                if hasattr(embeddings, "position_embeddings"):
                    extra["position_ids"] = torch.arange(ids.shape[1], device=ids.device).expand(
                        ids.shape
                    )
                if hasattr(embeddings, "token_type_embeddings"):
                    extra["token_type_ids"] = torch.zeros_like(ids)
            hidden = self.encoder(
                input_ids=ids, attention_mask=encoder_mask, **extra
            ).last_hidden_state
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)
        return F.normalize(pooled, dim=-1)

    def run_layers(
        self,
        hidden: torch.Tensor,
        attention_mask: torch.Tensor,
        start: int,
        stop: int | None = None,
    ) -> torch.Tensor:
        """The encoder's layers ``start``..``stop`` (default: to the last) on ``hidden``;
        ``start=0`` begins with the embeddings of ``hidden`` = token ids. Mirrors
        ``BertModel.forward`` (BERT-family encoders: ``.embeddings``, ``.encoder.layer``); the tests
        check it against the encoder's own forward."""
        from transformers.masking_utils import create_bidirectional_mask

        enc = self.encoder
        if not (hasattr(enc, "embeddings") and hasattr(getattr(enc, "encoder", None), "layer")):
            raise ValueError(
                f"running part of the encoder needs a BERT-family encoder (.embeddings, .encoder.layer); "
                f"got a {type(enc).__name__}"
            )
        device = self.device
        hidden, attention_mask = hidden.to(device), attention_mask.to(device)
        if start == 0 and not hidden.is_floating_point():
            hidden = enc.embeddings(input_ids=hidden)
        mask = create_bidirectional_mask(
            config=enc.config, inputs_embeds=hidden, attention_mask=attention_mask
        )
        for layer in enc.encoder.layer[start:stop]:
            hidden = layer(hidden, mask)
        return hidden

    def logits(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Per-example cross-entropy, shape (b,) (empty for an empty batch)."""
        if batch["labels"].numel() == 0:
            return torch.zeros(0)
        return F.cross_entropy(self.logits(batch), batch["labels"], reduction="none")

    per_example_loss = forward

    @torch.no_grad()
    def predict(self, texts: list, batch_size: int = 64) -> torch.Tensor:
        """The predicted class of each text (argmax of the logits), evaluated ``batch_size`` at a
        time."""
        return self.evaluate(texts, None, batch_size=batch_size)[0]

    @torch.no_grad()
    def predict_proba(self, texts: list, batch_size: int = 64) -> torch.Tensor:
        """The class probabilities of each text (softmax of the logits), shape (len(texts),
        classes)."""
        probs = []
        for start in range(0, len(texts), batch_size):
            batch = self.on_device(self.encode(texts[start : start + batch_size]))
            probs.append(self.logits(batch).float().softmax(-1).cpu())
        return torch.cat(probs) if probs else torch.zeros(0, self.task.num_classes)

    @torch.no_grad()
    def evaluate(
        self, texts: list, labels: torch.Tensor | None, *, batch_size: int = 64, cache=None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(predictions, per-example losses) on ``texts``; the losses are against ``labels`` (0 if
        None).

        ``cache``: a :class:`dpnc.lm.cache.PrefixCache` of ``texts`` (the frozen layers already
        computed)."""
        preds, losses = [], []
        for start in range(0, len(texts), batch_size):
            stop = min(start + batch_size, len(texts))
            lab = (
                torch.zeros(stop - start, dtype=torch.long)
                if labels is None
                else labels[start:stop]
            )
            batch = (
                self.encode(texts[start:stop], lab)
                if cache is None
                else cache.batch(range(start, stop), lab)
            )
            batch = self.on_device(
                batch
            )  # encode() and the cache give the labels (and tokens) on the CPU
            logits = self.logits(batch)
            preds.append(logits.argmax(-1))
            losses.append(F.cross_entropy(logits, batch["labels"], reduction="none"))
        if not preds:
            return torch.zeros(0, dtype=torch.long), torch.zeros(0)
        return torch.cat(preds), torch.cat(losses)

    # --- saving ----------------------------------------------------------------------------------

    def head_config(self) -> dict:
        return {
            "kind": self.kind,
            "max_length": self.max_length,
            "task": {
                "name": self.task.name,
                "label_names": list(self.task.label_names),
                "label_words": list(self.task.label_words),
                "pair": self.task.pair,
                "template": self.task.template,
            },
        }

    # where a whole encoder under a head that is no linear layer is saved: not the folder itself,
    # which would then look like a Hugging Face model of the encoder alone (a causal LM, the whole
    # of its classifier, overrides it)
    full_folder = "encoder"

    def encoder_saved_as(self) -> str:
        """How :meth:`save_pretrained` writes the encoder: ``"base"`` (untrained, and the folder or
        file it was loaded from is known: only a reference to it), ``"peft"`` (peft LoRA adapters:
        ``adapter_config.json`` and ``adapter_model.safetensors``, on the referenced base),
        ``"export"`` (the whole classifier as a Hugging Face model, :mod:`dpnc.lm.modeling_dpnc`,
        where the head is one linear layer: :meth:`classifier_weights`) or ``"full"`` (the encoder
        and its tokenizer in ``encoder/``, a head that is not one linear layer)."""
        if hasattr(self.encoder, "peft_config") and self.base_model is not None:
            return "peft"
        if self.base_model is not None and not any(
            p.requires_grad for p in self.encoder.parameters()
        ):
            return "base"
        return "export" if self.classifier_weights() is not None else "full"

    def classifier_weights(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(W, b) with logits = W·e(x) + b, or None where the head is not one linear layer on
        e(x)."""
        return None

    def save_pretrained(self, path: str | Path) -> Path:
        """The head and what of the encoder differs from its base, in the ecosystem's formats.

        Always ``dpnc_head.json`` (the head's configuration, the base model's public name —
        :func:`~dpnc.lm.paths.public_path` — and how the encoder is saved) and
        ``dpnc_head.safetensors`` (the head's tensors). The encoder (:meth:`encoder_saved_as`):
        nothing for a head-only run (the base is referenced), peft adapter files for LoRA
        (``PeftModel.save_pretrained``); a trained encoder under a linear head (or a prompt head
        folded into one) as a Hugging Face model of the whole classifier with its code
        (:mod:`dpnc.lm.modeling_dpnc`), which
        ``AutoModelForSequenceClassification.from_pretrained(path, trust_remote_code=True)`` loads;
        under another head, in ``encoder/``, so that the folder does not look like a Hugging Face
        classifier it is not. :func:`dpnc.lm.classifiers.load_classifier` reads any of them back.
        """
        from safetensors.torch import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        saved_as = self.encoder_saved_as()
        encoder = self.encoder
        if saved_as == "full" and hasattr(
            encoder, "merge_and_unload"
        ):  # adapters on an unknown base: merged
            encoder = copy.deepcopy(encoder).merge_and_unload()
        if saved_as == "peft":
            encoder.save_pretrained(path)  # the adapters only
        if saved_as == "full":
            encoder.save_pretrained(path / self.full_folder)
            self.tokenizer.save_pretrained(path / self.full_folder)
        if saved_as == "export":
            self._export(encoder, path)
            self.tokenizer.save_pretrained(path)
        head_state = {
            k: v.detach().contiguous().cpu()
            for k, v in self.state_dict().items()
            if not k.startswith("encoder.")
        }
        save_file(head_state, str(path / HEAD_FILE))
        config = {
            **self.head_config(),
            "encoder": saved_as,
            # the base by its public name (an installed package's name, or a folder's base name): a
            # full path would tie the model to this machine and environment, and tell whose they are
            "base_model": None if saved_as in ("full", "export") else public_path(self.base_model),
        }
        (path / HEAD_CONFIG).write_text(json.dumps(config, indent=2))
        return path

    def _export(self, encoder, path: Path) -> None:
        """The classifier as :class:`~dpnc.lm.modeling_dpnc.DpncForSequenceClassification`, saved
        with its code."""
        from dpnc.lm.modeling_dpnc import DpncClassifierConfig, DpncForSequenceClassification

        DpncClassifierConfig.register_for_auto_class()
        DpncForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")
        names = list(self.task.label_names)
        # the encoder's configuration without the folder it was read from (a machine's path;
        # public_path says why)
        encoder_config = {k: v for k, v in encoder.config.to_dict().items() if k != "_name_or_path"}
        config = DpncClassifierConfig(
            encoder=encoder_config,
            num_labels=len(names),
            id2label=dict(enumerate(names)),
            label2id={n: i for i, n in enumerate(names)},
        )
        model = DpncForSequenceClassification(config)
        weight, bias = self.classifier_weights()
        with torch.no_grad():
            model.encoder.load_state_dict(encoder.state_dict())
            model.classifier.weight.copy_(weight)
            model.classifier.bias.copy_(bias)
        model.save_pretrained(path)


def read_head(path: str | Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """(configuration, tensors) of the head saved in the folder ``path`` (also a folder saved before
    safetensors: ``dpnc_head.pt``, whose encoder is always saved whole)."""
    path = Path(path)
    if (path / HEAD_FILE).is_file():
        from safetensors.torch import load_file

        return json.loads((path / HEAD_CONFIG).read_text()), load_file(str(path / HEAD_FILE))
    if (path / LEGACY_HEAD_FILE).is_file():
        saved = torch.load(path / LEGACY_HEAD_FILE, weights_only=True)
        return {**saved["config"], "encoder": "full", "base_model": None}, saved["state"]
    raise FileNotFoundError(
        f"model must be a folder saved by dpnc (a run's model/ folder, holding {HEAD_CONFIG} "
        f"and {HEAD_FILE}); {str(path)!r} holds neither"
    )


class PromptHead(EncoderClassifier):
    """logits_c = s·cos(e(x), e_c): class c scored by the similarity to the embedding of its label
    prompt. It works zero-shot; s is learnable (log-parameterised, initialised to 20).

    * ``"label"`` (default for single-sentence tasks): e_c = e(the template with an empty input),
      e.g. ``"It was great."`` / ``"It was terrible."`` for SST-2, compared with e(x). One encoder
      row per example plus K rows per batch (the prompts are re-embedded at every call, since the
      encoder is being trained). It has the best zero-shot accuracy on SST-2's test split (the
      label word alone and ``"filled"`` score lower; docs/results/lm-zero-shot/README.md).
    * ``"filled"`` (default for pairs): e_c = e(``task.prompt(x, c)``), the input written into the
      paper's template with label word c (§4.2: ``"P? Yes, h"``), compared with
      e(``task.input_text(x)``). Costs (K + 1) encoder rows per example.

    The paper scores label words with RoBERTa's masked-LM head at ``<mask>`` (DPZero §4.2); a
    sentence encoder such as MiniLM has no MLM head, so the label words enter through the embedding
    of their prompt instead.

    Args:
        mode: ``"label"`` (e_c = e(label prompt), input-independent; default for single sentences)
            or ``"filled"`` (e_c = e(task.prompt(x, c)); default for pairs).
        scale: initial s > 0 (learnable, stored as log s).
    """

    kind = "prompt"

    def __init__(
        self,
        encoder,
        tokenizer,
        task: Task,
        *,
        mode: str | None = None,
        scale: float = INITIAL_SCALE,
        max_length: int = 128,
    ) -> None:
        super().__init__(encoder, tokenizer, task, max_length=max_length)
        mode = mode if mode is not None else ("filled" if task.pair else "label")
        if mode not in PROMPT_MODES:
            raise ValueError(f"mode must be one of {PROMPT_MODES}; got {mode!r}")
        if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale must be a finite number > 0; got {scale!r}")
        self.mode = mode
        self.log_scale = nn.Parameter(torch.tensor(math.log(scale)))
        # The label prompts' encoder inputs (a frozen-prefix cache replaces them by their cached
        # form).
        self.label_inputs = self.tokenize(label_prompts(task))

    def input_text(self, text) -> str:
        return (
            self.task.input_text(text)
            if self.mode == "filled"
            else (text if isinstance(text, str) else " ".join(text))
        )

    def encode(self, texts, labels=None):
        batch = super().encode(texts, labels)
        if self.mode == "filled" and len(texts):
            K = self.task.num_classes
            prompts = self.tokenize([p for t in texts for p in self.task.prompts(t)])
            batch["prompt_ids"] = prompts["input_ids"].reshape(len(texts), K, -1)
            batch["prompt_mask"] = prompts["attention_mask"].reshape(len(texts), K, -1)
        return batch

    def logits(self, batch):
        x = self.embed(batch)  # (b, h)
        if self.mode == "label":
            e = self.embed(self.label_inputs)  # (K, h)
            cos = x @ e.T
        else:
            b, K, L = batch["prompt_ids"].shape
            e = self.embed(
                {
                    "input_ids": batch["prompt_ids"].reshape(b * K, L),
                    "attention_mask": batch["prompt_mask"].reshape(b * K, L),
                }
            )
            cos = (e.reshape(b, K, -1) * x.unsqueeze(1)).sum(-1)
        return self.log_scale.exp() * cos

    def head_config(self):
        return {**super().head_config(), "mode": self.mode}

    @torch.no_grad()
    def classifier_weights(self):
        if self.mode != "label":  # the class vectors depend on the input: not one linear layer
            return None
        e = self.embed(self.label_inputs)
        return self.log_scale.exp() * e, torch.zeros(len(e))


class LinearHead(EncoderClassifier):
    """logits = W·e(x) + b on the normalised embedding.

    Initialised by default from the label prompts, so it starts as the prompt head's zero-shot
    classifier and then its class vectors move freely.

    Args:
        init: ``"prompts"`` (W_c = scale·e(label prompt c), b = 0: the prompt head's zero-shot
            classifier) or ``"random"`` (``nn.Linear``'s initialisation, drawn from ``generator``).
        generator: public generator for the random initialisation.
    """

    kind = "linear"

    def __init__(
        self,
        encoder,
        tokenizer,
        task: Task,
        *,
        init: str = "prompts",
        scale: float = INITIAL_SCALE,
        max_length: int = 128,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(encoder, tokenizer, task, max_length=max_length)
        if init not in ("prompts", "random"):
            raise ValueError(f"init must be 'prompts' or 'random'; got {init!r}")
        hidden = int(encoder.config.hidden_size)
        self.linear = nn.Linear(hidden, task.num_classes)
        with torch.no_grad():
            if init == "prompts":
                self.linear.weight.copy_(scale * self.embed(self.tokenize(label_prompts(task))))
                self.linear.bias.zero_()
            else:
                bound = 1 / math.sqrt(hidden)
                gen = generator if generator is not None else torch.Generator().manual_seed(0)
                self.linear.weight.copy_(
                    torch.rand(self.linear.weight.shape, generator=gen) * 2 * bound - bound
                )
                self.linear.bias.copy_(
                    torch.rand(self.linear.bias.shape, generator=gen) * 2 * bound - bound
                )

    def logits(self, batch):
        return self.linear(self.embed(batch))

    def classifier_weights(self):
        return self.linear.weight.detach(), self.linear.bias.detach()
