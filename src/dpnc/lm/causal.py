"""Prompt-based classification with a causal language model: each class scored by its label word's
log-probability.

DPZero classifies by letting a language model score the label words in the prompt's slot;
:class:`CausalLMClassifier` does that with a causal LM (by default SmolLM2-135M-Instruct), as the
closure of the zeroth-order and DP-AdamW steps. See docs/finetuning.md."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from pathlib import Path

import torch
from torch import nn

from dpnc.lm.data import Task
from dpnc.lm.heads import EncoderClassifier, read_head
from dpnc.lm.paths import GGUF_DISTRIBUTION, INSTALL_HINT, default_causal_model, saved_base

__all__ = [
    "CONTENT_FREE",
    "GGUF_DISTRIBUTION",
    "INSTALL_HINT",
    "SCORING",
    "CausalLMClassifier",
    "build_causal_classifier",
    "default_causal_model",
    "default_scoring",
    "load_causal_classifier",
    "load_causal_lm",
]

SCORING = ("label", "suffix")
CONTENT_FREE = ("N/A", "", "[MASK]")  # Zhao et al. 2021's content-free inputs
DEFAULT_CHAT = False
DEFAULT_CALIBRATE = True
_MARK = "\x00DPNC\x00"
_PROBE = "Qzq"


# --- the model ------------------------------------------------------------------------------------


def load_causal_lm(model: str | Path | None = None):
    """(causal LM, tokenizer) in float32, eval mode, from a ``.gguf`` file (default
    :func:`default_causal_model`) or a folder written by ``save_pretrained``.

    The GGUF weights are dequantised to dense float32 ``nn.Linear`` layers
    (``GgufConfig(dequantize=True)``: zeroth-order steps perturb them in place, peft wraps them),
    and the loaded model then forgets the quantizer, so that ``save_pretrained`` writes the dense
    weights. The tokenizer pads on the right (:class:`CausalLMClassifier`). Load time of the default
    model: docs/results/lm-zero-shot/README.md."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = default_causal_model() if model is None else Path(model)
    if not path.exists():
        raise FileNotFoundError(
            f"model must be a .gguf file or a local folder with a causal LM (no downloads); "
            f"{str(path)!r} does not exist"
        )
    if path.is_file():
        if path.suffix != ".gguf":
            raise ValueError(f"model must be a .gguf file or a folder; got the file {str(path)!r}")
        if importlib.util.find_spec("gguf") is None:
            raise ValueError(f"loading a .gguf file needs the 'gguf' package: {INSTALL_HINT}")
        dense = {}
        # transformers ≥ 5 can keep GGUF blocks packed (with the `kernels` package): ask for dense weights
        try:
            from transformers import GgufConfig

            dense["quantization_config"] = GgufConfig(dequantize=True)
        except ImportError:  # older versions always dequantise
            pass
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        lm = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32, **dense
        )
        lm.hf_quantizer = (
            None  # the weights are dense now; a quantizer would refuse save_pretrained
        )
        if hasattr(lm.config, "quantization_config"):
            del lm.config.quantization_config
    else:
        tokenizer = AutoTokenizer.from_pretrained(path)
        lm = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    tokenizer.padding_side = "right"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return lm.float().eval(), tokenizer


def default_scoring(task: Task) -> str:
    """``"label"`` when no input text follows the label slot of ``task``'s template, else
    ``"suffix"``."""
    after = task.parts((_PROBE, _PROBE) if task.pair else _PROBE)[1]
    return "suffix" if _PROBE.lower() in after.lower() else "label"


# --- the classifier -------------------------------------------------------------------------------


