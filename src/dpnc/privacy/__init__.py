"""Privacy core: budgets, releases (data), the accountant and its interpreter, calibration, secret
noise, tree aggregation, clipping (the one clipped sum) and the private mean (the one release
step).

This package imports nothing else from dpnc. Names are loaded on first use (PEP 562), so that
accounting alone (``dpnc account``) does not pay for importing torch.
"""

import importlib

_EXPORTS = {
    "accountant": [
        "METHODS",
        "Accountant",
        "PrivacyReport",
        "new_partition",
        "quiet_dp_accounting",
    ],
    "budget": [
        "Budget",
        "ZCDP",
        "check_delta",
        "check_epsilon",
        "check_rho",
        "epsilon_to_rho",
        "rho_to_epsilon",
        "rdp_to_epsilon",
    ],
    "calibrate": [
        "advanced_composition_epsilon",
        "dpzero_sigma",
        "epsilon_for",
        "klt_tree_sigma",
        "noise_multiplier",
        "opacus_noise_multiplier",
        "zcdp_gaussian_sigma",
        "ztc_tree_sigma",
    ],
    "clipping": [
        "Clipped",
        "ClippedTotal",
        "clip_each",
        "clip_scalars",
        "clip_vectors",
        "clipped_sum",
        "per_run",
        "zero_nonfinite",
        "zero_nonfinite_rows",
    ],
    "mechanisms": ["discrete_gaussian_mechanism", "exponential_mechanism", "gaussian_mechanism"],
    "noise": ["NoiseSource"],
    "release": ["PrivateMean", "mean_release", "private_mean", "release_sum"],
    "releases": [
        "DiscreteGaussian",
        "ExponentialMechanism",
        "FixedSize",
        "Gaussian",
        "Mechanism",
        "NonPrivate",
        "Poisson",
        "RandomStopping",
        "Relation",
        "Release",
        "Sampled",
        "Sampling",
        "TreeAggregated",
        "UnsupportedRelease",
        "ZCDPMechanism",
        "mean_sensitivity",
        "tnb_mean",
        "tnb_pmf",
    ],
    "tree": ["TreeMechanism", "TreeNoise", "leaf_participation", "node"],
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name in _MODULE_OF:
        return getattr(importlib.import_module(f"dpnc.privacy.{_MODULE_OF[name]}"), name)
    raise AttributeError(f"module 'dpnc.privacy' has no attribute {name!r}")


def __dir__():
    return __all__
