"""Which parameters a fine-tuning run trains: ``all``, ``bias`` (BitFit), ``top-k`` layers,
``head``, ``lora``.

Zeroth-order progress per step scales like 1/(trained dimension), so *what* is trained decides
whether private zeroth-order fine-tuning moves the model on a CPU in a few thousand steps. The
modes and their defaults: docs/finetuning.md, "What is trained"."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

__all__ = [
    "TRAIN_MODES",
    "Trainable",
    "backbone_layers",
    "frozen_prefix_layers",
    "select_trainable",
]

TRAIN_MODES = ("all", "bias", "top-k", "head", "lora")


@dataclass(frozen=True)
class Trainable:
    """What :func:`select_trainable` chose: public facts about the model (no data in them).

    ``trained``/``total``: scalars that are trained / in the model. (What lies frozen below every
    trained parameter, the part :mod:`dpnc.lm.cache` may compute once, is
    :func:`frozen_prefix_layers`.)"""

    mode: str
    trained: int
    total: int
    top_k: int | None = None
    lora_rank: int | None = None
    lora_targets: tuple[str, ...] | None = None

    def describe(self) -> str:
        extra = {
            "top-k": f" (k = {self.top_k})",
            "lora": f" (rank {self.lora_rank}, {self.lora_targets})",
        }
        return (
            f"training {self.trained:,} of {self.total:,} parameters ({100 * self.trained / self.total:.3g} %): "
            f"{self.mode}{extra.get(self.mode, '')}"
        )


def backbone_layers(backbone: nn.Module) -> nn.ModuleList:
    """The backbone's stack of layers: the first ``nn.ModuleList`` named ``layer`` or ``layers``
    (BERT, Llama)."""
    for name, module in backbone.named_modules():
        if isinstance(module, nn.ModuleList) and name.rsplit(".", 1)[-1] in ("layer", "layers"):
            return module
    raise ValueError(
        f"cannot find the layer stack of a {type(backbone).__name__} (no ModuleList named 'layer' or "
        "'layers'); train='top-k' needs one"
    )


def frozen_prefix_layers(classifier: nn.Module) -> int | None:
    """How many backbone layers lie, with the embeddings, before the first trained parameter (None:
    embeddings are trained or nothing below the layers is frozen in order). Equal to the number of
    layers when only the head (or what follows the layers) is trained."""
    backbone = classifier.encoder
    layers = backbone_layers(backbone)
    first_of = {id(p): i for i, layer in enumerate(layers) for p in layer.parameters()}
    for p in backbone.parameters():
        if p.requires_grad:
            return first_of.get(
                id(p)
            )  # a trained parameter before the layers (embeddings): no prefix
    return len(layers)


def select_trainable(
    classifier: nn.Module,
    mode: str,
    *,
    top_k: int = 1,
    lora_rank: int = 8,
    lora_alpha: float = 16.0,
    lora_targets: tuple[str, ...] | None = None,
    seed: int = 0,
    freeze_embeddings: bool = False,
) -> Trainable:
    """Set ``requires_grad`` of ``classifier``'s parameters for ``mode`` (and wrap its backbone in
    LoRA adapters for ``"lora"``); return what is trained (written to ``summary.json``).

    The zeroth-order and first-order optimizers train exactly the parameters that require grad.
    The modes, for a classifier whose backbone is ``classifier.encoder`` (a stack of layers after
    its embeddings):

    * ``all``: every parameter (the paper's full fine-tuning; DPZero's rate has d in it, or the
      effective rank of the Hessian).
    * ``bias``: every bias of the backbone plus the head (BitFit, Ben Zaken et al. 2022).
    * ``top-k``: the last ``top_k`` layers of the backbone, whatever follows them (final norm,
      pooler) and the head. Everything before, embeddings and the lower layers, is a *frozen
      prefix*: :mod:`dpnc.lm.cache` computes it once per example.
    * ``head``: only the parameters outside the backbone (the linear head's W and b; the prompt
      head's scale).
    * ``lora``: low-rank adapters on the attention projections by the **peft** library, default
      peft's per-architecture choice (BERT ``query``/``value``, Llama ``q_proj``/``v_proj``), plus
      the head. The adapters' initial values come from a public seed (they are part of the public
      initial model); B = 0, so the model starts unchanged.

    "Above a frozen prefix" is judged in the backbone's parameter order (``named_parameters``:
    embeddings, then the layers, then what follows): the prefix is every parameter before the
    first trained one.

    Args:
        classifier: a classifier of :mod:`dpnc.lm.heads` or :mod:`dpnc.lm.causal` (its backbone is
            ``.encoder``).
        mode: one of :data:`TRAIN_MODES`.
        top_k: layers trained by ``"top-k"`` (1 ≤ top_k ≤ the backbone's layers).
        lora_rank, lora_alpha, lora_targets: the ``peft.LoraConfig`` of ``"lora"`` (targets: module
            names; None: peft's default for the architecture).
        seed: public seed of the LoRA adapters' initial values.
        freeze_embeddings: with ``"all"``, leave the input embeddings untrained.

    Raises:
        ValueError: an unknown mode, a ``top_k`` out of range, a non-positive rank, or ``"lora"``
            without peft.
    """
    if mode not in TRAIN_MODES:
        raise ValueError(f"train must be one of {TRAIN_MODES}; got {mode!r}")
    backbone = classifier.encoder
    n_layers = len(backbone_layers(backbone))
    if mode == "top-k" and not (
        isinstance(top_k, int) and not isinstance(top_k, bool) and 1 <= top_k <= n_layers
    ):
        raise ValueError(
            f"top_k must be an integer in [1, {n_layers}] (the backbone's layers); got {top_k!r}"
        )
    if mode == "lora":
        classifier.encoder = backbone = _add_lora(
            backbone, lora_rank, lora_alpha, lora_targets, seed
        )
    in_backbone = {id(p) for p in backbone.parameters()}
    for p in classifier.parameters():
        p.requires_grad_(id(p) not in in_backbone)  # the head: trained in every mode
    if mode == "all":
        backbone.requires_grad_(True)
        if freeze_embeddings:
            backbone.get_input_embeddings().requires_grad_(False)
    elif mode == "bias":
        for name, p in backbone.named_parameters():
            p.requires_grad_(name.rsplit(".", 1)[-1] == "bias")
    elif mode == "top-k":
        top = {
            id(p)
            for layer in backbone_layers(backbone)[n_layers - top_k :]
            for p in layer.parameters()
        }
        params = list(backbone.parameters())
        first = next(i for i, p in enumerate(params) if id(p) in top)
        for i, p in enumerate(params):
            p.requires_grad_(i >= first)  # the top k layers and whatever follows them
    elif mode == "lora":
        for name, p in backbone.named_parameters():
            p.requires_grad_("lora_" in name)
    trained = [p for p in classifier.parameters() if p.requires_grad]
    if not trained:
        raise ValueError(
            f"train={mode!r} leaves no parameter to train in a {type(classifier).__name__}"
        )
    targets = None
    if mode == "lora":
        targets = tuple(sorted(next(iter(backbone.peft_config.values())).target_modules))
    return Trainable(
        mode=mode,
        trained=sum(p.numel() for p in trained),
        total=sum(p.numel() for p in classifier.parameters()),
        top_k=top_k if mode == "top-k" else None,
        lora_rank=lora_rank if mode == "lora" else None,
        lora_targets=targets,
    )


def _add_lora(backbone: nn.Module, rank: int, alpha: float, targets, seed: int) -> nn.Module:
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ValueError("train='lora' needs the peft library: pip install peft") from None
    if not (isinstance(rank, int) and not isinstance(rank, bool) and rank >= 1):
        raise ValueError(f"lora_rank must be an integer >= 1; got {rank!r}")
    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        lora_dropout=0.0,
        bias="none",
        target_modules=list(targets) if targets else None,
    )
    with torch.random.fork_rng(
        devices=[]
    ):  # peft draws lora_A from the global generator: make it public
        torch.manual_seed(seed)
        try:
            return get_peft_model(backbone, config)
        except ValueError as error:
            raise ValueError(
                f"cannot add LoRA adapters to a {type(backbone).__name__}: {error}"
            ) from None