class CausalLMClassifier(EncoderClassifier):
    """logits_c(x) = log P_LM(label word c | before(x)) − log p̄_c, by a causal LM.

    ``before(x)`` is the filled template up to the label-word slot (``Task.parts``), the label word
    taken with the whitespace in front of it as the tokenizer sees it (``" great"``: one token), a
    multi-token label word scored by the sum of its tokens' log-probabilities, and p̄ the
    contextual-calibration prior. ``model(batch)`` is the per-example cross-entropy of these logits,
    shape (b,): the closure of :class:`dpnc.tier.DPZeroOptimizer` /
    :class:`dpnc.tier.MeZOOptimizer`, as for the encoder heads of :mod:`dpnc.lm.heads`.

    * **One forward pass per example** when every scored continuation is a single token
      (``"label"`` scoring with one-token label words): the next-token distribution at the last
      position of ``before`` scores all classes at once. Otherwise one row per class (b·K rows),
      scored token by token.
    * **Scoring** ``"label"`` scores the label word only; ``"suffix"`` scores
      log P(label word c + the rest of the filled template | before), one row per class.
    * **Padding**: rows are padded on the right and the model gets no attention mask. In a causal
      LM a position attends only to earlier positions, so with right padding every real position
      sees only real tokens and its output is the same as for the row alone (position ids 0…l−1
      are right too); the pads' outputs are never read. This keeps the forward free of
      data-dependent mask handling, so ``torch.func.vmap`` can batch it (``additive_mask`` is not
      needed and is ignored).
    * **Truncation** to ``max_length`` tokens per row cuts the *start* of ``before`` (left
      truncation), never the template's end before the slot (``"It was"``) nor the label word.
    * **Contextual calibration** (``calibrate=True``): p̄ is the label-word distribution
      (renormalised over the K label words) averaged over the content-free inputs
      :data:`CONTENT_FREE` written into the same template, computed once when the classifier is
      built (the buffer ``prior``, saved with it; it depends only on the public model and template,
      never on data).
    * **Chat template** (``chat=True``): the prompt up to the slot is the user turn of the Instruct
      model's chat template and the label word starts the assistant's turn.
    * **LoRA** (:func:`dpnc.lm.trainable.select_trainable`, ``train="lora"``): the adapters replace
      ``q_proj``/``v_proj`` of the Llama backbone in place, which :meth:`logits` runs through
      ``get_decoder()`` / ``get_output_embeddings()``; only the adapters then require grad.

    The LM is ``self.encoder`` (the name :mod:`dpnc.lm.trainable` and the trainer use for the
    backbone); the classifier has no parameters of its own, only the calibration buffer ``prior``
    (K,).

    A batch (``encode``): ``input_ids`` (b, R, L) with R = 1 row per example when every scored
    continuation is a single token, else R = K rows (one per class), right-padded;
    ``attention_mask`` (b, R, L), 1 on real tokens (kept for callers; the model is not given it:
    Padding, above); ``positions``, ``targets``, ``weights`` (b, K, T): class c's score is Σ_t
    weights[t]·log P(targets[t] | the tokens up to positions[t]), positions indexing the example's
    R·L flattened positions (row·L + column); ``labels`` (b,).

    Args:
        lm: a Hugging Face causal LM (``get_decoder()``, ``get_output_embeddings()``), e.g.
            :func:`load_causal_lm`.
        tokenizer: its tokenizer.
        task: the task (label words, template).
        max_length: tokens per row (≥ 8, and room for the chat template and the longest label word).
        scoring: ``"label"`` or ``"suffix"`` (default :func:`default_scoring`).
        chat: wrap the prompt in the tokenizer's chat template (user turn; the label word opens the
            reply).
        calibrate: subtract the content-free prior log p̄ (contextual calibration); False: p̄
            uniform.
    """

    kind = "causal"

    def __init__(
        self,
        lm: nn.Module,
        tokenizer,
        task: Task,
        *,
        max_length: int = 128,
        scoring: str | None = None,
        chat: bool = DEFAULT_CHAT,
        calibrate: bool = DEFAULT_CALIBRATE,
    ) -> None:
        super().__init__(lm, tokenizer, task, max_length=max_length)
        scoring = default_scoring(task) if scoring is None else scoring
        if scoring not in SCORING:
            raise ValueError(f"scoring must be one of {SCORING}; got {scoring!r}")
        for name, flag in (("chat", chat), ("calibrate", calibrate)):
            if not isinstance(flag, bool):
                raise ValueError(f"{name} must be True or False; got {flag!r}")
        self.scoring, self.chat, self.calibrate = scoring, chat, calibrate
        self.pad_id = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        start = (
            tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        )
        if chat:
            if not getattr(tokenizer, "chat_template", None):
                raise ValueError(
                    f"chat=True needs a tokenizer with a chat template; {type(tokenizer).__name__} "
                    "has none"
                )
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": _MARK}], tokenize=False, add_generation_prompt=True
            )
            head, foot = text.split(_MARK)
            self._head, self._foot = self._ids([head, foot])
            self._start = []
        else:
            if start is None:
                raise ValueError(
                    f"the tokenizer {type(tokenizer).__name__} has neither a bos nor an eos token to "
                    "start a prompt whose label word comes first"
                )
            self._head, self._foot, self._start = (
                [],
                [],
                [start],
            )  # start: only when the prefix is empty
        words = max(len(ids) for ids in self._ids([" " + w for w in task.label_words]))
        frame = len(self._head) + len(self._foot) + 1
        if max_length < frame + 2 * words:
            raise ValueError(
                f"max_length must be >= {frame + 2 * words} (chat template {frame - 1} tokens, label "
                f"words up to {words} tokens, with room for the input); got {max_length}"
            )
        self.register_buffer("prior", torch.zeros(task.num_classes))
        if calibrate:
            with torch.no_grad():
                empty = [(t, t) if task.pair else t for t in CONTENT_FREE]
                raw = self.logits(self.encode(empty))
                self.prior.copy_(raw.log_softmax(-1).exp().mean(0).log())

    # --- text → rows ------------------------------------------------------------------------------

    def _ids(self, texts: list[str]) -> list[list[int]]:
        if not texts:
            return []
        return self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]

    def encode(self, texts: list, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """The batch of ``texts`` (str, or (str, str) pairs) with their class ids (default all
        0)."""
        texts = list(texts)
        labels = self.labels_for(texts, labels)
        K = self.task.num_classes
        if not texts:
            z, zk = torch.zeros(0, 1, 1, dtype=torch.long), torch.zeros(0, K, 1, dtype=torch.long)
            return {
                "input_ids": z,
                "attention_mask": z,
                "positions": zk,
                "targets": zk,
                "weights": torch.zeros(0, K, 1),
                "labels": labels,
            }
        prefixes, conts = [], []
        for text in texts:
            before, after = self.task.parts(text)
            prefix, space = re.match(r"(.*?)(\s*)$", before, re.S).groups()
            prefixes.append(prefix)
            conts += [
                space + w + (after if self.scoring == "suffix" else "")
                for w in self.task.label_words
            ]
        bodies, cont_ids = self._ids(prefixes), self._ids(conts)
        one_row = all(len(c) == 1 for c in cont_ids)
        budget = self.max_length - len(self._head) - len(self._foot)
        rows, spans = (
            [],
            [],
        )  # spans: per example, per class (row, first scored position, continuation)
        for i, body in enumerate(bodies):
            cs = cont_ids[i * K : (i + 1) * K]
            cap = budget - min(
                len(body), budget // 2
            )  # continuations keep at least half the budget
            cs = [c[:cap] for c in cs]
            keep = (
                budget if one_row else budget - max(map(len, cs))
            )  # one row holds no continuation
            body = body[max(0, len(body) - keep) :] if body else []
            prompt = self._head + (body if body else self._start) + self._foot
            if one_row:
                rows.append(prompt)
                spans.append([(0, len(prompt) - 1, c) for c in cs])
            else:
                rows += [prompt + c for c in cs]
                spans.append([(c_i, len(prompt) - 1, c) for c_i, c in enumerate(cs)])
        R = 1 if one_row else K
        L = max(map(len, rows))
        T = max(len(c) for s in spans for _, _, c in s)
        b = len(texts)
        input_ids = torch.full((b * R, L), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros(b * R, L, dtype=torch.long)
        for r, row in enumerate(rows):
            input_ids[r, : len(row)] = torch.tensor(row)
            attention_mask[r, : len(row)] = 1
        positions = torch.zeros(b, K, T, dtype=torch.long)
        targets = torch.zeros(b, K, T, dtype=torch.long)
        weights = torch.zeros(b, K, T)
        for i, s in enumerate(spans):
            for c, (row, first, cont) in enumerate(s):
                n = len(cont)
                positions[i, c, :n] = (
                    row * L + first + torch.arange(n)
                )  # index into the example's R·L positions
                targets[i, c, :n] = torch.tensor(cont)
                weights[i, c, :n] = 1.0
        return {
            "input_ids": input_ids.reshape(b, R, L),
            "attention_mask": attention_mask.reshape(b, R, L),
            "positions": positions,
            "targets": targets,
            "weights": weights,
            "labels": labels,
        }

    # --- rows → logits ----------------------------------------------------------------------------

    def logits(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """(b, K): summed log-probabilities of each class's continuation, minus the calibration
        prior."""
        batch = self.on_device(batch)  # encode() builds the rows on the CPU
        ids = batch["input_ids"]
        b, R, L = ids.shape
        # No attention mask: right padding under causal attention (CausalLMClassifier's docstring).
        hidden = self.encoder.get_decoder()(input_ids=ids.reshape(b * R, L)).last_hidden_state
        hidden = hidden.reshape(b, R * L, -1)
        _, K, T = batch["positions"].shape
        index = batch["positions"].reshape(b, K * T, 1).expand(-1, -1, hidden.shape[-1])
        h = hidden.gather(1, index)  # (b, K·T, hidden)
        logp = self.encoder.get_output_embeddings()(h).float().log_softmax(-1)  # (b, K·T, vocab)
        scored = logp.gather(-1, batch["targets"].reshape(b, K * T, 1)).reshape(b, K, T)
        return (scored * batch["weights"].to(scored.dtype)).sum(-1) - self.prior.to(scored.dtype)

    # --- saving -----------------------------------------------------------------------------------

    def head_config(self) -> dict:
        return {
            **super().head_config(),
            "scoring": self.scoring,
            "chat": self.chat,
            "calibrate": self.calibrate,
        }

    # a fine-tuned causal LM is saved as the folder itself: it is the whole scorer
    full_folder = "."

    # save_pretrained: the base class's (LoRA: the peft adapter files on the referenced base LM; the
    # head config and the prior in dpnc_head.json and dpnc_head.safetensors), loadable by
    # load_causal_classifier.


def build_causal_classifier(
    task: Task,
    model: str | Path | None = None,
    *,
    max_length: int = 128,
    scoring: str | None = None,
    chat: bool = DEFAULT_CHAT,
    calibrate: bool = DEFAULT_CALIBRATE,
) -> CausalLMClassifier:
    """A :class:`CausalLMClassifier` on the causal LM ``model`` (default: SmolLM2-135M-Instruct), in
    eval mode."""
    lm, tokenizer = load_causal_lm(model)
    clf = CausalLMClassifier(
        lm, tokenizer, task, max_length=max_length, scoring=scoring, chat=chat, calibrate=calibrate
    )
    clf.base_model = str(Path(default_causal_model() if model is None else model).resolve())
    return clf.eval()


def load_causal_classifier(
    path: str | Path, *, base_model: str | Path | None = None
) -> CausalLMClassifier:
    """A classifier saved by :meth:`CausalLMClassifier.save_pretrained` (LoRA: its adapters on the
    base LM it refers to, found by :func:`dpnc.lm.paths.saved_base`, or ``base_model`` when
    given)."""
    path = Path(path)
    config, state = read_head(path)
    if config.get("kind") != CausalLMClassifier.kind:
        raise ValueError(f"{path} holds a {config.get('kind')!r} head, not a causal one")
    t = config["task"]
    task = Task(
        t["name"], tuple(t["label_names"]), tuple(t["label_words"]), t["pair"], t["template"]
    )
    base = saved_base(path, config, base_model)
    lm, tokenizer = load_causal_lm(path if base is None else base)
    if config.get("encoder") == "peft":
        from peft import PeftModel

        lm = PeftModel.from_pretrained(lm, path)
    clf = CausalLMClassifier(
        lm,
        tokenizer,
        task,
        max_length=config["max_length"],
        scoring=config["scoring"],
        chat=config["chat"],
        calibrate=False,
    )
    clf.calibrate = config["calibrate"]
    result = clf.load_state_dict(state, strict=False)
    missing = [k for k in result.missing_keys if not k.startswith("encoder.")]
    if result.unexpected_keys or missing:
        raise ValueError(
            f"{path} does not hold a causal head: missing {missing}, unexpected "
            f"{result.unexpected_keys}"
        )
    clf.base_model = str((path if base is None else base).resolve())
    return clf.eval()
