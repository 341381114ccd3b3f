"""dpnc: differentially private optimization of nonconvex and nonsmooth objectives."""

__version__ = "0.1.0"

__all__ = ["ALGORITHMS", "Budget", "Setting", "ZCDP", "fix_model", "make_private", "__version__"]


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
