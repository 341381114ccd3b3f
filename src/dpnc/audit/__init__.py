"""A built-in privacy audit: empirical ε lower bounds of dpnc's own mechanisms, beside their claims.

``run_audit(mechanism, runs, broken=None)`` runs a mechanism (:mod:`dpnc.audit.mechanisms`) many times on two
neighbouring datasets that differ in an adversarial canary, scores every run with what an adversary who
knows all public randomness can compute, and turns a threshold test into an ε lower bound with
Clopper–Pearson intervals (:mod:`dpnc.audit.stats`). ``dpnc audit <mechanism>`` is the command.

``SelfAudit`` (:mod:`dpnc.audit.self_audit`) is the other kind: one training run audits itself with canaries and
the one-run bound of :mod:`dpnc.audit.one_run` (``make_private(..., audit=SelfAudit(...))``).

Names are loaded on first use (PEP 562), so the command line does not import torch until it runs an audit.
"""

import importlib

_EXPORTS = {
    "core": ["AuditResult", "run_audit", "summary_markdown"],
    "mechanisms": ["BROKEN", "MECHANISMS", "Mechanism"],
    "one_run": ["OneRunResult", "one_run_audit"],
    "self_audit": ["SelfAudit", "SelfAuditResult"],
    "stats": ["ThresholdTest", "clopper_pearson_upper", "epsilon_lower_bound", "split_threshold_test"],
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name in _MODULE_OF:
        return getattr(importlib.import_module(f"dpnc.audit.{_MODULE_OF[name]}"), name)
    raise AttributeError(f"module 'dpnc.audit' has no attribute {name!r}")


def __dir__():
    return __all__
