"""Performer Lemma 2: the closed-form MSE of trig, positive and hyperbolic features against Monte Carlo.

Choromanski et al., "Rethinking Attention with Performers", ICLR 2021, Lemma 2. Reproduced when every
cell whose Monte Carlo is meaningful agrees with its closed form within 4 standard errors
(:func:`rfa.experiments.sweeps.kernel_mse.kernel_agreement`).
"""

from __future__ import annotations

from rfa.experiments.sweep_framework.registry import Reproduction, register_reproduction
from rfa.experiments.sweeps.kernel_mse import kernel_agreement

register_reproduction(Reproduction("performer_lemma2", "kernel_mse", kernel_agreement))
