"""What the reproduction tests share: the Hub stays offline, so the runs that fine-tune read the
one-layer MiniLM (tests/small_model.py) from the local cache and never reach for the network."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
