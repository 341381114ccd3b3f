"""``python -m dpnc.cli`` (``torchrun ... -m dpnc.cli finetune ...`` for a data-parallel run)."""

from dpnc.cli import app

app()
