"""dpnc inside other training frameworks: :mod:`dpnc.integrations.transformers` (a Hugging Face
``Trainer``).

Each integration is a module of its own that imports its framework; this package imports none of
them, so ``import dpnc.integrations`` stays light."""
