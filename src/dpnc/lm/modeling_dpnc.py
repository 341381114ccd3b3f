"""A dpnc text classifier as a Hugging Face model: the encoder, the attention-masked mean of its
last hidden states, L2-normalised (sentence-transformers' pooling), and a linear classifier: dpnc's
linear head, or its prompt head folded into one (W_c = s·e_c, the scaled embedding of class c's
label prompt; b = 0).

dpnc writes this file into a fine-tuned model's folder (``EncoderClassifier.save_pretrained``), where it is the
folder's own code: ``AutoModelForSequenceClassification.from_pretrained(folder,
trust_remote_code=True)`` loads the trained classifier. It imports only torch and transformers.
Without ``trust_remote_code`` the folder is refused (its model type is not one transformers knows),
never loaded with an untrained classifier: a standard ``BertForSequenceClassification`` pools by the
first token, not by the mean, so it cannot hold this classifier."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput


class DpncClassifierConfig(PretrainedConfig):
    """The encoder's configuration (``encoder``, a dict) and the classes (``num_labels``,
    ``id2label``)."""

    model_type = "dpnc-encoder-classifier"

    def __init__(self, encoder: dict | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.encoder = encoder or {}


class DpncForSequenceClassification(PreTrainedModel):
    """logits = W · normalize(mean of the encoder's last hidden states over the attention mask) +
    b."""

    config_class = DpncClassifierConfig
    base_model_prefix = "encoder"

    def __init__(self, config: DpncClassifierConfig) -> None:
        super().__init__(config)
        encoder = dict(config.encoder)
        encoder_config = AutoConfig.for_model(encoder.pop("model_type"), **encoder)
        self.encoder = AutoModel.from_config(encoder_config)
        if getattr(self.encoder, "pooler", None) is not None:
            self.encoder.pooler = None  # mean pooling: the first-token pooler is not used
        self.classifier = nn.Linear(encoder_config.hidden_size, config.num_labels)
        self.post_init()

    def forward(
        self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs
    ):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)
        logits = self.classifier(F.normalize(pooled, dim=-1))
        loss = None if labels is None else F.cross_entropy(logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)
