"""A built-in privacy audit: empirical ε lower bounds of dpnc's own mechanisms, beside their claims.

:func:`run_audit` (``dpnc audit <mechanism>``) runs a mechanism many times on two neighbouring
datasets; ``SelfAudit`` (:mod:`dpnc.self_audit`) lets one training run audit itself.
See docs/audit.md. Names are loaded on first use (PEP 562), so the command line does not import
torch until it runs an audit."""

import importlib

_EXPORTS = {
    "core": ["AuditResult", "run_audit", "summary_markdown"],
    "mechanisms": ["BROKEN", "MECHANISMS", "Mechanism"],
    "dpnc.privacy.one_run": [
        "OneRunResult",
        "one_run_audit",
    ],  # below make_private, which attaches canaries
    "dpnc.self_audit": ["SelfAudit", "SelfAuditResult"],
    "stats": [
        "ThresholdTest",
        "clopper_pearson_upper",
        "epsilon_lower_bound",
        "split_threshold_test",
    ],
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name in _MODULE_OF:
        module = _MODULE_OF[name]
        return getattr(
            importlib.import_module(module if "." in module else f"dpnc.audit.{module}"), name
        )
    raise AttributeError(f"module 'dpnc.audit' has no attribute {name!r}")


def __dir__():
    return __all__
