"""dpnc: differentially private optimization of nonconvex and nonsmooth objectives.

The public API is the modules of :data:`PUBLIC_MODULES`: import from them only, the names of their
``__all__``; every other module is the library's inside and may change. The docs, README and the
reproductions (``dpnc_reproduce``) keep to it (``tests/suites/test_public_api.py``)."""

__version__ = "0.1.0"

# The package doors first (each re-exports its parts), then the modules used as a whole.
PUBLIC_MODULES = (
    "dpnc",
    "dpnc.privacy",
    "dpnc.algorithms",
    "dpnc.algorithms.dpzero",
    "dpnc.algorithms.ztc",
    "dpnc.algorithms.klt",
    "dpnc.algorithms.menart",
    "dpnc.problems",
    "dpnc.tier",
    "dpnc.tier.registry",  # where a new optimizer is added
    "dpnc.options",
    "dpnc.lm",
    "dpnc.audit",
    "dpnc.integrations.transformers",
    "dpnc.sampling",
    "dpnc.space",
    "dpnc.certify",
    "dpnc.tune",
    "dpnc.distributed",
    "dpnc.checks",  # the value rules, shared with dpnc_reproduce
)

__all__ = [
    "ALGORITHMS",
    "PUBLIC_MODULES",
    "Budget",
    "Setting",
    "ZCDP",
    "fix_model",
    "make_private",
    "__version__",
]


def __getattr__(name: str):
    # Lazy, so that ``import dpnc.privacy`` does not pull in torch models and the optimizers.
    if name == "make_private":
        from dpnc.engine import make_private

        return make_private
    if name == "fix_model":
        from dpnc.model_fix import fix_model

        return fix_model
    if name in ("Budget", "ZCDP"):
        from dpnc.privacy import budget

        return getattr(budget, name)
    if name == "Setting":
        from dpnc.algorithms.base import Setting

        return Setting
    if name == "ALGORITHMS":
        from dpnc.algorithms.registry import ALGORITHMS

        return ALGORITHMS
    raise AttributeError(f"module 'dpnc' has no attribute {name!r}")
