"""Sweeps: estimator experiments over feature counts, projections and inputs, and the reproductions built on them.

An experiment kind (:mod:`~rfa.experiments.sweeps.kernel_mse`, :mod:`~rfa.experiments.sweeps.attention_error`,
:mod:`~rfa.experiments.sweeps.estimator_fit`) says what a cell measures; a reproduction (one module each, e.g.
:mod:`~rfa.experiments.sweeps.performer_fig2`) holds its published values and analysis. Both are one registration
in the sweep framework's registry (:mod:`rfa.experiments.sweep_framework.registry`), whose runner
(:func:`rfa.experiments.sweep_framework.runner.run`) runs any sweep config.

Importing this package (or any module of it) registers every shipped kind and reproduction, and gives what a user
of sweeps needs: :func:`run` a sweep config into a workdir, and :class:`Reproduction`, :func:`register_reproduction`,
:class:`ExperimentKind`, :func:`register_experiment_kind` for your own, which then find the shipped kinds::

  from rfa.experiments.sweeps import Reproduction, register_reproduction, run
"""

from rfa.experiments.sweep_framework.registry import (
    ExperimentKind,
    Reproduction,
    register_experiment_kind,
    register_reproduction,
)
from rfa.experiments.sweep_framework.runner import Outputs, run
from rfa.experiments.sweeps import (
    attention_error,
    attention_output_error,
    derf_variance,
    estimator_fit,
    hybrid_angle,
    kernel_mse,
    oprf_variance,
    orthogonal_vs_iid,
    performer_fig2,
    performer_lemma2,
    simplex_geometry,
    which_estimator_wins,
)

KINDS = (kernel_mse, attention_error, estimator_fit)
"""The shipped experiment kinds' modules."""

REPRODUCTIONS = (
    performer_lemma2,
    performer_fig2,
    orthogonal_vs_iid,
    oprf_variance,
    attention_output_error,
    hybrid_angle,
    simplex_geometry,
    which_estimator_wins,
    derf_variance,
)
"""The shipped reproductions' modules, in the order ``rfa reproduce`` runs them."""

__all__ = [
    "KINDS",
    "REPRODUCTIONS",
    "ExperimentKind",
    "Outputs",
    "Reproduction",
    "register_experiment_kind",
    "register_reproduction",
    "run",
]
