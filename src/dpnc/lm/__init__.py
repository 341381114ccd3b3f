"""Language-model fine-tuning: text-classification data and prompts (``data``)."""

from dpnc.lm.data import TASKS, Task, TextDataset, get_task, load_file, load_task

__all__ = ["TASKS", "Task", "TextDataset", "get_task", "load_file", "load_task"]
