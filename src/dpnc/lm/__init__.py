"""Language-model fine-tuning: text-classification data and prompts (``data``, ``files``), heads on
sentence encoders (``heads``; a causal LM in ``causal``; either built or loaded by ``classifiers``),
what is trained (``trainable``), the frozen prefix computed once (``cache``) and the fine-tuning
trainer (``train``), with its settings and file names (``config``)."""

from dpnc.lm.cache import PrefixCache
from dpnc.lm.classifiers import build_classifier, load_classifier
from dpnc.lm.config import JOURNAL, METRICS, PRIVATE_STATS, ZO_RECIPES
from dpnc.lm.data import TASKS, Task, TextDataset, get_task
from dpnc.lm.files import describe_data, load_file, load_user_data
from dpnc.lm.heads import EncoderClassifier, LinearHead, PromptHead, label_prompts
from dpnc.lm.lmbff import load_task
from dpnc.lm.train import METHODS, FinetuneConfig, Trainer, finetune, per_example_clipped_sum
from dpnc.lm.trainable import TRAIN_MODES, Trainable, select_trainable

__all__ = [
    "JOURNAL",
    "METRICS",
    "PRIVATE_STATS",
    "ZO_RECIPES",
    "TASKS",
    "Task",
    "TextDataset",
    "describe_data",
    "get_task",
    "load_file",
    "load_task",
    "load_user_data",
    "EncoderClassifier",
    "FinetuneConfig",
    "LinearHead",
    "METHODS",
    "PromptHead",
    "Trainer",
    "build_classifier",
    "finetune",
    "label_prompts",
    "load_classifier",
    "per_example_clipped_sum",
    "PrefixCache",
    "TRAIN_MODES",
    "Trainable",
    "select_trainable",
]
