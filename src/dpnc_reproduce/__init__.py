"""The reproductions, a client of dpnc: one package per reproduced figure or table, each returning
data and writing files separately.

:data:`EXPERIMENTS` names every reproduction on the protocol (:mod:`dpnc_reproduce.protocol`):
``dpnc reproduce`` makes one command of each, and the snapshot tests and docs/cli.md list the same.
A new reproduction is one line here; the library names none."""

from types import MappingProxyType

from dpnc_reproduce import (
    dpzero_dimension,
    dpzero_lm,
    dpzero_synthetic,
    kl_rates,
    nonsmooth_compare,
    nonsmooth_rates,
    utility,
)

EXPERIMENTS = MappingProxyType(
    {
        e.name: e
        for e in (
            dpzero_lm.EXPERIMENT,
            dpzero_dimension.EXPERIMENT,
            dpzero_synthetic.EXPERIMENT,
            kl_rates.EXPERIMENT,
            nonsmooth_compare.EXPERIMENT,
            nonsmooth_rates.EXPERIMENT,
            utility.EXPERIMENT,
        )
    }
)
