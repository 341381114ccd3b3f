"""Language-model fine-tuning: text-classification data and prompts (``data``)."""

from dpnc.lm.data import TASKS, Task, TextDataset, get_task, load_file, load_task

__all__ = ["TASKS", "Task", "TextDataset", "get_task", "load_file", "load_task"]

# Heads on sentence encoders (``heads``) and the fine-tuning trainer (``train``).
from dpnc.lm.heads import EncoderClassifier, LinearHead, PromptHead, build_classifier, label_prompts, load_classifier
from dpnc.lm.train import METHODS, FinetuneConfig, Trainer, finetune, per_example_clipped_sum

__all__ += ["EncoderClassifier", "FinetuneConfig", "LinearHead", "METHODS", "PromptHead", "Trainer",
            "build_classifier", "finetune", "label_prompts", "load_classifier", "per_example_clipped_sum"]
