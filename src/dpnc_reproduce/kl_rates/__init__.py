"""Menart et al. under the KL condition: excess risk against n√ρ/√d, every algorithm, several κ.

The paper's first experiment (it is theory only): KL-Spider, adaptive GD with and without selection
and the proximal point method on data-free objectives of known (γ, κ), each rate judged one-sided as
the upper bound it is. See docs/menart.md ("Reproduction: the rates"); runs: :mod:`.run`; judging:
:mod:`.report`."""

from dpnc_reproduce.kl_rates.experiment import EXPERIMENT, KLRates
from dpnc_reproduce.kl_rates.run import FULL, QUICK, KLRatesConfig, KLRow, KLTask

__all__ = ["EXPERIMENT", "KLRates", "FULL", "QUICK", "KLRatesConfig", "KLRow", "KLTask"]
