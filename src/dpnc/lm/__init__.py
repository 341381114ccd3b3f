"""Language-model fine-tuning: text-classification data and prompts (``data``)."""

from dpnc.lm.data import TASKS, Task, TextDataset, get_task, load_task
from dpnc.lm.files import describe_data, load_file, load_user_data

__all__ = ["TASKS", "Task", "TextDataset", "describe_data", "get_task", "load_file", "load_task", "load_user_data"]

# Heads on sentence encoders (``heads``) and the fine-tuning trainer (``train``).
from dpnc.lm.heads import EncoderClassifier, LinearHead, PromptHead, build_classifier, label_prompts, load_classifier
from dpnc.lm.train import METHODS, FinetuneConfig, Trainer, finetune, per_example_clipped_sum

__all__ += ["EncoderClassifier", "FinetuneConfig", "LinearHead", "METHODS", "PromptHead", "Trainer",
            "build_classifier", "finetune", "label_prompts", "load_classifier", "per_example_clipped_sum"]

# What is trained (``trainable``) and the frozen prefix computed once (``cache``).
from dpnc.lm.cache import PrefixCache
from dpnc.lm.trainable import TRAIN_MODES, Trainable, select_trainable

__all__ += ["PrefixCache", "TRAIN_MODES", "Trainable", "select_trainable"]
